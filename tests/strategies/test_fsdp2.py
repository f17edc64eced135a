"""FSDP2 preset: real 2-process CPU run (subprocess), exact shard bytes, resume, and helpers in one
process."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lightning_recipes.strategies import (
    FSDP2Mixin,
    RecipesFSDP2Strategy,
    apply_fsdp2,
    estimate_memory,
    mixed_precision_policy,
    preset,
)
from lightning_recipes.testing import TinyTransformerLM, TransformerBlock, fast_trainer, random_token_loader

from ._reference import single_process_reference

SCRIPT = Path(__file__).parent / "scripts" / "fsdp2_train.py"


@pytest.fixture(scope="module")
def fsdp2_run(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("fsdp2")
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MASTER_", "LOCAL_RANK", "RANK", "WORLD_SIZE"))
    }
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)]


@pytest.mark.slow  # starts its own processes: over 20 s on a 2-core CPU
def test_fsdp2_trains_like_single_process_and_resumes_exactly(fsdp2_run: list[dict]) -> None:
    reference = single_process_reference()
    for record in fsdp2_run:
        assert record["world_size"] == 2
        assert math.isclose(record["loss_straight"], reference, rel_tol=1e-4), (
            record["loss_straight"],
            reference,
        )
        assert record["loss_straight"] < math.log(64) - 0.5  # it learned (init loss is ln 64 = 4.16)
        assert record["loss_resumed"] == pytest.approx(record["loss_straight"], rel=1e-6)
        assert record["global_step_resumed"] == 8
        assert record["checkpoint_is_dir"]  # distributed checkpoint: one shard file per rank


@pytest.mark.slow
def test_fsdp2_shards_blocks_with_checkpointing(fsdp2_run: list[dict]) -> None:
    for record in fsdp2_run:
        assert record["measured"]["dtensor"] == 1
        assert record["measured"]["block_apis"] == ["checkpoint", "fully_shard"]
        assert record["measured"]["root_apis"] == ["fully_shard"]


@pytest.mark.slow
def test_estimate_matches_real_fsdp2_shard_bytes_exactly(fsdp2_run: list[dict]) -> None:
    for record in fsdp2_run:
        assert record["measured"]["parameters"] == record["estimate"]["parameters"]
        assert record["measured"]["gradients"] == record["estimate"]["gradients"]
        assert record["measured"]["optimizer_state"] == record["estimate"]["optimizer_state"]
    full = sum(p.numel() for p in TinyTransformerLM().parameters())
    assert fsdp2_run[0]["measured"]["parameters"] < full * 4  # really sharded


@pytest.mark.slow
def test_fsdp2_refuses_a_model_without_the_mixin_with_the_fix(fsdp2_run: list[dict]) -> None:
    for record in fsdp2_run:
        assert "FSDP2Mixin" in record["error"] and "apply_fsdp2" in record["error"]


def test_fsdp2_local_sizes_follow_torch_chunk_for_uneven_rows() -> None:
    # rows 5 over 2 ranks: torch.chunk gives 3 + 2; the most loaded rank holds 3 rows
    model = torch.nn.Sequential(torch.nn.Linear(4, 5, bias=False), torch.nn.Linear(5, 5, bias=False))
    estimate = estimate_memory(model, strategy="fsdp2", devices=2, optimizer="sgd")
    assert estimate.parameters == (3 * 4 + 3 * 5) * 4


def test_apply_fsdp2_is_idempotent_and_respects_opt_out(single_process_group: None) -> None:
    from torch.distributed._composable import _get_registry

    model = TinyTransformerLM()
    assert apply_fsdp2(model, activation_checkpointing=False) is model
    assert sorted(_get_registry(model.blocks[0]) or {}) == ["fully_shard"]
    assert apply_fsdp2(model) is model  # second call: unchanged, no double wrapping
    assert sorted(_get_registry(model.blocks[0]) or {}) == ["fully_shard"]


def test_apply_fsdp2_with_explicit_block_path(single_process_group: None) -> None:
    model = TinyTransformerLM()
    apply_fsdp2(model, block_classes="lightning_recipes.testing.TransformerBlock")
    assert type(model.blocks[1]).__name__ == "FSDPTransformerBlock"
    assert isinstance(model.blocks[1], TransformerBlock)


def test_mixin_is_a_no_op_without_a_mesh() -> None:
    class ShardedLM(FSDP2Mixin, TinyTransformerLM):
        pass

    model = ShardedLM()
    fast_trainer(max_steps=2).fit(model, random_token_loader())
    assert type(model.blocks[0]) is TransformerBlock


def test_fsdp2_preset_settings_and_precision_policy() -> None:
    strategy = preset("fsdp2", block_classes=[TransformerBlock], reshard_after_forward=False)
    assert isinstance(strategy, RecipesFSDP2Strategy)
    assert strategy.fsdp2_settings == {
        "block_classes": (TransformerBlock,),
        "activation_checkpointing": True,
        "reshard_after_forward": False,
    }
    policy = mixed_precision_policy("bf16-mixed")
    assert (
        policy is not None and policy.param_dtype == torch.bfloat16 and policy.reduce_dtype == torch.float32
    )
    assert mixed_precision_policy("bf16-true") is None
    assert mixed_precision_policy("32-true") is None
