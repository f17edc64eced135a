"""`recipes_fsdp2` on Hugging Face models: a GPT-2 (KV cache on, as shipped) trains under block
checkpointing."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from lightning_recipes.strategies import apply_fsdp2, infer_block_classes

transformers = pytest.importorskip("transformers", reason="needs transformers (the `dev` group)")

SCRIPT = Path(__file__).parent / "scripts" / "hf_fsdp2_train.py"
sys.path.insert(0, str(SCRIPT.parent))
from hf_fsdp2_train import gpt2_config, token_data  # noqa: E402


def _env() -> dict[str, str]:
    prefixes = ("MASTER_", "LOCAL_RANK", "RANK", "WORLD_SIZE")
    return {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}


@pytest.fixture(scope="module")
def gpt2_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[dict], str]:
    out = tmp_path_factory.mktemp("hf_fsdp2")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), str(out)], capture_output=True, text=True, timeout=300, env=_env()
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(2)], proc.stderr


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


@pytest.mark.slow  # starts its own processes: over 20 s on a 2-core CPU
def test_gpt2_with_kv_cache_trains_under_fsdp2_checkpointing(gpt2_run: tuple[list[dict], str]) -> None:
    records, stderr = gpt2_run
    for record in records:
        assert record["world_size"] == 2 and record["global_step"] == 3
        assert record["block_apis"] == ["checkpoint", "fully_shard"]  # still checkpointed
        assert record["use_cache"] is False
    # the mean of the two ranks' losses is the loss of the global batch: compare with a plain run step by step
    global_losses = [(a + b) / 2 for a, b in zip(records[0]["losses"], records[1]["losses"])]
    assert global_losses == pytest.approx(_reference_losses(3), rel=1e-4)
    assert "use_cache=False" in stderr and "activation_checkpointing=False" in stderr
    assert stderr.count("which a key/value cache breaks") == 1  # rank zero only


@pytest.fixture
def single_process_group():
    import torch.distributed as dist

    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_checkpointing_turns_the_cache_off_and_opting_out_keeps_it(single_process_group: None) -> None:
    model = transformers.GPT2LMHeadModel(gpt2_config())
    kept = copy.deepcopy(model)
    with pytest.warns(UserWarning, match=r"use_cache=False` on `GPT2LMHeadModel.config`"):
        apply_fsdp2(model)
    assert model.config.use_cache is False
    apply_fsdp2(kept, activation_checkpointing=False)
    assert kept.config.use_cache is True


def test_block_detection_finds_hugging_face_layers() -> None:
    gpt2 = transformers.GPT2LMHeadModel(gpt2_config())
    assert infer_block_classes(gpt2) == (transformers.models.gpt2.modeling_gpt2.GPT2Block,)
    bert_config = transformers.BertConfig(
        num_hidden_layers=2, hidden_size=32, num_attention_heads=2, intermediate_size=64, vocab_size=64
    )
    bert = transformers.BertModel(bert_config)
    assert infer_block_classes(bert) == (transformers.models.bert.modeling_bert.BertLayer,)
