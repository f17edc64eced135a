"""A one-process gloo group for tests that shard with FSDP2 in process."""

from collections.abc import Iterator

import pytest
import torch.distributed as dist


@pytest.fixture
def single_process_group() -> Iterator[None]:
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    yield
    dist.destroy_process_group()
