"""Proofs of zoo 9's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its final and its
best validation loss (what a repair could save); a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import math
import statistics

from galleries.health.field._case import PlainRecorder
from galleries.health.zoo1._proofs import mean, twin
from galleries.health.zoo2._proofs import finite, rows_zero
from galleries.health.zoo3._proofs import repair_room, trains
from galleries.health.zoo9 import _builds as build

SKIPGRAM_TRIVIAL = 2 * math.log(2)  # every score 0: the positive's and the negatives' logistic loss at ln 2
LM_TRIVIAL = math.log(build.LM_VOCAB)  # an untrained read-out's logits are near 0: uniform over 32 tokens
LM_EVERY = 25  # the language model's runs validate every 25 steps
COLLAPSE_ONSET = 44  # 0.9 ** 44 < 0.01: ExponentialLR stepped per batch is 100x down from here
MISSING_BATCH = build.MISSING_ROW // 32
L1_ONSET = 17  # the first step at which >= 90% of the code units get no gradient on the batch (see below)
CODE = "net.encoder.weight"
OVERFIT_EVERY = 6  # the overfitting run validates every 2 epochs of 3 steps
OVERFIT_ONSET = 48  # after this step the validation loss never returns to its best (measured below)


def _pixel_variance() -> float:
    """The sparse autoencoder's trivial loss: the validation images' summed per-pixel variance (the loss of
    predicting the mean image whatever the input)."""
    x = build.data.digits("val")[0]
    return float(x.var(0, unbiased=False).sum())


PIXEL_VARIANCE = _pixel_variance()


def _stuck_at(values: list[float], trivial: float, tolerance: float) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in values), (values, trivial)


# ------------------------------------------------------------------------------------------ trivial loss
def skipgram_zero_stuck(r: PlainRecorder) -> None:
    # both tables at zero: every score 0 and every gradient exactly 0 (d(u.v)/du = v = 0 and back), forever
    assert max(r.grad_norms) == 0.0 and all(v == 0.0 for step in r.update_ratios for v in step.values())
    _stuck_at(r.losses + r.val_losses, SKIPGRAM_TRIVIAL, 1e-6)
    fixed = twin(
        functools.partial(build.skipgram_zero_init, zero=False), max_steps=300, val_check_interval=50
    )
    assert fixed.val_losses[-1] < 0.7 * SKIPGRAM_TRIVIAL, fixed.val_losses


def skipgram_apart_stuck(r: PlainRecorder) -> None:
    # the LR and the gradients are sound and the weights move, yet the pairs carry nothing to learn
    assert r.lrs[0] == [1e-2] and statistics.median(r.grad_norms) > 0.03
    assert statistics.median(step["net.centre.weight"] for step in r.update_ratios[50:]) > 1e-3
    _stuck_at(r.val_losses, SKIPGRAM_TRIVIAL, 0.02)
    _stuck_at([mean(r.losses[s : s + 50]) for s in range(0, 300, 50)], SKIPGRAM_TRIVIAL, 0.03)
    fixed = twin(functools.partial(build.skipgram_shuffled_apart, apart=False), max_steps=300,
                 val_check_interval=50)  # fmt: skip
    assert fixed.val_losses[-1] < 0.7 * SKIPGRAM_TRIVIAL, fixed.val_losses


def skipgram_lr_stuck(r: PlainRecorder) -> None:
    assert r.lrs[0] == [1e-6]
    _stuck_at(r.losses + r.val_losses, SKIPGRAM_TRIVIAL, 1e-3)
    fixed = twin(functools.partial(build.skipgram_amsgrad, lr=1e-2), max_steps=300, val_check_interval=50)
    assert fixed.val_losses[-1] < 0.7 * SKIPGRAM_TRIVIAL, fixed.val_losses


# ------------------------------------------------------------------------------------------ frozen
def lm_ema_frozen(r: PlainRecorder) -> None:
    # the EMA copy gets the gradients (accumulating: nothing zeroes them), the optimizer holds the network,
    # which gets none; neither ever changes
    assert all(name.startswith("ema.") for step in r.zero_grad_rows for name in step)
    assert all(v == 0.0 for step in r.update_ratios for v in step.values())
    assert r.grad_norms[0] > 0 and r.grad_norms[-1] > 5 * r.grad_norms[0]
    _stuck_at(r.val_losses, r.val_losses[0], 1e-6)
    assert abs(mean(r.losses[-50:]) - mean(r.losses[:50])) < 0.01 * LM_TRIVIAL
    fixed = twin(
        functools.partial(build.lm_ema, through_ema=False), max_steps=300, val_check_interval=LM_EVERY
    )
    assert fixed.val_losses[-1] < 0.4 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ LR
def lm_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.01 * lr0) == COLLAPSE_ONSET
    assert r.lrs[-1][0] < 1e-15
    final, lowest = repair_room(r)
    assert final == lowest and max(r.val_losses[3:]) - min(r.val_losses[3:]) < 1e-3, r.val_losses  # frozen
    fixed = twin(functools.partial(build.lm_exponential, per_batch=False), max_steps=300,
                 val_check_interval=LM_EVERY)  # fmt: skip
    assert fixed.val_losses[-1] < 0.5 * final, (fixed.val_losses, final)


def lm_sgd_too_high(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.lm_sgd, lr=20.0), max_steps=300, val_check_interval=LM_EVERY)
    assert r.lrs[0] == [200.0] and finite(r.losses)
    # from the first update the loss leaves the trivial level upwards and stays there
    assert r.losses[1] > 3 * LM_TRIVIAL and min(r.losses[1:]) > LM_TRIVIAL, r.losses[:5]
    assert max(r.grad_norms) > 50 * max(fixed.grad_norms), (max(r.grad_norms), max(fixed.grad_norms))
    final, lowest = repair_room(r)
    assert lowest > 5 * LM_TRIVIAL and final > 15 * fixed.val_losses[-1], (final, lowest, fixed.val_losses)


# ------------------------------------------------------------------------------------------ overfitting
def lm_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * OVERFIT_EVERY == OVERFIT_ONSET, (best + 1) * OVERFIT_EVERY
    final, lowest = repair_room(r)
    assert final > 1.8 * lowest and lowest < 0.5 * LM_TRIVIAL, (final, lowest)
    assert all(b > a for a, b in zip(val[best + 2 :], val[best + 3 :])), val  # rises on every check after
    assert train[-1] < 0.1 * train[best], (train[-1], train[best])  # while the training loss keeps falling


# ------------------------------------------------------------------------------------------ non-finite
def mdn_missing_nan(r: PlainRecorder) -> None:
    at = MISSING_BATCH
    assert finite(r.losses[:at]) and r.losses[at] == math.inf, r.losses[at - 2 : at + 2]
    assert all(math.isnan(v) for v in r.losses[at + 1 :]) and math.isnan(r.grad_norms[at])
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.0 < r.losses[0], (final, lowest)  # the NLL had gone below 0
    fixed = twin(
        functools.partial(build.mdn_missing_target, marker=None), max_steps=300, val_check_interval=20
    )
    assert finite(fixed.losses) and finite(fixed.val_losses) and min(fixed.val_losses[at // 20 :]) < lowest


# ------------------------------------------------------------------------------------------ dead units
def _dead_onset(r: PlainRecorder) -> int:
    return next(i for i, z in enumerate(r.zero_grad_rows) if z[CODE] >= 0.9)


def sae_l1_dead(r: PlainRecorder) -> None:
    assert r.zero_grad_rows[0][CODE] < 0.5 and _dead_onset(r) == L1_ONSET, _dead_onset(r)
    assert rows_zero(r, CODE, L1_ONSET) > 0.9 and r.val_losses[-1] > 0.9 * PIXEL_VARIANCE  # ~ the mean image
    fixed = twin(functools.partial(build.sae_l1, l1=1e-3), max_steps=300, val_check_interval=22)
    assert rows_zero(fixed, CODE) < 0.4 and fixed.val_losses[-1] < 0.1 * r.val_losses[-1]


def sae_init_dead(r: PlainRecorder) -> None:
    # every code unit is dead on every batch from step 0: only the decoder's bias learns (the mean image)
    assert min(z[CODE] for z in r.zero_grad_rows) == 1.0
    assert all(v == 0.0 for step in r.update_ratios for k, v in step.items() if k.startswith("net.encoder"))
    assert r.val_losses[-1] > 0.95 * PIXEL_VARIANCE, (r.val_losses, PIXEL_VARIANCE)
    fixed = twin(functools.partial(build.sae_bias_init, bias=None), max_steps=300, val_check_interval=22)
    assert fixed.val_losses[-1] < 0.2 * PIXEL_VARIANCE, fixed.val_losses


# ------------------------------------------------------------------------------------------ healthy
def mdn_negative_trains(r: PlainRecorder) -> None:
    trains(r, -0.2)
    assert r.losses[0] > 1.0 and mean(r.losses[-50:]) < -0.2  # a likelihood density: the NLL goes below 0


def mdn_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.0)
    assert max(r.val_losses[3:]) - min(r.val_losses[3:]) > 0.3, r.val_losses  # 12 points: it jitters
    assert mean(r.losses[-50:]) < -0.2


def lm_sgd_20_trains(r: PlainRecorder) -> None:
    trains(r, 0.35 * LM_TRIVIAL)
    assert r.lrs[0] == [20.0]


def sae_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.1 * PIXEL_VARIANCE)
    assert r.lrs[0][0] < 0.02 * r.lrs[-1][0] and abs(r.lrs[build.WARMUP][0] - 3e-3) < 1e-9
    assert mean(r.losses[:10]) > 0.9 * r.losses[0]  # the first steps barely move


def sae_raw_trains(r: PlainRecorder) -> None:
    trains(r, 0.1 * 16**2 * PIXEL_VARIANCE)
    assert r.grad_norms[0] > 1000 and r.grad_norms[0] > 10 * statistics.median(r.grad_norms[-100:])


def skipgram_noisy_trains(r: PlainRecorder) -> None:
    trains(r, 0.92 * SKIPGRAM_TRIVIAL, 0.8 * SKIPGRAM_TRIVIAL)  # half the pairs random: a high floor
    assert all(b < a for a, b in zip(r.val_losses, r.val_losses[1:])), r.val_losses


def skipgram_slow_start_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * SKIPGRAM_TRIVIAL)
    assert abs(mean(r.losses[:30]) - SKIPGRAM_TRIVIAL) < 0.01 * SKIPGRAM_TRIVIAL  # the slow start
