"""Proofs of zoo 22's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from galleries.health.zoo22 import _builds as build
from galleries.health.zoo22._models import hurdle_nll
from lightning_recipes.testing.trainers import fast_trainer

OUTAGE_ONSET = build.OUTAGE_BATCH  # the batch holding the NaN pressure readings (read in date order)
OVERFIT_ONSET = 44  # after epoch 10 (4 steps each) the validation loss never returns to its best
DECAY_ONSET = 100  # the first step run at 10x the LR (the hook's first epoch end)
COLLAPSE_ONSET = build.WARMUP  # the first step after the warm-up: the LR is 3e-3 * 3e-3
STATION_ONSET = 7  # the first file of the station logging hundredths of a mm


# ------------------------------------------------------------------------------------------ helpers
def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def finite(values: list[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: list[float]) -> int:
    return next(i for i, v in enumerate(values) if not math.isfinite(v))


def twin(make: Callable[[], Any], max_steps: int = 300, **trainer_kwargs: Any) -> PlainRecorder:
    """Train another build (a healthy twin) the way the zoo trains its runs, recorded plainly."""
    case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                     max_steps=max_steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(case, monitor=False)[1]


def probe_run(make: Callable[[], Any], probe: pl.Callback, max_steps: int = 300) -> pl.Callback:
    """Train ``make()`` (seed 0, no validation) with ``probe`` alone; return the probe."""
    torch.manual_seed(0)
    model, train, _ = make()
    fast_trainer(max_steps=max_steps, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(
        model, train
    )
    return probe


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """``(final, best)`` validation loss of a run: what stopping or rolling back could keep."""
    finite_vals = [v for v in r.val_losses if math.isfinite(v)]
    return r.val_losses[-1], min(finite_vals)


def trains(r: PlainRecorder, below: float) -> None:
    """A healthy run: finite throughout and its last validation loss below ``below`` (and its first)."""
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    assert r.val_losses[-1] < below and r.val_losses[-1] < r.val_losses[0], (r.val_losses, below)


def rows_zero(r: PlainRecorder, name: str, steps: slice = slice(None)) -> float:
    """The smallest fraction, over ``steps``, of ``name``'s rows whose gradient is exactly zero."""
    return min(step[name] for step in r.zero_grad_rows[steps])


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float = 0.02) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), (r.val_losses, trivial)


def _worse(final: float, best: float, factor: float) -> bool:
    return not math.isfinite(final) or final > factor * best


# ------------------------------------------------------------------------------------------ trivial levels
def _captcha_trivial() -> float:
    """The validation cross-entropy of the training labels' marginal (what a model blind to its input
    reaches)."""
    (_, y), (_, vy) = build.captcha_data()
    p = torch.bincount(y.flatten(), minlength=10).float() / y.numel()
    q = torch.bincount(vy.flatten(), minlength=10).float() / vy.numel()
    return float(-(q * p.log()).sum())


def _sudoku_trivial() -> float:
    """The validation cross-entropy at the blank cells of the training blanks' digit marginal."""
    (_, y), (_, vy) = build.sudoku_data()
    p = torch.bincount(y[y >= 0], minlength=4).float() / int((y >= 0).sum())
    q = torch.bincount(vy[vy >= 0], minlength=4).float() / int((vy >= 0).sum())
    return float(-(q * p.log()).sum())


def _rain_trivial() -> float:
    """The validation hurdle NLL of the best weather-blind model (the training days' wet fraction and the
    log-normal fit of their wet amounts)."""
    (_, y), (_, vy) = build.rainfall_data()
    wet = y[y > 0].log()
    p = float((y > 0).float().mean())
    out = torch.tensor([[math.log(p / (1 - p)), float(wet.mean()), math.log(float(wet.std()))]])
    return float(hurdle_nll(out.expand(len(vy), 3), vy))


CAPTCHA_TRIVIAL = _captcha_trivial()
SUDOKU_TRIVIAL = _sudoku_trivial()
RAIN_TRIVIAL = _rain_trivial()
OPTION_TRIVIAL = float(build.option_data()[1][1].var(unbiased=False))  # the mean is ~0: standardised
OPTION_DOLLAR_VARIANCE = float(build.option_data(dollars=True)[1][1].var(unbiased=False))


# ------------------------------------------------------------------------------------------ probes
class GradProbe(pl.Callback):
    """The gradient norm of the first and of the last ``Linear`` of ``pl_module.net`` at every step."""

    def __init__(self) -> None:
        self.first: list[float] = []
        self.last: list[float] = []

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Any):
        linears = [m for m in pl_module.net.modules() if isinstance(m, torch.nn.Linear)]
        self.first.append(float(linears[0].weight.grad.norm()))
        self.last.append(float(linears[-1].weight.grad.norm()))


class TanhProbe(pl.Callback):
    """The fraction of the first tanh convolution's outputs beyond +-0.99 on each training batch."""

    def __init__(self) -> None:
        self.saturated: list[float] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ):
        with torch.no_grad():
            h = torch.tanh(pl_module.net.features[0](batch[0]))
        self.saturated.append(float((h.abs() > 0.99).float().mean()))


class ReluProbe(pl.Callback):
    """The fraction of the body's hidden ReLU units that are zero on every row of each training batch."""

    def __init__(self) -> None:
        self.dead: list[float] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ):
        with torch.no_grad():
            body = pl_module.net.body
            h1 = body[1](body[0](batch[0]))
            h2 = body[3](body[2](h1))
        dead = torch.cat([(h1 == 0).all(0), (h2 == 0).all(0)])
        self.dead.append(float(dead.float().mean()))


# ------------------------------------------------------------------------------------------ trivial loss
def captcha_floor_stuck(r: PlainRecorder) -> None:
    (x, _), _ = build.captcha_data()
    assert int(x.max()) < 255 and float(build.floor_to_unit(x).abs().max()) == 0.0  # every pixel is 0
    _stuck_at(r, CAPTCHA_TRIVIAL, 0.01)
    assert rows_zero(r, "net.trunk.0.weight") == 1.0  # the first convolution never gets a gradient
    fixed = twin(functools.partial(build.captcha_floor_division, scale=build.to_unit), val_check_interval=50)
    assert fixed.val_losses[-1] < 0.4 * CAPTCHA_TRIVIAL, (fixed.val_losses, CAPTCHA_TRIVIAL)


def sudoku_lr_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, SUDOKU_TRIVIAL, 0.01)
    assert r.lrs[0] == [1e-5] and rows_zero(r, "net.net.0.weight") == 0.0  # the clues reach every unit
    fixed = twin(functools.partial(build.sudoku_adagrad, lr=3e-2), val_check_interval=50)
    assert fixed.val_losses[-1] < 0.6 * SUDOKU_TRIVIAL, (fixed.val_losses, SUDOKU_TRIVIAL)


def option_deep_vanishes(r: PlainRecorder) -> None:
    _stuck_at(r, OPTION_TRIVIAL, 0.15)
    probe = probe_run(build.option_deep, GradProbe())
    ratios = [a / b for a, b in zip(probe.first, probe.last, strict=True)]
    # the first layer's gradient is ~1e6 times smaller than the last's, from step 0 and never near it
    assert max(ratios[:10]) < 1e-5 and statistics.median(ratios) < 1e-5 and max(ratios) < 1e-3, ratios[:10]
    relu = functools.partial(build.option_deep, act="relu")
    fixed, good = twin(relu, val_check_interval=50), probe_run(relu, GradProbe())
    assert min(a / b for a, b in zip(good.first, good.last, strict=True)) > 1e-2
    assert fixed.val_losses[-1] < 0.05 * OPTION_TRIVIAL, fixed.val_losses


# ------------------------------------------------------------------------------------------ non-finite
def rain_outage_nan(r: PlainRecorder) -> None:
    _, train, _ = build.rain_barometer_outage()
    nan_rows = train.dataset.tensors[0].isnan().any(1).nonzero().flatten()
    assert set((nan_rows // 32).tolist()) == {OUTAGE_ONSET}  # only that batch holds NaN readings
    assert finite(r.losses[:OUTAGE_ONSET]) and first_nonfinite(r.losses) == OUTAGE_ONSET
    assert max(r.grad_norms[:OUTAGE_ONSET]) < 10
    assert all(math.isnan(v) for v in r.losses[OUTAGE_ONSET + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.85 * RAIN_TRIVIAL, (final, lowest, RAIN_TRIVIAL)
    fixed = twin(functools.partial(build.rain_barometer_outage, outage=False), val_check_interval=20)
    assert fixed.losses[:OUTAGE_ONSET] == r.losses[:OUTAGE_ONSET]  # the same run until the NaN batch
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.8 * RAIN_TRIVIAL, (fixed.val_losses, lowest)


def option_nesterov_nan(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert at <= 6 and finite(r.losses[:at]) and r.losses[at - 1] > 100 * r.losses[0], r.losses[: at + 1]
    assert r.losses[1] > 10 * r.losses[0]  # the very first update already overshoots
    fixed = twin(functools.partial(build.option_nesterov, lr=0.015), val_check_interval=50)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.01 * OPTION_TRIVIAL, fixed.val_losses


# ------------------------------------------------------------------------------------------ rising val
def sudoku_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 4 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert lowest < 0.85 * SUDOKU_TRIVIAL and min(val[best + 1 :]) > lowest, (lowest, val)
    assert _worse(final, lowest, 1.4), (final, lowest)
    assert train[-1] < 0.01 * train[best], (train[-1], train[best])  # memorised
    fixed = twin(functools.partial(build.sudoku_debug_subset, rows=None), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.8 * lowest, (fixed.val_losses, lowest)


def flow_decay_diverges(r: PlainRecorder) -> None:
    assert r.lrs[DECAY_ONSET - 1] == [0.02] and abs(r.lrs[DECAY_ONSET][0] - 0.2) < 1e-9, r.lrs[99:101]
    assert abs(r.lrs[-1][0] - 2.0) < 1e-9
    final, lowest = repair_room(r)  # validation every 20 steps: the best is before the raise
    assert lowest == min(r.val_losses[: DECAY_ONSET // 20]), r.val_losses
    assert mean(r.losses[DECAY_ONSET : DECAY_ONSET + 100]) > 2 * mean(
        r.losses[DECAY_ONSET - 20 : DECAY_ONSET]
    )
    assert _worse(final, lowest, 3.0) and not finite(r.losses[2 * DECAY_ONSET :]), (final, lowest)
    fixed = twin(functools.partial(build.flow_epoch_decay, divisor=10.0), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.6 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ collapse
def option_warmup_collapses(r: PlainRecorder) -> None:
    lr = build.OPTION_LR
    assert abs(r.lrs[COLLAPSE_ONSET - 1][0] - lr) < 1e-12 and r.lrs[COLLAPSE_ONSET][0] < 0.01 * lr
    assert all(abs(step[0] - lr * lr) < 1e-12 for step in r.lrs[COLLAPSE_ONSET:])
    final, lowest = repair_room(r)  # validation every 25 steps
    assert final == lowest and final > 0.75 * r.val_losses[2], r.val_losses  # barely moves after step 50
    fixed = twin(functools.partial(build.option_warmup_returns_lr, after=1.0), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.25 * final, (fixed.val_losses, final)


# ------------------------------------------------------------------------------------------ frozen
def captcha_trunk_frozen(r: PlainRecorder) -> None:
    assert min(r.grad_norms) > 0 and rows_zero(r, "net.trunk.0.weight") < 0.5  # the trunk gets gradients
    for step in r.update_ratios:
        assert all(v == 0.0 for k, v in step.items() if k.startswith("net.trunk.")), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("net.heads.")), step
    fixed = twin(functools.partial(build.captcha_heads_only, trunk=True), val_check_interval=50)
    assert fixed.val_losses[-1] < 0.5 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ activations
def flow_tanh_saturates(r: PlainRecorder) -> None:
    bad = probe_run(build.flow_raw_tanh, TanhProbe())
    good = probe_run(functools.partial(build.flow_raw_tanh, pixel_units=False), TanhProbe())
    assert min(bad.saturated) > 0.9 and max(good.saturated) < 0.05, (min(bad.saturated), max(good.saturated))
    fixed = twin(functools.partial(build.flow_raw_tanh, pixel_units=False), val_check_interval=50)
    assert fixed.val_losses[-1] < 0.7 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def rain_prior_kills_units(r: PlainRecorder) -> None:
    assert rows_zero(r, "net.body.0.weight") == 1.0 and rows_zero(r, "net.body.2.weight") == 1.0
    dead = probe_run(build.rain_prior_on_body, ReluProbe()).dead
    alive = probe_run(functools.partial(build.rain_prior_on_body, body=False), ReluProbe()).dead
    assert min(dead) == 1.0 and max(alive) < 0.2, (min(dead), max(alive))
    assert r.val_losses[-1] > 0.95 * RAIN_TRIVIAL, (r.val_losses, RAIN_TRIVIAL)  # weather-blind at best
    fixed = twin(functools.partial(build.rain_prior_on_body, body=False), val_check_interval=50)
    assert fixed.val_losses[-1] < 0.8 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ data stall
def option_loader_stalls(r: PlainRecorder) -> None:
    step = statistics.median(r.step_s)
    assert min(r.wait_s) > 2 * step and statistics.median(r.wait_s) > 4 * step, (r.wait_s[:5], step)
    fixed = twin(functools.partial(build.option_monte_carlo, paths=0), max_steps=100, val_check_interval=50)
    assert statistics.median(fixed.wait_s) < 0.1 * statistics.median(r.wait_s)
    assert r.val_losses[-1] < 0.1 * OPTION_TRIVIAL, r.val_losses  # it trains: only slowly fed


# ------------------------------------------------------------------------------------------ outliers
def rain_station_outliers(r: PlainRecorder) -> None:
    bad = [i for i in range(len(r.losses)) if i % 200 % 20 == STATION_ONSET]
    assert bad[0] == STATION_ONSET
    for i in bad:
        near = [r.losses[j] for j in range(i - 6, i) if j >= 0] + r.losses[i + 1 : i + 7]
        norms = [r.grad_norms[j] for j in range(i - 6, i) if j >= 0] + r.grad_norms[i + 1 : i + 7]
        assert r.losses[i] > 2 * statistics.median(near), (i, r.losses[i], near)
        assert r.grad_norms[i] > 5 * statistics.median(norms), (i, r.grad_norms[i], norms)
    assert max(r.losses[:STATION_ONSET]) < 1.5 * statistics.median(r.losses[:STATION_ONSET])
    fixed = twin(functools.partial(build.rain_station_files, hundredths=False), val_check_interval=50)
    assert fixed.val_losses[-1] < 0.93 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ healthy
def flow_restarts_train(r: PlainRecorder) -> None:
    trains(r, 0.12)
    assert r.lrs[74][0] < 1e-5 and abs(r.lrs[75][0] - 2e-3) < 1e-12, r.lrs[73:77]  # a restart


def sudoku_onecycle_trains(r: PlainRecorder) -> None:
    trains(r, 0.45 * SUDOKU_TRIVIAL)
    assert len(r.grad_norms) == build.ONECYCLE_STEPS and len(r.losses) > 3.5 * len(r.grad_norms)
    peak = max(range(len(r.lrs)), key=lambda i: r.lrs[i][0])
    assert abs(r.lrs[peak][0] - 1e-2) < 1e-6 and r.lrs[-1][0] < 1e-6, (peak, r.lrs[-1])


def option_dollars_train(r: PlainRecorder) -> None:
    trains(r, 0.02 * OPTION_DOLLAR_VARIANCE)
    assert mean(r.losses[:10]) > 100 and mean(r.grad_norms[:10]) > 10, (r.losses[:3], r.grad_norms[:3])
    assert sum(g > 5.0 for g in r.grad_norms) > 0.8 * len(r.grad_norms)  # clipped nearly every step


def captcha_noisy_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * CAPTCHA_TRIVIAL)  # on the clean validation labels
    assert mean(r.losses[-50:]) > 1.2 * r.val_losses[-1], (mean(r.losses[-50:]), r.val_losses[-1])


def option_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.01 * OPTION_TRIVIAL)
    lr = build.OPTION_LR
    assert r.lrs[0][0] < 0.02 * lr and abs(r.lrs[build.LONG_WARMUP][0] - lr) < 1e-12
    assert r.lrs[-1][0] == r.lrs[build.LONG_WARMUP][0]


def rain_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * r.val_losses[0])
    assert sum(b > a for a, b in itertools.pairwise(r.val_losses)) >= 1, r.val_losses  # some checks go up


def sudoku_adagrad_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * SUDOKU_TRIVIAL)
    assert r.lrs[0] == r.lrs[-1] == [3e-2]


def flow_polynomial_trains(r: PlainRecorder) -> None:
    trains(r, 0.12)
    assert r.lrs[0] == [0.02] and r.lrs[-1][0] < 1e-6


def rain_clipped_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * RAIN_TRIVIAL)
    assert sum(g > 0.5 for g in r.grad_norms) > 0.9 * len(r.grad_norms)  # clipped nearly every step
