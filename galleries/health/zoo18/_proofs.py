"""Proofs of zoo 18's runs, from a :class:`PlainRecorder` of each run trained without the monitor.

A problem's proof shows the problem is real (against a healthy twin, the same run with the bug fixed, where a
twin makes the point) and measures ``onset_step``; a repairable run's proof also measures its final and its
best validation loss (what a repair could save); a healthy run's proof shows it trains well. Plain torch and
Lightning only: no ``lightning_recipes`` product code runs. The small helpers are this zoo's own (written
blind: no other zoo's code is used).
"""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from typing import Any

from galleries.health.field._case import FieldCase, PlainRecorder, run_case
from galleries.health.zoo18 import _builds as build
from galleries.health.zoo18 import _data as data

LN2 = math.log(2)
GAP_BATCH = build.GAP_BATCH  # the batch holding the NaN reading (read in order)
OVERFIT_ONSET = 30  # the link embeddings' best validation is after epoch 2 (15 steps each); worse ever after
CYCLIC_ONSET = 75  # the first step from which the character GRU's loss stays 1.5x above its best
POLY_ONSET = build.POLY_ITERS  # the first step run at an LR of exactly 0


# ------------------------------------------------------------------------------------------ helpers
def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def finite(values: Sequence[float]) -> bool:
    return all(math.isfinite(v) for v in values)


def first_nonfinite(values: Sequence[float]) -> int:
    return next(i for i, v in enumerate(values) if not math.isfinite(v))


def dead_rows(r: PlainRecorder, name: str) -> list[float]:
    """Per step, the fraction of ``name``'s rows (units) whose gradient is exactly zero."""
    return [step[name] for step in r.zero_grad_rows]


def updates(r: PlainRecorder, prefix: str) -> list[float]:
    """Per step, the largest update-to-weight ratio among the parameters named ``prefix...``."""
    return [max(v for k, v in step.items() if k.startswith(prefix)) for step in r.update_ratios]


def twin(make: Callable[[], Any], steps: int = 300, **trainer_kwargs: Any) -> PlainRecorder:
    """Train ``make`` (a builder, usually the bug fixed) as a case is trained, and return its recording."""
    case = FieldCase(name="twin", build=make, expected=None, onset_step=0, proof=lambda r: None,
                     max_steps=steps, trainer_kwargs=trainer_kwargs)  # fmt: skip
    return run_case(case, monitor=False)[1]


def repair_room(r: PlainRecorder) -> tuple[float, float]:
    """``(final, best)`` validation loss (the best over the finite ones): what stopping at the best, or
    rolling back to it, would save."""
    return r.val_losses[-1], min(v for v in r.val_losses if math.isfinite(v))


def lasting_rise(losses: Sequence[float], factor: float = 1.5, window: int = 5) -> int:
    """The first step from which every ``window``-step mean of the loss stays above ``factor`` times the
    lowest such mean before it."""
    means = [mean(losses[i : i + window]) for i in range(len(losses) - window + 1)]
    for t in range(1, len(means)):
        if all(m > factor * min(means[:t]) for m in means[t:]):
            return t
    raise AssertionError("no lasting rise")


def trains(r: PlainRecorder, below: float, slack: float = 1.3) -> None:
    """A healthy run: finite, its last validation loss under ``below`` and within ``slack`` of its best."""
    assert finite(r.losses) and finite(r.val_losses), r.val_losses
    final, best = repair_room(r)
    assert final < below and final <= slack * best, (r.val_losses, below)


# the validation NLL of the best constant prediction (the training mean and variance)
_TY, _VY = data.heteroscedastic(4096, 0)[1], data.heteroscedastic(512, 1)[1]
_TVAR = float(_TY.var(unbiased=False))
HETERO_MARGINAL = 0.5 * (
    math.log(_TVAR) + float(((_VY - _TY.mean()) ** 2).mean()) / _TVAR + math.log(2 * math.pi)
)


# ------------------------------------------------------------------------------------------ NaN pair
def hetero_gap_nan(r: PlainRecorder) -> None:
    around = r.losses[GAP_BATCH - 2 : GAP_BATCH + 2]
    assert finite(r.losses[:GAP_BATCH]) and first_nonfinite(r.losses) == GAP_BATCH, around
    assert max(r.grad_norms[:GAP_BATCH]) < 10 and max(r.losses[:GAP_BATCH]) < 2 * r.losses[0]  # calm before
    assert all(math.isnan(v) for v in r.losses[GAP_BATCH + 1 :])  # the NaN update made every weight NaN
    final, best = repair_room(r)
    assert math.isnan(final) and best < 0.9, r.val_losses
    fixed = twin(functools.partial(build.hetero_sensor_gap, gap=False), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.6 * best, (fixed.val_losses, best)


def hetero_sgd_nan(r: PlainRecorder) -> None:
    at = first_nonfinite(r.losses)
    assert at <= 12 and finite(r.losses[:at]), r.losses[: at + 1]
    assert max(r.losses[:at]) > 10 * r.losses[0], r.losses[:at]  # it blows up before it turns non-finite
    assert all(math.isnan(v) for v in r.val_losses), r.val_losses
    fixed = twin(functools.partial(build.hetero_sgd, lr=0.03), val_check_interval=20)
    assert finite(fixed.losses) and fixed.val_losses[-1] < 0.5 * fixed.val_losses[0], fixed.val_losses


# ------------------------------------------------------------------------------------------ dead-unit pair
def _at_marginal(r: PlainRecorder, tolerance: float = 0.02) -> None:
    assert abs(r.val_losses[-1] - HETERO_MARGINAL) < tolerance * HETERO_MARGINAL, (
        r.val_losses,
        HETERO_MARGINAL,
    )


def hetero_bias_dead(r: PlainRecorder) -> None:
    # from the first step, no unit of the second hidden layer is active for any row: no gradient reaches
    # either hidden layer, and the network predicts one mean and one variance for every input
    assert all(v == 1.0 for v in dead_rows(r, "net.body.2.weight")), dead_rows(r, "net.body.2.weight")[:5]
    assert all(v == 1.0 for v in dead_rows(r, "net.body.0.weight"))
    assert all(abs(v - HETERO_MARGINAL) < 0.02 * HETERO_MARGINAL for v in r.val_losses), r.val_losses
    fixed = twin(functools.partial(build.hetero_negative_bias, bias=None), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.4 * HETERO_MARGINAL, fixed.val_losses


def hetero_radam_dead(r: PlainRecorder) -> None:
    fixed = twin(functools.partial(build.hetero_radam, lr=1e-3), val_check_interval=20)
    # from step 0, its first (un-adapted) RAdam steps move the hidden weights ~1000x as far as the meant LR's
    assert r.lrs[0] == [1.0] and updates(r, "net.body")[0] > 300 * updates(fixed, "net.body")[0]
    second = dead_rows(r, "net.body.2.weight")
    assert second[0] < 0.1 and all(v == 1.0 for v in second[-100:]), second[::20]  # alive at first, all dead
    assert min(r.val_losses) < 0.7 * HETERO_MARGINAL  # it had learned something before dying
    _at_marginal(r)
    assert max(dead_rows(fixed, "net.body.2.weight")) < 0.2 and fixed.val_losses[-1] < 0.6 * HETERO_MARGINAL


# ------------------------------------------------------------------------------------------ ln 2 pair
def _stuck_at_ln2(r: PlainRecorder, tolerance: float = 0.005) -> None:
    assert all(abs(v - LN2) < tolerance * LN2 for v in r.val_losses), r.val_losses


def link_negatives_stuck(r: PlainRecorder) -> None:
    _stuck_at_ln2(r)
    assert all(abs(v - LN2) < 0.005 * LN2 for v in r.losses[20:]), r.losses[20:30]
    # the weights move (Adagrad 0.1) and the gradients vanish: the model learns the only answer both labels
    # allow, a score of 0 for every pair
    assert max(updates(r, "net.embedding")[:5]) > 1e-2 and max(r.grad_norms[-20:]) < 1e-3 * max(r.grad_norms)
    fixed = twin(functools.partial(build.link_negatives, buggy=False))
    assert fixed.val_losses[-1] < 0.75 * LN2, fixed.val_losses


def link_lr_stuck(r: PlainRecorder) -> None:
    _stuck_at_ln2(r)
    assert r.lrs[0] == [1e-4] and max(updates(r, "net.embedding")) < 3e-3, max(updates(r, "net.embedding"))
    assert min(r.grad_norms) > 0.01  # the gradients are there, the steps are not
    final, best = repair_room(r)
    assert abs(final - best) < 0.002 * best  # nothing to roll back to: only a higher LR helps
    fixed = twin(functools.partial(build.link_adagrad, lr=0.1))
    assert fixed.val_losses[-1] < 0.75 * best, (fixed.val_losses, best)


# ------------------------------------------------------------------------------------------ rising val
def link_overfits(r: PlainRecorder) -> None:
    val, train = r.val_losses, r.epoch_train_losses
    best = min(range(len(val)), key=val.__getitem__)
    assert (best + 1) * 15 == OVERFIT_ONSET, (best, val)
    final, lowest = repair_room(r)
    assert final > 1.15 * lowest and min(val[best + 1 :]) > lowest, val
    assert train[-1] < 0.6 * train[best], (train[-1], train[best])  # the training loss keeps falling
    fixed = twin(functools.partial(build.link_no_decay, weight_decay=3e-4))
    assert fixed.val_losses[-1] < 0.9 * lowest, (fixed.val_losses, lowest)


def char_cyclic_diverges(r: PlainRecorder) -> None:
    assert lasting_rise(r.losses) == CYCLIC_ONSET, lasting_rise(r.losses)
    assert r.lrs[CYCLIC_ONSET][0] > 10 * 3e-2, r.lrs[CYCLIC_ONSET]  # 10x the meant peak already
    final, best = repair_room(r)
    assert best == min(r.val_losses[: CYCLIC_ONSET // 20 + 1]) and final > 5 * best, r.val_losses
    assert mean(r.losses[-20:]) > 5 * min(r.losses), mean(r.losses[-20:])
    fixed = twin(functools.partial(build.char_cyclic, max_lr=3e-2), val_check_interval=20)
    assert fixed.val_losses[-1] < 0.8 * best, (fixed.val_losses, best)


# ------------------------------------------------------------------------------------------ singles
def char_body_frozen(r: PlainRecorder) -> None:
    assert max(dead_rows(r, "net.gru.weight_hh_l0")) < 1.0  # the GRU does get gradients
    for step in r.update_ratios:
        assert all(v == 0.0 for k, v in step.items() if k.startswith(("net.embedding.", "net.gru."))), step
        assert all(v > 0.0 for k, v in step.items() if k.startswith("net.head.")), step
    fixed = twin(functools.partial(build.char_head_only, head_only=False), steps=200, val_check_interval=20)
    assert fixed.val_losses[-1] < 0.4 * r.val_losses[-1], (fixed.val_losses, r.val_losses)


def mil_lr_collapses(r: PlainRecorder) -> None:
    assert r.lrs[POLY_ONSET - 1][0] > 0 and all(lr == [0.0] for lr in r.lrs[POLY_ONSET:]), r.lrs[
        POLY_ONSET - 2 :
    ][:4]
    assert all(max(step.values()) == 0.0 for step in r.update_ratios[POLY_ONSET:])  # nothing moves again
    final, best = repair_room(r)
    assert final == best == r.val_losses[1], r.val_losses  # frozen from the second validation on
    fixed = twin(functools.partial(build.mil_polynomial, total_iters=20 * POLY_ONSET))  # 30 epochs, as meant
    assert fixed.val_losses[-1] < 0.3 * best, (fixed.val_losses, best)


def _val_label_entropy() -> float:
    _, y = data.digits("val")
    p = [float((y == c).float().mean()) for c in range(10)]
    return -sum(q * math.log(q) for q in p if q > 0)


def patch_blind(r: PlainRecorder) -> None:
    # the patches never reach the class token: the patch projection gets no gradient on any step
    assert all(v == 1.0 for v in dead_rows(r, "net.project.weight")), dead_rows(r, "net.project.weight")[:5]
    prior = _val_label_entropy()
    assert all(abs(v - prior) < 0.01 * prior for v in r.val_losses[1:]), (r.val_losses, prior)
    fixed = twin(functools.partial(build.patch_batch_first, omitted=False), val_check_interval=22)
    assert fixed.val_losses[-1] < 0.1 * prior, fixed.val_losses


def patch_stalls(r: PlainRecorder) -> None:
    waiting, stepping = statistics.median(r.wait_s), statistics.median(r.step_s)
    assert waiting > 3 * stepping and min(r.wait_s) > 2 * stepping, (waiting, min(r.wait_s), stepping)
    fixed = twin(functools.partial(build.patch_archive_per_item, per_item=False), steps=len(r.losses),
                 val_check_interval=22)  # fmt: skip
    assert fixed.losses == r.losses  # the same data in the same order: only the waiting differs
    assert statistics.median(fixed.wait_s) < 0.1 * waiting, (statistics.median(fixed.wait_s), waiting)


# ------------------------------------------------------------------------------------------ healthy
def hetero_onecycle_trains(r: PlainRecorder) -> None:
    trains(r, 0.4 * HETERO_MARGINAL)
    lrs = [lr[0] for lr in r.lrs]
    assert lrs[0] < 3e-5 and abs(max(lrs) - 2e-2) < 1e-6 and lrs[-1] < 1e-6, (lrs[0], max(lrs), lrs[-1])
    assert mean(r.losses[:10]) > 0.9 * HETERO_MARGINAL  # nothing moves at first


def hetero_restarts_train(r: PlainRecorder) -> None:
    trains(r, 0.4 * HETERO_MARGINAL)
    lrs = [lr[0] for lr in r.lrs]
    for restart in (50, 150):
        assert lrs[restart - 1] < 0.01 * lrs[restart] and abs(lrs[restart] - 3e-3) < 1e-9, lrs[restart - 1 :][
            :2
        ]


def link_big_batches_train(r: PlainRecorder) -> None:
    trains(r, 0.72 * LN2)
    assert len(r.losses) == 300 and len(r.val_losses) == 15


def link_slow_trains(r: PlainRecorder) -> None:
    trains(r, 0.75 * LN2)
    assert all(abs(v - LN2) < 0.01 * LN2 for v in r.val_losses[:2]), r.val_losses  # a slow start
    # then steady: no check more than 2% above the one before
    assert all(b < 1.02 * a for a, b in itertools.pairwise(r.val_losses)), r.val_losses


def mil_flipped_trains(r: PlainRecorder) -> None:
    trains(r, 0.4)  # on the exact validation labels
    assert mean(r.losses[-60:]) > 0.4, mean(r.losses[-60:])  # the training floor near H(0.2) ~ 0.5


def mil_polynomial_trains(r: PlainRecorder) -> None:
    trains(r, 0.15, slack=2.0)
    assert r.lrs[-1][0] < 1e-6 and r.lrs[0] == [3e-3]


def char_cyclic_trains(r: PlainRecorder) -> None:
    trains(r, 0.4)
    lrs = [lr[0] for lr in r.lrs]
    assert lrs[0] == 1e-3 and abs(lrs[build.CYCLE_UP] - 3e-2) < 1e-6, (lrs[0], lrs[build.CYCLE_UP])


def char_one_hot_trains(r: PlainRecorder) -> None:
    trains(r, 0.45)
    assert all("net.embedding.weight" not in step for step in r.update_ratios)  # frozen on purpose


def patch_tiny_val_trains(r: PlainRecorder) -> None:
    v = r.val_losses
    trains(r, 0.1 * v[0], slack=2.0)
    assert sum(b > a for a, b in itertools.pairwise(v)) >= 2, v  # 24 digits: some checks go up


def patch_sgd_trains(r: PlainRecorder) -> None:
    trains(r, 0.2, slack=1.5)
    assert r.lrs[0] == r.lrs[-1] == [0.05]
