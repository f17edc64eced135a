"""Every cross-rank collective helper, once (default process group); each is a no-op (or a local reshape)
on a single process."""

from __future__ import annotations

import atexit
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import Tensor

if TYPE_CHECKING:
    import lightning.pytorch as pl

__all__ = [
    "all_gather_stacked",
    "all_reduce_mean_",
    "all_reduce_sum_",
    "destroy_process_group_at_exit",
    "gather_rows",
    "is_distributed",
]

_EXIT_REGISTERED = False


def is_distributed() -> bool:
    """Whether a default process group is up."""
    return torch.distributed.is_available() and torch.distributed.is_initialized()


def destroy_process_group_at_exit() -> None:
    """Destroy the default process group at exit (registered once per process): a ``ddp_spawn`` worker
    leaving with gloo's group alive may abort."""
    global _EXIT_REGISTERED
    if not _EXIT_REGISTERED:
        atexit.register(_destroy_default_process_group)
        _EXIT_REGISTERED = True


def _destroy_default_process_group() -> None:
    if is_distributed():
        torch.distributed.destroy_process_group()


def all_reduce_sum_(trainer: pl.Trainer, tensor: Tensor) -> Tensor:
    """All-reduce (sum) ``tensor`` in place on the device: one collective, no barrier; returns it.

    Example:
        >>> from lightning_recipes.testing import fast_trainer
        >>> all_reduce_sum_(fast_trainer(), torch.tensor([2]))  # one process: unchanged
        tensor([2])
    """
    if trainer.world_size > 1 and is_distributed():
        torch.distributed.all_reduce(tensor, op=torch.distributed.ReduceOp.SUM)
    return tensor


def gather_rows(trainer: pl.Trainer, row: Sequence[float]) -> list[list[float]]:
    """Every rank's ``row`` of floats, as host lists (one all-gather, then a host copy: a sync).

    Example:
        >>> from lightning_recipes.testing import fast_trainer
        >>> gather_rows(fast_trainer(), [1.0, 2.5])
        [[1.0, 2.5]]
    """
    device = trainer.strategy.root_device
    dtype = torch.float32 if device.type == "mps" else torch.float64
    mine = torch.tensor(list(row), dtype=dtype, device=device)
    return trainer.strategy.all_gather(mine).reshape(-1, len(row)).cpu().tolist()  # sync: the host copy


def all_gather_stacked(trainer: pl.Trainer, tensor: Tensor) -> Tensor:
    """Every rank's ``tensor`` (same shape on all) stacked, ``[world_size, *shape]``: one all-gather.

    Example:
        >>> from lightning_recipes.testing import fast_trainer
        >>> all_gather_stacked(fast_trainer(), torch.tensor([1.0, 2.0]))
        tensor([[1., 2.]])
    """
    if trainer.world_size > 1 and is_distributed():
        out = [torch.empty_like(tensor) for _ in range(trainer.world_size)]
        torch.distributed.all_gather(out, tensor)
        return torch.stack(out)
    return tensor.unsqueeze(0)


def all_reduce_mean_(tensors: list[Tensor]) -> None:
    """Average ``tensors`` in place across the default process group, in one collective (flattened as fp32).

    Example:
        >>> values = [torch.tensor([1.0, 3.0])]
        >>> all_reduce_mean_(values)  # no process group: unchanged
        >>> values
        [tensor([1., 3.])]
    """
    world = torch.distributed.get_world_size() if is_distributed() else 1
    if world == 1 or not tensors:
        return
    flat = torch.cat([t.reshape(-1).float() for t in tensors])
    torch.distributed.all_reduce(flat)
    flat /= world
    offset = 0
    for t in tensors:
        t.copy_(flat[offset : offset + t.numel()].view_as(t))
        offset += t.numel()
