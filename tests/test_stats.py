"""Reference tests of lightning_recipes._stats, each written from its formula, step by step."""

from __future__ import annotations

import math
import random
import statistics

import pytest
import torch

from lightning_recipes import _stats as st


def test_quantiles_match_the_tables() -> None:
    assert pytest.approx(st.normal_quantile(0.99), abs=1e-3) == st.Z
    # Student-t table: t_{0.975}(10) = 2.228, t_{0.995}(30) = 2.750; large df -> normal
    assert st.t_quantile(0.975, 10) == pytest.approx(2.228, abs=1e-3)
    assert st.t_quantile(0.995, 30) == pytest.approx(2.750, abs=2e-3)
    assert st.t_quantile(0.99, 10**7) == pytest.approx(st.normal_quantile(0.99), abs=1e-6)


def test_standard_error_of_a_mean_is_s_over_sqrt_n() -> None:
    values = [0.3, 1.9, 1.1, 0.7, 1.5]
    s = statistics.stdev(values)  # sample std, n - 1
    expected = s / math.sqrt(len(values))
    assert st.mean_se(s, len(values)) == pytest.approx(expected)
    assert st.standard_error(torch.tensor(values, dtype=torch.float64)).item() == pytest.approx(expected)
    assert math.isnan(st.mean_se(s, 1)) and math.isnan(st.standard_error(torch.tensor([1.0])).item())


def test_weighted_standard_error_and_finite_population() -> None:
    # batch means x_i of sizes w_i: Var(sample) ~ sum w (x - mean_w)^2 / (m - 1); SE = sqrt(Var / sum w)
    x, w = [1.0, 2.0, 4.0], [2.0, 4.0, 2.0]
    mean = sum(a * b for a, b in zip(x, w)) / sum(w)
    var = sum(b * (a - mean) ** 2 for a, b in zip(x, w)) / (len(x) - 1)
    se = math.sqrt(var / sum(w))
    got = st.standard_error(torch.tensor(x, dtype=torch.float64), torch.tensor(w, dtype=torch.float64))
    assert got.item() == pytest.approx(se)
    fpc = math.sqrt((16 - 8) / (16 - 1))  # half of a 16-sample set seen
    got = st.standard_error(torch.tensor(x), torch.tensor(w), population=16)
    assert got.item() == pytest.approx(se * fpc, rel=1e-6)
    with pytest.raises(ValueError, match="population"):
        st.standard_error(torch.tensor(x), population=1)


@pytest.mark.parametrize("order", [1, 2])
def test_difference_noise_recovers_white_noise_under_a_trend(order: int) -> None:
    rng = random.Random(0)
    series = [0.01 * i + rng.gauss(0.0, 0.5) for i in range(20_000)]
    assert st.difference_noise(series, order) == pytest.approx(0.5, rel=0.03)
    assert st.difference_noise([1.0], order) == 0.0


def test_robust_scale_is_the_std_for_normal_noise_and_ignores_outliers() -> None:
    values = torch.randn(100_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    values[:100] = 1e6
    level, spread = st.robust_scale(values)
    assert abs(level.item()) < 0.02 and spread.item() == pytest.approx(1.0, rel=0.02)


def test_line_fit_is_ordinary_least_squares() -> None:
    x = [0.0, 1.0, 2.0, 3.0, 4.0]
    y = [1.0, 2.5, 2.9, 4.2, 5.1]
    n = len(x)
    x_bar, y_bar = sum(x) / n, sum(y) / n
    sxx = sum((a - x_bar) ** 2 for a in x)
    slope = sum((a - x_bar) * (b - y_bar) for a, b in zip(x, y)) / sxx
    residual = sum((b - (y_bar + slope * (a - x_bar))) ** 2 for a, b in zip(x, y)) / (n - 2)
    sums = (sum(y), sum(b * b for b in y), sum(x), sum(a * a for a in x), sum(a * b for a, b in zip(x, y)))
    mean, std, got_slope, slope_se = st.line_fit(n, *sums)
    assert (mean, std) == pytest.approx((y_bar, statistics.stdev(y)))
    assert (got_slope, slope_se) == pytest.approx((slope, math.sqrt(residual / sxx)))
    assert math.isnan(st.line_fit(2, 3.0, 5.0, 1.0, 1.0, 2.0)[3])  # 2 points: no residual left


def test_trend_is_weighted_least_squares_with_known_errors() -> None:
    x, y, se = [10.0, 20.0, 30.0, 40.0], [1.0, 0.97, 0.95, 0.9], [0.01, 0.02, 0.01, 0.03]
    w = [1 / s**2 for s in se]
    x_bar = sum(a * b for a, b in zip(w, x)) / sum(w)
    y_bar = sum(a * b for a, b in zip(w, y)) / sum(w)
    sxx = sum(c * (a - x_bar) ** 2 for a, c in zip(x, w))
    slope = sum(c * (a - x_bar) * (b - y_bar) for a, b, c in zip(x, y, w)) / sxx
    assert st.trend(x, y, se) == pytest.approx((slope, 1 / math.sqrt(sxx)))
    assert all(math.isnan(v) for v in st.trend([0.0], [1.0], [0.1]))
    assert all(math.isnan(v) for v in st.trend([0.0, 1.0], [1.0, math.nan], [0.1, 0.1]))


@pytest.mark.parametrize(
    ("a", "se_a", "b", "se_b", "z", "above"),
    [
        (1.10, 0.02, 1.00, 0.02, st.Z, True),  # 0.10 > 2.326 * 0.0283
        (1.06, 0.02, 1.00, 0.02, st.Z, False),  # 0.06 < 0.0658
        (1.06, 0.02, 1.00, 0.02, 2.0, True),  # a caller's own z: 0.06 > 0.0566
        (1.10, math.nan, 1.00, 0.02, st.Z, False),  # unknown error: never significant
    ],
)
def test_significantly_above_uses_welch_se(
    a: float, se_a: float, b: float, se_b: float, z: float, above: bool
) -> None:
    assert st.significantly_above(a, se_a, b, se_b, z) is above


def test_validation_se_floor_and_weighted_median() -> None:
    assert st.validation_se(2.0, 0.01, 100) == pytest.approx(st.CV_FLOOR * 2.0 / 10)
    assert st.validation_se(2.0, 0.5, 100) == 0.5
    assert st.validation_se(2.0, math.nan, 0) != st.validation_se(2.0, math.nan, 0)  # NaN
    # half of the weight 10 lies at <= 2.0
    assert st.weighted_median([3.0, 1.0, 2.0], [4.0, 1.0, 5.0]) == 2.0
    assert math.isnan(st.weighted_median([], []))


@pytest.mark.parametrize(
    ("deviation", "noise", "status"),
    [
        (1e-6, 0.0, "pass"),
        (3e-5, 0.0, "inconclusive"),
        (0.3, 0.0, "fail"),
        (0.3, 0.1, "pass"),
        (5.0, 0.1, "fail"),
    ],
)
def test_judge_deviation(deviation: float, noise: float, status: str) -> None:
    verdict = st.judge_deviation(deviation, noise, 1.0, torch.float32)
    tolerance = max(st.NOISE_FACTOR * noise, 64 * torch.finfo(torch.float32).eps)
    assert (verdict.status, verdict.tolerance) == (status, pytest.approx(tolerance))
    assert st.judge_deviation(1.0, 0.0, 1.0, torch.int64).status == "fail"  # integers: float32's epsilon


def test_dependence_factor_keeps_independent_errors_and_widens_runs() -> None:
    """Independent values keep their error; runs of ``r`` equal values get about ``sqrt(r)``."""
    g = torch.Generator().manual_seed(3)
    independent = [st.dependence_factor(torch.randn(300, generator=g)) for _ in range(300)]
    assert sum(f > 1 for f in independent) <= 9 and statistics.mean(independent) < 1.02
    for run in (5, 10):
        runs = torch.randn(600 // run, generator=g).repeat_interleave(run)
        assert math.sqrt(run) / 1.6 < st.dependence_factor(runs) < math.sqrt(run) * 1.6
    # weights: the error of a weighted mean (class-share weights) is widened alike
    runs = torch.randn(60, generator=g).repeat_interleave(10)
    assert st.dependence_factor(runs, torch.rand(600, generator=g) + 0.5) > 2.0


def test_distribution_distance_is_the_two_sample_kolmogorov_smirnov_statistic_ties_included():
    g = torch.Generator().manual_seed(0)
    a = torch.randint(0, 5, (40, 3), generator=g).float()
    b = torch.randint(1, 7, (25, 3), generator=g).float()
    a[:, 2] = torch.randn(40, generator=g)
    expected = []
    for column in range(3):  # sup over every value of |share of a at or below it - share of b at or below it|
        values = torch.cat([a[:, column], b[:, column]]).tolist()
        share_a = [float((a[:, column] <= v).float().mean()) for v in values]
        share_b = [float((b[:, column] <= v).float().mean()) for v in values]
        gaps = [abs(x - y) for x, y in zip(share_a, share_b)]
        expected.append(max(gaps))
    assert st.distribution_distance(a, b).tolist() == pytest.approx(expected)
    assert st.distribution_distance(a, a).tolist() == [0.0, 0.0, 0.0]
