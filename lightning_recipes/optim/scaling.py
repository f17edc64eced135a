"""Scale a learning rate tuned at one batch size to another (linear or square-root rule)."""

from __future__ import annotations

import math
from typing import Literal

from lightning_recipes._validation import check_positive

__all__ = ["scale_lr"]


def scale_lr(
    base_lr: float, base_batch_size: int, global_batch_size: int, rule: Literal["linear", "sqrt"] = "linear"
) -> float:
    """The LR for ``global_batch_size`` given one tuned at ``base_batch_size``: ``"linear"`` (Goyal et al.
    2017) ``lr * B / B0`` or ``"sqrt"`` (Malladi et al. 2022, Adam-type) ``lr * sqrt(B / B0)``.

    Example:
        >>> scale_lr(1e-3, 256, 1024), scale_lr(1e-3, 256, 1024, rule="sqrt")
        (0.004, 0.002)
    """
    check_positive("base_lr", base_lr)
    for name, value in (("base_batch_size", base_batch_size), ("global_batch_size", global_batch_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"`{name}` must be an int >= 1, got {value!r}.")
    if rule == "linear":
        return base_lr * global_batch_size / base_batch_size
    if rule == "sqrt":
        return base_lr * math.sqrt(global_batch_size / base_batch_size)
    raise ValueError(f"`rule` must be 'linear' or 'sqrt', got {rule!r}.")
