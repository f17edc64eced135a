"""FSDP2 preset."""

from __future__ import annotations

import copy
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
    infer_block_classes,
    mixed_precision_policy,
    preset,
)
from lightning_recipes.testing import TinyTransformerLM, TransformerBlock, fast_trainer, random_token_loader

from ._reference import single_process_reference

SCRIPTS = Path(__file__).parent / "scripts"
sys.path.insert(0, str(SCRIPTS))
try:
    import transformers
    from hf_fsdp2_train import gpt2_config, token_data  # the GPT-2 and the data of the two-process run
except ImportError:
    transformers = None
needs_transformers = pytest.mark.skipif(transformers is None, reason="needs transformers (the `dev` group)")


@pytest.fixture(scope="module")
def fsdp2_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """``scripts/fsdp2_train.py`` on 2 CPU processes."""
    out = tmp_path_factory.mktemp("fsdp2")
    prefixes = ("MASTER_", "LOCAL_RANK", "RANK", "WORLD_SIZE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    command = [sys.executable, str(SCRIPTS / "fsdp2_train.py"), str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out, proc.stderr


@pytest.fixture(scope="module")
def fsdp2_run(fsdp2_runs: tuple[Path, str]) -> list[dict]:
    return [json.loads((fsdp2_runs[0] / f"rank{r}.json").read_text()) for r in range(2)]


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
    expected = {"block_classes": (TransformerBlock,), "activation_checkpointing": True}
    assert strategy.fsdp2_settings == {**expected, "reshard_after_forward": False}
    policy = mixed_precision_policy("bf16-mixed")
    assert policy is not None and policy.param_dtype == torch.bfloat16
    assert policy.reduce_dtype == torch.float32
    assert mixed_precision_policy("bf16-true") is None
    assert mixed_precision_policy("32-true") is None


# ---- Hugging Face models ---------------------------------------------------------------------------


def _reference_losses(steps: int) -> list[float]:
    """One process, no sharding, no checkpointing: the global batch of 8 that the two ranks split 4 + 4."""
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(gpt2_config())
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    tokens = token_data()
    losses = []
    for step in range(steps):
        batch = tokens[8 * step : 8 * step + 8]  # DistributedSampler: rank r takes samples r, r + 2, ...
        loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    return losses


@pytest.mark.slow
@needs_transformers
def test_gpt2_with_kv_cache_trains_under_fsdp2_checkpointing(fsdp2_runs: tuple[Path, str]) -> None:
    out, stderr = fsdp2_runs
    records = [json.loads((out / "hf" / f"rank{r}.json").read_text()) for r in range(2)]
    for record in records:
        assert record["world_size"] == 2 and record["global_step"] == 3
        assert record["block_apis"] == ["checkpoint", "fully_shard"]  # still checkpointed
        assert record["use_cache"] is False
    # the mean of the two ranks' losses is the loss of the global batch: compare with a plain run step by step
    global_losses = [(a + b) / 2 for a, b in zip(records[0]["losses"], records[1]["losses"])]
    assert global_losses == pytest.approx(_reference_losses(3), rel=1e-4)
    assert "use_cache=False" in stderr and "activation_checkpointing=False" in stderr
    assert stderr.count("which a key/value cache breaks") == 1  # rank zero only


@needs_transformers
def test_checkpointing_turns_the_cache_off_and_opting_out_keeps_it(single_process_group: None) -> None:
    model = transformers.GPT2LMHeadModel(gpt2_config())
    kept = copy.deepcopy(model)
    with pytest.warns(UserWarning, match=r"use_cache=False` on `GPT2LMHeadModel.config`"):
        apply_fsdp2(model)
    assert model.config.use_cache is False
    apply_fsdp2(kept, activation_checkpointing=False)
    assert kept.config.use_cache is True


@needs_transformers
def test_block_detection_finds_hugging_face_layers() -> None:
    gpt2 = transformers.GPT2LMHeadModel(gpt2_config())
    assert infer_block_classes(gpt2) == (transformers.models.gpt2.modeling_gpt2.GPT2Block,)
    sizes = {"hidden_size": 32, "num_attention_heads": 2, "intermediate_size": 64, "vocab_size": 64}
    bert_config = transformers.BertConfig(num_hidden_layers=2, **sizes)
    bert = transformers.BertModel(bert_config)
    assert infer_block_classes(bert) == (transformers.models.bert.modeling_bert.BertLayer,)
