"""Proofs of zoo 17's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its final and its
best validation loss (what a repair could save); a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
from torch import nn

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo17 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

LN5 = math.log(5)  # the keyword spotter's loss at chance (five balanced keywords)
NOISE_MSE = 0.3**2  # the noisy digits' own error (noise std 0.3 on pixels in [0, 1])
SILENT_ONSET = build.SILENT_BATCHES[0]  # the first batch holding a silent clip (read in order)
OVERFIT_ONSET = 40  # after the validation at step 40 (every 2 epochs of 4 steps) it never returns to its best
GROWTH_ONSET = 180  # the 20-step window from which the training loss breaks away (LR ~0.018)
OUTLIER_ONSET = 9  # the first batch holding an image left in 0..16 units
DECAY_ONSET = 44  # the first step run at under 1/100 of the LR (0.9 ** 44 < 0.01)


# ------------------------------------------------------------------------------------------ helpers
def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def finite(values: list[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: list[float]) -> int:
    return next(i for i, v in enumerate(values) if not math.isfinite(v))


def twin(make: Callable[[], Any], max_steps: int = 300, **trainer_kwargs: Any) -> PlainRecorder:
    """The recording of ``make``'s run (a healthy twin), trained like a zoo case without the monitor."""
    twin_case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                          max_steps=max_steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(twin_case, monitor=False)[1]


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """``(final, lowest)`` validation loss: what the run ends at and the best it reached (finite ones)."""
    return r.val_losses[-1], min(v for v in r.val_losses if math.isfinite(v))


def trains(r: PlainRecorder, below: float) -> None:
    """A healthy run: every loss finite and its last validation loss under ``below``."""
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    assert r.val_losses[-1] < below, (r.val_losses, below)


def stuck(values: list[float], level: float, tolerance: float = 0.01) -> None:
    assert all(abs(v - level) < tolerance * level for v in values), (values, level)


def window_means(values: list[float], window: int = 20) -> list[float]:
    return [mean(values[i : i + window]) for i in range(0, len(values) - window + 1, window)]


def breakaway(losses: list[float], window: int = 20, factor: float = 3.0) -> int:
    """The first step of the first ``window``-step block whose mean training loss is ``factor`` times the
    best block before it, with no later block back under 1.5 times that best (non-finite: infinite)."""
    means = [m if math.isfinite(m) else math.inf for m in window_means(losses, window)]
    for i in range(1, len(means)):
        best = min(means[:i])
        if means[i] > factor * best and all(m > 1.5 * best for m in means[i:]):
            return i * window
    raise AssertionError(means)


def _fit(make: Callable[[], Any], probe: pl.Callback, max_steps: int = 300) -> PlainRecorder:
    """``make``'s run as a zoo case trains it (seed 0, validating) with ``probe`` next to a recorder."""
    torch.manual_seed(0)
    model, train, val = make()
    recorder = PlainRecorder()
    fast_trainer(max_steps=max_steps, max_epochs=1000, callbacks=[probe, recorder]).fit(model, train, val)
    return recorder


# ------------------------------------------------------------------------------------------ stuck at start
def kws_dead_stuck(r: PlainRecorder) -> None:
    stuck(r.val_losses, LN5)
    # every ReLU off on every clip: every conv weight (and the readout's) gets exactly zero gradient
    assert all(all(v == 1.0 for v in step.values()) for step in r.zero_grad_rows), r.zero_grad_rows[0]
    fixed = twin(functools.partial(build.kws_dead_bias, bias=None))
    assert fixed.val_losses[-1] < 0.3 * LN5, fixed.val_losses


def kws_sgd_low_stuck(r: PlainRecorder) -> None:
    assert r.lrs[0] == [1e-6]
    stuck(r.val_losses, r.val_losses[0])
    stuck(r.losses[-50:], r.losses[0], 0.1)
    # the gradients reach every weight, the updates are tiny (the biases start at 0: weights only)
    assert max(max(step.values()) for step in r.zero_grad_rows) == 0.0
    ratios = [v for step in r.update_ratios for k, v in step.items() if k.endswith("weight")]
    assert max(ratios) < 1e-4, max(ratios)
    final, lowest = repair_room(r)
    assert final > 0.99 * lowest
    fixed = twin(functools.partial(build.kws_sgd_low, lr=3e-3))
    assert fixed.val_losses[-1] < 0.2 * lowest, (fixed.val_losses, lowest)


class ConvGradProbe(pl.Callback):
    """The gradient norm of every conv weight (first to last) at each optimizer step."""

    def __init__(self) -> None:
        self.norms: list[list[float]] = []

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Any):
        convs = [m.weight for m in pl_module.net.features if isinstance(m, nn.Conv1d)]
        self.norms.append([float(w.grad.norm()) for w in convs])


def kws_sigmoid_vanishes(r: PlainRecorder) -> None:
    stuck(r.val_losses, LN5)
    bad, good = ConvGradProbe(), ConvGradProbe()
    _fit(build.kws_deep_sigmoid, bad, 100)
    fixed = _fit(functools.partial(build.kws_deep_sigmoid, nn.ReLU), good)  # the twin, probed
    first_to_last = [[row[0] / row[-1] for row in probe.norms] for probe in (bad, good)]
    assert max(first_to_last[0]) < 1e-3 and min(first_to_last[1]) > 0.03, first_to_last
    assert fixed.val_losses[-1] < 0.3 * LN5, fixed.val_losses


def counting_ema_frozen(r: PlainRecorder) -> None:
    assert min(r.grad_norms) > 0  # the network gets gradients...
    for step in r.update_ratios:  # ...and not one of its weights ever changes
        assert step and all(v == 0.0 for v in step.values()), step
    assert len(set(r.val_losses)) == 1, r.val_losses
    fixed = twin(functools.partial(build.counting_ema_optimizer, fixed=True), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.3 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ non-finite
def kws_silent_nan(r: PlainRecorder) -> None:
    _, train, _ = build.kws_silent_clips()
    x = train.dataset.tensors[0]
    assert x.isnan().any(1).nonzero().flatten().tolist() == list(build.SILENT_ROWS)  # the inputs are NaN
    at = first_nonfinite(r.losses)
    assert at == SILENT_ONSET and finite(r.grad_norms[:at]) and max(r.grad_norms[:at]) < 20, r.grad_norms[:at]
    assert all(math.isnan(v) for v in r.losses[at + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.75 * LN5, (final, lowest)
    fixed = twin(functools.partial(build.kws_silent_clips, silent=False), val_check_interval=15)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.3 * lowest, (fixed.val_losses, lowest)


def restore_unit_filters_nan(r: PlainRecorder) -> None:
    torch.manual_seed(0)
    model, train, _ = build.restore_unit_filters()
    assert model.net.skip.weight.isnan().all() and torch.isfinite(model.net.conv1.weight).all()
    assert all(torch.isfinite(t).all() for t in train.dataset.tensors)  # the inputs are fine
    assert all(math.isnan(v) for v in r.losses) and all(math.isnan(v) for v in r.val_losses)
    fixed = twin(functools.partial(build.restore_unit_filters, skip_1x1=False))
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.5 * fixed.losses[0], fixed.val_losses


def restore_scaled_lr_nan(r: PlainRecorder) -> None:
    assert r.lrs[0] == [3.2]
    at = first_nonfinite(r.losses)
    assert at <= 5 and finite(r.losses[:at]) and r.losses[1] > 1000 * r.losses[0], r.losses[: at + 1]
    fixed = twin(functools.partial(build.restore_scaled_lr, per_256=True))
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.5 * r.losses[0], fixed.val_losses


# ------------------------------------------------------------------------------------------ rising validation
def kws_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 8 == OVERFIT_ONSET, best  # validated every 2 epochs of 4 steps
    final, lowest = repair_room(r)
    assert final > 1.25 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.01 * train[best], (train[-1], train[best])
    fixed = twin(functools.partial(build.kws_same_clips_every_epoch, rows=2000))
    assert fixed.val_losses[-1] < 0.3 * lowest, (fixed.val_losses, lowest)


def kws_exponential_up_diverges(r: PlainRecorder) -> None:
    assert all(abs(lr[0] - 3e-3 * 1.01**k) < 1e-6 * lr[0] for k, lr in enumerate(r.lrs))
    assert breakaway(r.losses) == GROWTH_ONSET, window_means(r.losses)
    final, lowest = repair_room(r)  # validated every epoch (32 steps): the best is before the break
    assert lowest in r.val_losses[: GROWTH_ONSET // 32] and final > 10 * lowest, (r.val_losses, lowest)
    fixed = twin(functools.partial(build.kws_exponential_up, gamma=0.99))
    assert fixed.val_losses[-1] < 0.2 * final, (fixed.val_losses, final)


# ------------------------------------------------------------------------------------------ single causes
class TanhProbe(pl.Callback):
    """The fraction of the first conv layer's tanh outputs beyond +-0.99 on each training batch."""

    def __init__(self) -> None:
        self.saturated: list[float] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ):
        with torch.no_grad():
            h = torch.tanh(pl_module.net.features[0](batch[0].unsqueeze(1)))
        self.saturated.append(float((h.abs() > 0.99).float().mean()))


def kws_tanh_saturates(r: PlainRecorder) -> None:
    bad, good = TanhProbe(), TanhProbe()
    _fit(build.kws_int16_tanh, bad, 100)
    fixed = _fit(functools.partial(build.kws_int16_tanh, scaled=True), good)  # the twin, probed
    assert min(bad.saturated) > 0.9 and max(good.saturated) < 0.2, (min(bad.saturated), max(good.saturated))
    assert fixed.val_losses[-1] < 0.75 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def kws_python_filter_stalls(r: PlainRecorder) -> None:
    waits, steps = r.wait_s[5:], r.step_s[5:]
    assert mean(waits) > 3 * mean(steps), (mean(waits), mean(steps))
    fixed = twin(functools.partial(build.kws_python_filter, in_python=False), max_steps=80)
    assert mean(fixed.wait_s[5:]) < 0.2 * mean(waits), (mean(fixed.wait_s[5:]), mean(waits))
    # the same data, only slower: the run learns as the fixed one does
    assert abs(r.val_losses[-1] - fixed.val_losses[-1]) < 0.1 * fixed.val_losses[-1]
    assert r.val_losses[-1] < 0.6 * LN5, r.val_losses


class OutlierProbe(pl.Callback):
    """Whether each training batch holds an image left in 0..16 units (a target pixel above 2)."""

    def __init__(self) -> None:
        self.outlier: list[bool] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ):
        self.outlier.append(bool(batch[1].amax() > 2))


def restore_mixed_outliers(r: PlainRecorder) -> None:
    # the run again (validating as the case does, so the batches come in the same order), with the probe
    probe = OutlierProbe()
    assert _fit(build.restore_mixed_sources, probe).losses == r.losses
    flags = probe.outlier
    assert flags.index(True) == OUTLIER_ONSET and 0.05 < mean(flags) < 0.3, (flags.index(True), mean(flags))
    bad = [v for v, f in zip(r.losses, flags) if f]
    good = [v for v, f in zip(r.losses, flags) if not f]
    assert min(bad) > 3 * sorted(good)[len(good) // 2] and mean(bad) > 8 * mean(good), (mean(bad), mean(good))
    fixed = twin(functools.partial(build.restore_mixed_sources, outliers=0))
    assert fixed.val_losses[-1] < 0.85 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def counting_decay_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.01 * lr0) == DECAY_ONSET
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[3]) < 0.01 * final, r.val_losses  # frozen in place from step ~60
    meant = functools.partial(build.counting_manual_decay, every=build.EPOCH)
    fixed = twin(meant, val_check_interval=20)
    assert fixed.val_losses[-1] < 0.3 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ healthy
def kws_noisy_labels_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * r.val_losses[0])
    assert mean(r.losses[-50:]) > 0.6, mean(r.losses[-50:])  # the noisy labels' floor
    assert r.val_losses[-1] <= 1.05 * min(r.val_losses), r.val_losses


def kws_sgd_slow_start_trains(r: PlainRecorder) -> None:
    trains(r, 0.2 * LN5)
    assert mean(r.losses[:60]) > 0.98 * LN5, mean(r.losses[:60])  # flat at first


def kws_manual_accumulate_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * r.val_losses[0])
    assert len(r.losses) == 2 * len(r.grad_norms) and max(r.grad_norms) < 1.0 + 1e-4


def counting_bf16_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.val_losses[0])


def counting_onehot_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.val_losses[0])
    assert all("net.embed.weight" not in step for step in r.update_ratios)


def counting_step_decay_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.val_losses[0])
    lrs = [lr[0] for lr in r.lrs]
    assert lrs[199] == 2e-3 and abs(lrs[200] - 4e-4) < 1e-12 and abs(lrs[260] - 8e-5) < 1e-12


def restore_raw_units_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.losses[0])
    assert mean(r.losses[:10]) > 10 and r.grad_norms[0] > 50, (r.losses[:3], r.grad_norms[0])


def restore_warm_restarts_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * NOISE_MSE)  # under a third of the noisy input's error
    lrs = [lr[0] for lr in r.lrs]
    assert lrs[49] < 1e-4 and lrs[50] == 3e-3 and lrs[149] < 1e-4 and lrs[150] == 3e-3
    assert all(b < a for a, b in itertools.pairwise(r.val_losses)), r.val_losses


def restore_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * r.val_losses[0])
    assert len(r.val_losses) >= 12, r.val_losses
