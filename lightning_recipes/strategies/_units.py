"""Units shared by the memory estimator, the recommender, the CLI, the host-memory checks and FSDP2: bytes
per GiB and the compute dtype of a precision."""

from __future__ import annotations

import torch

__all__ = ["GIB", "autocast_dtype"]

#: Bytes in a GiB.
GIB = 1024**3


def autocast_dtype(precision: object) -> torch.dtype | None:
    """The 16-bit compute dtype of a ``*-mixed`` precision, else ``None``.

    Example:
        >>> autocast_dtype("bf16-mixed"), autocast_dtype("32-true")
        (torch.bfloat16, None)
    """
    return {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(str(precision))
