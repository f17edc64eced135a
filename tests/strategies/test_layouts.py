"""The memory layouts: one table, read by the estimator without the preset table, carried by every preset."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lightning_recipes.strategies import PRESETS, estimate_memory
from lightning_recipes.strategies._layout import LAYOUTS

STRATEGIES = Path(__file__).resolve().parents[2] / "lightning_recipes" / "strategies"


def test_every_preset_carries_its_layout_from_the_table_the_estimator_reads_alone() -> None:
    assert set(PRESETS) == set(LAYOUTS)
    for name, record in PRESETS.items():
        assert record.layout is LAYOUTS[name], name
    tree = ast.parse((STRATEGIES / "memory.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {
        m for m in imported if m.endswith(("presets", "fsdp", "fsdp2", "ddp", "deepspeed_strategy", "_host"))
    }


def test_the_estimator_reads_the_layout_table() -> None:
    full = estimate_memory(10_000_000, strategy="fsdp_full_shard", devices=4)
    ddp = estimate_memory(10_000_000, strategy="ddp", devices=4)
    assert full.optimizer_state * 4 == ddp.optimizer_state  # full shard: optimizer state split 4 ways
    with pytest.raises(ValueError, match="strategy"):
        estimate_memory(10_000_000, strategy="no_such_preset")
