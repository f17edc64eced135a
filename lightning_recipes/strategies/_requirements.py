"""Set-up checks shared by the presets: refuse impossible combinations before any work starts."""

from __future__ import annotations

from lightning.pytorch.accelerators import Accelerator, CUDAAccelerator
from torch import nn

from lightning_recipes.strategies._host import available_host_memory, check_host_memory
from lightning_recipes.strategies._units import GIB

__all__ = ["refuse_offload_without_host_memory", "refuse_without_cuda"]


def refuse_without_cuda(accelerator: Accelerator | None, *, preset: str, engine: str) -> None:
    """Raise when a CUDA-only engine (Lightning's FSDP1, DeepSpeed) is set up on another accelerator."""
    if isinstance(accelerator, CUDAAccelerator):
        return
    name = type(accelerator).__name__ if accelerator is not None else "none"
    raise RuntimeError(
        f"`{preset}` runs on {engine}, which needs CUDA GPUs, but the Trainer's accelerator is {name}."
        " Building the preset on a CPU machine is fine (e.g. a login node); running it needs"
        " `Trainer(accelerator='gpu')` on a GPU machine. On CPU use `recipes_fsdp2` (FSDP2, runs on CPU) or"
        " `recipes_ddp`."
    )


def refuse_offload_without_host_memory(
    model: nn.Module,
    *,
    preset: str,
    strategy: str,
    precision: str,
    devices: int,
    num_nodes: int,
    host_memory_gb: float | None,
) -> None:
    """Raise when the offloaded tensors of the ``devices`` processes on this node exceed the host memory.

    The need is :func:`~lightning_recipes.strategies.estimate_memory` ``.host`` (AdamW assumed: the optimizer
    is not known yet at set-up) times the processes per node; the host memory is ``host_memory_gb`` when
    given, else read from the machine (skipped when unknown).
    """
    from lightning_recipes.strategies.memory import estimate_memory

    precision = precision if precision in ("16-mixed", "bf16-mixed", "16-true", "bf16-true") else "32-true"
    estimate = estimate_memory(
        model, strategy=strategy, precision=precision, devices=devices, num_nodes=num_nodes, optimizer="adamw"
    )
    available = int(host_memory_gb * GIB) if host_memory_gb is not None else available_host_memory()
    check_host_memory(estimate.host * devices, available, what=preset)
