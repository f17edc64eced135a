"""One intra-op thread for every test here, and a one-process gloo group for tests that shard in process."""

from collections.abc import Iterator

import pytest
import torch.distributed as dist


@pytest.fixture
def single_process_group() -> Iterator[None]:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()


@pytest.fixture(autouse=True)
def _one_thread(one_torch_thread: None) -> None:
    """A ``ddp_fork`` rank forked from a process with a 2-thread OpenMP team deadlocks in its first op."""
