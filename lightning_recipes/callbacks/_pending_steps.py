"""StabilityGuard's not-yet-checked steps ``(step, loss, grad norm)``: stacked for a check, moved to the
device, and written to / read from the checkpoint as plain floats."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

__all__ = [
    "Pending",
    "offending_value",
    "pending_from_plain",
    "pending_to_device",
    "pending_to_plain",
    "stack",
    "step_loss",
]

Pending = list[tuple[int, Tensor | None, Tensor | None]]  # (step, loss, grad norm); None: not measured


def stack(pending: Pending, device: torch.device) -> tuple[Tensor, Tensor, list[bool]]:
    """The pending losses and gradient norms as two float vectors (zeros where missing), and which losses
    exist. No sync.

    Example:
        >>> losses, norms, mask = stack([(0, torch.tensor(2.0), None), (1, None, torch.tensor(3.0))], "cpu")
        >>> losses.tolist(), norms.tolist(), mask
        ([2.0, 0.0], [0.0, 3.0], [True, False])
    """
    zero = torch.zeros((), device=device)
    losses = torch.stack([(zero if loss is None else loss).float() for _, loss, _ in pending])
    norms = torch.stack([(zero if norm is None else norm).float() for _, _, norm in pending])
    return losses, norms, [loss is not None for _, loss, _ in pending]


def offending_value(
    cause: int, index: int, losses: Tensor, norms: Tensor, loss_mask: list[bool], weights_norm: Tensor | None
) -> float:
    """The host value of a fault of ``_faults.CAUSES`` code ``cause`` (fault path only: a sync is free)."""
    if cause in (1, 3) and any(loss_mask):
        return float(losses[index])
    if cause == 2:
        return float(norms[index])
    if cause == 4 and weights_norm is not None:
        return float(weights_norm)
    return 0.0


def pending_to_device(pending: Pending, device: torch.device) -> Pending:
    return [
        (step, None if loss is None else loss.to(device), None if norm is None else norm.to(device))
        for step, loss, norm in pending
    ]


def pending_to_plain(pending: Pending) -> list[tuple[int, float | None, float | None]]:
    """Plain floats for ``state_dict`` (a sync: only when a checkpoint is written)."""
    return [
        (step, None if loss is None else float(loss), None if norm is None else float(norm))
        for step, loss, norm in pending
    ]


def pending_from_plain(plain: list[Any]) -> Pending:
    """The inverse of :func:`pending_to_plain` (CPU fp32 scalars).

    Example:
        >>> pending_from_plain(pending_to_plain([(4, torch.tensor(1.5), None)]))
        [(4, tensor(1.5000), None)]
    """
    return [
        (
            int(step),
            None if loss is None else torch.tensor(loss, dtype=torch.float32),
            None if norm is None else torch.tensor(norm, dtype=torch.float32),
        )
        for step, loss, norm in plain
    ]


def step_loss(micro_losses: list[Tensor]) -> Tensor | None:
    """An optimizer step's loss: its one micro-batch's, or the sum over accumulated ones; ``None``: none.

    Example:
        >>> step_loss([torch.tensor(1.0), torch.tensor(2.0)]), step_loss([])
        (tensor(3.), None)
    """
    if len(micro_losses) == 1:
        return micro_losses[0]
    return torch.stack(micro_losses).sum() if micro_losses else None
