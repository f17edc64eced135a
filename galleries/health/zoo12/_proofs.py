"""Proofs of zoo 12's runs, each from the run's plain recording (:class:`PlainRecorder`, no HealthMonitor).

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its final and its
best validation loss (what a repair could save); a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import math
from typing import Any

import lightning.pytorch as pl
import torch

from galleries.health.field._case import PlainRecorder
from galleries.health.zoo1._proofs import mean, twin
from galleries.health.zoo2._proofs import finite, first_nonfinite
from galleries.health.zoo3._proofs import repair_room, trains
from galleries.health.zoo12 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

LN4 = math.log(4)
NAN_BATCH = build.NAN_ROW // 32  # the batch holding the clip with NaN samples (read in order)
OVERFIT_EVERY = 10  # 64 clips: 2 steps an epoch, validated every 5 epochs
OVERFIT_ONSET = 120  # after the 12th validation (step 120) the validation loss never returns to its best
CYCLIC_ONSET = 110  # from here the training loss never returns to 1.5x its best 20-step window
COLLAPSE_ONSET = 20  # the second milestone: the LR is 100x down from here (1000x from step 30)


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float = 0.02) -> None:
    assert r.val_losses and all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), r.val_losses


def _worse(final: float, best: float, factor: float) -> bool:
    return not math.isfinite(final) or final > factor * best


def _diverges_from(losses: list[float]) -> int:
    """The first step after which every 20-step mean training loss stays above 1.5x the best one."""
    n = len(losses) - 19
    windows = [w if math.isfinite(w) else math.inf for w in (mean(losses[s : s + 20]) for s in range(n))]
    floor = min(windows)
    return next(s for s in range(n) if all(w > 1.5 * floor for w in windows[s:]))


# ------------------------------------------------------------------------------------------ trivial loss
def signal_lr_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, LN4)
    fixed = twin(functools.partial(build.signal_radam, lr=3e-3), max_steps=300)
    assert fixed.val_losses[-1] < 0.65 * LN4, fixed.val_losses


def downmix_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, LN4)
    x = build.signal_downmix()[1].dataset.tensors[0]
    assert float(x.std()) < 0.05, float(x.std())  # the wave cancelled: only the two channels' noise is left
    fixed = twin(functools.partial(build.signal_downmix, fix_polarity=True), max_steps=300)
    assert fixed.val_losses[-1] < 0.4 * LN4, fixed.val_losses


# ------------------------------------------------------------------------------------------ frozen block
def unet_up_frozen(r: PlainRecorder) -> None:
    for step, zero in zip(r.update_ratios, r.zero_grad_rows, strict=True):
        assert all(v == 0.0 for k, v in step.items() if k.startswith("net.up.")), step
        assert all(v > 0.0 for k, v in step.items() if not k.startswith("net.up.")), step
        assert zero["net.up.0.weight"] < 0.5, zero  # the up block gets gradients all along
    fixed = twin(functools.partial(build.unet_block_lrs, {**build.UNET_BLOCK_LRS, "up": 2e-3}), max_steps=300)
    assert fixed.val_losses[-1] < 0.85 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ non-finite
def eps_zero_nan(r: PlainRecorder) -> None:
    assert math.isfinite(r.losses[0]) and all(math.isnan(v) for v in r.losses[1:]), r.losses[:3]
    assert math.isnan(r.update_ratios[0]["net.conv1.weight"]), r.update_ratios[0]  # the first update: 0 / 0
    assert math.isfinite(r.update_ratios[0]["net.head.weight"]), r.update_ratios[0]
    fixed = twin(functools.partial(build.signal_eps_zero, eps=1e-8), max_steps=300)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.4 * LN4, fixed.val_losses


def nan_clip(r: PlainRecorder) -> None:
    assert finite(r.losses[:NAN_BATCH]) and first_nonfinite(r.losses) == NAN_BATCH
    assert all(math.isnan(v) for v in r.losses[NAN_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)  # validation every 10 steps
    assert math.isnan(final) and lowest < 0.9 * r.val_losses[0], (final, lowest)
    fixed = twin(functools.partial(build.signal_nan_clip, broken=False), max_steps=300)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.4 * LN4, fixed.val_losses


# ------------------------------------------------------------------------------------------ rising val
def few_clips_overfit(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * OVERFIT_EVERY == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 1.3) and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.5 * train[best], (train[-1], train[best])
    fixed = twin(functools.partial(build.signal_few_clips, rows=2400), max_steps=300, val_check_interval=25)
    assert fixed.val_losses[-1] < lowest, (fixed.val_losses, lowest)


def cyclic_diverges(r: PlainRecorder) -> None:
    assert _diverges_from(r.losses) == CYCLIC_ONSET, _diverges_from(r.losses)
    stated = 3e-3  # the schedule's stated peak, passed 10-fold within 20 steps of the onset
    peak = max(lr[0] for lr in r.lrs[: CYCLIC_ONSET + 20])
    assert peak > 10 * stated, r.lrs[CYCLIC_ONSET : CYCLIC_ONSET + 20]
    final, lowest = repair_room(r)  # validation every 20 steps
    assert _worse(final, lowest, 3.0), (final, lowest)
    fixed = twin(functools.partial(build.unet_cyclic, gamma=0.975), max_steps=300, val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.5 * final, (fixed.val_losses, final)


def multistep_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.02 * lr0) == COLLAPSE_ONSET, r.lrs[:32]
    final, lowest = repair_room(r)  # validation every 25 steps
    assert final > 0.95 * LN4 and final - lowest < 0.01 * final, r.val_losses  # frozen near the prior
    no_milestones = functools.partial(build.signal_multistep, milestones=())
    fixed = twin(no_milestones, max_steps=300, val_check_interval=25)
    assert fixed.val_losses[-1] < 0.4 * final, (fixed.val_losses, final)


# ------------------------------------------------------------------------------------------ activations
class TanhProbe(pl.Callback):
    """The fraction of the first convolution's tanh outputs beyond +-0.99 on each training batch."""

    def __init__(self) -> None:
        self.saturated: list[float] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ) -> None:
        with torch.no_grad():
            a = torch.tanh(pl_module.net.conv1(batch[0]))
        self.saturated.append(float((a.abs() > 0.99).float().mean()))


def _saturation(scale: float) -> tuple[TanhProbe, PlainRecorder]:
    torch.manual_seed(0)
    model, train, val = build.signal_raw_counts(scale)
    probe, recorder = TanhProbe(), PlainRecorder()
    fast_trainer(max_steps=300, max_epochs=1000, callbacks=[probe, recorder]).fit(model, train, val)
    return probe, recorder


def raw_counts_saturate(r: PlainRecorder) -> None:
    (bad, _), (good, fixed) = _saturation(32767.0), _saturation(1.0)
    assert min(bad.saturated) > 0.95 and max(good.saturated) < 0.3, (min(bad.saturated), max(good.saturated))
    assert fixed.val_losses[-1] < 0.85 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def residual_explodes(r: PlainRecorder) -> None:
    fixed = twin(build.residual_scaled, max_steps=300)
    assert r.grad_norms[0] > 1000 * fixed.grad_norms[0], (r.grad_norms[:3], fixed.grad_norms[:3])
    assert mean(r.losses[:10]) > 100 * LN4, mean(r.losses[:10])  # logits in the thousands
    assert r.val_losses[-1] > 3 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


def mulaw_stall(r: PlainRecorder) -> None:
    # 32 clips a batch, 4096 codes each decoded in Python: the loop waits far longer than it computes
    assert sum(r.wait_s) > 3 * sum(r.step_s), (sum(r.wait_s), sum(r.step_s))
    assert finite(r.losses) and mean(r.losses[-20:]) < 0.7 * mean(r.losses[:20])  # it trains, slowly in time


# ------------------------------------------------------------------------------------------ healthy
def pixel_counts_trains(r: PlainRecorder) -> None:
    trains(r, 0.7 * r.val_losses[0])
    assert mean(r.losses[:10]) > 1000 and r.grad_norms[0] > 1000, (mean(r.losses[:10]), r.grad_norms[0])


def label_noise_trains(r: PlainRecorder) -> None:
    trains(r, 0.85 * LN4, 0.9)  # 40% redrawn: a high floor, well above the clean run's ~0.3


def long_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * LN4)
    assert mean(r.losses[:50]) > 0.97 * LN4, mean(r.losses[:50])  # nothing moves for ~50 steps
    assert r.lrs[build.WARMUP - 1][0] == 2e-3 and r.lrs[0][0] < 1e-6, (r.lrs[0], r.lrs[build.WARMUP - 1])


def filterbank_trains(r: PlainRecorder) -> None:
    trains(r, 0.35 * LN4)
    assert all("net.bank.weight" not in step and step for step in r.update_ratios)


def sgd_slow_trains(r: PlainRecorder) -> None:
    trains(r, 0.05)
    assert all(b < a for a, b in zip(r.val_losses, r.val_losses[1:])), r.val_losses  # steadily down


def tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * LN4)
    ups = sum(b > a for a, b in zip(r.val_losses, r.val_losses[1:]))
    assert ups >= 5, r.val_losses  # 8 clips: the validation loss jitters up often


def adamax_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * LN4)
    assert r.lrs[-1][0] == 0.02


def residual_scaled_trains(r: PlainRecorder) -> None:
    trains(r, 0.15)
