"""HealthMonitor's noise model, on host floats: how sure a change in the loss is, given the run's own noise.

A check of ``HealthMonitor`` sees, for its interval of ``n`` steps, the mean training loss, the per-step
spread around it and the least-squares slope of loss against step with its standard error; for a validation,
the loss with its standard error. Every loss rule asks one of three questions of these numbers, each a
one-sided test at the confidence of :data:`Z` (z = 2.33, 1% false-alarm odds per question under normal noise):

* is a later mean **significantly above / below** an earlier one (:func:`significantly_above`: the difference
  exceeds ``Z`` standard errors of the difference, Welch's form, ``sqrt(se_a^2 + se_b^2)``);
* is the loss **trending down** over a window of checks (:func:`trend`: weighted least squares of the interval
  means against their steps, each weighted by ``1 / se^2``; its slope's t-statistic);
* how large is a validation loss's **standard error** when the per-batch spread is thin evidence
  (:func:`validation_se`: at least ``CV_FLOOR`` x the loss / sqrt(samples); a 60-sample set cannot resolve a
  6% change).

Per-step losses of shuffled batches are close to independent around their trend, so ``std / sqrt(n)`` is
the standard error of an interval mean; the within-interval trend only inflates ``std``, which makes every
test here more conservative, never less. No tensors: this runs after the check's one sync.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = [
    "CV_FLOOR",
    "Z",
    "mean_se",
    "significantly_above",
    "trend",
    "validation_se",
    "weighted_median",
]

#: One-sided 99% normal quantile: a finding's test has ~1% false-alarm odds under the measured noise.
Z = 2.326

#: The smallest per-sample coefficient of variation assumed for a validation loss (per-sample cross-entropy
#: and squared errors have CV >= 1 in practice; 0.5 leaves room for losses that are nearly constant).
CV_FLOOR = 0.5


def mean_se(std: float, count: int) -> float:
    """The standard error of a mean of ``count`` values with spread ``std`` (NaN when unknown).

    Example:
        >>> mean_se(0.2, 16)
        0.05
    """
    if count < 2 or not math.isfinite(std):
        return math.nan
    return std / math.sqrt(count)


def significantly_above(a: float, se_a: float, b: float, se_b: float, z: float = Z) -> bool:
    """Whether ``a`` exceeds ``b`` by more than ``z`` standard errors of the difference (unknown errors:
    False).

    Example:
        >>> significantly_above(1.10, 0.02, 1.00, 0.02)  # 0.10 > 2.33 * 0.028
        True
        >>> significantly_above(1.03, 0.02, 1.00, 0.02)
        False
    """
    se = math.sqrt(se_a**2 + se_b**2)
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(se)):
        return False
    return a - b > z * max(se, 1e-12 * max(abs(a), abs(b), 1e-30))


def trend(steps: Sequence[float], means: Sequence[float], ses: Sequence[float]) -> tuple[float, float]:
    """``(slope, t)``: the weighted least-squares slope of ``means`` against ``steps`` (weights ``1 / se^2``)
    and its t-statistic. ``(nan, nan)`` with fewer than 2 points or an unknown standard error.

    Example:
        >>> slope, t = trend([10, 20, 30], [1.0, 0.9, 0.8], [0.01, 0.01, 0.01])
        >>> round(slope, 4), t < -10
        (-0.01, True)
        >>> round(trend([10, 20, 30], [1.0, 0.99, 1.01], [0.05, 0.05, 0.05])[1], 2)
        0.14
    """
    points = [
        (x, y, s) for x, y, s in zip(steps, means, ses) if math.isfinite(y) and math.isfinite(s) and s > 0
    ]
    if len(points) < 2:
        return math.nan, math.nan
    weights = [1.0 / s**2 for _, _, s in points]
    total = sum(weights)
    x_bar = sum(w * x for w, (x, _, _) in zip(weights, points)) / total
    y_bar = sum(w * y for w, (_, y, _) in zip(weights, points)) / total
    sxx = sum(w * (x - x_bar) ** 2 for w, (x, _, _) in zip(weights, points))
    if sxx <= 0:
        return math.nan, math.nan
    slope = sum(w * (x - x_bar) * (y - y_bar) for w, (x, y, _) in zip(weights, points)) / sxx
    return slope, slope / math.sqrt(1.0 / sxx)


def validation_se(val: float, se: float, count: int) -> float:
    """A validation loss's standard error: the measured one, never below
    ``CV_FLOOR * |val| / sqrt(count)``.

    With a few batches the per-batch spread is itself a noisy estimate (two batches give one degree of
    freedom), so a floor from the set's size keeps a small validation set from looking precise. NaN when
    neither the standard error nor the sample count is known.

    Example:
        >>> round(validation_se(1.0, 0.01, 60), 4)  # 60 samples: at least 0.5 / sqrt(60)
        0.0645
        >>> validation_se(1.0, 0.01, 100_000)  # a large set: the measured error stands
        0.01
    """
    floor = CV_FLOOR * abs(val) / math.sqrt(count) if count > 0 else math.nan
    measured = se if math.isfinite(se) else math.nan
    if math.isnan(floor):
        return measured
    return floor if math.isnan(measured) else max(measured, floor)


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The value below which half the total weight lies (NaN for no values).

    Example:
        >>> weighted_median([1e-3, 1e-6, 2e-5], [10, 1000, 10])  # the large tensor's ratio
        1e-06
    """
    pairs = sorted((v, w) for v, w in zip(values, weights) if math.isfinite(v) and w > 0)
    if not pairs:
        return math.nan
    half, running = sum(w for _, w in pairs) / 2.0, 0.0
    for value, weight in pairs:
        running += weight
        if running >= half:
            return value
    return pairs[-1][0]
