"""The one statistics home: noise, standard errors, trends, significance, quantiles. One convention for
confidence: a one-sided test at :data:`Z` standard errors, or an explicit ``z``."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, NamedTuple

import torch
from torch import Tensor

__all__ = [
    "CONFIDENCE",
    "CV_FLOOR",
    "FAIL_FACTOR",
    "NOISE_FACTOR",
    "ROBUST_SIGMA",
    "Gain",
    "NoiseVerdict",
    "Z",
    "dependence_factor",
    "difference_noise",
    "distribution_distance",
    "entropy",
    "held_out_gain",
    "judge_deviation",
    "label_counts",
    "label_shift",
    "line_fit",
    "mean_se",
    "normal_quantile",
    "rank_correlation",
    "robust_scale",
    "significantly_above",
    "standard_error",
    "t_quantile",
    "trend",
    "validation_se",
    "weighted_median",
]

#: One-sided confidence of the preflight's Student-t bounds (1% false-alarm odds per question).
CONFIDENCE = 0.99
#: One-sided 99% normal quantile: the confidence every "significantly" of HealthMonitor uses.
Z = 2.326
#: Median absolute deviation -> standard deviation, for normal noise (1 / Phi^-1(3/4)).
ROBUST_SIGMA = 1.4826
#: The smallest per-sample coefficient of variation assumed for a validation loss (:func:`validation_se`).
CV_FLOOR = 0.5
#: A deviation up to this many times the measured run-to-run noise (or the dtype bound) is float noise.
NOISE_FACTOR = 4.0
#: A deviation above this many times the tolerance is a verdict; between the two it is ``inconclusive``.
FAIL_FACTOR = 10.0


def normal_quantile(p: float) -> float:
    """The standard normal quantile at probability ``p``.

    Example:
        >>> round(normal_quantile(0.99), 3)
        2.326
    """
    return NormalDist().inv_cdf(p)


def t_quantile(p: float, df: int) -> float:
    """The Student-t quantile at ``p`` with ``df`` degrees of freedom (Cornish-Fisher, A&S 26.7.5).

    Example:
        >>> round(t_quantile(0.975, 10), 3), round(t_quantile(0.975, 10**6), 3)  # exact: 2.228, 1.960
        (2.228, 1.96)
    """
    z = normal_quantile(p)
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    g3 = (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / 384
    g4 = (79 * z**9 + 776 * z**7 + 1482 * z**5 - 1920 * z**3 - 945 * z) / 92160
    return z + g1 / df + g2 / df**2 + g3 / df**3 + g4 / df**4


def mean_se(std: float, count: int) -> float:
    """``std / sqrt(count)``, the standard error of a mean (NaN for fewer than 2 or an unknown spread).

    Example:
        >>> mean_se(0.2, 16)
        0.05
    """
    if count < 2 or not math.isfinite(std):
        return math.nan
    return std / math.sqrt(count)


def standard_error(values: Tensor, weights: Tensor | None = None, population: int | None = None) -> Tensor:
    """The standard error of the (weighted) mean of ``values``, a 0-d tensor, no sync (NaN for < 2 values).
    ``weights``: batch sizes when ``values`` are batch means; ``population``: the set's size, for the
    finite-population correction ``sqrt((N - n) / (N - 1))``. float32, or float64 for float64 ``values``.

    Example:
        >>> values = torch.tensor([0.9, 1.1, 1.0, 1.0])
        >>> round(standard_error(values).item(), 4)  # std 0.0816 / sqrt(4)
        0.0408
        >>> standard_error(values, weights=torch.full((4,), 8.0), population=32).item()  # the whole set
        0.0
    """
    values = values.to(torch.promote_types(values.dtype, torch.float32))
    w = torch.ones_like(values) if weights is None else weights.to(values.dtype)
    total = w.sum()
    mean = (w * values).sum() / total
    count = values.numel()
    sample_var = (w * (values - mean) ** 2).sum() / max(count - 1, 1)
    error = (sample_var / total).sqrt()
    if count < 2:
        error = torch.full_like(error, math.nan)
    if population is not None:
        if population < 2:
            raise ValueError(f"`population` must be an integer >= 2, got {population!r}.")
        error = error * ((population - total) / (population - 1)).clamp_min(0.0).sqrt()
    return error


def dependence_factor(values: Tensor, weights: Tensor | None = None, z: float = Z) -> float:
    """How much dependence between neighbouring ``values`` widens the standard error of their (weighted)
    mean: the batch-means error over blocks of ``2, 4, 8, ...`` values (10 blocks at least) over the
    independent error, for the widest block above it beyond chance (chi-square at ``z``); else 1.0.

    Example:
        >>> g = torch.Generator().manual_seed(0)
        >>> dependence_factor(torch.randn(400, generator=g))  # independent values
        1.0
        >>> runs = torch.randn(40, generator=g).repeat_interleave(10)  # runs of 10 equal values
        >>> round(dependence_factor(runs), 1)  # about sqrt(10): 40 independent values, not 400
        2.8
    """
    flat = values.detach().double().flatten().cpu()
    w = torch.full_like(flat, 1.0) if weights is None else weights.detach().double().flatten().cpu()
    w = w / w.sum().clamp_min(1e-300)
    spread = w * (flat - (w * flat).sum())  # each value's share of the mean's deviation
    factor, size = 1.0, 2
    while len(spread) // size >= 10:
        blocks = len(spread) // size
        kept = spread[: blocks * size]
        independent = float(kept.square().sum())
        if independent <= 0:
            break
        ratio = float(kept.reshape(blocks, size).sum(1).square().sum()) / independent
        df = blocks - 1  # Wilson-Hilferty: the chi-square(df) / df quantile at z
        bound = (1 - 2 / (9 * df) + z * math.sqrt(2 / (9 * df))) ** 3
        if ratio > bound:
            factor = max(factor, math.sqrt(ratio))
        size *= 2
    return factor


def difference_noise(values: Sequence[float], order: int = 1) -> float:
    """The per-point noise of a series from its ``order``-th differences, blind to its level (order 1) or a
    straight trend (order 2): ``sqrt(mean(d^2) / C(2 order, order))``; 0.0 when too short.

    Example:
        >>> difference_noise([3.0, 2.0, 1.0, 0.0], order=2)  # a straight line has no noise
        0.0
        >>> round(difference_noise([1.0, 0.0, 1.0, 0.0, 1.0], order=2), 3)  # alternating +-0.5
        0.816
    """
    diffs = list(values)
    for _ in range(order):
        diffs = [b - a for a, b in itertools.pairwise(diffs)]
    if not diffs:
        return 0.0
    return math.sqrt(sum(d * d for d in diffs) / len(diffs) / math.comb(2 * order, order))


def robust_scale(values: Tensor) -> tuple[Tensor, Tensor]:
    """``(median, ROBUST_SIGMA * median absolute deviation)`` of ``values``: 0-d tensors, no sync.

    Example:
        >>> level, spread = robust_scale(torch.tensor([-1.0, 0.0, 1.0, 9.0]))
        >>> level.item(), round(spread.item(), 4)
        (0.0, 1.4826)
    """
    level = values.median()
    return level, ROBUST_SIGMA * (values - level).abs().median()


def validation_se(val: float, se: float, count: int) -> float:
    """A validation loss's standard error: the measured ``se``, at least ``CV_FLOOR * |val| / sqrt(count)``
    (NaN when neither is known).

    Example:
        >>> round(validation_se(1.0, 0.01, 60), 4), validation_se(1.0, 0.01, 100_000)
        (0.0645, 0.01)
    """
    floor = CV_FLOOR * abs(val) / math.sqrt(count) if count > 0 else math.nan
    measured = se if math.isfinite(se) else math.nan
    if math.isnan(floor):
        return measured
    return floor if math.isnan(measured) else max(measured, floor)


def line_fit(
    n: float, sum_y: float, sum_yy: float, sum_x: float, sum_xx: float, sum_xy: float
) -> tuple[float, float, float, float]:
    """``(mean, std, slope, slope_se)`` of a least-squares line from its running sums (``n - 2`` degrees of
    freedom); NaN where too few points (2 for the std and slope, 3 for its error) or a single ``x``.

    Example:
        >>> x, y = [0.0, 1.0, 2.0], [3.0, 2.0, 1.0]
        >>> line_fit(3, sum(y), sum(v * v for v in y), sum(x), sum(v * v for v in x),
        ...          sum(a * b for a, b in zip(x, y)))
        (2.0, 1.0, -1.0, 0.0)
    """
    if n < 1:
        return math.nan, math.nan, math.nan, math.nan
    mean = sum_y / n
    syy = max(sum_yy - sum_y * sum_y / n, 0.0)
    std = math.sqrt(syy / (n - 1)) if n >= 2 else math.nan
    sxx = sum_xx - sum_x * sum_x / n
    if n < 2 or sxx <= 1e-12 * max(sum_xx, 1.0):
        return mean, std, math.nan, math.nan
    sxy = sum_xy - sum_x * sum_y / n
    slope = sxy / sxx
    if n < 3:
        return mean, std, slope, math.nan
    return mean, std, slope, math.sqrt(max(syy - slope * sxy, 0.0) / (n - 2) / sxx)


def trend(xs: Sequence[float], ys: Sequence[float], ses: Sequence[float]) -> tuple[float, float]:
    """``(slope, slope_se)`` of ``ys`` against ``xs`` by least squares weighted ``1 / se^2``; points with a
    non-finite value or error are left out; ``(nan, nan)`` with fewer than 2 points.

    Example:
        >>> slope, se = trend([10, 20, 30], [1.0, 0.9, 0.8], [0.01, 0.01, 0.01])
        >>> round(slope, 4), round(slope / se, 1)  # the slope's t-statistic
        (-0.01, -14.1)
    """
    points = [(x, y, s) for x, y, s in zip(xs, ys, ses) if math.isfinite(y) and math.isfinite(s) and s > 0]
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
    return slope, math.sqrt(1.0 / sxx)


def significantly_above(a: float, se_a: float, b: float, se_b: float, z: float = Z) -> bool:
    """Whether ``a`` exceeds ``b`` by more than ``z`` standard errors of the difference,
    ``sqrt(se_a^2 + se_b^2)`` (Welch's form). False when an error is unknown.

    Example:
        >>> significantly_above(1.10, 0.02, 1.00, 0.02), significantly_above(1.03, 0.02, 1.00, 0.02)
        (True, False)
    """
    se = math.sqrt(se_a**2 + se_b**2)
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(se)):
        return False
    return a - b > z * max(se, 1e-12 * max(abs(a), abs(b), 1e-30))


def weighted_median(values: Sequence[float], weights: Sequence[float]) -> float:
    """The value below which half the total weight lies (NaN for no values).

    Example:
        >>> weighted_median([1e-3, 1e-6, 2e-5], [10, 1000, 10])
        1e-06
    """
    pairs = sorted((v, w) for v, w in zip(values, weights) if math.isfinite(v) and w > 0)
    if not pairs:
        return math.nan
    half = sum(w for _, w in pairs) / 2.0
    running = itertools.accumulate(w for _, w in pairs)
    return next((v for (v, _), total in zip(pairs, running) if total >= half), pairs[-1][0])


@dataclass
class NoiseVerdict:
    """``status`` (``"pass"``, ``"inconclusive"`` or ``"fail"``) of a deviation and the numbers behind it."""

    status: str
    deviation: float
    noise: float
    tolerance: float
    scale: float

    @property
    def relative(self) -> float:
        """The deviation relative to the compared quantity's scale (0 for a zero scale)."""
        return self.deviation / self.scale if self.scale > 0 else 0.0

    def describe(self) -> str:
        return (
            f"deviation {self.deviation:.3g} ({self.relative:.2g} of the scale {self.scale:.3g}) vs "
            f"tolerance {self.tolerance:.3g} (run-to-run noise {self.noise:.3g})"
        )


def judge_deviation(
    deviation: float, noise: float, scale: float, dtype: torch.dtype, ulps: float = 64.0
) -> NoiseVerdict:
    """Judge a max abs ``deviation`` against the larger of ``NOISE_FACTOR`` x ``noise`` (two identical
    passes) and ``ulps`` x eps x ``scale``: above ``FAIL_FACTOR`` x that it fails, in between inconclusive.

    Example:
        >>> [judge_deviation(d, 0.0, 1.0, torch.float32).status for d in (0.0, 3e-5, 0.3)]
        ['pass', 'inconclusive', 'fail']
    """
    eps = torch.finfo(dtype).eps if dtype.is_floating_point else torch.finfo(torch.float32).eps
    tolerance = max(NOISE_FACTOR * noise, ulps * eps * scale, 1e-30)
    status = "pass" if deviation <= tolerance else "inconclusive"
    status = "fail" if deviation > FAIL_FACTOR * tolerance else status
    return NoiseVerdict(status, deviation, noise, tolerance, scale)


class Gain(NamedTuple):
    """The real copy's gain over a control, ``(control - real) / max(|control|, |real|)`` of the means."""

    gain: float
    noise: float  # standard error of the gain
    low: float
    high: float


def held_out_gain(real: Tensor, control: Tensor) -> Gain:
    """The :class:`Gain` of ``real`` over ``control`` on the same chunks (paired: Student-t bounds at
    :data:`CONFIDENCE`)."""
    real_mean, control_mean = float(real.double().mean()), float(control.double().mean())
    scale = max(abs(control_mean), abs(real_mean))
    if math.isfinite(scale):
        gain = (control_mean - real_mean) / scale if scale > 0 else 0.0
    else:
        gain = -math.inf if not math.isfinite(real_mean) else math.inf
    if len(real) < 3 or not math.isfinite(gain):
        return Gain(gain, math.inf, -math.inf, math.inf)
    noise = float(standard_error((control - real).double())) / max(scale, 1e-12)
    spread = t_quantile(CONFIDENCE, len(real) - 1) * noise
    return Gain(gain, noise, gain - spread, gain + spread)


def distribution_distance(a: Tensor, b: Tensor) -> Tensor:
    """Per column, the Kolmogorov-Smirnov distance of the values in ``a`` ``[N, D]`` and ``b`` ``[M, D]``.

    Example:
        >>> distribution_distance(torch.arange(4.0)[:, None], torch.arange(2.0, 6.0)[:, None])
        tensor([0.5000])
    """
    points = torch.cat([a, b]).T.contiguous()  # the largest gap of two step functions is at a step

    def share_at_or_below(x: Tensor) -> Tensor:
        return torch.searchsorted(x.sort(0).values.T.contiguous(), points, right=True) / len(x)

    return (share_at_or_below(a) - share_at_or_below(b)).abs().amax(1)


def label_counts(labels: Tensor) -> dict[int, int]:
    """How often each integer label occurs.

    Example:
        >>> label_counts(torch.tensor([2, 0, 2]))
        {0: 1, 2: 2}
    """
    return dict(zip(*(t.tolist() for t in torch.unique(labels, return_counts=True)), strict=True))


def entropy(counts: Mapping[int, int]) -> float:
    """The entropy (nats) of the distribution ``counts`` describe.

    Example:
        >>> round(entropy({0: 5, 1: 5}), 4)
        0.6931
    """
    total = sum(counts.values())
    return -sum(n / total * math.log(n / total) for n in counts.values() if n)


def label_shift(train: Mapping[int, int], val: Mapping[int, int]) -> dict[str, Any]:
    """Total variation and a chi-square test of homogeneity of two label counts (significant: TV > 0.2 and
    chi2 more than 5 standard deviations above its mean, ``df``).

    Example:
        >>> shift = label_shift({0: 90, 1: 10}, {0: 50, 1: 50})
        >>> round(shift["tv"], 2), shift["significant"]
        (0.4, True)
    """
    labels = sorted(set(train) | set(val))
    n_t, n_v = sum(train.values()), sum(val.values())
    tv = 0.5 * sum(abs(train.get(k, 0) / n_t - val.get(k, 0) / n_v) for k in labels)
    chi2 = 0.0
    for k in labels:
        column = train.get(k, 0) + val.get(k, 0)
        for seen, n in ((train.get(k, 0), n_t), (val.get(k, 0), n_v)):
            expected = column * n / (n_t + n_v)
            chi2 += (seen - expected) ** 2 / expected if expected > 0 else 0.0
    df = max(1, len(labels) - 1)
    return {"tv": tv, "chi2": chi2, "df": df, "significant": tv > 0.2 and chi2 > df + 5 * (2 * df) ** 0.5}


def rank_correlation(x: Tensor, y: Tensor) -> Tensor:
    """Per column of ``x`` ``[N, D]``: the larger of |Pearson| and |Spearman| with ``y`` ``[N]`` (1 for any
    monotone copy of ``y``).

    Example:
        >>> x = torch.tensor([[1.0, 3.0], [2.0, 1.0], [30.0, 2.0]])
        >>> rank_correlation(x, torch.tensor([0.0, 1.0, 2.0]))
        tensor([1.0000, 0.5000])
    """

    def pearson(a: Tensor, b: Tensor) -> Tensor:
        a, b = a - a.mean(0), b - b.mean()
        norm = a.norm(dim=0) * b.norm()
        return torch.where(norm > 0, (a * b[:, None]).sum(0).abs() / norm.clamp(min=1e-12), 0.0)

    ranks = x.argsort(0).argsort(0).float()
    return torch.maximum(pearson(x, y), pearson(ranks, y.argsort().argsort().float()))
