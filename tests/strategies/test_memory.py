"""estimate_memory: per-row formulas, sharding tables, exact tensor bytes, activations, rule of thumb."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lightning_recipes.mixins import LionRecipe
from lightning_recipes.optim.build import build_optimizer
from lightning_recipes.optim.names import OPTIMIZERS
from lightning_recipes.strategies import estimate_memory
from lightning_recipes.strategies.memory import measure_activations, optimizer_name
from lightning_recipes.testing import TinyTransformerLM, TransformerBlock, random_token_loader

N = 7_000_000_000  # the 7B example


@pytest.mark.parametrize(
    ("strategy", "precision", "optimizer", "bytes_per_param"),
    [
        ("ddp", "32-true", "adamw", 16),  # fp32 weights 4 + grads 4 + two fp32 moments 8
        ("ddp", "bf16-mixed", "adamw", 16),  # torch AMP keeps fp32 weights: same 16
        # bf16 weights 2 + grads 2 + fp32 master 4 + moments 8
        ("deepspeed_zero1", "bf16-mixed", "adamw", 16),
        ("deepspeed_zero3", "16-mixed", "adam", 16),
        ("ddp", "bf16-true", "adamw", 8),  # everything in bf16: 2 + 2 + 2 x 2
        ("ddp", "32-true", "lion", 12),
        ("ddp", "32-true", "lamb", 16),
        ("ddp", "32-true", "sgd_momentum", 12),
        ("ddp", "32-true", "sgd", 8),
    ],
)
def test_bytes_per_param_rule_of_thumb(
    strategy: str, precision: str, optimizer: str, bytes_per_param: int
) -> None:
    estimate = estimate_memory(N, strategy=strategy, precision=precision, optimizer=optimizer, devices=8)
    assert estimate.bytes_per_param == bytes_per_param


def test_seven_billion_adamw_ddp_needs_sixteen_bytes_per_parameter_on_every_device() -> None:
    estimate = estimate_memory(N, optimizer="adamw", precision="32-true", strategy="ddp", devices=8)
    assert (estimate.parameters, estimate.gradients, estimate.optimizer_state) == (4 * N, 4 * N, 8 * N)
    assert estimate.total == 16 * N  # 104.3 GiB: does not fit an 80 GB GPU without sharding
    assert "optimizer state" in str(estimate) and "104.31" in str(estimate)


G = 1_000_000_000
ROWS = ("parameters", "gradients", "optimizer_state", "master_weights", "host")


@pytest.mark.parametrize(
    # expected: (parameters, gradients, optimizer, master, host) in units of G
    ("strategy", "devices", "num_nodes", "expected"),
    [
        ("ddp", 8, 1, (28, 28, 56, 0, 0)),  # bf16-mixed under torch AMP: fp32 everything, nothing sharded
        ("fsdp_shard_grad_op", 8, 1, (3.5, 3.5, 7, 0, 0)),  # + 14 G of bf16 unsharded copies (gathered)
        ("fsdp_full_shard", 8, 1, (3.5, 3.5, 7, 0, 0)),
        ("fsdp_full_shard", 8, 2, (1.75, 1.75, 3.5, 0, 0)),
        ("fsdp_hybrid", 8, 2, (3.5, 3.5, 7, 0, 0)),  # shards within a node only
        ("fsdp2", 8, 1, (3.5, 3.5, 7, 0, 0)),
        ("fsdp_offload", 8, 1, (0, 0, 0, 0, 14)),
        # 16-bit params and grads, fp32 master + moments sharded
        ("deepspeed_zero1", 8, 1, (14, 14, 7, 3.5, 0)),
        ("deepspeed_zero2", 8, 1, (14, 1.75, 7, 3.5, 0)),
        # fp32 grads, moments, master on host
        ("deepspeed_zero2_offload", 8, 1, (14, 0, 0, 0, 3.5 + 7 + 3.5)),
        ("deepspeed_zero3", 8, 1, (1.75, 1.75, 7, 3.5, 0)),
        ("deepspeed_zero3_offload", 8, 1, (0, 0, 0, 0, 1.75 + 3.5 + 7 + 3.5)),
    ],
)
def test_sharding_table_for_seven_billion_parameters(
    strategy: str, devices: int, num_nodes: int, expected
) -> None:
    layout = {"strategy": strategy, "devices": devices, "num_nodes": num_nodes}
    estimate = estimate_memory(N, precision="bf16-mixed", **layout)
    got = tuple(getattr(estimate, k) for k in ROWS)
    assert got == tuple(int(x * G) for x in expected)


def _real_step_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    tokens, target = next(iter(random_token_loader(batch_size=4)))
    model.loss(model(tokens).float(), target).backward()
    optimizer.step()
    params = [p for p in model.parameters() if p.requires_grad]
    state = sum(v.nbytes for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor))
    parameters, gradients = sum(p.nbytes for p in params), sum(p.grad.nbytes for p in params)
    return {"parameters": parameters, "gradients": gradients, "optimizer_state": state}


@pytest.mark.parametrize(("precision", "dtype"), [("bf16-true", torch.bfloat16), ("64-true", torch.float64)])
def test_estimate_matches_real_tensor_bytes_exactly_in_other_precisions(
    precision: str, dtype: torch.dtype
) -> None:
    """32-true, for every optimizer of the table: the next test."""
    model = TinyTransformerLM().to(dtype)
    measured = _real_step_bytes(model, torch.optim.AdamW(model.parameters()))
    estimate = estimate_memory(model, strategy="ddp", devices=1, precision=precision, optimizer="adamw")
    assert measured == {k: getattr(estimate, k) for k in measured}


_TORCH_KWARGS = {"sgd": {"lr": 0.1}, "sgd_momentum": {"lr": 0.1, "momentum": 0.9}}
_TORCH_KWARGS["rmsprop_momentum"] = {"momentum": 0.9}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_every_optimizer_in_the_table_matches_its_real_state_bytes(name: str) -> None:
    """Each optimizer we ship and each torch one the table names: real state bytes == the estimate."""
    model = TinyTransformerLM()
    spec = OPTIMIZERS[name]
    if spec.in_recipe:
        optimizer = build_optimizer(name, model.parameters(), lr=1e-3, weight_decay=0.0, betas=(0.9, 0.99))
    else:
        optimizer = getattr(torch.optim, spec.class_name)(model.parameters(), **_TORCH_KWARGS.get(name, {}))
    assert optimizer_name(optimizer) == name and type(optimizer).__name__ == spec.class_name
    measured = _real_step_bytes(model, optimizer)
    estimate = estimate_memory(model, strategy="ddp", devices=1, precision="32-true", optimizer=name)
    assert measured == {k: getattr(estimate, k) for k in measured}
    for p, state in optimizer.state.items():  # the table's count of full-size state tensors per parameter
        assert sum(torch.is_tensor(t) and t.shape == p.shape for t in state.values()) == spec.state_tensors


class _LionLM(LionRecipe, TinyTransformerLM):
    pass


class _RMSpropLM(TinyTransformerLM):
    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.RMSprop(self.parameters(), momentum=0.9)


@pytest.mark.parametrize(("cls", "expected"), [(_LionLM, "lion"), (_RMSpropLM, "rmsprop_momentum")])
def test_without_optimizer_the_models_own_is_counted(cls: type, expected: str) -> None:
    """Field report #22: a model whose recipe is Lion was counted as AdamW (2 moments instead of 1)."""
    with torch.device("meta"):
        model = cls()
    estimate = estimate_memory(model, strategy="ddp", precision="32-true")
    assert estimate.optimizer == expected
    assert estimate.optimizer_state == estimate_memory(model, optimizer=expected).optimizer_state
    assert any(note.startswith(f"optimizer {expected}: read from") for note in estimate.notes)


def test_an_unknown_optimizer_is_counted_as_adamw_with_a_note() -> None:
    estimate = estimate_memory(nn.Linear(4, 4))
    assert estimate.optimizer == "adamw"
    assert estimate.notes == (
        "optimizer state counted for adamw: the model's optimizer is unknown "
        "(Linear has no configure_optimizers)",
    )


def test_frozen_parameters_are_not_trained_and_a_meta_model_is_counted() -> None:
    model = TinyTransformerLM()
    model.token_embedding.requires_grad_(False)
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    assert estimate_memory(model, optimizer="sgd").parameters == trainable * 4
    with torch.device("meta"):
        model = TinyTransformerLM(d_model=256, n_layers=8)
    estimate = estimate_memory(model, strategy="fsdp2", devices=8)
    assert estimate.num_params == sum(p.numel() for p in model.parameters())


def test_activations_are_measured_from_saved_tensors_by_hand() -> None:
    # saved: x [4, 8] (128 B) + the ReLU output [4, 16] (256 B, shared with Linear(16,4)); peak: + largest
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    measured = measure_activations(model, torch.randn(4, 8))
    assert (measured.saved, measured.largest) == (384, 256)
    estimate = estimate_memory(model, sample_batch=torch.randn(4, 8), activation_checkpointing=False)
    assert estimate.activations == 640
    assert estimate.total == estimate.parameters + estimate.gradients + estimate.optimizer_state + 640


def test_activation_checkpointing_keeps_block_inputs_and_one_block() -> None:
    model = TinyTransformerLM(n_layers=4)
    batch = next(iter(random_token_loader(batch_size=2)))
    measured = measure_activations(model, batch, block_classes=(TransformerBlock,))
    assert measured.block_inputs == 4 * 2 * 32 * 64 * 4  # four fp32 [2, 32, 64] block inputs
    plain = estimate_memory(model, sample_batch=batch, activation_checkpointing=False).activations
    checkpointed = estimate_memory(model, sample_batch=batch, activation_checkpointing=True).activations
    assert checkpointed == measured.outside + measured.block_inputs + measured.block_max + measured.largest
    assert plain == measured.saved + measured.largest
    assert checkpointed < plain / 2
    # FSDP presets checkpoint by default, DDP does not
    assert estimate_memory(model, strategy="fsdp2", sample_batch=batch).activations == checkpointed
    assert estimate_memory(model, strategy="ddp", sample_batch=batch).activations == plain
    # measured under autocast for a *-mixed precision
    mixed = estimate_memory(model, strategy="ddp", sample_batch=batch, precision="bf16-mixed")
    assert mixed.activations < plain


def test_gathered_parameters_for_sharded_strategies() -> None:
    model = TinyTransformerLM(n_layers=3)
    block = sum(p.numel() for p in model.blocks[0].parameters())
    root = sum(p.numel() for p in model.parameters()) - 3 * block
    estimate = estimate_memory(model, strategy="fsdp_full_shard", devices=4, precision="bf16-mixed")
    assert estimate.gathered == (root + 2 * block) * 2  # root unit + current and prefetched block, in bf16
    assert estimate_memory(model, strategy="ddp", devices=4).gathered == 0
    assert estimate_memory(model, strategy="fsdp_full_shard", devices=1).gathered == 0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"strategy": "zero4"}, r"`strategy` must be one of .*got 'zero4'"),
        ({"optimizer": "adafactor"}, r"`optimizer` must be one of .*got 'adafactor'"),
        ({"precision": "8-true"}, r"`precision` must be one of .*got '8-true'"),
        ({"devices": 0}, r"`devices` must be an integer >= 1, got 0"),
        ({"num_nodes": 1.5}, r"`num_nodes` must be an integer >= 1, got 1.5"),
        ({"sample_batch": torch.zeros(1)}, "`sample_batch` needs a model"),
        ({"model_or_num_params": 0}, "positive count, got 0"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        estimate_memory(**{"model_or_num_params": 1000, **kwargs})


def test_fits_uses_headroom() -> None:
    estimate = estimate_memory(1024**3 // 16, optimizer="adamw")  # exactly 1 GiB of model state
    assert estimate.total == 1024**3
    assert estimate.fits(1.0, headroom=0.0)
    assert not estimate.fits(1.0, headroom=0.1)
    assert estimate.fits(1.2, headroom=0.15)


@pytest.mark.parametrize(
    ("precision", "shard_bytes", "unsharded_bytes"),
    [
        ("bf16-mixed", 4, 2),  # fp32 shard; Lightning's FSDP MixedPrecision(param_dtype=bf16) gathers in bf16
        ("16-mixed", 4, 2),
        ("32-true", 4, 4),  # param_dtype fp32: the unsharded copy is fp32 too
        ("bf16-true", 2, 2),  # the module itself is bf16: shard and copy both 2 bytes
    ],
)
def test_shard_grad_op_keeps_unsharded_copies_in_the_compute_dtype(
    precision: str, shard_bytes: int, unsharded_bytes: int
) -> None:
    # SHARD_GRAD_OP shards as FULL_SHARD but keeps each unit's unsharded copy (param_dtype) until backward
    n = 14 * G
    estimate = estimate_memory(n, precision=precision, strategy="fsdp_shard_grad_op", devices=8)
    assert estimate.parameters == n // 8 * shard_bytes
    assert estimate.gathered == n * unsharded_bytes
    assert estimate.gradients == n // 8 * shard_bytes
    assert estimate.optimizer_state == n // 8 * 2 * shard_bytes
    single = estimate_memory(n, precision=precision, strategy="fsdp_shard_grad_op", devices=1)
    assert single.gathered == 0  # one process: FSDP uses NO_SHARD, nothing is gathered


def test_fourteen_billion_bf16_fits_shard_grad_op_on_eight_80gb_gpus() -> None:
    # 7 + 28 + 7 + 14 = 56 GB = 52.2 GiB <= 68 GiB; with fp32 unsharded weights (56 GB) it would not
    from lightning_recipes.strategies import recommend_strategy

    rec = recommend_strategy(14 * G, devices=8, device_memory_gb=80)
    assert rec.preset == "fsdp_shard_grad_op", str(rec)
    assert rec.estimate is not None and rec.estimate.total == 56 * G
