"""``loss_of``: the loss in what ``training_step`` returned, for every reader of a step's output."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from torch import Tensor

__all__ = ["loss_of"]


def loss_of(outputs: Any) -> Tensor | None:
    """The loss tensor (still in its graph) of a ``training_step`` output: a tensor, or a mapping's tensor
    ``"loss"``; ``None`` for anything else.

    Example:
        >>> import torch
        >>> loss_of({"loss": torch.tensor(2.0, requires_grad=True)}).requires_grad
        True
        >>> loss_of(torch.tensor(1.0)).item(), loss_of(None), loss_of({"logits": torch.zeros(2)})
        (1.0, None, None)
    """
    if isinstance(outputs, Tensor):
        return outputs
    if isinstance(outputs, Mapping) and isinstance(outputs.get("loss"), Tensor):
        return outputs["loss"]
    return None
