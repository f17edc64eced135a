"""How a strategy places training memory: which tensors it shards, offloads or gathers (read by the
estimator)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MemoryLayout"]


@dataclass(frozen=True)
class MemoryLayout:
    """Where a strategy keeps parameters, gradients and optimizer state; one per :class:`Preset`.

    Attributes:
        family: ``"native"`` (torch DDP/FSDP: parameters keep their dtype) or ``"deepspeed"`` (16-bit
            parameters + fp32 master weights).
        shard_params, shard_grads, shard_optimizer: Split over the shard group instead of replicated.
        offload_params, offload_grads, offload_optimizer: Kept in host memory.
        gathers: Full parameters of the running units are gathered transiently (root + current + next block).
        keeps_gathered: Every unit's full parameters stay gathered from forward to backward (ZeRO-2-like
            FSDP).
        row_chunks: FSDP2: each tensor is chunked along dim 0 (exact local sizes).
        hybrid: Shard within a node, replicate across nodes.
        activation_checkpointing: The preset checkpoints its blocks by default.

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
