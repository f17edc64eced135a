"""mixed_cross_entropy: cross-entropy on class indices or Mixup / CutMix soft targets, label smoothing."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_recipes._validation import check_choice, check_in_range

__all__ = ["mixed_cross_entropy"]


def mixed_cross_entropy(
    logits: Tensor, targets: Tensor, *, label_smoothing: float = 0.0, reduction: str = "mean"
) -> Tensor:
    r"""Cross-entropy against class indices or soft targets (the logits' shape) with label smoothing (``t``
    becomes ``(1 - s) * t + s / C``): one loss for the batches a :class:`~lightning_recipes.mixing.BatchMixer`
    mixed and those it left alone. ``reduction``: ``"mean"``, ``"sum"`` or ``"none"``.

    Example:
        >>> import torch, torch.nn.functional as F
        >>> logits = torch.tensor([[2.0, 0.0, -1.0]])
        >>> hard = mixed_cross_entropy(logits, torch.tensor([0]), label_smoothing=0.1)
        >>> soft = mixed_cross_entropy(logits, torch.tensor([[1.0, 0.0, 0.0]]), label_smoothing=0.1)
        >>> torch.allclose(hard, soft), torch.allclose(hard, F.cross_entropy(logits, torch.tensor([0]),
        ...                                                               label_smoothing=0.1))
        (True, True)
    """
    check_in_range("label_smoothing", label_smoothing, 0.0, 1.0)
    check_choice("reduction", reduction, ("mean", "sum", "none"))
    if not torch.is_floating_point(targets):
        return F.cross_entropy(logits, targets, label_smoothing=label_smoothing, reduction=reduction)
    if targets.shape != logits.shape or logits.dim() != 2:
        raise ValueError(
            f"soft `targets` must have the logits' shape (N, C) = {tuple(logits.shape)}, got "
            f"{tuple(targets.shape)}; pass class indices as an integer tensor."
        )
    num_classes = logits.shape[1]
    if label_smoothing > 0.0:
        targets = targets * (1.0 - label_smoothing) + label_smoothing / num_classes
    losses = -(targets.to(logits.dtype) * F.log_softmax(logits, dim=1)).sum(dim=1)
    return losses if reduction == "none" else getattr(losses, reduction)()
