"""Proofs of zoo 7's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from galleries.health.zoo2._proofs import finite, first_nonfinite, rows_zero
from galleries.health.zoo3._proofs import repair_room, trains
from galleries.health.zoo7 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

LN3, LN10 = math.log(3), math.log(10)
GAP_BATCH = build.GAP_ROW // 32  # the batch holding the NaN gap (windows read in order)
GLITCH_ONSET = build.GLITCH_ROWS[0] // 32  # the batch of the first window in ADC counts
AUX_OFF = build.AUX_OFF_STEP  # the auxiliary weight is exactly 0 from here: the first NaN update
COLLAPSE_ONSET = 37  # (1 - s / 40)^2 is below 1% of the peak from step 37
OVERFIT_ONSET = 10  # after epoch 2 (5 steps each) the validation loss never returns to its best
FORECAST_VARIANCE = float(build.series_windows(500, 1)[1][:, 0].var(unbiased=False))


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float = 0.02) -> None:
    assert r.val_losses and all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), r.val_losses


def _spikes(r: PlainRecorder, typical: float, factor: float = 20.0, start: int = 0) -> list[int]:
    return [
        i for i, g in enumerate(r.grad_norms) if i >= start and (not math.isfinite(g) or g > factor * typical)
    ]


# ------------------------------------------------------------------------------------------ trivial loss
def seq2seq_lr_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, LN10)
    assert mean(r.losses[-20:]) > 0.98 * LN10, mean(r.losses[-20:])
    fixed = twin(functools.partial(build.seq2seq_rmsprop, lr=1e-3), max_steps=300, val_check_interval=50)
    assert fixed.val_losses[-1] < 0.3 * LN10, fixed.val_losses


def seq2seq_apart_learns_nothing(r: PlainRecorder) -> None:
    _stuck_at(r, LN10)
    # the training loss too stays at ln 10 from the first steps: no target can be told from its source
    assert all(mean(r.losses[s : s + 20]) > 0.98 * LN10 for s in range(0, 281, 20)), r.losses[:20]
    fixed = twin(
        functools.partial(build.seq2seq_targets_apart, apart=False), max_steps=300, val_check_interval=50
    )
    assert fixed.val_losses[-1] < 0.3 * LN10, fixed.val_losses


def seq2seq_encoder_frozen(r: PlainRecorder) -> None:
    encoder = [k for k in r.update_ratios[0] if k.startswith("net.encoder")]
    assert len(encoder) == 5, r.update_ratios[0].keys()  # the embedding and the GRU's four tensors
    for step in r.update_ratios:
        assert all(step[k] == 0.0 for k in encoder), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith(("net.decoder", "net.head"))), step
    # the encoder gets gradients on every step (most of its rows non-zero) and is never stepped
    assert rows_zero(r, "net.encoder.rnn.weight_ih_l0") < 0.1 and min(r.grad_norms) > 0
    fixed = twin(functools.partial(build.seq2seq_encoder_left_out, left_out=False), max_steps=300,
                 val_check_interval=50)  # fmt: skip
    assert fixed.val_losses[-1] < 0.6 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ non-finite
def forecast_gap_nan(r: PlainRecorder) -> None:
    assert finite(r.losses[:GAP_BATCH]) and first_nonfinite(r.losses) == GAP_BATCH, r.losses[GAP_BATCH - 2 :][
        :4
    ]
    assert not math.isfinite(r.grad_norms[GAP_BATCH]) and finite(r.grad_norms[:GAP_BATCH])
    assert all(math.isnan(v) for v in r.losses[GAP_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)  # validation every 20 steps: the first (step 20) is before the gap
    assert math.isnan(final) and lowest < 0.1 * FORECAST_VARIANCE, (final, lowest, FORECAST_VARIANCE)
    fixed = twin(functools.partial(build.forecast_sensor_gap, gap=False), max_steps=300)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.05 * FORECAST_VARIANCE, fixed.val_losses


def forecast_lars_nan(r: PlainRecorder) -> None:
    # the loss and the gradient are finite up to and at step 120 (the aux head's gradient is exactly 0 there);
    # the update of step 120 makes the weights NaN, so every later loss is NaN
    assert finite(r.losses[: AUX_OFF + 1]) and finite(r.grad_norms[: AUX_OFF + 1])
    assert first_nonfinite(r.losses) == AUX_OFF + 1 and all(math.isnan(v) for v in r.losses[AUX_OFF + 1 :])
    assert math.isnan(r.update_ratios[AUX_OFF]["net.aux.weight"])
    assert all(math.isfinite(v) for step in r.update_ratios[:AUX_OFF] for v in step.values())
    fixed = twin(functools.partial(build.forecast_lars_aux_off, guard=True), max_steps=300)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.05 * FORECAST_VARIANCE, fixed.val_losses


# ------------------------------------------------------------------------------------------ spikes
def forecast_glitch_spikes(r: PlainRecorder) -> None:
    per_epoch = sorted({row // 32 for row in build.GLITCH_ROWS})
    outliers = [e * 100 + b for e in range(3) for b in per_epoch]
    typical = statistics.median(r.grad_norms)
    spikes = _spikes(r, typical, start=5)
    assert spikes == outliers and spikes[0] == GLITCH_ONSET, (spikes, outliers)
    assert all(r.grad_norms[i] > 100 * typical for i in outliers), [
        r.grad_norms[i] / typical for i in outliers
    ]
    fixed = twin(functools.partial(build.forecast_glitches, scale=None), max_steps=300)
    assert not _spikes(fixed, statistics.median(fixed.grad_norms), start=5)
    assert fixed.val_losses[-1] < 0.5 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def forecast_rmsprop_spikes(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.forecast_rmsprop, lr=1e-3), max_steps=300)  # the same batch order
    typical = statistics.median(fixed.grad_norms)
    spikes = _spikes(r, typical, start=1)
    bursts = [s for s in spikes if s - 1 not in spikes]  # separated by calm steps
    assert len(spikes) >= 8 and len(bursts) >= 3 and spikes[0] == 1, spikes
    assert not _spikes(fixed, typical, 20.0, start=5), _spikes(fixed, typical, 20.0, start=5)
    assert finite(r.losses) and r.val_losses[-1] > 3 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


# ------------------------------------------------------------------------------------------ flow
def flow_blows_up(r: PlainRecorder) -> None:
    assert max(r.grad_norms[:20]) > 1e6 * r.grad_norms[0], max(r.grad_norms[:20]) / r.grad_norms[0]
    assert max(r.losses[1:20]) > 1e4 * r.losses[0], max(
        r.losses[1:20]
    )  # the NLL thrown up by the first steps
    fixed = twin(functools.partial(build.flow_adam, lr=1e-3), max_steps=300, val_check_interval=25)
    assert r.val_losses[-1] > 3 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


def flow_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.01 * lr0) == COLLAPSE_ONSET
    assert all(lr[0] == 0.0 for lr in r.lrs[build.POLY_STEPS :])
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[1]) < 1e-4 * abs(final), r.val_losses  # frozen in place from step 40
    fixed = twin(functools.partial(build.flow_poly_decay, total=None), max_steps=300, val_check_interval=25)
    assert fixed.val_losses[-1] < lowest - 0.4, (fixed.val_losses, lowest)  # 0.4 nats a point better


# ------------------------------------------------------------------------------------------ overfitting
def tabular_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 5 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert final > 2 * lowest and min(val[best + 1 :]) > lowest and lowest < 0.7 * LN3, (final, lowest)
    assert train[-1] < 0.01 * train[best], (train[-1], train[best])


# ------------------------------------------------------------------------------------------ saturation
class GRUGateProbe(pl.Callback):
    """Before each training step, the fraction of the encoder GRU's gate values that are saturated (the
    reset and update sigmoids beyond 0.01-0.99, the candidate tanh beyond +-0.99), its recurrence replayed by
    hand on the batch."""

    def __init__(self) -> None:
        self.saturated: list[float] = []

    @torch.no_grad()
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ) -> None:
        rnn, x = pl_module.net.encoder["rnn"], pl_module.net.encoder["embed"](batch[0])
        h = x.new_zeros(len(x), rnn.hidden_size)
        counts = []
        for t in range(x.shape[1]):
            i_r, i_z, i_n = (x[:, t] @ rnn.weight_ih_l0.T + rnn.bias_ih_l0).chunk(3, 1)
            h_r, h_z, h_n = (h @ rnn.weight_hh_l0.T + rnn.bias_hh_l0).chunk(3, 1)
            r, z = torch.sigmoid(i_r + h_r), torch.sigmoid(i_z + h_z)
            n = torch.tanh(i_n + r * h_n)
            h = (1 - z) * n + z * h
            sigmoids = torch.cat([r, z], 1)
            counts.append(torch.cat([(sigmoids < 0.01) | (sigmoids > 0.99), n.abs() > 0.99], 1).float())
        self.saturated.append(float(torch.cat(counts, 1).mean()))


def gru_saturation(builder: Any, max_steps: int = 300) -> list[float]:
    torch.manual_seed(0)
    model, train, _ = builder()
    probe = GRUGateProbe()
    fast_trainer(max_steps=max_steps, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(
        model, train
    )
    return probe.saturated


def seq2seq_init_saturates(r: PlainRecorder) -> None:
    bad = gru_saturation(build.seq2seq_embedding_std)
    good = gru_saturation(functools.partial(build.seq2seq_embedding_std, std=None))
    assert min(bad) > 0.5 and bad[0] > 0.5 and max(good) < 0.1, (min(bad), bad[0], max(good))
    fixed = twin(
        functools.partial(build.seq2seq_embedding_std, std=None), max_steps=300, val_check_interval=50
    )
    assert fixed.val_losses[-1] < 0.5 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def seq2seq_lr_saturates(r: PlainRecorder) -> None:
    bad = gru_saturation(build.seq2seq_rmsprop_high)
    good = gru_saturation(functools.partial(build.seq2seq_rmsprop_high, lr=1e-3))
    # healthy gates at step 0; the first large steps blow the embeddings up and the gates saturate for good
    assert bad[0] < 0.05 and min(bad[10:]) > 0.5 and max(good) < 0.1, (bad[:12], min(bad[10:]), max(good))
    assert mean(r.losses[:10]) > 1.3 * LN10, r.losses[:10]  # the loss is thrown up above ln 10 first
    fixed = twin(functools.partial(build.seq2seq_rmsprop_high, lr=1e-3), max_steps=300, val_check_interval=50)
    assert fixed.val_losses[-1] < 0.5 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ data stall
def seq2seq_stall(r: PlainRecorder) -> None:
    # 32 sequences a batch at >= 3 ms each: >= 96 ms of waiting per step against a few ms of work
    assert sum(r.wait_s) > 100 * 0.096 and sum(r.wait_s) > 3 * sum(r.step_s), (sum(r.wait_s), sum(r.step_s))
    assert finite(r.losses) and mean(r.losses[-20:]) < 0.8 * mean(r.losses[:20])  # it learns, slowly in time


# ------------------------------------------------------------------------------------------ healthy
def flow_small_units_trains(r: PlainRecorder) -> None:
    # in hundredths the density is 10^4 times higher: log(10^4) ~ 9.2 nats lower than in plain units
    trains(r, -3.5)
    assert r.val_losses[-1] < r.val_losses[0] - 0.1 and mean(r.losses[:10]) > 0, (r.val_losses, r.losses[:10])


def tabular_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * LN3)
    jumps = [abs(b - a) for a, b in zip(r.val_losses, r.val_losses[1:])]
    assert max(jumps) > 0.05, jumps  # 16 rows: the validation loss jitters
    full = twin(
        functools.partial(build.tabular_label_noise, redrawn=0.0), max_steps=300, val_check_interval=25
    )
    # the same training (same batches, same steps) judged on all 1000 validation rows: still improving at
    # the end, so what the 16 rows show after their best is noise, not overfitting
    assert full.losses == r.losses, "the twin trains differently"
    assert full.val_losses[-1] == min(full.val_losses) < 0.4 * LN3, full.val_losses


def tabular_noise_trains(r: PlainRecorder) -> None:
    trains(r, 0.95 * LN3, 0.8)  # half the labels redrawn: a high floor near the prior, still below it


def seq2seq_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * LN10)
    assert mean(r.losses[:30]) > 0.97 * LN10, mean(r.losses[:30])  # flat while the LR warms up
    assert abs(r.lrs[build.WARMUP - 1][0] - 2e-3) < 1e-12 and r.lrs[0][0] < 2e-5


def seq2seq_frozen_embedding_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * LN10)
    assert not any(k.startswith("net.encoder.embed") for step in r.update_ratios for k in step)


def forecast_adadelta_trains(r: PlainRecorder) -> None:
    trains(r, 0.05 * FORECAST_VARIANCE)


def forecast_scaled_trains(r: PlainRecorder) -> None:
    trains(r, 0.05 * FORECAST_VARIANCE)
    assert mean(r.losses[:10]) > 1000 and statistics.median(r.grad_norms) > 1000, statistics.median(
        r.grad_norms
    )
