"""recommend_strategy: known model sizes -> expected preset, for each ladder."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.strategies import RecipesFSDPStrategy, recommend_strategy
from lightning_recipes.testing import TinyTransformerLM, random_token_loader

B = 1_000_000_000


@pytest.mark.parametrize(
    ("num_params", "devices", "num_nodes", "gpu_gb", "family", "host_gb", "expected"),
    [
        # 16 bytes/param (bf16-mixed AdamW). 1B = 14.9 GiB: DDP fits an 80 GB GPU.
        (1 * B, 8, 1, 80, "fsdp", None, "ddp"),
        # 14.9 GiB > 13.6 budget; 0.5 + 1.9 + 0.5 + 0.9 fits
        (1 * B, 8, 1, 16, "fsdp", None, "fsdp_shard_grad_op"),
        # 7B: DDP 104 GiB; ZeRO-2-like 3.3 + 13 bf16 unsharded + 9.8 = 26.1 GiB fits 68 GiB
        (7 * B, 8, 1, 80, "fsdp", None, "fsdp_shard_grad_op"),
        (7 * B, 8, 1, 80, "deepspeed", None, "deepspeed_zero1"),  # 13 + 13 + 9.8 = 35.9 GiB
        (7 * B, 8, 1, 24, "fsdp", None, "fsdp_full_shard"),  # 13 GiB fully sharded fits 20.4
        (7 * B, 8, 1, 24, "deepspeed", None, "deepspeed_zero3"),
        (7 * B, 8, 1, 24, "fsdp2", None, "fsdp2"),
        (7 * B, 2, 1, 24, "fsdp", 256, "fsdp_offload"),  # 52 GiB sharded over 2 only fits by offloading
        (
            7 * B,
            2,
            1,
            24,
            "fsdp",
            64,
            None,
        ),  # ... and not even then with 64 GB of host memory (104 GiB needed)
        (
            7 * B,
            1,
            1,
            80,
            "deepspeed",
            None,
            "deepspeed_zero2_offload",
        ),  # one GPU: 13 GiB of bf16 weights stay
        # 70B on 2 nodes x 8: full shard over 16 ranks = 65.2 GiB, within the 68 GiB budget (80 x 0.85)
        (70 * B, 8, 2, 80, "fsdp", None, "fsdp_full_shard"),
        (70 * B, 8, 2, 80, "deepspeed", None, "deepspeed_zero3"),
        (70 * B, 8, 1, 80, "fsdp", 2000, "fsdp_offload"),
        (70 * B, 8, 1, 80, "fsdp2", None, None),  # no offload rung on the fsdp2 ladder
    ],
)
def test_recommendation_table(num_params, devices, num_nodes, gpu_gb, family, host_gb, expected) -> None:
    rec = recommend_strategy(num_params, devices=devices, num_nodes=num_nodes, device_memory_gb=gpu_gb,
                             family=family, host_memory_gb=host_gb)  # fmt: skip
    assert rec.preset == expected, str(rec)
    chosen = [e.strategy for e, fits in zip(rec.estimates, rec.fits) if fits]
    assert (chosen[0] if chosen else None) == expected  # the first rung that fits, in ladder order


def test_hybrid_rung_only_for_multi_node() -> None:
    one = recommend_strategy(B, devices=8, device_memory_gb=80)
    two = recommend_strategy(B, devices=8, num_nodes=2, device_memory_gb=80)
    assert "fsdp_hybrid" not in [e.strategy for e in one.estimates]
    assert "fsdp_hybrid" in [e.strategy for e in two.estimates]


def test_recommendation_table_text_and_strategy(monkeypatch: pytest.MonkeyPatch) -> None:
    # the text is as wide as the terminal (issue #26; COLUMNS, else 80 without one): wide enough to keep each
    # asserted phrase on one line (tests/checks/test_output.py checks the fit at 80 columns)
    monkeypatch.setenv("COLUMNS", "140")
    rec = recommend_strategy(7 * B, devices=8, device_memory_gb=24)
    text = str(rec)
    assert "recommended: recipes_fsdp_full_shard" in text
    assert "budget 20.4 of 24 GiB per device" in text
    assert "chosen" in text and "104.31" in text  # DDP's total is shown to justify the choice
    assert isinstance(rec.strategy(), RecipesFSDPStrategy)
    assert rec.estimate is not None and rec.estimate.strategy == "fsdp_full_shard"
    nothing = recommend_strategy(70 * B, devices=1, device_memory_gb=1, family="fsdp2")
    assert nothing.preset is None and "nothing fits" in str(nothing)
    with pytest.raises(RuntimeError, match="No preset fits"):
        nothing.strategy()


def test_activations_from_a_sample_batch_can_change_the_rung() -> None:
    model = TinyTransformerLM(d_model=64, n_layers=2)
    batch = next(iter(random_token_loader(batch_size=64, seq_len=128, vocab_size=64)))
    without = recommend_strategy(model, devices=2, device_memory_gb=0.01)
    with_batch = recommend_strategy(model, devices=2, device_memory_gb=0.01, sample_batch=batch)
    assert without.preset == "ddp"
    # activations at this batch size do not fit 8.5 MiB without checkpointing
    assert with_batch.preset != "ddp"
    ddp = with_batch.estimates[0]
    assert ddp.activations is not None and ddp.total > 0.0085 * 1024**3


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"family": "zero"}, r"`family` must be one of .*got 'zero'"),
        ({"device_memory_gb": 0}, r"`device_memory_gb` must be a finite number > 0, got 0"),
        ({"headroom": 1.0}, r"`headroom` must be a number in \[0, 1\), got 1.0"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict, message: str) -> None:
    settings = {"devices": 8, "device_memory_gb": 80, **kwargs}
    with pytest.raises(ValueError, match=message):
        recommend_strategy(B, **settings)


def test_meta_model_7b_shaped_transformer() -> None:
    with torch.device("meta"):  # a Llama-7B-shaped stack (no memory allocated)
        model = TinyTransformerLM(vocab_size=32000, d_model=4096, n_heads=32, n_layers=32, max_seq_len=4096)
    rec = recommend_strategy(model, devices=8, device_memory_gb=80)
    assert 6.4 * B < rec.estimates[0].num_params < 7.0 * B
    assert rec.preset == "fsdp_shard_grad_op"
