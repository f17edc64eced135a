"""How a strategy places training memory: which tensors it shards, offloads or gathers (read by the
estimator); bytes per GiB and the compute dtype of a precision."""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = ["GIB", "LAYOUTS", "MemoryLayout", "autocast_dtype"]

#: Bytes in a GiB.
GIB = 1024**3


def autocast_dtype(precision: object) -> torch.dtype | None:
    """The 16-bit compute dtype of a ``*-mixed`` precision, else ``None``.

    Example:
        >>> autocast_dtype("bf16-mixed"), autocast_dtype("32-true")
        (torch.bfloat16, None)
    """
    return {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(str(precision))


@dataclass(frozen=True)
class MemoryLayout:
    """Where a strategy keeps parameters, gradients and optimizer state (one per preset, :data:`LAYOUTS`);
    ``family`` ``"deepspeed"`` keeps 16-bit parameters plus fp32 master weights.

    Example:
        >>> MemoryLayout("native", shard_grads=True).shard_params
        False
    """

    family: str
    shard_params: bool = False
    shard_grads: bool = False
    shard_optimizer: bool = False
    offload_params: bool = False
    offload_grads: bool = False
    offload_optimizer: bool = False
    gathers: bool = False
    keeps_gathered: bool = False
    row_chunks: bool = False
    hybrid: bool = False
    activation_checkpointing: bool = False


_SHARD_ALL = {"shard_params": True, "shard_grads": True, "shard_optimizer": True, "gathers": True}
_OFFLOAD_ALL = {"offload_params": True, "offload_grads": True, "offload_optimizer": True}
_DDP = MemoryLayout("native")

#: The memory layout of every preset, by name (read by the estimator without importing the strategies).
LAYOUTS: dict[str, MemoryLayout] = {
    "ddp": _DDP,
    "ddp_spawn": _DDP,
    "ddp_static_graph": _DDP,
    "fsdp_full_shard": MemoryLayout("native", **_SHARD_ALL, activation_checkpointing=True),
    # sharded like FULL_SHARD, but every unit's unsharded copy is kept from forward until backward
    "fsdp_shard_grad_op": MemoryLayout(
        "native",
        shard_params=True,
        shard_grads=True,
        shard_optimizer=True,
        keeps_gathered=True,
        activation_checkpointing=True,
    ),
    "fsdp_hybrid": MemoryLayout("native", **_SHARD_ALL, hybrid=True, activation_checkpointing=True),
    "fsdp_offload": MemoryLayout("native", **_SHARD_ALL, **_OFFLOAD_ALL, activation_checkpointing=True),
    "fsdp2": MemoryLayout("native", **_SHARD_ALL, row_chunks=True, activation_checkpointing=True),
    "deepspeed_zero1": MemoryLayout("deepspeed", shard_optimizer=True),
    "deepspeed_zero2": MemoryLayout("deepspeed", shard_grads=True, shard_optimizer=True),
    "deepspeed_zero2_offload": MemoryLayout(
        "deepspeed", shard_grads=True, shard_optimizer=True, offload_grads=True, offload_optimizer=True
    ),
    "deepspeed_zero3": MemoryLayout("deepspeed", **_SHARD_ALL),
    "deepspeed_zero3_offload": MemoryLayout("deepspeed", **_SHARD_ALL, **_OFFLOAD_ALL),
}
