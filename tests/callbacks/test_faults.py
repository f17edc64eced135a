"""StabilityGuard's fault classification as pure functions: value tables, a step-by-step reference."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch

from lightning_recipes.callbacks._faults import CAUSES, choose_event, fault_causes, fault_record, spike_mask
from lightning_recipes.testing import HostSyncCounter

NAN, INF = float("nan"), float("inf")
WINDOW = [1.0, 1.2, 0.8, 1.0]  # mean 1.0, population std sqrt(0.02) = 0.14142


def _reference(
    losses: list[float],
    norms: list[float],
    window: list[float],
    spike_k: float | None,
    spike_rtol: float | None,
    warmup: int,
    mask: list[bool] | None,
    weights_norm: float | None,
) -> list[int]:
    """The rules of the StabilityGuard docstring, one step at a time, in plain Python."""
    judged = (spike_k is not None or spike_rtol is not None) and len(window) >= max(warmup, 1)
    mean = sum(window) / len(window) if window else 0.0
    std = math.sqrt(sum((w - mean) ** 2 for w in window) / len(window)) if window else 0.0
    codes = []
    for i, (loss, norm) in enumerate(zip(losses, norms)):
        has_loss = mask is None or mask[i]
        spike = judged and (
            (spike_k is not None and loss > mean + spike_k * std)
            or (spike_rtol is not None and loss > spike_rtol * mean)
        )
        if has_loss and not math.isfinite(loss):
            codes.append(1)
        elif has_loss and spike:
            codes.append(3)
        elif not math.isfinite(norm):
            codes.append(2)
        else:
            codes.append(0)
    if weights_norm is not None and codes[-1] == 0 and not math.isfinite(weights_norm):
        codes[-1] = 4
    return codes


# losses, norms, window, kwargs, expected codes
TABLE: list[tuple[list[float], list[float], list[float], dict[str, Any], list[int]]] = [
    # clean steps
    ([1.0, 1.1, 0.9], [1.0, 2.0, 3.0], WINDOW, {}, [0, 0, 0]),
    # NaN / +Inf / -Inf loss
    ([NAN, INF, -INF, 1.0], [1.0] * 4, WINDOW, {}, [1, 1, 1, 0]),
    # NaN / Inf gradient norm
    ([1.0, 1.0, 1.0], [NAN, INF, 1.0], WINDOW, {}, [2, 2, 0]),
    # spike_k=6: threshold 1 + 6 * 0.14142 = 1.8485
    ([1.84, 1.85, 5.0], [1.0] * 3, WINDOW, {"spike_k": 6.0, "spike_warmup_steps": 4}, [0, 3, 3]),
    # spike_rtol=1.5 alone: threshold 1.5
    ([1.49, 1.51], [1.0] * 2, WINDOW, {"spike_k": None, "spike_rtol": 1.5, "spike_warmup_steps": 4}, [0, 3]),
    # either rule: k=20 (threshold 3.83) or rtol=1.5
    ([1.6, 4.0], [1.0] * 2, WINDOW, {"spike_k": 20.0, "spike_rtol": 1.5, "spike_warmup_steps": 4}, [3, 3]),
    # warm-up: window of 4 < 5 steps -> no spike judged
    ([9.0], [1.0], WINDOW, {"spike_k": 6.0, "spike_warmup_steps": 5}, [0]),
    # empty window, warm-up 0 -> still needs one good step
    ([9.0], [1.0], [], {"spike_k": 6.0, "spike_warmup_steps": 0}, [0]),
    # both rules off
    ([9.0], [1.0], WINDOW, {"spike_k": None, "spike_rtol": None}, [0]),
    # precedence within a step: NaN loss > spike > grad norm
    ([NAN, 9.0, 1.0], [NAN, NAN, NAN], WINDOW, {"spike_k": 6.0, "spike_warmup_steps": 4}, [1, 3, 2]),
    # a step without loss (mask False): neither NaN nor spike is judged on its placeholder; its norm is
    (
        [NAN, 9.0, 0.0],
        [1.0, 1.0, NAN],
        WINDOW,
        {"loss_mask": [False, False, False], "spike_warmup_steps": 4},
        [0, 0, 2],
    ),
    # weights: only the last step, only when it has no other cause
    ([1.0, 1.0], [1.0, 1.0], WINDOW, {"weights_norm": NAN}, [0, 4]),
    ([1.0, NAN], [1.0, 1.0], WINDOW, {"weights_norm": INF}, [0, 1]),
    ([1.0, 1.0], [1.0, 1.0], WINDOW, {"weights_norm": 3.0}, [0, 0]),
]


@pytest.mark.parametrize(("losses", "norms", "window", "kwargs", "expected"), TABLE)
def test_fault_causes_value_table(
    losses: list[float], norms: list[float], window: list[float], kwargs: dict[str, Any], expected: list[int]
) -> None:
    options = {"spike_k": 6.0, "spike_rtol": None, "spike_warmup_steps": 20, **kwargs}
    mask, weights = options.pop("loss_mask", None), options.pop("weights_norm", None)
    causes = fault_causes(
        torch.tensor(losses),
        torch.tensor(norms),
        torch.tensor(window),
        loss_mask=None if mask is None else torch.tensor(mask),
        weights_norm=None if weights is None else torch.tensor(weights),
        **options,
    )
    assert causes.dtype == torch.int64
    assert causes.tolist() == expected
    reference = _reference(
        losses,
        norms,
        window,
        options["spike_k"],
        options["spike_rtol"],
        options["spike_warmup_steps"],
        mask,
        weights,
    )
    assert reference == expected


def test_fault_causes_against_the_reference_on_random_inputs() -> None:
    generator = torch.Generator().manual_seed(0)
    for _ in range(200):
        n = int(torch.randint(1, 8, (1,), generator=generator))
        losses = torch.rand(n, generator=generator) * 3
        losses[torch.rand(n, generator=generator) < 0.1] = NAN
        norms = torch.rand(n, generator=generator)
        norms[torch.rand(n, generator=generator) < 0.1] = INF
        window = torch.rand(int(torch.randint(0, 6, (1,), generator=generator)), generator=generator) + 0.5
        mask = (torch.rand(n, generator=generator) < 0.8).tolist()
        spike_k = [None, 1.0, 3.0][int(torch.randint(0, 3, (1,), generator=generator))]
        spike_rtol = [None, 1.5][int(torch.randint(0, 2, (1,), generator=generator))]
        causes = fault_causes(
            losses,
            norms,
            window,
            spike_k=spike_k,
            spike_rtol=spike_rtol,
            spike_warmup_steps=3,
            loss_mask=torch.tensor(mask),
        )
        expected = _reference(
            losses.tolist(), norms.tolist(), window.tolist(), spike_k, spike_rtol, 3, mask, None
        )
        assert causes.tolist() == expected


def test_spike_mask_is_none_when_not_judged() -> None:
    window = torch.tensor(WINDOW)
    assert spike_mask(torch.ones(2), window, spike_k=None, spike_rtol=None, spike_warmup_steps=0) is None
    assert spike_mask(torch.ones(2), window, spike_k=6.0, spike_rtol=None, spike_warmup_steps=5) is None
    mask = spike_mask(torch.tensor([1.0, 2.0]), window, spike_k=6.0, spike_rtol=None, spike_warmup_steps=4)
    assert mask is not None and mask.tolist() == [False, True]


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
        # earliest step first
        ([(1, 9, NAN, 0), (3, 5, 40.0, 1)], (3, 5, 40.0, 1)),
        # same step: lowest code (the NaN loss is the root cause of the other rank's NaN gradient)
        ([(2, 7, NAN, 0), (1, 7, NAN, 1)], (1, 7, NAN, 1)),
        # same step and code: lowest rank
        ([(0, 0, 0.0, 0), (2, 4, INF, 2), (2, 4, NAN, 1)], (2, 4, NAN, 1)),
    ],
)
def test_choose_event(rows: list[tuple[float, ...]], chosen: tuple[float, ...] | None) -> None:
    result = choose_event(rows)
    assert repr(result) == repr(chosen)


def test_no_host_sync_in_classification() -> None:
    losses, norms, window = torch.tensor([1.0, NAN, 9.0]), torch.tensor([1.0, 1.0, INF]), torch.ones(30)
    with HostSyncCounter() as counter:
        record = fault_record(
            fault_causes(
                losses,
                norms,
                window,
                spike_k=6.0,
                spike_rtol=2.0,
                loss_mask=torch.tensor([True, True, True]),
                weights_norm=torch.tensor(2.0),
            )
        )
    assert counter.count == 0
    assert record.tolist() == [2, 1, 1]


def test_cause_names() -> None:
    assert CAUSES == {1: "nonfinite_loss", 2: "nonfinite_grad_norm", 3: "loss_spike", 4: "nonfinite_weights"}
