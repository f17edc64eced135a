"""``HealthMonitor(repair=True)`` on repairable problem runs (issue #36): each run twice, same seed, without
and with repair; one row per run: the problem, the finding, the action, its step, the final validation loss
without -> with repair.

The runs reuse the field gallery's builders (``tests/callbacks/health_field_gallery``) and add a validation
set from the same task (a different seed of the same teacher): an LR far too high (Adam at 0.5), a StepLR
that collapses the LR 1e6x at step 80, a wide MLP overfitting 32 noisy samples, and a weighted loss whose one
batch has all its weights 0 (0/0: a NaN loss, a NaN update, every weight NaN after it).

Run: ``PYTHONPATH=. python -m benchmarks.health_repair [--only NAME]``.
"""

from __future__ import annotations

import argparse
import logging
import math
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.callbacks import HealthMonitor
from lightning_recipes.testing.trainers import fast_trainer
from tests.callbacks.health_field_gallery._field_data import loader, teacher_data
from tests.callbacks.health_field_gallery._field_models import FieldModule, FReluMLP
from tests.callbacks.health_field_gallery._field_problems_optim import (
    _frelu_mlp_steplr_collapse,
    _gelu_mlp_adam_half,
)
from tests.callbacks.health_field_gallery._field_problems_run import _overfit_wide_mlp

Build = Callable[[], tuple[pl.LightningModule, DataLoader, DataLoader]]


class WeightedLoss(FieldModule):
    """A classifier trained on ``(x, y, weight)`` with the weighted mean ``sum(w * ce) / sum(w)``: a batch
    whose weights are all 0 gives 0/0, a NaN loss, a NaN update."""

    def training_step(self, batch: tuple[Tensor, Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y, w = batch
        return (w * F.cross_entropy(self.net(x), y, reduction="none")).sum() / w.sum()


ZERO_WEIGHT_BATCH = 100


def weighted_zero_batch() -> tuple[pl.LightningModule, DataLoader, DataLoader]:
    """An Adam MLP on teacher data whose batch ``ZERO_WEIGHT_BATCH`` (unshuffled) has all weights 0."""
    x, y = teacher_data(8192).tensors
    w = torch.ones(len(y))
    w[ZERO_WEIGHT_BATCH * 32 : (ZERO_WEIGHT_BATCH + 1) * 32] = 0.0
    model = WeightedLoss(FReluMLP(16, 64, 4, depth=2), lambda p: torch.optim.Adam(p, lr=1e-3))
    return model, DataLoader(TensorDataset(x, y, w), batch_size=32, shuffle=False), validation()


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
        "steplr_collapse",
        _with_validation(_frelu_mlp_steplr_collapse),
        400,
        description="SGD+momentum, StepLR(gamma=1e-6) at step 80",
    ),
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
]


def run(case: RepairRun, repair: bool, seed: int = 0) -> tuple[HealthMonitor, float, float]:
    """Train ``case`` once; ``(monitor, final validation loss, seconds)``."""
    torch.manual_seed(seed)
    model, train, val = case.build()
    monitor = HealthMonitor(check_every_n_steps=case.check_every, on_finding=lambda f: None, repair=repair)
    validate = {} if case.val_every_n_steps is None else {"val_check_interval": case.val_every_n_steps}
    if case.val_every_n_steps is not None:
        validate["check_val_every_n_epoch"] = None  # type: ignore[assignment]
    trainer = fast_trainer(max_steps=case.max_steps, max_epochs=1000, callbacks=[monitor], **validate)
    start = time.perf_counter()
    trainer.fit(model, train, val)
    seconds = time.perf_counter() - start
    final = trainer.validate(model, val, verbose=False)[0]["val_loss"]
    return monitor, float(final), seconds


def row(case: RepairRun) -> dict[str, Any]:
    plain, without, _ = run(case, repair=False)
    repaired, with_, _ = run(case, repair=True)
    events = repaired.repairs
    findings = ", ".join(f"{f.problem}({f.cause})@{f.step}" for f in plain.findings) or "-"
    actions = "; ".join(f"{e.action}@{e.step}" for e in events) or "-"
    better = (without - with_) / without if math.isfinite(without) and without > 0 else math.inf
    return {
        "run": case.name,
        "finding": findings,
        "action": actions,
        "without": without,
        "with": with_,
        "better": better,
        "events": events,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning_recipes").setLevel(logging.ERROR)  # the events are printed below
    warnings.filterwarnings("ignore")
    print(
        "| run | finding (without repair) | repair: action@step | final val loss without -> with | better |"
    )
    print("|---|---|---|---|---|")
    for case in RUNS:
        if args.only and case.name != args.only:
            continue
        r = row(case)
        better = "n/a (NaN without)" if math.isinf(r["better"]) else f"{r['better']:.0%}"
        change = f"{r['without']:.4g} -> {r['with']:.4g}"
        print(f"| {r['run']} | {r['finding']} | {r['action']} | {change} | {better} |", flush=True)
        for event in r["events"]:
            print(f"    {event.message}", flush=True)


if __name__ == "__main__":
    main()
