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
    r"""Cross-entropy against class indices or against soft targets (rows of class probabilities), with
    label smoothing: one loss for the training batches a :class:`~lightning_recipes.mixing.BatchMixer` mixed
    and the validation batches it left alone.

    A target distribution ``t`` becomes ``(1 - s) * t + s / C``; integer targets go to
    ``F.cross_entropy`` (same result; no ``ignore_index``). Smoothing the mixture equals timm's smoothing
    each label before mixing (``docs/guides/mixing.md``). Cost: one ``log_softmax``; no sync.

    Args:
        logits: Unnormalised scores, ``(N, C)`` (or ``(N, C, ...)`` with integer targets).
        targets: Class indices (an integer tensor, ``(N,)`` or ``(N, ...)``) or soft targets of the
            logits' shape ``(N, C)``, each row summing to 1.
        label_smoothing: ``s`` in ``[0, 1]``.
        reduction: ``"mean"`` (over samples), ``"sum"`` or ``"none"`` (one value per sample).

    Returns:
        The loss: a scalar, or ``(N,)`` / ``(N, ...)`` with ``reduction="none"``.

    Raises:
        ValueError: If ``label_smoothing`` is outside ``[0, 1]``, ``reduction`` unknown, or soft targets do
            not have the logits' shape.

    Example:
        >>> import torch, torch.nn.functional as F
        >>> logits = torch.tensor([[2.0, 0.0, -1.0]])
        >>> hard = mixed_cross_entropy(logits, torch.tensor([0]), label_smoothing=0.1)
        >>> soft = mixed_cross_entropy(logits, torch.tensor([[1.0, 0.0, 0.0]]), label_smoothing=0.1)
        >>> torch.allclose(hard, soft), torch.allclose(hard, F.cross_entropy(logits, torch.tensor([0]),
        ...                                                               label_smoothing=0.1))
        (True, True)
        >>> round(mixed_cross_entropy(logits, torch.tensor([[0.5, 0.5, 0.0]])).item(), 4)
        1.1698
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
    if reduction == "mean":
        return losses.mean()
    if reduction == "sum":
        return losses.sum()
    return losses
