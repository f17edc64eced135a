"""Proofs of zoo 25's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

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

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo25 import _builds as build

BLANK_ONSET = 49  # the first batch (of a fixed shuffle) holding a blank frame
COLLAPSE_ONSET = 60  # the first step run below 2% of the LR (halved every 10 steps)
OVERFIT_ONSET = 14  # after epoch 7 (2 steps each) the validation loss never returns to its best
JUMP_ONSET = build.CONSTANT_STEPS  # the first step run at the full RMSprop LR
DEAD_ONSET = 44  # the first step at which >10% of the CNN's channels get no gradient at all
SENTINEL_ONSET = 0  # the first batch (of a fixed shuffle) holding a 6553.5 mph reading
PORTFOLIO_ONSET = 20  # after epoch 10 (2 steps each) the validation Sharpe ratio never returns to its best

LOG5 = math.log(build.LANGUAGES)  # the cross-entropy of a uniform guess among the five languages


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


def dead_share(r: PlainRecorder) -> list[float]:
    """Per step, the mean over the CNN's weights of the share of output channels with an exactly zero
    gradient (a ReLU channel that is never positive passes none back)."""
    return [mean(list(rows.values())) for rows in r.zero_grad_rows]


def batches(loader: Any, steps: int) -> Iterator[Any]:
    """The first ``steps`` batches a training run draws from ``loader`` (epoch after epoch)."""
    return itertools.islice(itertools.chain.from_iterable(itertools.repeat(loader)), steps)


def _best(val: list[float]) -> int:
    return min(range(len(val)), key=val.__getitem__)


# ------------------------------------------------------------------------------------------ NaN pair
def orientation_blank_nan(r: PlainRecorder) -> None:
    _, train, _ = build.orientation_blank_frames()
    bad = [i for i, (x, _) in enumerate(batches(train, 300)) if not x.isfinite().all()]
    assert bad[0] == BLANK_ONSET and len(bad) <= 9, bad  # three bad frames an epoch of 100 batches
    at = first_nonfinite(r.losses)
    assert at == BLANK_ONSET and max(r.grad_norms[:at]) < 2, (at, r.grad_norms[:at])
    assert all(math.isnan(v) for v in r.losses[at + 1 :])  # one NaN update: every weight is NaN
    final, lowest = repair_room(r)
    assert math.isnan(final) and lowest < 0.005, r.val_losses
    fixed = twin(functools.partial(build.orientation_blank_frames, blank=False), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.005, fixed.val_losses


def orientation_momentum_nan(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert at <= 10 and finite(r.losses[:at]), r.losses[: at + 1]
    assert max(r.losses[:at]) > 1e6 * r.losses[0], r.losses[:at]  # it grows before it breaks
    assert finite(r.grad_norms[:2]) and r.lrs[0] == [1.0]
    fixed = twin(functools.partial(build.orientation_sgd_momentum, dampening=0.99), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.05, fixed.val_losses


# ------------------------------------------------------------------------------------------ stuck-high pair
def jets_detached_frozen(r: PlainRecorder) -> None:
    assert all(lrs == [5e-3] for lrs in r.lrs)
    for step in r.update_ratios:
        assert all(v == 0.0 for k, v in step.items() if k.startswith("net.phi.")), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("net.rho.")), step
    assert all(set(rows) == {"net.rho.weight"} for rows in r.zero_grad_rows)  # phi never gets a gradient
    fixed = twin(functools.partial(build.jets_detached, detach=False), val_check_interval=25)
    assert r.val_losses[-1] > 0.55 and fixed.val_losses[-1] < 0.5 * r.val_losses[-1], (
        r.val_losses,
        fixed.val_losses,
    )


def jets_lr_collapses(r: PlainRecorder) -> None:
    lr0 = r.lrs[0][0]
    assert lr0 == 5e-3 and next(i for i, lr in enumerate(r.lrs) if lr[0] < 0.02 * lr0) == COLLAPSE_ONSET
    assert r.lrs[-1][0] < 1e-8 * lr0  # halved 29 times
    final, lowest = repair_room(r)
    assert abs(final - r.val_losses[COLLAPSE_ONSET // 25]) < 0.01 * final, r.val_losses  # frozen in place
    fixed = twin(functools.partial(build.jets_step_frequency, interval="epoch"), val_check_interval=25)
    assert fixed.lrs[-1] == [5e-3] and fixed.val_losses[-1] < 0.5 * lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ rising-val pair
def langid_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = _best(val)
    assert (best + 1) * 2 == OVERFIT_ONSET, best
    final, lowest = repair_room(r)
    assert final > 1.5 * lowest and min(val[best + 1 :]) > lowest, (final, lowest)
    assert train[-1] < 0.001 * train[best], (train[-1], train[best])  # the 100 documents memorised


def langid_lr_jumps(r: PlainRecorder) -> None:
    assert r.lrs[JUMP_ONSET - 1] == [0.3 * 0.01] and r.lrs[JUMP_ONSET] == [0.3], r.lrs[98:102]
    final, lowest = repair_room(r)  # validation every 20 steps: the best is before the jump
    assert lowest == min(r.val_losses[: JUMP_ONSET // 20]), r.val_losses
    assert mean(r.losses[JUMP_ONSET + 20 :]) > 2.5 * mean(r.losses[JUMP_ONSET - 20 : JUMP_ONSET])
    assert final > 3 * lowest and final > 0.9 * LOG5, (final, lowest)
    fixed = twin(functools.partial(build.langid_constant_lr, lr=3e-3), val_check_interval=20)
    assert fixed.val_losses[-1] < lowest, (fixed.val_losses, lowest)


# ------------------------------------------------------------------------------------------ trivial-loss pair
def langid_labels_stuck(r: PlainRecorder) -> None:
    assert all(abs(v - LOG5) < 0.05 * LOG5 for v in r.val_losses), r.val_losses
    assert mean(r.losses[-50:]) > 0.9 * LOG5 and r.lrs[0] == [1e-2]
    assert max(r.zero_grad_rows[0].values()) == 0.0  # the inputs reach every weight
    fixed = twin(functools.partial(build.langid_shuffled_labels, shuffled=False), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.4 * LOG5, fixed.val_losses


def langid_lr_stuck(r: PlainRecorder) -> None:
    assert all(abs(v - r.val_losses[0]) < 0.005 * LOG5 for v in r.val_losses), r.val_losses
    assert all(abs(v - LOG5) < 0.02 * LOG5 for v in r.val_losses) and r.lrs[0] == [1e-5]
    assert max(r.zero_grad_rows[0].values()) == 0.0
    fixed = twin(functools.partial(build.langid_adamax, lr=1e-2), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.4 * LOG5, fixed.val_losses


# ------------------------------------------------------------------------------------------ dead-unit pair
def edges_dead_from_init(r: PlainRecorder) -> None:
    assert all(share == 1.0 for share in dead_share(r))  # from step 0 no channel passes a gradient
    fixed = twin(functools.partial(build.edges_prior_bias, prior=False), val_check_interval=25)
    assert max(dead_share(fixed)) < 0.2, max(dead_share(fixed))
    assert fixed.val_losses[-1] < 0.35 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def edges_dead_from_lr(r: PlainRecorder) -> None:
    share = dead_share(r)
    assert max(share[:DEAD_ONSET]) < 0.08 and share[DEAD_ONSET] > 0.1, share[: DEAD_ONSET + 1]
    assert min(share[DEAD_ONSET + 8 :]) == 1.0, share  # every channel dead for good
    assert max(lr[0] for lr in r.lrs) > 0.29
    final, lowest = repair_room(r)
    assert lowest == r.val_losses[0] and final > 1.4 * lowest, r.val_losses
    fixed = twin(functools.partial(build.edges_onecycle, max_lr=3e-3), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.8 * lowest and max(dead_share(fixed)) < 0.2, fixed.val_losses


# ------------------------------------------------------------------------------------------ single causes
def traffic_stalls(r: PlainRecorder) -> None:
    wait, step = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert wait > 5 * step, (wait, step)
    fixed = twin(functools.partial(build.traffic_per_item_stats, per_item=False), max_steps=100)
    assert wait > 8 * statistics.median(fixed.wait_s), (wait, statistics.median(fixed.wait_s))
    assert abs(fixed.losses[-1] - r.losses[-1]) < 1e-4 * abs(r.losses[-1])  # the same batches, only slower


def traffic_outliers(r: PlainRecorder) -> None:
    _, train, _ = build.traffic_sentinels()
    big = 100.0  # a scaled reading beyond 100 spreads from the centre is a sentinel
    seen = [(bool(x.abs().amax() > big), bool(y.abs().amax() > big)) for x, y in batches(train, 300)]
    assert next(i for i, (x, y) in enumerate(seen) if x or y) == SENTINEL_ONSET
    target_hit = [i for i, (_, y) in enumerate(seen) if y]
    clean = [r.losses[i] for i, (x, y) in enumerate(seen) if not (x or y)]
    typical = statistics.median(clean)
    assert 5 <= len(target_hit) <= 20 and len(clean) > 100, (len(target_hit), len(clean))
    assert min(r.losses[i] for i in target_hit) > 1000 * typical, (typical, target_hit)
    assert finite(r.losses)
    fixed = twin(functools.partial(build.traffic_sentinels, count=0), val_check_interval=25)
    assert fixed.val_losses[-1] < 0.7 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def portfolio_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = _best(val)
    assert (best + 1) * 2 == PORTFOLIO_ONSET, best
    final, lowest = repair_room(r)  # minus the validation Sharpe ratio: lower is better
    assert final > lowest + 0.6 and min(val[best + 1 :]) > lowest, (final, lowest)
    # an in-sample Sharpe ratio past 20, 10 more than at the best epoch
    assert train[-1] < -20 and train[-1] < train[best] - 10, (train[-1], train[best])


# ------------------------------------------------------------------------------------------ healthy
def orientation_ema_trains(r: PlainRecorder) -> None:
    trains(r, 0.05)
    assert r.val_losses[0] > 1.0 and max(r.grad_norms[:50]) > 2, r.val_losses[:3]  # a wild start


def orientation_rprop_trains(r: PlainRecorder) -> None:
    trains(r, 0.01 * r.losses[0])
    assert max(r.grad_norms[-10:]) < 0.01 * r.grad_norms[0]  # gradients fade as the loss does
    assert all(b <= a for a, b in itertools.pairwise(r.val_losses[:5])), r.val_losses


def jets_bf16_trains(r: PlainRecorder) -> None:
    trains(r, 0.3)
    assert sum(g > 0.5 for g in r.grad_norms) > 20  # the clip is active on many steps


def jets_cosine_trains(r: PlainRecorder) -> None:
    trains(r, 0.3)
    assert r.lrs[-1][0] < 1e-3 * r.lrs[0][0] and abs(r.val_losses[-1] - r.val_losses[-3]) < 0.01


def langid_noisy_trains(r: PlainRecorder) -> None:
    trains(r, 0.5 * LOG5)  # on the clean validation labels
    assert mean(r.losses[-50:]) > 0.9, mean(r.losses[-50:])  # a training floor from the noisy labels


def langid_cyclic_trains(r: PlainRecorder) -> None:
    trains(r, 0.3 * r.val_losses[0])
    assert max(lr[0] for lr in r.lrs) > 0.45 and r.lrs[2 * build.CYCLE][0] < 0.02


def langid_warm_start_trains(r: PlainRecorder) -> None:
    trains(r, 0.25 * LOG5)
    assert r.lrs[JUMP_ONSET - 1] == [1e-4] and r.lrs[JUMP_ONSET] == [1e-3]
    assert all(b < a for a, b in itertools.pairwise(r.val_losses)), r.val_losses


def edges_tiny_val_trains(r: PlainRecorder) -> None:
    trains(r, 0.6 * r.val_losses[0])
    assert max(dead_share(r)) < 0.2


def traffic_mph_trains(r: PlainRecorder) -> None:
    trains(r, 0.2 * r.val_losses[0])
    assert r.losses[0] > 30 and r.grad_norms[0] > 10, (r.losses[0], r.grad_norms[0])


def traffic_two_optimizers_train(r: PlainRecorder) -> None:
    trains(r, 0.1)
    assert len(r.grad_norms) == 2 * len(r.losses)  # one backward, two optimizer steps a batch


def portfolio_sharpe_trains(r: PlainRecorder) -> None:
    trains(r, r.val_losses[0] - 0.5)  # minus the validation Sharpe ratio
    late = r.losses[-50:]
    assert mean(late) < -2 and statistics.stdev(late) > 1 and max(r.losses) > 0, late  # negative, noisy
