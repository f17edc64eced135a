"""Proofs of zoo 3's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its final and its
best validation loss (what a repair could save); a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from torch import nn

from galleries.health.field._case import PlainRecorder
from galleries.health.zoo1._proofs import mean, twin
from galleries.health.zoo2._proofs import finite, first_nonfinite
from galleries.health.zoo3 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

LN2, LN3, LN4 = math.log(2), math.log(3), math.log(4)
OVERFIT_ONSET = 10  # after epoch 5 (2 steps each) the validation loss never returns to its best
SATURATE_ONSET = 4  # the first step whose hidden tanh units are mostly (> 50%) saturated
OUTLIER_ONSET = build.OUTLIER_DOCS[0] // 32  # the batch holding the first sentinel weight (read in order)
COLLAPSE_ONSET = 40  # StepLR has cut the LR 100x (two cuts of 10x, every 20 steps)
CYCLIC_ONSET = 90  # the LR passes ~0.6: from here the training loss never returns to its floor


class TanhProbe(Callback):
    """Per training step, the fraction of the outputs of every ``nn.Tanh`` with ``|tanh| > 0.99``."""

    def __init__(self) -> None:
        self.saturated: list[float] = []
        self._now: list[float] = []

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for module in pl_module.modules():
            if isinstance(module, nn.Tanh):
                module.register_forward_hook(self._hook)

    def _hook(self, module: nn.Module, inputs: Any, out: torch.Tensor) -> None:
        if torch.is_grad_enabled():  # training forward passes only
            self._now.append(float((out.abs() > 0.99).float().mean()))

    def on_train_batch_end(self, *args: Any) -> None:
        self.saturated.append(mean(self._now))
        self._now = []


def saturation(builder: Callable[[], Any], max_steps: int = 300) -> list[float]:
    """Train ``builder``'s run again (seed 0, no validation) with a :class:`TanhProbe`."""
    torch.manual_seed(0)
    model, train, _ = builder()
    probe = TanhProbe()
    fast_trainer(max_steps=max_steps, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(
        model, train
    )
    return probe.saturated


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """A repairable run's final and best validation loss (NaN counts as worse than any number)."""
    finite_val = [v for v in r.val_losses if math.isfinite(v)]
    return r.val_losses[-1], min(finite_val)


def _worse(final: float, best: float, factor: float) -> bool:
    return not math.isfinite(final) or final > factor * best


# ------------------------------------------------------------------------------------------ trivial loss
def _conv_twin() -> PlainRecorder:
    return twin(functools.partial(build.conv_lr_typo, lr=1e-3), max_steps=300)


def conv_lr_typo_stuck(r: PlainRecorder) -> None:
    ratios = [v for step in r.update_ratios for k, v in step.items() if k.endswith("weight")]
    assert statistics.median(ratios) < 1e-5, statistics.median(ratios)
    assert abs(mean(r.losses[-50:]) - LN3) < 0.03 and r.val_losses[-1] > 0.99 * LN3, r.val_losses
    fixed = _conv_twin()
    assert fixed.val_losses[-1] < 0.5 * LN3, fixed.val_losses


def conv_frozen_stuck(r: PlainRecorder) -> None:
    assert all(set(step) == {"net.6.bias"} for step in r.update_ratios)  # only the head's bias trains
    assert abs(mean(r.losses[-50:]) - LN3) < 0.03 and r.val_losses[-1] > 0.99 * LN3, r.val_losses
    fixed = twin(functools.partial(build.conv_frozen, frozen=False), max_steps=300)
    assert fixed.val_losses[-1] < 0.5 * LN3, fixed.val_losses


def _trivial_poisson(y: torch.Tensor) -> float:
    """The Poisson NLL (``rate - y log rate``) of the best constant rate, the mean."""
    rate = float(y.mean())
    return float((rate - y * math.log(rate)).mean())


def counts_shuffled_learn_nothing(r: PlainRecorder) -> None:
    _, vy = build.counts(600, 1)
    trivial = _trivial_poisson(vy)
    assert min(r.val_losses) > trivial - 0.05, (r.val_losses, trivial)
    fixed = twin(functools.partial(build.counts_shuffled, aligned=True), max_steps=300)
    assert fixed.val_losses[-1] < trivial - 0.3, (fixed.val_losses, trivial)


# ------------------------------------------------------------------------------------------ rising val
def lstm_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 2 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 1.6) and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 1e-3 and train[-1] < 0.01 * train[best], (train[-1], train[best])


def lr_jump_diverges(r: PlainRecorder) -> None:
    assert r.lrs[build.JUMP_STEP - 1][0] == 0.01 and r.lrs[build.JUMP_STEP][0] == 0.2, r.lrs[99:101]
    before = statistics.median(r.grad_norms[: build.JUMP_STEP])
    assert finite(r.losses[: build.JUMP_STEP]) and max(r.grad_norms[: build.JUMP_STEP]) < 5 * before
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 2.0), (final, lowest)
    fixed = twin(functools.partial(build.residual_lr_jump, factor=0.05), max_steps=300, val_check_interval=20)
    assert fixed.val_losses[-1] <= min(fixed.val_losses) * 1.05 and fixed.val_losses[-1] < lowest


def cyclic_diverges(r: PlainRecorder) -> None:
    windows = [w if math.isfinite(w) else math.inf for w in (mean(r.losses[s : s + 20]) for s in range(281))]
    floor = min(windows)
    after = next(s for s in range(281) if all(w > 1.5 * floor for w in windows[s:]))
    assert after == CYCLIC_ONSET, after
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 2.0), (final, lowest)
    fixed = twin(functools.partial(build.hetero_cyclic, max_lr=0.05), max_steps=300, val_check_interval=20)
    assert finite(fixed.val_losses) and fixed.val_losses[-1] < 1.2 * min(fixed.val_losses), fixed.val_losses


# ------------------------------------------------------------------------------------------ saturation
SIAMESE_TWIN = functools.partial(build.siamese_unit_init, std=None)


def siamese_init_saturates(r: PlainRecorder) -> None:
    bad, good = saturation(build.siamese_unit_init), saturation(SIAMESE_TWIN)
    assert min(bad[:10]) > 0.5 and mean(bad[-50:]) > 0.5, (bad[:10], mean(bad[-50:]))
    assert max(good) < 0.1, max(good)
    fixed = twin(SIAMESE_TWIN, max_steps=300)
    assert fixed.val_losses[-1] < 0.8 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def siamese_lr_saturates(r: PlainRecorder) -> None:
    bad = saturation(build.siamese_lr)
    assert bad[0] < 0.1 and next(i for i, s in enumerate(bad) if s > 0.5) == SATURATE_ONSET, bad[:5]
    assert mean(bad[-100:]) > 0.9 and statistics.median(r.grad_norms[-100:]) < 1e-3, (
        mean(bad[-100:]),
        r.grad_norms[-5:],
    )
    fixed = twin(SIAMESE_TWIN, max_steps=300)
    assert fixed.val_losses[-1] < 0.5 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ spikes
def outlier_steps(steps: int) -> list[int]:
    """The steps whose batch holds a sentinel weight (62 batches of 32 an epoch, read in order)."""
    per_epoch = sorted({row // 32 for row in build.OUTLIER_DOCS})
    return [e * 62 + b for e in range(steps // 62 + 1) for b in per_epoch if e * 62 + b < steps]


def tfidf_spikes(r: PlainRecorder) -> None:
    outliers = outlier_steps(300)
    typical = statistics.median(r.grad_norms)
    spikes = [i for i, g in enumerate(r.grad_norms) if g > 10 * typical]
    assert spikes[0] == OUTLIER_ONSET and set(spikes) <= set(outliers), (spikes, outliers)
    assert all(r.grad_norms[i] > 10 * typical for i in outliers[:2]), [
        r.grad_norms[i] / typical for i in outliers
    ]
    fixed = twin(functools.partial(build.tfidf_outliers, weight=None), max_steps=300)
    assert max(fixed.grad_norms[20:]) < 5 * statistics.median(fixed.grad_norms)


def hetero_sgd_spikes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.hetero_sgd, lr=0.05), max_steps=300)  # the same batch order
    typical = statistics.median(fixed.grad_norms)
    spikes = [i for i, g in enumerate(r.grad_norms) if g > 5 * typical]
    fixed_spikes = [i for i, g in enumerate(fixed.grad_norms) if g > 5 * typical]
    assert len(spikes) >= 5 and not fixed_spikes, (spikes, fixed_spikes)
    assert r.val_losses[-1] > 2 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


# ------------------------------------------------------------------------------------------ non-finite
def per_event_nan(r: PlainRecorder) -> None:
    _, train, _ = build.counts_per_event()
    sums = [float(yb.sum()) for _, yb in train]
    assert sums.index(0.0) == build.QUIET_BATCH and sums.count(0.0) == 1  # one batch without events
    assert finite(r.losses[: build.QUIET_BATCH]) and first_nonfinite(r.losses) == build.QUIET_BATCH
    assert all(math.isnan(v) for v in r.losses[build.QUIET_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.12, (final, lowest)
    fixed = twin(functools.partial(build.counts_per_event, per_event=False), max_steps=200)
    assert finite(fixed.losses) and finite(fixed.val_losses)


# ------------------------------------------------------------------------------------------ gradients
def _layer_ratio(r: PlainRecorder, first: str, last: str) -> float:
    return statistics.median(step[first] / step[last] for step in r.update_ratios[:50])


def deep_tanh_vanishes(r: PlainRecorder) -> None:
    assert _layer_ratio(r, "net.0.weight", "net.18.weight") < 1e-4, _layer_ratio(
        r, "net.0.weight", "net.18.weight"
    )
    assert mean(r.losses[-50:]) > 0.95 * LN4 and r.val_losses[-1] > 0.95 * LN4, r.val_losses
    fixed = twin(functools.partial(build.deep_tanh, std=None), max_steps=300)
    assert _layer_ratio(fixed, "net.0.weight", "net.18.weight") > 0.05
    assert fixed.val_losses[-1] < 0.6 * LN4, fixed.val_losses


def residual_explodes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.residual_no_norm, gain=1.0, norm=True), max_steps=200)
    typical = statistics.median(fixed.grad_norms)
    assert r.grad_norms[0] > 1e4 * typical and statistics.median(r.grad_norms) > 1e3 * typical
    assert finite(r.losses) and r.val_losses[-1] > 100 * fixed.val_losses[-1], (
        r.val_losses,
        fixed.val_losses,
    )


def sampler_stalls(r: PlainRecorder) -> None:
    # 120 batches, each sampled after a >= 60 ms round trip: the loop waits for data most of the time
    assert sum(r.wait_s) > 119 * 0.06, sum(r.wait_s)
    assert sum(r.wait_s) > 2 * sum(r.step_s), (sum(r.wait_s), sum(r.step_s))
    assert finite(r.losses) and mean(r.losses[-20:]) < mean(r.losses[:20])  # it trains, slowly in time


def steplr_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] <= 0.011 * lr0) == COLLAPSE_ONSET
    assert r.lrs[200][0] < 1e-9 * lr0
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[3]) < 1e-3, r.val_losses  # frozen in place from step 100
    fixed = twin(functools.partial(build.hetero_steplr, step_size=None), max_steps=300, val_check_interval=25)
    assert fixed.val_losses[-1] < 0.5 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ healthy
def trains(r: PlainRecorder, below: float, at_least: float = -math.inf) -> None:
    """A healthy run: every loss finite and the last validation loss in ``[at_least, below)``."""
    assert finite(r.losses) and finite(r.val_losses), (
        first_nonfinite(r.losses + r.val_losses),
        len(r.losses),
    )
    assert at_least <= r.val_losses[-1] < below, r.val_losses


def warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.1)
    assert mean(r.losses[:50]) > 0.95 * LN3  # the long warm-up: nothing moves for ~50 steps


def clipped_trains(r: PlainRecorder) -> None:
    trains(r, 0.1)
    assert min(r.grad_norms) > 0.02, sorted(r.grad_norms)[
        :5
    ]  # the norm before clipping: every step is clipped


def counts_sum_trains(r: PlainRecorder) -> None:
    _, vy = build.counts(600, 1)
    trains(r, 600 * (_trivial_poisson(vy) - 0.3))
    assert mean(r.losses[:20]) > 20, mean(r.losses[:20])  # the sum over 64 rows makes a large scale


def label_noise_trains(r: PlainRecorder) -> None:
    trains(r, 0.85 * LN3, 0.6)  # the floor of 40% relabelled rows is high, and training reaches it


def batchnorm_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * LN4)
    assert r.val_losses == sorted(r.val_losses, reverse=True), r.val_losses


def curriculum_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * LN3)
    c = build.CURRICULUM_STEP
    assert mean(r.losses[c : c + 10]) > 2 * mean(r.losses[c - 20 : c])  # the hard data arrives
    assert mean(r.losses[-30:]) < 0.8 * mean(r.losses[c : c + 10])  # and is learnt


def gaussian_nll_trains(r: PlainRecorder) -> None:
    trains(r, -0.3)  # negative: the predicted variance is below 1 where the noise is small


def step_decay_trains(r: PlainRecorder) -> None:
    trains(r, 0.7)
    assert r.lrs[149][0] == 3e-3 and abs(r.lrs[150][0] - 3e-4) < 1e-9


def frozen_embeddings_train(r: PlainRecorder) -> None:
    trains(r, 0.9 * LN2)
    assert all("net.bag.weight" not in step for step in r.update_ratios)


def converged_idles(r: PlainRecorder) -> None:
    trains(r, 0.05)
    assert mean(r.losses[-150:]) < 0.01 * mean(r.losses[:10]), (mean(r.losses[-150:]), mean(r.losses[:10]))
    assert max(r.losses[-150:]) < 0.2, max(r.losses[-150:])
