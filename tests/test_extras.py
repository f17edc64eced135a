"""Each install promise holds: the base install imports the package, and the `notebooks` dependency group
(pyproject.toml's ``[dependency-groups]``: the notebooks live in the repository only, so they are no extra of
the published package) runs every notebook.

The promises are checked against the installed distributions' metadata (what pip would install for the base
package plus ``--group notebooks``, dependencies of dependencies included), so a notebook that imports a
package the group does not bring fails here instead of on a fresh checkout.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Packages that only the extras bring: `import lightning_recipes` must not need any of them.
EXTRA_ONLY_MODULES = (
    "sklearn",
    "matplotlib",
    "wandb",
    "tensorboard",
    "deepspeed",
    "transformers",
    "nbformat",
)


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _closure(names: set[str]) -> set[str]:
    """The distributions ``names`` install, with their own (non-extra) dependencies, from installed
    metadata."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        todo += [_requirement_name(r) for r in requires if "extra ==" not in r and "extra==" not in r]
    return seen


def _declared(group: str | None) -> set[str]:
    """The base install's requirements (installed metadata) plus pyproject.toml's group ``group``."""
    requires = [r for r in metadata.requires("lightning-recipes") or [] if "extra ==" not in r]
    if group:
        requires += tomllib.loads((ROOT / "pyproject.toml").read_text())["dependency-groups"][group]
    return {_requirement_name(r) for r in requires}


def _notebook_imports(path: Path) -> set[str]:
    modules: set[str] = set()
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = "".join(cell["source"])
        source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                modules.add(node.module.split(".")[0])
    return modules


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_group_brings_every_module_a_notebook_imports(notebook: Path) -> None:
    provided = _closure(_declared("notebooks"))
    providers = metadata.packages_distributions()
    missing = {}
    for module in _notebook_imports(notebook) - set(sys.stdlib_module_names) - {"lightning_recipes"}:
        distributions = {d.lower().replace("_", "-") for d in providers.get(module, [module])}
        if not distributions & provided:
            missing[module] = sorted(distributions)
    assert not missing, (
        f"{notebook.name} imports modules that the `notebooks` dependency group does not install: {missing}"
    )


def test_base_install_imports_the_package_without_any_extra() -> None:
    # Every finder is wrapped so that the extras' packages look absent, exactly as on a base install: imports
    # of them raise ModuleNotFoundError and `importlib.util.find_spec` returns None (torch and Lightning probe
    # that way).
    blocker = (
        "import sys\n"
        f"BLOCKED = {EXTRA_ONLY_MODULES!r}\n"
        "class Hide:\n"
        "    def __init__(self, finder): self.finder = finder\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in BLOCKED: return None\n"
        "        find = getattr(self.finder, 'find_spec', None)\n"
        "        return find(name, path, target) if find else None\n"
        "    def invalidate_caches(self): getattr(self.finder, 'invalidate_caches', lambda: None)()\n"
        "sys.meta_path[:] = [Hide(finder) for finder in sys.meta_path]\n"
        "import lightning_recipes, lightning_recipes.callbacks, lightning_recipes.strategies\n"
        "import lightning_recipes.optim, lightning_recipes.checks\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in BLOCKED]\n"
        "print('ok')\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocker], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr[-3000:]
