"""Proofs of the sealed zoo's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where
a twin makes the point) and that it exists from ``onset_step``; a healthy run's proof shows it trains well.
Plain torch and Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Sequence

import torch

from galleries.health.field._case import Build, FieldCase, PlainRecorder, run_case
from galleries.health.zoo1 import _builds as build
from galleries.health.zoo1 import _data as data

LN4, LN10 = math.log(4), math.log(10)
GRU_ONSET = 95  # warmup_cosine(6, 100) first falls below 1% of the peak at step 95
SENSOR_ONSET = build.SENSOR_BAD_ROW // 50  # the batch holding the first -99 row (the log is read in order)
LM_ONSET = build.LM_EMPTY_LINE // 16  # the batch holding the empty line (the corpus is read in order)
OVERFIT_ONSET = 48  # after epoch 6 (8 steps each) the validation loss only rises
IRNN_ONSET = 1  # the first update already takes the gradient norm past 100x its first value


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def twin(fixed: Build, max_steps: int = -1, max_epochs: int | None = None, **trainer_kwargs: object):
    """The recording of the fixed twin (seed 0, no monitor)."""
    case = FieldCase(
        name="twin",
        build=fixed,
        expected=None,
        onset_step=0,
        proof=lambda r: None,
        max_steps=max_steps,
        max_epochs=max_epochs,
        trainer_kwargs=dict(trainer_kwargs),
    )
    return run_case(case, monitor=False)[1]


def _all_finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)


# ------------------------------------------------------------------------------------------------ problems
def tabular_lr_far_too_high(r: PlainRecorder) -> None:
    assert max(r.losses[:20]) > 3 * LN4, max(r.losses[:20])  # blows up at once
    assert mean(r.losses[-40:]) > 0.98 * LN4, mean(r.losses[-40:])  # ends at the prior
    assert mean([z["net.0.weight"] for z in r.zero_grad_rows[-40:]]) > 0.9  # the ReLUs died
    fixed = twin(functools.partial(build.tabular_adam, lr=1e-3), max_steps=240)
    assert mean(fixed.losses[-40:]) < 0.5 * LN4, mean(fixed.losses[-40:])


def digits_lr_far_too_low(r: PlainRecorder) -> None:
    assert mean(r.losses[-50:]) > 0.99 * LN10
    assert abs(mean(r.losses[:50]) - mean(r.losses[-50:])) < 0.02
    ratios = [v for step in r.update_ratios for k, v in step.items() if k.endswith("weight")]
    assert statistics.median(ratios) < 1e-4, statistics.median(ratios)
    fixed = twin(functools.partial(build.digits_cnn_sgd, lr=0.05), max_steps=300)
    assert mean(fixed.losses[-50:]) < 0.3 * LN10, mean(fixed.losses[-50:])


def gru_schedule_collapse(r: PlainRecorder) -> None:
    lrs = [group[0] for group in r.lrs]
    peak = max(lrs)
    assert next(i for i, lr in enumerate(lrs) if lr < 0.01 * peak) == GRU_ONSET
    assert all(lr < 0.01 * peak for lr in lrs[GRU_ONSET:])
    stuck = mean(r.losses[-50:])
    assert mean(r.losses[GRU_ONSET : GRU_ONSET + 50]) - stuck < 0.03  # no progress after the collapse
    fixed = twin(functools.partial(build.gru_schedule, schedule_steps=300), max_steps=300)
    assert mean(fixed.losses[-50:]) < 0.5 * stuck, (mean(fixed.losses[-50:]), stuck)


def bias_init_dead(r: PlainRecorder) -> None:
    for name in ("net.0.weight", "net.2.weight"):
        assert min(z[name] for z in r.zero_grad_rows) == 1.0, name  # every unit dead, every step
    _, vy = data.tabular_regression(500, seed=1)
    variance = float(vy.var())
    assert r.val_losses[-1] > 0.95 * variance, (r.val_losses[-1], variance)
    fixed = twin(functools.partial(build.regression_bias_init, bias=0.0), max_steps=300)
    assert fixed.val_losses[-1] < 0.15 * variance, fixed.val_losses[-1]


def sentinel_rows_kill_units(r: PlainRecorder) -> None:
    x, _ = data.sensor_log_with_sentinels(3000, build.SENSOR_BAD_ROW, 4)
    first_bad = int((x == -99.0).any(1).nonzero()[0])
    assert first_bad // 50 == SENSOR_ONSET
    before = statistics.median(r.grad_norms[:SENSOR_ONSET])
    assert r.grad_norms[SENSOR_ONSET] > 50 * before, (r.grad_norms[SENSOR_ONSET], before)
    dead = [z["net.2.weight"] for z in r.zero_grad_rows]
    assert mean(dead[:SENSOR_ONSET]) < 0.1, mean(dead[:SENSOR_ONSET])
    assert mean(dead[SENSOR_ONSET + 10 : SENSOR_ONSET + 30]) > 0.4, mean(
        dead[SENSOR_ONSET + 10 : SENSOR_ONSET + 30]
    )
    assert _all_finite(r.losses)
    fixed = twin(functools.partial(build.sensor_log, sentinels=False), max_steps=140)
    assert max(mean([z["net.2.weight"] for z in fixed.zero_grad_rows[SENSOR_ONSET:]]), 0) < 0.1
    assert fixed.val_losses[-1] < 0.5 * r.val_losses[-1], (fixed.val_losses[-1], r.val_losses[-1])


def wide_mlp_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 8 == OVERFIT_ONSET, best
    assert val[-1] > 1.5 * val[best], (val[-1], val[best])
    assert all(v > val[best] for v in val[best + 1 :])
    assert train[-1] < 0.1 * train[best], (train[-1], train[best])


def irnn_explodes(r: PlainRecorder) -> None:
    _, y = data.adding_problem(2000, 60, seed=0)
    variance = float(y.var())
    first = r.grad_norms[0]
    assert next(i for i, g in enumerate(r.grad_norms) if g > 100 * first) == IRNN_ONSET
    assert max(r.grad_norms) > 1e6, max(r.grad_norms)
    assert max(r.losses) > 1e3 * variance, max(r.losses)
    clipped = twin(build.irnn_adding, max_steps=200, gradient_clip_val=1.0)
    assert max(clipped.losses) < 10 * variance, max(clipped.losses)
    assert max(r.grad_norms) > 1e4 * statistics.median(clipped.grad_norms)


def deep_sigmoid_vanishes(r: PlainRecorder) -> None:
    ratios = [u["net.0.weight"] / u["net.22.weight"] for u in r.update_ratios if u["net.22.weight"] > 0]
    assert statistics.median(ratios) < 1e-6, statistics.median(ratios)
    assert mean(r.losses[-50:]) > 0.98 * LN10, mean(r.losses[-50:])


def unscaled_inputs_saturate(r: PlainRecorder) -> None:
    torch.manual_seed(0)
    model, loader, _ = build.unscaled_tanh()
    x, _ = next(iter(loader))
    with torch.no_grad():
        first = torch.tanh(model.net[0](x))
    saturated = float((first.abs() > 0.99).float().mean())
    assert saturated > 0.95, saturated  # at step 0
    assert mean([z["net.0.weight"] for z in r.zero_grad_rows[-100:]]) > 0.9  # tanh' = 0: no gradient
    assert mean(r.losses[-40:]) > 0.98 * LN4, mean(r.losses[-40:])
    fixed = twin(functools.partial(build.unscaled_tanh, standardise=True), max_steps=240)
    assert mean(fixed.losses[-40:]) < 0.6 * LN4, mean(fixed.losses[-40:])


def shuffled_apart_learns_nothing(r: PlainRecorder) -> None:
    assert min(r.val_losses) > LN10 - 0.01, r.val_losses
    assert all(abs(mean(r.losses[s : s + 50]) - LN10) < 0.04 for s in range(0, 300, 50))
    fixed = twin(functools.partial(build.shuffled_apart, aligned=True), max_steps=300)
    assert mean(fixed.losses[-50:]) < 0.25 * LN10, mean(fixed.losses[-50:])


def empty_line_nan(r: PlainRecorder) -> None:
    assert _all_finite(r.losses[:LM_ONSET])
    assert all(math.isnan(v) for v in r.losses[LM_ONSET:])  # one 0/0 step, then NaN weights
    assert mean(r.losses[LM_ONSET - 10 : LM_ONSET]) < 0.5 * mean(r.losses[:10])  # it was learning
    fixed = twin(functools.partial(build.lm_per_line_mean, empty_line=False), max_steps=150)
    assert _all_finite(fixed.losses)


def cache_misses_stall(r: PlainRecorder) -> None:
    # 150 batches of 32 = 4800 rows: at least the 400 misses of the first epoch, each sleeping >= 12 ms
    assert sum(r.wait_s) > 400 * 0.012, sum(r.wait_s)
    assert sum(r.wait_s) > 3 * sum(r.step_s), (sum(r.wait_s), sum(r.step_s))


def transformer_lr_too_high(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.transformer_classifier_adamw, lr=1e-3), max_steps=160)
    end, fixed_end = mean(r.losses[-30:]), mean(fixed.losses[-30:])
    assert end > 3 * fixed_end, (end, fixed_end)

    def median_update(rec: PlainRecorder) -> float:
        return statistics.median(u["net.head.weight"] for u in rec.update_ratios[20:])

    assert median_update(r) > 5 * median_update(fixed), (median_update(r), median_update(fixed))


# ------------------------------------------------------------------------------------------------ healthy
def _trains(r: PlainRecorder) -> None:
    assert _all_finite(r.losses) and _all_finite(r.val_losses)


def large_batch_trains(r: PlainRecorder) -> None:
    _trains(r)
    assert r.val_losses[-1] < 0.35 * LN4 and r.val_losses[-1] < min(r.val_losses) + 0.02, r.val_losses


def heavy_dropout_trains(r: PlainRecorder) -> None:
    _trains(r)
    assert r.val_losses[-1] < 0.15, r.val_losses


def lm_warmup_trains(r: PlainRecorder) -> None:
    _trains(r)
    assert mean(r.losses[:10]) > 1.5 and r.val_losses[-1] < 0.7, (mean(r.losses[:10]), r.val_losses)


def label_smoothing_trains(r: PlainRecorder) -> None:
    _trains(r)
    assert mean(r.losses[-50:]) > 1.1  # the smoothing floor
    assert r.val_losses[-1] < 0.6 and r.val_losses[-1] <= min(r.val_losses) + 0.01, r.val_losses


def small_batch_trains(r: PlainRecorder) -> None:
    _trains(r)
    assert r.val_losses[-1] < 0.45 * mean(r.losses[:50]), (r.val_losses, mean(r.losses[:50]))


def gru_plateau_then_drop(r: PlainRecorder) -> None:
    _trains(r)
    assert mean(r.losses[:60]) > 0.9, mean(r.losses[:60])
    assert mean(r.losses[-40:]) < 0.3 and r.val_losses[-1] < 0.3, (mean(r.losses[-40:]), r.val_losses)


def autoencoder_converged(r: PlainRecorder) -> None:
    _trains(r)
    tail, late = mean(r.losses[-50:]), mean(r.losses[250:300])
    assert 0.75 * late < tail < late and mean(r.losses[:50]) > 3 * tail, (mean(r.losses[:50]), late, tail)
    assert r.val_losses[-1] < 0.03 and r.val_losses[-1] < 1.05 * min(r.val_losses), r.val_losses


def frozen_backbone_trains(r: PlainRecorder) -> None:
    _trains(r)
    assert r.val_losses[-1] < 0.4 and mean(r.losses[-20:]) < 0.3 * mean(r.losses[:10]), r.val_losses
    assert all("net.1.weight" in u and "net.0.0.weight" not in u for u in r.update_ratios)  # only the head
