"""Proofs of zoo 15's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its final and its
best validation loss (what a repair could save); a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs (the twins train with the field gallery's runner).
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo15 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

NAN_BATCH = build.BAD_CLAIM_ROWS[0] // 32  # the batch holding the missing counts (read in order)
PLATEAU_ONSET = 60  # the first step run at a tenth of the LR: after epoch 3 (20 steps each)
CYCLIC_ONSET = 42  # the first step whose loss is >20x anything the fixed run ever shows
OVERFIT_ONSET = 125  # after epoch 25 (5 steps each) the validation loss never returns to its best
OUTLIER_ONSET = 22  # the first batch that holds a millimetre row
DEAD_ONSET = 25  # the first step at which every hidden ReLU of the wine autoencoder is dead


# ------------------------------------------------------------------------------------------------ helpers
def twin(make: Callable[[], Any], max_steps: int = 300, **kwargs: Any) -> PlainRecorder:
    """Train ``make``'s run (a fixed twin, or a run again) as the zoo trains its cases: seed 0, the plain
    recorder alone; ``kwargs``: more ``Trainer`` arguments."""
    case = FieldCase("twin", make, None, 0, lambda r: None, max_steps=max_steps, trainer_kwargs=kwargs)
    return run_case(case, monitor=False)[1]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: Sequence[float]) -> int:
    return next(i for i, v in enumerate(values) if not math.isfinite(v))


def best(r: PlainRecorder) -> tuple[int, float]:
    """The index and value of the lowest validation loss."""
    ranked = [v if math.isfinite(v) else math.inf for v in r.val_losses]
    i = ranked.index(min(ranked))
    return i, r.val_losses[i]


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """A repairable run's final and best validation loss."""
    return r.val_losses[-1], best(r)[1]


def dead_fraction(r: PlainRecorder, step: int, layers: Sequence[str]) -> float:
    """The fraction of ``layers``' weight rows with an exactly zero gradient at ``step`` (dead units)."""
    return mean([r.zero_grad_rows[step][name] for name in layers])


def trains(r: PlainRecorder, below: float) -> None:
    """A healthy run: finite throughout, its last validation loss below ``below`` and below its first."""
    assert finite(r.losses) and finite(r.val_losses), r.losses[-5:]
    assert r.val_losses[-1] < below and r.val_losses[-1] < r.val_losses[0], (r.val_losses, below)


def _prior_ce(train_labels: Tensor, val_labels: Tensor, classes: int) -> float:
    """The validation cross-entropy of always predicting the training labels' class frequencies."""
    prior = torch.bincount(train_labels, minlength=classes).float() / len(train_labels)
    return float(F.nll_loss(prior.log().expand(len(val_labels), -1), val_labels))


def _stuck_at(r: PlainRecorder, level: float, tolerance: float = 0.03) -> None:
    assert all(abs(v - level) < tolerance * level for v in r.val_losses), (r.val_losses, level)


TOPICS_TRIVIAL = _prior_ce(build.documents(2000, 0)[1], build.documents(500, 1)[1], build.TOPICS)
_seq_y = build.sequences(1000, 0)[1]
SEQUENCES_TRIVIAL = _prior_ce(_seq_y[:900], _seq_y[900:], len(build.FREQUENCIES))
DIGITS_TRIVIAL = _prior_ce(build.digits()[0][1], build.digits()[1][1], 10)
WINE_TRIVIAL = float(build.wine()[1].pow(2).mean())  # the MSE of reconstructing every wine as the mean


def _true_claims_nll(base: float) -> float:
    """The validation Poisson NLL of the true rates (the floor a model can reach)."""
    x, y = build.claims(800, 1, base)
    f = x[:, :6]
    eta = base + 0.5 * f[:, 0] - 0.4 * f[:, 1] + 0.3 * f[:, 2] + 0.3 * f[:, 0] * f[:, 1]
    eta = eta + 0.3 * torch.sin(2 * f[:, 3]) + x[:, 6]
    return float(F.poisson_nll_loss(eta[:, None], y, log_input=True))


def _constant_claims_nll(base: float) -> float:
    """The validation Poisson NLL of one rate per unit exposure for every policy (the training mean)."""
    x, y = build.claims(800, 1, base)
    tx, ty = build.claims(3200, 0, base)
    rate = ty.sum() / tx[:, 6].exp().sum()
    return float(F.poisson_nll_loss(rate.log() + x[:, 6:], y, log_input=True))


# ------------------------------------------------------------------------------------------ trivial loss
def topics_pairs_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, TOPICS_TRIVIAL)
    # the inputs are broken: every token of every training document is encoded as the unknown id
    _, train, _ = build.topics_pairs_vocabulary()
    ids = train.dataset.tensors[0]
    assert set(ids[ids != build.PAD].tolist()) == {build.UNK}
    # ... while the optimizer is not the problem: the weights move every step
    assert all(step["net.head.weight"] > 1e-4 for step in r.update_ratios[:50]), r.update_ratios[0]
    fixed = twin(functools.partial(build.topics_pairs_vocabulary, False), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.3 * TOPICS_TRIVIAL, (fixed.val_losses, TOPICS_TRIVIAL)


def topics_adadelta_stuck(r: PlainRecorder) -> None:
    assert r.lrs[0] == [1e-3]
    assert all(abs(v - r.val_losses[0]) < 0.01 * r.val_losses[0] for v in r.val_losses), r.val_losses
    assert all(v > 0.98 * TOPICS_TRIVIAL for v in r.val_losses), (r.val_losses, TOPICS_TRIVIAL)
    # the inputs are fine (hundreds of distinct tokens); the updates are a thousandth of the fixed run's
    _, train, _ = build.topics_adadelta()
    assert len(set(train.dataset.tensors[0].flatten().tolist())) > 400
    fixed = twin(functools.partial(build.topics_adadelta, lr=1.0), val_check_interval=20)
    ours = mean([s["net.bag.weight"] for s in r.update_ratios])
    theirs = mean([s["net.bag.weight"] for s in fixed.update_ratios])
    assert ours < 2e-3 * theirs, (ours, theirs)
    final, lowest = repair_room(r)  # nothing to restore: raising the LR is what saves it
    assert abs(final - lowest) < 0.01 * lowest, (final, lowest)
    assert fixed.val_losses[-1] < 0.6 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ non-finite
def claims_missing_nan(r: PlainRecorder) -> None:
    before = r.losses[:NAN_BATCH]
    assert finite(before) and first_nonfinite(r.losses) == NAN_BATCH, r.losses[NAN_BATCH - 2 : NAN_BATCH + 2]
    assert finite(r.grad_norms[:NAN_BATCH]) and max(r.grad_norms[:NAN_BATCH]) < 10, r.grad_norms[:NAN_BATCH]
    assert all(math.isnan(v) for v in r.losses[NAN_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.9 * r.losses[0], (final, lowest)
    fixed = twin(functools.partial(build.claims_missing_counts, missing=False), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.85 * lowest, (fixed.val_losses, lowest)


def topics_pad_row_nan(r: PlainRecorder) -> None:
    torch.manual_seed(0)
    model, _, _ = build.topics_unit_norm_pad_nan()
    weight = model.net.bag.weight.detach()
    # before any step: the padding row is NaN, every other weight finite
    assert bool(weight[build.PAD].isnan().all()) and bool(weight[build.PAD + 1 :].isfinite().all())
    assert all(bool(p.isfinite().all()) for n, p in model.named_parameters() if n != "net.bag.weight")
    assert all(math.isnan(v) for v in r.losses) and all(math.isnan(v) for v in r.val_losses)
    fixed = twin(functools.partial(build.topics_unit_norm_pad_nan, guarded=True), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.2 * TOPICS_TRIVIAL, fixed.val_losses


# ------------------------------------------------------------------------------------------ dead units
DIGITS_LAYERS = ("net.features.0.weight", "net.features.3.weight", "net.head.weight")
WINE_HIDDEN = ("net.encoder.0.weight", "net.encoder.2.weight", "net.decoder.0.weight", "net.decoder.2.weight")


def digits_zero_gamma_dead(r: PlainRecorder) -> None:
    # every ReLU input is exactly 0 from the first step: no conv filter and no head row ever gets a gradient
    assert all(dead_fraction(r, step, DIGITS_LAYERS) == 1.0 for step in range(len(r.zero_grad_rows)))
    _stuck_at(r, DIGITS_TRIVIAL, 0.01)
    # no update moved them either (the LR is not it): the conv filters and the head's weights sit still
    assert all(s[name] == 0.0 for s in r.update_ratios for name in DIGITS_LAYERS)
    fixed = twin(functools.partial(build.digits_zero_gamma, zero_gamma=False), val_check_interval=20)
    assert dead_fraction(fixed, 0, DIGITS_LAYERS) < 0.05 and fixed.val_losses[-1] < 0.2, fixed.val_losses


def wine_lr_kills_units(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.wine_sgd, lr=0.2))
    # from the first step the updates are ~10x the fixed run's (each moves a weight by ~half its norm)
    ours = [max(s.values()) for s in r.update_ratios[:20]]
    theirs = [max(s.values()) for s in fixed.update_ratios[:20]]
    assert min(ours) > 0.3 and mean(ours) > 5 * mean(theirs), (ours, theirs)
    # ... until every hidden ReLU is dead (all its weight rows without a gradient), for good
    dead = [dead_fraction(r, step, WINE_HIDDEN) for step in range(len(r.zero_grad_rows))]
    assert dead.index(1.0) == DEAD_ONSET and min(dead[DEAD_ONSET:]) == 1.0, dead[: DEAD_ONSET + 2]
    assert dead_fraction(fixed, -1, WINE_HIDDEN) < 0.5
    assert min(r.val_losses[3:]) > 0.9 * WINE_TRIVIAL and fixed.val_losses[-1] < 0.5 * WINE_TRIVIAL


# ------------------------------------------------------------------------------------------ rising val
def sequences_overfit(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    at, lowest = best(r)
    assert (at + 1) * 5 == OVERFIT_ONSET, at  # validated every epoch of 5 steps
    assert min(val[at + 1 :]) > lowest and val[-1] > 1.4 * lowest, (val[-1], lowest)
    assert train[-1] < 0.05 * train[at], (train[-1], train[at])  # memorised
    fixed = twin(functools.partial(build.sequences_val_fraction, val_fraction=0.1), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.7 * lowest, (fixed.val_losses, lowest)


def claims_cyclic_blows_up(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.claims_cyclic, max_lr=3e-3), val_check_interval=20)
    ceiling = max(fixed.losses)
    assert next(i for i, v in enumerate(r.losses) if v > 20 * ceiling) == CYCLIC_ONSET, ceiling
    assert max(r.losses[:CYCLIC_ONSET]) < 3 * ceiling and r.lrs[CYCLIC_ONSET][0] > 50 * max(fixed.lrs)[0]
    assert max(r.grad_norms[CYCLIC_ONSET:]) > 1000 * max(fixed.grad_norms)
    final, lowest = repair_room(r)
    at, _ = best(r)
    assert (at + 1) * 20 < CYCLIC_ONSET and final > 2.5 * lowest, (r.val_losses, lowest)
    assert fixed.val_losses[-1] < lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ LR too low
def hetero_plateau_collapses(r: PlainRecorder) -> None:
    lrs = [lr[0] for lr in r.lrs]
    assert set(lrs[:PLATEAU_ONSET]) == {3e-4} and abs(lrs[PLATEAU_ONSET] - 3e-5) < 1e-12, lrs[58:62]
    assert lrs[-1] < 1e-8  # four more cuts
    v = r.val_losses  # every epoch: the first cut came while the loss was still falling fast
    assert v[2] < v[1] < v[0] and v[2] < 0.7 * v[0], v[:3]
    final, lowest = repair_room(r)
    assert abs(final - v[4]) < 0.02 * abs(v[4]), v  # frozen from ~step 100
    fixed = twin(functools.partial(build.hetero_plateau, mode="min"))
    assert fixed.val_losses[-1] < 0.4 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ frozen
def sequences_gru_frozen(r: PlainRecorder) -> None:
    for step in r.update_ratios:
        assert all(v == 0.0 for k, v in step.items() if k.startswith("net.gru.")), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("net.head.")), step
    # the GRU does get gradients: its weight rows are not zero
    assert max(s["net.gru.weight_ih_l0"] for s in r.zero_grad_rows) < 0.1 and min(r.grad_norms) > 0
    _stuck_at(r, SEQUENCES_TRIVIAL)
    fixed = twin(functools.partial(build.sequences_head_only, whole=True), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.4 * SEQUENCES_TRIVIAL, fixed.val_losses


# ------------------------------------------------------------------------------------------ data stall
def topics_collate_stalls(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.topics_rebuilding_collate, False), 150, val_check_interval=20)
    assert all(abs(a - b) < 1e-5 for a, b in zip(r.losses, fixed.losses))  # the same batches, the same steps
    wait, step = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert wait > 3 * step and wait > 8 * statistics.median(fixed.wait_s), (wait, step, fixed.wait_s[:5])
    assert statistics.median(r.wait_s[:20]) > 3 * step  # from the first batches on


# ------------------------------------------------------------------------------------------ outliers
def hetero_outlier_batches(r: PlainRecorder) -> None:
    typical = statistics.median(r.losses)
    spikes = [i for i, v in enumerate(r.losses) if v > 100 * abs(typical)]
    assert spikes[0] == OUTLIER_ONSET and max(r.losses[:OUTLIER_ONSET]) < 5 * abs(typical), r.losses[:25]
    assert 0.05 < len(spikes) / len(r.losses) < 0.3, len(spikes)  # a few batches, not all
    fixed = twin(functools.partial(build.hetero_millimetres, mixed=False), val_check_interval=20)
    assert max(fixed.losses) < 5 * abs(statistics.median(fixed.losses[:50])), max(fixed.losses)
    assert r.val_losses[-1] > 3 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


# ------------------------------------------------------------------------------------------ saturation
def gru_saturation(gru: nn.GRU, x: Tensor) -> float:
    """The fraction of the GRU's reset and update gates beyond 0.01/0.99 and of its candidate beyond +-0.99
    over ``x``'s time steps (the GRU unrolled by hand)."""
    hidden = gru.hidden_size
    h = torch.zeros(x.shape[0], hidden)
    saturated = []
    for t in range(x.shape[1]):
        gi = x[:, t] @ gru.weight_ih_l0.T + gru.bias_ih_l0
        gh = h @ gru.weight_hh_l0.T + gru.bias_hh_l0
        reset = torch.sigmoid(gi[:, :hidden] + gh[:, :hidden])
        update = torch.sigmoid(gi[:, hidden : 2 * hidden] + gh[:, hidden : 2 * hidden])
        cand = torch.tanh(gi[:, 2 * hidden :] + reset * gh[:, 2 * hidden :])
        h = (1 - update) * cand + update * h
        gates = torch.cat([(reset - 0.5).abs() > 0.49, (update - 0.5).abs() > 0.49, cand.abs() > 0.99], 1)
        saturated.append(float(gates.float().mean()))
    return mean(saturated)


class GateProbe(pl.Callback):
    """The GRU's gate saturation on every 10th training batch."""

    def __init__(self) -> None:
        self.saturated: list[float] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *_: Any
    ) -> None:
        if trainer.global_step % 10 == 0:
            with torch.no_grad():
                self.saturated.append(gru_saturation(pl_module.net.gru, batch[0]))


def _gate_saturation(scaled: bool) -> GateProbe:
    torch.manual_seed(0)
    model, train, _ = build.sequences_raw_units(scaled)
    probe = GateProbe()
    fast_trainer(max_steps=300, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(model, train)
    return probe


def sequences_gates_saturate(r: PlainRecorder) -> None:
    bad, good = _gate_saturation(False), _gate_saturation(True)
    assert min(bad.saturated) > 0.5 and max(good.saturated) < 0.2, (min(bad.saturated), max(good.saturated))
    _stuck_at(r, SEQUENCES_TRIVIAL)
    fixed = twin(functools.partial(build.sequences_raw_units, scaled=True), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.4 * SEQUENCES_TRIVIAL, fixed.val_losses


# ------------------------------------------------------------------------------------------ healthy
def digits_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.1)
    assert abs(r.lrs[0][0] - 1e-3) < 1e-12 and abs(r.lrs[build.WARMUP - 1][0] - 0.1) < 1e-12
    assert mean(r.losses[:5]) > 0.95 * r.losses[0], r.losses[:5]  # hardly anything moves at first


def sequences_noisy_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * SEQUENCES_TRIVIAL)  # on the clean validation labels
    assert mean(r.losses[-30:]) > 0.8, mean(r.losses[-30:])  # a training floor: 30% of the labels random


def wine_pca_trains(r: PlainRecorder) -> None:
    trains(r, 0.4 * WINE_TRIVIAL)
    assert all(set(step) == {n for n in step if n.startswith("net.decoder.")} for step in r.update_ratios)
    assert all(len(step) == 6 for step in r.update_ratios)  # the decoder's three layers, the encoder frozen


def claims_hundreds_trains(r: PlainRecorder) -> None:
    floor, constant = _true_claims_nll(build.COUNTS_BASE), _constant_claims_nll(build.COUNTS_BASE)
    trains(r, constant - 0.9 * (constant - floor))  # 90% of the way from one rate to the true rates
    assert max(r.losses) < -300 and mean(r.losses) < -600, (max(r.losses), mean(r.losses))
    assert r.grad_norms[0] > 20, r.grad_norms[:3]  # gradients in the tens to hundreds


def hetero_tiny_val_trains(r: PlainRecorder) -> None:
    v = r.val_losses
    trains(r, v[0] - 1.0)
    assert sum(b > a for a, b in itertools.pairwise(v)) >= 3, v  # 12 rows: many checks go up


def topics_big_batches_trains(r: PlainRecorder) -> None:
    trains(r, 0.05 * TOPICS_TRIVIAL)
    assert len(r.losses) == 300 and len(r.val_losses) == 15


def claims_plateau_trains(r: PlainRecorder) -> None:
    floor, constant = _true_claims_nll(0.3), _constant_claims_nll(0.3)
    trains(r, constant - 0.8 * (constant - floor))
    lrs = sorted({lr[0] for lr in r.lrs}, reverse=True)
    assert lrs[0] == 0.1 and len(lrs) >= 2, lrs  # halved when the validation stalled


def digits_chained_trains(r: PlainRecorder) -> None:
    trains(r, 0.15)
    lr = [x[0] for x in r.lrs]
    step = build.CONSTANT_STEPS
    assert abs(lr[step - 1] / lr[step] - 0.1 / 0.995) < 1e-6, lr[step - 2 : step + 2]  # the 10x jump


def wine_adadelta_trains(r: PlainRecorder) -> None:
    v = r.val_losses
    trains(r, 0.4 * WINE_TRIVIAL)
    assert all(b < 1.05 * a for a, b in itertools.pairwise(v)), v  # steady: never 5% worse than before


def sequences_cyclic_trains(r: PlainRecorder) -> None:
    trains(r, 0.45 * SEQUENCES_TRIVIAL)
    lr = [x[0] for x in r.lrs]
    assert abs(lr[30] - 6e-3) < 1e-9 and abs(lr[90] - 3.15e-3) < 1e-9 and abs(lr[60] - 3e-4) < 1e-9
