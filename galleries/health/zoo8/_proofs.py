"""Proofs of zoo 8's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its final and its
best validation loss (what a repair could save); a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics

import torch
from torch import Tensor

from galleries.health.field._case import PlainRecorder
from galleries.health.zoo1._proofs import mean, twin
from galleries.health.zoo2._proofs import finite, first_nonfinite
from galleries.health.zoo3._proofs import repair_room, trains
from galleries.health.zoo8 import _builds as build

PLATEAU_ONSET = 4  # the first step whose LR is down to 1% of the first (two cuts by 10)
ONECYCLE_ONSET = 23  # the first step whose 10-step mean NLL is 0.2 nats above the best one before it
OVERFIT_ONSET = 54  # after epoch 18 (3 steps each) the validation loss never returns to its best
ENCODER = ("net.encoder.0.weight", "net.encoder.0.bias", "net.encoder.2.weight", "net.encoder.2.bias")


def _entropy(y: Tensor) -> float:
    """The BCE of the best constant: the binary entropy of the labels' base rate."""
    p = float(y.float().mean())
    return -(p * math.log(p) + (1 - p) * math.log(1 - p))


BAG_TRIVIAL = _entropy(build.bags("val", 400, 1)[1])


def _stuck_at(values: list[float], trivial: float, tolerance: float = 0.03) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in values), (values, trivial)


def _first_rise(losses: list[float], window: int = 10, margin: float = 0.2) -> int:
    """The first step whose ``window``-step mean loss is ``margin`` above the best such mean before it."""
    means = [mean(losses[s : s + window]) for s in range(len(losses) - window + 1)]
    return next(s for s in range(1, len(means)) if means[s] > min(means[:s]) + margin)


# ------------------------------------------------------------------------------------------ trivial loss
def mil_apart_stuck(r: PlainRecorder) -> None:
    _stuck_at(r.val_losses, BAG_TRIVIAL, 0.08)
    assert abs(mean(r.losses[-50:]) - BAG_TRIVIAL) < 0.05 * BAG_TRIVIAL, mean(r.losses[-50:])
    fixed = twin(functools.partial(build.mil_labels_apart, apart=False), max_steps=300, val_check_interval=25)
    assert fixed.val_losses[-1] < 0.3 * BAG_TRIVIAL, fixed.val_losses


def mil_lr_stuck(r: PlainRecorder) -> None:
    _stuck_at(r.val_losses, BAG_TRIVIAL)
    fixed = twin(functools.partial(build.mil_amsgrad, lr=2e-3), max_steps=300, val_check_interval=25)
    assert fixed.val_losses[-1] < 0.3 * BAG_TRIVIAL, fixed.val_losses


def mil_encoder_frozen(r: PlainRecorder) -> None:
    assert min(r.grad_norms) > 0 and r.lrs[-1] == [2e-3, 0.0], r.lrs[-1]
    for step in r.update_ratios:
        assert all(step[k] == 0.0 for k in ENCODER), step  # held at LR 0 (and no decay) throughout
    assert all(z["net.encoder.0.weight"] < 1.0 for z in r.zero_grad_rows)  # the encoder does get gradients
    _stuck_at(r.val_losses, BAG_TRIVIAL)
    fixed = twin(functools.partial(build.mil_unfreeze, steps_per_epoch=build.UNFREEZE_MEANT), max_steps=300,
                 val_check_interval=25)  # fmt: skip
    moved = [i for i, step in enumerate(fixed.update_ratios) if step["net.encoder.0.weight"] > 0]
    assert moved[0] == build.UNFREEZE_MEANT, moved[:3]  # where the fixed run's encoder starts to learn
    assert fixed.val_losses[-1] < 0.3 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ LR schedules
def mdn_plateau_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.0101 * lr0) == PLATEAU_ONSET, r.lrs[:6]
    assert r.lrs[-1][0] < 1e-8, r.lrs[-1]
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[0]) < 0.01, r.val_losses  # frozen where it started
    fixed = twin(functools.partial(build.mdn_plateau, per_step=False), max_steps=300, val_check_interval=25)
    assert fixed.val_losses[-1] < lowest - 0.8, (fixed.val_losses, lowest)


def mdn_onecycle_rises(r: PlainRecorder) -> None:
    assert _first_rise(r.losses) == ONECYCLE_ONSET, _first_rise(r.losses)
    peak = max(range(len(r.lrs)), key=lambda i: r.lrs[i][0])
    assert abs(r.lrs[peak][0] - 0.3) < 1e-6 and peak > ONECYCLE_ONSET, (peak, r.lrs[peak])
    final, lowest = repair_room(r)
    assert final > lowest + 0.1 and lowest == r.val_losses[0], r.val_losses  # best at the first check
    fixed = twin(functools.partial(build.mdn_onecycle, max_lr=3e-3), max_steps=300, val_check_interval=25)
    assert finite(fixed.val_losses) and fixed.val_losses[-1] < final - 0.5, (fixed.val_losses, final)
    assert mean(fixed.losses[40:90]) < mean(r.losses[40:90]) - 0.3  # the fixed run keeps falling meanwhile


# ------------------------------------------------------------------------------------------ extreme rows
def mdn_sentinel_nan(r: PlainRecorder) -> None:
    bad = build.SENTINEL_ROW // 32
    assert finite(r.losses[:bad]) and finite(r.grad_norms[:bad]) and first_nonfinite(r.losses) == bad
    assert all(math.isnan(v) for v in r.losses[bad + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < r.val_losses[0] - 0.1, r.val_losses
    fixed = twin(functools.partial(build.mdn_sentinel, value=None), max_steps=300, val_check_interval=25)
    assert finite(fixed.losses) and fixed.val_losses[-1] < lowest - 0.3, (fixed.val_losses, lowest)


def mdn_nan_reading_poisons(r: PlainRecorder) -> None:
    bad = build.SENTINEL_ROW // 32
    assert finite(r.losses[:bad]) and first_nonfinite(r.losses) == bad and math.isnan(r.grad_norms[bad])
    assert all(math.isnan(v) for v in r.losses[bad + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < r.val_losses[0] - 0.1, r.val_losses
    fixed = twin(functools.partial(build.mdn_nan_reading, nan=False), max_steps=300, val_check_interval=25)
    assert finite(fixed.losses) and fixed.val_losses[-1] < lowest - 0.3, (fixed.val_losses, lowest)


def _spikes(r: PlainRecorder, typical: float, factor: float = 20.0, start: int = 0) -> list[int]:
    return [
        i for i, g in enumerate(r.grad_norms) if i >= start and (not math.isfinite(g) or g > factor * typical)
    ]


def mdn_percent_spikes(r: PlainRecorder) -> None:
    per_epoch = [row // 32 for row in build.PERCENT_ROWS]
    outliers = [e * 94 + b for e in range(4) for b in per_epoch if e * 94 + b < 300]
    typical = statistics.median(r.grad_norms)
    assert all(r.grad_norms[i] > 300 * typical for i in outliers), [
        r.grad_norms[i] / typical for i in outliers
    ]
    spikes = _spikes(r, typical)
    assert spikes == outliers and spikes[0] == build.PERCENT_ROWS[0] // 32, (spikes, outliers)
    fixed = twin(functools.partial(build.mdn_percent, scale=None), max_steps=300, val_check_interval=25)
    assert not _spikes(fixed, statistics.median(fixed.grad_norms)), _spikes(fixed, typical)
    assert finite(r.losses) and finite(r.val_losses)


# ------------------------------------------------------------------------------------------ single causes
def mil_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 3 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert final > 2.0 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.01 * train[best], (train[-1], train[best])


def _tanh_saturated(std: float | None) -> float:
    """The fraction of the encoder's first tanh outputs beyond 0.99 in magnitude at initialisation."""
    torch.manual_seed(0)
    model, train, _ = build.mil_tanh_init(std)
    with torch.no_grad():
        h = model.net.encoder[1](model.net.encoder[0](train.dataset.tensors[0][:256]))
    return float((h.abs() > 0.99).float().mean())


def mil_tanh_saturates(r: PlainRecorder) -> None:
    assert _tanh_saturated(3.0) > 0.8 and _tanh_saturated(None) < 0.05, (
        _tanh_saturated(3.0),
        _tanh_saturated(None),
    )
    fixed = twin(functools.partial(build.mil_tanh_init, std=None), max_steps=300, val_check_interval=25)
    assert r.val_losses[-1] > 3 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)
    assert finite(r.losses) and r.val_losses[-1] > 0.5 * BAG_TRIVIAL, r.val_losses


def mil_stall(r: PlainRecorder) -> None:
    # 16 bags a batch at >= 3 ms each: >= 48 ms of waiting per step against a few ms of work
    assert sum(r.wait_s) > 100 * 0.048 and sum(r.wait_s) > 3 * sum(r.step_s), (sum(r.wait_s), sum(r.step_s))
    assert finite(r.losses) and mean(r.losses[-20:]) < mean(r.losses[:20])  # it trains, slowly in time


# ------------------------------------------------------------------------------------------ healthy
def mdn_negative_trains(r: PlainRecorder) -> None:
    trains(r, -0.3)
    assert r.losses[0] > 0 and max(r.val_losses[3:]) < 0, r.val_losses


def mil_summed_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * BAG_TRIVIAL)
    assert mean(r.losses[:20]) > 10, mean(r.losses[:20])  # 16 bags' BCE summed


def mil_noisy_trains(r: PlainRecorder) -> None:
    _, _, val = build.mil_noisy_labels()
    trivial = _entropy(val.dataset.tensors[1])  # the flipped labels' own trivial loss
    trains(r, 0.95 * trivial, 0.8 * trivial)  # 30% flipped: a high floor (H(0.3) ~ 0.61), reached


def mil_tiny_validation_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * BAG_TRIVIAL)
    later = r.val_losses[5:]
    assert max(abs(b - a) for a, b in itertools.pairwise(later)) > 0.05, later  # it jitters


def mdn_onecycle_trains(r: PlainRecorder) -> None:
    trains(r, -0.5)
    assert abs(max(lr[0] for lr in r.lrs) - 1e-2) < 1e-6


def mdn_sharp_trains(r: PlainRecorder) -> None:
    trains(r, -0.3)
    assert r.grad_norms[0] > 500 * statistics.median(r.grad_norms) and r.losses[0] > 1000, r.grad_norms[:3]


def mil_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.2 * BAG_TRIVIAL)
    _stuck_at(r.val_losses[:3], BAG_TRIVIAL)  # the prior's level for the first ~75 steps
    assert r.lrs[0][0] < 0.02 * r.lrs[-1][0]
