"""Proofs of zoo 13's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its final and its
best validation loss (what a repair could save); a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs.
"""

from __future__ import annotations

import functools
import itertools
import math
from typing import Any

import lightning.pytorch as pl
import torch

from galleries.health.field._case import PlainRecorder
from galleries.health.zoo1._proofs import mean, twin
from galleries.health.zoo2._proofs import finite, first_nonfinite, rows_zero
from galleries.health.zoo3._proofs import repair_room, trains
from galleries.health.zoo13 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

BAD_BATCH = build.BAD_ROW // 32  # the batch holding the -inf reading (read in order)
OVERFIT_ONSET = 12  # after epoch 6 (2 steps each) the validation loss never returns to its best
STAGE_ONSET = build.STAGE_STEP  # the first step run at 10x the LR
COLLAPSE_ONSET = 20  # the first step run at 1/100 of the LR (the first "epoch" milestone, taken as a step)

# the validation loss of the best constant (the training mean) on the standardised diabetes target
DIABETES_TRIVIAL = float((build.diabetes()[1][1] - build.diabetes()[0][1].mean()).pow(2).mean())
DIABETES_RAW_VARIANCE = float(build.diabetes(standardise_target=False)[1][1].var(unbiased=False))


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float = 0.03) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), (r.val_losses, trivial)


def _worse(final: float, best: float, factor: float) -> bool:
    return not math.isfinite(final) or final > factor * best


# ------------------------------------------------------------------------------------------ trivial loss
def diabetes_mask_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, DIABETES_TRIVIAL)
    # every input is exactly 0: the first layer's weights get no gradient at all, from step 0
    assert rows_zero(r, "net.0.weight") == 1.0
    fixed = twin(functools.partial(build.diabetes_inverted_mask, inverted=False), max_steps=300)
    assert fixed.val_losses[-1] < 0.7 * DIABETES_TRIVIAL, (fixed.val_losses, DIABETES_TRIVIAL)


def diabetes_lr_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, DIABETES_TRIVIAL)
    assert r.lrs[0] == [3e-7] and rows_zero(r, "net.0.weight") < 0.01  # the inputs reach the weights
    fixed = twin(functools.partial(build.diabetes_radam, lr=3e-3), max_steps=300)
    assert fixed.val_losses[-1] < 0.7 * DIABETES_TRIVIAL, (fixed.val_losses, DIABETES_TRIVIAL)


# ------------------------------------------------------------------------------------------ non-finite
def rates_zero_reading_nan(r: PlainRecorder) -> None:
    assert finite(r.losses[:BAD_BATCH]) and first_nonfinite(r.losses) == BAD_BATCH
    assert finite(r.grad_norms[:BAD_BATCH]) and max(r.grad_norms[:BAD_BATCH]) < 10
    assert all(math.isnan(v) for v in r.losses[BAD_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.2 * r.losses[0], (final, lowest)
    fixed = twin(
        functools.partial(build.rates_zero_reading, zero=False), max_steps=300, val_check_interval=20
    )
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.6 * lowest, (fixed.val_losses, lowest)


def rates_sgd_nan(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert at <= 6 and finite(r.losses[:at]) and r.losses[at - 1] > 100 * r.losses[0], r.losses[: at + 1]
    fixed = twin(functools.partial(build.rates_sgd, lr=0.03), max_steps=300)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.1, fixed.val_losses


# ------------------------------------------------------------------------------------------ rising val
def diabetes_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 2 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert _worse(final, lowest, 1.25) and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.05 * train[best], (train[-1], train[best])


def rates_stage_diverges(r: PlainRecorder) -> None:
    assert r.lrs[STAGE_ONSET - 1] == [0.02] and abs(r.lrs[STAGE_ONSET][0] - 0.2) < 1e-9, r.lrs[99:101]
    final, lowest = repair_room(r)  # validation every 20 steps: the best is before the jump
    assert lowest == min(r.val_losses[: STAGE_ONSET // 20]), r.val_losses
    assert mean(r.losses[STAGE_ONSET + 20 :]) > 3 * mean(r.losses[STAGE_ONSET - 20 : STAGE_ONSET])
    assert _worse(final, lowest, 5.0), (final, lowest)
    fixed = twin(functools.partial(build.rates_stage_gamma, gamma=0.1), max_steps=300, val_check_interval=20)
    assert fixed.val_losses[-1] < 0.7 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ collapse
def made_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.02 * lr0) == COLLAPSE_ONSET
    assert r.lrs[-1][0] < 2e-4 * lr0  # the second milestone, taken at step 40
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[1]) < 0.01 * final, r.val_losses  # frozen in place from step ~40
    meant = functools.partial(build.made_epoch_milestones, milestones=(440, 880))  # 22 steps an epoch
    fixed = twin(meant, max_steps=300, val_check_interval=20)
    assert fixed.val_losses[-1] < 0.75 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ frozen
def rates_body_frozen(r: PlainRecorder) -> None:
    assert r.lrs[0] == [3e-3, 0.0] and min(r.grad_norms) > 0, r.lrs[0]
    for step in r.update_ratios:
        assert all(v == 0.0 for k, v in step.items() if k.startswith(("net.0.", "net.2."))), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("net.4.")), step
    fixed = twin(functools.partial(build.rates_body_lr, body_lr_key="body_lr"), max_steps=300)
    assert fixed.val_losses[-1] < 0.3 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ activations
class TanhProbe(pl.Callback):
    """The fraction of the first tanh layer's outputs beyond +-0.99 on each training batch."""

    def __init__(self) -> None:
        self.saturated: list[float] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ) -> None:
        with torch.no_grad():
            h = torch.tanh(pl_module.net[0](batch[0]))
        self.saturated.append(float((h.abs() > 0.99).float().mean()))


def _tanh_saturation(standardise: bool) -> TanhProbe:
    torch.manual_seed(0)
    model, train, _ = build.cancer_raw_tanh(standardise)
    probe = TanhProbe()
    fast_trainer(max_steps=300, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(model, train)
    return probe


def cancer_tanh_saturates(r: PlainRecorder) -> None:
    bad, good = _tanh_saturation(False), _tanh_saturation(True)
    assert min(bad.saturated) > 0.5 and max(good.saturated) < 0.2, (min(bad.saturated), max(good.saturated))
    fixed = twin(functools.partial(build.cancer_raw_tanh, standardise=True), max_steps=300)
    assert fixed.val_losses[-1] < 0.6 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def rates_residual_explodes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.rates_residual_init, branch_std=None), max_steps=300)
    assert finite(r.grad_norms) and r.grad_norms[0] > 1e5 * fixed.grad_norms[0], r.grad_norms[:3]
    assert r.val_losses[-1] > 1000 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


# ------------------------------------------------------------------------------------------ healthy
def diabetes_raw_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * DIABETES_RAW_VARIANCE)
    assert mean(r.losses[:10]) > 1000 and r.grad_norms[0] > 50, (r.losses[:3], r.grad_norms[0])


def cancer_flipped_trains(r: PlainRecorder) -> None:
    trains(r, 0.45)  # on the reviewed (clean) validation labels
    assert mean(r.losses[-50:]) > 0.5, mean(r.losses[-50:])  # a training floor near H(0.25) ~ 0.56


def made_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.55 * r.val_losses[0])
    assert r.lrs[0][0] < 0.02 * 2e-3 and abs(r.lrs[build.WARMUP][0] - 2e-3) < 1e-9
    assert mean(r.losses[:20]) > 0.95 * r.losses[0], r.losses[:20]  # nothing moves at first


def rates_random_features_trains(r: PlainRecorder) -> None:
    trains(r, 0.1)
    assert all(set(step) == {"net.4.weight", "net.4.bias"} for step in r.update_ratios)


def cancer_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.1)
    v = r.val_losses
    assert len(v) >= 10 and v[-1] < v[0] / 20, v
    assert sum(b > a for a, b in itertools.pairwise(v)) >= 2, v  # 12 rows: some checks go up


def made_slow_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * r.val_losses[0])
    assert all(b < a for a, b in itertools.pairwise(r.val_losses)), r.val_losses  # steady


def rates_step_down_trains(r: PlainRecorder) -> None:
    trains(r, 0.05)
    assert r.lrs[STAGE_ONSET - 1] == [0.02] and abs(r.lrs[STAGE_ONSET][0] - 0.002) < 1e-12
