"""One intra-op thread for the tuner's small models (as ``tests/checks/conftest.py``): on a shared 2-core
machine two threads per process oversubscribe the cores. Restored after each test."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
