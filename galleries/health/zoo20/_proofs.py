"""Proofs of zoo 20's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from collections.abc import Callable, Sequence
from typing import Any

import torch

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo20 import _builds as build

LN3, LN4, LN5 = math.log(3), math.log(4), math.log(5)
BAD_BATCH = build.BAD_BATCH  # the flow's batch holding the two rows with a missing coordinate (read in order)
ONECYCLE_ONSET = 49  # from this step on the few-shot loss never returns below its first value: it diverges
OVERFIT_ONSET = 90  # after epoch 9 (10 steps each) the validation loss never returns to its best
COLLAPSE_ONSET = 14  # the first step run below 1% of the LR (StepLR halving every two steps)
DEAD_BY = 10  # every hidden ReLU of the keypoint CNN is dead by this step at NAdam 0.1
HIDDEN_CONVS = ("net.0.weight", "net.2.weight", "net.4.weight", "net.6.weight")


# ------------------------------------------------------------------------------------------ helpers
def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: Sequence[float]) -> int:
    return next((i for i, v in enumerate(values) if not math.isfinite(v)), len(values))


def twin(make: Callable[[], Any], max_steps: int = 300, **trainer_kwargs: Any) -> PlainRecorder:
    """Train ``make`` (a run's build with its bug fixed) once, seed 0, with the plain recorder alone."""
    case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                     max_steps=max_steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(case, monitor=False)[1]


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """The final validation loss and the best finite one (what a repair could have kept)."""
    return r.val_losses[-1], min(v for v in r.val_losses if math.isfinite(v))


def trains(r: PlainRecorder, below: float) -> None:
    """Every loss finite, and the last validation loss under ``below`` and under the first."""
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    assert r.val_losses[-1] < below and r.val_losses[-1] < r.val_losses[0], (r.val_losses, below)


def zero_rows(r: PlainRecorder, name: str, steps: slice = slice(None)) -> float:
    """The smallest fraction, over ``steps``, of ``name``'s rows with an exactly zero gradient."""
    return min(step[name] for step in r.zero_grad_rows[steps])


def falls_mostly(values: Sequence[float], share: float) -> bool:
    """At least ``share`` of the consecutive changes in ``values`` are falls."""
    pairs = list(itertools.pairwise(values))
    return sum(b < a for a, b in pairs) >= share * len(pairs)


# ------------------------------------------------------------------------------------------ flow
def flow_lr_blows_up(r: PlainRecorder) -> None:
    assert r.lrs[0] == [0.3] and finite(r.losses)
    # the first update already blows the likelihood up: the loss x10 at step 1, the gradient x1000 by step 3
    assert r.losses[1] > 10 * r.losses[0] and max(r.grad_norms[1:4]) > 1000 * r.grad_norms[0], r.losses[:4]
    assert min(r.val_losses) > 3 * r.losses[0], r.val_losses  # never better than the untrained flow
    fixed = twin(functools.partial(build.flow_adamax, lr=3e-3), val_check_interval=32)
    assert fixed.val_losses[-1] < 0.8 * r.losses[0] < 0.25 * r.val_losses[-1], fixed.val_losses


def flow_missing_rows_nan(r: PlainRecorder) -> None:
    model, train, val = build.flow_missing_rows()
    x = train.dataset.tensors[0]
    per_batch = x.isnan().view(-1, build.FLOW_BATCH, 2).any(2).any(1)
    assert per_batch.nonzero().flatten().tolist() == [BAD_BATCH]  # the only batch with a missing value
    assert finite(r.losses[:BAD_BATCH]) and first_nonfinite(r.losses) == BAD_BATCH, first_nonfinite(r.losses)
    assert max(r.grad_norms[:BAD_BATCH]) < 20, max(r.grad_norms[:BAD_BATCH])  # nothing grew before it
    assert all(math.isnan(v) for v in r.losses[BAD_BATCH + 1 :])  # NaN weights from then on
    with torch.no_grad():  # the untrained flow (zero-initialised couplings: the identity)
        untrained = float(-model.net(val.dataset.tensors[0]).mean())
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < untrained - 0.2, (final, lowest, untrained)
    fixed = twin(functools.partial(build.flow_missing_rows, missing=False), val_check_interval=32)
    assert finite(fixed.losses) and fixed.val_losses[-1] < lowest - 0.2, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ few-shot
def proto_onecycle_diverges(r: PlainRecorder) -> None:
    lrs = [lr[0] for lr in r.lrs]
    assert abs(lrs[0] - 0.5 / 25) < 1e-9 and all(b > a for a, b in itertools.pairwise(lrs[:ONECYCLE_ONSET]))
    above = [not math.isfinite(v) or v > r.losses[0] for v in r.losses]
    onset = next(i for i in range(len(above)) if all(above[i:]))
    assert onset == ONECYCLE_ONSET and 0.25 < lrs[onset] < 0.35, (onset, lrs[onset])
    assert mean(r.losses[ONECYCLE_ONSET - 20 : ONECYCLE_ONSET]) < 0.5 * r.losses[0]  # it was learning
    nan_at = first_nonfinite(r.losses)
    assert ONECYCLE_ONSET < nan_at < ONECYCLE_ONSET + 20 and max(r.grad_norms[:nan_at]) > 1e6, nan_at
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest == r.val_losses[0] < 0.6 * LN3, (final, lowest)
    fixed = twin(functools.partial(build.proto_onecycle, max_lr=0.02), val_check_interval=30)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.6 * lowest, (fixed.val_losses, lowest)


def proto_labels_stuck(r: PlainRecorder) -> None:
    *_, labels = build.Episodes(build.TRAIN_CLASSES, 1, interleaved_labels=True)[0]
    assert labels[:5].tolist() == [0, 1, 2, 3, 4]  # the first five queries are all of the first class
    windows = [mean(r.losses[i : i + 30]) for i in range(0, 300, 30)]
    assert all(abs(w - LN5) < 0.02 * LN5 for w in windows), windows  # chance on five ways, from step 0
    assert min(r.grad_norms) > 0 and zero_rows(r, "net.0.weight") < 1.0  # gradients reach the embedding
    fixed = twin(functools.partial(build.proto_interleaved_labels, interleaved=False), val_check_interval=30)
    assert mean(fixed.losses[-30:]) < 0.1 * LN5 and fixed.val_losses[-1] < 0.5 * r.val_losses[-1]


# ------------------------------------------------------------------------------------------ gridworld
@functools.cache
def bc_trivial() -> float:
    """The held-out cross-entropy of the training actions' marginal (the best policy that ignores the
    state)."""
    _, y = build.gridworld("train")
    _, vy = build.gridworld("val")
    prior = torch.bincount(y, minlength=4).float() / len(y)
    return float(-prior.log()[vy].mean())


def bc_zero_states_stuck(r: PlainRecorder) -> None:
    trivial = bc_trivial()
    assert all(abs(v - trivial) < 0.01 * trivial for v in r.val_losses), (r.val_losses, trivial)
    assert zero_rows(r, "net.0.weight") == 1.0  # all-zero states: the first layer never gets a gradient
    assert r.lrs[0] == [3e-3]
    fixed = twin(functools.partial(build.bc_zero_states, typo=False))
    assert fixed.val_losses[-1] < 0.3 * trivial, (fixed.val_losses, trivial)


def bc_lr_stuck(r: PlainRecorder) -> None:
    trivial = bc_trivial()
    assert all(abs(v - LN4) < 0.01 * LN4 for v in r.val_losses) and min(r.val_losses) > trivial, r.val_losses
    assert r.lrs[0] == [1e-6] and zero_rows(r, "net.0.weight") == 0.0  # the states reach the first layer
    assert max(max(step.values()) for step in r.update_ratios) < 1e-3  # the weights barely move
    fixed = twin(functools.partial(build.bc_lr_weight_decay_swapped, swapped=False))
    assert fixed.val_losses[-1] < 0.3 * trivial, (fixed.val_losses, trivial)


def bc_loader_stalls(r: PlainRecorder) -> None:
    wait, step = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert wait > 0.02 and wait > 4 * step, (wait, step)  # the step waits on the loader
    fixed = twin(functools.partial(build.bc_planned_per_sample, planned=False), max_steps=100)
    assert wait > 10 * statistics.median(fixed.wait_s), (wait, statistics.median(fixed.wait_s))
    assert mean(r.losses[-20:]) < 0.5 * r.losses[0] and r.val_losses[-1] < 0.5 * bc_trivial()  # it learns


# ------------------------------------------------------------------------------------------ DANN
def dann_features_frozen(r: PlainRecorder) -> None:
    for step in r.update_ratios:
        assert all(v == 0.0 for k, v in step.items() if k.startswith("net.")), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("label_head.")), step
    assert zero_rows(r, "net.0.weight") < 0.5 and min(r.grad_norms) > 0  # the features get gradients
    fixed = twin(functools.partial(build.dann_optimizer_heads_only, heads_only=False))
    assert fixed.val_losses[-1] < 0.25 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ keypoints
def keypoint_lr_kills_units(r: PlainRecorder) -> None:
    assert r.lrs[0] == [0.1] and r.losses[1] > 1000 * r.losses[0], r.losses[:3]  # the first update blows up
    assert all(zero_rows(r, name, slice(DEAD_BY, None)) == 1.0 for name in HIDDEN_CONVS)  # dead from step 10
    assert all(zero_rows(r, name, slice(0, 1)) < 0.5 for name in HIDDEN_CONVS)  # alive at step 0
    v = r.val_losses
    assert abs(v[-1] - v[-4]) < 1e-3 * v[-1], v  # a constant heatmap, frozen
    fixed = twin(functools.partial(build.keypoint_nadam, lr=2e-3), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.2 * v[-1], (fixed.val_losses, v)


def keypoint_prior_dead(r: PlainRecorder) -> None:
    assert all(zero_rows(r, name) == 1.0 for name in HIDDEN_CONVS)  # every hidden ReLU dead from step 0
    assert r.lrs[0] == [2e-3] and r.grad_norms[0] < 1000
    fixed = twin(functools.partial(build.keypoint_prior_bias, every_conv=False), val_check_interval=25)
    assert all(zero_rows(fixed, name, slice(0, 1)) < 0.5 for name in HIDDEN_CONVS)
    assert fixed.val_losses[-1] < 0.2 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ tabular
def tabular_overfits(r: PlainRecorder) -> None:
    _, train, val = build.tabular_split_swapped()
    assert len(train.dataset) == 330 and len(val.dataset) == 2970
    v, t = r.val_losses, r.epoch_train_losses
    best = min(range(len(v)), key=v.__getitem__)
    assert (best + 1) * 10 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert final > 1.3 * lowest and min(v[best + 1 :]) > lowest, (final, lowest)
    assert t[-1] < 0.2 * t[best], (t[-1], t[best])  # the training loss keeps falling
    fixed = twin(functools.partial(build.tabular_split_swapped, swapped=False))
    assert fixed.val_losses[-1] < lowest, (fixed.val_losses, lowest)


def tabular_lr_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.01 * lr0) == COLLAPSE_ONSET
    assert r.lrs[-1][0] < 1e-30
    final, lowest = repair_room(r)
    assert all(abs(v - LN3) < 0.01 * LN3 for v in r.val_losses) and abs(final - lowest) < 1e-3, r.val_losses
    fixed = twin(functools.partial(build.tabular_steplr, interval="epoch"))
    assert fixed.val_losses[-1] < 0.75 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ healthy
def flow_slow_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * r.losses[0])
    assert falls_mostly(r.val_losses, 0.85), r.val_losses


def flow_raw_trains(r: PlainRecorder) -> None:
    assert r.losses[0] > 100 and r.grad_norms[0] > 1000, (r.losses[0], r.grad_norms[0])  # raw units
    trains(r, 0.9 * r.val_losses[0])
    assert falls_mostly(r.val_losses, 0.85), r.val_losses


def proto_warmup_trains(r: PlainRecorder) -> None:
    assert abs(r.lrs[0][0] - 0.02 / 25) < 1e-9 and abs(max(lr[0] for lr in r.lrs) - 0.02) < 1e-4
    assert mean(r.losses[:10]) > 0.95 * r.losses[0], r.losses[:10]  # nothing moves at first
    trains(r, 0.6 * r.val_losses[0])
    assert mean(r.losses[-30:]) < 0.05 * r.losses[0]


def bc_restarts_train(r: PlainRecorder) -> None:
    lrs = [lr[0] for lr in r.lrs]
    assert all(lrs[i] == 3e-3 for i in (0, 60, 120, 180, 240)) and lrs[59] < 1e-5, lrs[55:62]
    trains(r, 0.25 * bc_trivial())
    assert falls_mostly(r.val_losses, 1.0), r.val_losses


def bc_noisy_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * bc_trivial())
    assert mean(r.losses[-50:]) > 0.6, mean(r.losses[-50:])  # the exploration noise floors the loss
    assert falls_mostly(r.val_losses, 1.0), r.val_losses


def dann_trains(r: PlainRecorder) -> None:
    trains(r, 0.1)
    assert mean(r.losses[-50:]) > 0.6, mean(r.losses[-50:])  # the domain head held near ln 2


def keypoint_mean_trains(r: PlainRecorder) -> None:
    trains(r, 0.15 * r.val_losses[0])
    assert max(r.losses[10:]) < 0.05 and max(r.grad_norms[50:]) < 0.5, max(r.grad_norms[50:])  # tiny


def keypoint_tiny_val_trains(r: PlainRecorder) -> None:
    v = r.val_losses
    trains(r, 0.1 * v[0])
    assert sum(b > a for a, b in itertools.pairwise(v)) >= 2, v  # four images: some checks go up


def tabular_step_decay_trains(r: PlainRecorder) -> None:
    lrs = [lr[0] for lr in r.lrs]
    assert lrs[93] == 1e-2 and lrs[94] == 5e-3 and lrs[-1] == 1.25e-3, lrs[90:96]  # halved every 94 steps
    trains(r, 0.7 * LN3)
    assert falls_mostly(r.val_losses, 1.0), r.val_losses


def tabular_frozen_embedding_trains(r: PlainRecorder) -> None:
    assert all("net.embed.weight" not in step for step in r.update_ratios)  # frozen on purpose
    trains(r, 0.7 * LN3)
    assert falls_mostly(r.val_losses, 1.0), r.val_losses
