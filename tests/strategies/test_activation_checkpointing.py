"""`checkpoint_blocks` outside FSDP: same gradients (dropout replayed), same state dict, Hugging Face."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.strategies import FSDPStrategy, ModelParallelStrategy
from torch import nn
from torch.utils.data import DistributedSampler

from lightning_recipes.strategies import apply_fsdp2, checkpoint_blocks, checkpointed_blocks
from lightning_recipes.strategies.activation_checkpointing import ActivationCheckpointingMixin
from lightning_recipes.testing import (
    InMemoryLogger,
    TinyTransformerLM,
    TransformerBlock,
    fast_trainer,
    random_token_loader,
)

transformers = pytest.importorskip("transformers", reason="needs transformers (the `dev` group)")

GPT2_BLOCK = "transformers.models.gpt2.modeling_gpt2.GPT2Block"
LAYER_NORMS = ["blocks.0.ln_1", "blocks.0.ln_2", "blocks.1.ln_1", "blocks.1.ln_2", "ln_f"]  # of a 2-block LM


def _tiny_lm(n_layers: int = 3, dropout: float = 0.0) -> TinyTransformerLM:
    torch.manual_seed(0)
    model = TinyTransformerLM(vocab_size=32, d_model=32, n_heads=2, n_layers=n_layers, max_seq_len=16)
    nn.init.normal_(model.head.weight, std=0.02)  # a zero head gives the blocks zero gradients
    for block in model.blocks:
        block.dropout = dropout
    return model


def _tokens() -> tuple[torch.Tensor, torch.Tensor]:
    data = torch.randint(0, 32, (4, 17), generator=torch.Generator().manual_seed(1))
    return data[:, :-1], data[:, 1:]


Grads = tuple[float, dict[str, torch.Tensor]]


def _loss_and_grads(model: nn.Module, step: Callable[[Any], torch.Tensor]) -> Grads:
    model.train()
    model.zero_grad(set_to_none=True)
    torch.manual_seed(123)  # both runs draw the same dropout masks in forward
    loss = step(model)
    loss.backward()
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    return float(loss.detach()), grads


def _lm_step(model: TinyTransformerLM) -> torch.Tensor:
    tokens, target = _tokens()
    return model.loss(model(tokens), target)


def _assert_same(plain: Grads, checkpointed: Grads) -> None:
    assert checkpointed[0] == pytest.approx(plain[0], rel=1e-6, abs=0)
    assert checkpointed[1].keys() == plain[1].keys() and plain[1]
    for name, grad in plain[1].items():
        torch.testing.assert_close(checkpointed[1][name], grad, rtol=1e-5, atol=1e-7, msg=name)


@pytest.mark.parametrize("dropout", [0.0, 0.3])
def test_gradients_equal_with_and_without_checkpointing(dropout: float) -> None:
    plain = _tiny_lm(dropout=dropout)
    checkpointed = copy.deepcopy(plain)
    assert checkpoint_blocks(checkpointed) == ["blocks.0", "blocks.1", "blocks.2"]
    reference = _loss_and_grads(plain, _lm_step)
    _assert_same(reference, _loss_and_grads(checkpointed, _lm_step))
    if dropout:  # the masks matter: another seed gives another loss, so equality above is not by luck
        plain.zero_grad()
        torch.manual_seed(7)
        assert float(_lm_step(plain)) != pytest.approx(reference[0], rel=1e-4)


def test_recomputation_really_happens() -> None:
    """Each checkpointed block runs its forward twice per step (once in forward, once in backward)."""
    model = _tiny_lm(n_layers=2)
    checkpoint_blocks(model)
    calls: list[str] = []
    for index, block in enumerate(model.blocks):
        block.fc.register_forward_hook(lambda *_, i=index: calls.append(f"block{i}"))
    _loss_and_grads(model, _lm_step)
    assert calls == ["block0", "block1", "block1", "block0"]


def test_state_dict_unchanged_and_checkpoints_load_both_ways() -> None:
    plain = _tiny_lm()
    checkpointed = _tiny_lm()
    keys = list(plain.state_dict())
    checkpoint_blocks(checkpointed)
    assert list(checkpointed.state_dict()) == keys
    assert [n for n, _ in checkpointed.named_parameters()] == [n for n, _ in plain.named_parameters()]
    # saved without checkpointing -> loaded into a checkpointed model (strict), and back
    trained = _tiny_lm()
    with torch.no_grad():
        for p in trained.parameters():
            p.add_(torch.randn_like(p))
    checkpointed.load_state_dict(trained.state_dict(), strict=True)
    for name, tensor in trained.state_dict().items():
        assert torch.equal(checkpointed.state_dict()[name], tensor), name
    restored = _tiny_lm()
    restored.load_state_dict(checkpointed.state_dict(), strict=True)
    _assert_same(_loss_and_grads(trained, _lm_step), _loss_and_grads(restored, _lm_step))
    _assert_same(_loss_and_grads(trained, _lm_step), _loss_and_grads(checkpointed, _lm_step))


def test_idempotent() -> None:
    model = _tiny_lm(n_layers=2)
    first = checkpoint_blocks(model)
    hooks = [len(b._forward_pre_hooks) + len(b._forward_hooks) for b in model.blocks]
    assert checkpoint_blocks(model) == first == checkpointed_blocks(model) == ["blocks.0", "blocks.1"]
    assert [len(b._forward_pre_hooks) + len(b._forward_hooks) for b in model.blocks] == hooks
    _assert_same(_loss_and_grads(_tiny_lm(n_layers=2), _lm_step), _loss_and_grads(model, _lm_step))


def test_explicit_block_classes_by_class_and_import_path() -> None:
    by_class, by_path = _tiny_lm(), _tiny_lm()
    expected = ["blocks.0", "blocks.1", "blocks.2"]
    assert checkpoint_blocks(by_class, TransformerBlock) == expected
    assert checkpoint_blocks(by_path, ["lightning_recipes.testing.models.TransformerBlock"]) == expected
    # an inner class: its instances inside the blocks are checkpointed, the blocks are not
    inner = _tiny_lm(n_layers=2)
    assert checkpoint_blocks(inner, "torch.nn.LayerNorm") == LAYER_NORMS
    assert checkpointed_blocks(inner)[0] == "blocks.0.ln_1"


@pytest.mark.parametrize(
    ("block_classes", "match"),
    [
        (nn.GRU, r"`block_classes` \(GRU\) has no instance in TinyTransformerLM"),
        ("torch.nn.NoSuchLayer", r"`block_classes` entry 'torch.nn.NoSuchLayer' cannot be imported"),
        ("TransformerBlock", r"`block_classes` entries must be full import paths.*'TransformerBlock'"),
        ("torch.optim.AdamW", r"`block_classes` must hold nn.Module subclasses.*'torch.optim.AdamW'"),
        ([], r"`block_classes` must name at least one class"),
    ],
)
def test_bad_block_classes_raise(block_classes: object, match: str) -> None:
    model = _tiny_lm(n_layers=2)
    with pytest.raises(ValueError, match=match):
        checkpoint_blocks(model, block_classes)  # type: ignore[arg-type]
    assert checkpointed_blocks(model) == []


def test_nothing_repeats_raises_naming_block_classes() -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Conv1d(8, 8, 1))
    with pytest.raises(ValueError, match=r"no submodule type with parameters occurs twice.*`block_classes="):
        checkpoint_blocks(model)


# ---- Hugging Face GPT-2 (random weights from a tiny config: no download) ---------------------------------


def _gpt2(dropout: float) -> nn.Module:
    torch.manual_seed(0)
    dropouts = {"resid_pdrop": dropout, "embd_pdrop": dropout, "attn_pdrop": dropout}
    sizes = {"n_layer": 2, "n_embd": 32, "n_head": 2, "vocab_size": 64, "n_positions": 32}
    config = transformers.GPT2Config(**sizes, **dropouts, attn_implementation="eager")
    assert config.use_cache is True  # as GPT-2 ships
    return transformers.GPT2LMHeadModel(config)


def _gpt2_step(model: nn.Module) -> torch.Tensor:
    tokens = torch.randint(0, 64, (3, 12), generator=torch.Generator().manual_seed(2))
    return model(input_ids=tokens, labels=tokens).loss


@pytest.mark.parametrize("dropout", [0.0, 0.2])
def test_gpt2_same_loss_and_grads_and_cache_turned_off(dropout: float) -> None:
    plain = _gpt2(dropout)
    checkpointed = copy.deepcopy(plain)
    with pytest.warns(UserWarning, match=r"use_cache=False` on `GPT2LMHeadModel.config`"):
        names = checkpoint_blocks(checkpointed)
    assert names == ["transformer.h.0", "transformer.h.1"]
    assert checkpointed.config.use_cache is False and plain.config.use_cache is True
    assert list(checkpointed.state_dict()) == list(plain.state_dict())
    _assert_same(_loss_and_grads(plain, _gpt2_step), _loss_and_grads(checkpointed, _gpt2_step))


def test_gpt2_explicit_import_path_and_keeping_the_cache() -> None:
    model = _gpt2(0.0)
    names = checkpoint_blocks(model, GPT2_BLOCK, disable_kv_cache=False)
    assert names == ["transformer.h.0", "transformer.h.1"]
    assert model.config.use_cache is True


class _SharedBlock(nn.Module):
    """One block registered twice (encoder and decoder share it) and run twice per forward."""

    def __init__(self) -> None:
        super().__init__()
        shared = TransformerBlock(16, 2, dropout=0.2)
        self.encoder = nn.ModuleList([shared, TransformerBlock(16, 2, dropout=0.2)])
        self.decoder = nn.ModuleList([shared])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in [*self.encoder, *self.decoder]:
            x = block(x)
        return x


def test_a_block_registered_twice_is_checkpointed_once() -> None:
    torch.manual_seed(0)
    plain = _SharedBlock()
    checkpointed = copy.deepcopy(plain)
    assert checkpoint_blocks(checkpointed) == ["encoder.0", "encoder.1"]
    x = torch.randn(2, 5, 16, generator=torch.Generator().manual_seed(3))
    step = lambda m: m(x).square().mean()  # noqa: E731
    _assert_same(_loss_and_grads(plain, step), _loss_and_grads(checkpointed, step))


# ---- ActivationCheckpointingMixin in a real Trainer ------------------------------------------------------


class _LM(TinyTransformerLM):
    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__(vocab_size=32, d_model=32, n_heads=2, n_layers=2, max_seq_len=16)
        nn.init.normal_(self.head.weight, std=0.02)
        for block in self.blocks:
            block.dropout = dropout

    def configure_optimizers(self) -> torch.optim.Optimizer:
        # SGD: weights compare exactly; Adam would blow float noise in the zero-expected grads (the key bias)
        # up to full steps of size lr
        return torch.optim.SGD(self.parameters(), lr=0.5)


class _CheckpointedLM(ActivationCheckpointingMixin, _LM):
    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        assert checkpointed_blocks(self) == ["blocks.0", "blocks.1"]  # runs in the DDP workers too
        return super().training_step(batch, batch_idx)


def _loader(batch_size: int = 8) -> torch.utils.data.DataLoader:
    return random_token_loader(num_samples=32, seq_len=16, vocab_size=32, batch_size=batch_size)


def _fit(model: pl.LightningModule, tmp_path: Path, **trainer_args: Any) -> InMemoryLogger:
    logger = InMemoryLogger()
    settings: dict[str, Any] = {"max_epochs": 1, "logger": logger, "log_every_n_steps": 1}
    settings.update(trainer_args)
    batch = settings.pop("batch", 8)
    fast_trainer(default_root_dir=tmp_path, **settings).fit(model, _loader(batch))
    return logger


def _assert_same_weights(a: nn.Module, b: nn.Module) -> None:
    assert list(a.state_dict()) == list(b.state_dict())
    for name, tensor in a.state_dict().items():
        torch.testing.assert_close(b.state_dict()[name], tensor, rtol=1e-5, atol=1e-6, msg=name)


def test_mixin_trains_like_the_plain_model_with_dropout(tmp_path: Path) -> None:
    pl.seed_everything(0)
    plain = _LM(dropout=0.2)
    pl.seed_everything(0)
    checkpointed = _CheckpointedLM(dropout=0.2)
    _assert_same_weights(plain, checkpointed)
    pl.seed_everything(1)
    expected = _fit(plain, tmp_path / "plain").history("train_loss")
    pl.seed_everything(1)
    losses = _fit(checkpointed, tmp_path / "ckpt").history("train_loss")
    assert len(losses) == 4 and [s for s, _ in losses] == [s for s, _ in expected]
    assert [v for _, v in losses] == pytest.approx([v for _, v in expected], rel=1e-5)
    _assert_same_weights(plain, checkpointed)
    assert checkpointed_blocks(plain) == []


class _SplitCheckpointedLM(_CheckpointedLM):
    """Rank r reads samples r, r + 2, ... in order: the ranks' batches of 4 together are batch k of 8."""

    def train_dataloader(self) -> torch.utils.data.DataLoader:
        dataset = _loader().dataset
        sampler = DistributedSampler(dataset, self.trainer.world_size, self.global_rank, shuffle=False)
        return torch.utils.data.DataLoader(dataset, batch_size=4, sampler=sampler)


def test_mixin_under_ddp_matches_one_process_on_the_global_batch(tmp_path: Path) -> None:
    # fork workers (no re-import: seconds, where spawn took ~55 s); the preset pickles for spawn elsewhere
    pl.seed_everything(0)
    reference = _LM()
    pl.seed_everything(0)
    model = _SplitCheckpointedLM()
    _fit(reference, tmp_path / "one", batch=8)
    ddp = {"strategy": "ddp_fork", "devices": 2, "use_distributed_sampler": False}
    fast_trainer(default_root_dir=tmp_path, **ddp).fit(model)
    _assert_same_weights(reference, model)


def test_resume_from_a_checkpoint_saved_without_checkpointing(tmp_path: Path) -> None:
    pl.seed_everything(0)
    uninterrupted = _LM()
    _fit(uninterrupted, tmp_path / "full", max_epochs=2)
    pl.seed_everything(0)
    first_half = _LM()
    trainer = fast_trainer(default_root_dir=tmp_path, max_epochs=1)
    trainer.fit(first_half, _loader())
    trainer.save_checkpoint(tmp_path / "half.ckpt")
    resumed = _CheckpointedLM()
    trainer = fast_trainer(default_root_dir=tmp_path, max_epochs=2)
    trainer.fit(resumed, _loader(), ckpt_path=tmp_path / "half.ckpt")
    _assert_same_weights(uninterrupted, resumed)
    # and the checkpointed model's checkpoint loads into the plain model
    trainer_state = torch.load(tmp_path / "half.ckpt", weights_only=False)["state_dict"]
    _LM().load_state_dict(trainer_state, strict=True)
    back = _LM()
    back.load_state_dict(resumed.state_dict(), strict=True)
    _assert_same_weights(uninterrupted, back)


class _NoCheckpointingLM(_CheckpointedLM):
    activation_checkpointing = False


class _InnerBlocksLM(_CheckpointedLM):
    checkpoint_block_classes = "torch.nn.LayerNorm"


def test_mixin_settings_and_idempotence() -> None:
    off = _NoCheckpointingLM()
    off.configure_model()
    assert checkpointed_blocks(off) == []
    inner = _InnerBlocksLM()
    inner.configure_model()
    inner.configure_model()  # fit, then test: a second call changes nothing
    assert checkpointed_blocks(inner) == LAYER_NORMS
    bad = _CheckpointedLM()
    bad.activation_checkpointing = "yes"  # type: ignore[assignment]
    with pytest.raises(TypeError, match="`activation_checkpointing`"):
        bad.configure_model()


def _under_fsdp2_strategy(model: _CheckpointedLM) -> None:
    model.trainer = pl.Trainer(strategy=ModelParallelStrategy(), accelerator="cpu", devices=1, logger=False)


def _wrapped(model: _CheckpointedLM) -> None:  # no second, composable checkpoint inside the wrapper
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import apply_activation_checkpointing

    apply_activation_checkpointing(model, check_fn=lambda m: isinstance(m, TransformerBlock))


def _sharded(model: _CheckpointedLM) -> None:
    apply_fsdp2(model, activation_checkpointing=False)


@pytest.mark.parametrize("prepare", [_under_fsdp2_strategy, _wrapped, _sharded])
@pytest.mark.usefixtures("single_process_group")
def test_mixin_leaves_checkpointing_to_fsdp_or_an_existing_wrapper(prepare: Callable[[Any], None]) -> None:
    model = _CheckpointedLM()
    prepare(model)
    model.configure_model()
    assert checkpointed_blocks(model) == []


@pytest.mark.gpu
def test_mixin_leaves_checkpointing_to_the_fsdp1_strategy() -> None:
    """Lightning's FSDPStrategy (FSDP1) needs a CUDA accelerator even to be built."""
    model = _CheckpointedLM()
    model.trainer = pl.Trainer(strategy=FSDPStrategy(), accelerator="cuda", devices=1, logger=False)
    model.configure_model()
    assert checkpointed_blocks(model) == []


def test_the_mixin_is_importable_where_the_readme_and_speed_tune_advice_say() -> None:
    from lightning_recipes.strategies import ActivationCheckpointingMixin
    from lightning_recipes.strategies import activation_checkpointing as module
    from lightning_recipes.tune import OPTIONS

    assert ActivationCheckpointingMixin is module.ActivationCheckpointingMixin
    assert "lightning_recipes.strategies" in OPTIONS["activation_checkpointing"].advice
