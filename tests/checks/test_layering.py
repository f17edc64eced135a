"""The sanity-check wing stands on its own: ``checks/`` imports nothing from ``callbacks/``, never runs back
up to a parent package, and reads the Trainer through public API only."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import lightning_recipes.checks

PACKAGE = Path(lightning_recipes.checks.__file__).resolve().parent
FILES = sorted(PACKAGE.glob("*.py"))
# Private modules outside checks/ that checks/ may use: the package-wide argument-validation idiom, and the
# LightningCLI config reader the `preflight` and `tune` commands share.
SHARED_PRIVATE = {
    "lightning_recipes._validation",
    "lightning_recipes._lightning_cli_config",
    "lightning_recipes._jsonable",
}


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """``(module, names)`` of every import in a file (``names`` empty for ``import module``)."""
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            found.append((node.module or "", [alias.name for alias in node.names]))
    return found


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_checks_import_no_callbacks_and_no_parent_package(path):
    for module, names in _imports(path):
        if not module.startswith("lightning_recipes"):
            continue
        assert not module.startswith("lightning_recipes.callbacks"), f"{path.name} imports {module}"
        assert module != "lightning_recipes", f"{path.name} imports its root package: {names}"
        if path.name != "__init__.py":
            assert module != "lightning_recipes.checks", f"{path.name} imports its own package's __init__"
        if not module.startswith("lightning_recipes.checks."):
            private = any(part.startswith("_") for part in module.split("."))
            assert not private or module in SHARED_PRIVATE, f"{path.name} imports the private {module}"


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_checks_use_no_private_lightning_attributes(path):
    text = path.read_text()
    assert not re.search(r"\btrainer\._|fit_loop\._|\b_data_source\b", text), path.name
    assert not re.search(r"\bmodel\._trainer\b", text), path.name


def test_the_layering_test_sees_every_module():
    names = {p.name for p in FILES}
    assert {"base.py", "report.py", "preflight.py", "cli.py", "init_loss_check.py"} <= names
