"""What HealthMonitor's rules read, computed once per check: :class:`Evidence` over a
:class:`CheckData` and the run's :class:`History`.

Example:
    >>> data = CheckData(40, 0, loss_mean=2.3, loss_head=2.3, update_ratio={"fc1": 2e-5},
    ...                  group_family={"fc1": "sgd"}, param_norm=3.0, param_norm_start=1.0)
    >>> e = evidence_of(data, History(), DEFAULT_THRESHOLDS)
    >>> e.at_start, e.floor, e.growth
    (True, 0.0001, 3.0)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from lightning_recipes._stats import mean_se, significantly_above, trend, weighted_median
from lightning_recipes.callbacks._health_causes import GradientSpikes, record_check
from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,  # noqa: F401  (the doctests)
    CheckData,
    History,
)

__all__ = ["NO_GRADIENT", "SHRUNK", "START_STEPS", "Evidence", "UpdateRatios", "evidence_of", "streak"]

#: The gradient RMS per element below which the loss does not depend on the weights.
NO_GRADIENT = 1e-8

#: The weights' norm over step 0's below which they lost half their squared norm: pulled toward zero (steps
#: alone grow a norm, as a random walk does; a decay or a penalty shrinks it).
SHRUNK = 0.5**0.5

#: The steps whose mean is the loss at initialisation (``History.start_loss``: the first interval's first).
START_STEPS = 5


def streak(history: History, name: str, present: bool) -> int:
    """Count ``name``'s checks in a row (reset when absent); returns the count."""
    history.streaks[name] = history.streaks.get(name, 0) + 1 if present else 0
    return history.streaks[name]


class UpdateRatios:
    """The sampled step's update ratios: per group, the parameter-weighted median, the family and LRs.

    Example:
        >>> data = CheckData(0, 0, update_ratio={"fc1": 1e-6, "fc1.bias": 2e-5},
        ...                  group_numel={"fc1": 1000, "fc1.bias": 10}, group_family={"fc1": "adaptive"})
        >>> ratios = UpdateRatios(data)
        >>> ratios.median, ratios.family, ratios.low(DEFAULT_THRESHOLDS)
        (1e-06, 'adaptive', 0.0001)
    """

    def __init__(self, data: CheckData) -> None:
        found = {g: r for g, r in data.update_ratio.items() if math.isfinite(r) and r >= 0}
        moving = any(r > 0 for r in found.values())
        #: groups with a gradient that no step moved while others moved (LR 0, or not in the optimizer)
        grads = data.group_grad_rms
        self.unstepped = [g for g, r in found.items() if moving and r == 0 and grads.get(g, 0) > 0]
        self.by_group = {g: r for g, r in found.items() if g not in self.unstepped}
        weights = [float(data.group_numel.get(g, 1)) for g in self.by_group]
        self.median = weighted_median(list(self.by_group.values()), weights)
        families: dict[str, float] = {}
        for g, w in zip(self.by_group, weights):
            family = data.group_family.get(g, "other")
            families[family] = families.get(family, 0) + w
        self.family = max(families, key=lambda f: families[f]) if families else "other"
        finite = [data.group_lr[g] for g in self.by_group if math.isfinite(data.group_lr.get(g, math.nan))]
        self.lr = max(finite) if finite else math.nan
        #: each non-embedding group's ratio, in model order (what each layer learned this step)
        self.moved = {g: r for g, r in self.by_group.items() if g not in data.sparse_groups}

    def low(self, t: dict[str, float]) -> float:
        """The family's floor: ``ratio_low`` for adaptive optimizers, ``ratio_low_sgd`` otherwise."""
        return t["ratio_low"] if self.family == "adaptive" else t["ratio_low_sgd"]

    def groups(self, limit: float, above: bool, top: int = 3) -> dict[str, float]:
        """The ``top`` groups furthest above (or below) ``limit``."""
        picked = [(g, r) for g, r in self.by_group.items() if (r > limit if above else r < limit)]
        return dict(sorted(picked, key=lambda kv: -kv[1] if above else kv[1])[:top])


@dataclass
class Evidence:
    """One check's shared evidence (the module docstring); ``decide`` builds it, the rules read it."""

    data: CheckData
    history: History
    t: dict[str, float]
    ratios: UpdateRatios
    spikes: GradientSpikes
    #: the largest LR now, and the largest at any earlier check
    lr: float
    peak_lr: float
    #: the tracked weights' norm over their norm at step 0
    growth: float
    #: the loss at initialisation (the level of knowing nothing: ln C for a classifier), and whether the loss
    #: still sits within ``trivial_band`` of it
    start: float
    at_start: bool
    #: the update ratio below which the LR is too low: the family's (the adaptive one for SGD at its start)
    floor: float
    #: the interval mean's standard error, and whether the interval's own slope falls significantly
    se: float
    falling: bool
    #: the LR rose 1.5x since the last check; a schedule annealing in the last part of a planned run; the LR
    #: fell 1000x since the last check (a step cut, not a trough approached over checks: a read LR, no noise)
    warming_up: bool
    annealing: bool
    step_cut: bool
    #: the weights grew less than ``growth_high`` x since step 0: large update ratios only jittered them (at a
    #: saddle, small weights): no evidence of a too-high LR (unknown growth: not excluded)
    kept_scale: bool
    #: the weights grew ``growth_blown`` x since step 0: they blew up, and a small update ratio or a loss
    #: below the first interval's (the blow-up's) says nothing about the LR or about learning
    blown: bool
    #: the loss below half its first interval's: the run learns, whatever a layer shows (``learning``: and the
    #: weights did not blow up, so that first loss was no blow-up's)
    converging: bool
    learning: bool
    #: the previous check's interval mean (NaN: none), and whether this one is significantly below it
    previous: float
    below_previous: bool
    #: the tracked weights' norm at the previous check (at step 0 for the first; NaN: unknown)
    norm_before: float = math.nan

    @property
    def outward(self) -> float:
        """The share of the interval's steps that grew the weights' norm (near 1: all outward; NaN:
        unknown).

        Example:
            >>> data = CheckData(100, 0, update_ratio={"head": 0.01}, param_norm=11.0, param_norm_start=1.0)
            >>> history = History(loss_steps=[80], losses=[1.0], loss_ses=[0.01], last_param_norm=9.0)
            >>> round(evidence_of(data, history, DEFAULT_THRESHOLDS).outward, 2)
            0.91
        """
        before = self.history.loss_steps[-1] if self.history.loss_steps else 0
        length = (self.data.step - before) * self.ratio * self.data.param_norm
        rise = self.data.param_norm - self.norm_before
        return rise / length if length > 0 and math.isfinite(rise) else math.nan

    @property
    def grad_rms(self) -> float:
        """The sampled step's gradient RMS per trained element (NaN: not sampled)."""
        numel = sum(self.data.group_numel.values()) or 1
        return self.data.grad_total / math.sqrt(numel) if self.data.grad_sampled else math.nan

    @property
    def no_gradient(self) -> bool:
        """The gradients are ~0 (RMS below ``NO_GRADIENT``): the loss does not depend on the weights, and a
        small update ratio says nothing about the LR (a rounded or detached output)."""
        return math.isfinite(self.grad_rms) and self.grad_rms < NO_GRADIENT

    @property
    def dense_ratio(self) -> float:
        """The median update ratio of the groups that are not embedding tables (NaN: none)."""
        moved = self.ratios.moved
        return weighted_median(list(moved.values()), [float(self.data.group_numel.get(g, 1)) for g in moved])

    @property
    def tables_only(self) -> bool:
        """Every group that moved is an embedding table: healthy tables' update ratios and growth run high
        (rows move only when their ids come up; tables often start near 0): a high one is no LR evidence."""
        return bool(self.data.sparse_groups) and not self.ratios.moved

    @property
    def ratio(self) -> float:
        """The run's update ratio (``ratios.median``)."""
        return self.ratios.median

    @property
    def trained_share(self) -> float:
        """The share of the module's parameter elements its optimizers train (NaN: the module's size
        unknown). Below ``trained_share_low``, almost nothing can move the loss."""
        total = self.data.model_numel
        return sum(self.data.group_numel.values()) / total if total > 0 else math.nan

    @property
    def input_free(self) -> bool:
        """The loss no better than the model's own batch-mean prediction's, beyond noise."""
        d = self.data
        gap, se, level = d.input_free_gap, d.input_free_gap_se, d.input_free_loss - self.loss_floor
        if not (math.isfinite(gap) and math.isfinite(se) and math.isfinite(level)):
            return False
        return gap + self.t["confidence_z"] * se <= self.t["trivial_band"] * abs(level)

    @property
    def same_output(self) -> bool:
        """At every check that measured it, the model's prediction was the same for every sample (its loss
        within ``SAME_OUTPUT`` of its batch-mean prediction's): nothing of the input reaches the output."""
        streaks = self.history.streaks
        return streaks.get("spread_checks", 0) >= 1 and not streaks.get("output_varied")

    @property
    def loss_floor(self) -> float:
        """The loss's floor where measured (the target as its own prediction: a full Gaussian likelihood's
        constant), else 0: levels are judged above it, so a constant in the loss inflates no share."""
        return self.data.loss_floor if math.isfinite(self.data.loss_floor) else 0.0

    @property
    def shrunk(self) -> bool:
        """The weights' norm fell below ``SHRUNK`` x its size at step 0: something pulls them toward zero
        (a weight decay or penalty stronger than the gradient); unknown growth: False."""
        return self.growth < SHRUNK

    @property
    def level_known(self) -> bool:
        """The loss's trivial level was measured (``input_free``: the run calls a torch loss): a claim that
        the loss sits at it can be checked, whatever constant or scale the run's loss carries."""
        return math.isfinite(self.data.input_free_loss)

    def left_start(self, k: int) -> bool:
        """The last ``k`` checks' mean loss fell significantly below the loss at initialisation.

        Example:
            >>> history = History(losses=[5.29, 5.11, 5.10], loss_ses=[0.01] * 3, loss_steps=[20, 40, 60],
            ...                   start_loss=5.33)
            >>> data = CheckData(80, 0, loss_mean=5.09, loss_count=20, loss_std=0.04)
            >>> e = evidence_of(data, history, DEFAULT_THRESHOLDS)
            >>> e.left_start(3), e.at_start  # it fell 0.24 (12 errors), and sits at 96% of its start
            (True, True)
        """
        history = self.history
        if not history.loss_ses or not math.isfinite(self.start):  # no start, or no interval's spread
            return False
        _, means, ses = self.window(k)
        if not all(math.isfinite(s) for s in ses):
            return False
        level, level_se = sum(means) / len(means), math.sqrt(sum(s * s for s in ses)) / len(ses)
        start_se = history.loss_ses[0] * math.sqrt(max(self.data.loss_count, START_STEPS) / START_STEPS)
        return significantly_above(self.start, start_se, level, level_se, self.t["confidence_z"])

    @property
    def frozen(self) -> bool:
        """Almost no parameter trains and the loss sits within ``trivial_band`` of its start."""
        return self.at_start and self.trained_share < self.t.get("trained_share_low", 0.0)

    def window(self, k: int) -> tuple[list[float], list[float], list[float]]:
        """The last ``k`` checks' steps, interval means and standard errors (this check's included)."""
        h, tail = self.history, slice(-(k - 1), None) if k > 1 else slice(0, 0)
        steps = [float(s) for s in [*h.loss_steps[tail], self.data.step]]
        return steps, [*h.losses[tail], self.data.loss_mean], [*h.loss_ses[tail], self.se]

    def falls(self, k: int, span: float | None = None) -> tuple[bool, float, float]:
        """``(significant, drop, level)`` of the last ``k`` checks' trend over ``span`` steps."""
        steps, means, ses = self.window(k)
        slope, slope_se = trend(steps, means, ses)
        span = steps[-1] - steps[0] if span is None else span
        drop = -slope * span if math.isfinite(slope) else 0.0
        return slope < -self.t["confidence_z"] * slope_se, drop, sum(means) / len(means)

    def progressing(self, k: int) -> bool | None:
        """The loss fell significantly over the last ``k`` intervals or within this one (``None``: fewer
        than ``k`` known)."""
        if self.falling:
            return True
        if len(self.history.losses) < k - 1 or not math.isfinite(self.data.loss_mean):
            return None
        return self.falls(k)[0]


def evidence_of(data: CheckData, history: History, t: dict[str, float]) -> Evidence:
    """The check's :class:`Evidence`, before ``decide`` appends this check to ``history``."""
    if math.isnan(history.start_loss) and math.isfinite(data.loss_head):
        history.start_loss = data.loss_head
    ratios = UpdateRatios(data)
    norm_before = history.last_param_norm if history.losses else data.param_norm_start
    spikes = record_check(data, history, ratios.median, ratios.lr, t)
    lr, lrs = ratios.lr, history.lrs
    start = history.start_loss
    at_start = math.isfinite(start) and start > 0 and data.loss_mean >= (1.0 - t["trivial_band"]) * start
    floor = max(ratios.low(t), t["ratio_low"]) if ratios.family != "adaptive" and at_start else ratios.low(t)
    falling = (
        math.isfinite(data.loss_slope)
        and data.loss_slope_se > 0
        and data.loss_slope / data.loss_slope_se < -t["confidence_z"]
    )
    growth = data.param_norm / data.param_norm_start if data.param_norm_start > 0 else math.nan
    se = mean_se(data.loss_std, data.loss_count)
    previous, previous_se = (history.losses[-1], history.loss_ses[-1]) if history.losses else (math.nan,) * 2
    converging = bool(history.losses) and data.loss_mean < 0.5 * history.losses[0]
    late = math.isfinite(data.planned_steps) and data.step >= t["anneal_fraction"] * data.planned_steps
    return Evidence(
        data=data,
        history=history,
        t=t,
        ratios=ratios,
        spikes=spikes,
        lr=lr,
        peak_lr=max((v for v in [*lrs, history.start_lr] if math.isfinite(v)), default=math.nan),
        growth=growth,
        start=start,
        at_start=at_start,
        floor=floor,
        se=se,
        falling=falling,
        warming_up=bool(lrs) and math.isfinite(lr) and lr > 1.5 * lrs[-1],
        step_cut=bool(lrs) and lr < 1e-3 * lrs[-1],
        annealing=late and len(lrs) >= 2 and lrs[-1] <= lrs[-2] and (math.isnan(lr) or lr <= lrs[-1]),
        kept_scale=growth <= t["growth_high"],
        blown=growth > t["growth_blown"],
        converging=converging,
        learning=converging and not growth > t["growth_blown"],
        previous=previous,
        below_previous=significantly_above(previous, previous_se, data.loss_mean, se, t["confidence_z"]),
        norm_before=norm_before,
    )
