"""Proofs of zoo 11's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its final and its
best validation loss (what a repair could save); a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import math
import statistics

import torch

from galleries.health.field._case import PlainRecorder
from galleries.health.zoo1._proofs import mean, twin
from galleries.health.zoo2._proofs import finite, first_nonfinite, rows_zero
from galleries.health.zoo3._proofs import repair_room, trains
from galleries.health.zoo11 import _builds as build

LN3, LN64, LN397 = math.log(3), math.log(64), math.log(397)  # wine's classes; InfoNCE over 64 / 397 pairs
OSC_VARIANCE = float(build.oscillators(600, 1)[1].var(0, unbiased=False).mean())
FILM_VARIANCE = float(build.four_tasks(600, 1)[1].var(unbiased=False))
NAN_BATCH = build.NAN_ROW // 32
COLLAPSE_ONSET = 2  # StepLR(1, 0.1) stepped per step: the LR is at 1% of its start at step 2
DIVERGE_ONSET = 74  # from here the training loss never returns to 1.5x its best 20-step window
OVERFIT_ONSET = 9  # after epoch 3 (3 steps each) the validation loss never returns to its best
OUTLIER_ONSET = build.OSC_OUTLIER_ROWS[0] // 32  # the batch of the first row in millimetres (read in order)


def _median_ratio(r: PlainRecorder, name: str, start: int = 0, stop: int | None = None) -> float:
    return statistics.median(step[name] for step in r.update_ratios[start:stop])


def _spikes(r: PlainRecorder, typical: float, factor: float = 20.0, start: int = 0) -> list[int]:
    return [
        i for i, g in enumerate(r.grad_norms) if i >= start and (not math.isfinite(g) or g > factor * typical)
    ]


def _diverges_from(losses: list[float]) -> int:
    """The first step after which every 20-step mean training loss stays above 1.5x the best one."""
    n = len(losses) - 19
    windows = [w if math.isfinite(w) else math.inf for w in (mean(losses[s : s + 20]) for s in range(n))]
    floor = min(windows)
    return next(s for s in range(n) if all(w > 1.5 * floor for w in windows[s:]))


# ------------------------------------------------------------------------------------------ stuck loss
def ode_dampening_crawls(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.ode_dampening, dampening=0.0), max_steps=300)
    assert r.lrs[0] == [0.05] == fixed.lrs[0]  # the LR reads as meant: the steps are what shrank
    name = "net.field.0.weight"
    steps, fixed_steps = _median_ratio(r, name, 50), _median_ratio(fixed, name, 50)
    assert steps < 0.05 * fixed_steps, (steps, fixed_steps)  # (1 - 0.99): steps ~100x smaller
    assert r.val_losses[-1] > 0.9 * r.val_losses[0], r.val_losses  # barely moves after the first epoch
    assert r.val_losses[-1] > 2.5 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


def ode_readout_frozen(r: PlainRecorder) -> None:
    for step, zeros in zip(r.update_ratios, r.zero_grad_rows):
        assert all(v == 0.0 for k, v in step.items() if k.startswith(("net.encoder", "net.field"))), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("net.readout")), step
        assert zeros["net.encoder.weight"] == 0.0 and zeros["net.field.0.weight"] == 0.0, zeros  # gradients
    fixed = twin(functools.partial(build.ode_readout_only, readout_only=False), max_steps=300)
    assert r.val_losses[-1] > 2.5 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


def contrastive_learns_nothing(r: PlainRecorder) -> None:
    assert all(abs(v - LN397) < 0.01 * LN397 for v in r.val_losses), r.val_losses  # chance over 397 pairs
    assert abs(mean(r.losses[-100:]) - LN64) < 0.02 * LN64, mean(r.losses[-100:])  # chance over 64
    assert abs(mean(r.losses[:20]) - LN64) < 0.05 * LN64, mean(r.losses[:20])  # from the start
    fixed = twin(functools.partial(build.contrastive_shuffled_apart, shuffled_apart=False), max_steps=300)
    assert fixed.val_losses[-1] < 0.7 * LN397, fixed.val_losses


def contrastive_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] <= 1.0001 * 0.01 * lr0) == COLLAPSE_ONSET, r.lrs[:4]
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[0]) < 1e-3 * final, r.val_losses  # frozen in place from step 2
    fixed = twin(functools.partial(build.contrastive_step_decay, step_size=220), max_steps=300)
    assert fixed.val_losses[-1] < 0.75 * lowest, (fixed.val_losses, lowest)


def wine_decay_learns_nothing(r: PlainRecorder) -> None:
    assert all(abs(v - LN3) < 0.01 * LN3 for v in r.val_losses), r.val_losses  # uniform over 3 cultivars
    assert abs(mean(r.losses[:20]) - LN3) < 0.02 * LN3, r.losses[:20]  # from the start
    fixed = twin(functools.partial(build.wine_hand_decay, factor=build.right_decay_factor), max_steps=300)
    # the first step wipes every tensor (its change is the tensor itself); the fixed decay's barely moves it
    assert all(abs(v - 1) < 0.01 for v in r.update_ratios[0].values()), r.update_ratios[0]
    assert all(v < 0.1 for v in fixed.update_ratios[0].values()), fixed.update_ratios[0]
    assert fixed.val_losses[-1] < 0.1 * LN3, fixed.val_losses


# ------------------------------------------------------------------------------------------ non-finite
def film_nan_input(r: PlainRecorder) -> None:
    _, train, _ = build.film_nan_row()
    x = train.dataset.tensors[0]
    assert (~torch.isfinite(x)).any(1).nonzero().flatten().tolist() == [build.NAN_ROW]  # one missing value
    assert finite(r.losses[:NAN_BATCH]) and first_nonfinite(r.losses) == NAN_BATCH, r.losses[NAN_BATCH - 2 :]
    assert all(math.isnan(v) for v in r.losses[NAN_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)  # validation every 10 steps: four finite ones before the bad batch
    assert math.isnan(final) and lowest < r.val_losses[0], (final, r.val_losses[:5])
    fixed = twin(functools.partial(build.film_nan_row, nan=False), max_steps=300)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.5 * FILM_VARIANCE, fixed.val_losses


def film_growth_diverges(r: PlainRecorder) -> None:
    assert _diverges_from(r.losses) == DIVERGE_ONSET, _diverges_from(r.losses)
    assert r.lrs[DIVERGE_ONSET][0] > 2 * r.lrs[19][0] and r.lrs[-1][0] > 50 * r.lrs[19][0], r.lrs[::50]
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 3.0) and first_nonfinite(r.losses) > DIVERGE_ONSET, (final, lowest)
    assert lowest < 0.7 * r.val_losses[0], r.val_losses  # it learnt before it diverged
    fixed = twin(functools.partial(build.film_exponential_growth, gamma=1.0), max_steps=300,
                 val_check_interval=25)  # fmt: skip
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.5 * lowest, (fixed.val_losses, lowest)


def _worse(final: float, best: float, factor: float) -> bool:
    return not math.isfinite(final) or final > factor * best


# ------------------------------------------------------------------------------------------ rising val
def wine_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 3 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 2.0) and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.01 * train[best], (train[-1], train[best])  # the 48 rows memorised


# ------------------------------------------------------------------------------------------ spikes, stall
def ode_outlier_spikes(r: PlainRecorder) -> None:
    per_epoch = sorted({row // 32 for row in build.OSC_OUTLIER_ROWS})
    outliers = [e * 94 + b for e in range(4) for b in per_epoch if e * 94 + b < 300]
    typical = statistics.median(r.grad_norms)
    spikes = _spikes(r, typical)
    assert spikes == outliers and spikes[0] == OUTLIER_ONSET, (spikes, outliers)
    fixed = twin(functools.partial(build.ode_outliers, scale=None), max_steps=300)
    assert not _spikes(fixed, statistics.median(fixed.grad_norms), start=20)
    assert fixed.val_losses[-1] < r.val_losses[-1], (fixed.val_losses, r.val_losses)


def ode_stall(r: PlainRecorder) -> None:
    # 16 oscillators a batch, each integrated on read (40 RK4 steps in Python): the loop mostly waits
    assert sum(r.wait_s) > 3 * sum(r.step_s), (sum(r.wait_s), sum(r.step_s))
    assert finite(r.losses) and mean(r.losses[-20:]) < mean(r.losses[:20])  # it trains, slowly in time


# ------------------------------------------------------------------------------------------ healthy
def film_offset_trains(r: PlainRecorder) -> None:
    offset = 64.0
    trains(r, offset + 0.5 * FILM_VARIANCE, offset)
    assert mean(r.losses[:10]) > offset + 0.8 * FILM_VARIANCE  # the MSE part starts at the targets' spread


def wine_tiny_validation_trains(r: PlainRecorder) -> None:
    trains(r, 0.35)
    assert len(r.val_losses) >= 25, len(r.val_losses)  # every epoch (11 steps)


def contrastive_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.7 * LN397)
    assert abs(r.lrs[0][0] - 2e-5) < 1e-12 and abs(r.lrs[120][0] - 2e-3) < 1e-12, (r.lrs[0], r.lrs[120])


def ode_frozen_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * OSC_VARIANCE)
    assert all(not any(k.startswith("net.encoder") for k in step) for step in r.update_ratios)


def ode_slow_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * OSC_VARIANCE)
    assert r.val_losses[-1] < 0.5 * r.val_losses[0], r.val_losses


def film_noisy_trains(r: PlainRecorder) -> None:
    _, _, val = build.film_noisy_targets()
    variance = float(val.dataset.tensors[1].var(unbiased=False))  # std-1 noise: most of it
    trains(r, 0.7 * variance, 0.9)  # a floor of about 1 (the noise's variance), approached


def film_adafactor_trains(r: PlainRecorder) -> None:
    trains(r, 0.2 * FILM_VARIANCE)
    assert r.lrs[0] == [0.05]


def film_raw_offset_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * FILM_VARIANCE)
    early, late = statistics.median(r.grad_norms[:20]), statistics.median(r.grad_norms[-100:])
    assert early > 20 * late, (early, late)  # the climb to the level of 20: huge gradients, then ordinary
    assert mean(r.losses[:5]) > 300 * r.val_losses[-1], (r.losses[:5], r.val_losses)


def wine_init_dead(r: PlainRecorder) -> None:
    assert min(z["net.0.weight"] for z in r.zero_grad_rows) == 1.0  # every first-layer unit dead, every batch
    # about the prior (uniform over 3 cultivars), from the start
    assert all(abs(v - LN3) < 0.02 * LN3 for v in r.val_losses), r.val_losses
    fixed = twin(functools.partial(build.wine_bias_init, bias=None), max_steps=300)
    # (its last batch of an epoch holds 2 rows: there some units are idle for both, so the mean)
    assert rows_zero(fixed, "net.0.weight") < 0.2 and fixed.val_losses[-1] < 0.1 * LN3, fixed.val_losses
