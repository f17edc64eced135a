"""Proofs of zoo 2's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence

import torch

from galleries.health.field._case import PlainRecorder
from galleries.health.zoo1._proofs import mean, twin
from galleries.health.zoo2 import _builds as build

LN2, LN3, LN10 = math.log(2), math.log(3), math.log(10)
LISTING_ONSET = build.LISTING_BAD_ROW // 32  # the batch holding the first sentinel row (read in date order)
INF_ONSET = build.INF_ROW // 50  # the batch holding the first inf ratio (read in order)
NAIVE_BCE_ONSET = 198  # the first step whose batch has a logit past ~17: sigmoid rounds to 1, 0 * log(0)
EPS_ONSET = 1  # the first update divides 0 by 0; step 1's forward pass sees the NaN weights
OVERFIT_ONSET = 15  # after epoch 5 (3 steps each) the validation loss never returns to its best
DIVERGE_ONSET = 126  # the window of 20 steps with the lowest training loss starts here, then it rises
RNN_ONSET = 0  # the first gradient is already > 100x the fixed twin's median


def finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: Sequence[float]) -> int:
    return next(i for i, v in enumerate(values) if not math.isfinite(v))


def rows_zero(r: PlainRecorder, name: str, start: int = 0, stop: int | None = None) -> float:
    """The mean fraction of ``name``'s rows (units) with an exactly zero gradient over steps [start, stop)."""
    return mean([z[name] for z in r.zero_grad_rows[start:stop]])


def loss_jumps(losses: Sequence[float], factor: float = 3.0) -> list[int]:
    """Steps whose loss is over ``factor`` times the median of the 20 before."""
    return [i for i in range(20, len(losses)) if losses[i] > factor * statistics.median(losses[i - 20 : i])]


# ------------------------------------------------------------------------------------------------ dead units
def conv_bias_dead(r: PlainRecorder) -> None:
    for name in ("net.features.0.weight", "net.features.2.weight"):
        assert min(z[name] for z in r.zero_grad_rows) == 1.0, name  # every channel dead from step 0
    assert mean(r.losses[-50:]) > 0.99 * LN10, mean(r.losses[-50:])
    fixed = twin(functools.partial(build.conv_bias_init, bias=0.0), max_steps=300)
    assert rows_zero(fixed, "net.features.2.weight", -50) < 0.2
    assert mean(fixed.losses[-50:]) < 0.2 * LN10, mean(fixed.losses[-50:])


def listing_sentinels_kill_units(r: PlainRecorder) -> None:
    before = statistics.median(r.grad_norms[:LISTING_ONSET])
    assert r.grad_norms[LISTING_ONSET] > 50 * before, (r.grad_norms[LISTING_ONSET], before)
    assert max(r.grad_norms[:LISTING_ONSET]) < 5 * before
    assert rows_zero(r, "net.2.weight", 0, LISTING_ONSET) < 0.1
    assert rows_zero(r, "net.2.weight", -20) > 0.5, rows_zero(r, "net.2.weight", -20)
    assert finite(r.losses)
    fixed = twin(functools.partial(build.listings_sentinel, sentinel=None), max_steps=94)
    assert rows_zero(fixed, "net.2.weight", -20) < 0.1
    assert fixed.val_losses[-1] < 0.6 * r.val_losses[-1], (fixed.val_losses[-1], r.val_losses[-1])


def embedding_sgd_lr_kills_units(r: PlainRecorder) -> None:
    assert rows_zero(r, "net.mlp.2.weight", 0, 5) < 0.5  # alive at the start
    for name in ("net.mlp.0.weight", "net.mlp.2.weight"):
        assert rows_zero(r, name, -100) > 0.95, name
    assert LN3 - 0.02 < mean(r.losses[-100:]) < LN3 + 0.1, mean(r.losses[-100:])
    fixed = twin(functools.partial(build.embedding_sgd, lr=0.05), max_steps=300)
    assert mean(fixed.losses[-50:]) < 0.5 * LN3, mean(fixed.losses[-50:])


# ------------------------------------------------------------------------------------------------ non-finite
def inf_ratio_poisons(r: PlainRecorder) -> None:
    x = torch.cat([xb for xb, _ in build.ratio_feature_inf()[1]])
    bad = (~torch.isfinite(x)).any(1).nonzero().flatten().tolist()
    assert bad[0] // 50 == INF_ONSET and len(bad) == 2, bad
    assert finite(r.losses[:INF_ONSET]) and first_nonfinite(r.losses) == INF_ONSET
    assert all(math.isnan(v) for v in r.losses[INF_ONSET + 1 :])  # NaN weights from then on
    fixed = twin(functools.partial(build.ratio_feature_inf, guard=True), max_steps=150)
    assert finite(fixed.losses) and finite(fixed.val_losses)


def naive_bce_nan(r: PlainRecorder) -> None:
    _, train, _ = build.naive_bce()
    assert all(bool(torch.isfinite(xb).all()) for xb, _ in train)  # the data is finite
    assert first_nonfinite(r.losses) == NAIVE_BCE_ONSET, first_nonfinite(r.losses)
    assert all(math.isnan(v) for v in r.losses[NAIVE_BCE_ONSET:])
    fixed = twin(functools.partial(build.naive_bce, naive=False), max_steps=300)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.05, fixed.val_losses


def adam_eps_zero_nan(r: PlainRecorder) -> None:
    assert r.zero_grad_rows[0]["net.embed.weight"] > 0  # unused tokens: gradient exactly 0 at step 0
    assert math.isfinite(r.losses[0]) and first_nonfinite(r.losses) == EPS_ONSET
    assert all(math.isnan(v) for v in r.losses[EPS_ONSET:])
    fixed = twin(functools.partial(build.adam_eps_zero, eps=1e-8), max_steps=100)
    assert finite(fixed.losses) and mean(fixed.losses[-20:]) < mean(fixed.losses[:20])


# ------------------------------------------------------------------------------------------------ rising val
def few_rows_overfit(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 3 == OVERFIT_ONSET, best
    assert val[-1] > 1.5 * val[best], (val[-1], val[best])
    assert min(val[best + 1 :]) > val[best]
    assert train[-1] < 1e-3 and train[-1] < 0.01 * train[best], (train[-1], train[best])


def warmup_diverges(r: PlainRecorder) -> None:
    windows = [mean(r.losses[s : s + 20]) for s in range(0, 281)]
    low = min(range(len(windows)), key=windows.__getitem__)
    assert low == DIVERGE_ONSET, low
    assert mean(r.losses[-20:]) > 3 * windows[low], (mean(r.losses[-20:]), windows[low])
    assert r.val_losses[-1] > 2 * min(r.val_losses), r.val_losses
    fixed = twin(functools.partial(build.warmup_too_far, peak=0.03), max_steps=300)
    assert fixed.val_losses[-1] < 1.1 * min(fixed.val_losses) and fixed.val_losses[-1] < min(r.val_losses)


# --------------------------------------------------------------------------------------------- trivial loss
def embedding_lr_typo_stuck(r: PlainRecorder) -> None:
    ratios = [v for step in r.update_ratios for k, v in step.items() if k.endswith("weight")]
    assert statistics.median(ratios) < 1e-5, statistics.median(ratios)
    assert abs(mean(r.losses[:50]) - mean(r.losses[-50:])) < 0.01
    assert abs(mean(r.losses[-50:]) - LN3) < 0.05
    fixed = twin(functools.partial(build.embedding_lr_typo, lr=1e-3), max_steps=300)
    assert mean(fixed.losses[-50:]) < 0.6 * LN3, mean(fixed.losses[-50:])


def join_bug_learns_nothing(r: PlainRecorder) -> None:
    _, y, _, vy = build._regression()
    assert min(r.val_losses) > 0.95 * float(vy.var()), (r.val_losses, float(vy.var()))
    assert mean(r.losses[-50:]) > 0.9 * float(y.var())
    fixed = twin(functools.partial(build.regression_join_bug, aligned=True), max_steps=300)
    assert fixed.val_losses[-1] < 0.3 * float(vy.var()), fixed.val_losses


def conv_adam_far_too_high(r: PlainRecorder) -> None:
    assert max(r.losses[:20]) > 3 * LN10, max(r.losses[:20])
    assert mean(r.losses[-50:]) > 0.99 * LN10, mean(r.losses[-50:])
    assert rows_zero(r, "net.features.2.weight", -50) > 0.9
    fixed = twin(functools.partial(build.conv_adam_far_too_high, lr=1e-3), max_steps=300)
    assert mean(fixed.losses[-50:]) < 0.2 * LN10, mean(fixed.losses[-50:])


# ------------------------------------------------------------------------------------------------ spikes
def _outlier_steps(steps: int) -> list[int]:
    """The steps whose batch holds a wrong-unit target (40 batches of 50 an epoch, read in order)."""
    per_epoch = sorted({row // 50 for row in build.UNIT_ERROR_ROWS})
    return [e * 40 + b for e in range(steps // 40 + 1) for b in per_epoch if e * 40 + b < steps]


UNIT_ERROR_ONSET = min(build.UNIT_ERROR_ROWS) // 50  # the first batch holding a wrong-unit target


def unit_error_spikes(r: PlainRecorder) -> None:
    outliers = _outlier_steps(300)
    assert outliers[0] == UNIT_ERROR_ONSET, outliers[:3]
    typical = statistics.median(r.grad_norms)
    spikes = [i for i, g in enumerate(r.grad_norms) if g > 10 * typical]
    assert spikes and set(spikes) <= set(outliers), sorted(set(spikes) - set(outliers))
    assert sum(r.grad_norms[i] > 5 * typical for i in outliers) >= 0.75 * len(outliers)
    assert finite(r.losses)
    fixed = twin(functools.partial(build.unit_error_targets, scale=1.0), max_steps=300)
    assert max(fixed.grad_norms[20:]) < 10 * statistics.median(fixed.grad_norms)
    assert fixed.val_losses[-1] < 0.5 * r.val_losses[-1], (fixed.val_losses[-1], r.val_losses[-1])


def tanh_sgd_lr_spikes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.digits_tanh_sgd, lr=0.05), max_steps=300)  # the same batch order
    jumps, fixed_jumps = loss_jumps(r.losses), loss_jumps(fixed.losses)
    assert len(jumps) >= 10 and len(fixed_jumps) <= 2, (jumps, fixed_jumps)
    assert max(r.grad_norms) > 10 * statistics.median(fixed.grad_norms)
    assert mean(r.losses[-50:]) > 5 * mean(fixed.losses[-50:])


def rnn_gradients_explode(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.forecast_rnn, gain=1.0), max_steps=200)
    typical = statistics.median(fixed.grad_norms)
    finite_norms = [g for g in r.grad_norms if math.isfinite(g)]
    assert next(i for i, g in enumerate(r.grad_norms) if g > 100 * typical) == RNN_ONSET
    assert max(finite_norms) > 1e3 * typical, (max(finite_norms), typical)
    assert not finite(r.losses)  # it ends in NaN
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.1, fixed.val_losses


def collate_stalls(r: PlainRecorder) -> None:
    # 120 batches, each collated after a >= 30 ms round trip: the step waits for data most of the time
    assert sum(r.wait_s) > 119 * 0.03, sum(r.wait_s)
    assert sum(r.wait_s) > 3 * sum(r.step_s), (sum(r.wait_s), sum(r.step_s))
    assert finite(r.losses) and mean(r.losses[-20:]) < mean(r.losses[:20])  # it trains, slowly in time


# ------------------------------------------------------------------------------------------------ healthy
def _trains(r: PlainRecorder) -> None:
    assert finite(r.losses) and finite(r.val_losses)


def batch2_trains(r: PlainRecorder) -> None:
    _trains(r)
    assert r.val_losses == sorted(r.val_losses, reverse=True) and r.val_losses[-1] < 0.4 * LN10, r.val_losses


def augmented_trains(r: PlainRecorder) -> None:
    _trains(r)
    assert r.val_losses[-1] < 0.5 and mean(r.losses[-50:]) > r.val_losses[-1], r.val_losses


def warm_restarts_train(r: PlainRecorder) -> None:
    _trains(r)
    assert r.val_losses[-1] < 0.45 * math.log(4) and mean(r.losses[-60:]) < 0.5 * mean(r.losses[:20])


def separable_idles(r: PlainRecorder) -> None:
    _trains(r)
    assert mean(r.losses[-100:]) < 0.01 and r.val_losses[-1] < 0.01, (mean(r.losses[-100:]), r.val_losses)


def xor_plateau_then_drop(r: PlainRecorder) -> None:
    _trains(r)
    assert mean(r.losses[:150]) > 0.98 * LN2, mean(r.losses[:150])
    assert mean(r.losses[-30:]) < 0.8 * LN2 and r.val_losses[-1] < 0.8 * LN2, r.val_losses


def noise_floor(r: PlainRecorder) -> None:
    _trains(r)
    _, _, _, vy = build._regression(noise=1.0)
    assert r.val_losses[-1] < 0.6 * float(vy.var()), (r.val_losses, float(vy.var()))
    assert 0.9 < r.val_losses[-1] < 1.2, r.val_losses  # the noise's variance is 1: the best possible


def bf16_trains(r: PlainRecorder) -> None:
    _trains(r)
    assert r.val_losses[-1] < 0.35, r.val_losses


def two_heads_train(r: PlainRecorder) -> None:
    _trains(r)
    assert r.val_losses[-1] < 0.3 * r.val_losses[0] or r.val_losses[-1] < 0.6, r.val_losses
    assert mean(r.losses[-50:]) < 0.2 * mean(r.losses[:10])


def accumulated_trains(r: PlainRecorder) -> None:
    _trains(r)
    assert len(r.losses) > 3.9 * len(r.grad_norms) and r.val_losses[-1] < 0.1, r.val_losses
