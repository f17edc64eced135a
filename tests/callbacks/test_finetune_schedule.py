"""FinetuneSchedule: LR of every group at every step (frozen, warm-up, schedule), trainable counts per group,
frozen weights bitwise still, kill-and-resume bitwise across the unfreeze point, errors, DDP."""

from __future__ import annotations

import math
import pickle
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from torch import nn
from torch.multiprocessing.spawn import ProcessRaisedException
from torch.nn import functional as F

from lightning_recipes.callbacks.finetune_schedule import FinetuneSchedule
from lightning_recipes.mixins import OptimizerRecipeMixin
from lightning_recipes.optim import param_groups
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.testing import fast_trainer, random_classification_loader
from tests.callbacks._shared import Kill

UNFREEZE, WARMUP, TOTAL = 6, 3, 12


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.fc = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc(self.norm(x))


class FTNet(OptimizerRecipeMixin, pl.LightningModule):
    """backbone (stem + 2 blocks) -> head."""

    def __init__(self, recipe: OptimizerRecipe | None = None) -> None:
        super().__init__()
        self.recipe = recipe
        self.backbone = nn.Sequential(nn.Linear(16, 8), Block(8), Block(8))
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.backbone(x))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


class Record(Callback):
    """LRs, trainable parameters per group and optimizer-state presence at the start of every step."""

    def __init__(self) -> None:
        self.lrs: list[list[float]] = []
        self.trainable: list[dict[str, int]] = []
        self.backbone_state: list[bool] = []
        self.backbone_still: list[bool] = []
        self.initial: list[torch.Tensor] = []

    def on_fit_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.initial = [p.detach().clone() for p in pl_module.backbone.parameters()]

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, *args: Any) -> None:
        optimizer = trainer.optimizers[0]
        groups = optimizer.param_groups
        self.lrs.append([g["lr"] for g in groups])
        trainable = {g["name"]: sum(p.numel() for p in g["params"] if p.requires_grad) for g in groups}
        self.trainable.append(trainable)
        backbone = list(pl_module.backbone.parameters())
        self.backbone_state.append(any(p in optimizer.state for p in backbone))
        self.backbone_still.append(all(torch.equal(a, b) for a, b in zip(self.initial, backbone)))


def _cosine(step: int, warmup: int = 2, total: int = TOTAL, min_ratio: float = 0.1) -> float:
    if step < warmup:
        return step / warmup
    progress = (step - warmup) / (total - warmup)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))


def _recipe(optimizer: str = "adamw") -> OptimizerRecipe:
    return OptimizerRecipe(
        optimizer, lr=0.01, schedule="cosine", warmup_steps=2, min_lr_ratio=0.1, layer_decay=0.5
    )


@pytest.mark.parametrize("optimizer", ["adamw", "lion", "lamb"])
def test_lr_table_counts_and_frozen_weights(tmp_path, optimizer):
    torch.manual_seed(0)
    model, record = FTNet(_recipe(optimizer)), Record()
    callback = FinetuneSchedule("backbone", unfreeze_at_step=UNFREEZE, warmup_steps=WARMUP)
    trainer = fast_trainer(max_steps=TOTAL, callbacks=[callback, record], default_root_dir=tmp_path)
    trainer.fit(model, random_classification_loader(num_samples=384, batch_size=32))
    assert callback.unfrozen_at == UNFREEZE
    groups = trainer.optimizers[0].param_groups
    names = [g["name"] for g in groups]
    parts = ["embed/backbone/", "block_0/backbone/", "block_1/backbone/", "head/"]
    assert names == [f"{part}{kind}" for part in parts for kind in ("decay", "no_decay")]
    scales = [0.125, 0.125, 0.25, 0.25, 0.5, 0.5, 1.0, 1.0]
    for step, row in enumerate(record.lrs):
        thaw = 0.0 if step < UNFREEZE else min(1.0, (step - UNFREEZE + 1) / WARMUP)
        want = [0.01 * s * _cosine(step) * (thaw if "backbone" in n else 1.0) for n, s in zip(names, scales)]
        assert row == pytest.approx(want, rel=1e-12, abs=1e-15), step
    sizes = {g["name"]: sum(p.numel() for p in g["params"]) for g in groups}
    frozen = {n: (0 if "backbone" in n else sizes[n]) for n in names}
    assert record.trainable[:UNFREEZE] == [frozen] * UNFREEZE
    assert record.trainable[UNFREEZE:] == [sizes] * (TOTAL - UNFREEZE)
    assert sizes["embed/backbone/decay"] == 128 and sizes["head/no_decay"] == 4
    # frozen: bitwise still and no optimizer state until the unfreeze step; trained after it
    assert record.backbone_still == [True] * (UNFREEZE + 1) + [False] * (TOTAL - UNFREEZE - 1)
    assert record.backbone_state == [False] * (UNFREEZE + 1) + [True] * (TOTAL - UNFREEZE - 1)


def test_unfreeze_at_epoch_uses_the_step_the_epoch_starts_at(tmp_path):
    callback = FinetuneSchedule(["backbone.1", "backbone.2"], unfreeze_at_epoch=1)
    model, record = FTNet(OptimizerRecipe(schedule="constant", warmup_steps=0)), Record()
    trainer = fast_trainer(max_epochs=2, callbacks=[callback, record], default_root_dir=tmp_path)
    trainer.fit(model, random_classification_loader(num_samples=96, batch_size=32))
    assert callback.unfrozen_at == 3
    names = [g["name"] for g in trainer.optimizers[0].param_groups]
    assert names == ["decay", "no_decay", "backbone.1/decay", "backbone.1/no_decay", "backbone.2/decay",
                     "backbone.2/no_decay"]  # fmt: skip
    assert [row[2:] for row in record.lrs] == [[0.0] * 4] * 3 + [[1e-3] * 4] * 3  # no warm-up: at once


def _run(directory: Path, extra: list[Callback], ckpt_path: Path | None = None, seed: int = 0) -> Any:
    torch.manual_seed(seed)
    model = FTNet(_recipe("lamb"))
    # a 5-step warm-up (steps 6-10): the step-8 checkpoint falls inside it; the resumed run must rebuild the
    # unfrozen groups' multiplier, not only their requires_grad
    callback = FinetuneSchedule("backbone", unfreeze_at_step=UNFREEZE, warmup_steps=5)
    checkpoint = ModelCheckpoint(
        directory, "{step}", save_top_k=-1, every_n_epochs=1, save_on_train_epoch_end=True
    )
    callbacks = [callback, checkpoint, *extra]
    trainer = fast_trainer(
        max_epochs=3, callbacks=callbacks, enable_checkpointing=True, default_root_dir=directory
    )
    trainer.fit(model, random_classification_loader(num_samples=128, batch_size=32), ckpt_path=ckpt_path)
    return model, trainer, callback


def test_kill_and_resume_across_the_unfreeze_point_is_bitwise(tmp_path):
    """Killed at step 9; resumes from 4 (before the unfreeze) and 8 (in the warm-up) end bitwise equal."""
    reference, trainer, callback = _run(tmp_path / "uninterrupted", [])
    with pytest.raises(KeyError, match="killed"):
        _run(tmp_path / "killed", [Kill(9)])
    for resume_from in (4, 8):
        path = tmp_path / "killed" / f"step={resume_from}.ckpt"
        resumed, resumed_trainer, resumed_callback = _run(tmp_path / f"resumed{resume_from}", [], path, 123)
        assert resumed_trainer.global_step == trainer.global_step == TOTAL
        assert resumed_callback.unfrozen_at == callback.unfrozen_at == UNFREEZE
        for (name, a), b in zip(reference.state_dict().items(), resumed.state_dict().values()):
            assert torch.equal(a, b), (resume_from, name)
        state_a, state_b = trainer.optimizers[0].state_dict(), resumed_trainer.optimizers[0].state_dict()
        assert [g["lr"] for g in state_a["param_groups"]] == [g["lr"] for g in state_b["param_groups"]]
        for index, values in state_a["state"].items():
            for key, value in values.items():
                assert torch.equal(value, state_b["state"][index][key]), (resume_from, index, key)


def test_state_round_trip_and_old_checkpoints():
    callback = FinetuneSchedule("backbone", unfreeze_at_step=3)
    callback.unfrozen_at = 7
    other = FinetuneSchedule("backbone", unfreeze_at_step=3)
    other.load_state_dict(callback.state_dict())
    assert other.unfrozen_at == 7
    other.load_state_dict({})
    assert other.unfrozen_at is None
    assert "backbone" in callback.state_key


class OwnOptimizerNet(FTNet):
    def __init__(self, split: bool, schedule: bool = True) -> None:
        super().__init__()
        self.split, self.schedule = split, schedule

    def configure_optimizers(self) -> Any:
        groups = param_groups(self, 0.01, split=["backbone"] if self.split else ())
        optimizer = torch.optim.AdamW(groups, lr=1e-3)
        if not self.schedule:
            return optimizer
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


@pytest.mark.parametrize(
    ("model", "modules", "match"),
    [
        (OwnOptimizerNet(split=False), "backbone", "'decay' mixes parameters of \\['backbone'\\].*split="),
        (OwnOptimizerNet(split=True, schedule=False), "backbone", "needs a per-step LambdaLR"),
        (OwnOptimizerNet(split=True), "trunk", "'trunk' is not a submodule of OwnOptimizerNet"),
    ],
)
def test_fit_start_errors(tmp_path, model, modules, match):
    callback = FinetuneSchedule(modules, unfreeze_at_step=1)
    trainer = fast_trainer(max_steps=2, callbacks=[callback], default_root_dir=tmp_path)
    with pytest.raises(ValueError, match=match):
        trainer.fit(model, random_classification_loader())


def test_own_configure_optimizers_with_split_works(tmp_path):
    callback = FinetuneSchedule("backbone", unfreeze_at_step=1)
    trainer = fast_trainer(max_steps=3, callbacks=[callback], default_root_dir=tmp_path)
    trainer.fit(OwnOptimizerNet(split=True), random_classification_loader())
    assert callback.unfrozen_at == 1


class CheckRanks(Callback):
    """Inside the workers: frozen weights still before the unfreeze, equal on both ranks at the end."""

    def on_fit_start(self, trainer: pl.Trainer, pl_module: Any) -> None:
        self.initial = [p.detach().clone() for p in pl_module.backbone.parameters()]

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, *args: Any) -> None:
        if trainer.global_step <= UNFREEZE:
            backbone = list(pl_module.backbone.parameters())
            assert all(torch.equal(a, b) for a, b in zip(self.initial, backbone))
            # DDP (find_unused_parameters) leaves their gradients unset: no zero gradient, no optimizer state
            assert all(p.grad is None for p in backbone)
            assert not any(p in trainer.optimizers[0].state for p in backbone)

    def on_train_end(self, trainer: pl.Trainer, pl_module: Any) -> None:
        flat = torch.cat([p.detach().flatten() for p in pl_module.parameters()])
        gathered = trainer.strategy.all_gather(flat)
        assert torch.equal(gathered[0], gathered[1])
        assert not all(torch.equal(a, b) for a, b in zip(self.initial, pl_module.backbone.parameters()))


def test_ddp_two_processes(tmp_path):
    """Forked ranks with a pickled callback and model, as ddp_spawn's (no fresh interpreters)."""
    callback = FinetuneSchedule("backbone", unfreeze_at_step=UNFREEZE, warmup_steps=WARMUP)
    callback = pickle.loads(pickle.dumps(callback))
    trainer = fast_trainer(max_steps=TOTAL - 2, devices=2, strategy="ddp_fork_find_unused_parameters_true",
                           callbacks=[callback, CheckRanks()], default_root_dir=tmp_path)  # fmt: skip
    # rank-dependent data: without the gradient all-reduce the ranks would drift apart
    model = pickle.loads(pickle.dumps(FTNet(_recipe())))
    trainer.fit(model, random_classification_loader(num_samples=640, batch_size=16, shuffle=True))


def test_ddp_without_find_unused_parameters_is_refused(tmp_path):
    callback = FinetuneSchedule("backbone", unfreeze_at_step=1)
    trainer = fast_trainer(
        max_steps=2, devices=2, strategy="ddp_fork", callbacks=[callback], default_root_dir=tmp_path
    )
    # the worker's ValueError reaches this process as torch's ProcessRaisedException, message included
    with pytest.raises(ProcessRaisedException, match="under DDP needs `find_unused_parameters=True`"):
        trainer.fit(FTNet(_recipe()), random_classification_loader())


class GPT2Module(OptimizerRecipeMixin, pl.LightningModule):
    """A transformers GPT-2 (small config): its `lm_head.weight` is `transformer.wte.weight` (tied)."""

    def __init__(self) -> None:
        super().__init__()
        transformers = pytest.importorskip("transformers")
        config = transformers.GPT2Config(vocab_size=50, n_positions=32, n_embd=16, n_layer=2, n_head=2)
        self.model = transformers.GPT2LMHeadModel(config)
        self.recipe = OptimizerRecipe(schedule="constant", warmup_steps=0, lr=1e-2)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        tokens, _ = batch
        return self.model(input_ids=tokens, labels=tokens).loss


class LMHeadSnapshots(Callback):
    def __init__(self) -> None:
        self.weights: list[torch.Tensor] = []

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: Any, *args: Any) -> None:
        self.weights.append(pl_module.model.lm_head.weight.detach().clone())


@pytest.mark.parametrize(
    ("frozen", "also"),
    [
        ("model.transformer.wte", "'model.lm_head.weight'"),
        ("model.lm_head", "'model.transformer.wte.weight'"),
    ],
)
def test_freezing_a_tied_module_warns_naming_both_paths(frozen: str, also: str) -> None:
    """Field report #22: freezing GPT-2's `wte` silently froze the tied `lm_head` too."""
    from lightning_recipes import _warn_once
    from lightning_recipes.testing import random_token_loader

    _warn_once._SAID.clear()
    model, snapshots = GPT2Module(), LMHeadSnapshots()
    callback = FinetuneSchedule([frozen], unfreeze_at_step=2)
    with pytest.warns(UserWarning, match="tied") as caught:
        fast_trainer(max_steps=4, callbacks=[callback, snapshots]).fit(
            model, random_token_loader(num_samples=32, seq_len=16, vocab_size=50, batch_size=8)
        )
    message = next(str(w.message) for w in caught if "FinetuneSchedule" in str(w.message))
    assert f"FinetuneSchedule freezes ['{frozen}'] of GPT2Module, and with them the tied" in message
    assert also in message
    weights = snapshots.weights
    assert torch.equal(weights[0], weights[1]) and torch.equal(weights[1], weights[2])  # frozen until step 2
    assert not torch.equal(weights[2], weights[3])


@pytest.mark.parametrize("model", [FTNet(), OwnOptimizerNet(split=True)], ids=["recipe", "own"])
def test_a_misspelt_module_is_named_with_close_matches(tmp_path, model):
    """Issue 32: not reported as a `split` prefix; names the callback's module and the close matches."""
    callback = FinetuneSchedule(["backbon"], unfreeze_at_step=1)
    match = r"'backbon' is not a submodule of \w+ \(close matches: 'backbone'"
    trainer = fast_trainer(max_steps=2, callbacks=[callback], default_root_dir=tmp_path)
    with pytest.raises(ValueError, match=match) as e:
        trainer.fit(model, random_classification_loader())
    assert "split" not in str(e.value)
