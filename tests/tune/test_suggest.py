"""The curve-reading rules, against references written from their definitions."""

from __future__ import annotations

import math

import pytest

from lightning_recipes.tune.suggest import smooth, suggest


def test_smooth_is_the_bias_corrected_moving_average():
    losses = [4.0, 2.0, 3.0]
    beta = 0.5
    # by hand: m1 = 0.5*4 = 2 -> 2/(1-0.5) = 4; m2 = 0.5*2 + 0.5*2 = 2 -> 2/(1-0.25) = 8/3;
    # m3 = 0.5*2 + 0.5*3 = 2.5 -> 2.5/(1-0.125) = 20/7
    assert smooth(losses, beta) == pytest.approx([4.0, 8 / 3, 20 / 7])
    assert smooth(losses, 0.0) == losses


def test_min_div_10_is_a_tenth_of_the_lr_at_the_minimum():
    lrs = [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    losses = [2.0, 1.5, 0.7, 0.9, 5.0]
    assert suggest(lrs, losses, "min_div_10") == pytest.approx(1e-3)


def test_steepest_is_the_largest_central_difference_drop_before_the_minimum():
    lrs = [10.0**e for e in range(-6, 1)]  # 1e-6 .. 1
    losses = [2.0, 1.99, 1.9, 1.0, 0.8, 0.75, 3.0]
    # central slopes per ln(10): i=1: (1.9-2.0)/2, i=2: (1.0-1.99)/2, i=3: (0.8-1.9)/2 (steepest), i=4: ...
    slopes = {i: (losses[i + 1] - losses[i - 1]) / (2 * math.log(10)) for i in range(1, 5)}
    expected = lrs[min(slopes, key=slopes.get)]
    assert suggest(lrs, losses, "steepest") == pytest.approx(expected) == pytest.approx(1e-3)


def test_non_finite_points_are_dropped_and_too_short_curves_are_refused():
    lrs = [1e-3, 1e-2, 1e-1, 1.0]
    assert suggest(lrs, [1.0, 0.5, 0.4, float("nan")], "min_div_10") == pytest.approx(1e-2)
    with pytest.raises(ValueError, match="at least 3"):
        suggest(lrs, [1.0, float("inf"), float("nan"), float("nan")], "min_div_10")
    with pytest.raises(ValueError, match="`rule` must be one of"):
        suggest(lrs, [1.0, 0.9, 0.8, 0.7], "valley")  # type: ignore[arg-type]
