"""One intra-op thread for these tiny models: on a shared 2-core CI machine two OpenMP threads per test
process oversubscribe the cores and a 0.2 s preflight can take 20 s (measured); one thread is also faster
for models this small. Restored after each test."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
