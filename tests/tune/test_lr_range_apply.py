"""``LRRangeTest(apply=True)`` scales the LR the run trains at, whatever the schedule."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from torch.optim import lr_scheduler as sched

from lightning_recipes.optim.schedules import (
    warmup_constant,
    warmup_cosine,
    warmup_linear,
    warmup_stable_decay,
)
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from lightning_recipes.tune import LRRangeTest
from lightning_recipes.tune.lr_range_callback import check_scalable, scale_schedule
from tests.tune._flat_models import AdamWClassifier

PEAK, STEPS = 0.1, 30


def _linear_then_cosine(o: torch.optim.Optimizer) -> list[Any]:
    return [
        sched.LinearLR(o, start_factor=0.1, total_iters=5),
        sched.CosineAnnealingLR(o, T_max=25, eta_min=0.01),
    ]


SCHEDULES: dict[str, Callable[[torch.optim.Optimizer], Any]] = {
    "OneCycleLR": lambda o: sched.OneCycleLR(o, max_lr=PEAK, total_steps=40),
    "CyclicLR": lambda o: sched.CyclicLR(o, base_lr=0.01, max_lr=PEAK, step_size_up=5),
    "CosineAnnealingLR-eta_min": lambda o: sched.CosineAnnealingLR(o, T_max=20, eta_min=0.01),
    "CosineAnnealingWarmRestarts": lambda o: sched.CosineAnnealingWarmRestarts(o, T_0=7, eta_min=0.02),
    "SequentialLR": lambda o: sched.SequentialLR(o, _linear_then_cosine(o), milestones=[5]),
    "ReduceLROnPlateau": lambda o: sched.ReduceLROnPlateau(o, factor=0.5, patience=1, min_lr=0.02),
    "StepLR": lambda o: sched.StepLR(o, step_size=5, gamma=0.5),
    "warmup_cosine": lambda o: warmup_cosine(o, warmup_steps=5, total_steps=STEPS, min_lr_ratio=0.1),
    "warmup_linear": lambda o: warmup_linear(o, warmup_steps=5, total_steps=STEPS),
    "warmup_constant": lambda o: warmup_constant(o, warmup_steps=5, total_steps=STEPS),
    "warmup_stable_decay": lambda o: warmup_stable_decay(o, 5, total_steps=STEPS, decay_steps=10),
}


def _optimizer(params: Any) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=PEAK, momentum=0.9)


class ScheduledClassifier(TinyClassifier):
    """SGD at ``PEAK`` with one of :data:`SCHEDULES`, stepped every step; logs a flat metric for plateaus."""

    def __init__(self, schedule: str = "StepLR") -> None:
        super().__init__()
        self.schedule = schedule

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        self.log("flat", 1.0)
        return super().training_step(batch, batch_idx)

    def configure_optimizers(self) -> Any:
        optimizer = _optimizer(self.parameters())
        config = {"scheduler": SCHEDULES[self.schedule](optimizer), "interval": "step", "monitor": "flat"}
        return {"optimizer": optimizer, "lr_scheduler": config}


class TrainedLR(pl.Callback):
    """The LR every optimizer step of the run uses."""

    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_before_optimizer_step(self, trainer: pl.Trainer, module: Any, optimizer: Any) -> None:
        self.lrs.append(float(optimizer.param_groups[0]["lr"]))


def _stepped(schedule: str, factor: float = 1.0) -> list[float]:
    """The schedule's LRs scaled by ``factor`` (check_scalable, scale_schedule), stepped as Lightning does."""
    optimizer = _optimizer([torch.zeros(1, requires_grad=True)])
    scheduler = SCHEDULES[schedule](optimizer)
    check_scalable([optimizer], [scheduler])
    scale_schedule([optimizer], [scheduler], factor)
    lrs = []
    for _ in range(STEPS):
        lrs.append(float(optimizer.param_groups[0]["lr"]))
        optimizer.step()
        scheduler.step(1.0) if isinstance(scheduler, sched.ReduceLROnPlateau) else scheduler.step()
    return lrs


@pytest.mark.parametrize("schedule", list(SCHEDULES))
def test_scale_schedule_scales_every_lr_the_schedule_reaches(schedule: str):
    """Before: OneCycleLR kept its max_lr, CyclicLR its max_lr, the cosines and the plateau their floors."""
    assert _stepped(schedule, 2.5) == pytest.approx([2.5 * lr for lr in _stepped(schedule)], rel=1e-6)


@pytest.mark.parametrize("schedule", ["OneCycleLR", "SequentialLR"])
def test_apply_scales_the_lr_the_run_trains_at(schedule: str):
    """The fit's schedule after apply is the unscaled one x peak_lr / peak (OneCycleLR was once 25x)."""
    torch.manual_seed(0)
    finder = LRRangeTest(num_steps=20, max_lr=1.0, apply=True, print_result=False)  # 10 read as inconclusive
    trained = TrainedLR()
    trainer = fast_trainer(max_steps=STEPS, max_epochs=-1, callbacks=[finder, trained])
    trainer.fit(ScheduledClassifier(schedule), random_classification_loader(num_samples=128))
    assert finder.result is not None
    factor = finder.result.peak_lr / PEAK
    assert abs(factor - 1.0) > 0.05  # the apply changes something worth checking
    assert trained.lrs == pytest.approx([factor * lr for lr in _stepped(schedule)], rel=1e-6)


class FloorLR(sched.LRScheduler):
    """Halves every step down to an absolute floor of its own: nothing outside the class knows the floor."""

    def __init__(self, optimizer: torch.optim.Optimizer, floor: float) -> None:
        self.floor = floor
        super().__init__(optimizer)

    def get_lr(self) -> list[float]:
        return [max(float(base) * 0.5**self.last_epoch, self.floor) for base in self.base_lrs]


class FloorClassifier(TinyClassifier):
    def configure_optimizers(self) -> Any:
        optimizer = _optimizer(self.parameters())
        scheduler = {"scheduler": FloorLR(optimizer, 0.05), "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": scheduler}


def test_a_schedule_the_apply_cannot_scale_is_refused_before_the_sweep():
    finder = LRRangeTest(num_steps=10, apply=True, print_result=False)
    with pytest.raises(ValueError, match=r"\(FloorLR\) does not scale"):
        fast_trainer(max_steps=2, callbacks=[finder]).fit(FloorClassifier(), random_classification_loader())
    assert finder.result is None  # refused before 10 sweep steps were spent
    finder = LRRangeTest(num_steps=10, stop=True, print_result=False)  # without apply: nothing to scale
    fast_trainer(max_steps=2, callbacks=[finder]).fit(FloorClassifier(), random_classification_loader())
    assert finder.result is not None


def test_check_scalable_leaves_the_run_untouched():
    optimizer = _optimizer([torch.zeros(1, requires_grad=True)])
    scheduler = SCHEDULES["OneCycleLR"](optimizer)
    before = ([dict(g, params=None) for g in optimizer.param_groups], scheduler.state_dict())
    check_scalable([optimizer], [scheduler])
    assert ([dict(g, params=None) for g in optimizer.param_groups], scheduler.state_dict()) == before


def test_scale_schedule_scales_tensor_learning_rates_in_place():
    param = torch.zeros(1, requires_grad=True)
    optimizer = torch.optim.Adam([param], lr=torch.tensor(0.01))
    scheduler = sched.CosineAnnealingLR(optimizer, T_max=10, eta_min=0.001)
    lr_tensor = optimizer.param_groups[0]["lr"]
    scale_schedule([optimizer], [scheduler], 3.0)
    assert optimizer.param_groups[0]["lr"] is lr_tensor and float(lr_tensor) == pytest.approx(0.03)
    assert scheduler.eta_min == pytest.approx(0.003) and float(scheduler.base_lrs[0]) == pytest.approx(0.03)


def _fit_applied(
    root: Path, ckpt_path: str | None = None
) -> tuple[LRRangeTest, TrainedLR, pl.LightningModule]:
    """8 steps with the sweep applied; a checkpoint every 4 steps in ``root``."""
    torch.manual_seed(0)
    model = AdamWClassifier(lr=1e-3)
    finder = LRRangeTest(num_steps=15, max_lr=1.0, apply=True, print_result=False)
    trained = TrainedLR()
    every_4 = ModelCheckpoint(dirpath=root, filename="{step}", every_n_train_steps=4, save_top_k=-1)
    callbacks = [finder, trained, every_4]
    trainer = fast_trainer(max_steps=8, max_epochs=-1, callbacks=callbacks, enable_checkpointing=True)
    trainer.fit(model, random_classification_loader(num_samples=128), ckpt_path=ckpt_path)
    return finder, trained, model


def test_the_state_round_trips_and_a_resumed_fit_trains_as_the_uninterrupted_one(tmp_path: Path):
    """Before: load_state_dict dropped `group_scales` (and any field it did not list by hand)."""
    full, full_lrs, full_model = _fit_applied(tmp_path / "full")
    assert full.result is not None and full.result.group_scales
    restored = LRRangeTest()
    restored.load_state_dict(full.state_dict())
    assert restored.state_dict() == full.state_dict() and restored.result == full.result
    step_4 = str(tmp_path / "full" / "step=4.ckpt")
    resumed, resumed_lrs, resumed_model = _fit_applied(tmp_path / "resumed", step_4)
    assert resumed.result == full.result  # restored, not swept again on trained weights
    assert resumed_lrs.lrs == pytest.approx(full_lrs.lrs[4:], rel=1e-6)
    for key, value in full_model.state_dict().items():
        assert torch.allclose(value, resumed_model.state_dict()[key], atol=1e-6), key
