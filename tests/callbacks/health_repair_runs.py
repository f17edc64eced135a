"""The repairable problem runs of ``HealthMonitor(repair=True)``, shared with its benchmark."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor
from torch import distributed as dist
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.field._field_data import loader, sequence_data, teacher_data
from galleries.health.field._field_models import FieldModule, FReluMLP, GeluMLP
from galleries.health.field._field_problems_optim import (
    _frelu_mlp_steplr_collapse,
    _gelu_mlp_adam_half,
    _gru_sgd_momentum_far_too_high,
)
from galleries.health.field._field_problems_run import _overfit_wide_mlp
from lightning_recipes.callbacks import HealthMonitor
from lightning_recipes.testing.trainers import fast_trainer

Build = Callable[[], tuple[pl.LightningModule, DataLoader, DataLoader]]


class WeightedLoss(FieldModule):
    """A classifier on ``(x, y, weight)`` with the weighted mean: all-zero weights give a NaN loss."""

    def training_step(self, batch: tuple[Tensor, Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y, w = batch
        return (w * F.cross_entropy(self.net(x), y, reduction="none")).sum() / w.sum()


ZERO_WEIGHT_BATCH = 100


class ZeroWeightsOnRank(Dataset):
    """``(x, y, weight)`` rows whose weights are 0 in ``rows`` when read on ``rank`` (``None``: every)."""

    def __init__(self, data: TensorDataset, rows: range, rank: int | None) -> None:
        self.data, self.rows, self.rank = data, rows, rank

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> tuple[Tensor, ...]:
        x, y = self.data[i]
        here = self.rank is None or (dist.is_initialized() and dist.get_rank() == self.rank)
        return x, y, torch.tensor(0.0 if here and i in self.rows else 1.0)


def weighted_zero_batch(rank: int | None = None) -> tuple[pl.LightningModule, DataLoader, DataLoader]:
    """An Adam MLP whose batch ``ZERO_WEIGHT_BATCH`` has all weights 0 (on ``rank`` only)."""
    rows = range(ZERO_WEIGHT_BATCH * 32, (ZERO_WEIGHT_BATCH + 1) * 32)
    data = ZeroWeightsOnRank(teacher_data(8192), rows, rank)
    model = WeightedLoss(FReluMLP(16, 64, 4, depth=2), lambda p: torch.optim.Adam(p, lr=1e-3))
    return model, DataLoader(data, batch_size=32, shuffle=False), validation()


def lr_reaches_zero() -> tuple[pl.LightningModule, DataLoader, DataLoader]:
    """SGD + momentum whose schedule sets the LR to exactly 0 at step 80."""
    model = FieldModule(
        FReluMLP(16, 64, 4, depth=2),
        lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.9, weight_decay=5e-4),
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda step: 1.0 if step < 80 else 0.0),
    )
    return model, loader(teacher_data(8192), 32), validation()


def lr_spike_left() -> tuple[pl.LightningModule, DataLoader, DataLoader]:
    """Adam at 1e-3 whose LR is 20x for steps 100-119 only: the run recovers by itself."""
    model = FieldModule(
        GeluMLP(16, 64, 4, depth=2),
        lambda p: torch.optim.Adam(p, lr=1e-3),
        lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda step: 20.0 if 100 <= step < 120 else 1.0),
    )
    return model, loader(teacher_data(8192), 32), validation()


def validation() -> DataLoader:
    return loader(teacher_data(1024, seed=7), 1024, shuffle=False)


def _with_validation(build: Callable[[], Any]) -> Build:
    def built() -> tuple[pl.LightningModule, DataLoader, DataLoader]:
        model, train, _ = build()
        return model, train, validation()

    return built


@dataclass
class RepairRun:
    name: str
    build: Build
    max_steps: int
    check_every: int = 20
    val_every_n_steps: int | None = 50  # None: every epoch
    description: str = ""


RUNS = [
    RepairRun(
        "lr_far_too_high", _with_validation(_gelu_mlp_adam_half), 400, description="GELU MLP, Adam lr 0.5"
    ),
    RepairRun(
        "gru_sgd_lr_20",
        lambda: (
            *_gru_sgd_momentum_far_too_high()[:2],
            loader(sequence_data(1024, seed=7), 1024, shuffle=False),
        ),
        400,
        description="GRU, SGD + momentum 0.9 at lr 20",
    ),
    RepairRun(
        "steplr_collapse",
        _with_validation(_frelu_mlp_steplr_collapse),
        400,
        description="SGD+momentum, StepLR(gamma=1e-6) at step 80",
    ),
    RepairRun("lr_reaches_zero", lr_reaches_zero, 240, description="SGD+momentum, LR set to 0 at step 80"),
    RepairRun(
        "overfitting",
        _overfit_wide_mlp,
        240,
        val_every_n_steps=None,
        description="256-wide GELU MLP on 32 noisy samples",
    ),
    RepairRun(
        "nonfinite_update", weighted_zero_batch, 400, description="weighted loss, one batch all-0 weights"
    ),
    RepairRun(
        "lr_spike_left",
        lr_spike_left,
        300,
        description="Adam, LR 20x for steps 100-119 only: the run recovers by itself (no repair is right)",
    ),
    RepairRun(
        "nonfinite_update_rank1",
        lambda: weighted_zero_batch(rank=1),
        160,
        description="as nonfinite_update, the all-0 batch on rank 1 only (DDP, 2 ranks)",
    ),
]


@dataclass
class Outcome:
    """One trained run: its monitor, trainer, model and final validation loss."""

    monitor: HealthMonitor
    trainer: pl.Trainer
    model: pl.LightningModule
    val_loss: float
    seconds: float


def run(
    case: RepairRun,
    repair: bool,
    seed: int = 0,
    max_steps: int | None = None,
    callbacks: list[Callback] | None = None,
    ckpt_path: str | None = None,
    monitor_kwargs: dict[str, Any] | None = None,
    **trainer_kwargs: Any,
) -> Outcome:
    """Train ``case`` once with a ``HealthMonitor`` first in ``callbacks``; the final validation loss."""
    torch.manual_seed(seed)
    model, train, val = case.build()
    monitor = HealthMonitor(
        check_every_n_steps=case.check_every,
        on_finding=lambda f: None,
        repair=repair,
        **(monitor_kwargs or {}),
    )
    validate: dict[str, Any] = {}
    if case.val_every_n_steps is not None:
        validate = {"val_check_interval": case.val_every_n_steps, "check_val_every_n_epoch": None}
    trainer = fast_trainer(
        max_steps=max_steps or case.max_steps,
        max_epochs=1000,
        callbacks=[monitor, *(callbacks or [])],
        **{**validate, **trainer_kwargs},
    )
    start = time.perf_counter()
    trainer.fit(model, train, val, ckpt_path=ckpt_path)
    seconds = time.perf_counter() - start
    final = float("nan")
    if trainer.world_size == 1:
        final = float(trainer.validate(model, val, verbose=False)[0]["val_loss"])
    return Outcome(monitor, trainer, model, final, seconds)


class ValLosses(Callback):
    """Every validation's ``key`` during fit (the best one is the run's best validation loss)."""

    def __init__(self, key: str = "val_loss") -> None:
        self.key, self.values = key, []  # type: ignore[var-annotated]

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        value = trainer.callback_metrics.get(self.key)
        if not trainer.sanity_checking and trainer.state.fn == "fit" and value is not None:
            self.values.append(float(value))


def run_zoo_case(case: Any, repair: bool) -> dict[str, Any]:
    """Train ``case`` as its zoo does with ``HealthMonitor(repair=repair)``; final and best val loss."""
    torch.manual_seed(getattr(case, "seed", 0))
    model, train, val = case.build()
    monitor = HealthMonitor(
        check_every_n_steps=getattr(case, "check_every", 20), on_finding=lambda f: None, repair=repair
    )
    losses = ValLosses()
    max_steps = getattr(case, "max_steps", -1)
    max_epochs = getattr(case, "max_epochs", None)
    settings = {} if val is not None else {"limit_val_batches": 0}
    trainer = fast_trainer(
        max_steps=max_steps,
        max_epochs=max_epochs if max_epochs is not None else (1000 if max_steps > 0 else 1),
        callbacks=[monitor, losses],
        **{**settings, **getattr(case, "trainer_kwargs", {})},
    )
    trainer.fit(model, train, val)
    final = math.nan
    try:
        metrics = trainer.validate(model, val if val is not None else train, verbose=False)[0]
        final = float(metrics.get("val_loss", next(iter(metrics.values()), math.nan)))
    except Exception:  # a model without validation_step: no final loss to report
        final = math.nan
    best = min(losses.values, default=math.nan)
    on = "val" if val is not None else "train"
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    return {
        "monitor": monitor,
        "final": final,
        "best": best,
        "on": on,
        "steps": trainer.global_step,
        "weights": weights,
    }


#: the sealed zoos whose healthy cases must train bitwise the same with ``repair=True``
ZOOS = (
    "galleries.health.zoo1",
    "galleries.health.zoo2",
    "galleries.health.zoo3",
)


def healthy_zoo_cases() -> list[tuple[str, Any]]:
    """``(zoo, case)`` for every healthy case of :data:`ZOOS`."""
    import importlib

    return [(zoo, c) for zoo in ZOOS for c in importlib.import_module(f"{zoo}.zoo").HEALTHY_CASES]


def case(name: str) -> RepairRun:
    """The run of :data:`RUNS` called ``name``."""
    return next(c for c in RUNS if c.name == name)
