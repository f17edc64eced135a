"""The package's layering, checked on the source by one test that names every offending file at once:
``checks/`` imports no ``callbacks/``; private modules and names stay inside their package; only the demos
import ``testing``; private Lightning state is read only where :data:`PRIVATE_LIGHTNING_ALLOWED` says; no
re-export shims; no machine figures in docstrings; imports point down the :data:`FLOORS`, no circles.
"""

from __future__ import annotations

import ast
import functools
import inspect
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "lightning_recipes"
MODULES = sorted(PACKAGE.rglob("*.py"))
# Files allowed to read private Lightning state, and why (each read is commented in the file too).
PRIVATE_LIGHTNING_ALLOWED = {
    "callbacks/_trainer.py": (
        "the private loop reads of the training-time callbacks, each with a public fallback"
    ),
}
PRIVATE_LIGHTNING = re.compile(
    r"(\b(trainer|fit_loop|epoch_loop|val_loop)\._[a-z]\w*)"
    r"|(getattr\(\s*[\w.]*(trainer|fit_loop|epoch_loop|val_loop)\b[\w.]*\s*,\s*[\"']_[a-z]\w*)"
    r"|(\b(model|pl_module|module)\._trainer\b)"
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


@functools.cache  # read by the layer rules and the import graph
def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, imported names) for every absolute import of lightning_recipes in ``path``, nested too."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.startswith("lightning_recipes"):
                found.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            found += [(a.name, []) for a in node.names if a.name.startswith("lightning_recipes")]
    return found


def _owner_of_private(module: str) -> str | None:
    """The package a private module belongs to (``a.b._c`` -> ``a.b``), or None for a public module."""
    parts = module.split(".")
    for index, part in enumerate(parts):
        if part.startswith("_"):
            return ".".join(parts[:index])
    return None


def _inside(package: str, owner: str) -> bool:
    return package == owner or package.startswith(owner + ".")


def _layer_problems(path: Path) -> list[str]:
    module = _module_name(path)
    package = _package_of(module, path)
    problems = []
    for target, names in _imports(path):
        if _top_part(package) == "checks" and _top_part(target) == "callbacks":
            problems.append(f"checks/ imports {target}")
        owner = _owner_of_private(target)
        if owner is not None and not _inside(package, owner):
            problems.append(f"imports private module {target} from outside {owner}")
        target_package = (
            target if (PACKAGE.parent / target.replace(".", "/")).is_dir() else target.rpartition(".")[0]
        )
        private_names = [n for n in names if n.startswith("_") and n != "__version__"]
        if private_names and not _inside(package, target_package):
            problems.append(f"imports private names {private_names} of {target}")
        if _top_part(target) == "testing" and _top_part(package) not in ("testing", "demos"):
            problems.append(f"imports the testing tools ({target})")
    return problems


def _private_lightning_problems(path: Path) -> list[str]:
    if path.relative_to(PACKAGE).as_posix() in PRIVATE_LIGHTNING_ALLOWED:
        return []
    return [
        f"reads private Lightning state on line {number}: {line.strip()}"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if not line.lstrip().startswith(("#", ">>>", "...")) and PRIVATE_LIGHTNING.search(line.split("#")[0])
    ]


def _reexports_only(source: str) -> bool:
    """True for a module whose code is only imports and ``__all__`` (a shim re-exporting an old path)."""
    code = [
        node
        for node in ast.parse(source).body
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))  # docstrings
    ]

    def is_reexport(node: ast.stmt) -> bool:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return True
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        return all(isinstance(target, ast.Name) and target.id == "__all__" for target in targets)

    return bool(code) and all(is_reexport(node) for node in code)


def _shim_problems(path: Path) -> list[str]:
    if path.name != "__init__.py" and _reexports_only(path.read_text()):
        return ["only re-exports names: import them from where they are defined"]
    return []


# Phrases that tie a figure to the machine it was measured on.
MACHINE_FIGURE = re.compile(r"\b\d+-(?:core|vCPU)\b|\bat load \d+|\bone\s+CPU\s+thread\b")


def _machine_figures(source: str) -> list[str]:
    """The machine-bound phrases in a module's docstrings (module, classes, functions, attributes)."""
    docstrings = [
        inspect.cleandoc(node.value.value)
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ]
    return [match.group(0) for doc in docstrings for match in MACHINE_FIGURE.finditer(doc)]


def _machine_figure_problems(path: Path) -> list[str]:
    found = _machine_figures(path.read_text())
    return [f"docstrings quote machine measurements {found}: move them to benchmarks/RESULTS.md"] * bool(
        found
    )


def test_the_layering_rules_can_fail() -> None:
    assert PRIVATE_LIGHTNING.search('getattr(trainer.fit_loop, "_data_source", None)')
    assert PRIVATE_LIGHTNING.search("trainer._logger_connector.should_update_logs")
    assert PRIVATE_LIGHTNING.search("pl_module._trainer")
    assert not PRIVATE_LIGHTNING.search("trainer.train_dataloader")
    assert _owner_of_private("lightning_recipes.callbacks._norms") == "lightning_recipes.callbacks"
    assert not _inside("lightning_recipes.strategies", "lightning_recipes.callbacks")
    assert _inside("lightning_recipes.callbacks", "lightning_recipes")
    assert _reexports_only('"""Moved."""\nfrom a import b\n\n__all__ = ["b"]\n')
    assert not _reexports_only('"""Defines."""\nfrom a import b\n\nC = b\n')
    found = _machine_figures('"""17 ms on a shared 2-core CPU, 4 s at load 12, 2 s on one CPU\nthread."""')
    assert found == ["2-core", "at load 12", "one CPU\nthread"]
    assert not _machine_figures('"""Built for the ISA torch dispatches to on this CPU; 2 threads."""')


# The lowest floor: private helper modules of the whole package.
LEAVES = ("_stats", "_validation", "_names", "_warn_once", "_deprecation", "_checkpoint", "_blocks",
          "_jsonable", "_collectives", "_loss_output", "_progress", "_console", "_report_text")  # fmt: skip
# Floors, lowest first. A module may import its own floor and the ones below it, never one above.
FLOORS: list[tuple[str, ...]] = [
    LEAVES,
    ("optim", "norms", "losses", "sweep_args"),
    ("recipe", "harness", "data"),
    ("strategies", "checks"),
    ("tune",),
    ("mixins", "mixing"),
    ("callbacks", "plots"),
    ("testing",),
    ("demos", "cli", "__main__", "__init__"),
]
# Imports that run up a floor on purpose, each with its reason (imported inside the function that needs it).
UPWARD_ALLOWED: dict[tuple[str, str], str] = {
    ("lightning_recipes.tune.lr_range", "lightning_recipes.plots.lr_range"): (
        "LRRangeResult.plot(): a convenience that draws the result with plots/, imported when called"
    ),
}


def _top_part(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _floor_of(module: str) -> int:
    top = _top_part(module)
    for index, floor in enumerate(FLOORS):
        if top in floor:
            return index
    raise AssertionError(f"{module} is on no floor: add its top-level part to FLOORS")


def _resolved_imports(path: Path) -> set[str]:
    """The package modules ``path`` imports (nested and ``TYPE_CHECKING`` ones too)."""
    found: set[str] = set()
    for target, names in _imports(path):
        hits = [f"{target}.{name}" for name in names if f"{target}.{name}" in _MODULE_PATHS]
        found.update(hits or [target])
    return found - {_module_name(path)}


_MODULE_PATHS = {_module_name(path): path for path in MODULES}
_GRAPH = {module: _resolved_imports(path) & set(_MODULE_PATHS) for module, path in _MODULE_PATHS.items()}


def _import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The groups of more than one module that import each other, directly or through others."""
    reach: dict[str, set[str]] = {}
    for root in graph:
        seen, todo = set(), list(graph[root])
        while todo:
            if (node := todo.pop()) not in seen:
                seen.add(node)
                todo.extend(graph.get(node, ()))
        reach[root] = seen
    circles = {tuple(sorted(m for m in reach[a] if a in reach.get(m, ()))) for a in graph if a in reach[a]}
    return sorted(list(circle) for circle in circles if len(circle) > 1)


def test_there_are_no_import_circles() -> None:
    assert _import_circles(_GRAPH) == []
    # block detection (shared by optim, strategies, tune) stands on nothing of the package but a leaf
    assert _GRAPH["lightning_recipes._blocks"] == {"lightning_recipes._warn_once"}
    assert not _GRAPH["lightning_recipes._warn_once"]


def test_the_circle_finder_can_fail() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _import_circles(graph) == [["a", "b", "c"]]


def _floor_problems(path: Path) -> list[str]:
    """Imports up a floor (for the harness, of its own floor too)."""
    module = _module_name(path)
    try:
        floor = _floor_of(module)
    except AssertionError as error:
        return [str(error)]
    ceiling = floor - 1 if _top_part(module) == "harness" else floor
    upward = sorted(
        target
        for target in _GRAPH[module]
        if _top_part(target) != _top_part(module)
        and _floor_of(target) > ceiling
        and (module, target) not in UPWARD_ALLOWED
    )
    return [f"(floor {floor}) imports from a higher floor: {upward}"] if upward else []


RULES = (
    _layer_problems,
    _private_lightning_problems,
    _shim_problems,
    _machine_figure_problems,
    _floor_problems,
)


def test_every_module_keeps_the_layering_rules() -> None:
    problems = {
        path.relative_to(PACKAGE).as_posix(): found
        for path in MODULES
        if (found := [problem for rule in RULES for problem in rule(path)])
    }
    assert not problems, "\n".join(f"{path}: {'; '.join(found)}" for path, found in problems.items())
