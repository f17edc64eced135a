"""Host (CPU RAM) memory that offloading may use, and the check that refuses an offload that cannot fit."""

from __future__ import annotations

import os

from lightning_recipes.strategies._units import GIB

__all__ = ["available_host_memory", "check_host_memory"]


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
    """Refuse an offload whose host-memory need exceeds what the node has, when that is known.

    Args:
        required_bytes: Host bytes the offloaded tensors of all processes on this node need.
        available_bytes: Host bytes available, or ``None`` when unknown (then nothing is checked).
        what: The preset, for the message.

    Raises:
        RuntimeError: When ``required_bytes > available_bytes``; the message names both and the fixes.

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
