"""Proofs of zoo 21's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from collections.abc import Callable, Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo21 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

# the measured onsets that are not a schedule's or a data layout's constant
OVERFIT_ONSET = 24  # after epoch 6 (4 steps each) the validation loss never returns to its best


# ------------------------------------------------------------------------------------------ helpers
def finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: Sequence[float]) -> int:
    """The index of the first non-finite value (``len(values)`` if none)."""
    return next((i for i, v in enumerate(values) if not math.isfinite(v)), len(values))


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def rows_zero(r: PlainRecorder, name: str, steps: slice = slice(None)) -> float:
    """The mean, over ``steps``, of the fraction of ``name``'s rows whose gradient is exactly zero."""
    return mean([step[name] for step in r.zero_grad_rows[steps]])


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """The run's final and its best (lowest finite) validation loss."""
    return r.val_losses[-1], min(v for v in r.val_losses if math.isfinite(v))


def trains(r: PlainRecorder, below: float) -> None:
    """A healthy run: finite throughout, and its last validation loss below ``below`` and its first."""
    assert finite(r.losses), first_nonfinite(r.losses)
    assert r.val_losses[-1] < below and r.val_losses[-1] < r.val_losses[0], (r.val_losses, below)


def twin(
    make: Callable[[], Any], max_steps: int = 300, callbacks: Sequence[Callback] = (), **trainer_kwargs: Any
) -> PlainRecorder:
    """Train ``make`` (a builder: usually the run with its bug fixed) as the zoo trains a run, seed 0, and
    return its recording; ``callbacks``: more callbacks trained alongside the recorder."""
    case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                     max_steps=max_steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    if not callbacks:
        return run_case(case, monitor=False)[1]
    torch.manual_seed(case.seed)
    model, train, val = make()
    recorder = PlainRecorder()
    settings = {} if val is not None else {"limit_val_batches": 0}
    trainer = fast_trainer(max_steps=max_steps, max_epochs=1000, callbacks=[recorder, *callbacks],
                           **{**settings, **trainer_kwargs})  # fmt: skip
    trainer.fit(model, train, val)
    return recorder


class GradProbe(Callback):
    """The gradient norm of the named parameters at every optimizer step."""

    def __init__(self, *names: str) -> None:
        self.names = names
        self.norms: dict[str, list[float]] = {n: [] for n in names}

    def on_before_optimizer_step(self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Any):
        params = dict(pl_module.named_parameters())
        for name in self.names:
            self.norms[name].append(float(params[name].grad.norm()))


def _batch(loader: Any, index: int) -> Any:
    return next(itertools.islice(iter(loader), index, None))


# ------------------------------------------------------------------------------------------ span QA
QA_INITIAL = math.log(build.QA_LENGTH)  # a uniform guess over the 24 positions


def qa_decay_collapses(r: PlainRecorder) -> None:
    peak = 3e-3
    assert abs(r.lrs[build.QA_WARMUP - 1][0] - peak) < 1e-12, r.lrs[: build.QA_WARMUP]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.01 * peak) == build.QA_COLLAPSE
    assert r.lrs[-1][0] < 1e-30 * peak
    final, lowest = repair_room(r)  # validation every 25 steps: frozen from the second check on
    assert max(r.val_losses[1:]) - min(r.val_losses[1:]) < 0.01 * final, r.val_losses
    assert final > 0.6 * QA_INITIAL, (final, QA_INITIAL)  # far from solved
    fixed = twin(functools.partial(build.qa_decay, per_step=False), val_check_interval=25)
    assert fixed.lrs[-1][0] > 0.1 * peak and fixed.val_losses[-1] < 0.2 * lowest, (fixed.val_losses, lowest)


def qa_mask_nan(r: PlainRecorder) -> None:
    at = build.QA_FULL_BATCH
    assert first_nonfinite(r.losses) == at and finite(r.grad_norms[:at]), r.losses[: at + 1]
    assert max(r.grad_norms[:at]) < 10 and r.losses[at - 1] < r.losses[0], (r.grad_norms[:at], r.losses[:at])
    assert all(math.isnan(v) for v in r.losses[at + 1 :])  # its update made every weight NaN
    # the initial weights already give NaN on that batch, exactly on its unpadded contexts: neither the
    # token ids nor the LR, the attention's mask turns those rows non-finite
    torch.manual_seed(0)
    model, train, _ = build.qa_mask_convention()
    ids, _ = _batch(train, at)
    with torch.no_grad():
        start, _ = model.net(ids)
    unpadded = (ids != build.PAD).all(1)
    assert unpadded.any() and torch.equal(start.isnan().any(1), unpadded), unpadded
    torch.manual_seed(0)
    fixed_model, _, _ = build.qa_mask_convention(inverted=False)
    with torch.no_grad():
        assert torch.isfinite(fixed_model.net(ids)[0]).all()
    fixed = twin(functools.partial(build.qa_mask_convention, inverted=False), max_steps=200,
                 val_check_interval=25)  # fmt: skip
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.2 * QA_INITIAL, fixed.val_losses


def qa_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.1 * QA_INITIAL)
    peak = 3e-3
    assert r.lrs[0][0] < 0.01 * peak and abs(r.lrs[build.QA_LONG_WARMUP - 1][0] - peak) < 1e-12
    assert mean(r.losses[:20]) > 0.95 * r.losses[0], r.losses[:20]  # nothing moves at first
    assert r.val_losses[0] > 0.85 * QA_INITIAL, r.val_losses  # still near a uniform guess at step 25


def qa_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.1 * QA_INITIAL)
    v = r.val_losses
    assert len(v) >= 10 and sum(b > a for a, b in itertools.pairwise(v)) >= 1, v  # 8 questions: it rises


# ------------------------------------------------------------------------------------------ colour
def colour_blank_nan(r: PlainRecorder) -> None:
    at = build.BLANK_BATCH
    assert finite(r.losses[:at]) and first_nonfinite(r.losses) == at, r.losses[: at + 1]
    assert finite(r.grad_norms[:at]) and max(r.grad_norms[:at]) < 5, max(r.grad_norms[:at])
    assert all(math.isnan(v) for v in r.losses[at + 1 :])
    # the inputs are non-finite exactly at the blank canvases (divided by a zero std), finite elsewhere
    grey, _ = build.canvases(build.COLOUR_ROWS, 0, build.BLANK_ROWS)
    bad = ~build.standardise(grey, 0.0).isfinite().flatten(1).all(1)
    assert bad.nonzero().flatten().tolist() == list(build.BLANK_ROWS)
    assert torch.isfinite(build.standardise(grey, 1e-3)).all()
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.6 * r.val_losses[0], (final, lowest)  # it had been learning
    fixed = twin(functools.partial(build.colour_no_eps, eps=1e-3), val_check_interval=32)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.5 * lowest, (fixed.val_losses, lowest)


def colour_lr_nan(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert at < 20 and finite(r.losses[:at]) and max(r.losses[:at]) > 100 * r.losses[0], r.losses[: at + 1]
    assert at < build.BLANK_BATCH and r.lrs[0] == [20.0]  # before any blank canvas, which has its epsilon
    fixed = twin(functools.partial(build.colour_lr_typo, lr=0.2), val_check_interval=32)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.3 * fixed.val_losses[0], fixed.val_losses


def colour_encoder_frozen(r: PlainRecorder) -> None:
    encoder = [k for k in r.update_ratios[0] if k.startswith("net.encoder.")]
    assert len(encoder) == 6, r.update_ratios[0].keys()
    for step in r.update_ratios:
        assert all(step[k] == 0.0 for k in encoder), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("net.decoder.")), step
    assert rows_zero(r, "net.encoder.0.weight") < 0.1  # it gets gradients all the while
    fixed = twin(functools.partial(build.colour_decoder_only, decoder_only=False), val_check_interval=32)
    assert fixed.val_losses[-1] < 0.4 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def colour_vanishes(r: PlainRecorder) -> None:
    names = ("net.encoder.0.weight", "net.decoder.2.weight")
    bad, good = GradProbe(*names), GradProbe(*names)
    twin(build.colour_sigmoid, callbacks=[bad], val_check_interval=32)
    relu = functools.partial(build.colour_sigmoid, torch.nn.ReLU)
    fixed = twin(relu, callbacks=[good], val_check_interval=32)

    def ratio(probe: GradProbe, steps: slice) -> float:
        first, last = (probe.norms[n][steps] for n in names)
        return statistics.median(a / b for a, b in zip(first, last) if b > 0)

    assert ratio(bad, slice(0, 100)) < 1e-3 and ratio(good, slice(0, 100)) > 1e-2, (
        ratio(bad, slice(0, 100)),
        ratio(good, slice(0, 100)),
    )
    assert ratio(bad, slice(0, 1)) < 1e-3  # from the first step
    assert r.val_losses[-1] > 4 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


def colour_decays_train(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.val_losses[0])
    assert r.lrs[149][0] == 0.2 and abs(r.lrs[150][0] - 0.05) < 1e-12 and abs(r.lrs[250][0] - 0.0125) < 1e-12


def colour_fixed_filters_train(r: PlainRecorder) -> None:
    trains(r, 0.25 * r.val_losses[0])
    assert all("net.encoder.0.weight" not in step for step in r.update_ratios)  # frozen on purpose
    assert all(v > 0 for step in r.update_ratios for v in step.values())  # everything else learns


# ------------------------------------------------------------------------------------------ baskets
def _basket_marginal() -> float:
    """The validation BCE of the best constant: the training baskets' per-item rates."""
    _, y = build.baskets(8192, 0)
    _, vy = build.baskets(512, 1)
    p = y.mean(0).clamp(1e-4, 1 - 1e-4)
    return float(-(vy * p.log() + (1 - vy) * (1 - p).log()).mean())


def basket_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 4 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert final > 1.8 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.01 * train[best], (train[-1], train[best])
    assert lowest < 0.97 * _basket_marginal(), (lowest, _basket_marginal())  # it had learned something
    meant = functools.partial(build.basket_few_shoppers, shoppers=8192)
    fixed = twin(meant, val_check_interval=50)
    assert fixed.val_losses[-1] < 0.85 * lowest, (fixed.val_losses, lowest)


def basket_prior_dead(r: PlainRecorder) -> None:
    assert rows_zero(r, "net.0.weight") == 1.0 and rows_zero(r, "net.2.weight") == 1.0  # dead from step 0
    marginal = _basket_marginal()
    assert all(abs(v - marginal) < 0.01 * marginal for v in r.val_losses), (r.val_losses, marginal)
    fixed = twin(functools.partial(build.basket_prior_bias, everywhere=False), val_check_interval=50)
    assert rows_zero(fixed, "net.0.weight") < 0.1, rows_zero(fixed, "net.0.weight")
    assert fixed.val_losses[-1] < 0.75 * marginal, (fixed.val_losses, marginal)


def basket_lr_kills(r: PlainRecorder) -> None:
    assert r.lrs[0] == [1.0]
    dead = rows_zero(r, "net.0.weight", slice(1, 11))  # after the first update
    assert dead > 0.5 and rows_zero(r, "net.0.weight", slice(-100, None)) > 0.6, dead
    assert rows_zero(r, "net.0.weight", slice(0, 1)) < 0.1  # alive at the start
    fixed = twin(functools.partial(build.basket_adagrad_lr, lr=0.05), val_check_interval=50)
    assert rows_zero(fixed, "net.0.weight", slice(-100, None)) < 0.15
    assert r.val_losses[-1] > 1.12 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


def basket_big_batch_trains(r: PlainRecorder) -> None:
    trains(r, 0.75 * _basket_marginal())
    assert len(r.losses) == 300 and len(r.val_losses) >= 15  # 16 steps an epoch


# ------------------------------------------------------------------------------------------ selective
def selective_doubling_diverges(r: PlainRecorder) -> None:
    limit = build.CYCLE_MAX * (1 + 1e-9)
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] > limit) == build.DOUBLING_ONSET
    assert max(lr[0] for lr in r.lrs) > 30 * build.CYCLE_MAX
    final, lowest = repair_room(r)
    assert final > 1.3 * lowest, (final, lowest)
    # collapsed to abstaining on everything: the loss sits at log(payoff), no gradient left
    assert abs(final - math.log(3.0)) < 1e-3 and max(r.grad_norms[-20:]) < 1e-6, (final, r.grad_norms[-20:])
    fixed = twin(functools.partial(build.selective_doubling, doubling=False), max_steps=200,
                 val_check_interval=10)  # fmt: skip
    assert max(lr[0] for lr in fixed.lrs) <= limit and max(fixed.grad_norms[-20:]) > 0.05
    assert fixed.val_losses[-1] < 0.85 * final and all(
        b < a + 0.01 for a, b in itertools.pairwise(fixed.val_losses)
    ), fixed.val_losses


def selective_stalls(r: PlainRecorder) -> None:
    wait, step = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert wait > 3 * step, (wait, step)
    fixed = twin(functools.partial(build.selective_rebuilt_table, rebuild=False), max_steps=150,
                 val_check_interval=20)  # fmt: skip
    assert statistics.median(fixed.wait_s) < 0.3 * wait, (statistics.median(fixed.wait_s), wait)
    # the same batches in the same order: the slow pipeline changes nothing but the time
    assert max(abs(a - b) for a, b in zip(r.losses, fixed.losses)) < 1e-4


def selective_ambiguous_trains(r: PlainRecorder) -> None:
    trains(r, 0.8 * r.val_losses[0])
    assert mean(r.losses[-50:]) > 0.75, mean(r.losses[-50:])  # a high floor: 35% of labels are noise


def selective_triangular2_trains(r: PlainRecorder) -> None:
    trains(r, 0.7 * r.val_losses[0])
    heights = [max(lr[0] for lr in r.lrs[c : c + 20]) - build.CYCLE_BASE for c in range(0, 100, 20)]
    assert all(abs(b / a - 0.5) < 0.01 for a, b in itertools.pairwise(heights)), heights  # halved each cycle


def selective_cycles_train(r: PlainRecorder) -> None:
    trains(r, 0.6 * r.val_losses[0])
    bumps = sum(b > a for a, b in itertools.pairwise(r.val_losses))
    assert bumps >= 2, r.val_losses  # the LR peaks set it back now and then


# ------------------------------------------------------------------------------------------ fitted Q
def q_sentinel_outliers(r: PlainRecorder) -> None:
    at = build.SENTINEL_BATCH
    typical = statistics.median(r.losses)
    outliers = [i for i, v in enumerate(r.losses) if v > 1000 * typical]
    assert outliers[0] == at and 10 <= len(outliers) <= 40, outliers  # six rows, met once an epoch each
    assert max(r.losses[:at]) < 1 and finite(r.losses), r.losses[:at]
    fixed = twin(functools.partial(build.q_sentinel_rewards, sentinel=False), val_check_interval=32)
    assert fixed.val_losses[-1] < 0.05 and r.val_losses[-1] > 100 * fixed.val_losses[-1], (
        r.val_losses,
        fixed.val_losses,
    )


def q_raw_trains(r: PlainRecorder) -> None:
    trains(r, 0.02 * r.val_losses[0])
    assert mean(r.losses) > 10 and max(r.grad_norms) > 20, (mean(r.losses), max(r.grad_norms))


def q_slow_sync_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.val_losses[0])
    # the loss jumps when the target network is refreshed
    jumps = [mean(r.losses[k : k + 5]) / mean(r.losses[k - 5 : k]) for k in range(50, 300, 50)]
    assert sum(j > 1.5 for j in jumps) >= 3, jumps


# ------------------------------------------------------------------------------------------ brackets
def brackets_lr_stuck(r: PlainRecorder) -> None:
    assert r.lrs[0] == [1e-3]
    v = r.val_losses
    assert all(abs(x - v[0]) < 0.02 * v[0] for x in v) and v[-1] > 0.9 * math.log(2), v
    fixed = twin(functools.partial(build.brackets_adadelta_lr, lr=1.0), val_check_interval=32)
    assert fixed.val_losses[-1] < 0.05, fixed.val_losses
    # the updates are ~1000x smaller than the fixed run's
    size = mean([mean(list(s.values())) for s in r.update_ratios])
    fixed_size = mean([mean(list(s.values())) for s in fixed.update_ratios])
    assert size < 0.01 * fixed_size, (size, fixed_size)


def brackets_labels_stuck(r: PlainRecorder) -> None:
    assert all(abs(x - math.log(2)) < 0.04 for x in r.val_losses), r.val_losses
    assert mean(r.losses[-50:]) > 0.66, mean(r.losses[-50:])
    fixed = twin(functools.partial(build.brackets_labels_before_shuffle, misaligned=False),
                 val_check_interval=32)  # fmt: skip
    assert fixed.val_losses[-1] < 0.05, fixed.val_losses
    # it updates as much as the fixed run: not an LR problem
    size = mean([mean(list(s.values())) for s in r.update_ratios])
    fixed_size = mean([mean(list(s.values())) for s in fixed.update_ratios])
    assert size > 0.3 * fixed_size, (size, fixed_size)


def brackets_sgd_trains(r: PlainRecorder) -> None:
    trains(r, 0.02)
    # loss spikes: steps at >5x the median of the 20 before them
    spikes = [i for i in range(50, 300) if r.losses[i] > 5 * statistics.median(r.losses[i - 20 : i])]
    assert len(spikes) >= 2 and max(r.losses[i] for i in spikes) > r.losses[0], spikes
