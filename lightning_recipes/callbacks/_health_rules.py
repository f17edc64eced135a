"""HealthMonitor's learning rules (the LR, a plateau, not learning, overfitting) and :func:`decide`.

The layer, gradient and data rules are in ``_health_rules_layers``; thresholds and when each rule stays quiet:
``docs/guides/health_monitor.md``.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

from lightning_recipes._stats import difference_noise, normal_quantile, significantly_above, validation_se
from lightning_recipes.callbacks._health_causes import (
    dead_unit_causes,
    dying_window,
    outliers_since,
    ranked,
    weighed,
)
from lightning_recipes.callbacks._health_evidence import Evidence, evidence_of, streak
from lightning_recipes.callbacks._health_rules_layers import (
    THROWN,
    _shrinks_before_blocked,
    data_stall,
    dead_units,
    exploded_into_nonfinite,
    exploding_from_start,
    exploding_gradients,
    nonfinite_activations,
    outlier_batches,
    saturated_activations,
    vanishing_gradients,
)
from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,  # noqa: F401  (the doctests)
    PROBLEMS,
    Cause,
    CheckData,
    Decision,
    Diagnosed,
    Diagnosis,
    History,
    fmt,
    headline,
)

__all__ = [
    "decide",
    "evidence_of",
    "loss_plateau",
    "lower_lr_by",
    "lr_blew_up_from_the_first_step",
    "lr_raised_into_blowup",
    "lr_too_high",
    "lr_too_low",
    "lr_zero_for_a_trained_group",
    "not_learning",
    "overfitting",
    "settle",
    "validation_never_improved",
]


def lower_lr_by(ratio: float) -> int:
    """How many times lower an LR must be to bring an update ratio to the healthy ~1e-3 (at least 3x).

    Example:
        >>> lower_lr_by(0.05)
        50
    """
    return max(3, round(ratio / 1e-3))


def _rise(e: Evidence) -> tuple[str, float, int] | None:
    """``(what, from, its step)`` when the loss rose significantly and ``rise_rtol`` above an earlier check's,
    with no outlier batch since; after an LR raised back to a level already trained at, only when it persists.
    """
    data, history, t = e.data, e.history, e.t
    found = None
    if history.losses and math.isfinite(data.loss_mean):
        best = min(range(len(history.losses)), key=lambda i: history.losses[i])
        for what, i in (("the previous check's", len(history.losses) - 1), ("its best", best)):
            before, before_se, step = history.losses[i], history.loss_ses[i], history.loss_steps[i]
            if (
                data.loss_mean > (1.0 + t["rise_rtol"]) * before
                and significantly_above(data.loss_mean, e.se, before, before_se, t["confidence_z"])
                and not outliers_since(history, step)
                and not data.loss_mean - before < UNDONE * (history.start_loss - min(history.losses))
            ):
                found = what, before, step
                break
    if found is not None and _steps_it_trained_at(e):
        found = None  # the same LR and step size the loss fell at: something else (the data) changed
    if e.warming_up and e.lr <= 1.5 * e.peak_lr:
        history.streaks["lr_raised_at"] = data.step
    count = streak(history, "rise", found is not None)
    if found is None or (
        history.streaks.get("lr_raised_at", -1) <= found[2] and not _at_the_steps_it_trained_at(e)
    ):
        return found  # no LR raised since the interval the loss rose from: the rise counts at once
    falling = e.falling or e.below_previous
    return found if count >= int(t["persist_checks"]) and not falling else None


def _at_the_steps_it_trained_at(e: Evidence) -> bool:
    """The LR and the steps within what the run trained at healthily: a rise there
    is LR evidence only when it persists (a curriculum's harder phase).
    """
    trained, _ = healthy_lr(e.history)
    before = [r for r in e.history.ratios if math.isfinite(r)]
    return (
        math.isfinite(trained)
        and math.isfinite(e.lr)
        and e.lr <= LR_RAISED * trained
        and bool(before)
        and max(before) <= e.t["ratio_high"]
        and e.kept_scale
        and math.isfinite(e.ratio)
        and e.ratio <= e.t["ratio_stuck"]
    )


def _steps_it_trained_at(e: Evidence) -> bool:
    """The LR and update ratio no larger than where the loss last fell significantly:
    a rise at those steps is not the LR's (harder data arrived).
    """
    trained, _ = healthy_lr(e.history)
    learned, fell_at = e.history.healthy[2:4] if e.history.healthy else (math.nan, math.nan)
    previous = e.history.loss_steps[-1] if e.history.loss_steps else -1
    return (
        fell_at == previous  # the steps had just been working: the loss fell at the check before the rise
        and math.isfinite(trained)
        and math.isfinite(learned)
        and e.lr <= LR_RAISED * trained
        and math.isfinite(e.ratio)
        and e.ratio <= min(learned, e.t["ratio_stuck"])
    )


def lr_too_high(e: Evidence) -> Decision | None:
    """Update ratio above ``ratio_high`` and the loss rose (:func:`_rise`); or above
    ``ratio_stuck`` with no progress over ``plateau_checks``; or (adaptive) above ``ratio_high`` for
    ``plateau_checks`` checks while the weights grew ``growth_high`` x.

    Example:
        >>> data = CheckData(0, 0, loss_mean=2.0, loss_count=20, loss_std=0.1,
        ...                  update_ratio={"fc1": 0.1, "fc2": 0.2}, group_lr={"fc1": 0.5, "fc2": 0.5})
        >>> history = History(losses=[1.0], loss_ses=[0.02], loss_steps=[0])
        >>> lr_too_high(evidence_of(data, history, DEFAULT_THRESHOLDS))[0]["update_ratio"]
        0.1
    """
    data, history, t, ratio = e.data, e.history, e.t, e.ratio
    rise = _rise(e)
    k, moved = int(t["plateau_checks"]), e.ratios.moved
    top = max(moved, key=lambda g: moved[g]) if moved else ""
    # one layer's steps a large share of its weights at every check, the loss going nowhere: that layer is
    # thrown around (its large gradient may hide the other layers' behind a tiny weighted median)
    thrown = streak(history, "group_thrown", bool(top) and moved[top] > THROWN * t["ratio_high"]) >= k
    blocked = any(
        history.streaks.get(p) for p in ("saturated_activations", "saturated_from_start", "dead_units")
    )
    thrown = thrown and not ratio > t["ratio_high"] and e.progressing(k) is False and not blocked
    ratio = moved[top] if thrown else ratio
    if not ratio > t["ratio_high"] or (e.tables_only and not data.loss_mean > history.start_loss):
        return None  # embedding tables only: a loss above its start is the evidence, not the ratio
    window_start = history.loss_steps[-k] if len(history.loss_steps) >= k else 0
    # large steps are LR evidence only where they moved the weights (``Evidence.kept_scale``)
    stuck = ratio > t["ratio_stuck"] and e.progressing(k) is False and not e.kept_scale
    stuck = stuck and not outliers_since(history, window_start)
    recent = [*history.ratios[-(k - 1) :], ratio] if len(history.ratios) >= k - 1 else []
    sustained = e.growth > t["growth_high"] and e.ratios.family == "adaptive" and bool(recent)
    sustained = sustained and min(recent) > t["ratio_high"]
    # growth by embedding tables, or by steps that all point outward (a head fitting a scale), is no LR's
    dense = e.dense_ratio > t["ratio_high"]  # False without a dense group: embedding tables only
    sustained = sustained and dense and not e.outward > _OUTWARD
    # weights that grow while the loss falls significantly at every check of the window are being fitted
    sustained = sustained and not _fell_at_every_check(e, k)
    # ... or while it predicts no better than its own input-free guess: memorising labels its inputs do not
    # explain (shuffled apart), which grows weights at any LR
    sustained = sustained and not e.input_free
    if rise is None and not stuck and not sustained and not thrown:
        return None
    if thrown:
        what = f"`{top}` has moved over {fmt(THROWN * t['ratio_high'])} of its norm per step for {k} checks "
        what += f"while the loss went nowhere (now {fmt(data.loss_mean)})"
    elif rise is not None:
        what = f"the loss rose from {fmt(rise[1])} ({rise[0]}) to {fmt(data.loss_mean)}"
    elif stuck:
        what = f"the loss has not fallen significantly in {k} checks (now {fmt(data.loss_mean)})"
    else:
        what = (
            f"has been above 1e-2 for {k} checks while the weights grew {fmt(e.growth)}x since step 0 "
            f"(the loss {fmt(data.loss_mean)})"
        )
    factor = lower_lr_by(ratio)
    target = f" (from {fmt(e.lr)} to about {fmt(e.lr / factor)})" if math.isfinite(e.lr) else ""
    evidence = {
        "update_ratio": ratio,
        "largest_groups": e.ratios.groups(t["ratio_high"], above=True),
        "lr": e.lr,
        "optimizer_family": e.ratios.family,
        "loss": data.loss_mean,
        "loss_before": rise[1] if rise is not None else history.losses[-k + 1] if k > 1 else math.nan,
    }
    return (
        evidence | ({"weight_growth": e.growth} if rise is None and not stuck else {}),
        f"Each step changes the weights by {fmt(ratio)} of their norm (healthy: ~1e-3) and {what}. "
        f"Lower the learning rate about {factor}x{target}, or run an LR range test; add warm-up, or clip.",
    )


def _fell_at_every_check(e: Evidence, k: int) -> bool:
    """The loss fell from each of the last ``k - 1`` checks to the next, this one included, each fall
    one-sided significant at 95% (``FELL_Z``): with no fall, all four of a window of five by chance 1 in
    160,000.

    Example:
        >>> history = History(losses=[3.0, 2.6, 2.2, 1.8], loss_ses=[0.02] * 4, loss_steps=[20, 40, 60, 80])
        >>> data = CheckData(100, 0, loss_mean=1.5, loss_count=20, loss_std=0.1)
        >>> _fell_at_every_check(evidence_of(data, history, DEFAULT_THRESHOLDS), 5)
        True
    """
    history = e.history
    if len(history.losses) < k - 1 or not math.isfinite(e.data.loss_mean):
        return False
    means = [*history.losses[-(k - 1) :], e.data.loss_mean]
    ses = [*history.loss_ses[-(k - 1) :], e.se]
    return all(significantly_above(means[i], ses[i], means[i + 1], ses[i + 1], FELL_Z) for i in range(k - 1))


#: One fall's one-sided 95% bound in :func:`_fell_at_every_check` (a conjunction of several needs no more).
FELL_Z = normal_quantile(0.95)


#: The ``Evidence.outward`` share above which the steps point along the weights (a too-high LR's cancel).
_OUTWARD = 0.5

#: An LR this many times the largest the run trained at healthily is new ground (as ``warming_up``'s 1.5x).
LR_RAISED = 1.5
#: The share of the progress made (start to best) a rise must undo: a loss converged 50x below its start
#: that bumps 10% of its own value is at its floor's noise, not thrown back by the LR.
UNDONE = 0.01
#: A first interval's mean loss this many times its loss before any update: the first steps threw it up.
LOSS_JUMP = 10.0


def healthy_lr(history: History) -> tuple[float, int]:
    """The largest LR of the problem-free checks and the last such check's step (NaN, -1: none).

    Example:
        >>> healthy_lr(History(healthy=[100.0, 0.01, 2e-3, 100.0]))
        (0.01, 100)
    """
    if not history.healthy:
        return math.nan, -1
    return history.healthy[1], int(history.healthy[0])


def _remember_healthy(e: Evidence) -> None:
    """Record a problem-free check: its step, the largest LR, the largest ratio the loss fell at."""
    _, lr, learned, fell_at = e.history.healthy or [math.nan] * 4
    if math.isfinite(e.lr):
        lr = e.lr if math.isnan(lr) else max(lr, e.lr)
    if e.below_previous and math.isfinite(e.ratio):
        learned = e.ratio if math.isnan(learned) else max(learned, e.ratio)
        fell_at = float(e.data.step)
    e.history.healthy = [float(e.data.step), lr, learned, fell_at]


def lr_raised_into_blowup(e: Evidence, blowup: Decision) -> Decision | None:
    """An explosion or non-finite update (``blowup``) after the LR rose ``LR_RAISED`` x above
    :func:`healthy_lr`: the LR is the cause. Quiet when it began on an outlier batch or no check was healthy.

    Example:
        >>> history = History(healthy=[100.0, 0.01, 2e-3, 100.0])
        >>> data = CheckData(120, 0, loss_mean=float("nan"), group_lr={"net": 0.2})
        >>> blowup = ({"grad_norm": 4e8, "nonfinite_weights": ["net.stem"]}, "...")
        >>> lr_raised_into_blowup(evidence_of(data, history, DEFAULT_THRESHOLDS), blowup)[0]["lr_vs_healthy"]
        20.0
    """
    history, read = e.history, [v for v in e.data.group_lr.values() if math.isfinite(v)]
    lr = e.lr if math.isfinite(e.lr) else max(read, default=math.nan)  # non-finite weights: no update ratio
    trained, since = healthy_lr(history)
    evidence = blowup[0]
    if evidence.get("cause") == "outlier_batches" or not (
        math.isfinite(lr) and math.isfinite(trained) and trained > 0 and lr > LR_RAISED * trained
    ):
        return None
    times, what = (
        lr / trained,
        "the weights went inf/nan" if evidence.get("nonfinite_weights") else "the gradients exploded",
    )
    grad = evidence.get("grad_norm", math.nan)
    found = {
        "lr": lr,
        "healthy_lr": trained,
        "lr_vs_healthy": times,
        "healthy_at_step": since,
        "update_ratio": e.ratio,
        "grad_norm": grad,
        "optimizer_family": e.ratios.family,
    } | ({"nonfinite_weights": evidence["nonfinite_weights"]} if evidence.get("nonfinite_weights") else {})
    action = (
        f"The learning rate is {fmt(lr)}, {fmt(times)}x the {fmt(trained)} the run trained at healthily up "
        f"to step {since}, and after it rose {what}: the LR, not the data or the initialisation. Bring it "
        f"back to at most {fmt(trained)}: check the schedule (a multiplier meant to divide, a cyclic or "
        "warm-up peak too high), or run an LR range test; clip gradients to survive the rest."
    )
    line = headline(
        f"lr_too_high at step {e.data.step}: lr {fmt(lr)} = {fmt(times)}x the {fmt(trained)} that trained "
        f"healthily (step {since}), then {what}"
    )
    causes = [
        Cause("lr_too_high", {"lr": lr, "healthy_lr": trained, "lr_vs_healthy": times}),
        Cause("initialisation", {}, {"healthy_at_step": since}),
        Cause("outlier_batches", {}, {"began_on_outlier_batch": False}),
    ]
    return Diagnosed(found, action, Diagnosis(line, causes, "lr_too_high", action))


#: Gradients that grew this many times over the steps before the weights went inf/nan: steps too large.
GREW_INTO_NONFINITE = 10.0


def _grew_into_nonfinite(data: CheckData) -> Decision | None:
    """Weights inf/nan after the interval's finite gradient norms grew ``GREW_INTO_NONFINITE`` x (not yet
    100x): steps too large; ``None`` for a non-finite update straight after an ordinary gradient (a division
    by 0 in the optimizer), which no LR explains."""
    grads = [r[1] for r in data.step_records if math.isfinite(r[1])]
    if len(grads) < 2 or max(grads) < GREW_INTO_NONFINITE * grads[0]:
        return None
    return {"nonfinite_weights": data.nonfinite_weights[:8], "grad_norm": max(grads)}, ""


def lr_blew_up_from_the_first_step(e: Evidence, blowup: Decision) -> Decision | None:
    """An explosion (or inf/nan weights) in the first interval whose first gradient was ordinary but whose
    first update exceeded ``ratio_stuck`` of the weights: the LR. The first update is ``lr x ||g0||`` under
    SGD and ``lr x sqrt(n)`` under an adaptive optimizer (Adam's first step moves each of the ``n`` elements
    by ~``lr`` whatever the gradient's scale).

    Example:
        >>> data = CheckData(10, 0, nonfinite_weights=["net"], param_norm_start=5.77,
        ...                  group_lr={"net": 2.0}, group_family={"net": "sgd"},
        ...                  step_records=[(0, 1.32, 0, 0, 0, 1.8), (2, 2.5e7, 2, 0, 0, 1.9)])
        >>> e = evidence_of(data, History(), DEFAULT_THRESHOLDS)
        >>> found = lr_blew_up_from_the_first_step(e, ({"grad_norm": 2.5e7}, "..."))
        >>> round(found[0]["first_update_ratio"], 2), found[0]["lower_lr_by"]
        (0.46, 46)
    """
    data, history, t = e.data, e.history, e.t
    first = next((r for r in data.step_records if r[0] == 0 and math.isfinite(r[1])), None)
    lrs = [v for v in data.group_lr.values() if math.isfinite(v)]
    w0 = data.param_norm_start
    families = set(data.group_family.values())
    if (
        history.losses
        or blowup[0].get("cause") == "outlier_batches"
        or first is None
        or not lrs
        or not w0 > 0
        or len(families) != 1
        or not families <= {"sgd", "adaptive"}
    ):
        return None
    family, lr, g0 = families.pop(), max(lrs), first[1]
    moved = g0 if family == "sgd" else math.sqrt(sum(data.group_numel.values()))
    step0 = lr * moved / w0
    if not (g0 < t["explode_factor"] * w0 and step0 > t["ratio_stuck"]):
        return None
    grad, factor = blowup[0].get("grad_norm", math.nan), max(3, round(step0 / t["ratio_high"]))
    rise = blowup[0].get("loss_vs_start", math.nan)
    then = f"the loss rose {fmt(rise)}x" if math.isfinite(rise) else f"the gradients grew to {fmt(grad)}"
    found = {
        "lr": lr,
        "grad_norm_step0": g0,
        "first_update_ratio": step0,
        "update_ratio": e.ratio,
        "weights_norm_at_start": w0,
        "grad_norm": grad,
        "optimizer_family": family,
        "lower_lr_by": factor,
    } | {k: v for k, v in blowup[0].items() if k in ("nonfinite_weights", "loss_vs_start")}
    by = f"gradient {fmt(g0)}" if family == "sgd" else f"~lr per element, {fmt(moved**2)} elements"
    action = (
        f"The first {family} step moved the weights by {fmt(step0)} of their norm (lr {fmt(lr)} x {by}, the "
        f"gradient {fmt(g0)} ordinary at initialisation; healthy ~1e-3), and {then}: the learning rate, "
        f"not the initialisation. Lower it at least {factor}x (to a "
        f"first step under 1e-2 of the weights: from {fmt(lr)} to {fmt(lr / factor)}), or run an LR range "
        "test; add warm-up, or clip gradients."
    )
    line = headline(
        f"lr_too_high at step {data.step}: first step moved the weights {fmt(step0)} of their norm (lr "
        f"{fmt(lr)}), then {then}"
    )
    causes = [
        Cause("lr_too_high", {"first_update_ratio": step0, "lr": lr}),
        Cause("initialisation", {}, {"grad_norm_step0": g0, "weights_norm_at_start": w0}),
        Cause("outlier_batches", {}, {"began_on_outlier_batch": False}),
    ]
    return Diagnosed(found, action, Diagnosis(line, causes, "lr_too_high", action))


def lr_too_low(e: Evidence, cannot_learn: bool = False) -> Decision | None:
    """Update ratio below its floor, or the LR 1000x below its peak, with the loss not falling
    ``persist_checks`` checks (one after a sudden cut); quiet when warming up, annealing, blocked or blown up.

    Example:
        >>> data = CheckData(0, 0, loss_mean=1.0, loss_count=20, loss_std=0.05, update_ratio={"fc1": 1e-7})
        >>> history = History(losses=[1.0], loss_ses=[0.01], loss_steps=[0], streaks={"lr_too_low": 1})
        >>> lr_too_low(evidence_of(data, history, DEFAULT_THRESHOLDS))[0]["update_ratio"]
        1e-07
    """
    data, history, t, ratio, floor, lr, peak = e.data, e.history, e.t, e.ratio, e.floor, e.lr, e.peak_lr
    if data.plateau_maximises_loss and lr * SUDDEN_CUT <= peak and _validation_fell(e):  # collapsed by it
        return (
            {"lr": lr, "peak_lr": peak, "update_ratio": ratio, "loss": data.loss_mean, "plateau_mode": "max"},
            f"ReduceLROnPlateau(mode='max') monitors the validation loss: it counts every fall as no "
            f"improvement and cut the learning rate to {fmt(lr)} ({fmt(peak / max(lr, 1e-30))}x below its "
            "peak) while the validation loss fell. Set mode='min'.",
        )
    # 1000x below its peak, a decayed LR's rounding allowed (3e-3 * 0.1 ** 3 is held as 3.0000000000000005e-6)
    cut = math.isfinite(lr) and math.isfinite(peak) and lr <= 1e-3 * peak * (1 + 1e-9)
    stalled = _stalled_since_a_cut(e)
    collapsed = cut or stalled or (math.isfinite(ratio) and ratio < 1e-3 * floor)
    # a collapsed LR cannot move the loss: only this interval's own trend counts
    falling = e.falling or (not collapsed and e.below_previous)
    stuck = (
        collapsed or not history.losses or data.loss_mean > (1.0 - t["plateau_progress"]) * history.losses[0]
    )
    low = (
        math.isfinite(ratio)
        and (0 < ratio < floor or cut)  # a median step of exactly 0 (no gradient reached it) is no step size
        and stuck
        and math.isfinite(data.loss_mean)
        and not (falling or cannot_learn or e.blown or e.warming_up or e.annealing)
        and not e.no_gradient  # no gradient, no step, whatever the LR: not the LR's (``not_learning``)
        and (cut or not e.same_output)  # the input never reaches the output: no step size fits it
    )
    if (
        streak(history, "lr_too_low", low) < (1 if cut and e.step_cut else int(t["persist_checks"]))
        or not low
    ):
        return None
    if cut or stalled:
        when = " when it was cut" if stalled and not cut else ""
        return (
            {"lr": lr, "peak_lr": peak, "update_ratio": ratio, "loss": data.loss_mean},
            f"The learning rate is {fmt(lr)}, {fmt(peak / max(lr, 1e-30))}x below its peak of {fmt(peak)}, "
            f"and the loss stopped falling{when} ({fmt(data.loss_mean)}). Check the scheduler: a step "
            "decay's gamma, a LambdaLR factor, a schedule shorter than the run.",
        )
    raise_by = max(3, round(floor * 30 / max(ratio, 1e-30)))
    target = f" (from {fmt(lr)} to about {fmt(lr * raise_by)})" if math.isfinite(lr) and lr > 0 else ""
    return (
        {
            "update_ratio": ratio,
            "smallest_groups": e.ratios.groups(floor, above=False),
            "lr": lr,
            "optimizer_family": e.ratios.family,
            "floor": floor,
            "loss": data.loss_mean,
        },
        f"Each step changes the weights by only {fmt(ratio)} of their norm (below {fmt(floor)} for "
        f"{e.ratios.family} optimizers"
        + (" at the loss's level at initialisation" if floor > e.ratios.low(t) else "")
        + f"; healthy ~1e-3) and the loss is not falling ({fmt(data.loss_mean)}). Raise the learning rate "
        f"about {raise_by}x{target}, or run an LR range test; check the schedule does not cut it to ~0.",
    )


def _validation_fell(e: Evidence) -> bool:
    """The latest validation loss lies significantly below the first (with their standard errors; unknown
    errors: by ``plateau_progress`` of the first)."""
    vals = [v for v in [*e.history.validations, *e.data.validations] if math.isfinite(v[1])]
    if len(vals) < 2:
        return False
    (_, first, _, first_se, _), (_, last, _, last_se, _) = vals[0], vals[-1]
    if math.isfinite(first_se) and math.isfinite(last_se):
        return significantly_above(first, first_se, last, last_se, e.t["confidence_z"])
    return last < (1.0 - e.t["plateau_progress"]) * first


#: An LR this many times below the previous check's, in one interval: a cut, not a decay.
SUDDEN_CUT = 30.0


def _stalled_since_a_cut(e: Evidence) -> bool:
    """The LR fell ``SUDDEN_CUT`` x or more within one interval while the loss was falling significantly, and
    since the first interval after it the loss has not made ``plateau_progress`` of progress: the cut
    stopped the training (a decay after a plateau is followed by a fall, not a stall).

    Example:
        >>> history = History(losses=[0.9, 0.37], loss_ses=[0.01] * 2, loss_steps=[20, 40], lrs=[1e-3, 2e-3])
        >>> data = CheckData(60, 0, loss_mean=0.07, loss_count=20, loss_std=0.01, update_ratio={"fc": 3e-5},
        ...                  group_lr={"fc": 9e-6})
        >>> _stalled_since_a_cut(evidence_of(data, history, DEFAULT_THRESHOLDS))  # the cut's own interval
        False
        >>> history.streaks["lr_cut_at"]
        2
    """
    history, losses, lr = e.history, e.history.losses, e.lr
    streaks = history.streaks
    if e.warming_up:
        streaks.pop("lr_cut_at", None)
    falling_before = len(losses) >= 2 and significantly_above(
        losses[-2], history.loss_ses[-2], losses[-1], history.loss_ses[-1], e.t["confidence_z"]
    )
    if history.lrs and math.isfinite(lr) and lr * SUDDEN_CUT <= history.lrs[-1] and falling_before:
        streaks["lr_cut_at"] = len(losses)  # this check's index in ``losses``, appended after the rules
    first_after = streaks.get("lr_cut_at", len(losses)) + 1
    if first_after + int(e.t["persist_checks"]) - 1 > len(losses) or not math.isfinite(e.data.loss_mean):
        return False
    return e.data.loss_mean > (1.0 - e.t["plateau_progress"]) * losses[first_after]


def lr_zero_for_a_trained_group(e: Evidence) -> Decision | None:
    """Groups that get gradients at an LR of exactly 0 while others train, or parameters that get gradients
    though no optimizer holds them, at least ``trained_share_low`` of the model, ``persist_checks`` checks
    running (cause ``frozen_parameters``).

    Example:
        >>> data = CheckData(40, 0, loss_mean=28.0, update_ratio={"enc": 0.0, "dec": 3e-3},
        ...                  group_grad_rms={"enc": 0.01, "dec": 0.05}, group_lr={"enc": 0.0, "dec": 1e-3},
        ...                  group_numel={"enc": 10_000, "dec": 9_000}, model_numel=19_000)
        >>> history = History(streaks={"lr_zero": 1})
        >>> lr_zero_for_a_trained_group(evidence_of(data, history, DEFAULT_THRESHOLDS))[0]["frozen_groups"]
        ['enc']
    """
    data, t = e.data, e.t
    zero = [g for g in e.ratios.unstepped if data.group_lr.get(g, math.nan) == 0.0]
    numel = sum(data.group_numel.get(g, 0) for g in zero) + sum(data.unstepped_params.values())
    zero += list(data.unstepped_params)
    total = data.model_numel or sum(data.group_numel.values())
    share = numel / total if total > 0 else 0.0
    present = bool(zero) and share >= t.get("trained_share_low", 0.0)
    if streak(e.history, "lr_zero", present) < int(t["persist_checks"]):
        return None
    names = ", ".join(f"`{g}`" for g in zero[:3]) + (f" and {len(zero) - 3} more" if len(zero) > 3 else "")
    evidence = {
        "frozen_groups": zero[:8],
        "frozen_parameters": numel,
        "frozen_share": share,
        "lr": 0.0,
        "grad_rms": {g: data.group_grad_rms.get(g, math.nan) for g in zero[:8]},
        "held_by_no_optimizer": list(data.unstepped_params)[:8],
        "cause": "frozen_parameters",
    }
    orphans = ", ".join(f"`{m}`" for m in list(data.unstepped_params)[:3])
    action = (
        f"{names} ({numel} parameters, {share:.0%} of the model) get gradients, but no step moves them: "
        + (f"no optimizer holds {orphans} (build it from every parameter to train); " if orphans else "")
        + "check the LR each parameter group is given (a multiplier that rounds to 0, `lr * (1 // 10)`; a "
        "schedule's factor of 0); to freeze them on purpose, use `requires_grad_(False)`."
    )
    line = headline(
        f"lr_too_low at step {data.step}: {names} ({share:.0%} of the parameters) never stepped while they "
        "get gradients"
    )
    causes = [
        Cause("frozen_parameters", {"frozen_share": share, "lr": 0.0}),
        Cause("lr_too_low", {}, {"other_groups_update_ratio": e.ratio}),
    ]
    return Diagnosed(evidence, action, Diagnosis(line, causes, "frozen_parameters", action))


def loss_plateau(e: Evidence) -> Decision | None:
    """No significant progress over ``plateau_checks`` checks spanning ``plateau_steps`` steps,
    less than ``plateau_rtol`` drop; quiet after an explosion or with outlier batches in the window.

    Example:
        >>> history = History(losses=[1.38, 1.38, 1.39, 1.38, 1.38], loss_ses=[0.01] * 5,
        ...                   loss_steps=[50, 100, 150, 200, 250])
        >>> data = CheckData(300, 0, loss_mean=1.38, loss_count=50, loss_std=0.04)
        >>> loss_plateau(evidence_of(data, history, DEFAULT_THRESHOLDS))[0]["checks"]
        5
    """
    data, history, t = e.data, e.history, e.t
    k = int(t["plateau_checks"])
    losses = [*history.losses, data.loss_mean]
    if len(losses) <= k or not math.isfinite(data.loss_mean) or e.progressing(k) is not False:
        return None
    # the window must also span ``plateau_steps`` (transformers sit at chance for ~100 steps: a phase)
    if data.step - history.loss_steps[-k] < t["plateau_steps"]:
        k = next(
            (j for j in range(k, len(losses)) if data.step - history.loss_steps[-j] >= t["plateau_steps"]), 0
        )
        if not k or e.progressing(k) is not False:
            return None
    first, span = losses[0], data.step - history.loss_steps[-k]
    if history.streaks.get("exploded_at_step", -1) >= data.step - span - 1 or outliers_since(
        history, data.step - span
    ):
        return None  # an explosion or outlier batches in the window: they, not a plateau, hold the loss up
    _, drop, level = e.falls(k, span)
    if drop > t["plateau_rtol"] * abs(level) or not data.loss_mean > (1.0 - t["plateau_progress"]) * first:
        return None  # a noisy loss may hide a real but slow descent: no plateau unless also immaterial
    if e.left_start(k) and not e.input_free:
        return None  # fell beyond noise, not to its input-free guess: the floor the data allow, no stall
    change = "a different optimizer (AdamW/Lion), " if e.ratios.family != "adaptive" else ""
    return (
        {
            "loss": data.loss_mean,
            "window_steps": span,
            "window_change": -drop / abs(level) if level else math.nan,
            "checks": k,
            "first_loss": first,
        },
        f"The training loss has not fallen significantly for {span} steps ({fmt(data.loss_mean)}, "
        f"{data.loss_mean / first:.0%} of its first value). Check that the labels are learnable "
        f"(`preflight`'s overfit_batch check), then try an LR range test, {change}or a larger model.",
    )


def validation_never_improved(history: History, t: dict[str, float]) -> bool:
    """Three validations or more, the best not significantly below the first: nothing learned carries over.

    Example:
        >>> rows = [(0, 1.079, 1.097, 0.02, 500), (1, 1.076, 1.099, 0.02, 500), (2, 1.083, 1.077, 0.02, 500)]
        >>> validation_never_improved(History(validations=rows), DEFAULT_THRESHOLDS)
        True
    """
    vals = [v for v in history.validations if math.isfinite(v[1])]
    if len(vals) < 3:
        return False
    first, best = vals[0], min(vals, key=lambda v: v[1])
    first_se, best_se = validation_se(first[1], first[3], first[4]), validation_se(best[1], best[3], best[4])
    if not (math.isfinite(first_se) and math.isfinite(best_se)):
        return False  # no noise estimate: no claim
    return not significantly_above(first[1], first_se, best[1], best_se, t["confidence_z"])


def overfitting(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """Prechelt's GL above ``overfit_gl``, significant, the training loss below the best
    validation loss and still falling, ``overfit_persist`` validations in a row.

    Example:
        >>> history = History(validations=[(0, 1.0, 1.1, 0.01, 1000), (1, 0.8, 0.7, 0.01, 1000)])
        >>> rows = [(2, 0.9, 0.5, 0.01, 1000), (3, 1.0, 0.4, 0.01, 1000), (4, 1.1, 0.3, 0.01, 1000)]
        >>> overfitting(CheckData(0, 4, validations=rows), history, DEFAULT_THRESHOLDS)[0]["began_epoch"]
        2
    """
    found: Decision | None = None
    z, start = t["confidence_z"], history.start_loss
    for entry in data.validations:
        previous = history.validations[-1] if history.validations else None
        history.validations.append(entry)
        best_epoch, best_val, best_train, best_se, best_count = min(history.validations, key=lambda v: v[1])
        _, val, train, measured, count = entry
        se, best_se = validation_se(val, measured, count), validation_se(best_val, best_se, best_count)
        gl = 100.0 * (val - best_val) / abs(best_val) if best_val else 0.0  # a loss below 0 too (-Sharpe)
        if math.isnan(se) or math.isnan(best_se):  # no noise estimate at all: demand 4x the rise
            significant = gl > 4 * t["overfit_gl"]
        else:
            significant = significantly_above(val, se, best_val, best_se, z)
        beyond_wobble = _rise_beyond_series_noise(history.validations, val, best_val, z)
        if math.isfinite(measured):  # per-batch noise that heavy-tailed batches inflate: the series' own too
            significant = significant or beyond_wobble
        else:  # one batch, its spread unmeasured (the floor assumed): a sign test on the series needs none
            significant = significant or _rose_every_time(history.validations, RISES)
        # a sample's noise says nothing of the model's from one epoch to the next: once the series since
        # the best is long enough to measure its own wobble, the rise must also clear that
        significant = significant and (beyond_wobble or len(_since_best(history.validations)) < 4)
        recovering = previous is not None and significantly_above(
            previous[1], validation_se(previous[1], previous[3], previous[4]), val, se, z
        )
        # fits its training set better than validation ever was, still falling, out of its start band
        fitting = train < min(best_train, best_val) and (
            previous is None
            or train - previous[2] <= t["rise_rtol"] * abs(previous[2])
            or min(best_train, best_val) - train >= 0.9 * abs(min(best_train, best_val))
        )
        fitted = not (math.isfinite(start) and start - train <= t["trivial_band"] * abs(start))
        present = (
            gl > t["overfit_gl"] and significant and fitting and fitted and train < val and not recovering
        )
        found = None
        if streak(history, "overfitting", present) >= int(t["overfit_persist"]):
            found = (
                {
                    "gl": gl,
                    "val_loss": val,
                    "val_se": se,
                    "best_val_loss": best_val,
                    "best_epoch": best_epoch,
                    "train_loss": train,
                    "best_train_loss": best_train,
                    "began_epoch": best_epoch + 1,
                },
                f"Validation loss is {gl:.1f}% above its best ({fmt(best_val)} at epoch {best_epoch}; now "
                f"{fmt(val)} +- {fmt(se)}) while the training loss fell to {fmt(train)}: overfitting since "
                f"epoch {best_epoch + 1}. Use `EarlyStopping(restore_best_weights=True)`, more weight decay "
                "or dropout, data augmentation or more data.",
            )
    return found


#: Sigmoid/tanh layers, at least, for a prediction the same for every sample to be theirs (else the inputs').
DEEP_SQUASHING = 4

#: Validations in a row each above the one before: by chance (exchangeable noise) 1 in ``(RISES + 1)!``.
RISES = 5


def _rose_every_time(vals: list[tuple[int, float, float, float, int]], rises: int) -> bool:
    """The last ``rises`` validation losses each rose above the one before (a sign test: no noise needed).

    Example:
        >>> _rose_every_time([(e, 1.0 + 0.1 * e, 0.1, math.nan, 1) for e in range(6)], 5)
        True
    """
    last = [v[1] for v in vals[-(rises + 1) :]]
    return len(last) == rises + 1 and all(b > a for a, b in itertools.pairwise(last))


def _since_best(vals: list[tuple[int, float, float, float, int]]) -> list[float]:
    """The finite validation losses from the best one on."""
    series = [v[1] for v in vals if math.isfinite(v[1])]
    return series[series.index(min(series)) :] if series else []


def _rise_beyond_series_noise(
    vals: list[tuple[int, float, float, float, int]], val: float, best: float, z: float
) -> bool:
    """``val`` above ``best`` by ``z`` x the noise of the run's own validation series."""
    series = _since_best(vals)
    if len(series) < 4:
        return False
    return val - best > z * math.sqrt(2.0) * max(difference_noise(series, order=2), 1e-12 * abs(best))


_TELL_APART = (
    "What tells them apart: `preflight`'s overfit_batch check (a model that cannot fit one fixed batch at "
    "this LR: the LR or the model; one that fits it: the labels of the stream do not follow its inputs), or "
    "~150 steps at a 10x lower LR (the loss falls: the LR)."
)


def not_learning(e: Evidence, named: bool, plateau_judges: bool = True) -> Decision | None:
    """The loss within ``trivial_band`` of its initial level for ``plateau_checks`` checks and
    ``plateau_steps`` steps, no other problem ``named`` and no warm-up; causes ranked by :func:`_diagnose`.

    Example:
        >>> history = History(losses=[3.15, 3.097, 3.098, 3.095, 3.093], loss_ses=[0.01] + [0.001] * 4,
        ...                   loss_steps=[50, 100, 150, 200, 250], ratios=[2e-3] * 5, start_loss=3.2)
        >>> data = CheckData(300, 5, loss_mean=3.092, loss_count=50, loss_std=0.008, param_norm=81.0,
        ...                  param_norm_start=29.0, update_ratio={"model": 2e-3}, grad_sampled=True,
        ...                  grad_total=0.07, group_numel={"model": 10_000}, input_free_loss=3.09,
        ...                  input_free_gap=0.001, input_free_gap_se=0.002)  # its own input-free guess
        >>> evidence, advice = not_learning(evidence_of(data, history, DEFAULT_THRESHOLDS), named=False)
        >>> evidence["cause"], round(evidence["weight_growth"], 2)
        ('lr_too_high', 2.79)
    """
    data, history, t, start = e.data, e.history, e.t, e.start
    if named or e.warming_up or not (math.isfinite(start) and start > 0 and math.isfinite(data.loss_mean)):
        return None
    n, k = len(history.losses), int(t["plateau_checks"])
    steps = history.loss_steps
    k = next(
        (j for j in range(k, n + 2) if n >= j - 1 and data.step - steps[-(j - 1)] >= t["plateau_steps"]), 0
    )
    if not k:
        return None
    window_steps, means, _ = e.window(k)
    # the same prediction for every sample, no better than its batch mean: it learned a constant, no more
    blank = e.level_known and e.input_free and e.same_output
    if min(means) - e.loss_floor < (1.0 - t["trivial_band"]) * (start - e.loss_floor) and not blank:
        return None  # it left the level of knowing nothing: it learns (or learned)
    # three validations or more, none below the untrained model's loss: nothing it fits carries over
    vals = [v[1] for v in history.validations if math.isfinite(v[1])]
    val_stuck = len(vals) >= 3 and min(vals) >= start
    # a ratio a constant added to the loss inflates: also needs the input-free level, or no fall since step 0
    if ((not e.input_free) if e.level_known else e.left_start(k)) and not val_stuck:
        return None  # below the input-free level: it learned something (unless validation says otherwise)
    if plateau_judges:
        five = int(t["plateau_checks"])
        memorising = n >= five - 1 and (lambda f: f[0] and f[1] > t["plateau_rtol"] * abs(f[2]))(
            e.falls(five)
        )
        significant, drop, level = e.falls(k)
        flat = (significant and drop <= t["plateau_rtol"] * abs(level)) or (val_stuck and not significant)
        flat = flat or (blank and drop <= t["plateau_rtol"] * abs(level))
        if not (memorising or flat):
            return None  # flat within its noise, or it fell materially early on: ``loss_plateau`` judges that
        unknown_level = not math.isfinite(data.input_free_loss) and not validation_never_improved(history, t)
        if not memorising and unknown_level and e.kept_scale:
            # "small" against an unknown trivial level is no claim, unless the weights' growth says the LR
            return None
    return _diagnose(e, data.step - window_steps[0], start, k)


def _diagnose(e: Evidence, span: float, start: float, k: int) -> Decision:
    """``not_learning``'s causes ranked by the evidence; one is named only when it stands alone."""
    data, history, t = e.data, e.history, e.t
    seen = [r for r in [*history.ratios[-(k - 1) :], e.ratio] if math.isfinite(r)]
    top, now, growth, lr, floor = max(seen, default=math.nan), e.ratio, e.growth, e.lr, e.ratios.low(t)
    numel = sum(data.group_numel.values()) or 1
    grad_rms, silent = e.grad_rms, e.no_gradient
    high = ((top > t["ratio_stuck"] and not e.kept_scale) or growth > t["growth_high"]) and not e.tables_only
    same, squashing = e.same_output, len(data.saturation_gain)
    # no gradient, no step: not the LR's; nor small steps once the input never reaches the output (its prior
    # fitted, nothing is left to fit)
    low = math.isfinite(now) and now < floor and not silent and not same
    # a median step of exactly 0 at an LR above 0 while gradients flow elsewhere: most weights get none (a
    # ``.detach()`` before them), frozen in effect, whatever the LR
    cut_off = now == 0 and lr > 0 and not silent
    low = low and not cut_off
    # validation at the level of knowing nothing while the training loss fell: the labels do not follow inputs
    vals = [v[1] for v in history.validations if math.isfinite(v[1])]
    val_stuck = bool(vals) and min(vals) >= (1.0 - t["trivial_band"]) * start
    margin = t["confidence_z"] * e.se if math.isfinite(e.se) else 0.0
    train_fell = data.loss_mean < min(history.losses[:1] or [start]) - margin
    # weights that grow while the training loss falls and validation stays at knowing nothing: memorised
    # labels its inputs do not explain, not steps thrown around by the LR
    high = high and not (val_stuck and train_fell)
    share = e.trained_share
    trained = {"trained_share": share, "trained_parameters": numel, "model_parameters": data.model_numel}
    frozen = weighed("frozen_parameters", e.frozen or cut_off, trained if math.isfinite(share) else {})
    too_high = weighed("lr_too_high", high, {"update_ratio_max": top, "weight_growth": growth})
    too_low = weighed("lr_too_low_or_frozen", low, {"update_ratio": now, "floor": floor})
    zeros = data.param_norm_start == 0  # every weight 0 at step 0: a saddle where every gradient is 0
    signal = {"grad_rms": grad_rms, "weights_norm_at_start": data.param_norm_start}
    no_signal = weighed("initialisation" if zeros else "no_gradient_signal", silent, signal)
    pulled = weighed("weights_pulled_to_zero", e.shrunk and not high, {"weight_growth": growth})
    # the output the same for every sample from the first check: the input never reaches it -- lost in a
    # deep stack of sigmoid/tanh layers, or identical as the model sees it (shuffled labels still vary it)
    spread = {"gain_over_input_free_guess": data.input_free_gap, "sigmoid_tanh_layers": squashing}
    # ... unless the steps explain it: weights thrown around or shrunk, frozen, or no gradient at all
    alone = same and not (high or silent or e.frozen or e.shrunk)
    lost = weighed("vanishing_gradients", alone and squashing >= DEEP_SQUASHING, spread)
    blank = weighed("inputs", alone and squashing < DEEP_SQUASHING, spread)
    open_ = not (high or low or silent or e.frozen or e.shrunk or same)
    labels = weighed("labels_do_not_match_inputs", open_, {"update_ratio_healthy": now})
    labels.evidence_against = {"output_same_for_every_sample": True} if same else {}
    if e.input_free and open_:  # the inputs tell the model nothing its own mean guess does not
        labels.evidence_for |= {
            "gain_over_input_free_guess": data.input_free_gap,
            "input_free_loss": data.input_free_loss,
        }
    if val_stuck and train_fell:
        labels.evidence_for |= {"val_loss_best": min(vals), "train_loss": data.loss_mean}
    elif vals and not val_stuck:
        labels.evidence_against["val_loss_best"] = min(vals)
    causes = [frozen, too_high, too_low, no_signal, pulled, lost, blank, labels]
    supported = [c.name for c in causes[:-1] if c.supported]
    if len(supported) == 1:
        cause = supported[0]
    else:
        cause = "labels_do_not_match_inputs" if not supported and val_stuck and train_fell else "undetermined"
    ranked_names = supported or ["labels_do_not_match_inputs", "lr_too_high"]
    evidence = {
        "loss": data.loss_mean,
        "start_loss": start,
        "cause": cause,
        "window_steps": round(span),
        "update_ratio": now,
        "weight_growth": growth,
        "grad_rms": grad_rms,
        "lr": lr,
        "ranked_causes": ranked_names if cause != "labels_do_not_match_inputs" else [cause],
        "causes": {c.name: _prose(c) for c in causes},
    }
    target = f" (from {fmt(lr)} to about {fmt(lr / 10)})" if math.isfinite(lr) else ""
    action = {
        "frozen_parameters": f"Only {numel} of the model's {data.model_numel} parameters ({share:.2%}) "
        "train: what they can fit is fitted. Check `requires_grad` (a freeze loop that matched too much, a "
        "freeze never undone) and that the optimizer was given the parameters meant to train."
        if not cut_off or e.frozen
        else f"Most weights get no gradient at all (a median step of exactly 0 at lr {fmt(lr)}): find the "
        "`.detach()`, `torch.no_grad()` or `.item()` between them and the loss.",
        "lr_too_high": f"The weights grew {fmt(growth)}x since step 0 (update ratio up to {fmt(top)}) while "
        f"the loss did not move: the steps throw them around. Lower the learning rate about 10x{target}.",
        "lr_too_low_or_frozen": f"Each step changes the weights by only {fmt(now)} of their norm: raise the "
        "learning rate (an LR range test), after checking that the parameters are trainable "
        "(`requires_grad`, a freeze never undone) and that the schedule does not hold the LR at ~0.",
        "no_gradient_signal": f"The gradients are ~0 (RMS {fmt(grad_rms)}): the loss does not depend on the "
        "weights. Look for a detached output (`.detach()`, `.item()`, `torch.no_grad`), a constant target, "
        "or labels all ignored (`ignore_index`, a mask).",
        "initialisation": "Every weight started at exactly 0 and every gradient is 0: a zero initialisation "
        "is a saddle point (each product's other factor is 0). Keep PyTorch's default init, or zero only "
        "one factor of each product (word2vec zeroes the output table, not both).",
        "weights_pulled_to_zero": f"The weights shrank to {fmt(growth)}x their norm at step 0 while the "
        "model predicts no better than a constant: something pulls them to zero faster than the gradient "
        "moves them. Check the weight decay (AdamW removes lr x weight_decay of each weight per step: 1 "
        "wipes them each step) and any penalty added to the loss.",
        "vanishing_gradients": f"The model's prediction was the same for every sample at every check, "
        f"through {squashing} sigmoid/tanh layers: the input's signal, and the gradient back to the early "
        "layers, fade on the way. Use ReLU/GELU, normalisation (BatchNorm, LayerNorm) or residual "
        "connections.",
        "inputs": "The model's prediction was the same for every sample at every check: the inputs reach it "
        "alike. Print a few encoded batches: a vocabulary that maps every token to one id, a feature scaled "
        "to a constant, an input overwritten before the forward.",
        "labels_do_not_match_inputs": "The model fits its training labels while the validation loss stays "
        "at the level of knowing nothing: check that each input keeps its own label (two shuffles, a wrong "
        "label column, a transform applied to one of them).",
    }.get(cause, "")
    tell = (
        ""
        if action
        else (
            "Candidates, most likely first: "
            + ", ".join(c.replace("_", " ") for c in ranked_names)
            + " (inputs and labels shuffled apart, a wrong label column, a transform applied to one of them)."
            + " "
            + _TELL_APART
        )
    )
    said = (
        f"The training loss has stayed at {fmt(data.loss_mean)}, {data.loss_mean / start:.0%} of its "
        f"{fmt(start)} at initialisation (the level of knowing nothing), for {span:.0f} steps: the run is "
        "not learning. "
    )
    if e.input_free:
        said += (
            "It does no better than its own prediction averaged over the batch (loss "
            f"{fmt(data.input_free_loss)}, gain {fmt(data.input_free_gap)} +- "
            f"{fmt(data.input_free_gap_se)}): what it learned needs no input. "
        )
    line = headline(
        f"not_learning at step {data.step}: loss {fmt(data.loss_mean)} = {data.loss_mean / start:.0%} of "
        f"its start {fmt(start)} for {span:.0f} steps" + (f" ({cause.replace('_', ' ')})" if action else "")
    )
    named = None if cause == "undetermined" else cause
    return Diagnosed(
        evidence, said + (action or tell), Diagnosis(line, ranked(causes, named), named, action, tell)
    )


def _prose(cause: Cause) -> str:
    """A cause's evidence as the text of ``evidence["causes"]``."""
    side, evidence = (
        ("for", cause.evidence_for) if cause.evidence_for else ("against", cause.evidence_against)
    )
    if not evidence:
        return "not excluded: nothing in the monitor's numbers measures it"
    return f"{side}: " + ", ".join(
        f"{k.replace('_', ' ')} {fmt(v) if isinstance(v, float) else v}" for k, v in evidence.items()
    )


def decide(data: CheckData, history: History, thresholds: dict[str, float]) -> dict[str, Decision]:
    """The problems present at this check, each with its evidence and advice; updates ``history`` once.

    Example:
        >>> data = CheckData(step=50, epoch=0, loss_mean=1.0, nonfinite_modules=["encoder.fc1"])
        >>> sorted(decide(data, History(), DEFAULT_THRESHOLDS))
        ['nonfinite_activations']
    """
    t, out = thresholds, {}
    e = evidence_of(data, history, t)
    found = nonfinite_activations(e)
    if found is not None:  # inf/nan poison every other instrument (a nan is never > 0): name only it
        exploded = exploded_into_nonfinite(e)
        raised = lr_raised_into_blowup(e, exploded) if exploded is not None else None
        grew = _grew_into_nonfinite(data) if found[0].get("cause") == "nonfinite_weights" else None
        if raised is None and (blowup := exploded or grew) is not None:  # steps too large from the first
            raised = lr_blew_up_from_the_first_step(e, blowup)
        if raised is not None:  # the LR rose, then the gradients exploded into inf/nan: the LR's
            out["lr_too_high"] = raised
            history.streaks["lr_blowup"] = history.streaks["lr_too_high_named"] = 1
        elif history.streaks.get("lr_blowup") and found[0].get("cause") == "nonfinite_weights":
            out["lr_too_high"] = ({**found[0], "symptom_of": "lr_too_high"}, found[1])  # still its weights
        else:
            out["nonfinite_activations"] = found
            _add(out, "exploding_gradients", exploded)
        _add(out, "data_stall", data_stall(e))
        return out
    _add(out, "exploding_gradients", exploding_gradients(e) or exploding_from_start(e))
    if "exploding_gradients" in out:
        history.streaks["exploded_at_step"] = data.step
    if data.grad_sampled and math.isfinite(data.grad_total):
        history.grad_totals.append(data.grad_total)
    _add(out, "dead_units", dead_units(e))
    if not history.streaks.get("dead_units", 0):
        history.streaks["dead_by_lr"] = 0
    _add(out, "saturated_activations", saturated_activations(e))
    _add(out, "vanishing_gradients", vanishing_gradients(e))
    _add(out, "lr_too_high", lr_too_high(e))
    raised = lr_raised_into_blowup(e, out["exploding_gradients"]) if "exploding_gradients" in out else None
    # an adaptive first step too large is the LR's alone; an SGD one's explosion may be the dynamics' (an
    # RNN's, for clipping), so SGD is judged so only where the weights went inf/nan (above)
    if raised is None and "exploding_gradients" in out and e.ratios.family == "adaptive":
        raised = lr_blew_up_from_the_first_step(e, out["exploding_gradients"])
    # the loss thrown far above its value before any update, within the first interval and on no outlier
    # batch: a blow-up too
    jumped = not history.losses and data.loss_first > 0 and data.loss_mean > LOSS_JUMP * data.loss_first
    jumped = jumped and not outliers_since(history, 0)
    if raised is None and jumped and e.ratios.family == "adaptive" and "lr_too_high" not in out:
        raised = lr_blew_up_from_the_first_step(e, ({"loss_vs_start": data.loss_mean / data.loss_first}, ""))
    if raised is not None:  # the explosion began after the LR rose into new ground: the LR's
        out.pop("exploding_gradients", None)
        out["lr_too_high"] = raised
    _dead_below_vanished(out, e)
    if "dead_units" in out:
        _attribute_dead_units(out, e)
    # a layer that cannot learn (vanishing, dead, saturated) explains a small update and a flat loss
    blocked = any(
        history.streaks.get(p, 0) > 0 for p in ("vanishing_gradients", "dead_units", "saturated_activations")
    )
    at_zero = lr_zero_for_a_trained_group(e)  # its count runs at every check
    _add(out, "lr_too_low", lr_too_low(e, cannot_learn=blocked) or at_zero)
    # an update ratio outside the healthy range: the LR rules judge it, a plateau would misname it
    lr_explains = math.isfinite(e.ratio) and not e.floor <= e.ratio <= t["ratio_stuck"]
    stuck = bool(history.streaks.get("not_learning"))  # a plateau at the start is not_learning's, found
    if not ({"lr_too_low", "lr_too_high"} & set(out) or blocked or lr_explains or stuck):
        plateau = loss_plateau(e)
        # nothing carries over to validation, almost nothing trains, or it landed on its input-free guess
        landed = e.input_free and not e.at_start
        # its weights shrink toward zero while it outputs its input-free guess: no saddle it will leave
        wiped = plateau is not None and e.input_free and e.shrunk
        if plateau is not None and (validation_never_improved(history, t) or e.frozen or landed or wiped):
            level = min(history.start_loss, history.losses[0]) if history.losses else history.start_loss
            out["not_learning"] = _diagnose(e, plateau[0]["window_steps"], level, int(plateau[0]["checks"]))
            plateau = None
        _add(out, "loss_plateau", plateau)
    _symptom_of_the_lr(out, history)
    if e.ratios.by_group:  # after the LR rules: they compare this check's LR with the previous one's
        history.ratios.append(e.ratio)
        history.lrs.append(e.lr)
    if set(out) - {"data_stall"}:
        history.streaks["named"] = 1  # a rule named a cause: not_learning is for the runs none explains
    if "not_learning" not in out:  # not named already by its dead units' blank inputs
        named = bool(history.streaks.get("named"))
        _add(out, "not_learning", not_learning(e, named=named, plateau_judges=not lr_explains))
    if "not_learning" in out:
        history.streaks["not_learning"] = 1
    if e.ratios.by_group and not set(out) - {"data_stall"}:  # the LR the run trains at healthily
        _remember_healthy(e)
    if math.isfinite(data.loss_mean):
        history.losses.append(data.loss_mean)
        history.loss_ses.append(e.se)
        history.loss_steps.append(data.step)
    _add(out, "overfitting", overfitting(data, history, t))
    _add(out, "data_stall", data_stall(e))
    _add(out, "outlier_batches", outlier_batches(e))
    return out


def _dead_below_vanished(out: dict[str, Decision], e: Evidence) -> None:
    """Dead units below a vanishing layer are its symptom: folded into ``vanishing_gradients``."""
    history = e.history
    if "vanishing_gradients" in out and _shrinks_before_blocked(e):
        history.streaks["dead_by_vanishing"] = 1
    if history.streaks.get("dead_by_vanishing") and "dead_units" in out:
        dead = out.pop("dead_units")[0].get("dead_fraction")
        if "vanishing_gradients" in out:
            out["vanishing_gradients"][0]["dead_fraction"] = dead


def _attribute_dead_units(out: dict[str, Decision], e: Evidence) -> None:
    """Name why the units died (LR, initialisation, outlier batches) or what would tell."""
    data, history, t = e.data, e.history, e.t
    evidence, _ = out["dead_units"]
    dead = evidence["dead_fraction"]
    if _learning_through_the_dying(e, dead):
        out.pop("dead_units")
        return
    recent = history.ratios[-int(t["persist_checks"]) - 1 :]
    lr_now = e.ratio > t["ratio_high"] or any(r > t["ratio_high"] for r in recent)
    by_lr, found = dead_unit_causes(dead, data, history, t, lr_now=lr_now)
    if not (history.streaks.get("dead_by_lr", 0) or by_lr):
        fractions = ", ".join(f"`{m}` {f:.0%}" for m, f in dead.items())
        advice = (
            found.action
            or f"{fractions} of units never fire; the evidence does not name the cause. {found.tell_apart}"
        )
        if found.cause == "inputs":  # one output for every sample: the loss sits at its input-free level
            out.pop("dead_units")
            line = headline(f"not_learning at step {data.step}: one output for all samples, {fractions} dead")
            found = dataclasses.replace(found, headline=line)
            out["not_learning"] = Diagnosed({**evidence, "cause": "inputs"}, advice, found)
            return
        out["dead_units"] = Diagnosed({**evidence, "cause": found.cause or "undetermined"}, advice, found)
        return
    history.streaks["dead_by_lr"] = 1  # the same units stay the LR's symptom while they stay dead
    out.pop("dead_units")
    high = out.get("lr_too_high")
    if high is None:  # units died at large steps: the LR, at the largest ratio seen
        seen = max([r for r in [e.ratio, *history.ratios] if math.isfinite(r)], default=math.nan)
        factor = lower_lr_by(seen) if math.isfinite(seen) else 10
        target = f" (from {fmt(e.lr)} to about {fmt(e.lr / factor)})" if math.isfinite(e.lr) else ""
        high = (
            {"update_ratio": seen, "lr": e.lr, "optimizer_family": e.ratios.family, "loss": data.loss_mean},
            f"Steps changed the weights by up to {fmt(seen)} of their norm (healthy: ~1e-3) and units died: "
            f"the learning rate is too high. Lower it about {factor}x{target}, add warm-up, or clip.",
        )
    merged = {**high[0], "dead_fraction": dead}
    line = headline(
        f"lr_too_high at step {data.step}: update ratio {fmt(merged.get('update_ratio', math.nan))} (healthy "
        "~1e-3), " + ", ".join(f"`{m}` {f:.0%}" for m, f in list(dead.items())[:2]) + " dead"
    )
    out["lr_too_high"] = Diagnosed(merged, high[1], Diagnosis(line, found.causes, "learning_rate", high[1]))


def _learning_through_the_dying(e: Evidence, dead: dict[str, float]) -> bool:
    """Units alive at step 0 died while the model learned: the loss is not above its value at the check
    before they began dying beyond noise (no harm shown), still falls over ``plateau_checks`` checks, and
    beats the model's input-free guess. Capacity pruned on the way is no failure; the units are judged once
    that stops."""
    history, t = e.history, e.t
    if any(history.dead_step0.get(m, 0.0) >= t["dead_fraction"] for m in dead) or not history.losses:
        return False
    start, _, _ = dying_window(history, t)
    i = history.loss_steps.index(start) if start in history.loss_steps else 0
    unharmed = not significantly_above(
        e.data.loss_mean, e.se, history.losses[i], history.loss_ses[i], t["confidence_z"]
    )
    # learning from its inputs: its prediction beats its own input-free guess beyond noise (known only there)
    gains = e.data.input_free_gap - t["confidence_z"] * e.data.input_free_gap_se > 0
    return unharmed and gains and bool(e.progressing(int(t["plateau_checks"])))


def _symptom_of_the_lr(out: dict[str, Decision], history: History) -> None:
    """Once ``lr_too_high`` is named, later saturation and gradient growth are its evidence."""
    if "lr_too_high" in out:
        history.streaks["lr_too_high_named"] = 1
    if not history.streaks.get("lr_too_high_named"):
        return
    if "saturated_activations" in out:
        saturated = out.pop("saturated_activations")[0].get("saturated_fraction")
        if "lr_too_high" in out:
            out["lr_too_high"][0]["saturated_fraction"] = saturated
    if "exploding_gradients" in out and out["exploding_gradients"][0].get("cause") != "outlier_batches":
        grad = out.pop("exploding_gradients")[0].get("grad_norm")
        if "lr_too_high" in out:
            out["lr_too_high"][0]["grad_norm"] = grad


def settle(active: set[str], present: set[str], history: History, persist: int) -> tuple[set[str], list[str]]:
    """``(still active, newly found)``: a problem stays active until absent ``persist`` checks in a row.

    Example:
        >>> history, active, found = History(), set(), []
        >>> for present in ({"dead_units"}, set(), {"dead_units"}, set(), set(), {"dead_units"}):
        ...     active, new = settle(active, present, history, 2)
        ...     found += new
        >>> found  # absent one check (2): the same finding; absent two (4, 5), then back: a new one
        ['dead_units', 'dead_units']
    """
    new = [p for p in PROBLEMS if p in present and p not in active]
    kept = set(new)
    for problem in active:
        key = f"absent:{problem}"
        absent = 0 if problem in present else history.streaks.get(key, 0) + 1
        if absent < persist:
            kept.add(problem)
            history.streaks[key] = absent
        else:
            history.streaks.pop(key, None)
    return kept, new


def _add(out: dict[str, Decision], problem: str, decision: Decision | None) -> None:
    if decision is not None:
        out[problem] = decision
