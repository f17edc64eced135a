"""Proofs of zoo 4's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from galleries.health.zoo3._proofs import TanhProbe, repair_room, trains
from galleries.health.zoo4 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

LN10 = math.log(10)
UNET_OUTLIER_ONSET = build.UNET_OUTLIER_ROWS[0] // 32  # the batch of the first 0-255 image (read in order)
OVERFIT_ONSET = 40  # after epoch 20 (2 steps each) the validation loss never returns to its best
GROWTH_ONSET = 112  # from here the training loss never returns to 1.5x its best 20-step window
COLLAPSE_ONSET = 90  # 0.95 ** 90 < 0.01: the LR is 100x down


def _variance(y: Tensor) -> float:
    return float(((y - y.mean()) ** 2).mean())


def _pinball(y: Tensor, tau: float = 0.9) -> float:
    """The pinball loss of the best constant (the ``tau`` quantile)."""
    error = y - y.quantile(tau)
    return float(torch.maximum(tau * error, (tau - 1) * error).mean())


def _prior_bce(y: Tensor) -> float:
    """The BCE of predicting each label's base rate."""
    p = y.mean(0)
    return float(-(p * p.log() + (1 - p) * (1 - p).log()).mean())


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float = 0.03) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), (r.val_losses, trivial)


def _worse(final: float, best: float, factor: float) -> bool:
    return not math.isfinite(final) or final > factor * best


RATINGS_VARIANCE = _variance(build.ratings(1500, 1)[1])


# ------------------------------------------------------------------------------------------ trivial loss
def recommender_lr_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, RATINGS_VARIANCE)
    ratios = [v for step in r.update_ratios for k, v in step.items() if k.endswith("weight")]
    assert statistics.median(ratios) < 1e-4, statistics.median(ratios)
    fixed = twin(functools.partial(build.recommender_adagrad, lr=0.1), max_steps=300)
    assert fixed.val_losses[-1] < 0.7 * RATINGS_VARIANCE, (fixed.val_losses, RATINGS_VARIANCE)


def recommender_rounded_stuck(r: PlainRecorder) -> None:
    assert max(r.grad_norms) == 0.0 and all(v == 0.0 for s in r.update_ratios for v in s.values())
    _stuck_at(r, RATINGS_VARIANCE)
    fixed = twin(functools.partial(build.recommender_rounded, rounded=False), max_steps=300)
    assert fixed.val_losses[-1] < 0.7 * RATINGS_VARIANCE, (fixed.val_losses, RATINGS_VARIANCE)


def sets_reshaped_learn_nothing(r: PlainRecorder) -> None:
    trivial = _variance(build.sets(600, 1)[1])
    assert min(r.val_losses) > 0.95 * trivial, (r.val_losses, trivial)
    fixed = twin(functools.partial(build.sets_reshaped, transpose=True), max_steps=300)
    assert fixed.val_losses[-1] < 0.3 * trivial, (fixed.val_losses, trivial)


# ------------------------------------------------------------------------------------------ spikes
def unet_outlier_spikes(r: PlainRecorder) -> None:
    per_epoch = sorted({row // 32 for row in build.UNET_OUTLIER_ROWS})
    outliers = [e * 44 + b for e in range(7) for b in per_epoch if e * 44 + b < 300]
    typical = statistics.median(r.grad_norms)
    spikes = [i for i, g in enumerate(r.grad_norms) if g > 20 * typical]
    assert spikes[0] == UNET_OUTLIER_ONSET and set(spikes) <= set(outliers), (spikes, outliers)
    assert all(r.grad_norms[i] > 100 * typical for i in outliers), [
        r.grad_norms[i] / typical for i in outliers
    ]
    fixed = twin(functools.partial(build.unet_unscaled_images, scale=None), max_steps=300)
    fixed_typical = statistics.median(fixed.grad_norms)
    assert max(fixed.grad_norms[20:]) < 20 * fixed_typical, max(fixed.grad_norms[20:]) / fixed_typical
    assert fixed.val_losses[-1] < 0.7 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def unet_adam_spikes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.unet_adam, lr=2e-3), max_steps=300)  # the same batch order
    typical = statistics.median(fixed.grad_norms)
    spikes = [i for i, g in enumerate(r.grad_norms) if i >= 30 and g > 20 * typical]
    fixed_spikes = [i for i, g in enumerate(fixed.grad_norms) if i >= 30 and g > 5 * typical]
    assert len(spikes) >= 30 and max(spikes) > 250 and not fixed_spikes, (spikes, fixed_spikes)
    assert finite(r.losses) and r.val_losses[-1] > 1.1 * fixed.val_losses[-1], (
        r.val_losses,
        fixed.val_losses,
    )


def unet_sgd_nan(r: PlainRecorder) -> None:
    assert first_nonfinite(r.losses) == 3 and r.grad_norms[2] > 1e6 * r.grad_norms[0], r.grad_norms[:4]
    fixed = twin(functools.partial(build.unet_sgd, lr=0.05), max_steps=100)
    assert finite(fixed.losses) and max(fixed.grad_norms) < 5 * fixed.grad_norms[0]


# ------------------------------------------------------------------------------------------ dead units
def multilabel_init_dead(r: PlainRecorder) -> None:
    assert min(z["net.0.weight"] for z in r.zero_grad_rows) == 1.0  # every unit dead on every batch
    _, _, _, vy = build._digits()
    prior = _prior_bce(build.attributes(vy))
    assert abs(r.val_losses[-1] - prior) < 0.02 * prior, (r.val_losses, prior)
    fixed = twin(functools.partial(build.multilabel_sign_init, negative=False), max_steps=300)
    assert rows_zero(fixed, "net.0.weight") < 0.2 and fixed.val_losses[-1] < 0.4 * prior


def multilabel_jump_kills_units(r: PlainRecorder) -> None:
    jump = build.JUMP_STEP
    assert r.lrs[jump - 1][0] == 1e-3 and abs(r.lrs[jump][0] - 0.1) < 1e-9, r.lrs[jump - 1 : jump + 1]
    assert rows_zero(r, "net.0.weight", 0, jump) < 0.2 and rows_zero(r, "net.0.weight", jump + 10) > 0.9
    final, lowest = repair_room(r)  # validation at batches 20 and 40 of each 44: steps 20, 40, 64, 84, 108...
    before, after = r.val_losses[:4], r.val_losses[4:]
    assert _worse(final, lowest, 1.5) and lowest == min(before) and min(after) > 1.5 * lowest, (before, after)


# ------------------------------------------------------------------------------------------ rising val
def multilabel_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 2 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 1.5) and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 1e-3 and train[-1] < 0.05 * train[best], (train[-1], train[best])


def sepconv_diverges(r: PlainRecorder) -> None:
    windows = [w if math.isfinite(w) else math.inf for w in (mean(r.losses[s : s + 20]) for s in range(281))]
    floor = min(windows)
    after = next(s for s in range(281) if all(w > 1.5 * floor for w in windows[s:]))
    assert after == GROWTH_ONSET, after
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 3.0), (final, lowest)
    fixed = twin(
        functools.partial(build.sepconv_lr_growth, gamma=0.997), max_steps=300, val_check_interval=20
    )
    assert fixed.val_losses[-1] < 0.5 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ non-finite
def pos_weight_nan(r: PlainRecorder) -> None:
    _, train, _ = build.multilabel_pos_weight()
    without = [i for i, (_, yb) in enumerate(train) if bool((yb.sum(0) == 0).any())]
    assert without == [build.BAD_BATCH], without  # one batch lacks the positives of a label
    assert finite(r.losses[: build.BAD_BATCH]) and first_nonfinite(r.losses) == build.BAD_BATCH
    assert all(math.isnan(v) for v in r.losses[build.BAD_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.35, (final, lowest)
    fixed = twin(functools.partial(build.multilabel_pos_weight, per_batch=False), max_steps=200)
    assert finite(fixed.losses) and finite(fixed.val_losses)


# ------------------------------------------------------------------------------------------ collapse
def quantile_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.01 * lr0) == COLLAPSE_ONSET
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[5]) < 1e-3, r.val_losses  # frozen in place from step 150
    fixed = twin(
        functools.partial(build.quantile_decay, decay_steps=None), max_steps=300, val_check_interval=25
    )
    assert fixed.val_losses[-1] < 0.8 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ activations
class HeadTanhProbe(TanhProbe):
    """:class:`TanhProbe` on the tanh units of the deep-sets head (``rho``) only."""

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        for module in pl_module.net.rho.modules():
            if isinstance(module, torch.nn.Tanh):
                module.register_forward_hook(self._hook)


def _head_saturation(pool: str) -> list[float]:
    torch.manual_seed(0)
    model, train, _ = build.sets_sum_tanh(pool)
    probe = HeadTanhProbe()
    fast_trainer(max_steps=300, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(model, train)
    return probe.saturated


def sets_sum_saturates(r: PlainRecorder) -> None:
    bad, good = _head_saturation("sum"), _head_saturation("mean")
    assert min(bad[:10]) > 0.5 and mean(bad[-50:]) > 0.5, (bad[:10], mean(bad[-50:]))
    assert max(good) < 0.2, max(good)


def quantile_deep_vanishes(r: PlainRecorder) -> None:
    def ratio(rec: PlainRecorder) -> float:
        return statistics.median(
            step["net.0.weight"] / step["net.16.weight"] for step in rec.update_ratios[:50]
        )

    trivial = _pinball(build.quantile_data(600, 1)[1])
    assert ratio(r) < 1e-4 and min(r.val_losses) > 0.97 * trivial, (ratio(r), r.val_losses, trivial)
    fixed = twin(functools.partial(build.quantile_deep_scaled, scale=None), max_steps=300)
    assert ratio(fixed) > 0.01 and fixed.val_losses[-1] < 0.7 * trivial, (ratio(fixed), fixed.val_losses)


def gcn_explodes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.gcn_raw_adjacency, normalise=True), max_steps=300)
    typical = statistics.median(fixed.grad_norms)
    assert r.grad_norms[0] > 1e3 * typical and min(r.grad_norms[:5]) > 100 * typical, r.grad_norms[:5]
    assert mean(r.losses[:10]) > 10 * math.log(4), mean(r.losses[:10])  # logits in the hundreds


def workers_stall(r: PlainRecorder) -> None:
    # 15 epochs of 8 batches, each epoch's workers spending >= 0.5 s on start-up before the first batch
    assert sum(r.wait_s) > 14 * 0.5 and sum(r.wait_s) > 3 * sum(r.step_s), (sum(r.wait_s), sum(r.step_s))
    assert finite(r.losses) and mean(r.losses[-20:]) < mean(r.losses[:20])  # it trains, slowly in time


# ------------------------------------------------------------------------------------------ healthy
def sepconv_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.3)
    assert mean(r.losses[:20]) > 0.9 * LN10, mean(r.losses[:20])  # the long warm-up: slow at first


def gcn_converged_idles(r: PlainRecorder) -> None:
    trains(r, 0.1)
    assert mean(r.losses[-150:]) < 0.02 * mean(r.losses[:10]), (mean(r.losses[-150:]), mean(r.losses[:10]))


def multilabel_noise_trains(r: PlainRecorder) -> None:
    trains(r, 0.66, 0.55)  # 30% flipped bits: the floor is ~0.61 nats, and training reaches near it


def quantile_batch4_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * _pinball(build.quantile_data(600, 1)[1]))


def sets_curriculum_trains(r: Any) -> None:
    trains(r, 0.8 * _variance(torch.cat([build.sets(300, 1)[1], build.sets(300, 3)[1]])))
    c = build.CURRICULUM_STEP
    assert mean(r.losses[c : c + 10]) > 2 * mean(r.losses[c - 20 : c])  # the loose sets arrive
    assert mean(r.losses[-30:]) < 0.8 * mean(r.losses[c : c + 10])  # and are learnt


def recommender_sum_trains(r: PlainRecorder) -> None:
    trains(r, 1500 * 0.7 * RATINGS_VARIANCE)  # validation sums over its one batch of 1500 ratings
    assert mean(r.losses[:20]) > 50, mean(r.losses[:20])  # the sum over 64 ratings makes a large scale


def unet_step_decay_trains(r: PlainRecorder) -> None:
    trains(r, 0.04)
    assert r.lrs[149][0] == 2e-3 and abs(r.lrs[150][0] - 2e-4) < 1e-9


def multilabel_clipped_trains(r: PlainRecorder) -> None:
    trains(r, 0.3)
    assert min(r.grad_norms) > 0.01, min(r.grad_norms)  # the norm before clipping: every step clips


def gcn_frozen_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * math.log(4))
    assert all(set(step) <= {"net.head.weight", "net.head.bias"} for step in r.update_ratios)


def quantile_cyclic_trains(r: PlainRecorder) -> None:
    trains(r, 0.7 * _pinball(build.quantile_data(600, 1)[1]))
    assert max(lr[0] for lr in r.lrs) > 20 * min(lr[0] for lr in r.lrs)


def sets_offset_trains(r: PlainRecorder) -> None:
    trains(r, 25.2, 25.0)
    assert mean(r.losses[:10]) - mean(r.losses[-10:]) > 0.1, (r.losses[:10], r.losses[-10:])


def recommender_slow_trains(r: PlainRecorder) -> None:
    trains(r, 0.95 * RATINGS_VARIANCE)
    thirds = [mean(r.losses[i : i + 100]) for i in (0, 100, 200)]
    assert thirds[0] > thirds[1] > thirds[2], thirds
