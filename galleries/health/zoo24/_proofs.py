"""Proofs of zoo 24's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from typing import Any

import torch

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo24 import _builds as build
from galleries.health.zoo24._models import TWEEDIE_POWER

# ------------------------------------------------------------------------------------------------ helpers


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def finite(xs: list[float]) -> bool:
    return all(math.isfinite(x) for x in xs)


def first_nonfinite(xs: list[float]) -> int:
    return next((i for i, x in enumerate(xs) if not math.isfinite(x)), len(xs))


def zero_rows(r: PlainRecorder, name: str) -> list[float]:
    """Per step, the fraction of ``name``'s rows (output units) whose gradient is exactly zero."""
    return [step[name] for step in r.zero_grad_rows]


def ratios(r: PlainRecorder, name: str) -> list[float]:
    """Per step, ``||dW|| / ||W||`` of parameter ``name``."""
    return [step[name] for step in r.update_ratios]


def twin(
    make: Any, max_steps: int = 300, max_epochs: int | None = None, **trainer_kwargs: Any
) -> PlainRecorder:
    """A healthy twin's recording: ``make`` (a builder) trained as a zoo run is, with the plain recorder."""
    case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                     max_steps=max_steps, max_epochs=max_epochs, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(case, monitor=False)[1]


def val_every(steps: int) -> dict[str, Any]:
    """A twin's ``trainer_kwargs``: validate every ``steps`` training steps."""
    return {"val_check_interval": steps}


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """The final validation loss and the lowest finite one (what rolling back to the best could keep)."""
    return r.val_losses[-1], min(v for v in r.val_losses if math.isfinite(v))


def trains(r: PlainRecorder, below: float) -> None:
    """A healthy run: finite throughout, its last validation loss under ``below`` and under its first."""
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    assert r.val_losses[-1] < below and r.val_losses[-1] < r.val_losses[0], (r.val_losses, below)


def steps_holding(rows: tuple[int, ...], train: Any, steps: int = 300) -> list[int]:
    """The steps (over epochs, up to ``steps``) whose batch of ``train`` (a loader of :func:`build.loader`)
    holds one of ``rows``."""
    found, step, order = [], 0, build.row_order(train)
    while step < steps:
        for batch in order:
            if step >= steps:
                break
            if any(int(i) in rows for i in batch):
                found.append(step)
            step += 1
    return found


# ----------------------------------------------------------------------------------------- trivial levels
def _dna_trivial() -> float:
    """The validation BCE of the best constant (the training rate of bound sequences)."""
    p = float(build.dna_sequences(2000, 0)[1].mean())
    v = build.dna_sequences(500, 1)[1]
    return float(-(v * math.log(p) + (1 - v) * math.log(1 - p)).mean())


def _photoz_trivial() -> float:
    """The validation MSE of the best constant (the training mean redshift)."""
    return float((build.photometry(1000, 1)[1] - build.photometry(4000, 0)[1].mean()).pow(2).mean())


def _ttt_uniform() -> float:
    """The validation cross-entropy of a uniform choice among the legal moves."""
    legal = build.tictactoe()[1][build.TTT_TRAIN :]
    return float(legal.sum(1).float().log().mean())


def _insurance_trivial(scale: float = 1.0) -> float:
    """The validation Tweedie loss of the best constant rate (the training claims per exposure year)."""
    _, e, a = build.policies(6000, 0)
    _, ve, va = build.policies(2000, 1)
    p, mu = TWEEDIE_POWER, ve * float(a.sum() / e.sum()) * scale
    return float((-va * scale * mu ** (1 - p) / (1 - p) + mu ** (2 - p) / (2 - p)).mean())


def _deblur_identity() -> float:
    """The validation MSE of returning the blurred signal unchanged."""
    blurred, sharp = build.signals(250, 1)
    return float((blurred - sharp).pow(2).mean())


DNA_TRIVIAL = _dna_trivial()
PHOTOZ_TRIVIAL = _photoz_trivial()
TTT_UNIFORM = _ttt_uniform()
INSURANCE_TRIVIAL = _insurance_trivial()
DEBLUR_IDENTITY = _deblur_identity()

ZERO_EXPOSURE_ONSET = steps_holding(build.ZERO_EXPOSURE_ROWS, build.insurance_zero_exposure()[1])[0]
GLITCH_STEPS = steps_holding(build.GLITCH_ROWS, build.deblur_glitches()[1])
GLITCH_ONSET = GLITCH_STEPS[0]
SWA_ONSET = build.SWA_START * build.PHOTOZ_EPOCH  # the first step of epoch 3 (0-based): the LR is swa_lrs
OVERFIT_EPOCH = 6  # steps an epoch: 300 positions in batches of 50
OVERFIT_ONSET = 48  # after epoch 8 the validation loss never returns to its best


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float = 0.02) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), (r.val_losses, trivial)


# ------------------------------------------------------------------------------------------ trivial loss
def dna_lowercase_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, DNA_TRIVIAL)
    assert all(
        z == 1.0 for z in zero_rows(r, "net.body.weight")
    )  # all-zero inputs: no filter gets a gradient
    fixed = twin(functools.partial(build.dna_lowercase, lowercase=False))
    assert fixed.val_losses[-1] < 0.5 * DNA_TRIVIAL, (fixed.val_losses, DNA_TRIVIAL)


def dna_amsgrad_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, DNA_TRIVIAL)
    assert r.lrs[0] == [3e-6] and max(zero_rows(r, "net.body.weight")) == 0.0  # the inputs reach every filter
    fixed = twin(functools.partial(build.dna_amsgrad, lr=3e-3))
    assert fixed.val_losses[-1] < 0.5 * DNA_TRIVIAL, (fixed.val_losses, DNA_TRIVIAL)


def dna_head_only_frozen(r: PlainRecorder) -> None:
    assert max(zero_rows(r, "net.body.weight")) == 0.0 and min(r.grad_norms) > 0  # the filters get gradients
    for step in r.update_ratios:
        assert step["net.body.weight"] == 0.0 and step["net.body.bias"] == 0.0, step
        assert step["net.head.weight"] > 0.0, step
    assert min(r.val_losses) > 0.95 * DNA_TRIVIAL, (r.val_losses, DNA_TRIVIAL)
    fixed = twin(functools.partial(build.dna_head_only, whole_net=True))
    assert fixed.val_losses[-1] < 0.5 * DNA_TRIVIAL, (fixed.val_losses, DNA_TRIVIAL)


# ------------------------------------------------------------------------------------------ non-finite
def insurance_zero_exposure_nan(r: PlainRecorder) -> None:
    at = ZERO_EXPOSURE_ONSET
    assert finite(r.losses[:at]) and first_nonfinite(r.losses) == at, r.losses[: at + 1]
    assert max(r.grad_norms[:at]) < 5 and max(r.losses[:at]) < 5, (r.grad_norms[:at], r.losses[:at])
    assert all(math.isnan(v) for v in r.losses[at + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < INSURANCE_TRIVIAL, (final, lowest, INSURANCE_TRIVIAL)
    fixed = twin(functools.partial(build.insurance_zero_exposure, keep=False), **val_every(10))
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.97 * INSURANCE_TRIVIAL, fixed.val_losses


def insurance_sgd_nan(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert 2 <= at <= 5 and finite(r.losses[:at]), r.losses[: at + 1]
    assert all(b > a for a, b in itertools.pairwise(r.losses[:at])) and r.losses[at - 1] > 10 * r.losses[0]
    assert all(math.isnan(v) for v in r.losses[at + 1 :])
    fixed = twin(functools.partial(build.insurance_sgd, lr=0.05), **val_every(10))
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.98 * INSURANCE_TRIVIAL, fixed.val_losses


# ------------------------------------------------------------------------------------------ rising val
def ttt_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * OVERFIT_EPOCH == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert final > 1.3 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.01 * train[best], (train[-1], train[best])


def photoz_swa_diverges(r: PlainRecorder) -> None:
    at = SWA_ONSET
    assert r.lrs[at - 1] == [1e-3] and r.lrs[at] == [1.0] and r.lrs[-1] == [1.0], (r.lrs[at - 1], r.lrs[at])
    final, lowest = repair_room(r)
    assert lowest == min(r.val_losses[: at // 21]), r.val_losses  # the best is before the switch
    assert min(r.val_losses[at // 21 :]) > 3 * lowest and final > 10 * lowest, (r.val_losses, lowest)
    assert max(r.losses[at : at + 5]) > 1000 * max(r.losses[at - 20 : at]), r.losses[at - 3 : at + 5]
    fixed = twin(build.photoz_swa_healthy, max_steps=-1, max_epochs=5, **val_every(21))
    assert fixed.val_losses[-1] < lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ dead units
def photoz_raw_dead(r: PlainRecorder) -> None:
    dead = zero_rows(r, "net.body.0.weight")
    assert min(dead) > 0.4, min(dead)  # more than 40% of the first layer off on every batch, from step 0
    fixed = twin(functools.partial(build.photoz_raw_magnitudes, standardise=True), **val_every(21))
    assert max(zero_rows(fixed, "net.body.0.weight")) < 0.1, max(zero_rows(fixed, "net.body.0.weight"))
    assert fixed.val_losses[-1] < 0.5 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def photoz_rmsprop_blows_up(r: PlainRecorder) -> None:
    assert r.losses[1] > 1e4 * r.losses[0], r.losses[:3]  # the first update
    dead = zero_rows(r, "net.body.0.weight")
    assert dead[0] < 0.05 and min(dead[5:]) > 0.25, dead[:10]
    fixed = twin(functools.partial(build.photoz_rmsprop, lr=1e-3), **val_every(21))
    assert max(zero_rows(fixed, "net.body.0.weight")) < 0.1, max(zero_rows(fixed, "net.body.0.weight"))
    assert fixed.val_losses[-1] < 0.3 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ collapse
def ttt_linear_collapses(r: PlainRecorder) -> None:
    at = build.LINEAR_ITERS
    assert r.lrs[at - 1][0] > 0 and all(lr == [0.0] for lr in r.lrs[at:]), r.lrs[at - 2 : at + 2]
    assert all(v == 0.0 for step in r.update_ratios[at:] for v in step.values())  # nothing moves again
    assert max(r.val_losses) - min(r.val_losses[2:]) < 0.05 and len(set(r.val_losses[2:])) == 1, r.val_losses
    meant = functools.partial(build.ttt_linear_to_zero, total_iters=30 * 57)  # 30 epochs of 57 steps
    fixed = twin(meant, **val_every(19))
    assert fixed.val_losses[-1] < 0.6 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def photoz_sigmoid_vanishes(r: PlainRecorder) -> None:
    first, last = ratios(r, "net.body.0.weight"), ratios(r, "net.head.weight")
    assert statistics.median(a / b for a, b in zip(first, last)) < 1e-3, (first[::50], last[::50])
    assert all(v > 0.9 * PHOTOZ_TRIVIAL for v in r.val_losses), (r.val_losses, PHOTOZ_TRIVIAL)
    fixed = twin(functools.partial(build.photoz_deep_sigmoid, act=torch.nn.ReLU), **val_every(21))
    assert fixed.val_losses[-1] < 0.2 * PHOTOZ_TRIVIAL, (fixed.val_losses, PHOTOZ_TRIVIAL)


# ------------------------------------------------------------------------------------------ data
def deblur_stalls(r: PlainRecorder) -> None:
    wait, step = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert wait > 3 * step, (wait, step)
    fixed = twin(
        functools.partial(build.deblur_whole_table, whole_table=False), max_steps=100, **val_every(25)
    )
    assert statistics.median(fixed.wait_s) < 0.2 * wait, (statistics.median(fixed.wait_s), wait)
    assert r.val_losses[-1] < r.val_losses[0] and finite(r.losses)  # it learns, slowly in wall time


def deblur_glitch_spikes(r: PlainRecorder) -> None:
    typical = statistics.median(r.losses)
    spikes = [i for i, loss in enumerate(r.losses) if loss > 20 * typical]
    assert spikes == GLITCH_STEPS, (spikes, GLITCH_STEPS)
    assert min(r.grad_norms[i] for i in spikes) > 10 * statistics.median(r.grad_norms)
    fixed = twin(functools.partial(build.deblur_glitches, glitched=False), **val_every(21))
    assert max(fixed.losses[GLITCH_ONSET:]) < 5 * statistics.median(fixed.losses), max(fixed.losses)
    assert fixed.val_losses[-1] < 0.8 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ healthy
def dna_rprop_trains(r: PlainRecorder) -> None:
    trains(r, 0.45 * DNA_TRIVIAL)


def dna_steplr_trains(r: PlainRecorder) -> None:
    trains(r, 0.45 * DNA_TRIVIAL)
    at = build.STEPLR_EVERY
    assert (
        r.lrs[at - 1] == [1e-2] and math.isclose(r.lrs[at][0], 2e-3) and math.isclose(r.lrs[2 * at][0], 4e-4)
    )


def dna_known_motif_trains(r: PlainRecorder) -> None:
    trains(r, 0.45 * DNA_TRIVIAL)
    assert all(set(step) == {"net.head.weight", "net.head.bias"} for step in r.update_ratios)


def photoz_lbfgs_trains(r: PlainRecorder) -> None:
    trains(r, 0.05 * PHOTOZ_TRIVIAL)
    assert len(r.losses) == build.LBFGS_STEPS and len(r.grad_norms) > 3 * len(r.losses)  # closures per step


def photoz_swa_trains(r: PlainRecorder) -> None:
    trains(r, 0.15 * PHOTOZ_TRIVIAL)
    assert r.lrs[SWA_ONSET - 1] == [1e-3] and r.lrs[SWA_ONSET] == [5e-4], r.lrs[SWA_ONSET]


def photoz_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.2 * PHOTOZ_TRIVIAL)
    v = r.val_losses
    assert v[-1] < v[0] / 4 and sum(b > a for a, b in itertools.pairwise(v)) >= 2, v  # 16 rows: some rise


def insurance_dollars_trains(r: PlainRecorder) -> None:
    trains(r, 0.97 * _insurance_trivial(build.DOLLARS))
    assert mean(r.losses[:10]) > 20 and mean(r.grad_norms[:10]) > 5, (r.losses[:3], r.grad_norms[:3])


def insurance_weight_decay_trains(r: PlainRecorder) -> None:
    trains(r, 0.97 * INSURANCE_TRIVIAL)
    assert r.lrs[-1][0] < 0.25 * r.lrs[0][0]


def ttt_noisy_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * TTT_UNIFORM)  # on the minimax (clean) validation moves
    assert mean(r.losses[-50:]) > 0.6, mean(r.losses[-50:])  # the exploration moves keep a floor


def ttt_adagrad_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * TTT_UNIFORM)


def ttt_linear_whole_run_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * TTT_UNIFORM)
    assert r.lrs[-1][0] < 0.01 * r.lrs[0][0]


def deblur_cosine_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * DEBLUR_IDENTITY)
    assert r.lrs[-1][0] < 1e-3 * r.lrs[0][0]


def deblur_accumulated_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * DEBLUR_IDENTITY)
    # one optimizer step every 8 batches (and one for each epoch's last 5 of its 125)
    assert len(r.lrs) == build.ACCUMULATE_STEPS and len(r.losses) > 7 * len(r.lrs), (
        len(r.lrs),
        len(r.losses),
    )
