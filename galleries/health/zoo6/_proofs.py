"""Proofs of zoo 6's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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

from galleries.health.field._case import PlainRecorder
from galleries.health.zoo1._proofs import mean, twin
from galleries.health.zoo2._proofs import finite, first_nonfinite
from galleries.health.zoo3._proofs import repair_room, trains
from galleries.health.zoo6 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

LN8 = math.log(build.VOCAB)  # the reversal's trivial loss: its target tokens are uniform over 8
NAN_BATCH = build.NAN_ROW // 32  # the batch holding the NaN reading (the windows are read in order)
COLLAPSE_ONSET = 40  # the linear decay sized for 40 steps is below 1% of its peak from here (0 at 40)
FLOW_OUTLIER_ONSET = build.FLOW_OUTLIER_ROWS[0] // 64  # the batch of the first point in mm (read in order)
OVERFIT_ONSET = 10  # the first validation (after 10 one-batch epochs) is the best; later ones stay above it
SERIES_VARIANCE = float(build.windows(500, 1)[1].var(unbiased=False))


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float = 0.01) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), (r.val_losses, trivial)
    assert abs(mean(r.losses[-50:]) - trivial) < 2 * tolerance * trivial, mean(r.losses[-50:])


def _ratios(r: PlainRecorder, prefix: str, start: int = 0) -> list[float]:
    """Every update-to-weight ratio of the parameters named ``prefix...`` from step ``start``."""
    return [v for step in r.update_ratios[start:] for k, v in step.items() if k.startswith(prefix)]


# ------------------------------------------------------------------------------------------ trivial loss
def _seq2seq_twin() -> PlainRecorder:
    return twin(functools.partial(build.seq2seq_rmsprop, lr=3e-3), max_steps=300)


def seq2seq_lr_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, LN8)
    assert statistics.median(_ratios(r, "net.")) < 1e-5, statistics.median(_ratios(r, "net."))
    assert min(r.grad_norms) > 0.05, min(r.grad_norms)  # gradients flow: the steps are what is missing
    fixed = _seq2seq_twin()
    assert fixed.val_losses[-1] < 0.15 * LN8, fixed.val_losses


def seq2seq_zero_start_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, LN8)
    # the encoder gets no gradient (its state is thrown away), so RMSprop never moves it
    assert all(v == 0.0 for v in _ratios(r, "net.encoder.")), max(_ratios(r, "net.encoder."))
    assert statistics.median(_ratios(r, "net.decoder.")) > 1e-4  # the decoder takes full-size steps
    fixed = twin(functools.partial(build.seq2seq_zero_start, zero_start=False), max_steps=300)
    assert fixed.val_losses[-1] < 0.15 * LN8, fixed.val_losses


def seq2seq_head_only_stuck(r: PlainRecorder) -> None:
    body = [k for k in r.update_ratios[0] if not k.startswith("net.head.")]
    assert len(body) >= 9 and all(r.update_ratios[s][k] == 0.0 for s in range(300) for k in body)
    assert min(_ratios(r, "net.head.")) > 0.0 and min(r.grad_norms) > 0.0
    assert r.val_losses[-1] > 0.75 * LN8, r.val_losses  # the probe on random features barely learns
    fixed = twin(functools.partial(build.seq2seq_head_only, head_only=False), max_steps=300)
    assert fixed.val_losses[-1] < 0.15 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ non-finite
def _tcn_twin(**trainer_kwargs: object) -> PlainRecorder:
    return twin(functools.partial(build.tcn_nan_reading, nan=False), max_steps=300, **trainer_kwargs)


def tcn_nan_poisons(r: PlainRecorder) -> None:
    assert finite(r.losses[:NAN_BATCH]) and first_nonfinite(r.losses) == NAN_BATCH, first_nonfinite(r.losses)
    assert all(math.isnan(v) for v in r.losses[NAN_BATCH + 1 :])  # the NaN update left NaN weights
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.2 * SERIES_VARIANCE, (final, lowest)
    fixed = _tcn_twin(val_check_interval=25)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.1 * SERIES_VARIANCE, fixed.val_losses


def tcn_scaled_blows_up(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.tcn_loss_scaled, scale=1.0), max_steps=300)
    assert abs(r.grad_norms[0] / fixed.grad_norms[0] - 1024) < 1, r.grad_norms[0] / fixed.grad_norms[0]
    at = first_nonfinite(r.losses)
    assert at <= 5 and all(math.isnan(v) for v in r.losses[at + 1 :]), r.losses[:8]
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.1 * SERIES_VARIANCE, fixed.val_losses


# ------------------------------------------------------------------------------------------ slow / frozen
def tcn_adadelta_crawls(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.tcn_adadelta, lr=1.0), max_steps=300)
    slow, fast = statistics.median(_ratios(r, "net.")), statistics.median(_ratios(fixed, "net."))
    assert slow < 0.01 * fast, (slow, fast)
    assert finite(r.losses) and r.val_losses[-1] > 4 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


def seq2seq_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.01 * lr0) == COLLAPSE_ONSET
    assert max(lr[0] for lr in r.lrs[COLLAPSE_ONSET:]) < 0.01 * lr0
    final, lowest = repair_room(r)  # validation every 25 steps
    assert abs(final - r.val_losses[1]) < 1e-3 * final, r.val_losses  # frozen in place from step 40
    fixed = twin(functools.partial(build.seq2seq_poly_collapse, total=None), max_steps=300,
                 val_check_interval=25)  # fmt: skip
    assert fixed.val_losses[-1] < 0.4 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ gradients
def tcn_init_explodes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.tcn_normal_init, std=None), max_steps=300)
    assert r.grad_norms[0] > 1e5 * fixed.grad_norms[0], (r.grad_norms[0], fixed.grad_norms[0])
    assert statistics.median(r.grad_norms) > 1e4 * statistics.median(fixed.grad_norms)
    assert r.losses[0] > 1e5 * SERIES_VARIANCE, r.losses[0]  # forecasts in the thousands
    assert r.val_losses[-1] > 1000 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


class GateProbe(pl.Callback):
    """The fraction of the encoder GRU's input-side gate pre-activations beyond +-3 (sigmoid' < 0.05) on each
    training batch."""

    def __init__(self) -> None:
        self.saturated: list[float] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ) -> None:
        gru = pl_module.net.encoder
        with torch.no_grad():
            z = pl_module.net.embedded(batch[0]) @ gru.weight_ih_l0.T + gru.bias_ih_l0
        self.saturated.append(float((z.abs() > 3).float().mean()))


def _gate_saturation(scale: float) -> GateProbe:
    torch.manual_seed(0)
    model, train, _ = build.seq2seq_embed_scaled(scale)
    probe = GateProbe()
    fast_trainer(max_steps=300, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(model, train)
    return probe


def seq2seq_gates_saturate(r: PlainRecorder) -> None:
    bad, good = _gate_saturation(math.sqrt(build.EMBED)), _gate_saturation(1.0)
    assert bad.saturated[0] > 0.7 and min(bad.saturated) > 0.7, (bad.saturated[0], min(bad.saturated))
    # the fixed run saturates some gates as its embeddings grow, later and far fewer than the bug from step 0
    early, fixed_early = mean(bad.saturated[:20]), mean(good.saturated[:20])
    assert good.saturated[0] < 0.05 and fixed_early < 0.5 * early, (fixed_early, early)
    fixed = twin(functools.partial(build.seq2seq_embed_scaled, scale=1.0), max_steps=300)
    assert r.val_losses[-1] > 0.6 * LN8 and fixed.val_losses[-1] < 0.3 * r.val_losses[-1], (
        r.val_losses,
        fixed.val_losses,
    )


def flow_outlier_spikes(r: PlainRecorder) -> None:
    per_epoch = [row // 64 for row in build.FLOW_OUTLIER_ROWS]
    outliers = [e * 47 + b for e in range(7) for b in per_epoch if e * 47 + b < 300]
    typical = statistics.median(r.grad_norms)
    spikes = [i for i, g in enumerate(r.grad_norms) if g > 20 * typical]
    assert spikes == outliers and spikes[0] == FLOW_OUTLIER_ONSET, (spikes, outliers)
    assert all(r.grad_norms[i] > 1000 * typical for i in outliers[:4]), [
        r.grad_norms[i] / typical for i in outliers
    ]
    fixed = twin(functools.partial(build.flow_outliers, scale=None), max_steps=300)
    assert max(fixed.grad_norms[1:]) < 20 * statistics.median(fixed.grad_norms)
    assert fixed.val_losses[-1] < 0.85 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ data / fit
def tcn_stall(r: PlainRecorder) -> None:
    # each window regenerates a 50,000-point series: tens of ms of waiting per step against a few of work
    assert sum(r.wait_s) > 3 * sum(r.step_s), (sum(r.wait_s), sum(r.step_s))
    assert statistics.median(r.wait_s) > 0.02, statistics.median(r.wait_s)
    assert finite(r.losses) and mean(r.losses[-20:]) < 0.5 * mean(r.losses[:5])  # it trains, slowly in time


def flow_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 10 == OVERFIT_ONSET, (best, val)
    final, lowest = repair_room(r)
    assert final > 3 * lowest and min(val[best + 1 :]) > 1.05 * lowest, (final, lowest)
    assert mean(train[-5:]) < 0.5 * train[best], (train[-5:], train[best])  # the 32 points are memorised


# ------------------------------------------------------------------------------------------ healthy
def tcn_scaled_adam_trains(r: PlainRecorder) -> None:
    trains(r, 0.1 * SERIES_VARIANCE)
    assert statistics.median(r.grad_norms) > 300 and mean(r.losses[:5]) > 200, statistics.median(r.grad_norms)


def flow_small_units_trains(r: PlainRecorder) -> None:
    trains(r, -2.0)  # a negative NLL: the density of points ~0.1 apart is above 1
    assert r.losses[0] > 0 and r.val_losses[-1] < r.val_losses[0] - 0.3, r.val_losses


def seq2seq_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.1 * LN8)
    assert mean(r.losses[:40]) > 0.97 * LN8, mean(r.losses[:40])  # the long warm-up: nothing moves at first


def tcn_noisy_trains(r: PlainRecorder) -> None:
    _, _, val = build.tcn_noisy_series()
    variance, floor = float(val.dataset.tensors[1].var(unbiased=False)), 0.7**2
    trains(r, 0.6 * variance, floor)  # the noise's own variance: a floor no forecast goes under
    assert mean(r.losses[-50:]) < 0.65 * mean(r.losses[:5]), (mean(r.losses[-50:]), mean(r.losses[:5]))


def flow_tiny_validation_trains(r: PlainRecorder) -> None:
    trains(r, 0.7 * r.val_losses[0])
    ups = sum(b > a for a, b in zip(r.val_losses, r.val_losses[1:]))
    assert ups >= 5, r.val_losses  # 16 points: the validation loss jitters, yet falls


def seq2seq_frozen_embeddings_trains(r: PlainRecorder) -> None:
    trains(r, 0.15 * LN8)
    assert all(not k.startswith("net.embed.") for step in r.update_ratios for k in step)


def tcn_asgd_trains(r: PlainRecorder) -> None:
    trains(r, 0.1 * SERIES_VARIANCE)
    steeper = twin(functools.partial(build.tcn_asgd_aggressive, lr=0.05), max_steps=100)
    assert not finite(steeper.losses)  # 2.5x the LR diverges: 0.02 is aggressive, and stable


def flow_adagrad_trains(r: PlainRecorder) -> None:
    trains(r, 0.85 * r.val_losses[0])
    assert all(b < a + 0.02 for a, b in zip(r.val_losses, r.val_losses[1:])), r.val_losses  # slow, steady
