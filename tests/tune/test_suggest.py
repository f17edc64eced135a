"""The curve-reading rules, against references written from their definitions."""

from __future__ import annotations

import math

import pytest

from lightning_recipes.tune.suggest import centred, smooth, suggest


def test_smooth_is_the_bias_corrected_moving_average():
    losses = [4.0, 2.0, 3.0]
    beta = 0.5
    # by hand: m1 = 0.5*4 = 2 -> 2/(1-0.5) = 4; m2 = 0.5*2 + 0.5*2 = 2 -> 2/(1-0.25) = 8/3;
    # m3 = 0.5*2 + 0.5*3 = 2.5 -> 2.5/(1-0.125) = 20/7
    assert smooth(losses, beta) == pytest.approx([4.0, 8 / 3, 20 / 7])
    assert smooth(losses, 0.0) == losses
    assert math.isnan(smooth([4.0, float("nan"), 3.0], beta)[1])  # passed through, not averaged in
    assert smooth([4.0, float("nan"), 3.0], beta)[2] == pytest.approx(smooth([4.0, 3.0], beta)[1])
    with pytest.raises(ValueError, match=r"`smoothing` must be in \[0, 1\), got 1.0"):
        smooth(losses, 1.0)


def test_centred_average_has_no_lag():
    # a step down at index 3: a causal average would still be high there, the centred one is halfway
    assert centred([2.0, 2.0, 2.0, 0.0, 0.0, 0.0], 1) == pytest.approx([2.0, 2.0, 4 / 3, 2 / 3, 0.0, 0.0])


def test_min_div_10_is_a_tenth_of_the_lr_at_the_minimum_of_the_centred_curve():
    lrs = [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    losses = [2.0, 1.5, 0.7, 0.9, 5.0]
    # 5 points: half window 1; centred = [1.75, 1.4, 1.033, 2.2, 2.95] -> minimum at 1e-2
    assert suggest(lrs, losses, "min_div_10") == pytest.approx(1e-3)


def test_steepest_is_the_largest_central_difference_drop_before_the_minimum():
    lrs = [10.0**e for e in range(-6, 1)]  # 1e-6 .. 1
    losses = [2.0, 1.99, 1.9, 1.0, 0.8, 0.75, 3.0]
    smoothed = centred(losses, 1)  # 7 points: half window max(1, round(7 / 20)) = 1
    best = min(range(len(smoothed)), key=smoothed.__getitem__)
    # central slopes per decade, between the first and the minimum point
    slopes = {i: (smoothed[i + 1] - smoothed[i - 1]) / (2 * math.log(10)) for i in range(1, max(best, 2))}
    expected = lrs[min(slopes, key=slopes.get)]
    assert suggest(lrs, losses, "steepest") == pytest.approx(expected) == pytest.approx(1e-3)


def test_non_finite_points_are_dropped_and_too_short_curves_are_refused():
    lrs = [1e-3, 1e-2, 1e-1, 1.0]
    # the NaN point is dropped: 3 points, centred [0.75, 0.633, 0.45] -> minimum at 1e-1
    assert suggest(lrs, [1.0, 0.5, 0.4, float("nan")], "min_div_10") == pytest.approx(1e-2)
    with pytest.raises(ValueError, match="at least 3"):
        suggest(lrs, [1.0, float("inf"), float("nan"), float("nan")], "min_div_10")
    with pytest.raises(ValueError, match="`rule` must be one of"):
        suggest(lrs, [1.0, 0.9, 0.8, 0.7], "valley")  # type: ignore[arg-type]
