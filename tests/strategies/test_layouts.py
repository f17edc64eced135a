"""The memory layouts: carried by every preset record, read by the estimator without building a strategy."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lightning_recipes.strategies import PRESETS, MemoryLayout, estimate_memory

STRATEGIES = Path(__file__).resolve().parents[2] / "lightning_recipes" / "strategies"


def test_the_estimator_reads_each_presets_layout_without_importing_a_strategy() -> None:
    assert all(isinstance(record.layout, MemoryLayout) for record in PRESETS.values())
    tree = ast.parse((STRATEGIES / "memory.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert not {m for m in imported if m.endswith(("fsdp", "fsdp2", "ddp", "deepspeed_strategy", "_host"))}
    full = estimate_memory(10_000_000, strategy="fsdp_full_shard", devices=4)
    ddp = estimate_memory(10_000_000, strategy="ddp", devices=4)
    assert full.optimizer_state * 4 == ddp.optimizer_state  # full shard: optimizer state split 4 ways
    with pytest.raises(ValueError, match="strategy"):
        estimate_memory(10_000_000, strategy="no_such_preset")
