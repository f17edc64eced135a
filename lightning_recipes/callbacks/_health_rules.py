"""HealthMonitor's decisions: pure host-side rules over one check's numbers (:class:`CheckData`) and the
run's :class:`History`, identical on every rank, asked with the tests of ``_stats`` at ``confidence_z``.
Each rule, its threshold (:data:`DEFAULT_THRESHOLDS`), its source and when it stays quiet:
``docs/guides/health_monitor.md``.
"""

from __future__ import annotations

import math
import statistics

from lightning_recipes._stats import (
    difference_noise,
    mean_se,
    significantly_above,
    trend,
    validation_se,
    weighted_median,
)
from lightning_recipes.callbacks._health_causes import (
    GradientSpikes,
    dead_unit_causes,
    gradient_spikes,
    outliers_since,
    ranked,
    record_check,
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
    headline,
)

__all__ = [
    "RULES",
    "UpdateRatios",
    "at_start_level",
    "data_stall",
    "dead_units",
    "decide",
    "exploded_into_nonfinite",
    "exploding_gradients",
    "loss_plateau",
    "loss_window",
    "lower_lr_by",
    "lr_too_high",
    "lr_too_low",
    "nonfinite_activations",
    "not_learning",
    "outlier_batches",
    "overfitting",
    "ratio_floor",
    "saturated_activations",
    "settle",
    "stall_noise",
    "update_ratios",
    "validation_never_improved",
    "vanishing_gradients",
]


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def streak(history: History, name: str, present: bool) -> int:
    """Count ``name``'s checks in a row (reset when absent); returns the count."""
    history.streaks[name] = history.streaks.get(name, 0) + 1 if present else 0
    return history.streaks[name]


class UpdateRatios:
    """The sampled step's update ratios: per group, the parameter-weighted median, the family and LRs.

    Example:
        >>> data = CheckData(0, 0, update_ratio={"fc1": 1e-6, "fc1.bias": 2e-5},
        ...                  group_numel={"fc1": 1000, "fc1.bias": 10}, group_family={"fc1": "adaptive"})
        >>> ratios = update_ratios(data)
        >>> ratios.median, ratios.family, ratios.low(DEFAULT_THRESHOLDS)
        (1e-06, 'adaptive', 0.0001)
    """

    def __init__(self, data: CheckData) -> None:
        self.by_group = {g: r for g, r in data.update_ratio.items() if math.isfinite(r) and r >= 0}
        weights = [float(data.group_numel.get(g, 1)) for g in self.by_group]
        self.median = weighted_median(list(self.by_group.values()), weights)
        families: dict[str, float] = {}
        for g, w in zip(self.by_group, weights):
            family = data.group_family.get(g, "other")
            families[family] = families.get(family, 0.0) + w
        self.family = max(families, key=lambda f: families[f]) if families else "other"
        self.lr = {g: data.group_lr[g] for g in self.by_group if g in data.group_lr}

    def low(self, t: dict[str, float]) -> float:
        return t["ratio_low"] if self.family == "adaptive" else t["ratio_low_sgd"]

    def groups_above(self, limit: float, top: int = 3) -> dict[str, float]:
        return dict(
            sorted(((g, r) for g, r in self.by_group.items() if r > limit), key=lambda kv: -kv[1])[:top]
        )

    def groups_below(self, limit: float, top: int = 3) -> dict[str, float]:
        return dict(
            sorted(((g, r) for g, r in self.by_group.items() if r < limit), key=lambda kv: kv[1])[:top]
        )

    def largest_lr(self) -> float:
        finite = [v for v in self.lr.values() if math.isfinite(v)]
        return max(finite) if finite else math.nan


def update_ratios(data: CheckData) -> UpdateRatios:
    return UpdateRatios(data)


# ----------------------------------------------------------------------------------------- the loss's noise


def interval_se(data: CheckData) -> float:
    return mean_se(data.loss_std, data.loss_count)


def falling_within(data: CheckData, t: dict[str, float]) -> bool:
    """The interval's own slope is significantly negative."""
    if not (math.isfinite(data.loss_slope) and math.isfinite(data.loss_slope_se) and data.loss_slope_se > 0):
        return False
    return data.loss_slope / data.loss_slope_se < -t["confidence_z"]


def loss_window(history: History, data: CheckData, k: int) -> tuple[list[float], list[float], list[float]]:
    """The last ``k`` checks' steps, interval means and their standard errors (this check's included)."""
    steps = [*history.loss_steps[-(k - 1) :], data.step] if k > 1 else [data.step]
    means = [*history.losses[-(k - 1) :], data.loss_mean] if k > 1 else [data.loss_mean]
    ses = [*history.loss_ses[-(k - 1) :], interval_se(data)] if k > 1 else [interval_se(data)]
    return [float(s) for s in steps], means, ses


def progressing(data: CheckData, history: History, t: dict[str, float], k: int) -> bool | None:
    """Whether the loss fell significantly over the last ``k`` intervals (this one included): a significant
    downward trend of the interval means, or within this interval. ``None`` when fewer than ``k`` are
    known."""
    if falling_within(data, t):
        return True
    if len(history.losses) < k - 1 or not math.isfinite(data.loss_mean):
        return None
    slope, slope_se = trend(*loss_window(history, data, k))
    return slope < -t["confidence_z"] * slope_se  # False when unknown (NaN)


def _rise(data: CheckData, history: History, t: dict[str, float]) -> tuple[str, float, int] | None:
    """``(what, from, its step)`` when this interval's loss is significantly and ``rise_rtol`` above the
    previous interval's or the best earlier one's, and no outlier batch came after that interval (then the
    batch, not the LR, threw the loss up: ``_health_causes.gradient_spikes``)."""
    if not (history.losses and math.isfinite(data.loss_mean)):
        return None
    se = interval_se(data)
    best = min(range(len(history.losses)), key=lambda i: history.losses[i])
    for what, i in (("the previous check's", len(history.losses) - 1), ("its best", best)):
        before, before_se = history.losses[i], history.loss_ses[i] if i < len(history.loss_ses) else math.nan
        if (
            data.loss_mean > (1.0 + t["rise_rtol"]) * before
            and significantly_above(data.loss_mean, se, before, before_se, t["confidence_z"])
            and not outliers_since(history, history.loss_steps[i] if i < len(history.loss_steps) else 0)
        ):
            return what, before, history.loss_steps[i] if i < len(history.loss_steps) else 0
    return None


# ---------------------------------------------------------------------------------------------- the rules


def lower_lr_by(ratio: float) -> int:
    """How many times lower an LR must be to bring an update ratio to the healthy ~1e-3 (updates scale with
    the LR; a too-high LR has also grown the weights, which makes the ratio read low: aim at the low end)."""
    return max(3, round(ratio / 1e-3))


def lr_too_high(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """The update ratio is above ``ratio_high`` and the loss rose significantly (:func:`_persisting_rise`),
    or above ``ratio_stuck`` and the loss made no significant progress over ``plateau_checks`` checks, unless
    outlier batches came in between (the data threw the loss up); or, for an adaptive optimizer, the update
    ratio above ``ratio_high`` at every one of ``plateau_checks`` checks while the weights grew
    ``growth_high`` x since step 0 (steps of over 1% of the weights, for 5 checks running, throw them around
    whatever the loss does: an adaptive optimizer's ratio is its LR against the weights' scale).

    Example:
        >>> data = CheckData(0, 0, loss_mean=2.0, loss_count=20, loss_std=0.1,
        ...                  update_ratio={"fc1": 0.1, "fc2": 0.2}, group_lr={"fc1": 0.5, "fc2": 0.5})
        >>> history = History(losses=[1.0], loss_ses=[0.02], loss_steps=[0])
        >>> lr_too_high(data, history, DEFAULT_THRESHOLDS)[0]["update_ratio"]
        0.1
    """
    ratios = update_ratios(data)
    rise = _rise(data, history, t)
    rise = _persisting_rise(rise, data, history, t, ratios.largest_lr())
    if not (math.isfinite(ratios.median) and ratios.median > t["ratio_high"]):
        return None
    k = int(t["plateau_checks"])
    window_start = history.loss_steps[-k] if len(history.loss_steps) >= k else 0
    stuck = (
        ratios.median > t["ratio_stuck"]
        and progressing(data, history, t, k) is False
        and not outliers_since(history, window_start)
    )
    growth = data.param_norm / data.param_norm_start if data.param_norm_start > 0 else math.nan
    recent = [*history.ratios[-(k - 1) :], ratios.median] if len(history.ratios) >= k - 1 else []
    sustained = (
        ratios.family == "adaptive"
        and bool(recent)
        and min(recent) > t["ratio_high"]
        and growth > t["growth_high"]
    )
    if rise is None and not stuck and not sustained:
        return None
    lr = ratios.largest_lr()
    if rise is not None:
        what = f"the loss rose from {_fmt(rise[1])} ({rise[0]}) to {_fmt(data.loss_mean)}"
    elif stuck:
        what = f"the loss has not fallen significantly in {k} checks (now {_fmt(data.loss_mean)})"
    else:
        what = (
            f"has been above 1e-2 for {k} checks while the weights grew {_fmt(growth)}x since step 0 "
            f"(the loss {_fmt(data.loss_mean)})"
        )
    factor = lower_lr_by(ratios.median)
    target = f" (from {_fmt(lr)} to about {_fmt(lr / factor)})" if math.isfinite(lr) else ""
    return (
        {
            "update_ratio": ratios.median,
            "largest_groups": ratios.groups_above(t["ratio_high"]),
            "lr": lr,
            "optimizer_family": ratios.family,
            "loss": data.loss_mean,
            "loss_before": rise[1] if rise is not None else history.losses[-k + 1] if k > 1 else math.nan,
        }
        | ({"weight_growth": growth} if rise is None and not stuck else {}),
        f"Each step changes the weights by {_fmt(ratios.median)} of their norm (healthy: ~1e-3) and {what}. "
        f"Lower the learning rate about {factor}x{target}, or run an LR range test; add warm-up, or clip.",
    )


def _persisting_rise(
    rise: tuple[str, float, int] | None, data: CheckData, history: History, t: dict[str, float], lr: float
) -> tuple[str, float, int] | None:
    """``rise`` when it is LR evidence: a rise that began with a scheduled LR increase back to a level the run
    already trained at (the LR 1.5x the previous check's, and within 1.5x of its earlier peak: a warm
    restart) counts only when it persists, risen again at the next check and not falling there (a restart's
    bump recedes within a check). A rise after an LR raised above any it had (a jump, a warm-up into new
    ground) counts at once. Counts its own streak (``rise``) and remembers the last such check
    (``lr_raised_at``)."""
    peak = max((v for v in history.lrs if math.isfinite(v)), default=math.nan)
    if _warming_up(history, lr) and lr <= 1.5 * peak:
        history.streaks["lr_raised_at"] = data.step
    count = streak(history, "rise", rise is not None)
    raised_at = history.streaks.get("lr_raised_at", -1)
    if rise is None or raised_at <= rise[2]:
        return rise  # no LR increase since the interval the loss rose from
    previous, previous_se = history.losses[-1], history.loss_ses[-1] if history.loss_ses else math.nan
    falling = falling_within(data, t) or significantly_above(
        previous, previous_se, data.loss_mean, interval_se(data), t["confidence_z"]
    )
    return rise if count >= int(t["persist_checks"]) and not falling else None


def _warming_up(history: History, lr: float) -> bool:
    return bool(history.lrs) and math.isfinite(lr) and lr > 1.5 * history.lrs[-1]


def _annealing(data: CheckData, history: History, lr: float, t: dict[str, float]) -> bool:
    """A schedule taking the LR down in the last ``1 - anneal_fraction`` of a planned run, after it already
    decayed by the previous check (a cosine reaching 0 at its last step drops "infinitely" there)."""
    late = math.isfinite(data.planned_steps) and data.step >= t["anneal_fraction"] * data.planned_steps
    decaying = (
        len(history.lrs) >= 2
        and history.lrs[-1] <= history.lrs[-2]
        and (math.isnan(lr) or lr <= history.lrs[-1])
    )
    return late and decaying


def at_start_level(data: CheckData, history: History, t: dict[str, float]) -> bool:
    """The loss still sits within ``trivial_band`` of its level at initialisation (the level of knowing
    nothing): the run is not at a minimum."""
    start = history.start_loss
    return math.isfinite(start) and start > 0 and data.loss_mean >= (1.0 - t["trivial_band"]) * start


def ratio_floor(ratios: UpdateRatios, data: CheckData, history: History, t: dict[str, float]) -> float:
    """The update ratio below which the LR is too low: the family's floor, and the adaptive one's
    (``ratio_low``) for SGD while the loss sits at its level at initialisation. SGD's update is the LR times
    the gradient, and only at a minimum does a small gradient excuse a small update; a run that knows
    nothing yet is not at a minimum.

    Example:
        >>> data = CheckData(0, 0, loss_mean=2.3, update_ratio={"fc1": 2e-5}, group_family={"fc1": "sgd"})
        >>> ratio_floor(update_ratios(data), data, History(start_loss=2.3), DEFAULT_THRESHOLDS)
        0.0001
    """
    floor = ratios.low(t)
    if ratios.family != "adaptive" and at_start_level(data, history, t):
        return max(floor, t["ratio_low"])
    return floor


def lr_too_low(
    data: CheckData, history: History, t: dict[str, float], cannot_learn: bool = False
) -> Decision | None:
    """The update ratio is below its floor (:func:`ratio_floor`) with a loss that is not falling
    significantly, ``persist_checks`` checks in a row (a collapsed LR too: a schedule's trough is one
    check; one check when the LR fell 1000x within one interval: a step cut); never while the weights have
    grown ``growth_blown`` x since step 0 (then the ratio is small because the weights blew up, an
    explosion's aftermath, not because the LR is).

    Example:
        >>> data = CheckData(0, 0, loss_mean=1.0, loss_count=20, loss_std=0.05, update_ratio={"fc1": 1e-7})
        >>> history = History(losses=[1.0], loss_ses=[0.01], loss_steps=[0], streaks={"lr_too_low": 1})
        >>> lr_too_low(data, history, DEFAULT_THRESHOLDS)[0]["update_ratio"]
        1e-07
    """
    ratios = update_ratios(data)
    floor = ratio_floor(ratios, data, history, t)
    lr = ratios.largest_lr()
    growth = data.param_norm / data.param_norm_start if data.param_norm_start > 0 else math.nan
    previous_se = history.loss_ses[-1] if history.loss_ses else math.nan
    # an LR cut to below 1/1000 of its peak (a scheduler's gamma, a LambdaLR factor): the update ratio lags
    # behind it while momentum decays, the LR itself does not
    peak = max((v for v in history.lrs if math.isfinite(v)), default=math.nan)
    cut = math.isfinite(lr) and math.isfinite(peak) and lr < 1e-3 * peak
    collapsed = cut or (math.isfinite(ratios.median) and ratios.median < 1e-3 * floor)
    # a collapsed LR cannot move the loss: only this interval's own trend counts (the previous interval's mean
    # holds the progress made before the collapse)
    falling = falling_within(data, t) or (
        not collapsed
        and bool(history.losses)
        and significantly_above(
            history.losses[-1], previous_se, data.loss_mean, interval_se(data), t["confidence_z"]
        )
    )
    stuck = (
        collapsed or not history.losses or data.loss_mean > (1.0 - t["plateau_progress"]) * history.losses[0]
    )
    low = (
        math.isfinite(ratios.median)
        and (ratios.median < floor or cut)
        and stuck
        and math.isfinite(data.loss_mean)
        and not falling
        and not cannot_learn
        and not growth > t["growth_blown"]
        and not _warming_up(history, lr)
        and not _annealing(data, history, lr, t)
    )
    # a collapse must still be there at the next check (a cosine's trough, approached over checks, sits near
    # 0 for one check and comes back), unless the LR fell 1000x within one interval: a step cut (a StepLR's
    # gamma, a LambdaLR factor) is no trough
    previous_lr = history.lrs[-1] if history.lrs else math.nan
    abrupt = cut and math.isfinite(previous_lr) and lr < 1e-3 * previous_lr
    count = streak(history, "lr_too_low", low)
    if not low or count < (1 if abrupt else int(t["persist_checks"])):
        return None
    raise_by = max(3, round(floor * 30 / max(ratios.median, 1e-30)))
    target = f" (from {_fmt(lr)} to about {_fmt(lr * raise_by)})" if math.isfinite(lr) and lr > 0 else ""
    if cut:
        return (
            {"lr": lr, "peak_lr": peak, "update_ratio": ratios.median, "loss": data.loss_mean},
            f"The learning rate is {_fmt(lr)}, {_fmt(peak / max(lr, 1e-30))}x below its peak of "
            f"{_fmt(peak)}, and the loss stopped falling ({_fmt(data.loss_mean)}). "
            "Check the scheduler: a step decay's gamma, a LambdaLR factor, a schedule shorter than the run.",
        )
    return (
        {
            "update_ratio": ratios.median,
            "smallest_groups": ratios.groups_below(floor),
            "lr": lr,
            "optimizer_family": ratios.family,
            "floor": floor,
            "loss": data.loss_mean,
        },
        f"Each step changes the weights by only {_fmt(ratios.median)} of their norm (below {_fmt(floor)} for "
        f"{ratios.family} optimizers"
        + (" at the loss's level at initialisation" if floor > ratios.low(t) else "")
        + f"; healthy ~1e-3) and the loss is not falling ({_fmt(data.loss_mean)}). "
        f"Raise the learning rate about {raise_by}x{target}, or run an LR range test; check the schedule "
        "does not cut it to ~0.",
    )


def loss_plateau(
    data: CheckData, history: History, t: dict[str, float], family: str = "other"
) -> Decision | None:
    """No significant progress over ``plateau_checks`` checks, little progress since the start.

    Example:
        >>> history = History(losses=[1.38, 1.38, 1.39, 1.38, 1.38], loss_ses=[0.01] * 5,
        ...                   loss_steps=[50, 100, 150, 200, 250])
        >>> data = CheckData(300, 0, loss_mean=1.38, loss_count=50, loss_std=0.04)
        >>> loss_plateau(data, history, DEFAULT_THRESHOLDS)[0]["checks"]
        5
    """
    k = int(t["plateau_checks"])
    losses = [*history.losses, data.loss_mean]
    if len(losses) <= k or not math.isfinite(data.loss_mean) or progressing(data, history, t, k) is not False:
        return None
    # the window must also span ``plateau_steps`` steps: transformers sit at chance level for ~100 steps
    # before they break symmetry, and a plateau that short is a phase, not a problem
    span = data.step - history.loss_steps[-k] if len(history.loss_steps) >= k else 0
    if span < t["plateau_steps"]:
        k = next(
            (j for j in range(k, len(losses)) if data.step - history.loss_steps[-j] >= t["plateau_steps"]), 0
        )
        if not k or progressing(data, history, t, k) is not False:
            return None
    first = losses[0]
    steps, means, ses = loss_window(history, data, k)
    slope, _ = trend(steps, means, ses)
    span = data.step - history.loss_steps[-k]
    if history.streaks.get("exploded_at_step", -1) >= data.step - span - 1:
        return None  # a loss that stopped falling after a gradient explosion: the explosion is the cause
    if outliers_since(history, data.step - span):
        return None  # outlier batches in the window hold the loss's level up: the rows, as for lr_too_high
    level, _ = _mean_of(means, ses)
    # not significant, and not material either: a noisy loss may hide a real but slow descent
    drop = -slope * span if math.isfinite(slope) else 0.0
    if drop > t["plateau_rtol"] * abs(level) or not data.loss_mean > (1.0 - t["plateau_progress"]) * first:
        return None
    change = "a different optimizer (AdamW/Lion), " if family != "adaptive" else ""
    return (
        {
            "loss": data.loss_mean,
            "window_steps": span,
            "window_change": -drop / abs(level) if level else math.nan,
            "checks": k,
            "first_loss": first,
        },
        f"The training loss has not fallen significantly for {span} steps ({_fmt(data.loss_mean)}, "
        f"{data.loss_mean / first:.0%} of its first value). Check that the labels are learnable "
        f"(`preflight`'s overfit_batch check), then try an LR range test, {change}or a larger model.",
    )


def validation_never_improved(history: History, t: dict[str, float]) -> bool:
    """Three validations or more, and the best not significantly below the first (``confidence_z``, each
    with :func:`validation_se`): what the run learned after its first epoch does not carry over to unseen
    rows. A training loss that plateaus then is ``not_learning``, not ``loss_plateau``.

    Example:
        >>> rows = [(0, 1.079, 1.097, 0.02, 500), (1, 1.076, 1.099, 0.02, 500), (2, 1.083, 1.077, 0.02, 500)]
        >>> validation_never_improved(History(validations=rows), DEFAULT_THRESHOLDS)
        True
        >>> rows[2] = (2, 0.9, 1.0, 0.02, 500)
        >>> validation_never_improved(History(validations=rows), DEFAULT_THRESHOLDS)
        False
    """
    vals = [v for v in history.validations if math.isfinite(v[1])]
    if len(vals) < 3:
        return False
    first, best = vals[0], min(vals, key=lambda v: v[1])
    first_se, best_se = validation_se(first[1], first[3], first[4]), validation_se(best[1], best[3], best[4])
    if not (math.isfinite(first_se) and math.isfinite(best_se)):
        return False  # no noise estimate: no claim
    return not significantly_above(first[1], first_se, best[1], best_se, t["confidence_z"])


def _mean_of(means: list[float], ses: list[float]) -> tuple[float, float]:
    """The mean of interval means and its standard error (NaN errors make it NaN)."""
    finite = [(m, s) for m, s in zip(means, ses) if math.isfinite(m)]
    if not finite:
        return math.nan, math.nan
    mean = sum(m for m, _ in finite) / len(finite)
    return mean, math.sqrt(sum(s**2 for _, s in finite)) / len(finite)


def overfitting(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """Prechelt's GL above ``overfit_gl``, significant against the validation noise, with a growing
    generalisation gap and no recovery, at ``overfit_persist`` validations in a row (each validation is
    recorded in ``history``; the verdict is the latest validation's).

    Example:
        >>> history = History(validations=[(0, 1.0, 1.1, 0.01, 1000), (1, 0.8, 0.7, 0.01, 1000)])
        >>> rows = [(2, 0.9, 0.5, 0.01, 1000), (3, 1.0, 0.4, 0.01, 1000), (4, 1.1, 0.3, 0.01, 1000)]
        >>> overfitting(CheckData(0, 4, validations=rows), history, DEFAULT_THRESHOLDS)[0]["began_epoch"]
        2
    """
    found: Decision | None = None
    z = t["confidence_z"]
    for entry in data.validations:
        previous = history.validations[-1] if history.validations else None
        history.validations.append(entry)
        vals = history.validations
        best_epoch, best_val, best_train, best_se, best_count = min(vals, key=lambda v: v[1])
        _, val, train, se, count = entry
        se, best_se = validation_se(val, se, count), validation_se(best_val, best_se, best_count)
        gl = 100.0 * (val / best_val - 1.0) if best_val > 0 else 0.0
        if math.isnan(se) or math.isnan(best_se):  # no noise estimate at all: demand 4x the rise
            significant = gl > 4 * t["overfit_gl"]
        else:
            significant = significantly_above(val, se, best_val, best_se, z)
        significant = significant or _rise_beyond_series_noise(vals, val, best_val, z)
        recovering = previous is not None and significantly_above(
            previous[1], validation_se(previous[1], previous[3], previous[4]), val, se, z
        )
        # a model that overfits fits its training set better than it ever fit validation (a diverged run's
        # training loss sits above the best validation loss), and its training loss keeps falling
        fitting = train < min(best_train, best_val) and (
            previous is None
            or train <= (1.0 + t["rise_rtol"]) * previous[2]
            or _fitted(train, best_train, best_val)
        )
        # a training loss still at the level of knowing nothing (its start) has fitted nothing: a diverged or
        # stuck run whose validation loss jumps around, not an overfitting one
        start = history.start_loss
        fitted = not (math.isfinite(start) and train >= (1.0 - t["trivial_band"]) * start)
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
                f"Validation loss is {gl:.1f}% above its best ({_fmt(best_val)} at epoch {best_epoch}; "
                f"now {_fmt(val)} +- {_fmt(se)}) while the training loss fell to {_fmt(train)}: overfitting "
                f"since epoch {best_epoch + 1}. Use `EarlyStopping(restore_best_weights=True)`, more weight "
                "decay or dropout, data augmentation or more data.",
            )
    return found


def _fitted(train: float, best_train: float, best_val: float) -> bool:
    """The training loss is ten times below where it was at the best validation: the model fits its
    training set (a loss at ~0 wobbles by more than ``rise_rtol`` from epoch to epoch, and that is not a
    training loss that stopped falling)."""
    return train <= 0.1 * min(best_train, best_val)


def _rise_beyond_series_noise(
    vals: list[tuple[int, float, float, float, int]], val: float, best_val: float, z: float
) -> bool:
    """Whether ``val`` is above ``best_val`` by more than ``z`` times the noise of a difference of two
    validations, measured on the run's own validation series from its best on (``difference_noise``, blind
    to a straight trend; 4 validations or more). Validations of one fixed set are paired: the batch-to-batch
    spread of an overconfident model's per-batch losses (heavy-tailed) says how far a new sample's loss could
    fall, not how much the same set's loss moves between epochs; the series says the latter."""
    series = [v[1] for v in vals if math.isfinite(v[1])]
    best = series.index(min(series)) if series else 0
    series = series[best:]
    if len(series) < 4:
        return False
    noise = difference_noise(series, order=2)
    return val - best_val > z * math.sqrt(2.0) * max(noise, 1e-12 * abs(best_val))


# ------------------------------------------------------------------------------------------ not_learning

_NO_GRADIENT = 1e-8  # gradient RMS per element below which the loss does not depend on the weights
_TELL_APART = (
    "What tells them apart: `preflight`'s overfit_batch check (a model that cannot fit one fixed batch at "
    "this LR: the LR or the model; one that fits it: the labels of the stream do not follow its inputs), or "
    "~150 steps at a 10x lower LR (the loss falls: the LR)."
)


def not_learning(
    data: CheckData, history: History, t: dict[str, float], named: bool, plateau_judges: bool = True
) -> Decision | None:
    """The loss stays at its level at initialisation (never ``trivial_band`` below it: the level of knowing
    nothing, ln C for a classifier) for ``plateau_checks`` checks and ``plateau_steps`` steps, falling too
    slowly to leave it (a model memorising labels that do not follow its inputs) or flat, with no other
    problem named in the run (``named``) and no warm-up under way; the causes ranked by the evidence. A loss
    flat within its noise is ``loss_plateau``'s to judge while ``plateau_judges`` (``decide``: while the
    update ratio is in its healthy range; outside it the plateau rule stays silent and this one speaks).

    Example:
        >>> history = History(losses=[3.15, 3.097, 3.098, 3.095, 3.093], loss_ses=[0.01] + [0.001] * 4,
        ...                   loss_steps=[50, 100, 150, 200, 250], ratios=[2e-3] * 5, start_loss=3.2)
        >>> data = CheckData(300, 5, loss_mean=3.092, loss_count=50, loss_std=0.008, param_norm=81.0,
        ...                  param_norm_start=29.0, update_ratio={"model": 2e-3}, grad_sampled=True,
        ...                  grad_total=0.07, group_numel={"model": 10_000})
        >>> evidence, advice = not_learning(data, history, DEFAULT_THRESHOLDS, named=False)
        >>> evidence["cause"], round(evidence["weight_growth"], 2)
        ('lr_too_high', 2.79)
    """
    if math.isnan(history.start_loss) and math.isfinite(data.loss_head):
        history.start_loss = data.loss_head
    start, k = history.start_loss, int(t["plateau_checks"])
    if named or not (math.isfinite(start) and start > 0 and math.isfinite(data.loss_mean)):
        return None
    if len(history.losses) < k - 1:
        return None
    k = next(
        (
            j
            for j in range(k, len(history.losses) + 2)
            if data.step - _first(history, j) >= t["plateau_steps"]
        ),
        0,
    )
    if not k:
        return None
    steps, means, _ = loss_window(history, data, k)
    span = data.step - steps[0]
    if min(means) < (1.0 - t["trivial_band"]) * start:
        return None  # it left the level of knowing nothing: it learns (or learned)
    if _warming_up(history, update_ratios(data).largest_lr()):
        return None
    if plateau_judges and not (_memorising(data, history, t) or _immaterial_fall(history, data, t, k)):
        return None  # flat within its noise, or it fell materially early on: ``loss_plateau`` judges that
    return _diagnose(data, history, t, span, start, k)


def _falls(history: History, data: CheckData, t: dict[str, float], k: int) -> tuple[bool, float, float]:
    """``(significant, drop, level)`` of the last ``k`` checks' trend: whether the interval means fall by more
    than ``confidence_z`` standard errors, how much they fall over the window, and their mean."""
    steps, means, ses = loss_window(history, data, k)
    slope, slope_se = trend(steps, means, ses)
    drop = -slope * (steps[-1] - steps[0]) if math.isfinite(slope) else 0.0
    return slope < -t["confidence_z"] * slope_se, drop, sum(means) / len(means)


def _memorising(data: CheckData, history: History, t: dict[str, float]) -> bool:
    """The loss still falls, significantly and materially (``plateau_rtol``), over the last
    ``plateau_checks`` checks: at the level of knowing nothing, a model fitting its batches one by one."""
    k = int(t["plateau_checks"])
    if len(history.losses) < k - 1:
        return False
    significant, drop, level = _falls(history, data, t, k)
    return significant and drop > t["plateau_rtol"] * abs(level)


def _immaterial_fall(history: History, data: CheckData, t: dict[str, float], k: int) -> bool:
    """Over the ``k``-check window the loss falls significantly but immaterially (``plateau_rtol``): no
    plateau for ``loss_plateau`` (the fall is significant), no learning either."""
    significant, drop, level = _falls(history, data, t, k)
    return significant and drop <= t["plateau_rtol"] * abs(level)


def _first(history: History, k: int) -> int:
    """The step of the window's first check when it holds ``k`` checks (this one included)."""
    return history.loss_steps[-(k - 1)] if k > 1 and len(history.loss_steps) >= k - 1 else 1 << 62


def _prose(cause: Cause) -> str:
    """A cause's evidence in the words of ``evidence["causes"]`` (kept for readers of the older record)."""
    if cause.evidence_for:
        return "for: " + _pairs(cause.evidence_for)
    if cause.evidence_against:
        return "against: " + _pairs(cause.evidence_against)
    return "not excluded: nothing in the monitor's numbers measures it"


def _pairs(evidence: dict[str, object]) -> str:
    words = [f"{k.replace('_', ' ')} {_fmt(v) if isinstance(v, float) else v}" for k, v in evidence.items()]
    return ", ".join(words)


def _diagnose(
    data: CheckData, history: History, t: dict[str, float], span: float, start: float, k: int
) -> Decision:
    ratios = update_ratios(data)
    seen = [r for r in [*history.ratios[-(k - 1) :], ratios.median] if math.isfinite(r)]
    top, now = max(seen, default=math.nan), ratios.median
    growth = data.param_norm / data.param_norm_start if data.param_norm_start > 0 else math.nan
    numel = sum(data.group_numel.values()) or 1
    grad_rms = data.grad_total / math.sqrt(numel) if data.grad_sampled else math.nan
    floor, lr = ratios.low(t), ratios.largest_lr()
    high = top > t["ratio_stuck"] or growth > t["growth_high"]
    low = math.isfinite(now) and now < floor
    silent = math.isfinite(grad_rms) and grad_rms < _NO_GRADIENT
    # validation at the level of knowing nothing while the training loss fell: the model fits (memorises) its
    # training labels, and what it learns does not carry over: the labels do not follow the inputs
    trivial = (1.0 - t["trivial_band"]) * start
    vals = [v for v in history.validations if math.isfinite(v[1])]
    val_stuck = bool(vals) and min(v[1] for v in vals) >= trivial
    train_fell = math.isfinite(data.loss_mean) and data.loss_mean < min(history.losses[:1] or [start]) - (
        t["confidence_z"] * interval_se(data) if math.isfinite(interval_se(data)) else 0.0
    )
    too_high = Cause("lr_too_high")
    if high:
        too_high.evidence_for |= {"update_ratio_max": top, "weight_growth": growth}
    else:
        too_high.evidence_against |= {"update_ratio_max": top, "weight_growth": growth}
    too_low = Cause("lr_too_low_or_frozen")
    if low:
        too_low.evidence_for |= {"update_ratio": now, "floor": floor}
    else:
        too_low.evidence_against |= {"update_ratio": now, "floor": floor}
    no_signal = Cause("no_gradient_signal")
    if silent:
        no_signal.evidence_for["grad_rms"] = grad_rms
    else:
        no_signal.evidence_against["grad_rms"] = grad_rms
    labels = Cause("labels_do_not_match_inputs")
    if not (high or low or silent):
        labels.evidence_for["update_ratio_healthy"] = now
    if val_stuck and train_fell:
        labels.evidence_for |= {"val_loss_best": min(v[1] for v in vals), "train_loss": data.loss_mean}
    elif vals and not val_stuck:
        labels.evidence_against["val_loss_best"] = min(v[1] for v in vals)
    supported = [c.name for c in (too_high, too_low, no_signal) if c.supported]
    if len(supported) == 1:
        cause = supported[0]
    elif not supported and val_stuck and train_fell:
        cause = "labels_do_not_match_inputs"
    else:
        cause = "undetermined"
    ranked_names = supported or ["labels_do_not_match_inputs", "lr_too_high"]
    records = ranked([too_high, too_low, no_signal, labels], None if cause == "undetermined" else cause)
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
        "causes": {c.name: _prose(c) for c in (too_high, too_low, no_signal, labels)},
    }
    said = (
        f"The training loss has stayed at {_fmt(data.loss_mean)}, {data.loss_mean / start:.0%} of its "
        f"{_fmt(start)} at initialisation (the level of knowing nothing), for {span:.0f} steps: the run is "
        "not learning. "
    )
    target = f" (from {_fmt(lr)} to about {_fmt(lr / 10)})" if math.isfinite(lr) else ""
    actions = {
        "lr_too_high": f"The weights grew {_fmt(growth)}x since step 0 (update ratio up to {_fmt(top)}) "
        f"while the loss did not move: the steps throw them around. Lower the learning rate about "
        f"10x{target}.",
        "lr_too_low_or_frozen": f"Each step changes the weights by only {_fmt(now)} of their norm: raise the "
        "learning rate (an LR range test), after checking that the parameters are trainable "
        "(`requires_grad`, a freeze never undone) and that the schedule does not hold the LR at ~0.",
        "no_gradient_signal": f"The gradients are ~0 (RMS {_fmt(grad_rms)}): the loss does not depend on the "
        "weights. Look for a detached output (`.detach()`, `.item()`, `torch.no_grad`), a constant target, "
        "or labels all ignored (`ignore_index`, a mask).",
        "labels_do_not_match_inputs": "The model fits its training labels while the validation loss stays "
        "at the level of knowing nothing: check that each input keeps its own label (two shuffles, a wrong "
        "label column, a transform applied to one of them).",
    }
    action = actions.get(cause, "")
    tell = (
        ""
        if cause != "undetermined"
        else "Candidates, most likely first: "
        + ", ".join(c.replace("_", " ") for c in ranked_names)
        + " (inputs and labels shuffled apart, a wrong label column, a transform applied to one of them). "
        + _TELL_APART
    )
    line = headline(
        f"not_learning at step {data.step}: loss {_fmt(data.loss_mean)} = {data.loss_mean / start:.0%} of "
        f"its start {_fmt(start)} for {span:.0f} steps"
        + (f" ({cause.replace('_', ' ')})" if cause != "undetermined" else "")
    )
    diagnosis = Diagnosis(line, records, None if cause == "undetermined" else cause, action, tell)
    return Diagnosed(evidence, said + (action or tell), diagnosis)


def decide(data: CheckData, history: History, thresholds: dict[str, float]) -> dict[str, Decision]:
    """The problems present at this check, each with its evidence and advice; updates ``history``.

    Runs the rules of :data:`RULES` in order; a rule's streak (``persist_checks``) and the loss/gradient
    histories are updated here or by the rule itself, exactly once per check.

    Example:
        >>> history = History()
        >>> data = CheckData(step=50, epoch=0, loss_mean=1.0, nonfinite_modules=["encoder.fc1"])
        >>> sorted(decide(data, history, DEFAULT_THRESHOLDS))
        ['nonfinite_activations']
    """
    t = thresholds
    out: dict[str, Decision] = {}
    ratios = update_ratios(data)
    spikes = record_check(data, history, ratios.median, ratios.largest_lr(), t)
    found = nonfinite_activations(data, history, t)
    if found is not None:
        # inf/nan poison every other instrument (a nan is never > 0: every unit looks dead): name only it
        out["nonfinite_activations"] = found
        _add(out, "exploding_gradients", exploded_into_nonfinite(data, history, t))
        _add(out, "data_stall", data_stall(data, history, t))
        return out
    _add(out, "exploding_gradients", exploding_gradients(data, history, t, spikes))
    if "exploding_gradients" in out:
        history.streaks["exploded_at_step"] = data.step
    if data.grad_sampled and math.isfinite(data.grad_total):
        history.grad_totals.append(data.grad_total)
    _add(out, "dead_units", dead_units(data, history, t))
    if not history.streaks.get("dead_units", 0):
        history.streaks["dead_by_lr"] = 0
    _add(out, "saturated_activations", saturated_activations(data, history, t))
    _add(out, "vanishing_gradients", vanishing_gradients(data, history, t))
    _add(out, "lr_too_high", lr_too_high(data, history, t))
    if "dead_units" in out:
        _attribute_dead_units(out, data, history, t)
    learn_blocked = _cannot_learn(history)
    _add(out, "lr_too_low", lr_too_low(data, history, t, cannot_learn=learn_blocked))
    lr_explains = math.isfinite(ratios.median) and not (
        ratio_floor(ratios, data, history, t) <= ratios.median <= t["ratio_stuck"]
    )  # an update ratio outside the healthy range: the LR rules judge it, a plateau would misname it
    stuck = bool(history.streaks.get("not_learning"))  # a plateau at the start is not_learning's, found
    if not ({"lr_too_low", "lr_too_high"} & set(out) or learn_blocked or lr_explains or stuck):
        plateau = loss_plateau(data, history, t, family=ratios.family)
        if plateau is not None and validation_never_improved(history, t):
            # nothing learned carries over: the run is not learning (a regression's targets of other rows)
            level = min(history.start_loss, history.losses[0]) if history.losses else history.start_loss
            evidence = plateau[0]
            out["not_learning"] = _diagnose(
                data, history, t, evidence["window_steps"], level, int(evidence["checks"])
            )
            plateau = None
        _add(out, "loss_plateau", plateau)
    _symptom_of_the_lr(out, history)
    if ratios.by_group:  # after the LR rules: they compare this check's LR with the previous one's
        history.ratios.append(ratios.median)
        history.lrs.append(ratios.largest_lr())
    if set(out) - {"data_stall"}:
        history.streaks["named"] = 1  # a rule named a cause: not_learning is for the runs none explains
    named = bool(history.streaks.get("named"))
    _add(out, "not_learning", not_learning(data, history, t, named=named, plateau_judges=not lr_explains))
    if "not_learning" in out:
        history.streaks["not_learning"] = 1
    if math.isfinite(data.loss_mean):
        history.losses.append(data.loss_mean)
        history.loss_ses.append(interval_se(data))
        history.loss_steps.append(data.step)
    _add(out, "overfitting", overfitting(data, history, t))
    _add(out, "data_stall", data_stall(data, history, t))
    _add(out, "outlier_batches", outlier_batches(data, history, t, spikes))
    return out


def _attribute_dead_units(
    out: dict[str, Decision], data: CheckData, history: History, t: dict[str, float]
) -> None:
    """Name why the units of ``out["dead_units"]`` died (``_health_causes.dead_unit_causes``): the learning
    rate (then the finding is ``lr_too_high``, the dead units its evidence), the initialisation, outlier
    batches, or, when the evidence does not separate them, the symptom and what would tell them apart."""
    evidence, _ = out["dead_units"]
    dead = evidence["dead_fraction"]
    by_lr, found = dead_unit_causes(dead, data, history, t, lr_now=_killed_by_the_lr(data, history, t))
    if history.streaks.get("dead_by_lr", 0) or by_lr:
        history.streaks["dead_by_lr"] = 1  # the same units stay the LR's symptom while they stay dead
        out.pop("dead_units")
        high = out.get("lr_too_high") or _lr_kills_units(data, history, t)
        merged = {**high[0], "dead_fraction": dead}
        ratio = merged.get("update_ratio", math.nan)
        line = headline(
            f"lr_too_high at step {data.step}: update ratio {_fmt(ratio)} (healthy ~1e-3), "
            + ", ".join(f"`{m}` {f:.0%}" for m, f in list(dead.items())[:2])
            + " dead"
        )
        out["lr_too_high"] = Diagnosed(
            merged, high[1], Diagnosis(line, found.causes, "learning_rate", high[1])
        )
        return
    fractions = ", ".join(f"`{m}` {f:.0%}" for m, f in dead.items())
    advice = (
        found.action
        if found.cause is not None
        else f"{fractions} of units never fire; the evidence does not name the cause. {found.tell_apart}"
    )
    out["dead_units"] = Diagnosed({**evidence, "cause": found.cause or "undetermined"}, advice, found)


def _symptom_of_the_lr(out: dict[str, Decision], history: History) -> None:
    """Once ``lr_too_high`` is named in a run, saturation that comes later is its symptom (steps too large
    drive tanh/sigmoid units to their bounds): no finding of its own; evidence of this check's ``lr_too_high``
    when there is one."""
    if "lr_too_high" in out:
        history.streaks["lr_too_high_named"] = 1
    if not history.streaks.get("lr_too_high_named") or "saturated_activations" not in out:
        return
    saturated = out.pop("saturated_activations")[0].get("saturated_fraction")
    if "lr_too_high" in out:
        found = out["lr_too_high"]
        evidence = {**found[0], "saturated_fraction": saturated}
        out["lr_too_high"] = (
            Diagnosed(evidence, found[1], found.diagnosis)
            if isinstance(found, Diagnosed)
            else (evidence, found[1])
        )


def _cannot_learn(history: History) -> bool:
    """A layer that cannot learn (vanishing, dead, saturated) explains a small update and a flat loss."""
    return any(
        history.streaks.get(p, 0) > 0 for p in ("vanishing_gradients", "dead_units", "saturated_activations")
    )


def _killed_by_the_lr(data: CheckData, history: History, t: dict[str, float]) -> bool:
    """Units died while the update ratio was above ``ratio_high`` (now or at an earlier check)."""
    ratio = update_ratios(data).median
    high_now = math.isfinite(ratio) and ratio > t["ratio_high"]
    return high_now or any(r > t["ratio_high"] for r in history.ratios[-int(t["persist_checks"]) - 1 :])


def _lr_kills_units(data: CheckData, history: History, t: dict[str, float]) -> Decision:
    ratios = update_ratios(data)
    seen = max([r for r in [ratios.median, *history.ratios] if math.isfinite(r)], default=math.nan)
    lr = ratios.largest_lr()
    factor = lower_lr_by(seen) if math.isfinite(seen) else 10
    target = f" (from {_fmt(lr)} to about {_fmt(lr / factor)})" if math.isfinite(lr) else ""
    return (
        {"update_ratio": seen, "lr": lr, "optimizer_family": ratios.family, "loss": data.loss_mean},
        f"Steps changed the weights by up to {_fmt(seen)} of their norm (healthy: ~1e-3) and units died: the "
        f"learning rate is too high. Lower it about {factor}x{target}, add warm-up, or clip.",
    )


def settle(active: set[str], present: set[str], history: History, persist: int) -> tuple[set[str], list[str]]:
    """``(still active, newly found)``: a problem stays active until it has been absent ``persist`` checks in
    a row, so one check of flicker does not raise the same finding twice. The absence counts live in
    ``history.streaks`` (saved with it).

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


# ---------------------------------------------------------------------------------------------- the rules
# One function per problem: (this check's numbers, the history, the thresholds) -> (evidence, advice) or
# None. A rule that must persist ``persist_checks`` checks counts its own streak in ``history.streaks``.


def nonfinite_activations(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """A sampled forward produced inf/nan, or a loss did while the sampled gradients were finite, or the
    weights are inf/nan. Attributed by evidence: non-finite weights (a step wrote them: every forward after is
    non-finite whatever the data; the first non-finite loss after the last check with finite weights names the
    step), else the first module's non-finite inputs (the batch), else the module's own operation on finite
    inputs.

    Example:
        >>> nonfinite_activations(CheckData(0, 0, loss_nonfinite=2), History(), DEFAULT_THRESHOLDS)[0]
        {'first_module': 'loss', 'cause': 'operation', 'modules': [], 'nonfinite_losses': 2}
        >>> data = CheckData(40, 0, nonfinite_modules=["stem.0"], nonfinite_weights=["stem.0", "head"])
        >>> nonfinite_activations(data, History(), DEFAULT_THRESHOLDS)[0]["cause"]
        'nonfinite_weights'
    """
    grad_bad = data.grad_sampled and not math.isfinite(data.grad_total)
    weights = data.nonfinite_weights
    if not (data.nonfinite_modules or weights or (data.loss_nonfinite and not grad_bad)):
        return None
    first = data.nonfinite_modules[0] if data.nonfinite_modules else "loss"
    inputs_bad = first in data.nonfinite_inputs
    # non-finite inputs of the first module come first (their gradient then wrote the weights)
    cause = "inputs" if inputs_bad else "nonfinite_weights" if weights else "operation"
    evidence: dict[str, object] = {"first_module": first, "cause": cause}
    if weights:
        evidence["nonfinite_weights"] = weights[:8]
    evidence |= {"modules": data.nonfinite_modules[:8], "nonfinite_losses": data.loss_nonfinite}
    bad_step = history.streaks.get("first_nonfinite_loss_step", -1)
    finite_at = history.finite_weights_step
    step_named = bad_step >= 0 and bad_step >= finite_at
    lr = max((v for v in data.group_lr.values() if math.isfinite(v)), default=math.nan)
    if (step_named or math.isnan(lr)) and history.lrs:
        lr = history.lrs[-1]  # the last check's, the LR nearest before the step that wrote the weights
    optimizer = "/".join(data.optimizers) or "the optimizer"
    if cause == "nonfinite_weights" and step_named:
        evidence |= {"nonfinite_loss_step": bad_step, "weights_finite_at_step": finite_at}
        evidence |= {"optimizer": optimizer, "lr": lr}
    update = Cause("nonfinite_weights")
    data_cause = Cause("inputs")
    operation = Cause("operation")
    if weights:
        update.evidence_for["nonfinite_weights"] = weights[:8]
        if step_named:
            update.evidence_for |= {"nonfinite_loss_step": bad_step, "weights_finite_at_step": finite_at}
        operation.evidence_against["nonfinite_weights"] = len(weights)
    else:
        update.evidence_against["weights_finite"] = True
    if inputs_bad:
        data_cause.evidence_for["first_module_inputs_nonfinite"] = first
        operation.evidence_against["first_module_inputs_nonfinite"] = first
    elif data.nonfinite_modules:
        data_cause.evidence_against["first_module_inputs_finite"] = first
        if not weights:
            operation.evidence_for["nonfinite_outputs_from_finite_inputs"] = first
    elif not weights:
        operation.evidence_for["nonfinite_losses"] = data.loss_nonfinite
    at = f" step {bad_step}" if step_named else " a step"
    lr_text = f", lr {_fmt(lr)}," if math.isfinite(lr) else ""
    if cause == "nonfinite_weights":
        advice = (
            f"The weights of {_names(weights)} are inf/nan: an optimizer step wrote them (the {optimizer} "
            f"update of{at}{lr_text} was non-finite), and every forward after it is non-finite whatever the "
            f"data (`{first}`'s inputs were finite). "
            + (
                f"The loss of step {bad_step} was already non-finite (the weights were finite at step "
                f"{finite_at}): find why that batch's loss was (a bad sample, an fp16 overflow, a log of 0), "
                "skip such steps (`StabilityGuard`, a GradScaler in fp16), and resume from a checkpoint "
                "before it."
                if step_named
                else "No loss was non-finite before it: the update itself overflowed with finite "
                "gradients (learning rate too high, an optimizer eps too small, a division by ~0 in the "
                "update); resume from a checkpoint before it with clipping or a lower LR."
            )
        )
        line = (
            f"nonfinite_activations at step {data.step}: weights inf/nan since the {optimizer} update of{at}"
            f"{lr_text.rstrip(',')}; inputs finite"
        )
    elif inputs_bad:
        advice = (
            f"`{first}` received inf/nan inputs: check the batches (data with nan/inf, a bad sample or "
            "column) and any operation before it outside a module; clean or clamp the data"
            + (
                f" (the weights of {_names(weights)} are non-finite too: a step applied its gradient)."
                if weights
                else "."
            )
        )
        line = f"nonfinite_activations at step {data.step}: `{first}` received inf/nan inputs (the data)"
    else:
        advice = (
            f"`{first}` produced inf/nan in the forward pass from finite inputs and weights: log of zero, "
            "division by zero, exp overflow there; add an epsilon or clamp, use a normalisation layer before "
            "it, or train in bf16/fp32 instead of fp16."
        )
        line = f"nonfinite_activations at step {data.step}: `{first}` made inf/nan from finite inputs"
    causes = ranked([update, data_cause, operation], cause)
    return Diagnosed(evidence, advice, Diagnosis(headline(line), causes, cause, advice))


def exploded_into_nonfinite(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """Weights went inf/nan after the interval's finite gradient norms reached ``explode_factor`` x the
    weights' own norm at step 0 (any usual LR then throws them far beyond their scale): the gradients
    exploded and the non-finite weights are the explosion's end (an RNN whose recurrent gain explodes
    within its first steps, before a check could see a baseline). Reported with ``nonfinite_activations``
    as its cause.

    Example:
        >>> data = CheckData(10, 0, nonfinite_weights=["rnn"], param_norm_start=8.0,
        ...                  step_records=[(0, 3330.0, 0, 0, 0, 1.0), (1, 7210.0, 1, 0, 0, 1.0)])
        >>> exploded_into_nonfinite(data, History(), DEFAULT_THRESHOLDS)[0]["grad_norm_vs_weights"]
        901.25
    """
    finite = [r for r in data.step_records if math.isfinite(r[1])]
    if not (data.nonfinite_weights and finite and data.param_norm_start > 0):
        return None
    largest = max(finite, key=lambda r: r[1])
    times = largest[1] / data.param_norm_start
    if not times >= t["explode_factor"]:
        return None
    history.streaks["exploded_at_step"] = data.step
    evidence: dict[str, object] = {
        "grad_norm": largest[1],
        "grad_norm_vs_weights": times,
        "weights_norm_at_start": data.param_norm_start,
        "step_grad_norms": [round(r[1], 3) for r in finite[:8]],
        "nonfinite_weights": data.nonfinite_weights[:8],
        "cause_of": "nonfinite_activations",
    }
    return (
        evidence,
        f"Gradient norms reached {_fmt(largest[1])}, {_fmt(times)}x the weights' norm at step 0, before the "
        f"weights of {_names(data.nonfinite_weights)} went inf/nan: the gradients exploded. Clip gradients "
        "(`Trainer(gradient_clip_val=1.0)` or `AdaptiveGradClip`), check the initialisation (a recurrent "
        "weight's gain above 1, no normalisation), and lower the learning rate.",
    )


def _names(groups: list[str], top: int = 3) -> str:
    extra = len(groups) - top
    return ", ".join(f"`{g}`" for g in groups[:top]) + (f" (+{extra} more)" if extra > 0 else "")


def exploding_gradients(
    data: CheckData, history: History, t: dict[str, float], spikes: GradientSpikes | None = None
) -> Decision | None:
    """The sampled gradient norm is non-finite or ``explode_factor`` x the median of earlier checks', or a
    step of the interval had a gradient norm ``explode_factor`` x the calm steps' before it on an ordinary
    batch (``_health_causes.gradient_spikes``: an explosion between two checks, as an RNN's in its first
    steps). When the episode began on an outlier batch (a value ``outlier_factor`` x the usual largest
    |input|), that batch is the cause: the finding names it and keeps the LR.

    Example:
        >>> data = CheckData(0, 0, grad_sampled=True, grad_total=500.0)
        >>> history = History(grad_totals=[1.0, 3.0])
        >>> exploding_gradients(data, history, DEFAULT_THRESHOLDS)[0]["grad_norm"]
        500.0
    """
    found = spikes if spikes is not None else GradientSpikes()
    earlier = [g for g in history.grad_totals if math.isfinite(g)]
    grad_bad = data.grad_sampled and not math.isfinite(data.grad_total)
    baseline = statistics.median(earlier) if earlier else math.nan
    sampled = data.grad_sampled and (
        grad_bad or (earlier and data.grad_total > t["explode_factor"] * baseline)
    )
    if not (sampled or found.exploded):
        return None
    top = sorted(data.group_grad_rms.items(), key=lambda kv: -kv[1] if math.isfinite(kv[1]) else -math.inf)
    evidence: dict[str, object] = {
        "grad_norm": data.grad_total,
        "baseline_median": baseline,
        "largest_groups_rms": dict(top[:3]),
    }
    if found.exploded:
        evidence |= {
            "exploded_steps": [int(r[0]) for r in found.exploded][:8],
            "step_grad_norm_vs_before": max(r[3] for r in found.exploded),
        }
    advice = (
        f"Gradient norm {_fmt(data.grad_total)} vs a median of {_fmt(baseline)} at earlier checks"
        + (
            f"; at step {int(found.exploded[0][0])} {_fmt(found.exploded[0][3])}x the steps before it"
            if found.exploded
            else ""
        )
        + ". Clip gradients (`Trainer(gradient_clip_val=1.0)` or `AdaptiveGradClip`), lower the learning "
        f"rate, and check the initialisation of {', '.join(k for k, _ in top[:2]) or 'the largest'}."
    )
    if not found.triggers:
        return evidence, advice
    # the explosion began on outlier batches: the rows, not the LR
    history.streaks["outliers_named"] = 1
    trigger = found.triggers[0]
    rows = "; ".join(
        f"batch {int(r[2])} row {int(r[5])} |input| {_fmt(r[4])}" for r in found.triggers[:3] if r[5] >= 0
    )
    evidence |= {"cause": "outlier_batches", "outlier_steps": [int(r[0]) for r in found.triggers]}
    data_cause = Cause(
        "outlier_batches",
        {
            "outlier_steps": [int(r[0]) for r in found.triggers],
            "grad_norm_x_before": trigger[3],
            "largest_input": trigger[4],
            "typical_largest_input": found.typical_input,
        },
    )
    dynamics = Cause("training_dynamics", {}, {"began_on_outlier_batch": int(trigger[0])})
    action = (
        f"Find the samples of the batch at step {int(trigger[0])} ({rows}) and fix them (sentinels such as "
        "-999, unscaled columns, corrupt rows): the gradients exploded right after it, on ordinary batches "
        "at an LR that had been calm. Keep the LR; clip (`gradient_clip_val`) so one batch cannot throw the "
        "weights."
    )
    line = headline(
        f"exploding_gradients at step {data.step}: gradient {_fmt(max(r[3] for r in found.exploded))}x the "
        f"steps before, set off by batch {int(trigger[2])} at step {int(trigger[0])} "
        f"(|input| {_fmt(trigger[4])})"
    )
    return Diagnosed(evidence, action, Diagnosis(line, [data_cause, dynamics], "outlier_batches", action))


def _dead_layers(data: CheckData, t: dict[str, float]) -> dict[str, float]:
    dead = {m: f for m, f in data.dead.items() if f >= t["dead_fraction"]}
    dead.update({m: f for m, f in data.dead_rows.items() if f >= t["dead_fraction"] and m not in dead})
    return dead


def _saturated_layers(data: CheckData, t: dict[str, float]) -> dict[str, float]:
    return {m: f for m, f in data.saturated.items() if f >= t["saturated_fraction"]}


def dead_units(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """A ReLU layer with ``dead_fraction`` of units never active, ``persist_checks`` checks in a row.

    Example:
        >>> history, data = History(streaks={"dead_units": 1}), CheckData(0, 0, dead={"fc1": 0.9})
        >>> dead_units(data, history, DEFAULT_THRESHOLDS)[0]
        {'dead_fraction': {'fc1': 0.9}}
    """
    dead = _dead_layers(data, t)
    measured = bool(data.dead or data.dead_rows)
    if measured and history.dead_at_start < 0:
        history.dead_at_start = max([*data.dead.values(), *data.dead_rows.values()])
    # dead units that do not impair learning (the loss below half its first interval's) are no finding and
    # no evidence about the LR, as for vanishing gradients
    present = bool(dead) and not _learning_well(data, history, t)
    if not (measured and streak(history, "dead_units", present) >= int(t["persist_checks"])):
        return None
    return (
        {"dead_fraction": dead},
        f"{', '.join(f'`{m}` {f:.0%}' for m, f in dead.items())} of units never fire. Lower the learning "
        "rate, use He/Kaiming initialisation with a small positive bias, or switch to LeakyReLU/GELU.",
    )


def saturated_activations(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """A tanh/sigmoid layer with ``saturated_fraction`` of outputs at its bounds, ``persist_checks`` in a row.

    Example:
        >>> data = CheckData(0, 0, saturated={"act": 0.2})
        >>> saturated_activations(data, History(), DEFAULT_THRESHOLDS) is None
        True
    """
    stuck = _stuck_saturated(data, history, t)
    if stuck is not None:
        return stuck
    moved = _moved(data)
    first = next(iter(moved), None)
    # starved: the layers below barely move, relative to the layer moving most, or no layer moves at a
    # healthy rate (~1e-3) at all
    starved = first is not None and (
        moved[first] < 1e-2 * max(moved.values()) or max(moved.values()) < t["ratio_high"] / 10
    )
    slow = not _learning_fast(data, history, t)
    sat = _saturated_layers(data, t) if (starved or slow) and not _converging(data, history) else {}
    count = streak(history, "saturated_activations", bool(sat))
    if count == 1:
        history.streaks["saturated_since"] = data.step
    # starved layers are direct evidence (persist_checks); a slow loss alone must last as long as a plateau
    # (plateau_steps): a saturated net at chance often breaks out after ~100 steps and then learns
    span = data.step - history.streaks.get("saturated_since", data.step)
    enough = count >= int(t["persist_checks"]) if starved else count > 1 and span >= t["plateau_steps"]
    if not (data.saturated and sat and enough):
        return None
    return (
        {"saturated_fraction": sat},
        f"{', '.join(f'`{m}` {f:.0%}' for m, f in sat.items())} of outputs are saturated (gradient ~0). "
        "Scale the initialisation down (Xavier/Glorot for tanh/sigmoid), normalise the layer's input, "
        "or use ReLU/GELU.",
    )


#: A saturated layer's mean slope relative to its peak below which ~no gradient passes through it.
SATURATED_GAIN = 0.25


def _stuck_saturated(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """Layers in the flat part of their sigmoid/tanh (``saturated_fraction`` of outputs, mean slope below
    ``SATURATED_GAIN`` of the peak) at initialisation (the run's first batch) and still now,
    ``persist_checks`` in a row: saturated by initialisation or input scale (a highway gate's bias at -10,
    weights too large, unnormalised features into a sigmoid), whatever the loss does (a net with closed gates
    still learns, as its linear part). Saturation that training brings (a confident layer) is not this.

    Example:
        >>> history = History()
        >>> for step in (20, 40):
        ...     data = CheckData(step, 0, saturated={"gates.0:sigmoid": 1.0},
        ...                      saturation_gain={"gates.0:sigmoid": 2e-4}, grad_sampled=True,
        ...                      group_grad_rms={"gates.0": 1e-7, "head": 1e-2})
        ...     if step == 20:
        ...         data.saturated_init = {"gates.0:sigmoid": (1.0, 2e-4)}
        ...     found = _stuck_saturated(data, history, DEFAULT_THRESHOLDS)
        >>> found[0]["gain"], found[0]["grad_rms"], found[0]["largest_grad_rms"]
        ({'gates.0:sigmoid': 0.0002}, {'gates.0': 1e-07}, {'head': 0.01})
    """

    def flat(fraction: float, gain: float) -> bool:
        return fraction >= t["saturated_fraction"] and gain < SATURATED_GAIN

    for name, (fraction, gain) in data.saturated_init.items():
        history.streaks[f"saturated_at_init:{name}"] = int(flat(fraction, gain))
    stuck = {
        name: fraction
        for name, fraction in data.saturated.items()
        if history.streaks.get(f"saturated_at_init:{name}")
        and flat(fraction, data.saturation_gain.get(name, math.nan))
    }
    if streak(history, "saturated_from_start", bool(stuck)) < int(t["persist_checks"]):
        return None
    gains = {m: data.saturation_gain[m] for m in stuck}
    layers = {m.rsplit(":", 1)[0] for m in stuck if ":" in m}
    grads = {g: r for g, r in data.group_grad_rms.items() if g in layers}
    others = {g: r for g, r in data.group_grad_rms.items() if g not in layers and math.isfinite(r)}
    top = max(others, key=lambda g: others[g], default=None)
    evidence: dict[str, object] = {"saturated_fraction": stuck, "gain": gains}
    if grads and top is not None:
        evidence |= {"grad_rms": grads, "largest_grad_rms": {top: others[top]}}
    feeding = (
        f" (gradient RMS of the layers feeding them {_fmt(max(grads.values()))} vs {_fmt(others[top])} in "
        f"`{top}`)"
        if grads and top is not None
        else ""
    )
    return (
        evidence,
        f"{', '.join(f'`{m}` {f:.0%}' for m, f in stuck.items())} of outputs have sat in the flat part of "
        f"their sigmoid/tanh since the first check; on average {_fmt(max(gains.values()))} of the gradient "
        f"passes through{feeding}: those units do not learn. Check their initialisation "
        "(a gate bias far from 0, weights too large for tanh/sigmoid: Xavier/Glorot) and normalise their "
        "inputs.",
    )


def _converging(data: CheckData, history: History) -> bool:
    """The training loss is below half its first interval's: the run learns, whatever a layer shows (a
    memorising or converged run's early layers stop moving, a confident classifier's sigmoids saturate)."""
    return bool(history.losses) and math.isfinite(data.loss_mean) and data.loss_mean < 0.5 * history.losses[0]


def _learning_well(data: CheckData, history: History, t: dict[str, float]) -> bool:
    """The loss is below half its first interval's (:func:`_converging`) with the weights within
    ``growth_blown`` x their size at step 0: a run that learns, and a symptom in it does not impair its
    learning. Weights blown up 10x say the first interval's loss was the blow-up's (an LR far too high), and
    falling back from it is no learning.

    Example:
        >>> history = History(losses=[0.13], loss_ses=[0.04], loss_steps=[20])
        >>> data = CheckData(40, 0, loss_mean=0.014, param_norm=4.5, param_norm_start=1.0)
        >>> _learning_well(data, history, DEFAULT_THRESHOLDS)
        True
        >>> data.param_norm = 15.0
        >>> _learning_well(data, history, DEFAULT_THRESHOLDS)
        False
    """
    growth = data.param_norm / data.param_norm_start if data.param_norm_start > 0 else math.nan
    return _converging(data, history) and not growth > t["growth_blown"]


def _learning_fast(data: CheckData, history: History, t: dict[str, float]) -> bool:
    """The loss fell significantly and by 5% or more since the previous check: nothing stalls it (a confident
    classifier saturates its sigmoids as it learns; Glorot & Bengio's saturation is a problem when it
    stalls)."""
    if not (history.losses and math.isfinite(data.loss_mean)):
        return False
    previous, previous_se = history.losses[-1], history.loss_ses[-1] if history.loss_ses else math.nan
    return data.loss_mean < 0.95 * previous and significantly_above(
        previous, previous_se, data.loss_mean, interval_se(data), t["confidence_z"]
    )


def _moved(data: CheckData) -> dict[str, float]:
    """Each non-embedding group's update ratio, in model order (what each layer actually learned this
    step)."""
    return {
        g: r
        for g, r in data.update_ratio.items()
        if math.isfinite(r) and r >= 0 and g not in data.sparse_groups
    }


def vanishing_gradients(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """The earliest group moves less than ``vanish_ratio`` x the group that moves most (update-to-weight
    ratios), ``persist_checks`` in a row, unless dead or saturated units (which cut the gradient path
    themselves) explain it. Update ratios, not gradient norms: an Adam-family optimizer rescales small
    gradients, so only an update that stays small is a layer that does not learn; and a classifier head's
    gradient is naturally far larger than a LayerNorm's. Embedding tables (sparse rows) are left out.

    Example:
        >>> data = CheckData(0, 0, grad_sampled=True, update_ratio={"stem": 1e-9, "mid": 1e-5, "head": 1e-2},
        ...                  group_grad_rms={"stem": 1e-8, "mid": 1e-4, "head": 1.0})
        >>> history = History(streaks={"vanishing_gradients": 1})
        >>> vanishing_gradients(data, history, DEFAULT_THRESHOLDS)[0]["update_ratio_vs_largest"]
        1e-07
    """
    moved = _moved(data)
    if not (data.grad_sampled and len(moved) >= 2):
        return None
    first = next(iter(moved))
    top = max(moved, key=lambda g: moved[g])
    if moved[top] <= 0:
        return None
    ratio = moved[first] / moved[top]
    present = (
        ratio < t["vanish_ratio"]
        and not (_dead_layers(data, t) or _saturated_layers(data, t))
        and not _converging(data, history)
    )
    count = streak(history, "vanishing_gradients", present)
    history.vanish_ratios.append(ratio)
    if count < int(t["persist_checks"]):
        return None
    grad_first = data.group_grad_rms.get(first, math.nan)
    grad_top = data.group_grad_rms.get(top, math.nan)
    return (
        {
            "first_group": first,
            "most_moved_group": top,
            "update_ratio_vs_largest": ratio,
            "update_ratio": {first: moved[first], top: moved[top]},
            "grad_rms": {first: grad_first, top: grad_top},
        },
        f"`{first}` moves {_fmt(ratio)}x as much per step as `{top}` (gradient RMS {_fmt(grad_first)} vs "
        f"{_fmt(grad_top)}): the early layers barely learn. Use a non-saturating activation (ReLU/GELU) and "
        "He/Kaiming initialisation, or add normalisation (BatchNorm, LayerNorm) or residual connections"
        + (
            "."
            if _lr_highish(data, t)
            else ", or give the early layers a larger learning rate (layer-wise LR, e.g. LAMB)."
        ),
    )


def _lr_highish(data: CheckData, t: dict[str, float]) -> bool:
    """Some group moves more than ``ratio_high / 10`` (~1e-3, the healthy update ratio) per step: a larger LR
    would not be safe advice (unknown ratios: not safe either)."""
    moved = _moved(data)
    return not moved or max(moved.values()) > t["ratio_high"] / 10


def data_stall(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """Training waited for data more than ``stall_fraction`` of the time and ``stall_min_s`` (5 ms) per batch,
    ``persist_checks`` in a row, and the stalled checks' mean wait fraction is above ``stall_fraction`` beyond
    the noise of the timing itself (:func:`stall_noise`). The absolute floor keeps a toy model's few
    milliseconds of Lightning's own between-batch work (hooks, logging: timed as waiting by the host clock)
    from reading as a stall; the noise keeps a busy machine's borderline check (53% once) from reading as one.

    Example:
        >>> history = History(streaks={"data_stall": 1}, waits=[[0.8, 50]])
        >>> data = CheckData(100, 0, wait_fraction=0.8, wait_per_batch_s=0.04, wait_source="host timing")
        >>> data_stall(data, history, DEFAULT_THRESHOLDS)[0]["wait_fraction"]
        0.8
        >>> history = History(streaks={"data_stall": 1}, waits=[[0.53, 50]])
        >>> data = CheckData(100, 0, wait_fraction=0.53, wait_per_batch_s=0.04, wait_source="host timing")
        >>> data_stall(data, history, DEFAULT_THRESHOLDS) is None  # 53% twice: within the timing's noise
        True
    """
    per_batch = data.wait_per_batch_s
    stalled = (
        data.wait_fraction is not None
        and data.wait_fraction > t["stall_fraction"]
        and (per_batch is None or per_batch < 0 or per_batch >= t["stall_min_s"])
    )
    batches = max(data.step - history.streaks.get("stall_previous_step", 0), 1)
    history.streaks["stall_previous_step"] = data.step
    if data.wait_fraction is not None:
        history.waits.append([data.wait_fraction, float(batches)])
    count = streak(history, "data_stall", stalled)
    if count < int(t["persist_checks"]) or data.wait_fraction is None:
        return None
    mean, se = stall_noise(history.waits, count)
    if not mean - t["stall_fraction"] > t["confidence_z"] * se:
        return None
    return (
        {
            "wait_fraction": data.wait_fraction,
            "wait_per_batch_ms": round(1000 * per_batch, 3)
            if per_batch is not None and per_batch >= 0
            else None,
            "measured_by": data.wait_source,
            "mean_wait_fraction": mean,
            "wait_fraction_se": se,
            "checks": count,
        },
        f"Training waited for data {data.wait_fraction:.0%} of the time"
        + (f" ({1000 * per_batch:.3g} ms per batch)" if per_batch is not None and per_batch >= 0 else "")
        + f", {mean:.0%} +- {se:.0%} over {count} checks. Raise the DataLoader's "
        "`num_workers`, set `persistent_workers=True` and `pin_memory=True` (GPU), and move per-sample "
        "work (decoding, augmentation) out of `__getitem__` or precompute it.",
    )


def stall_noise(waits: list[list[float]], k: int) -> tuple[float, float]:
    """The mean wait fraction of the last ``k`` checks (``waits``: ``[fraction, batches]`` per check) and its
    standard error: the larger of a bound and the run's own check-to-check scatter. The bound: a batch's wait
    share lies in [0, 1], so its variance is at most ``f (1 - f)`` (a few long hiccups of a busy machine,
    the worst case) and the mean over ``B`` batches has ``sqrt(f (1 - f) / B)``. The scatter:
    ``difference_noise`` of every check's fraction (a machine whose timing jumps between checks), over
    ``sqrt(k)``.

    Example:
        >>> mean, se = stall_noise([[0.4, 50], [0.53, 50], [0.52, 50]], 2)
        >>> round(mean, 3), round(se, 3)
        (0.525, 0.05)
    """
    recent = waits[-k:]
    batches = sum(b for _, b in recent)
    mean = sum(f * b for f, b in recent) / batches if batches else math.nan
    bound = math.sqrt(max(mean * (1.0 - mean), 0.0) / batches) if batches else math.nan
    scatter = difference_noise([f for f, _ in waits]) / math.sqrt(len(recent)) if recent else math.nan
    return mean, max(bound, scatter)


def outlier_batches(
    data: CheckData, history: History, t: dict[str, float], spikes: GradientSpikes | None = None
) -> Decision | None:
    """A few steps' gradient norms ``outlier_factor`` x the calm steps' before them, on batches that hold a
    value ``outlier_factor`` x the largest |value| a batch usually holds, the steps after them calm
    (``_health_causes.gradient_spikes``: one notion of outlier batches, also the cause the dead-unit and LR
    rules read). Names the steps, the batch indices and each batch's row with the largest |input| (a -999
    sentinel shows there). Quiet once a finding has named the run's outlier batches (as this one, or as the
    cause of another: the same rows, seen again next epoch).

    Example:
        >>> records = [(k, 1.0 + 0.1 * (k % 3), k, 0, 0, 3.0) for k in range(20)]
        >>> records[7] = (7, 3000.0, 7, 5, 0, 999.0)
        >>> data = CheckData(20, 0, step_records=records)
        >>> evidence = outlier_batches(data, History(), DEFAULT_THRESHOLDS)[0]
        >>> evidence["steps"], evidence["batches"], evidence["rows"]
        ([7], [7], ['batch 7 row 5 (|input| 999)'])
    """
    found = spikes if spikes is not None else gradient_spikes(data, history, t)
    if not found.outliers or history.streaks.get("outliers_named"):
        return None
    history.streaks["outliers_named"] = 1
    rows = [
        f"batch {int(r[2])} row {int(r[5])}" + (f" (|input| {_fmt(r[4])})" if math.isfinite(r[4]) else "")
        for r in found.outliers
        if r[5] >= 0
    ]
    steps = [int(r[0]) for r in found.outliers]
    largest = max(r[3] for r in found.outliers)
    evidence: dict[str, object] = {
        "steps": steps,
        "batches": [int(r[2]) for r in found.outliers],
        "grad_norm_vs_before": largest,
        "typical_grad_norm": found.typical_norm,
        "rows": rows,
        "typical_largest_input": found.typical_input,
    }
    return (
        evidence,
        f"{len(steps)} of {found.steps} steps had a gradient {_fmt(largest)}x the calm steps' before them "
        f"(step {', '.join(map(str, steps[:3]))}; "
        f"batch {', '.join(str(int(r[2])) for r in found.outliers[:3])}"
        f"{'; ' + ', '.join(rows[:3]) if rows else ''}): a few samples dominate those updates. Inspect those "
        "rows for sentinels (-999), unit errors or corrupt records; clean or clip them (robust scaling, "
        "`gradient_clip_val`), rather than lowering the learning rate for all batches.",
    )


RULES = (
    nonfinite_activations,
    exploding_gradients,
    dead_units,
    saturated_activations,
    vanishing_gradients,
    lr_too_high,
    lr_too_low,
    loss_plateau,
    not_learning,
    overfitting,
    data_stall,
    outlier_batches,
)
