"""``loss_of``: the loss in what ``training_step`` returned, as the batch-end hooks receive it."""

from __future__ import annotations

from typing import Any

from torch import Tensor

__all__ = ["loss_of"]


def loss_of(outputs: Any) -> Tensor | None:
    """The detached loss of a ``training_step`` output (a tensor, or a dict with ``"loss"``), else ``None``.

    Example:
        >>> import torch
        >>> loss_of({"loss": torch.tensor(2.0, requires_grad=True)}).requires_grad
        False
        >>> loss_of(None) is None
        True
    """
    if isinstance(outputs, Tensor):
        return outputs.detach()
    if isinstance(outputs, dict) and isinstance(outputs.get("loss"), Tensor):
        return outputs["loss"].detach()
    return None
