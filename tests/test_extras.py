"""Each install promise holds (checked on the installed metadata): the base install imports the package, and
the `notebooks` dependency group brings every package a notebook imports."""

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
# `rich` (the `rich` extra): Lightning switches every Trainer to rich's progress bar when it is installed.
EXTRA_ONLY_MODULES = ("sklearn", "matplotlib", "wandb", "tensorboard", "deepspeed", "transformers")
EXTRA_ONLY_MODULES += ("nbformat", "rich")


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s<>=!~;\[(]", requirement, maxsplit=1)[0].lower().replace("_", "-")


def _closure(names: set[str]) -> set[str]:
    """The distributions ``names`` install, with their own (non-extra) dependencies, from metadata."""
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
    assert not missing, f"{notebook.name} imports modules the `notebooks` dependency group lacks: {missing}"


def _base_install_run(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` with the extras' packages looking absent, as on a base install; asserts none imported."""
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
        f"{code}\n"
        "assert not [m for m in sys.modules if m.split('.')[0] in BLOCKED]\n"
        "print('ok')\n"
    )
    command = [sys.executable, "-c", blocker]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=ROOT)


# Both base-install probes in one interpreter (starting one is most of their cost): first the package and
# every wing is imported, then every table prints; each test reads its part of the output.
_IMPORT_EVERY_WING = (
    "import lightning_recipes, lightning_recipes.callbacks, lightning_recipes.strategies\n"
    "import lightning_recipes.optim, lightning_recipes.checks, lightning_recipes.tune\n"
    "assert not [m for m in sys.modules if m.split('.')[0] in BLOCKED]\n"
    "print('imported every wing')\n"
)
_PRINT_EVERY_TABLE = """
import io, contextlib, os
os.environ["COLUMNS"] = "80"
from lightning_recipes.callbacks._health_window import Finding, findings_table
from lightning_recipes.checks import preflight
from lightning_recipes.strategies import recommend_strategy
from lightning_recipes.cli.memory import main as memory
from lightning_recipes.testing import TinyClassifier, random_classification_loader
from lightning_recipes.tune import SpeedRow, SpeedTuneResult

out = io.StringIO()
with contextlib.redirect_stdout(out):
    report = preflight(TinyClassifier(), train_dataloaders=random_classification_loader(), checks=["data",
                       "init_loss"], progress=True, print_report=True)
    report.print(verbose=True)
    assert memory(["--num_params", "7B", "--devices", "8"]) == 0
    print(recommend_strategy(1_000_000_000, devices=2, device_memory_gb=24))
    findings_table([Finding("lr_too_high", 12, 0, {"loss_ratio": 3.5}, "lower the [learning rate]")], 4)
    print(SpeedTuneResult([SpeedRow("baseline", "ok", step_ms=5.25)], ["baseline"], run_steps=100))
text = out.getvalue()
print(text)
for shown in ("Preflight", "WARN data", "init_loss", "7,000,000,000", "recommended: recipes_", "lr_too_high",
              "loss ratio 3.5", "[learning rate]", "5.25", "message"):
    assert shown in text, shown
assert "[/" not in text and max(map(len, text.splitlines())) <= 80
"""


@pytest.fixture(scope="module")
def base_install_run() -> subprocess.CompletedProcess[str]:
    return _base_install_run(_IMPORT_EVERY_WING + _PRINT_EVERY_TABLE)


def test_base_install_imports_the_package_without_any_extra(base_install_run) -> None:
    assert "imported every wing" in base_install_run.stdout.splitlines(), base_install_run.stderr[-3000:]


def test_the_base_install_brings_no_rich() -> None:
    """Lightning gives every Trainer rich's bar when rich is installed: rich is the `rich` extra only."""
    from lightning.pytorch.trainer.connectors import callback_connector

    assert "_RICH_AVAILABLE" in vars(callback_connector)  # what Lightning's choice of progress bar reads
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    base = {_requirement_name(r) for r in dependencies}
    assert "rich" not in _closure(base)


def test_without_rich_every_table_and_report_prints_as_plain_text(base_install_run) -> None:
    """Preflight, memory, recommend, HealthMonitor, speed_tune: all numbers, <= 80 columns, no markup."""
    result = base_install_run
    output = (result.stdout[-3000:], result.stderr[-3000:])
    assert result.returncode == 0 and result.stdout.splitlines()[-1] == "ok", output
