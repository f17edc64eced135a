"""Set-up checks shared by the presets: CUDA-only engines, and offloads the host memory cannot hold."""

from __future__ import annotations

import os
from typing import Any

from lightning.pytorch.accelerators import Accelerator, CUDAAccelerator

from lightning_recipes.strategies._layout import GIB

__all__ = [
    "available_host_memory",
    "check_host_memory",
    "refuse_offload_without_host_memory",
    "refuse_without_cuda",
]


def available_host_memory() -> int | None:
    """Bytes of host memory available now (Linux ``MemAvailable``), or ``None`` where it is not known.

    Example:
        >>> value = available_host_memory()
        >>> value is None or value > 0
        True
    """
    try:
        with open("/proc/meminfo") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_AVPHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def check_host_memory(required_bytes: int, available_bytes: int | None, *, what: str) -> None:
    """``RuntimeError`` when an offload of ``required_bytes`` exceeds a known ``available_bytes``.

    Example:
        >>> check_host_memory(10 * 1024**3, 64 * 1024**3, what="recipes_fsdp_offload")
        >>> check_host_memory(10 * 1024**3, None, what="recipes_fsdp_offload")
    """
    if available_bytes is None or required_bytes <= available_bytes:
        return
    raise RuntimeError(
        f"`{what}` offloads about {required_bytes / GIB:.2f} GiB to host memory on this node, but only"
        f" {available_bytes / GIB:.2f} GiB is available. Use more nodes, a preset without offload, or pass"
        " `host_memory_gb=` if the figure read from the machine is wrong."
    )


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


def refuse_offload_without_host_memory(strategy: Any, precision: str, layout: str) -> None:
    """Raise when the offloaded bytes of ``strategy``'s processes on this node (AdamW assumed) exceed the
    host memory (``host_memory_gb``, else the machine's)."""
    from lightning_recipes.strategies.memory import estimate_memory

    precision = precision if precision in ("16-mixed", "bf16-mixed", "16-true", "bf16-true") else "32-true"
    devices = strategy.num_processes
    estimate = estimate_memory(
        strategy.lightning_module,
        strategy=layout,
        precision=precision,
        devices=devices,
        num_nodes=strategy.num_nodes,
        optimizer="adamw",
    )
    given = strategy.host_memory_gb
    available = int(given * GIB) if given is not None else available_host_memory()
    check_host_memory(estimate.host * devices, available, what=strategy.preset_name)
