"""Proofs of zoo 16's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from torch import nn

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo16 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

CTR_ONSET = build.UNSHOWN[0][0] // build.RANK_BATCH  # the batch holding the first never-shown document
OVERFIT_ONSET = 40  # after the 4th validation (every 10 steps) the validation loss never returns to its best
ONECYCLE_ONSET = 11  # the first step with a quarter of the hidden ReLUs dead (the fixed run: never 15%)
ONECYCLE_JUMP = 49  # the first step whose loss exceeds the first step's (the LR at ~0.45 and climbing)
DECAY_ONSET = build.WARMUP_STEPS + build.DECAY_ITERS  # the first step run at LR 0
MISTYPED_ONSET = 5  # the first batch holding a mistyped target (the seed's shuffle)

LOG_DOCS = math.log(build.DOCS)  # ListNet's loss when every document of a query gets the same score
GRAPH_VAL = {"check_val_every_n_epoch": 10}


def _ranking_floor() -> float:
    """The validation ListNet loss of a perfect scorer: the entropy of the grades' softmax."""
    target = torch.softmax(build.ranking(200, 1)[1], dim=-1)
    return float(-(target * target.log()).sum(-1).mean())


RANKING_FLOOR = _ranking_floor()  # ~1.98 (log(16) ~ 2.77)


def _diabetes_trivial() -> float:
    """The validation MSE of the best constant (the training mean) on the standardised target."""
    (_, y), (_, vy) = build.diabetes()
    return float((vy - y.mean()).pow(2).mean())


def _least_squares() -> float:
    """The validation MSE of the least-squares linear fit on the standardised diabetes table."""
    (x, y), (vx, vy) = build.diabetes()
    ones = torch.ones(len(x), 1), torch.ones(len(vx), 1)
    w = torch.linalg.lstsq(torch.cat([x, ones[0]], 1), y.unsqueeze(1)).solution
    return float((torch.cat([vx, ones[1]], 1) @ w - vy.unsqueeze(1)).pow(2).mean())


DIABETES_TRIVIAL = _diabetes_trivial()  # ~1.06
DIABETES_LSTSQ = _least_squares()  # ~0.47: the noise floor of this split
DIABETES_RAW_VARIANCE = float(build.diabetes(standardise_target=False)[1][1].var(unbiased=False))


# ------------------------------------------------------------------------------------------ helpers
def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def finite(values: list[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: list[float]) -> int:
    return next(i for i, v in enumerate(values) if not math.isfinite(v))


def twin(make: Callable[[], Any], max_steps: int = 300, **trainer_kwargs: Any) -> PlainRecorder:
    """The recording of ``make`` (a build: the bug fixed) trained like a zoo run (seed 0)."""
    fixed = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                      max_steps=max_steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(fixed, monitor=False)[1]


def _probed(make: Callable[[], Any], probe: Any, max_steps: int = 300, **trainer_kwargs: Any) -> Any:
    """Train ``make`` like a zoo run (seed 0, the same validation, so the same shuffles) with ``probe``
    alone; return the probe."""
    torch.manual_seed(0)
    model, train, val = make()
    trainer = fast_trainer(max_steps=max_steps, max_epochs=1000, callbacks=[probe], **trainer_kwargs)
    trainer.fit(model, train, val)
    return probe


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """``(final, best)`` validation loss: what the run ends with and the best (finite) one it passed."""
    return r.val_losses[-1], min(v for v in r.val_losses if math.isfinite(v))


def trains(r: PlainRecorder, below: float) -> None:
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    assert r.val_losses[-1] < below, (r.val_losses, below)


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), (r.val_losses, trivial)


# ------------------------------------------------------------------------------------------ non-finite
def gcn_no_self_loops_nan(r: PlainRecorder) -> None:
    adjacency = build.normalise(build._graph()[0], self_loops=False)
    broken = adjacency.isnan().any(1)
    assert int(broken.sum()) == build.NODES  # every row meets an isolated node's NaN column
    assert torch.isfinite(build.node_features()).all()  # the features and labels are fine
    assert first_nonfinite(r.losses) == 0 and not finite(r.grad_norms[:1]), r.losses[:3]
    assert not any(math.isfinite(v) for v in r.losses + r.val_losses)  # NaN from step 0 to the end
    fixed = twin(functools.partial(build.gcn_no_self_loops, self_loops=True), **GRAPH_VAL)
    trains(fixed, 0.3 * fixed.losses[0])


def gcn_sgd_nan(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert at <= 20 and finite(r.losses[:at]), r.losses[: at + 1]
    assert r.losses[1] > 50 * r.losses[0], r.losses[:3]  # too high from the first step
    fixed = twin(functools.partial(build.gcn_sgd, lr=1e-2), **GRAPH_VAL)
    trains(fixed, 0.3 * fixed.val_losses[0])


def ranking_ctr_nan(r: PlainRecorder) -> None:
    at = CTR_ONSET
    assert finite(r.losses[:at]) and first_nonfinite(r.losses) == at, r.losses[at - 2 : at + 2]
    assert finite(r.grad_norms[:at]) and max(r.grad_norms[:at]) < 2, max(r.grad_norms[:at])
    assert not any(math.isfinite(v) for v in r.losses[at:])  # NaN weights from then on
    features = build.ranking(guard=False)[0]
    bad = features.isnan().any(-1).any(-1).nonzero().flatten().tolist()
    assert bad == [q for q, _ in build.UNSHOWN] and bad[0] // build.RANK_BATCH == at, bad
    final, best = repair_room(r)
    assert math.isnan(final) and best < LOG_DOCS - 0.3, (final, best)
    fixed = twin(functools.partial(build.ranking_ctr, guard=True), val_check_interval=20)
    trains(fixed, best - 0.15)


# ------------------------------------------------------------------------------------------ trivial loss
def diabetes_adagrad_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, DIABETES_TRIVIAL, 0.03)
    assert r.lrs[0] == [1e-5] and min(r.grad_norms[:20]) > 0.3  # gradients are fine, the steps are not
    assert max(max(step.values()) for step in r.update_ratios) < 3e-4  # no parameter moves
    final, best = repair_room(r)
    assert final > 0.97 * DIABETES_TRIVIAL and best > 0.97 * DIABETES_TRIVIAL, (final, best)
    fixed = twin(functools.partial(build.diabetes_adagrad, lr=1e-2), val_check_interval=10)
    trains(fixed, 0.5 * best)
    moves = [statistics.median(step["net.0.weight"] for step in run.update_ratios) for run in (r, fixed)]
    assert moves[1] > 100 * moves[0], moves


def diabetes_broadcast_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, DIABETES_TRIVIAL, 0.05)
    # the weights move as usual (the optimizer works), yet the validation loss never leaves the variance
    assert statistics.median(step["net.0.weight"] for step in r.update_ratios) > 1e-3
    (_, y), _ = build.diabetes()
    assert y.ndim == 1  # the target of the training batches: a vector against (N, 1) predictions
    fixed = twin(functools.partial(build.diabetes_broadcast, column=True), val_check_interval=10)
    trains(fixed, 0.5 * DIABETES_TRIVIAL)


# ------------------------------------------------------------------------------------------ rising val
def gcn_overfits(r: PlainRecorder) -> None:
    val = r.val_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 10 == OVERFIT_ONSET, (best, val)
    final, lowest = repair_room(r)
    assert final > 1.5 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert all(b > a for a, b in itertools.pairwise(val[best + 1 :])), val  # climbing ever since
    assert mean(r.losses[-10:]) < 0.01 * r.losses[0], r.losses[-10:]  # the labelled nodes memorised
    fixed = twin(functools.partial(build.gcn_unregularised, dropout=0.5, weight_decay=0.5), **GRAPH_VAL)
    assert fixed.val_losses[-1] < 0.65 * final and fixed.val_losses[-1] < 1.15 * min(fixed.val_losses)


class HiddenProbe(pl.Callback):
    """The fraction of the scorer's hidden ReLU units that are zero (dead) on all of a batch."""

    def __init__(self) -> None:
        self.dead: list[float] = []

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             *args: Any) -> None:  # fmt: skip
        with torch.no_grad():
            net = pl_module.net
            h = torch.relu(net.hidden[0](torch.relu(net.encoder(batch[0])))).flatten(0, 1)
        self.dead.append(float((h.amax(0) == 0).float().mean()))


def ranking_onecycle_dies(r: PlainRecorder) -> None:
    at = ONECYCLE_JUMP
    assert all(loss < r.losses[0] for loss in r.losses[1:at]) and r.losses[at] > 1.5 * r.losses[0]
    assert 0.3 < r.lrs[at][0] < 0.6 and max(lr[0] for lr in r.lrs) > 0.99  # climbing to its 1.0 peak
    assert all(abs(loss - LOG_DOCS) < 0.01 for loss in r.losses[-100:])  # every document scored alike
    final, best = repair_room(r)
    assert best < LOG_DOCS - 0.5 and abs(final - LOG_DOCS) < 0.01, (final, best)
    assert max(r.grad_norms[at - 5 : at + 30]) > 10 * statistics.median(r.grad_norms[:20])
    assert all(v == 1.0 for step in r.zero_grad_rows[-50:] for v in step.values())  # no gradient anywhere
    # the hidden ReLUs die from the first steps as the LR climbs from 0.04: a quarter by ONECYCLE_ONSET
    probe = _probed(build.ranking_onecycle, HiddenProbe(), max_steps=150, val_check_interval=20)
    assert next(i for i, d in enumerate(probe.dead) if d > 0.25) == ONECYCLE_ONSET, probe.dead[:20]
    assert min(probe.dead[-20:]) == 1.0, probe.dead[-20:]
    meant = functools.partial(build.ranking_onecycle, max_lr=1e-2)
    assert max(_probed(meant, HiddenProbe(), val_check_interval=20).dead) < 0.15
    fixed = twin(meant, val_check_interval=20)
    trains(fixed, best)


# ------------------------------------------------------------------------------------------ collapse
def ranking_decay_collapses(r: PlainRecorder) -> None:
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] == 0.0) == DECAY_ONSET, r.lrs[:20]
    assert r.lrs[DECAY_ONSET - 1][0] > 0 and all(lr[0] == 0.0 for lr in r.lrs[DECAY_ONSET:])
    assert all(v == 0.0 for step in r.update_ratios[DECAY_ONSET + 1 :] for v in step.values())
    final, best = repair_room(r)
    assert final == best and final > LOG_DOCS - 0.45, r.val_losses  # frozen where the LR left it
    fixed = twin(functools.partial(build.ranking_warmup_decay, decay_iters=290), val_check_interval=20)
    trains(fixed, final - 0.2)


# ------------------------------------------------------------------------------------------ frozen
def ranking_encoder_frozen(r: PlainRecorder) -> None:
    for step, zero_rows in zip(r.update_ratios, r.zero_grad_rows, strict=True):
        assert step["net.encoder.weight"] == 0.0 and zero_rows["net.encoder.weight"] < 1.0, step
        assert all(v > 0 for k, v in step.items() if k != "net.encoder.weight"), step
    assert min(r.grad_norms) > 0
    fixed = twin(functools.partial(build.ranking_param_groups, prefixes=("encoder", "hidden", "out")))
    # the excess over the floor (a perfect scorer's loss): at least twice the fixed run's
    excess, fixed_excess = r.val_losses[-1] - RANKING_FLOOR, fixed.val_losses[-1] - RANKING_FLOOR
    assert excess > 2 * fixed_excess, (r.val_losses, fixed.val_losses, RANKING_FLOOR)


def ranking_sigmoid_vanishes(r: PlainRecorder) -> None:
    assert max(r.grad_norms) < 1e-5, max(r.grad_norms)
    assert max(max(step.values()) for step in r.update_ratios) < 1e-6
    assert all(abs(v - LOG_DOCS) < 0.01 for v in r.val_losses), r.val_losses
    fixed = twin(functools.partial(build.ranking_deep_sigmoid, activation=nn.ReLU))
    assert min(fixed.grad_norms[:10]) > 0.1, fixed.grad_norms[:10]
    trains(fixed, LOG_DOCS - 0.5)


# ------------------------------------------------------------------------------------------ data
def ranking_query_log_stalls(r: PlainRecorder) -> None:
    wait, step = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert wait > 4 * step and wait > 0.01, (wait, step)
    fixed = twin(functools.partial(build.ranking_query_log, indexed=True), max_steps=100)
    assert statistics.median(fixed.wait_s) < 0.2 * wait, (statistics.median(fixed.wait_s), wait)
    assert r.losses == fixed.losses  # the same batches: only the time to fetch them differs


class TargetProbe(pl.Callback):
    """The largest absolute (standardised) target of each training batch."""

    def __init__(self) -> None:
        self.largest: list[float] = []

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any,
                             *args: Any) -> None:  # fmt: skip
        self.largest.append(float(batch[1].abs().max()))


def diabetes_mistyped_spikes(r: PlainRecorder) -> None:
    median = statistics.median(r.losses)
    spikes = [i for i, loss in enumerate(r.losses) if loss > 10 * median]
    assert spikes[0] == MISTYPED_ONSET and len(spikes) < 0.15 * len(r.losses), spikes
    assert max(r.losses) > 50 * median
    # the spikes are exactly the batches holding a mistyped row (same seed, same shuffle)
    probe = _probed(build.diabetes_mistyped, TargetProbe(), val_check_interval=10)
    holding = [i for i, y in enumerate(probe.largest) if y > 3]  # the two rows: ~16 and ~4.5, others < 1.1
    assert holding == spikes, (holding, spikes)
    fixed = twin(functools.partial(build.diabetes_mistyped, rows=()), val_check_interval=10)
    assert max(fixed.losses) < 5 * statistics.median(fixed.losses)


# ------------------------------------------------------------------------------------------ healthy
def gcn_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.val_losses[0])
    assert abs(r.lrs[0][0] - 1e-4) < 1e-9 and abs(r.lrs[build.GCN_WARMUP][0] - 1e-2) < 1e-9
    assert r.lrs[-1][0] < 1e-4  # the decay ends near 0 on purpose
    assert mean(r.losses[:10]) > 0.98 * r.losses[0], r.losses[:10]  # nothing moves at first


def gcn_projection_trains(r: PlainRecorder) -> None:
    trains(r, 0.4)
    assert all(set(step) == {"net.out.weight", "net.out.bias"} for step in r.update_ratios)


def gcn_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.2 * r.val_losses[0])
    assert sum(b > a for a, b in itertools.pairwise(r.val_losses)) >= 5, r.val_losses  # 8 nodes: jitter


def diabetes_clipped_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * DIABETES_RAW_VARIANCE)
    assert min(r.grad_norms) > 1.0 and mean(r.losses[:10]) > 1000  # clipped at every step


def diabetes_floor_trains(r: PlainRecorder) -> None:
    trains(r, 1.05 * DIABETES_LSTSQ)  # as good as the least-squares fit
    half = r.val_losses[len(r.val_losses) // 2 :]
    assert max(half) - min(half) < 0.05 * min(half), half  # then flat: the noise floor


def ranking_accumulated_trains(r: PlainRecorder) -> None:
    assert len(r.lrs) == 300 and len(r.losses) == 8 * 300  # micro-batches, 8 an optimizer step
    trains(r, 2.2)
    assert abs(8 * r.losses[0] - LOG_DOCS) < 0.1  # the recorded loss is scaled by 1/8


def ranking_noisy_trains(r: PlainRecorder) -> None:
    trains(r, LOG_DOCS - 0.4)
    assert mean(r.losses[-50:]) > LOG_DOCS - 0.3, mean(r.losses[-50:])  # a training floor near log(16)


def ranking_onecycle_peak_trains(r: PlainRecorder) -> None:
    peak = max(range(len(r.lrs)), key=lambda i: r.lrs[i][0])
    assert 80 <= peak <= 100 and abs(r.lrs[peak][0] - 1e-2) < 1e-5 and r.lrs[0][0] < 5e-4
    assert r.lrs[-1][0] < 1e-6  # annealed to ~0 on purpose
    trains(r, 2.15)
    assert r.val_losses[-1] <= min(r.val_losses) + 2e-3, r.val_losses


def ranking_whole_set_trains(r: PlainRecorder) -> None:
    trains(r, 2.15)
    assert r.val_losses[-1] < RANKING_FLOOR + 0.2
