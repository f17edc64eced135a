"""Proofs of zoo 5's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its final and its
best validation loss (what a repair could save); a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import math
import statistics
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor

from galleries.health.field._case import PlainRecorder
from galleries.health.zoo1._proofs import mean, twin
from galleries.health.zoo2._proofs import finite, first_nonfinite, rows_zero
from galleries.health.zoo3._proofs import repair_room, trains
from galleries.health.zoo5 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

LN4, LN10 = math.log(4), math.log(10)
MOE_OUTLIER_ONSET = build.MOE_OUTLIER_ROWS[0] // 32  # the batch of the first mV row (read in order)
OVERFIT_ONSET = 6  # after epoch 3 (2 steps each) the validation loss never returns to its best
MOMENTUM_ONSET = 72  # from here the training loss never returns to 1.5x its best 20-step window
BAD_BATCH = build.BAD_ROW // 32
COLLAPSE_ONSET = 29  # the cosine sized for 30 steps is below 1% of its peak from here


def _coral_trivial(y: Tensor, levels: int = 5) -> float:
    """The CORAL loss of the best constant: each threshold's binary entropy at its base rate."""
    p = torch.stack([(y > k).float().mean() for k in range(levels - 1)])
    return float(-(p * p.log() + (1 - p) * (1 - p).log()).mean())


ORDINAL_TRIVIAL = _coral_trivial(build.ordinal_data(600, 1)[1])
REGIMES_VARIANCE = float(build.regimes(600, 1)[1].var(unbiased=False))


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float = 0.03) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), (r.val_losses, trivial)


def _worse(final: float, best: float, factor: float) -> bool:
    return not math.isfinite(final) or final > factor * best


def _spikes(r: PlainRecorder, typical: float, factor: float = 20.0, start: int = 0) -> list[int]:
    return [
        i for i, g in enumerate(r.grad_norms) if i >= start and (not math.isfinite(g) or g > factor * typical)
    ]


def _diverges_from(losses: list[float]) -> int:
    """The first step after which every 20-step mean training loss stays above 1.5x the best one."""
    n = len(losses) - 19
    windows = [w if math.isfinite(w) else math.inf for w in (mean(losses[s : s + 20]) for s in range(n))]
    floor = min(windows)
    return next(s for s in range(n) if all(w > 1.5 * floor for w in windows[s:]))


# ------------------------------------------------------------------------------------------ trivial loss
def ordinal_lr_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, ORDINAL_TRIVIAL)
    fixed = twin(functools.partial(build.ordinal_radam, lr=3e-3), max_steps=300)
    assert fixed.val_losses[-1] < 0.7 * ORDINAL_TRIVIAL, (fixed.val_losses, ORDINAL_TRIVIAL)


def ordinal_decay_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, ORDINAL_TRIVIAL, 0.04)
    fixed = twin(functools.partial(build.ordinal_weight_decay, weight_decay=0.1), max_steps=300)
    assert fixed.val_losses[-1] < 0.7 * ORDINAL_TRIVIAL, (fixed.val_losses, ORDINAL_TRIVIAL)


def points_pool_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, LN4, 0.02)
    fixed = twin(functools.partial(build.points_pool_batch, pool_batch=False), max_steps=300)
    assert fixed.val_losses[-1] < 0.6 * LN4, fixed.val_losses


def vae_encoder_frozen(r: PlainRecorder) -> None:
    assert min(r.grad_norms) > 0 and r.lrs[0] == [0.0, 1e-3], r.lrs[0]
    for step in r.update_ratios:
        assert all(v == 0.0 for k, v in step.items() if k.startswith("net.encoder")), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("net.decoder")), step
    # the encoder matters: trained at the decoder's LR it reaches a clearly lower loss
    fixed = twin(functools.partial(build.vae_encoder_lr_mult, mult=1.0), max_steps=300)
    assert fixed.val_losses[-1] < 0.9 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ spikes
def moe_outlier_spikes(r: PlainRecorder) -> None:
    per_epoch = sorted({row // 32 for row in build.MOE_OUTLIER_ROWS})
    outliers = [e * 94 + b for e in range(4) for b in per_epoch if e * 94 + b < 300]
    typical = statistics.median(r.grad_norms)
    spikes = _spikes(r, typical)
    assert spikes == outliers and spikes[0] == MOE_OUTLIER_ONSET, (spikes, outliers)
    assert all(r.grad_norms[i] > 1000 * typical for i in outliers), [
        r.grad_norms[i] / typical for i in outliers
    ]
    fixed = twin(functools.partial(build.moe_outliers, scale=None), max_steps=300)
    assert not _spikes(fixed, statistics.median(fixed.grad_norms), start=20)
    assert fixed.val_losses[-1] < r.val_losses[-1], (fixed.val_losses, r.val_losses)


def moe_nadam_spikes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.moe_nadam, lr=2e-3), max_steps=300)  # the same batch order
    typical = statistics.median(fixed.grad_norms)
    spikes = _spikes(r, typical, start=1)
    assert len(spikes) >= 5 and max(spikes) > 250 and not _spikes(fixed, typical, 5.0), spikes
    assert finite(r.losses) and r.val_losses[-1] > 3 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


# ------------------------------------------------------------------------------------------ dead units
def points_init_dead(r: PlainRecorder) -> None:
    assert min(z["net.point.0.weight"] for z in r.zero_grad_rows) == 1.0  # every unit dead on every batch
    _stuck_at(r, LN4, 0.02)
    fixed = twin(functools.partial(build.points_bias_init, bias=None), max_steps=300)
    assert rows_zero(fixed, "net.point.0.weight") < 0.2 and fixed.val_losses[-1] < 0.6 * LN4


def points_jump_kills_units(r: PlainRecorder) -> None:
    jump = build.JUMP_STEP
    assert r.lrs[jump - 1][0] == 0.02 and abs(r.lrs[jump][0] - 0.6) < 1e-9, r.lrs[jump - 1 : jump + 1]
    before, after = rows_zero(r, "net.point.2.weight", 0, jump), rows_zero(r, "net.point.2.weight", jump + 10)
    assert before < 0.3 and after > 0.8, (before, after)
    final, lowest = repair_room(r)  # validation every 20 steps
    assert lowest == min(r.val_losses[:5]) and min(r.val_losses[5:]) > 1.5 * lowest, r.val_losses
    assert _worse(final, lowest, 1.5), (final, lowest)


# ------------------------------------------------------------------------------------------ rising val
def ordinal_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 2 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 1.5) and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.5 * train[best], (train[-1], train[best])


def moe_momentum_diverges(r: PlainRecorder) -> None:
    assert _diverges_from(r.losses) == MOMENTUM_ONSET, _diverges_from(r.losses)
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 3.0) and first_nonfinite(r.losses) > MOMENTUM_ONSET, (final, lowest)
    fixed = twin(functools.partial(build.moe_momentum, momentum=0.9), max_steps=300, val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.6 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ non-finite
def vae_bad_image_nan(r: PlainRecorder) -> None:
    assert finite(r.losses[:BAD_BATCH]) and first_nonfinite(r.losses) == BAD_BATCH
    assert all(math.isnan(v) for v in r.losses[BAD_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.9 * r.val_losses[0], (final, lowest)
    fixed = twin(functools.partial(build.vae_bad_image, scale=None), max_steps=300)
    assert finite(fixed.losses) and finite(fixed.val_losses)


def shared_sgd_nan(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert at <= 5 and r.grad_norms[at - 1] > 100 * r.grad_norms[0], r.grad_norms[:at]
    fixed = twin(functools.partial(build.shared_sgd, lr=0.05), max_steps=100)
    assert finite(fixed.losses) and max(fixed.grad_norms) < 20 * fixed.grad_norms[0]


def ordinal_zero_nan(r: PlainRecorder) -> None:
    assert first_nonfinite(r.losses) == 0 and r.losses[0] == math.inf, r.losses[:3]  # log(0) for levels 1-3
    assert all(math.isnan(v) for v in r.losses[1:])
    fixed = twin(functools.partial(build.ordinal_zero_thresholds, zero=False), max_steps=300)
    assert finite(fixed.losses) and fixed.val_losses[-1] < fixed.val_losses[0]


# ------------------------------------------------------------------------------------------ collapse
def moe_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.01 * lr0) == COLLAPSE_ONSET
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[2]) < 1e-3 * final, r.val_losses  # frozen in place from step 30
    fixed = twin(functools.partial(build.moe_collapse, total=None), max_steps=300, val_check_interval=25)
    assert fixed.val_losses[-1] < 0.5 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ gradients
def shared_vanishes(r: PlainRecorder) -> None:
    def ratio(rec: PlainRecorder) -> float:
        return statistics.median(
            step["net.stem.weight"] / step["net.head.weight"] for step in rec.update_ratios[:50]
        )

    _stuck_at(r, LN10, 0.01)
    fixed = twin(functools.partial(build.shared_default_init, he=True), max_steps=300)
    assert ratio(r) < 0.01 * ratio(fixed), (ratio(r), ratio(fixed))
    assert fixed.val_losses[-1] < 0.3 * LN10, fixed.val_losses


def hyper_explodes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.hyper_unscaled, scaled=True), max_steps=300)
    typical = statistics.median(fixed.grad_norms)
    assert r.grad_norms[0] > 10 * fixed.grad_norms[0] and max(r.grad_norms[:5]) > 300 * typical, r.grad_norms[
        :5
    ]
    assert mean(r.losses[:10]) > 10 * LN10, mean(r.losses[:10])  # logits in the hundreds
    assert r.val_losses[-1] > 3 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


class GateProbe(pl.Callback):
    """The fraction of sigmoid gate outputs beyond 0.99 (or below 0.01) on each training batch, and the gate
    weights' gradient norm on each step."""

    def __init__(self) -> None:
        self.saturated: list[float] = []
        self.gate_grads: list[float] = []

    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Any
    ) -> None:
        self.gate_grads.append(float(pl_module.net.gate.weight.grad.norm()))

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ) -> None:
        with torch.no_grad():
            g = torch.sigmoid(pl_module.net.gate(batch[0]))
        self.saturated.append(float(((g > 0.99) | (g < 0.01)).float().mean()))


def _gate_saturation(bias: float | None) -> GateProbe:
    torch.manual_seed(0)
    model, train, _ = build.moe_sigmoid_gates(bias)
    probe = GateProbe()
    fast_trainer(max_steps=300, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(model, train)
    return probe


def moe_gates_saturate(r: PlainRecorder) -> None:
    bad, good = _gate_saturation(8.0), _gate_saturation(None)
    assert min(bad.saturated) == 1.0 and max(good.saturated) < 0.2, (min(bad.saturated), max(good.saturated))
    # sigmoid'(8) ~ 3e-4: the gate's gradient all but vanishes
    gate, fixed_gate = statistics.median(bad.gate_grads), statistics.median(good.gate_grads)
    assert gate < 0.01 * fixed_gate, (gate, fixed_gate)


def points_stall(r: PlainRecorder) -> None:
    # 32 clouds a batch at >= 2 ms each: >= 64 ms of waiting per step against a few ms of work
    assert sum(r.wait_s) > 100 * 0.064 and sum(r.wait_s) > 3 * sum(r.step_s), (sum(r.wait_s), sum(r.step_s))
    assert finite(r.losses) and mean(r.losses[-20:]) < mean(r.losses[:20])  # it trains, slowly in time


# ------------------------------------------------------------------------------------------ healthy
def vae_kl_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.85 * r.val_losses[0])
    assert mean(r.losses[140:160]) > 0.9 * mean(r.losses[100:120]), r.losses[100:160]  # the KL arriving


def points_converged_idles(r: PlainRecorder) -> None:
    trains(r, 0.1)
    assert mean(r.losses[-100:]) < 0.1 * mean(r.losses[:10]), (mean(r.losses[-100:]), mean(r.losses[:10]))


def ordinal_noise_trains(r: PlainRecorder) -> None:
    _, _, val = build.ordinal_label_noise()
    trivial = _coral_trivial(val.dataset.tensors[1])  # the redrawn levels' own trivial loss
    trains(r, 0.95 * trivial, 0.75 * trivial)  # 40% redrawn: a high floor, reached


def ordinal_batch4_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * ORDINAL_TRIVIAL)


def points_curriculum_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * LN4)
    c = build.CURRICULUM_STEP
    assert mean(r.losses[c : c + 10]) > 2 * mean(r.losses[c - 20 : c])  # the jittered clouds arrive
    assert mean(r.losses[-30:]) < 0.8 * mean(r.losses[c : c + 10])  # and are learnt


def vae_sum_trains(r: PlainRecorder) -> None:
    trains(r, 0.85 * r.val_losses[0])
    assert mean(r.losses[:20]) > 1000, mean(r.losses[:20])  # the sum over 64 images makes a large scale


def moe_step_decay_trains(r: PlainRecorder) -> None:
    trains(r, 0.7 * REGIMES_VARIANCE)
    assert r.lrs[149][0] == 3e-3 and abs(r.lrs[150][0] - 3e-4) < 1e-9


def hyper_clipped_trains(r: PlainRecorder) -> None:
    trains(r, 0.4)
    assert min(r.grad_norms) > 0.05, min(r.grad_norms)  # the norm before clipping: every step clips


def points_frozen_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * LN4)
    assert all(set(step) <= {"net.head.0.weight", "net.head.0.bias", "net.head.2.weight", "net.head.2.bias"}
               for step in r.update_ratios)  # fmt: skip


def moe_cyclic_trains(r: PlainRecorder) -> None:
    trains(r, 0.7 * REGIMES_VARIANCE)
    assert max(lr[0] for lr in r.lrs) > 20 * min(lr[0] for lr in r.lrs)


def ordinal_offset_trains(r: PlainRecorder) -> None:
    offset = math.log(120)
    trains(r, offset + 0.7 * ORDINAL_TRIVIAL, offset)
    assert mean(r.losses[:10]) - mean(r.losses[-10:]) > 0.1, (r.losses[:10], r.losses[-10:])


def shared_momentum_trains(r: PlainRecorder) -> None:
    trains(r, 0.5)
    ups = sum(b > a for a, b in zip(r.losses, r.losses[1:]))
    assert ups > 100, ups  # momentum 0.99: the loss goes up on many steps, yet falls overall


def ordinal_decay_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * ORDINAL_TRIVIAL)
