"""speed_tune test models whose step time is known exactly, and :func:`virtual_time`, a clock that advances
only by what the model "sleeps", so speed decisions are asserted deterministically."""

from __future__ import annotations

import sys
import time
from typing import Any

import pytest
import torch

from lightning_recipes.testing import TinyClassifier
from lightning_recipes.tune import speed as _speed_measure

FAST = {"warmup_steps": 1, "measure_steps": 3, "repeats": 1}
COMPUTE_S = 0.001  # what a step "computes" besides its sleeps (keeps every step time above zero)


class VirtualTime:
    """``perf_counter``, ``thread_time`` and ``sleep`` on a clock that only ``sleep`` advances."""

    def __init__(self) -> None:
        self.now = 1000.0

    def perf_counter(self) -> float:
        return self.now

    def thread_time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def virtual_time(monkeypatch: pytest.MonkeyPatch) -> VirtualTime:
    """Make speed_tune's step timer and these models' sleeps use one :class:`VirtualTime` (restored after)."""
    clock = VirtualTime()
    monkeypatch.setattr(_speed_measure, "time", clock)
    monkeypatch.setattr(sys.modules[__name__], "time", clock)
    return clock


class SleepyClassifier(TinyClassifier):
    """A TinyClassifier whose step sleeps ``sleep_a + sleep_b`` (plus :data:`COMPUTE_S`) seconds."""

    def __init__(self) -> None:
        super().__init__()
        self.sleep_a = 0.04  # well above the shared CI machine's per-step timing noise when sleeping for real
        self.sleep_b = 0.04

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        time.sleep(self.sleep_a + self.sleep_b + COMPUTE_S)
        return super().training_step(batch, batch_idx)
