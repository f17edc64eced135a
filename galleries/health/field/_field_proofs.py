"""Small readings of a :class:`PlainRecorder` that the field gallery's proofs assert on (plain arithmetic)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from galleries.health.field._case import PlainRecorder


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def rolling_means(values: Sequence[float], width: int) -> list[float]:
    """Means of every ``width`` consecutive values."""
    return [mean(values[i : i + width]) for i in range(len(values) - width + 1)]


def max_update_ratio(recorder: PlainRecorder, step: int) -> float:
    """The largest ``||dW|| / ||W||`` of any parameter at ``step``."""
    return max(recorder.update_ratios[step].values())


def median_max_update_ratio(recorder: PlainRecorder, start: int = 0, stop: int | None = None) -> float:
    steps = range(start, len(recorder.update_ratios) if stop is None else stop)
    return statistics.median(max_update_ratio(recorder, s) for s in steps)


def update_ratios_of(recorder: PlainRecorder, name: str) -> list[float]:
    return [r[name] for r in recorder.update_ratios if name in r]


def zero_rows_of(recorder: PlainRecorder, name: str) -> list[float]:
    return [r[name] for r in recorder.zero_grad_rows if name in r]


def share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags)


def stuck_high(recorder: PlainRecorder, fraction: float = 0.9, width: int = 10) -> None:
    """The loss never falls, averaged over ``width`` steps, below ``fraction`` of its first value."""
    start = recorder.losses[0]
    low = min(rolling_means([x if math.isfinite(x) else math.inf for x in recorder.losses], width))
    assert low >= fraction * start, f"the loss fell to {low:.3f} from {start:.3f}"


def trains_well(recorder: PlainRecorder, fraction: float) -> None:
    """The last 20 steps' mean loss is below ``fraction`` of the first 20 steps'."""
    first, last = mean(recorder.losses[:20]), mean(recorder.losses[-20:])
    assert all(math.isfinite(x) for x in recorder.losses)
    assert last < fraction * first, f"the loss went from {first:.3f} to {last:.3f}"


def best_validation_late(recorder: PlainRecorder, last_share: float) -> None:
    """The best validation loss is among the last ``last_share`` of the validations."""
    vals = recorder.val_losses
    best = vals.index(min(vals))
    assert best >= len(vals) * (1 - last_share), f"best validation {best} of {len(vals)}: {vals}"
