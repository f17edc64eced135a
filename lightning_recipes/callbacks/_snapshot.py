"""CPU copies of nested training state (module, optimizer, scheduler state dicts), for rollback and best weights."""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import Tensor

__all__ = ["copy_to_cpu", "synchronize_if_cuda"]


def copy_to_cpu(obj: Any, reuse: Any = None) -> Any:
    """A deep copy of ``obj`` (nested dicts, lists, tuples) with every tensor copied into CPU memory.

    CUDA tensors are copied into pinned buffers with ``non_blocking=True``: the copy is queued on the current
    stream and the call returns at once. Read the result on the host only after
    :func:`synchronize_if_cuda`; copying it back to the device needs no synchronisation (same stream).
    Tensors in ``reuse`` (an earlier result with the same structure, shapes and dtypes) are overwritten
    instead of allocating new buffers. Non-tensor leaves are deep-copied.

    Example:
        >>> state = {"w": torch.ones(2), "meta": [1, {"lr": 0.1}]}
        >>> snap = copy_to_cpu(state)
        >>> state["w"].add_(1.0)
        tensor([2., 2.])
        >>> snap["w"], snap["meta"]
        (tensor([1., 1.]), [1, {'lr': 0.1}])
        >>> copy_to_cpu(state, reuse=snap)["w"] is snap["w"]
        True
    """
    if isinstance(obj, Tensor):
        source = obj.detach()
        reusable = (
            isinstance(reuse, Tensor)
            and reuse.device.type == "cpu"
            and reuse.shape == source.shape
            and reuse.dtype == source.dtype
            and reuse is not source
        )
        if reusable:
            target = reuse
        else:
            target = torch.empty(
                source.shape, dtype=source.dtype, device="cpu", pin_memory=source.device.type == "cuda"
            )
        target.copy_(source, non_blocking=source.device.type == "cuda")
        return target
    if isinstance(obj, dict):
        old = reuse if isinstance(reuse, dict) else {}
        return type(obj)((key, copy_to_cpu(value, old.get(key))) for key, value in obj.items())
    if isinstance(obj, (list, tuple)):
        old_seq = reuse if isinstance(reuse, (list, tuple)) and len(reuse) == len(obj) else [None] * len(obj)
        items = [copy_to_cpu(value, previous) for value, previous in zip(obj, old_seq)]
        return type(obj)(items) if isinstance(obj, list) else tuple(items)
    return copy.deepcopy(obj)


def synchronize_if_cuda(device: torch.device) -> None:
    """Wait for queued copies on ``device`` (no-op off CUDA). Call before reading pinned snapshots on the host."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # sync: only on rollback / restore paths
