"""The exported check lists follow the registry: the root, ``callbacks`` and README name every check of
``checks.preflight.CHECKS``, no more, no less."""

from __future__ import annotations

import re
from pathlib import Path

import lightning_recipes
from lightning_recipes import callbacks
from lightning_recipes.checks import SanityCheck
from lightning_recipes.checks.preflight import CHECKS

README = Path(__file__).resolve().parents[2] / "README.md"
REGISTRY = {cls.__name__: cls for cls in CHECKS.values()}


def _exported_checks(module: object) -> dict[str, type]:
    names: list[str] = module.__all__  # type: ignore[attr-defined]
    return {
        name: getattr(module, name)
        for name in names
        if isinstance(getattr(module, name), type)
        and issubclass(getattr(module, name), SanityCheck)
        and getattr(module, name) is not SanityCheck
    }


def test_the_root_exports_every_registered_check() -> None:
    assert _exported_checks(lightning_recipes) == REGISTRY


def test_callbacks_exports_every_registered_check() -> None:
    assert _exported_checks(callbacks) == REGISTRY


def test_readme_lists_every_registered_check() -> None:
    (row,) = [line for line in README.read_text().splitlines() if "each check alone, as a callback" in line]
    listed = set(re.findall(r"`(\w+Check)`", row))
    assert listed == set(REGISTRY)


def test_the_comparison_can_fail() -> None:
    holder = type("Holder", (), {"__all__": ("DataCheck",), "DataCheck": REGISTRY["DataCheck"]})
    assert _exported_checks(holder) != REGISTRY


def test_the_stage_table_in_the_docs_names_every_registered_check() -> None:
    guide = README.parent / "docs" / "guides" / "preflight.md"
    rows = [line for line in guide.read_text().splitlines() if line.startswith("| ") and line.count("|") == 6]
    named = {
        re.findall(r"`(\w+)`", row.split("|")[3])[0]
        for row in rows[1:]
        if re.findall(r"`(\w+)`", row.split("|")[3])
    }
    assert named == set(CHECKS)
