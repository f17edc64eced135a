"""HealthMonitor's rules about the loss and the learning rate, judged against the run's own noise.

Each rule reads one check's :class:`CheckData` and the :class:`History` and asks its question with the tests
of ``_stats`` at the confidence ``confidence_z`` (``_stats.Z``: ~1% false-alarm odds per question). The
update ratio ``||dW|| / ||W||`` is summarised as the median over parameters (groups weighted by size) and read
per optimizer family: an adaptive optimizer's update is ~the LR whatever the gradient (floor ``ratio_low``,
1e-4), SGD's is LR x gradient (floor ``ratio_low_sgd``, 1e-6); above ``ratio_high`` (1e-2) a step rewrites
1% of the weights. Each rule (``lr_too_high``, ``lr_too_low``, ``loss_plateau``, ``overfitting``: Prechelt's
GL and UP) and when it stays quiet: ``docs/guides/health_monitor.md``.
"""

from __future__ import annotations

import math

from lightning_recipes._stats import mean_se, significantly_above, trend, validation_se, weighted_median
from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,  # noqa: F401  (the doctests)
    CheckData,
    Decision,
    History,
)

__all__ = [
    "UpdateRatios",
    "loss_plateau",
    "loss_window",
    "lower_lr_by",
    "lr_too_high",
    "lr_too_low",
    "overfitting",
    "update_ratios",
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


def _rise(data: CheckData, history: History, t: dict[str, float]) -> tuple[str, float] | None:
    """``(what, from)`` when this interval's loss is significantly and ``rise_rtol`` above the previous
    interval's or the best earlier one's."""
    if not (history.losses and math.isfinite(data.loss_mean)):
        return None
    se = interval_se(data)
    best = min(range(len(history.losses)), key=lambda i: history.losses[i])
    for what, i in (("the previous check's", len(history.losses) - 1), ("its best", best)):
        before, before_se = history.losses[i], history.loss_ses[i] if i < len(history.loss_ses) else math.nan
        if data.loss_mean > (1.0 + t["rise_rtol"]) * before and significantly_above(
            data.loss_mean, se, before, before_se, t["confidence_z"]
        ):
            return what, before
    return None


# ---------------------------------------------------------------------------------------------- the rules


def lower_lr_by(ratio: float) -> int:
    """How many times lower an LR must be to bring an update ratio to the healthy ~1e-3 (updates scale with
    the LR; a too-high LR has also grown the weights, which makes the ratio read low: aim at the low end)."""
    return max(3, round(ratio / 1e-3))


def lr_too_high(data: CheckData, history: History, t: dict[str, float]) -> Decision | None:
    """The update ratio is above ``ratio_high`` and the loss rose significantly, or above ``ratio_stuck`` and
    the loss made no significant progress over ``plateau_checks`` checks.

    Example:
        >>> data = CheckData(0, 0, loss_mean=2.0, loss_count=20, loss_std=0.1,
        ...                  update_ratio={"fc1": 0.1, "fc2": 0.2}, group_lr={"fc1": 0.5, "fc2": 0.5})
        >>> history = History(losses=[1.0], loss_ses=[0.02], loss_steps=[0])
        >>> lr_too_high(data, history, DEFAULT_THRESHOLDS)[0]["update_ratio"]
        0.1
    """
    ratios = update_ratios(data)
    if not (math.isfinite(ratios.median) and ratios.median > t["ratio_high"]):
        return None
    rise = _rise(data, history, t)
    k = int(t["plateau_checks"])
    stuck = ratios.median > t["ratio_stuck"] and progressing(data, history, t, k) is False
    if rise is None and not stuck:
        return None
    lr = ratios.largest_lr()
    if rise is not None:
        what = f"the loss rose from {_fmt(rise[1])} ({rise[0]}) to {_fmt(data.loss_mean)}"
    else:
        what = f"the loss has not fallen significantly in {k} checks (now {_fmt(data.loss_mean)})"
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
        },
        f"Each step changes the weights by {_fmt(ratios.median)} of their norm (healthy: ~1e-3) and {what}. "
        f"Lower the learning rate about {factor}x{target}, or run an LR range test; add warm-up, or clip.",
    )


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


def lr_too_low(
    data: CheckData, history: History, t: dict[str, float], cannot_learn: bool = False
) -> Decision | None:
    """The update ratio is below its family's floor with a loss that is not falling significantly,
    ``persist_checks`` checks in a row (one when 1000x below: a collapsed LR).

    Example:
        >>> data = CheckData(0, 0, loss_mean=1.0, loss_count=20, loss_std=0.05, update_ratio={"fc1": 1e-7})
        >>> history = History(losses=[1.0], loss_ses=[0.01], loss_steps=[0], streaks={"lr_too_low": 1})
        >>> lr_too_low(data, history, DEFAULT_THRESHOLDS)[0]["update_ratio"]
        1e-07
    """
    ratios = update_ratios(data)
    floor = ratios.low(t)
    lr = ratios.largest_lr()
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
        and not _warming_up(history, lr)
        and not _annealing(data, history, lr, t)
    )
    count = streak(history, "lr_too_low", low)
    if not low or count < (1 if collapsed else int(t["persist_checks"])):
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
        f"{ratios.family} optimizers; healthy ~1e-3) and the loss is not falling ({_fmt(data.loss_mean)}). "
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
        recovering = previous is not None and significantly_above(
            previous[1], validation_se(previous[1], previous[3], previous[4]), val, se, z
        )
        # a model that overfits fits its training set better than it ever fit validation (a diverged run's
        # training loss sits above the best validation loss), and its training loss keeps falling
        fitting = train < min(best_train, best_val) and (
            previous is None or train <= (1.0 + t["rise_rtol"]) * previous[2]
        )
        present = gl > t["overfit_gl"] and significant and fitting and train < val and not recovering
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
