"""Proofs of zoo 19's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from galleries.health.zoo19 import _builds as build

DIGITS_EPOCH = 5  # 320 pairs in batches of 64
OVERFIT_ONSET = 105  # the step after the best validation (epoch 21): the validation loss never returns to it
NAN_BATCH = build.NAN_ROWS[0] // 64  # the first batch holding a NaN humidity (read in order)
EXP_ONSET = 40  # the step after the best validation (every 20 steps) as the LR grows 1000x
COLLAPSE_ONSET = 50  # the first step run at 1/100 of the LR (the second plateau "reduction")
OUTLIER_ONSET = 22  # the first step whose shuffled batch holds a row exported in Wh
STALL_STEPS = 120


# ------------------------------------------------------------------------------------------ helpers
def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: Sequence[float]) -> int:
    return next(i for i, v in enumerate(values) if not math.isfinite(v))


def twin(make: Callable[[], Any], max_steps: int = 300, **trainer_kwargs: Any) -> PlainRecorder:
    """Train ``make`` (a builder) once like a zoo run (seed 0), with the plain recorder alone."""
    case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                     max_steps=max_steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(case, monitor=False)[1]


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """The final and the lowest (finite) validation loss: what stopping or rolling back could keep."""
    return r.val_losses[-1], min(v for v in r.val_losses if math.isfinite(v))


def trains(r: PlainRecorder, below: float) -> None:
    """A healthy run: finite throughout, its last validation loss below ``below``."""
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    assert r.val_losses[-1] < below, (r.val_losses, below)


def ratios(r: PlainRecorder, prefix: str) -> list[float]:
    """Every recorded update-to-weight ratio of the parameters whose names start with ``prefix``."""
    return [v for step in r.update_ratios for k, v in step.items() if k.startswith(prefix)]


def _sum_entropy() -> float:
    """The cross-entropy of the best constant (the training sums' frequencies) on the validation sums."""
    _, y = build.digit_pairs("train", 20000)
    _, vy = build.digit_pairs("val", 1000)
    p = torch.bincount(y, minlength=19).float() / len(y)
    return float(-p[vy].log().mean())


DIGITS_TRIVIAL = _sum_entropy()


# ------------------------------------------------------------------------------------------ trivial loss
def digits_labels_stuck(r: PlainRecorder) -> None:
    v = r.val_losses
    assert all(abs(x - DIGITS_TRIVIAL) < 0.03 * DIGITS_TRIVIAL for x in v), (v, DIGITS_TRIVIAL)
    assert mean(r.losses[-100:]) > 0.97 * DIGITS_TRIVIAL, mean(r.losses[-100:])
    # the LR is fine: the encoder's weights move every step by an ordinary amount
    assert statistics.median(ratios(r, "net.encoder.0.weight")) > 1e-3
    fixed = twin(functools.partial(build.digits_labels_drawn_apart, shared_draw=True), val_check_interval=30)
    assert fixed.val_losses[-1] < 0.5 * DIGITS_TRIVIAL, (fixed.val_losses, DIGITS_TRIVIAL)


def digits_lr_stuck(r: PlainRecorder) -> None:
    v = r.val_losses
    assert r.lrs[0] == [1e-4] and all(abs(x - v[0]) < 0.01 * v[0] for x in v), v
    assert v[-1] > DIGITS_TRIVIAL, (v, DIGITS_TRIVIAL)  # not even at the best constant
    assert max(ratios(r, "net.encoder.0.weight")) < 1e-4  # the weights barely move
    fixed = twin(functools.partial(build.digits_sgd_adam_lr, lr=1.0), val_check_interval=30)
    assert mean(fixed.losses[-50:]) < 0.75 * DIGITS_TRIVIAL, fixed.losses[-50:]
    assert min(fixed.val_losses[-3:]) < 0.6 * DIGITS_TRIVIAL, fixed.val_losses


# ------------------------------------------------------------------------------------------ non-finite
def buildings_nan_rows(r: PlainRecorder) -> None:
    assert finite(r.losses[:NAN_BATCH]) and first_nonfinite(r.losses) == NAN_BATCH
    assert finite(r.grad_norms[:NAN_BATCH]) and max(r.grad_norms[:NAN_BATCH]) < 10
    assert all(math.isnan(v) for v in r.losses[NAN_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.3 * r.losses[0], (final, lowest)
    fixed = twin(functools.partial(build.buildings_nan_humidity, nan=False), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.3 * lowest, (fixed.val_losses, lowest)


def buildings_sgd_nan(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert at <= 12 and finite(r.losses[:at]) and r.losses[at - 1] > 1e4 * r.losses[0], r.losses[: at + 1]
    assert r.losses[2] > 5 * r.losses[0], r.losses[:3]  # growing from the first updates
    fixed = twin(functools.partial(build.buildings_sgd_lr, lr=0.3), max_steps=100, val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.1, fixed.val_losses


# ------------------------------------------------------------------------------------------ rising val
def digits_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * DIGITS_EPOCH == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert final > 1.4 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.1 * train[best], (train[-1], train[best])  # memorised
    assert lowest < DIGITS_TRIVIAL < final, (lowest, final)


def graphs_lr_grows(r: PlainRecorder) -> None:
    assert r.lrs[-1][0] > 500 * r.lrs[0][0], (r.lrs[0], r.lrs[-1])
    val = r.val_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 20 == EXP_ONSET, val
    final, lowest = repair_room(r)
    assert final > 2.5 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert mean(r.losses[-100:]) > 2 * mean(r.losses[EXP_ONSET - 20 : EXP_ONSET]), (
        "the training loss rises too"
    )
    # by the last 100 steps every ReLU is dead: no row of a message layer gets any gradient
    assert all(z["net.messages.1.weight"] == 1.0 for z in r.zero_grad_rows[-100:])
    fixed = twin(functools.partial(build.graphs_exponential_inverted, inverted=False), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.8 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ collapse
def pinn_lr_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.02 * lr0) == COLLAPSE_ONSET
    assert r.lrs[-1][0] < 1e-5 * lr0, r.lrs[-1]
    final, lowest = repair_room(r)
    frozen = r.val_losses[COLLAPSE_ONSET // 10 + 2]
    assert abs(final - frozen) < 0.05 * final, r.val_losses  # frozen in place soon after the collapse
    fixed = twin(functools.partial(build.pinn_plateau_mode_max, mode="min"))
    assert fixed.val_losses[-1] < 0.1 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ frozen
def graphs_body_frozen(r: PlainRecorder) -> None:
    assert min(r.grad_norms) > 0
    body = ("net.encode.", "net.messages.")
    for step in r.update_ratios:
        assert all(v == 0.0 for k, v in step.items() if k.startswith(body)), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("net.readout.")), step
    # the frozen layers do get gradients: most of their rows are non-zero at every step
    assert max(z["net.messages.1.weight"] for z in r.zero_grad_rows) < 0.5
    fixed = twin(functools.partial(build.graphs_readout_only, readout_only=False), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.6 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ data stall
def graphs_stall(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.graphs_features_every_read, cache=True), STALL_STEPS,
                 val_check_interval=20)  # fmt: skip
    wait, step = mean(r.wait_s), mean(r.step_s)
    assert wait > 2 * step and wait > 5 * mean(fixed.wait_s), (wait, step, mean(fixed.wait_s))
    # the same training, step for step: only the time spent waiting for the data differs
    assert all(math.isclose(a, b, rel_tol=1e-4) for a, b in zip(r.losses, fixed.losses, strict=True))


# ------------------------------------------------------------------------------------------ outliers
def wh_steps(steps: int = 300) -> list[int]:
    """The steps whose batch holds a row exported in Wh, replaying the run's own shuffled loader."""
    torch.manual_seed(0)
    _, train, _ = build.buildings_energy_in_wh()
    batches = itertools.chain.from_iterable(itertools.repeat(train, math.ceil(steps / len(train)) + 1))
    return [i for i, (_, y) in zip(range(steps), batches, strict=False) if float(y[:, 0].abs().max()) > 100]


def buildings_outliers(r: PlainRecorder) -> None:
    bad = wh_steps()
    assert bad[0] == OUTLIER_ONSET and 10 < len(bad) < 60, bad
    rest = [v for i, v in enumerate(r.losses) if i not in set(bad)]
    assert min(r.losses[i] for i in bad) > 50 * statistics.median(rest), (bad, statistics.median(rest))
    assert finite(r.losses[:OUTLIER_ONSET]) and max(r.losses[:OUTLIER_ONSET]) < 2
    fixed = twin(functools.partial(build.buildings_energy_in_wh, factor=1.0), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.1 and r.val_losses[-1] > 5 * fixed.val_losses[-1], r.val_losses


# ------------------------------------------------------------------------------------------ init
def pinn_vanishes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.pinn_tiny_init, std=None))
    decay = 1e-4 * 0.1  # ASGD's own weight decay per step (lambd * lr): what moves a weight without gradient
    for layer in range(0, 10, 2):  # the first five of the six hidden layers
        name = f"net.net.{layer}.weight"
        bug, ok = ratios(r, name), ratios(fixed, name)
        # the hidden layers move by the weight decay alone: their gradient's part is under 1% of it
        assert all(abs(v - decay) < 0.01 * decay for v in bug), (name, min(bug), max(bug))
        assert statistics.median(ok) > 10 * decay, (name, statistics.median(ok))
    assert max(r.grad_norms[100:]) < 0.05 * statistics.median(fixed.grad_norms[100:])
    assert mean(r.losses[-50:]) > 0.95 * mean(r.losses[20:70]), "stuck at a constant fit"
    assert fixed.val_losses[-1] < 0.01 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ dead units
def _dead(r: PlainRecorder, name: str) -> list[float]:
    return [z[name] for z in r.zero_grad_rows]


def mdn_kills_units(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.mdn_adam_lr, lr=1e-3), val_check_interval=20)
    second, fixed_second = _dead(r, "net.body.2.weight"), _dead(fixed, "net.body.2.weight")
    assert second[0] == fixed_second[0] < 0.3, (second[0], fixed_second[0])  # the same network at step 0
    assert min(second[20:]) > 0.75 and max(fixed_second) < 0.45, (min(second[20:]), max(fixed_second))
    assert min(_dead(r, "net.body.0.weight")[100:]) > 0.8
    assert fixed.val_losses[-1] < r.val_losses[-1] - 0.15, (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ healthy
def digits_noisy_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * DIGITS_TRIVIAL)  # on the checked (clean) validation sums
    assert mean(r.losses[-50:]) > 0.7 * DIGITS_TRIVIAL, mean(r.losses[-50:])  # a high training floor


def mdn_warmup_trains(r: PlainRecorder) -> None:
    trains(r, -0.1)  # a negative log-likelihood below zero
    assert r.lrs[0][0] < 0.02 * 3e-3 and abs(r.lrs[build.WARMUP][0] - 3e-3) < 1e-12
    assert r.val_losses[0] > 1.0


def pinn_decay_trains(r: PlainRecorder) -> None:
    trains(r, 0.01 * r.val_losses[0])
    a, b = build.PINN_MILESTONES
    assert abs(r.lrs[a][0] - 2e-3) < 1e-9 and abs(r.lrs[b][0] - 4e-4) < 1e-9, (r.lrs[a], r.lrs[b])


def graphs_frozen_trains(r: PlainRecorder) -> None:
    trains(r, 0.3)
    assert all(not k.startswith(("net.encode.", "net.messages.0.")) for step in r.update_ratios for k in step)


def graphs_slow_trains(r: PlainRecorder) -> None:
    trains(r, 0.7 * r.val_losses[0])
    assert all(b < a for a, b in itertools.pairwise(r.val_losses)), r.val_losses  # steady


def buildings_raw_trains(r: PlainRecorder) -> None:
    _, vy = build.buildings(500, 1)
    trivial = float(vy.var(0, unbiased=False).mean())  # ~4e8: the energy's variance in kWh^2 / 3
    trains(r, 0.05 * trivial)
    assert mean(r.losses[:10]) > 1e7 and r.grad_norms[0] > 1e3, (r.losses[:3], r.grad_norms[0])


def buildings_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.05)
    v = r.val_losses
    assert sum(b > a for a, b in itertools.pairwise(v)) >= 2, v  # 10 rows: some checks go up
    assert r.lrs[-1][0] < r.lrs[0][0], "the plateau schedule cut the LR at least once"


def graphs_decay_trains(r: PlainRecorder) -> None:
    trains(r, 0.3)
    assert r.lrs[-1][0] < 1e-5 and r.val_losses[-1] < 0.5 * r.val_losses[0]
