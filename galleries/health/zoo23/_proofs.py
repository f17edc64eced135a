"""Proofs of zoo 23's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo23 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

CHORD_TRIVIAL = math.log(build.CHORDS)  # the cross-entropy of a uniform guess over the 48 chords
FUSION_TRIVIAL = math.log(8)  # the same over the fusion task's 8 classes
BOARD_VARIANCE = float(build.boards()[1][1].var(unbiased=False))  # the scaled evaluation's, validation rows

BAD_BATCH = build.DUPLICATE_ROWS[0] // 64  # the first batch holding a dt = 0 row (read in time order)
BLOWUP_BY = 5  # the ASGD run's loss is non-finite by this step
OVERFIT_ONSET = 50  # the best validation (every 5 epochs of 2 steps); it never returns there
PEAK_ONSET = 44  # the 5-step mean loss first doubles from its lowest as the warm-up passes ~0.88
COLLAPSE_ONSET = 100  # the first step run at 1/100 of the LR (the second cut of ReduceLROnPlateau in "max")
MM_ONSET = 17  # the first step that draws one of the millimetre shards


# ------------------------------------------------------------------------------------------------ helpers
def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def finite(values: list[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: list[float]) -> int:
    """The index of the first non-finite value (``len(values)`` if none)."""
    return next((i for i, v in enumerate(values) if not math.isfinite(v)), len(values))


def twin(make: Callable[[], Any], max_steps: int = 300, **trainer_kwargs: Any) -> PlainRecorder:
    """Train the healthy twin ``make`` (a build, seed 0) with the plain recorder alone."""
    case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                     max_steps=max_steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(case, monitor=False)[1]


def zero_rows(r: PlainRecorder, name: str) -> list[float]:
    """Per step, the fraction of ``name``'s rows whose gradient is exactly zero."""
    return [step[name] for step in r.zero_grad_rows]


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """``(final, lowest)`` validation loss (``lowest`` over the finite ones)."""
    return r.val_losses[-1], min(v for v in r.val_losses if math.isfinite(v))


def trains(r: PlainRecorder, below: float) -> None:
    """Finite losses and a final validation loss below ``below`` (and below the first)."""
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    assert r.val_losses[-1] < below and r.val_losses[-1] < r.val_losses[0], (r.val_losses, below)


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float = 0.01) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), (r.val_losses, trivial)


def rolling(values: list[float], window: int = 5) -> list[float]:
    return [mean(values[i : i + window]) for i in range(len(values) - window + 1)]


def rise_onset(losses: list[float], factor: float = 2.0) -> int:
    """The first step whose 5-step mean loss is ``factor`` x the lowest 5-step mean before it."""
    r5 = rolling(losses)
    return next(i for i in range(1, len(r5)) if r5[i] > factor * min(r5[:i]))


# ------------------------------------------------------------------------------------------ trivial loss
def chords_shuffled_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, CHORD_TRIVIAL)
    assert mean(r.losses[-50:]) > 0.98 * CHORD_TRIVIAL, mean(r.losses[-50:])
    # the network is alive and its LR sound: the first layer's rows get gradients, the weights move
    assert max(zero_rows(r, "net.0.weight")) < 0.2 and r.lrs[0] == [3e-3]
    assert mean([step["net.0.weight"] for step in r.update_ratios]) > 1e-3
    fixed = twin(functools.partial(build.chords_shuffled_apart, apart=False), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.02 * CHORD_TRIVIAL, fixed.val_losses


def chords_adadelta_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, CHORD_TRIVIAL)
    assert r.lrs[0] == [1e-3] and max(zero_rows(r, "net.0.weight")) < 0.1  # alive, but ...
    moved = mean([step["net.0.weight"] for step in r.update_ratios])
    assert max(max(step.values()) for step in r.update_ratios) < 1e-4  # ... no weight moves
    fixed = twin(functools.partial(build.chords_adadelta, lr=1.0), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.02 * CHORD_TRIVIAL, fixed.val_losses
    assert mean([step["net.0.weight"] for step in fixed.update_ratios]) > 100 * moved


def chords_prior_bias_dead(r: PlainRecorder) -> None:
    _stuck_at(r, CHORD_TRIVIAL)
    # no unit of either hidden layer ever gets a gradient, from step 0: every ReLU is dead on every input
    assert min(zero_rows(r, "net.0.weight")) == 1.0 and min(zero_rows(r, "net.2.weight")) == 1.0
    fixed = twin(functools.partial(build.chords_prior_bias, every_layer=False), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.02 * CHORD_TRIVIAL, fixed.val_losses
    assert max(zero_rows(fixed, "net.0.weight")[:20]) < 0.1


def chords_sigmoid_vanishes(r: PlainRecorder) -> None:
    _stuck_at(r, CHORD_TRIVIAL)
    first = mean([step["net.0.weight"] for step in r.update_ratios])
    last = mean([step["net.20.weight"] for step in r.update_ratios])
    assert first < 2e-3 * last, (first, last)  # SGD: the update is the gradient; ten sigmoids shrink it
    assert max(zero_rows(r, "net.0.weight")) == 0.0  # nothing is dead: the gradient is small, not zero
    fixed = twin(functools.partial(build.chords_deep_sigmoid, sigmoid=False), val_check_interval=50)
    assert fixed.val_losses[-1] < 0.05 * CHORD_TRIVIAL, fixed.val_losses
    fixed_first = mean([step["net.0.weight"] for step in fixed.update_ratios])
    fixed_last = mean([step["net.20.weight"] for step in fixed.update_ratios])
    assert fixed_first > 0.05 * fixed_last, (fixed_first, fixed_last)


# ------------------------------------------------------------------------------------------ non-finite
def flow_duplicates_nan(r: PlainRecorder) -> None:
    x, dt, _ = build.trajectories(160, 0)
    assert finite(x.flatten().tolist()) and float(dt.min()) > 0.049  # the clean log: every gap >= 0.05
    assert finite(r.losses[:BAD_BATCH]) and first_nonfinite(r.losses) == BAD_BATCH
    assert finite(r.grad_norms[:BAD_BATCH]) and max(r.grad_norms[:BAD_BATCH]) < 10
    assert all(math.isnan(v) for v in r.losses[BAD_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.1 * r.losses[0], (final, lowest)
    fixed = twin(functools.partial(build.flow_duplicate_timestamps, duplicates=False), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.5 * lowest, (fixed.val_losses, lowest)


def board_asgd_blows_up(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert at <= BLOWUP_BY and finite(r.losses[:at]), r.losses[: at + 1]
    assert r.losses[at - 1] > 1000 * r.losses[0], r.losses[: at + 1]  # grows by orders of magnitude first
    fixed = twin(functools.partial(build.board_asgd, lr=0.1), val_check_interval=50)
    trains(fixed, 0.5 * BOARD_VARIANCE)


def board_nan_checkpoint(r: PlainRecorder) -> None:
    torch.manual_seed(0)
    model, train, _ = build.board_resumed()
    weight = model.net.body[0].weight
    assert not bool(weight.isfinite().all()) and int(weight.isnan().any(1).sum()) == 3  # NaN before any step
    assert all(bool(batch[0].isfinite().all()) for batch in train)  # the boards are clean
    assert first_nonfinite(r.losses) == 0 and all(math.isnan(v) for v in r.losses)
    fixed = twin(functools.partial(build.board_resumed, nan_rows=False), val_check_interval=50)
    trains(fixed, 0.2 * BOARD_VARIANCE)


# ------------------------------------------------------------------------------------------ rising val
def chords_subset_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 10 == OVERFIT_ONSET, best  # a check every 5 epochs of 2 steps
    final, lowest = repair_room(r)
    assert final > 1.25 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert all(b > a for a, b in itertools.pairwise(val[best:])), val  # climbing at every check after it
    assert train[-1] < 0.05 * train[best], (train[-1], train[best])  # memorised
    fixed = twin(functools.partial(build.chords_debug_subset, rows=4800), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.1 * lowest, (fixed.val_losses, lowest)


def chords_peak_diverges(r: PlainRecorder) -> None:
    assert rise_onset(r.losses) == PEAK_ONSET, rise_onset(r.losses)
    assert r.lrs[PEAK_ONSET][0] > 0.85, r.lrs[PEAK_ONSET]  # the warm-up's last steps, near the 1.0 peak
    final, lowest = repair_room(r)  # validation every 20 steps: the best is at step 40, before the onset
    assert lowest == r.val_losses[PEAK_ONSET // 20 - 1] and lowest < 0.3 * CHORD_TRIVIAL, r.val_losses
    assert final > 3 * lowest and min(r.val_losses[PEAK_ONSET // 20 :]) > 3 * lowest, r.val_losses
    assert mean(r.losses[PEAK_ONSET:]) > 3 * mean(r.losses[PEAK_ONSET - 10 : PEAK_ONSET])
    # alive before the onset, every first-layer ReLU dead on every input by step 150 (the LR killed them)
    dead = zero_rows(r, "net.0.weight")
    assert max(dead[:PEAK_ONSET]) < 0.15 and min(dead[150:]) == 1.0, (max(dead[:PEAK_ONSET]), min(dead[150:]))
    fixed = twin(functools.partial(build.chords_warmup_peak, peak=0.1), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.1 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ LR collapse
def fusion_plateau_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] <= 0.011 * lr0) == COLLAPSE_ONSET, r.lrs[::20]
    assert r.lrs[-1][0] < 1e-5 * lr0 and r.val_losses[1] < r.val_losses[0]  # cut though it improved
    final, lowest = repair_room(r)
    assert max(r.val_losses[-8:]) - min(r.val_losses[-8:]) < 0.002 * final, r.val_losses  # frozen in place
    fixed = twin(functools.partial(build.fusion_plateau, mode="min"), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.9 * lowest, (fixed.val_losses, lowest)
    assert fixed.lrs[-1][0] >= 0.01 * lr0  # in "min" mode it cuts at most twice


# ------------------------------------------------------------------------------------------ frozen
def fusion_view_b_frozen(r: PlainRecorder) -> None:
    assert all(lrs == [3e-3, 0.0] for lrs in r.lrs), r.lrs[-1]
    assert max(zero_rows(r, "net.enc_b.0.weight")) < 0.5  # encoder B gets gradients ...
    for step in r.update_ratios:  # ... and never changes, while the rest learns
        assert all(v == 0.0 for k, v in step.items() if k.startswith("net.enc_b.")), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith(("net.enc_a.", "net.head."))), step
    fixed = twin(functools.partial(build.fusion_manual, steps_schedule=True), val_check_interval=20)
    assert fixed.lrs[-1] == [3e-3, 3e-3]
    assert fixed.val_losses[-1] < 0.85 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ activations
class TanhProbe(pl.Callback):
    """The fraction of encoder A's first tanh outputs beyond +-0.99, over the rows where view A is present,
    on each training batch."""

    def __init__(self) -> None:
        self.saturated: list[float] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ) -> None:
        xa, _, mask, _ = batch
        with torch.no_grad():
            h = pl_module.net.enc_a[1](pl_module.net.enc_a[0](xa[mask[:, 0] > 0]))
        self.saturated.append(float((h.abs() > 0.99).float().mean()))


def _tanh_saturation(volts: bool) -> TanhProbe:
    torch.manual_seed(0)
    model, train, _ = build.fusion_adc_counts(volts)
    probe = TanhProbe()
    fast_trainer(max_steps=300, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(model, train)
    return probe


def fusion_counts_saturate(r: PlainRecorder) -> None:
    bad, good = _tanh_saturation(False).saturated, _tanh_saturation(True).saturated
    assert min(bad) > 0.8 and max(good) < 0.2, (min(bad), max(good))  # from step 0, on every batch
    fixed = twin(functools.partial(build.fusion_adc_counts, volts=True), val_check_interval=50)
    assert fixed.val_losses[-1] < 0.8 * r.val_losses[-1], (fixed.val_losses, r.val_losses)
    assert fixed.val_losses[-1] < 0.9 * min(r.val_losses), (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ data
def maze_file_stalls(r: PlainRecorder) -> None:
    wait, step = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert wait > 4 * step, (wait, step)  # the loop waits on the loader most of the time, from the start
    assert mean(r.wait_s[:10]) > 4 * step
    fixed = twin(functools.partial(build.maze_file, reparse=False), max_steps=150, val_check_interval=50)
    assert statistics.median(fixed.wait_s) < 0.3 * wait, (statistics.median(fixed.wait_s), wait)
    assert fixed.losses == r.losses  # the same batches: only the reading differs


def fusion_mm_outliers(r: PlainRecorder) -> None:
    median = statistics.median(r.losses)
    outliers = [i for i, v in enumerate(r.losses) if v > 4 * median]
    assert outliers[0] == MM_ONSET and 6 <= len(outliers) <= 9, outliers  # three shards an epoch
    assert finite(r.losses) and min(r.losses[i] for i in outliers) > 4 * median
    fixed = twin(functools.partial(build.fusion_millimetres, millimetres=False), val_check_interval=50)
    assert max(fixed.losses) < 1.5 * fixed.losses[0], max(fixed.losses)  # no spikes in metres
    assert fixed.val_losses[-1] < 0.75 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ healthy
def board_centipawns_trains(r: PlainRecorder) -> None:
    variance = BOARD_VARIANCE * (100 * build.BOARD_SCALE) ** 2
    trains(r, 0.3 * variance)
    assert mean(r.losses[:10]) > 1e5 and r.grad_norms[0] > 100, (r.losses[:3], r.grad_norms[0])


def chords_noisy_trains(r: PlainRecorder) -> None:
    trains(r, 0.25 * CHORD_TRIVIAL)  # on the hand-checked (clean) validation labels
    assert mean(r.losses[-50:]) > 1.5, mean(r.losses[-50:])  # a training floor set by 30% wrong labels


def flow_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.25 * r.val_losses[0])
    assert abs(r.lrs[0][0] - 5e-5) < 1e-12 and abs(r.lrs[build.WARMUP_STEPS][0] - 5e-3) < 1e-9
    assert r.lrs[-1][0] < 0.1 * 5e-3


def fusion_frozen_trains(r: PlainRecorder) -> None:
    trains(r, 0.55 * FUSION_TRIVIAL)
    assert all(not any(k.startswith("net.enc_b.") for k in step) for step in r.update_ratios)


def maze_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * r.val_losses[0])
    v = r.val_losses
    assert len(v) >= 10 and sum(b > a for a, b in itertools.pairwise(v)) >= 2, v  # 16 mazes: some rise


def chords_slow_trains(r: PlainRecorder) -> None:
    trains(r, 0.4 * CHORD_TRIVIAL)
    assert all(b < a for a, b in itertools.pairwise(r.val_losses)), r.val_losses  # steady
    assert r.val_losses[2] > 0.95 * CHORD_TRIVIAL  # slow: barely moved after 60 steps


def board_steps_train(r: PlainRecorder) -> None:
    trains(r, 0.25 * BOARD_VARIANCE)
    first, second = build.DECAY_STEPS
    assert r.lrs[first - 1] == [0.05] and abs(r.lrs[first][0] - 0.005) < 1e-12
    assert abs(r.lrs[second][0] - 5e-4) < 1e-12


def fusion_bf16_trains(r: PlainRecorder) -> None:
    trains(r, 0.45 * FUSION_TRIVIAL)


def flow_adadelta_trains(r: PlainRecorder) -> None:
    trains(r, 0.4 * r.val_losses[0])
    assert all(b <= a * 1.05 for a, b in itertools.pairwise(r.val_losses)), r.val_losses


def fusion_plateau_min_trains(r: PlainRecorder) -> None:
    trains(r, 0.4 * FUSION_TRIVIAL)
    assert r.lrs[-1][0] >= 0.01 * r.lrs[0][0] and r.lrs[-1][0] < r.lrs[0][0]  # cut, once or twice


def maze_memo_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * r.val_losses[0])
    first, later = statistics.median(r.wait_s[:99]), statistics.median(r.wait_s[100:])
    assert first > 4 * later, (first, later)  # the first epoch parses, the later ones read the memo
