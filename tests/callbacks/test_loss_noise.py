"""The loss-noise model (``callbacks/_loss_noise.py``): robust level and spread, the spike verdict, the
standard error of a mean loss; against plain-Python references and on the device without a host sync."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from lightning_recipes.callbacks._loss_noise import ROBUST_SIGMA, exceeds_noise, loss_noise, standard_error
from lightning_recipes.testing import HostSyncCounter


def _reference(window: list[float], losses: list[float], k: float, min_rise: float) -> list[bool]:
    """The rule of the module docstring, in plain Python (``statistics.median`` averages the two middle
    values of an even count; torch takes the lower one: the tables below use odd windows)."""
    log_space = all(w > 0 for w in window)
    values = [math.log(w) for w in window] if log_space else window
    level = statistics.median(values)
    spread = ROBUST_SIGMA * statistics.median([abs(v - level) for v in values])
    rise = math.log1p(min_rise) if log_space else min_rise * abs(level)
    out = []
    for loss in losses:
        value = (math.log(loss) if loss > 0 else -math.inf) if log_space else loss
        out.append(value > level + max(k * spread, rise))
    return out


PLATEAU = [0.6931 + 0.0005 * d for d in (-2, -1, 0, 1, 2, 0, 1, -1, 0, 2, -2)]  # ln 2, spread ~0.1%
HEAVY = [0.05, 0.02, 0.3, 0.04, 0.06, 0.01, 0.5, 0.03, 0.08, 0.02, 0.2]  # late fine-tuning: 25x range
SIGNED = [-1.0, -0.5, 0.0, 0.5, 1.0, -0.2, 0.2, 0.1, -0.1]  # a loss that can be negative: linear


@pytest.mark.parametrize(
    ("window", "losses", "k", "min_rise", "expected"),
    [
        # a plateau: +6% is 80 spreads above but not 1.5x -> no spike; 3x -> spike; min_rise 0 -> +6% is one
        (PLATEAU, [0.6931 * 1.06, 0.6931 * 3, float("nan")], 6.0, 0.5, [False, True, False]),
        (PLATEAU, [0.6931 * 1.06, 0.6931 * 1.001], 6.0, 0.0, [True, False]),
        # heavy tails (log-space spread ~1.1): a batch 2x or 10x the level is noise, 20000x is not
        (HEAVY, [0.1, 0.5, 1000.0], 6.0, 0.5, [False, False, True]),
        # signed losses: linear, level 0, spread 1.4826 * 0.2 (threshold 1.78)
        (SIGNED, [1.5, 4.0, -9.0], 6.0, 0.5, [False, True, False]),
        # a non-positive loss against a positive window is never a spike
        (PLATEAU, [0.0, -5.0], 6.0, 0.5, [False, False]),
    ],
)
def test_exceeds_noise_matches_the_reference(
    window: list[float], losses: list[float], k: float, min_rise: float, expected: list[bool]
) -> None:
    got = exceeds_noise(torch.tensor(losses), torch.tensor(window), k=k, min_rise=min_rise).tolist()
    assert got == expected
    finite = [x for x in losses if math.isfinite(x)]
    assert _reference(window, finite, k, min_rise) == [g for g, x in zip(got, losses) if math.isfinite(x)]


def test_level_and_spread_are_robust_to_an_outlier() -> None:
    window = torch.tensor([1.0, 1.1, 0.9, 1.05, 0.95])
    level, spread, log_space = loss_noise(window)
    with_outlier = loss_noise(torch.cat([window, torch.tensor([50.0, 1.0])]))
    assert bool(log_space) and level.exp().item() == pytest.approx(1.0)
    assert spread.item() == pytest.approx(ROBUST_SIGMA * -math.log(0.95), rel=1e-5)  # MAD: |log 0.95|
    assert with_outlier[0].exp().item() == pytest.approx(1.0)  # the 50x batch moves neither
    assert with_outlier[1].item() < 2 * spread.item()


def test_rtol_rule_and_disabled_k() -> None:
    window = torch.tensor(PLATEAU)
    losses = torch.tensor([0.6931 * 1.06, 0.6931 * 2.5])
    assert exceeds_noise(losses, window, k=None, rtol=2.0).tolist() == [False, True]
    assert exceeds_noise(losses, window, k=None).tolist() == [False, False]


def test_no_host_sync() -> None:
    window, losses = torch.tensor(HEAVY), torch.tensor([0.1, 1000.0])
    with HostSyncCounter() as counter:
        exceeds_noise(losses, window, k=6.0, min_rise=0.5)
        standard_error(window, torch.full_like(window, 8.0), population=200)
    assert counter.count == 0


def test_standard_error_of_a_validation_loss() -> None:
    # 4 batches of 8 samples: the weighted formula equals the unweighted one for equal batches
    values = torch.tensor([0.9, 1.1, 1.0, 1.0])
    plain = statistics.stdev(values.tolist()) / math.sqrt(4)
    assert standard_error(values).item() == pytest.approx(plain, rel=1e-6)
    assert standard_error(values, torch.full((4,), 8.0)).item() == pytest.approx(plain, rel=1e-6)
    # a quarter of a 128-sample set: finite-population correction sqrt((128 - 32) / 127)
    fpc = math.sqrt(96 / 127)
    assert standard_error(values, torch.full((4,), 8.0), population=128).item() == pytest.approx(plain * fpc)
    assert standard_error(values, torch.full((4,), 8.0), population=32).item() == 0.0  # the whole set
    assert math.isnan(standard_error(torch.tensor([1.0])).item())  # one batch: no spread to measure
    with pytest.raises(ValueError, match="`population` must be an integer >= 2, got 1"):
        standard_error(values, population=1)
