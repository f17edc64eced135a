"""Proofs of zoo 14's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo14 import _builds as build
from lightning_recipes.testing.trainers import fast_trainer

STUCK_BATCH = build.STUCK_WINDOW // 32  # the first batch (read in time order) holding a flat window
OVERFIT_ONSET = 12  # after epoch 4 (3 steps each) the validation loss never returns to its best
GROWTH_ONSET = 80  # after the 4th validation (every 20 steps) the validation loss never returns to its best
POLY_ONSET = 28  # the first step run below 1/10 of the base LR (PolynomialLR over 30 "epochs" taken as steps)
OUTLIER_ONSET = 0  # the first batch holding one of the 12-bit scans (the loader's fixed shuffle)


# ------------------------------------------------------------------------------------------ helpers
def twin(make: Callable[[], Any], max_steps: int = 300, **trainer_kwargs: Any) -> PlainRecorder:
    """Train ``make`` (a builder, usually the run with its bug fixed) once with the plain recorder alone."""
    case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                     max_steps=max_steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(case, monitor=False)[1]


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: Sequence[float]) -> int:
    return next((i for i, v in enumerate(values) if not math.isfinite(v)), len(values))


def rows_zero(r: PlainRecorder, name: str) -> list[float]:
    """The fraction of ``name``'s rows whose gradient is exactly zero, step by step."""
    return [step[name] for step in r.zero_grad_rows]


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """``(final, best)`` validation loss: what a repair that restores the best weights could save."""
    return r.val_losses[-1], min(v for v in r.val_losses if math.isfinite(v))


def trains(r: PlainRecorder, below: float) -> None:
    """A healthy run: finite throughout, its last validation loss below ``below`` and below its first."""
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    assert r.val_losses[-1] < below and r.val_losses[-1] < r.val_losses[0], (r.val_losses, below)


def _prior_loss(train_y: torch.Tensor, val_y: torch.Tensor) -> float:
    """The validation cross-entropy of the best constant guess: the training labels' class frequencies."""
    prior = torch.bincount(train_y, minlength=3).float() / len(train_y)
    return float(-prior[val_y].log().mean())


def _entropy(train_y: torch.Tensor) -> float:
    prior = torch.bincount(train_y, minlength=3).float() / len(train_y)
    return float(-(prior * prior.log()).sum())


WINE_TRIVIAL = _prior_loss(build.wine()[0][1], build.wine()[1][1])
IRIS_TRIVIAL = _prior_loss(build.iris()[0][1], build.iris()[1][1])


def _stuck_at(r: PlainRecorder, trivial: float, tolerance: float = 0.03) -> None:
    assert all(abs(v - trivial) < tolerance * trivial for v in r.val_losses), (r.val_losses, trivial)


# ------------------------------------------------------------------------------------------ stuck at trivial
def wine_lambda_stuck(r: PlainRecorder) -> None:
    # the LR itself: 1e-3 * 1e-3 * warm-up, never above 1e-6 (1000x below the meant 1e-3), from step 0
    assert abs(r.lrs[0][0] - 5e-8) < 1e-12 and max(lr[0] for lr in r.lrs) < 1.0001e-6, r.lrs[:3]
    _stuck_at(r, WINE_TRIVIAL)
    assert max(rows_zero(r, "net.0.weight")) < 0.05  # the inputs reach the weights: only the steps are tiny
    assert max(max(step.values()) for step in r.update_ratios) < 1e-4
    final, lowest = repair_room(r)
    assert final < 1.001 * lowest, (final, lowest)  # its best is its last: the run is slow, not unstable
    fixed = twin(functools.partial(build.wine_lambda_absolute, absolute=False))
    assert fixed.val_losses[-1] < 0.1 * lowest, (fixed.val_losses, lowest)


def wine_dead_stuck(r: PlainRecorder) -> None:
    _stuck_at(r, WINE_TRIVIAL)
    # every unit of both ReLU layers is dead on every batch from step 0: their weights get no gradient at all,
    # and change only by AdamW's decoupled weight decay (a factor 1 - lr * wd a step)
    assert min(rows_zero(r, "net.0.weight")) == 1.0 and min(rows_zero(r, "net.2.weight")) == 1.0
    decay = 3e-3 * 1e-2
    for step in r.update_ratios:
        assert step["net.0.weight"] < 1.01 * decay and step["net.2.weight"] < 1.01 * decay, step
    fixed = twin(functools.partial(build.wine_gate_bias, bias=0.0))
    assert fixed.val_losses[-1] < 0.1 * WINE_TRIVIAL, fixed.val_losses
    assert max(rows_zero(fixed, "net.0.weight")) < 0.5


def iris_labels_stuck(r: PlainRecorder) -> None:
    _, train, val = build.iris_two_permutations()
    train_y, val_y = train.dataset.tensors[1], val.dataset.tensors[1]
    trivial, floor = _prior_loss(train_y, val_y), _entropy(train_y)
    # the validation loss never gets below the best constant guess; the training loss stays near its entropy
    assert min(r.val_losses) > 0.98 * trivial, (r.val_losses, trivial)
    assert mean(r.losses[-50:]) > 0.9 * floor, (mean(r.losses[-50:]), floor)
    assert mean(rows_zero(r, "net.0.weight")) < 0.2 and r.lrs[0] == [0.02]  # gradients and LR as meant
    fixed = twin(functools.partial(build.iris_two_permutations, separate=False))
    assert fixed.val_losses[-1] < 0.3 * trivial, fixed.val_losses


def iris_sigmoid_vanishes(r: PlainRecorder) -> None:
    assert min(r.val_losses) > 0.97 * IRIS_TRIVIAL, (r.val_losses, IRIS_TRIVIAL)
    # the layers' steps shrink layer by layer towards the input: the first layer's are nonzero at every step
    # (it is not frozen) yet on average over 10,000x smaller than the readout's
    names = [name for name in r.update_ratios[0] if name.endswith("weight")]
    steps = [mean([step[name] for step in r.update_ratios]) for name in names]
    assert all(a < b for a, b in itertools.pairwise(steps)) and steps[0] < 1e-4 * steps[-1], steps
    assert all(step[names[0]] > 0 for step in r.update_ratios)
    fixed = twin(functools.partial(build.iris_deep_sigmoid, hidden_layers=2))
    assert fixed.val_losses[-1] < 0.15 * IRIS_TRIVIAL, fixed.val_losses


# ------------------------------------------------------------------------------------------ non-finite
def sines_stuck_nan(r: PlainRecorder) -> None:
    x, _ = build.sines_stuck_sensor()[1].dataset.tensors
    bad = x.isnan().any(1).nonzero().flatten()
    assert int(bad[0]) // 32 == STUCK_BATCH and int(bad[-1]) // 32 == STUCK_BATCH, bad  # one batch an epoch
    assert finite(r.losses[:STUCK_BATCH]) and first_nonfinite(r.losses) == STUCK_BATCH
    assert max(r.grad_norms[:STUCK_BATCH]) < 50, r.grad_norms[:STUCK_BATCH]
    assert all(math.isnan(v) for v in r.losses[STUCK_BATCH + 1 :])  # NaN weights from then on
    final, lowest = repair_room(r)
    assert math.isnan(final) and math.isfinite(lowest)
    fixed = twin(functools.partial(build.sines_stuck_sensor, drop_flat=True), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.2 * lowest, (fixed.val_losses, lowest)


def sines_sgd_nan(r: PlainRecorder) -> None:
    x, y = build.sines_sgd()[1].dataset.tensors
    assert bool(x.isfinite().all() and y.isfinite().all())  # clean inputs
    at = first_nonfinite(r.losses)
    assert at <= 15 and finite(r.losses[:at]) and r.losses[2] > 1000 * r.losses[0], r.losses[: at + 1]
    fixed = twin(functools.partial(build.sines_sgd, lr=0.03), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.15, fixed.val_losses


def iris_nan_weights(r: PlainRecorder) -> None:
    model, train, _ = build.iris_pruned_renormalised()
    weight = model.net[0].weight
    assert int(weight.isnan().any(1).sum()) == 8 and bool(train.dataset.tensors[0].isfinite().all())
    assert first_nonfinite(r.losses) == 0 and all(math.isnan(v) for v in r.losses + r.val_losses)
    fixed = twin(functools.partial(build.iris_pruned_renormalised, renormalise_zero_rows=False))
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.15, fixed.val_losses


# ------------------------------------------------------------------------------------------ rising val
def linnerud_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 3 == OVERFIT_ONSET and val[best] < 0.95 * val[0], (best, val[:6])
    final, lowest = repair_room(r)
    assert final > 3 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.1 * train[best], (train[-1], train[best])  # the training loss keeps falling


def _growth_onset(losses: Sequence[float], factor: float = 1.5) -> int:
    """The first step from which the trailing 10-step mean of the training loss is never again within
    ``factor`` of its lowest so far (non-finite counts as not within)."""
    onset, lowest = len(losses), math.inf
    for i in range(9, len(losses)):
        trailing = mean(losses[i - 9 : i + 1])
        within = math.isfinite(trailing) and trailing <= factor * lowest
        onset = len(losses) if within else min(onset, i)
        if math.isfinite(trailing):
            lowest = min(lowest, trailing)
    return onset


def denoise_lr_grows(r: PlainRecorder) -> None:
    assert all(abs(lr[0] - 0.05 * 1.02**i) < 1e-6 * lr[0] for i, lr in enumerate(r.lrs)), r.lrs[:3]
    val = r.val_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 20 == GROWTH_ONSET, val  # validation every 20 steps
    final, lowest = repair_room(r)
    assert all(not v <= 2 * lowest for v in val[best + 1 :]) and not math.isfinite(final), val
    # the training loss follows: within 40 steps it leaves its best for good, and the run ends NaN
    assert GROWTH_ONSET <= _growth_onset(r.losses) <= GROWTH_ONSET + 40, _growth_onset(r.losses)
    assert first_nonfinite(r.losses) < 200
    fixed = twin(functools.partial(build.denoise_exponential, gamma=0.98), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.05, fixed.val_losses


# ------------------------------------------------------------------------------------------ frozen
def denoise_encoder_frozen(r: PlainRecorder) -> None:
    for grads, step in zip(r.zero_grad_rows, r.update_ratios, strict=True):
        # the encoder's weights get gradients, yet never change; the decoder's change every step
        assert grads["net.encoder.0.weight"] < 1.0 and grads["net.encoder.2.weight"] < 1.0, grads
        assert all(v == 0.0 for k, v in step.items() if k.startswith("net.encoder.")), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("net.decoder.")), step
    fixed = twin(functools.partial(build.denoise_decoder_only, everything=True), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.8 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ collapse
def char_lr_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.1 * lr0) == POLY_ONSET
    assert all(lr[0] == 0.0 for lr in r.lrs[30:])  # at 0 from step 30 to the end
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[1]) < 1e-6 and final < 1.0001 * lowest, r.val_losses  # frozen in place
    fixed = twin(functools.partial(build.char_polynomial, interval="epoch"), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.25 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ activations
class TanhProbe(pl.Callback):
    """The fraction of each tanh layer's outputs beyond +-0.99 on each training batch, layer by layer."""

    def __init__(self) -> None:
        self.saturated: list[list[float]] = []

    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, *args: Any
    ) -> None:
        fractions, h = [], batch[0]
        with torch.no_grad():
            for layer in pl_module.net:
                h = layer(h)
                if isinstance(layer, torch.nn.Tanh):
                    fractions.append(float((h.abs() > 0.99).float().mean()))
        self.saturated.append(fractions)


def _tanh_saturation(std: float | None) -> TanhProbe:
    torch.manual_seed(0)
    model, train, _ = build.wine_tanh_unit_normal(std)
    probe = TanhProbe()
    fast_trainer(max_steps=300, max_epochs=1000, callbacks=[probe], limit_val_batches=0).fit(model, train)
    return probe


def wine_tanh_saturates(r: PlainRecorder) -> None:
    bad, good = _tanh_saturation(1.0), _tanh_saturation(None)
    # on every batch from step 0: over 30% of the first layer's outputs and 70% of the second's at +-1
    first, second = min(s[0] for s in bad.saturated), min(s[1] for s in bad.saturated)
    assert first > 0.3 and second > 0.7, (first, second)
    assert max(max(s) for s in good.saturated) < 0.1, good.saturated[:3]
    fixed = twin(functools.partial(build.wine_tanh_unit_normal, std=None))
    assert fixed.val_losses[-1] < 0.2 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ data
def char_loader_stalls(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.char_slow_loader, rebuild_vocabulary=False), max_steps=80,
                 val_check_interval=40)  # fmt: skip
    assert fixed.losses == r.losses  # the same batches, bit for bit: only the loading differs
    wait, step = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert wait > 2 * step and sum(r.wait_s) > 0.6 * (sum(r.wait_s) + sum(r.step_s)), (wait, step)
    assert wait > 5 * statistics.median(fixed.wait_s), (wait, statistics.median(fixed.wait_s))
    assert r.val_losses[-1] < 0.5 * r.losses[0]  # it learns, slowly in wall time


def _outlier_steps(steps: int) -> list[bool]:
    """Which of the first ``steps`` training batches hold a 12-bit scan (a fresh loader: the same order)."""
    _, train, _ = build.denoise_mixed_scale()
    held: list[bool] = []
    while len(held) < steps:
        held += [float(y.max()) > 2.0 for _, y in itertools.islice(train, steps - len(held))]
    return held


def denoise_outliers(r: PlainRecorder) -> None:
    held = _outlier_steps(len(r.losses))
    assert held.index(True) == OUTLIER_ONSET and 20 <= sum(held) <= 60, sum(held)
    normal = [loss for loss, h in zip(r.losses, held, strict=True) if not h]
    spikes = [loss for loss, h in zip(r.losses, held, strict=True) if h]
    median = statistics.median(normal)
    assert min(spikes) > 50 * median and max(normal) < 20 * median, (min(spikes), max(normal), median)
    fixed = twin(functools.partial(build.denoise_mixed_scale, rescaled=True), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.8 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ healthy
def char_one_cycle_trains(r: PlainRecorder) -> None:
    trains(r, 0.15 * r.val_losses[0])
    lrs = [lr[0] for lr in r.lrs]
    assert lrs[0] < 0.05 * max(lrs) and lrs[-1] < 1e-5 * max(lrs) and 80 <= lrs.index(max(lrs)) <= 100


def sines_restarts_train(r: PlainRecorder) -> None:
    trains(r, 0.15)
    for step in build.RESTARTS:
        assert r.lrs[step - 1][0] < 1e-5 and abs(r.lrs[step][0] - 3e-3) < 1e-9, r.lrs[step - 1 : step + 1]


def denoise_warmup_trains(r: PlainRecorder) -> None:
    trains(r, 0.035)
    assert abs(r.lrs[0][0] - 5e-4) < 1e-9 and abs(r.lrs[build.WARMUP][0] - 0.05) < 1e-9
    assert mean(r.losses[:10]) > 0.85 * r.losses[0], r.losses[:10]  # little moves at first


def denoise_raw_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.val_losses[0])
    assert mean(r.losses[:10]) > 20 and r.grad_norms[0] > 10, (r.losses[:3], r.grad_norms[0])


def wine_random_features_train(r: PlainRecorder) -> None:
    trains(r, 0.1)
    assert all(set(step) == {"net.2.weight", "net.2.bias"} for step in r.update_ratios)


def iris_noisy_trains(r: PlainRecorder) -> None:
    trains(r, 0.4 * IRIS_TRIVIAL)  # on the clean validation labels
    assert mean(r.losses[-50:]) > 0.5, mean(r.losses[-50:])  # the noisy labels keep a training floor


def wine_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.05)
    v = r.val_losses
    assert v[-1] < v[0] / 50 and sum(b > a for a, b in itertools.pairwise(v)) >= 1, v


def denoise_big_batch_trains(r: PlainRecorder) -> None:
    trains(r, 0.05)
    assert len(r.losses) == 80 and r.val_losses[-1] < 0.5 * r.val_losses[0]


def sines_step_decay_trains(r: PlainRecorder) -> None:
    trains(r, 0.12)
    step = build.DECAY_STEP
    assert r.lrs[step - 1] == [0.1] and abs(r.lrs[step][0] - 0.01) < 1e-12, r.lrs[step - 1 : step + 1]


def char_dropout_trains(r: PlainRecorder) -> None:
    trains(r, 0.2 * r.val_losses[0])
    assert r.epoch_train_losses[-1] > 1.5 * r.val_losses[-1], (r.epoch_train_losses, r.val_losses)


def iris_poly_trains(r: PlainRecorder) -> None:
    trains(r, 0.12)
    assert all(lr[0] < 0.01 * r.lrs[0][0] for lr in r.lrs[-30:])
