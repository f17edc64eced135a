"""The field gallery's case record, its plain recording callback and its runner."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor, nn
from torch.utils.data import DataLoader

from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.testing.trainers import fast_trainer

Build = Callable[[], tuple[pl.LightningModule, DataLoader, DataLoader | None]]


@dataclass
class FieldCase:
    """One run of the field gallery.

    Attributes:
        name: Unique, snake_case.
        build: Builds ``(model, train_loader, val_loader or None)``; called after ``torch.manual_seed(seed)``.
        expected: The problem HealthMonitor must name (one of ``HealthMonitor.PROBLEMS``); ``None``: healthy.
        onset_step: The first optimizer step at which the problem exists (0: from the start).
        proof: ``proof(recorder)`` asserts, from a :class:`PlainRecorder` of the run (trained without the
            monitor), that the problem is real (or, for a healthy run, that it trains well).
        also_allowed: Other problems the run may show as well (symptoms of the same cause), usually empty.
        max_steps / max_epochs: The run's length (``-1`` / ``None`` for unbounded, as ``Trainer``).
        check_every: ``HealthMonitor(check_every_n_steps=...)``.
        trainer_kwargs: More ``Trainer`` arguments (e.g. ``check_val_every_n_epoch``).
        seed: The run's seed.
        description: One sentence: what the run is and why it is (un)healthy.
    """

    name: str
    build: Build
    expected: str | None
    onset_step: int
    proof: Callable[[PlainRecorder], None]
    also_allowed: tuple[str, ...] = ()
    max_steps: int = -1
    max_epochs: int | None = None
    check_every: int = 20
    trainer_kwargs: dict[str, Any] = field(default_factory=dict)
    seed: int = 0
    description: str = ""


class PlainRecorder(Callback):
    """Records, with plain PyTorch and no library code: per step the loss, every optimizer group's LR, the
    total gradient norm, the update-to-weight ratio ``||dW|| / ||W||`` per parameter, the fraction of rows
    with an exactly zero gradient per 2-d+ weight, the host time spent waiting for the batch and in the step;
    per validation the logged ``val_loss`` and the epoch's mean training loss."""

    def __init__(self, val_key: str = "val_loss") -> None:
        self.val_key = val_key
        self.losses: list[float] = []
        self.lrs: list[list[float]] = []
        self.grad_norms: list[float] = []
        self.update_ratios: list[dict[str, float]] = []
        self.zero_grad_rows: list[dict[str, float]] = []
        self.wait_s: list[float] = []
        self.step_s: list[float] = []
        self.val_losses: list[float] = []
        self.epoch_train_losses: list[float] = []
        self._epoch: list[float] = []
        self._before: dict[str, Tensor] = {}
        self._t_end: float | None = None
        self._t_start = 0.0

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch = []

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
        now = time.perf_counter()
        if self._t_end is not None:
            self.wait_s.append(now - self._t_end)
        self._t_start = now
        self._before = {n: p.detach().clone() for n, p in pl_module.named_parameters() if p.requires_grad}

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Any
    ) -> None:
        grads = [p.grad for p in pl_module.parameters() if p.grad is not None]
        self.grad_norms.append(float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads]))))
        self.zero_grad_rows.append(
            {
                n: float((p.grad.flatten(1).abs().amax(1) == 0).float().mean())
                for n, p in pl_module.named_parameters()
                if p.grad is not None and p.ndim >= 2
            }
        )
        self.lrs.append([float(g["lr"]) for opt in trainer.optimizers for g in opt.param_groups])

    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, *args: Any
    ) -> None:
        loss = outputs["loss"] if isinstance(outputs, dict) else outputs
        if isinstance(loss, Tensor):
            self.losses.append(float(loss))
            self._epoch.append(float(loss))
        ratios = {}
        for n, p in pl_module.named_parameters():
            before = self._before.get(n)
            if before is not None and float(before.norm()) > 0:
                ratios[n] = float((p.detach() - before).norm() / before.norm())
        self.update_ratios.append(ratios)
        self._t_end = time.perf_counter()
        self.step_s.append(self._t_end - self._t_start)

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        value = trainer.callback_metrics.get(self.val_key)
        if value is not None:
            self.val_losses.append(float(value))
            self.epoch_train_losses.append(sum(self._epoch) / len(self._epoch) if self._epoch else math.nan)


def _trainer(case: FieldCase, callbacks: list[Callback], validate: bool) -> pl.Trainer:
    settings = {} if validate else {"limit_val_batches": 0}
    return fast_trainer(
        max_steps=case.max_steps,
        max_epochs=case.max_epochs if case.max_epochs is not None else (1000 if case.max_steps > 0 else 1),
        callbacks=callbacks,
        **{**settings, **case.trainer_kwargs},
    )


def run_case(case: FieldCase, monitor: bool = True) -> tuple[HealthMonitor | None, PlainRecorder]:
    """Train ``case`` once: with ``monitor`` a ``HealthMonitor`` alone (findings collected, not warned), else
    the :class:`PlainRecorder` alone. Returns ``(monitor or None, recorder)``."""
    torch.manual_seed(case.seed)
    model, train, val = case.build()
    recorder = PlainRecorder()
    health = (
        HealthMonitor(check_every_n_steps=case.check_every, on_finding=lambda f: None) if monitor else None
    )
    callbacks: list[Callback] = [health] if health is not None else [recorder]
    trainer = _trainer(case, callbacks, validate=val is not None)
    trainer.fit(model, train, val)
    return health, recorder


def count_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
