"""Proofs of zoo 27's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo27 import _builds as build

YIELD_ONSET = 85  # the first batch (of a fixed shuffle) holding a reaction reported at exactly 100%
NESTEROV_ONSET = 10  # the first step run above the meant LR, 0.03, on the warm-up
PLATEAU_ONSET = 7  # the first step run below 2% of the LR (halved at every step that is not a new low)
OVERFIT_ONSET = 40  # after epoch 8 (5 steps each) the validation loss never returns to its best
GAMMA_ONSET = 150  # the validation after step 150 is the last good one; the LR is past 19x its base there
RELU_ONSET = 1  # the logit's ReLU passes no gradient from here on (step 0 moved it below zero)
POLY_ONSET = 30  # PolynomialLR(total_iters=30): the LR is 0 from here

LN3, LN6 = math.log(3), math.log(build.DETECTIONS)


# ------------------------------------------------------------------------------------------ helpers
def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def finite(xs: list[float]) -> bool:
    return all(math.isfinite(x) for x in xs)


def first_nonfinite(xs: list[float]) -> int:
    return next((i for i, x in enumerate(xs) if not math.isfinite(x)), len(xs))


def twin(make: Callable[[], Any], max_steps: int = 300, **trainer_kwargs: Any) -> PlainRecorder:
    """Train ``make`` (a run's build with its bug fixed, or a variant) with the plain recorder alone."""
    case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                     max_steps=max_steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(case, monitor=False)[1]


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """The final validation loss and the lowest one (what a repair restoring the best weights keeps)."""
    finite_vals = [v for v in r.val_losses if math.isfinite(v)]
    return r.val_losses[-1], min(finite_vals)


def trains(r: PlainRecorder, below: float) -> None:
    """A healthy run: finite losses and a last validation loss under ``below``."""
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    assert r.val_losses[-1] < below, (r.val_losses, below)


def batches(loader: Any, steps: int) -> Iterator[Any]:
    """The first ``steps`` batches a training run draws from ``loader`` (epoch after epoch)."""
    return itertools.islice(itertools.chain.from_iterable(itertools.repeat(loader)), steps)


def _best(val: list[float]) -> int:
    return min(range(len(val)), key=val.__getitem__)


def prior_entropy() -> float:
    """The cross-entropy of predicting the training class frequencies of the secondary structure."""
    _, y = build.chains(200, 0)
    p = torch.bincount(y.flatten(), minlength=3).float() / y.numel()
    return float(-(p * p.log()).sum())


def saturated_tanh(make: Callable[[], Any], seed: int = 0) -> list[float]:
    """Per tanh layer of a freshly built data-association model (built as its run builds it), the share of
    its outputs on the first training batch with ``|tanh| > 0.99``."""
    torch.manual_seed(seed)
    model, train, _ = make()
    shares: list[float] = []
    hooks = [m.register_forward_hook(lambda m, i, o: shares.append(float((o.abs() > 0.99).float().mean())))
             for m in model.net.modules() if isinstance(m, nn.Tanh)]  # fmt: skip
    a, b, _ = next(iter(train))
    with torch.no_grad():
        model.net(a, b)
    for hook in hooks:
        hook.remove()
    return shares


# ------------------------------------------------------------------------------------------ chance-level pair
def ss_mask_stuck(r: PlainRecorder) -> None:
    h = prior_entropy()
    assert all(abs(v - h) < 0.05 * h for v in r.val_losses[1:]), (r.val_losses, h)
    assert mean(r.losses[-50:]) > 0.95 * h and r.lrs[0] == [3e-3]
    x, _ = next(iter(build.ss_mask_inverted()[1]))
    real = x.view(len(x), 7, 21)[:, :, : build.PAD]
    assert float(real.abs().sum()) == 0.0  # no real residue reaches the network
    fixed = twin(functools.partial(build.ss_mask_inverted, mask_pad="real"), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.4 * h, fixed.val_losses


def ss_adagrad_stuck(r: PlainRecorder) -> None:
    assert all(abs(v - r.val_losses[0]) < 0.01 for v in r.val_losses), r.val_losses
    assert all(abs(v - LN3) < 0.02 * LN3 for v in r.val_losses) and r.lrs[0] == [1e-5]
    assert max(r.zero_grad_rows[0].values()) == 0.0  # the windows reach every unit
    fixed = twin(functools.partial(build.ss_adagrad, lr=1e-2), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.4 * LN3, fixed.val_losses


# ------------------------------------------------------------------------------------------ NaN pair
def yield_logit_nan(r: PlainRecorder) -> None:
    _, train, _ = build.yield_logit_target()
    bad = [i for i, (_, _, y) in enumerate(batches(train, 300)) if (y >= 100).any()]
    assert bad[0] == YIELD_ONSET and len(bad) <= 10, bad
    at = first_nonfinite(r.losses)
    assert at == YIELD_ONSET and max(r.grad_norms[:at]) < 50, (at, max(r.grad_norms[:at]))
    assert all(math.isnan(v) for v in r.losses[at + 1 :])  # one non-finite update: every weight is NaN
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.25 * r.val_losses[0], r.val_losses
    fixed = twin(functools.partial(build.yield_logit_target, exact=0), val_check_interval=10)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.25 * r.val_losses[0], fixed.val_losses


def yield_nesterov_nan(r: PlainRecorder) -> None:
    lrs = [lr[0] for lr in r.lrs]
    assert next(i for i, lr in enumerate(lrs) if lr > 0.03 + 1e-9) == NESTEROV_ONSET, lrs[:12]
    at = first_nonfinite(r.losses)
    assert NESTEROV_ONSET < at < 40 and finite(r.losses[:at]), (at, r.losses[:at])
    assert max(r.losses[NESTEROV_ONSET:at]) > 10 * r.losses[0], r.losses[:at]  # it swings before it breaks
    fixed = twin(functools.partial(build.yield_nesterov, lr=0.03), val_check_interval=10)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.3 * fixed.val_losses[0], fixed.val_losses


def yield_plateau_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert lr0 == 3e-3 and next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.02 * lr0) == PLATEAU_ONSET
    assert r.lrs[-1][0] < 1e-5 * lr0
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[0]) < 0.01 * final, r.val_losses  # frozen near its start
    fixed = twin(functools.partial(build.yield_plateau_per_step, interval="epoch"), val_check_interval=25)
    assert fixed.lrs[-1] == [3e-3] and fixed.val_losses[-1] < 0.2 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ rising-val pair
def grasp_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = _best(val)
    assert (best + 1) * 10 == OVERFIT_ONSET, best  # validation every 2 epochs of 5 steps
    final, lowest = repair_room(r)
    assert final > 1.8 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.05 * train[best], (train[-1], train[best])  # the 160 patches memorised
    fixed = twin(functools.partial(build.grasp_augment_val, augment="train"), max_steps=200,
                 check_val_every_n_epoch=2)  # fmt: skip
    assert fixed.val_losses[-1] < 0.6 * final, (fixed.val_losses, final)


def grasp_lr_grows(r: PlainRecorder) -> None:
    lrs = [lr[0] for lr in r.lrs]
    assert lrs[GAMMA_ONSET] > 19 * 1e-3 and lrs[-1] > 300 * 1e-3, (lrs[GAMMA_ONSET], lrs[-1])
    final, lowest = repair_room(r)
    assert (_best(r.val_losses) + 1) * 25 == GAMMA_ONSET, r.val_losses
    assert final > 1.5 * lowest and min(r.val_losses[GAMMA_ONSET // 25 :]) > 1.2 * lowest, r.val_losses
    fixed = twin(functools.partial(build.grasp_gamma, gamma=1.0), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.8 * final, (fixed.val_losses, final)


# ------------------------------------------------------------------------------------------ saturation pair
def assoc_pixels_saturated(r: PlainRecorder) -> None:
    shares = saturated_tanh(build.assoc_pixels)
    fixed_shares = saturated_tanh(functools.partial(build.assoc_pixels, scaled=True))
    assert shares[0] > 0.5 and fixed_shares[0] < 0.05, (shares, fixed_shares)  # the encoder's first tanh
    fixed = twin(functools.partial(build.assoc_pixels, scaled=True), val_check_interval=25)
    assert r.val_losses[-1] > 3 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


def assoc_init_saturated(r: PlainRecorder) -> None:
    shares = saturated_tanh(build.assoc_normal_init)
    fixed_shares = saturated_tanh(functools.partial(build.assoc_normal_init, std=0))
    assert max(shares) > 0.5 and max(fixed_shares) < 0.05, (shares, fixed_shares)
    assert r.losses[0] > 2.5 * LN6 and r.val_losses[-1] > 0.5 * LN6, (r.losses[0], r.val_losses)
    fixed = twin(functools.partial(build.assoc_normal_init, std=0), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.1 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


# ------------------------------------------------------------------------------------------ single causes
def assoc_encoder_frozen(r: PlainRecorder) -> None:
    for step in r.update_ratios:
        assert all(v == 0.0 for k, v in step.items() if k.startswith("net.encoder.")), step
        assert any(v > 0.0 for k, v in step.items() if k.startswith("net.scorer.")), step
    assert all(not any(k.startswith("net.encoder.") for k in rows) for rows in r.zero_grad_rows)
    fixed = twin(functools.partial(build.assoc_no_grad_encoder, frozen=False), val_check_interval=25)
    assert r.val_losses[-1] > 2.5 * fixed.val_losses[-1], (r.val_losses, fixed.val_losses)


def assoc_targets_stuck(r: PlainRecorder) -> None:
    assert all(abs(v - LN6) < 0.01 * LN6 for v in r.val_losses), r.val_losses
    assert abs(mean(r.losses[-50:]) - LN6) < 0.01 * LN6
    fixed = twin(functools.partial(build.assoc_targets_unpermuted, permuted=True), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.1 * LN6, fixed.val_losses


def ss_stalls(r: PlainRecorder) -> None:
    wait, step = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert wait > 5 * step, (wait, step)
    fixed = twin(functools.partial(build.ss_per_item, per_item=False), max_steps=50)
    assert wait > 8 * statistics.median(fixed.wait_s), (wait, statistics.median(fixed.wait_s))
    assert abs(fixed.losses[-1] - r.losses[-1]) < 1e-4 * abs(r.losses[-1])  # the same batches, only slower


def grasp_logit_dead(r: PlainRecorder) -> None:
    last = "net.9.weight"  # the Linear producing the logit, under its ReLU
    dead = [rows[last] == 1.0 for rows in r.zero_grad_rows]
    onset = next(i for i in range(len(dead)) if all(dead[i:]))  # dead for good from here
    assert onset == RELU_ONSET, (onset, [i for i, d in enumerate(dead) if not d])
    assert all(abs(v - math.log(2)) < 1e-3 for v in r.val_losses), r.val_losses
    fixed = twin(functools.partial(build.grasp_relu_logit, relu=False), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.5 * math.log(2), fixed.val_losses


def heat_lr_collapses(r: PlainRecorder) -> None:
    assert r.lrs[POLY_ONSET - 1][0] > 0 and all(lr == [0.0] for lr in r.lrs[POLY_ONSET:]), r.lrs[25:35]
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[1]) < 0.01 * final, r.val_losses  # frozen from step 30
    fixed = twin(functools.partial(build.heat_polynomial, total_iters=300), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.05 * lowest, (fixed.val_losses, lowest)


def heat_gradients_accumulate(r: PlainRecorder) -> None:
    fixed = twin(build.heat_manual, val_check_interval=25)
    g, f = r.grad_norms, fixed.grad_norms
    assert g[0] == f[0] and g[1] > 1.5 * f[1], (g[:3], f[:3])  # step 1's gradient holds step 0's
    assert max(g[:100]) > 1e4 * g[0] and max(f) < 2 * f[0], (max(g[:100]), max(f))
    assert max(r.val_losses[:4]) > 1e3 * fixed.val_losses[0], r.val_losses
    assert fixed.val_losses[-1] < 0.02 * fixed.val_losses[0], fixed.val_losses


# ------------------------------------------------------------------------------------------ healthy
def ss_regularised_trains(r: PlainRecorder) -> None:
    trains(r, 0.75 * r.val_losses[0])
    assert mean(r.losses[-50:]) > 0.8 and mean(r.losses[-50:]) > r.val_losses[-1] + 0.1  # a high train floor


def ss_weighted_trains(r: PlainRecorder) -> None:
    trains(r, 0.4 * LN3)


def assoc_bf16_trains(r: PlainRecorder) -> None:
    trains(r, 0.15 * LN6)
    assert r.val_losses[0] > 0.7 * LN6  # a slow start


def assoc_plateau_trains(r: PlainRecorder) -> None:
    trains(r, 0.65 * LN6)
    assert all(abs(v - LN6) < 0.02 * LN6 for v in r.val_losses[:2]), r.val_losses  # the plateau
    assert all(b < a for a, b in itertools.pairwise(r.val_losses[2:])), r.val_losses  # then the drop


def yield_radam_trains(r: PlainRecorder) -> None:
    trains(r, 0.2 * r.val_losses[0])
    assert r.losses[0] > 1000 and max(r.grad_norms) > 1000, (r.losses[0], max(r.grad_norms))


def yield_small_batches_train(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.val_losses[0])
    late = r.losses[-100:]
    assert max(late) > 50 * min(late), (max(late), min(late))  # a very noisy per-step loss


def grasp_accumulated_trains(r: PlainRecorder) -> None:
    trains(r, 0.7 * r.val_losses[0])
    # four batches an optimizer step (two at an epoch's end: 250 batches an epoch)
    assert len(r.grad_norms) == 100 and len(r.losses) > 3.9 * 100


def grasp_restarts_train(r: PlainRecorder) -> None:
    trains(r, 0.65 * r.val_losses[0])
    lrs = [lr[0] for lr in r.lrs]
    assert lrs[49] < 1e-3 and lrs[50] == 0.05 and lrs[149] < 1e-3 and lrs[150] == 0.05, (lrs[48:52],)


def heat_nll_trains(r: PlainRecorder) -> None:
    trains(r, r.val_losses[0] - 1.5)
    assert max(r.val_losses) < 0 and mean(r.losses[-50:]) < -2.5  # below zero


def heat_nesterov_trains(r: PlainRecorder) -> None:
    trains(r, 0.01 * r.losses[0])
    faster = twin(functools.partial(build.heat_nesterov_high_lr, lr=1.0), max_steps=50)
    assert not finite(faster.losses)  # twice the LR diverges


def heat_manual_trains(r: PlainRecorder) -> None:
    trains(r, 0.02 * r.val_losses[0])
