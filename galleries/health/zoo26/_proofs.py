"""Proofs of zoo 26's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from collections.abc import Callable, Iterator
from typing import Any

import torch

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo26 import _builds as build

SATURATED_ONSET = 60  # the first batch (of a fixed shuffle) holding a saturated scanline
WARMUP_ONSET = 217  # the first step whose loss is 10x the lowest before it (the LR 22x its meant peak)
COLLAPSE_ONSET = 65  # the first step run below 2% of the LR ((1 - s / 75) ** 2)
SECONDS_ONSET = 2  # the first batch (of a fixed shuffle) holding a curve timed in seconds
QUALITY_ONSET = 50  # after the validation at step 70 (every 5 epochs of 2 steps) it never returns to its best

LN2, LN3 = math.log(2), math.log(3)  # the cross-entropy of a coin flip and of a uniform guess among 3 classes


# ------------------------------------------------------------------------------------------ helpers
def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def finite(xs: list[float]) -> bool:
    return all(math.isfinite(x) for x in xs)


def first_nonfinite(xs: list[float]) -> int:
    return next((i for i, x in enumerate(xs) if not math.isfinite(x)), len(xs))


def twin(make: Callable[[], Any], max_steps: int = 300, **trainer_kwargs: Any) -> PlainRecorder:
    """Train ``make`` (a run's build with its bug fixed, or a variant) with the plain recorder alone."""
    case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                     max_steps=max_steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(case, monitor=False)[1]


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """The final validation loss and the lowest one (what a repair restoring the best weights keeps)."""
    finite_vals = [v for v in r.val_losses if math.isfinite(v)]
    return r.val_losses[-1], min(finite_vals)


def trains(r: PlainRecorder, below: float) -> None:
    """A healthy run: finite losses and a last validation loss under ``below``."""
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    assert r.val_losses[-1] < below, (r.val_losses, below)


def batches(loader: Any, steps: int) -> Iterator[Any]:
    """The first ``steps`` batches a training run draws from ``loader`` (epoch after epoch)."""
    return itertools.islice(itertools.chain.from_iterable(itertools.repeat(loader)), steps)


def ratio(r: PlainRecorder, name: str, start: int = 10) -> float:
    """The median update-to-weight ratio of the parameter ``name`` from step ``start``."""
    return statistics.median(step[name] for step in r.update_ratios[start:])


def _best(val: list[float]) -> int:
    return min(range(len(val)), key=val.__getitem__)


# ------------------------------------------------------------------------------------------ NaN pair (stereo)
def stereo_saturated_nan(r: PlainRecorder) -> None:
    _, train, _ = build.stereo_saturated()
    bad = [i for i, (x, _) in enumerate(batches(train, 300)) if not x.isfinite().all()]
    assert bad[0] == SATURATED_ONSET and len(bad) <= 9, bad  # three bad rows an epoch of 100 batches
    at = first_nonfinite(r.losses)
    assert at == SATURATED_ONSET and finite(r.grad_norms[:at]), at
    assert all(math.isnan(v) for v in r.losses[at + 1 :])  # one NaN update: every weight is NaN
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.7 * r.val_losses[0] and finite(r.val_losses[:3]), r.val_losses
    fixed = twin(functools.partial(build.stereo_saturated, saturated=False), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.3 * fixed.val_losses[0], fixed.val_losses


def stereo_nesterov_nan(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert at <= 10 and finite(r.losses[:at]), r.losses[: at + 1]
    assert max(r.losses[:at]) > 1e5 * r.losses[0], r.losses[:at]  # it grows before it breaks
    assert r.lrs[0] == [5.0 * 0.01] and r.lrs[at][0] < 0.6, r.lrs[: at + 1]  # still warming up
    fixed = twin(functools.partial(build.stereo_nesterov, lr=2e-2), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.2 * fixed.val_losses[0], fixed.val_losses


# ------------------------------------------------------------------------------------------ chance pair
def brackets_vocab_stuck(r: PlainRecorder) -> None:
    _, train, _ = build.brackets_square_vocab()
    tokens, lengths, _ = next(iter(train))
    real = torch.arange(build.MAX_LEN) < lengths.unsqueeze(1)
    assert bool((tokens[real] == build.UNK).all())  # every bracket is <unk>: only the length is left
    assert all(abs(v - LN2) < 0.01 for v in r.val_losses), r.val_losses
    assert mean(r.losses[-50:]) > 0.98 * LN2 and r.lrs[0] == [1e-2]
    round_vocab = {"(": 1, ")": 2}
    fixed = twin(functools.partial(build.brackets_square_vocab, vocab=round_vocab), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.1 * LN2, fixed.val_losses


def brackets_lr_stuck(r: PlainRecorder) -> None:
    assert all(abs(v - r.val_losses[0]) < 0.005 for v in r.val_losses), r.val_losses
    assert all(abs(v - LN2) < 0.02 for v in r.val_losses) and r.lrs[0] == [1e-5]
    assert max(ratio(r, n) for n in r.update_ratios[0]) < 1e-3  # every weight moves, by next to nothing
    final, lowest = repair_room(r)  # no better weights to go back to: only a higher LR saves it
    assert final - lowest < 0.002, (final, lowest)
    fixed = twin(functools.partial(build.brackets_adagrad, lr=0.1), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.05 * lowest, fixed.val_losses


# ------------------------------------------------------------------------------------------ rising-val pair
def tomo_warmup_blows_up(r: PlainRecorder) -> None:
    lrs = [lr[0] for lr in r.lrs]
    assert lrs[9] == 1e-2 and lrs[WARMUP_ONSET] > 20 * 1e-2, lrs[: WARMUP_ONSET + 1 : 20]  # past its peak
    at = next(i for i in range(1, len(r.losses)) if r.losses[i] > 10 * min(r.losses[:i]))
    assert at == WARMUP_ONSET, at
    final, lowest = repair_room(r)  # validation every 25 steps: the best is before the blow-up
    assert lowest == min(r.val_losses[: WARMUP_ONSET // 25 + 1]) and final > 100 * lowest, r.val_losses
    fixed = twin(functools.partial(build.tomo_uncapped_warmup, capped=True), val_check_interval=25)
    assert fixed.val_losses[-1] < lowest, (fixed.val_losses, lowest)


def curves_quality_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = _best(val)
    assert (best + 1) * 10 == QUALITY_ONSET, best  # a validation every 5 epochs of 2 steps
    final, lowest = repair_room(r)
    assert final > 1.5 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.01 * train[best], (train[-1], train[best])  # the ~250 curves memorised


# ------------------------------------------------------------------------------------------ stuck-high pair
def separation_frozen(r: PlainRecorder) -> None:
    for step in r.update_ratios:
        assert set(step) == {"net.head.weight", "net.head.bias"} and all(v > 0 for v in step.values()), step
    fixed = twin(functools.partial(build.separation_frozen_encoder, frozen=False), val_check_interval=25)
    assert abs(r.val_losses[-1] - r.val_losses[0]) < 0.02 * r.val_losses[0], r.val_losses  # it barely moves
    assert fixed.val_losses[-1] < 0.4 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def separation_rounded(r: PlainRecorder) -> None:
    assert all(g == 0.0 for g in r.grad_norms)  # torch.round passes back exactly zero
    assert all(v == 0.0 for step in r.update_ratios for v in step.values())
    assert all(v == r.val_losses[0] for v in r.val_losses), r.val_losses
    fixed = twin(functools.partial(build.separation_rounded_mask, binarise=False), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.25 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ single causes
def tomo_lr_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert lr0 == 2e-3 and next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.02 * lr0) == COLLAPSE_ONSET
    assert all(lr == [0.0] for lr in r.lrs[build.EPOCH_STEPS :])
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[3]) < 0.01 * final, r.val_losses  # frozen in place from step 100
    fixed = twin(functools.partial(build.tomo_polynomial, total_iters=300), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.5 * lowest, (fixed.val_losses, lowest)


def tomo_zero_branch_dead(r: PlainRecorder) -> None:
    refine = [n for n in r.zero_grad_rows[0] if n.startswith("net.refine.")]
    assert len(refine) == 3 and all(step[n] == 1.0 for step in r.zero_grad_rows for n in refine)
    fixed = twin(functools.partial(build.tomo_zero_branch, everything=False), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.7 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def curves_tanh_vanishes(r: PlainRecorder) -> None:
    first, last = ratio(r, "net.phi.0.weight"), ratio(r, "net.phi.26.weight")
    assert first < 1e-2 * last and first < 1e-5, (first, last)  # the gradient fades layer after layer
    assert all(abs(v - LN3) < 0.02 for v in r.val_losses), r.val_losses
    fixed = twin(functools.partial(build.curves_deep_tanh, depth=3), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.3 * LN3, fixed.val_losses


def curves_stalls(r: PlainRecorder) -> None:
    wait, step = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert wait > 1.5 * step, (wait, step)  # more time waiting for the batch than computing it
    fixed = twin(functools.partial(build.curves_zero_point_per_batch, per_batch=False), max_steps=100)
    assert wait > 8 * statistics.median(fixed.wait_s), (wait, statistics.median(fixed.wait_s))
    assert abs(fixed.losses[-1] - r.losses[-1]) < 1e-4 * abs(r.losses[-1])  # the same batches, only slower


def curves_seconds_spikes(r: PlainRecorder) -> None:
    _, train, _ = build.curves_times_in_seconds()
    hit = [bool(x.abs().amax() > 1000) for x, _, _ in batches(train, 300)]
    assert hit.index(True) == SECONDS_ONSET and 10 <= sum(hit) <= 30, sum(hit)
    fixed = twin(functools.partial(build.curves_times_in_seconds, count=0), val_check_interval=25)
    at = SECONDS_ONSET  # the same weights and batches until then: the gradient jumps on the first bad batch
    assert r.losses[:at] == fixed.losses[:at] and r.grad_norms[at] > 100 * fixed.grad_norms[at]
    assert finite(r.losses)
    calm = statistics.median(fixed.losses)
    spikes = [loss for loss in r.losses if loss > 100 * calm]
    assert len(spikes) >= 8 and max(spikes) > 1000 * calm, (calm, sorted(spikes))
    assert max(fixed.losses[10:]) < 10 * calm, max(fixed.losses[10:])
    assert max(r.grad_norms) > 1000 * max(fixed.grad_norms[10:]), (max(r.grad_norms), max(fixed.grad_norms))


# ------------------------------------------------------------------------------------------ healthy
def stereo_bf16_trains(r: PlainRecorder) -> None:
    trains(r, 0.25 * r.val_losses[0])
    assert sum(g > 1.0 for g in r.grad_norms) > 50  # gradients above the clip value, every component clipped


def stereo_nesterov_trains(r: PlainRecorder) -> None:
    trains(r, 0.2 * r.val_losses[0])
    assert max(lr[0] for lr in r.lrs) > 0.015 and r.lrs[0][0] < 1e-3  # warm-up to a high peak


def brackets_batch_8_trains(r: PlainRecorder) -> None:
    trains(r, 0.2 * LN2)
    late = r.losses[-50:]
    assert statistics.stdev(late) > 0.08 and max(late) > 3 * statistics.median(late), late  # noisy


def brackets_plateau_trains(r: PlainRecorder) -> None:
    trains(r, 0.1 * LN2)
    plateau = r.val_losses[1:5]  # steps 50-125: stuck near 0.55 while the LSTM finds the depth counter
    assert max(plateau) - min(plateau) < 0.06 and min(plateau) > 0.5, r.val_losses


def tomo_restarts_train(r: PlainRecorder) -> None:
    trains(r, 0.6 * r.val_losses[0])
    lrs = [lr[0] for lr in r.lrs]
    assert lrs[49] < 0.01 and lrs[50] == 0.5 and lrs[150] == 0.5, (lrs[49], lrs[50], lrs[150])


def tomo_heavy_decay_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * r.val_losses[0])
    assert all(b < a for a, b in itertools.pairwise(r.val_losses[:6])), r.val_losses


def separation_snr_trains(r: PlainRecorder) -> None:
    assert finite(r.losses) and finite(r.val_losses)
    assert r.val_losses[-1] < r.val_losses[0] - 4 and max(r.losses[-50:]) < 0, r.val_losses  # dB below zero


def separation_accumulated_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * r.val_losses[0])
    assert len(r.losses) == 4 * len(r.grad_norms)  # four batches a step


def curves_imbalanced_train(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.val_losses[0])


def curves_telescopes_train(r: PlainRecorder) -> None:
    trains(r, 0.3 * LN3)
    rows = statistics.median(step["net.telescope.weight"] for step in r.zero_grad_rows)
    assert rows > 0.8, rows  # a batch of 32 curves touches 32 of the 200 telescopes' rows at most
