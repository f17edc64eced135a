"""StabilityGuard's fault classification and spike rule as pure functions: value tables, plain-Python
references, no host sync."""

from __future__ import annotations

import math
import statistics

import pytest
import torch

from lightning_recipes._stats import ROBUST_SIGMA, robust_scale, standard_error
from lightning_recipes.callbacks.stability_guard import (
    CAUSES,
    choose_event,
    exceeds_noise,
    fault_causes,
    fault_record,
)
from lightning_recipes.testing import HostSyncCounter

NAN, INF = float("nan"), float("inf")


def _spike_reference(
    window: list[float], losses: list[float], k: float | None, min_rise: float, rtol: float | None
) -> list[bool]:
    """The spike rule in plain Python (odd windows: ``statistics.median`` equals torch's lower median)."""
    log_space = all(w > 0 for w in window)
    values = [math.log(w) for w in window] if log_space else window
    level = statistics.median(values)
    spread = ROBUST_SIGMA * statistics.median([abs(v - level) for v in values])
    rise = math.log1p(min_rise) if log_space else min_rise * abs(level)
    linear = math.exp(level) if log_space else level
    out = []
    for loss in losses:
        value = (math.log(loss) if loss > 0 else -math.inf) if log_space else loss
        out.append(
            (k is not None and value > level + max(k * spread, rise))
            or (rtol is not None and loss > rtol * linear)
        )
    return out


PLATEAU = [0.6931 + 0.0005 * d for d in (-2, -1, 0, 1, 2, 0, 1, -1, 0, 2, -2)]  # ln 2, spread ~0.1%
HEAVY = [0.05, 0.02, 0.3, 0.04, 0.06, 0.01, 0.5, 0.03, 0.08, 0.02, 0.2]  # late fine-tuning: 25x range
SIGNED = [-1.0, -0.5, 0.0, 0.5, 1.0, -0.2, 0.2, 0.1, -0.1]  # a loss that can be negative: linear


@pytest.mark.parametrize(
    ("window", "losses", "k", "min_rise", "rtol", "expected"),
    [
        # a plateau: +6% is 80 spreads above but not 1.5x -> no spike; 3x -> spike; min_rise 0 -> +6% is one
        (PLATEAU, [0.6931 * 1.06, 0.6931 * 3, NAN], 6.0, 0.5, None, [False, True, False]),
        (PLATEAU, [0.6931 * 1.06, 0.6931 * 1.001], 6.0, 0.0, None, [True, False]),
        # heavy tails (log-space spread ~1.1): a batch 2x or 10x the level is noise, 20000x is not
        (HEAVY, [0.1, 0.5, 1000.0], 6.0, 0.5, None, [False, False, True]),
        # signed losses: linear, level 0, spread 1.4826 * 0.2 (threshold 1.78)
        (SIGNED, [1.5, 4.0, -9.0], 6.0, 0.5, None, [False, True, False]),
        # a non-positive loss against a positive window is never a spike
        (PLATEAU, [0.0, -5.0], 6.0, 0.5, None, [False, False]),
        # the rtol rule alone, and both rules off
        (PLATEAU, [0.6931 * 1.06, 0.6931 * 2.5], None, 0.0, 2.0, [False, True]),
        (PLATEAU, [0.6931 * 1.06, 0.6931 * 2.5], None, 0.0, None, [False, False]),
    ],
)
def test_exceeds_noise_matches_the_reference(
    window: list[float],
    losses: list[float],
    k: float | None,
    min_rise: float,
    rtol: float | None,
    expected: list[bool],
) -> None:
    got = exceeds_noise(torch.tensor(losses), torch.tensor(window), k=k, min_rise=min_rise, rtol=rtol)
    assert got.tolist() == expected
    finite = [(x, g) for x, g in zip(losses, expected) if math.isfinite(x)]
    assert _spike_reference(window, [x for x, _ in finite], k, min_rise, rtol) == [g for _, g in finite]


def test_spike_floor_and_robust_level() -> None:
    converged = torch.full((21,), 0.01)  # one hard sample in 32 lifts a batch to 0.15: below the floor 0.35
    spikes = exceeds_noise(torch.tensor([0.15, 1.0]), converged, k=6.0, min_rise=0.5, floor=0.35)
    assert spikes.tolist() == [False, True]
    window = torch.tensor([1.0, 1.1, 0.9, 1.05, 0.95]).log()
    level, spread = robust_scale(window)
    with_outlier = robust_scale(torch.cat([window, torch.tensor([50.0, 1.0]).log()]))
    assert spread.item() == pytest.approx(ROBUST_SIGMA * -math.log(0.95), rel=1e-5)  # MAD: |log 0.95|
    assert with_outlier[0].item() == pytest.approx(level.item())
    assert with_outlier[1].item() < 2 * spread.item()


# losses, norms, spike, loss_mask, weights_norm, expected codes
@pytest.mark.parametrize(
    ("losses", "norms", "spike", "mask", "weights", "expected"),
    [
        ([1.0, 1.1, 0.9], [1.0, 2.0, 3.0], None, None, None, [0, 0, 0]),
        ([NAN, INF, -INF, 1.0], [1.0] * 4, None, None, None, [1, 1, 1, 0]),
        ([1.0, 1.0, 1.0], [NAN, INF, 1.0], None, None, None, [2, 2, 0]),
        # precedence within a step: NaN loss > spike > grad norm
        ([NAN, 9.0, 1.0], [NAN, NAN, NAN], [True, True, False], None, None, [1, 3, 2]),
        # a step without loss: neither NaN nor spike is judged on its placeholder; its norm is
        ([NAN, 9.0, 0.0], [1.0, 1.0, NAN], [False, True, False], [False, False, False], None, [0, 0, 2]),
        # weights: only the last step, only when it has no other cause
        ([1.0, 1.0], [1.0, 1.0], None, None, NAN, [0, 4]),
        ([1.0, NAN], [1.0, 1.0], None, None, INF, [0, 1]),
        ([1.0, 1.0], [1.0, 1.0], None, None, 3.0, [0, 0]),
    ],
)
def test_fault_causes_value_table(
    losses: list[float],
    norms: list[float],
    spike: list[bool] | None,
    mask: list[bool] | None,
    weights: float | None,
    expected: list[int],
) -> None:
    causes = fault_causes(
        torch.tensor(losses),
        torch.tensor(norms),
        spike=None if spike is None else torch.tensor(spike),
        loss_mask=None if mask is None else torch.tensor(mask),
        weights_norm=None if weights is None else torch.tensor(weights),
    )
    assert causes.dtype == torch.int64 and causes.tolist() == expected


@pytest.mark.parametrize(
    ("causes", "record"),
    [([0, 0, 0], [0, 0, 0]), ([0, 3, 0, 1], [2, 3, 1]), ([2], [1, 2, 0]), ([4, 0, 4], [2, 4, 0])],
)
def test_fault_record(causes: list[int], record: list[int]) -> None:
    assert fault_record(torch.tensor(causes)).tolist() == record


@pytest.mark.parametrize(
    ("rows", "chosen"),
    [
        ([(0, 0, 0.0, 0), (0, 0, 0.0, 1)], None),
        ([(1, 9, NAN, 0), (3, 5, 40.0, 1)], (3, 5, 40.0, 1)),  # earliest step first
        # same step: lowest code (the NaN loss is the cause)
        ([(2, 7, NAN, 0), (1, 7, NAN, 1)], (1, 7, NAN, 1)),
        ([(0, 0, 0.0, 0), (2, 4, INF, 2), (2, 4, NAN, 1)], (2, 4, NAN, 1)),  # then lowest rank
    ],
)
def test_choose_event(rows: list[tuple[float, ...]], chosen: tuple[float, ...] | None) -> None:
    assert repr(choose_event(rows)) == repr(chosen)


def test_no_host_sync_in_classification() -> None:
    losses, norms, window = torch.tensor([1.0, NAN, 9.0]), torch.tensor([1.0, 1.0, INF]), torch.tensor(HEAVY)
    with HostSyncCounter() as counter:
        spike = exceeds_noise(losses, window, k=6.0, min_rise=0.5, rtol=2.0)
        causes = fault_causes(losses, norms, spike=spike, loss_mask=torch.ones(3, dtype=torch.bool))
        record = fault_record(causes)
        standard_error(window, torch.full_like(window, 8.0), population=200)
    assert counter.count == 0
    assert record.tolist() == [3, 3, 0]  # all three steps: a spike (1.0 is 25x the level), NaN, spike
    assert CAUSES == {1: "nonfinite_loss", 2: "nonfinite_grad_norm", 3: "loss_spike", 4: "nonfinite_weights"}
