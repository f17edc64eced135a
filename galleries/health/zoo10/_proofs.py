"""Proofs of zoo 10's runs, from the plain recording (:class:`PlainRecorder`, no HealthMonitor).

Each problem run's proof shows the problem is real (against a healthy twin, the same run with the bug
fixed, where a twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its
final and its best validation loss (what a repair could save); a healthy run's proof shows it trains well.
Plain torch and Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import math
import statistics
from typing import Any

import lightning.pytorch as pl
import torch

from galleries.health.field._case import PlainRecorder
from galleries.health.zoo1._proofs import mean, twin
from galleries.health.zoo2._proofs import finite, first_nonfinite, rows_zero
from galleries.health.zoo3._proofs import repair_room, trains
from galleries.health.zoo10 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

LN10, LN_VAL = math.log(10), math.log(397)  # InfoNCE over the one validation batch of 397 digits
LN_BATCH = math.log(
    64
)  # InfoNCE over a training batch of 64 (the last of each epoch: 56, ln 56 ~ 0.97 ln 64)
PENDULUM_VARIANCE = float(build.pendulum(500, 1)[1].var(0, unbiased=False).mean())  # the MSE of the mean
DEGREE_ONSET = build.DEGREE_ROWS[0] // 32  # the batch of the first row in degrees (read in order)
INF_BATCH = build.INF_ROW // 32
STEP_DECAY_ONSET = 20  # StepLR(10, 0.1) stepped per batch: 100x down from here
SGD_ONSET = 5  # the loss falls at step 1, then climbs: above 10x its lowest for good from here
OVERFIT_ONSET = 35  # after the 7th validation (every 5 steps) the validation loss never returns to its best
EVERY = {"val_check_interval": 25, "check_val_every_n_epoch": None}


def _near(values: list[float], level: float, tolerance: float) -> bool:
    return all(abs(v - level) < tolerance * level for v in values)


def _spikes(grad_norms: list[float], typical: float, factor: float = 20.0, start: int = 0) -> list[int]:
    return [
        i for i, g in enumerate(grad_norms) if i >= start and (not math.isfinite(g) or g > factor * typical)
    ]


# ------------------------------------------------------------------------------------------ trivial loss
def contrastive_temperature_stuck(r: PlainRecorder) -> None:
    assert _near(r.val_losses, LN_VAL, 0.02), (r.val_losses, LN_VAL)
    assert _near(r.losses[:5] + r.losses[-20:], LN_BATCH, 0.06), (r.losses[:5], r.losses[-20:])
    fixed = twin(functools.partial(build.contrastive_temperature, multiply=False), max_steps=300)
    assert fixed.val_losses[-1] < 0.6 * LN_VAL, fixed.val_losses


def contrastive_dampening_stuck(r: PlainRecorder) -> None:
    assert all(lr == [0.1] for lr in r.lrs)  # the LR itself reads as set
    assert _near(r.val_losses, LN_VAL, 0.02), (r.val_losses, LN_VAL)
    assert _near(r.losses[-50:], LN_BATCH, 0.06), r.losses[-50:]
    fixed = twin(functools.partial(build.contrastive_dampening, dampening=0.0), max_steps=300)
    assert fixed.val_losses[-1] < 0.6 * LN_VAL, fixed.val_losses


def pendulum_shuffled_stuck(r: PlainRecorder) -> None:
    assert all(v > 0.9 * PENDULUM_VARIANCE for v in r.val_losses), (r.val_losses, PENDULUM_VARIANCE)
    assert r.val_losses[-1] > 0.95 * PENDULUM_VARIANCE, (r.val_losses, PENDULUM_VARIANCE)
    fixed = twin(functools.partial(build.pendulum_targets_shuffled, shuffled=False), max_steps=300, **EVERY)
    assert fixed.val_losses[-1] < 0.3 * PENDULUM_VARIANCE, fixed.val_losses


# ------------------------------------------------------------------------------------------ spikes
def pendulum_degree_spikes(r: PlainRecorder) -> None:
    per_epoch = [row // 32 for row in build.DEGREE_ROWS]
    outliers = [e * 63 + b for e in range(5) for b in per_epoch if e * 63 + b < 300]
    typical = statistics.median(r.grad_norms)
    spikes = _spikes(r.grad_norms, typical)
    assert spikes == outliers and spikes[0] == DEGREE_ONSET, (spikes, outliers)  # every one, nothing else
    fixed = twin(functools.partial(build.pendulum_degrees, bad=False), max_steps=300, **EVERY)
    assert not _spikes(fixed.grad_norms, statistics.median(fixed.grad_norms), start=20)
    assert fixed.val_losses[-1] < 0.5 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def pendulum_adamw_bursts(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.pendulum_adamw_lr, lr=3e-3), max_steps=300, **EVERY)  # same order
    typical = statistics.median(fixed.grad_norms)
    assert statistics.median(r.grad_norms) > 100 * typical, (statistics.median(r.grad_norms), typical)
    assert r.losses[1] > fixed.losses[1] and mean(r.losses[1:10]) > 3 * mean(fixed.losses[1:10])
    assert finite(r.losses) and min(r.val_losses) > 100 * fixed.val_losses[-1], (
        r.val_losses,
        fixed.val_losses,
    )


# ------------------------------------------------------------------------------------------ stalls
def mixer_unfrozen_never_stepped(r: PlainRecorder) -> None:
    at, body = build.UNFREEZE_STEP, "net.body.0.tokens.0.weight"
    assert all(body not in z for z in r.zero_grad_rows[:at]) and all(body in z for z in r.zero_grad_rows[at:])
    assert rows_zero(r, body, at) < 0.5  # the blocks get real gradients from step 100 on ...
    for step in r.update_ratios[at + 1 :]:  # ... and are never stepped
        blocks = [v for k, v in step.items() if k.startswith("net.body")]
        assert blocks and all(v == 0.0 for v in blocks), step
        assert step["net.head.weight"] > 0.0
    assert all(len(lr) == 1 for lr in r.lrs)  # one group: the optimizer was never widened
    fixed = twin(functools.partial(build.mixer_unfreeze, widen=True), max_steps=300, **EVERY)
    assert fixed.val_losses[-1] < 0.3 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def mixer_step_decay_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.0101 * lr0) == STEP_DECAY_ONSET
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[0]) < 0.01 * final and final > 0.85 * LN10, r.val_losses  # frozen early
    fixed = twin(functools.partial(build.mixer_step_decay, per_step=False), max_steps=300, **EVERY)
    assert fixed.val_losses[-1] < 0.3 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ single causes
def pendulum_inf_nan(r: PlainRecorder) -> None:
    assert finite(r.losses[:INF_BATCH]) and first_nonfinite(r.losses) == INF_BATCH
    assert r.losses[INF_BATCH] == math.inf and all(math.isnan(v) for v in r.losses[INF_BATCH + 1 :])
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.5 * r.val_losses[0], (final, lowest)
    fixed = twin(functools.partial(build.pendulum_inf_target, bad=False), max_steps=300, **EVERY)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.3 * PENDULUM_VARIANCE, fixed.val_losses


def mixer_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 5 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert final > 1.3 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.05 * train[best], (train[-1], train[best])


def _diverged_from(losses: list[float]) -> int:
    """The first step from which every training loss stays above 10x the run's lowest."""
    floor = min(losses)
    return next(s for s in range(len(losses)) if all(v > 10 * floor for v in losses[s:]))


def pendulum_sgd_diverges(r: PlainRecorder) -> None:
    assert _diverged_from(r.losses) == SGD_ONSET, _diverged_from(r.losses)
    assert r.losses[SGD_ONSET] > r.losses[0] and r.losses[1] < r.losses[0]  # a good first step, then up
    assert finite(r.losses) and min(r.losses[20:]) > 1e6, min(r.losses[20:])
    fixed = twin(functools.partial(build.pendulum_sgd, lr=0.01), max_steps=300, **EVERY)
    typical = statistics.median(fixed.grad_norms)
    assert min(r.grad_norms[SGD_ONSET:]) > 20 * typical, (min(r.grad_norms[SGD_ONSET:]), typical)
    assert fixed.val_losses[-1] < 0.3 * PENDULUM_VARIANCE and min(r.val_losses) > 1000 * fixed.val_losses[-1]


def pendulum_init_explodes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.pendulum_field_init, std=None), max_steps=300, **EVERY)
    assert r.grad_norms[0] > 50 * fixed.grad_norms[0], (r.grad_norms[0], fixed.grad_norms[0])
    ratio = statistics.median(r.grad_norms) / statistics.median(fixed.grad_norms)
    assert ratio > 100 and mean(r.losses[:10]) > 30 * mean(fixed.losses[:10]), (ratio, r.losses[:10])
    assert r.val_losses[-1] > 20 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


class TanhProbe(pl.Callback):
    """The fraction of the encoder's second tanh layer's outputs beyond +-0.99 on each training batch."""

    def __init__(self) -> None:
        self.saturated: list[float] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ) -> None:
        with torch.no_grad():
            h = pl_module.net.body(batch[0])
        self.saturated.append(float((h.abs() > 0.99).float().mean()))


def _tanh_saturation(std: float | None) -> TanhProbe:
    torch.manual_seed(0)
    model, train, _ = build.contrastive_tanh_init(std)
    probe = TanhProbe()
    fast_trainer(max_steps=300, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(model, train)
    return probe


def contrastive_init_saturates(r: PlainRecorder) -> None:
    bad, good = _tanh_saturation(1.0), _tanh_saturation(None)
    assert min(bad.saturated) > 0.6 and max(good.saturated) < 0.05, (min(bad.saturated), max(good.saturated))
    fixed = twin(functools.partial(build.contrastive_tanh_init, std=None), max_steps=300)
    assert fixed.val_losses[-1] < 0.8 * r.val_losses[-1], (fixed.val_losses, r.val_losses)
    assert max(fixed.val_losses) < min(r.val_losses), (fixed.val_losses, r.val_losses)  # worse from the start


def pendulum_stall(r: PlainRecorder) -> None:
    # 32 states a batch, each integrated on read (~2-3 ms): the loop waits on data most of the time
    fixed = twin(functools.partial(build.pendulum_simulated_on_read, cached=True), max_steps=40)
    wait, work = sum(r.wait_s), sum(r.step_s)
    assert wait > 39 * 0.03 and wait > 2 * work and sum(fixed.wait_s) < 0.1 * wait, (wait, work, fixed.wait_s)
    assert finite(r.losses) and mean(r.losses[-10:]) < mean(r.losses[:10])  # it trains, slowly in time


# ------------------------------------------------------------------------------------------ healthy
def mixer_noise_trains(r: PlainRecorder) -> None:
    trains(r, 0.8)  # validated on clean labels
    assert mean(r.losses[-30:]) > 0.8, mean(r.losses[-30:])  # 30% redrawn: a high training floor


def mixer_hold_trains(r: PlainRecorder) -> None:
    trains(r, 0.3)
    hold = build.HOLD_STEPS
    assert r.lrs[hold - 1][0] < 0.011 * r.lrs[hold][0], r.lrs[hold - 1 : hold + 1]
    assert r.val_losses[3] > 0.9 * LN10, r.val_losses  # flat for the first 100 steps


def pendulum_restarts_trains(r: PlainRecorder) -> None:
    trains(r, 0.25 * PENDULUM_VARIANCE)
    assert sum(b[0] > a[0] for a, b in zip(r.lrs, r.lrs[1:])) >= 4  # the LR jumps back up


def pendulum_nll_trains(r: PlainRecorder) -> None:
    offset = 0.5 * math.log(2 * math.pi * 4.0)
    trains(r, offset + 0.3 * PENDULUM_VARIANCE / 8, offset)  # the MSE part (mse / 8) to 0.3x its trivial
    assert r.val_losses[0] - r.val_losses[-1] < 0.1 * r.val_losses[0], r.val_losses  # moves a few %


def pendulum_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.2)
    assert sum(b > a for a, b in zip(r.val_losses, r.val_losses[1:])) >= 5, r.val_losses  # it jitters


def contrastive_projector_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * LN_VAL)
    assert all(not any(k.startswith("net.projector") for k in step) for step in r.update_ratios)


def contrastive_sgd_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * LN_VAL)
    assert max(r.grad_norms[:3]) > 4 * statistics.median(r.grad_norms), r.grad_norms[:3]


def mixer_aggressive_trains(r: PlainRecorder) -> None:
    trains(r, 0.25)
    assert max(r.val_losses[1:]) < 0.5 * LN10, r.val_losses  # fast from the first validation on


def contrastive_slow_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * LN_VAL)
    assert all(b < a for a, b in zip(r.val_losses, r.val_losses[1:])), r.val_losses  # every validation better
