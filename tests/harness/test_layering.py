"""The harness stands below every wing that tries the user's model: it imports none of them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import lightning_recipes.harness

PACKAGE = Path(lightning_recipes.harness.__file__).resolve().parent
FILES = sorted(PACKAGE.glob("*.py"))
ABOVE = ("checks", "tune", "callbacks", "strategies", "mixins", "recipe", "demo", "finetune_demo", "cli")
ALLOWED_ROOT = {"lightning_recipes._validation", "lightning_recipes._warn_once", "lightning_recipes.optim"}


def _targets(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path.name}: relative import"
            found.append(node.module or "")
    return [t for t in found if t.startswith("lightning_recipes")]


def test_the_layering_test_sees_the_harness():
    assert {"harness.py", "errors.py", "walk.py", "optimizers.py", "isolation.py"} <= {p.name for p in FILES}


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_the_harness_imports_no_wing_above_it(path):
    for target in _targets(path):
        inside = target == "lightning_recipes.harness" or target.startswith("lightning_recipes.harness.")
        assert inside or target in ALLOWED_ROOT, f"{path.name} imports {target}"
        assert not any(target.startswith(f"lightning_recipes.{wing}") for wing in ABOVE), path.name
