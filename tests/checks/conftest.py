"""One intra-op thread for these tiny models (two oversubscribe a shared 2-core machine); restored after each
test. ``clock``: a virtual clock for the time budget."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes.checks import _budget, _runner
from lightning_recipes.checks import base as _base
from tests.helpers.speed import VirtualTime


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> VirtualTime:
    """The budget's, the check runner's and the test module's ``time``: only ``sleep`` advances it."""
    clock = VirtualTime()
    for module in (_budget, _runner, _base, request.module):
        monkeypatch.setattr(module, "time", clock, raising=False)
    return clock
