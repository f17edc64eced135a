"""StabilityGuard's fault classification: pure tensor functions, on the device, no host sync."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

__all__ = ["CAUSES", "CAUSE_CODES", "choose_event", "fault_causes", "fault_record", "spike_mask"]

#: Fault codes. A step with several faults gets one, first in this order: non-finite loss (1), loss spike (3),
#: non-finite gradient norm (2), non-finite weights (4).
CAUSES = {1: "nonfinite_loss", 2: "nonfinite_grad_norm", 3: "loss_spike", 4: "nonfinite_weights"}
CAUSE_CODES = {name: code for code, name in CAUSES.items()}


def spike_mask(
    losses: Tensor,
    window: Tensor,
    *,
    spike_k: float | None,
    spike_rtol: float | None,
    spike_warmup_steps: int,
) -> Tensor | None:
    """Which ``losses`` are spikes against the running ``window`` of good losses; ``None`` when not judged.

    A loss is a spike when it exceeds ``mean + spike_k * std`` (population std) or ``spike_rtol * mean`` of
    ``window``. Not judged (``None``) when both rules are off or ``window`` holds fewer than
    ``max(spike_warmup_steps, 1)`` losses (a shape test, no sync).

    Example:
        >>> window = torch.tensor([1.0, 1.2, 0.8, 1.0])  # mean 1, std 0.1414
        >>> losses = torch.tensor([1.2, 1.9, 2.5])
        >>> spike_mask(losses, window, spike_k=6.0, spike_rtol=2.0, spike_warmup_steps=4)
        tensor([False,  True,  True])
        >>> spike_mask(losses, window, spike_k=6.0, spike_rtol=None, spike_warmup_steps=5) is None
        True
    """
    if spike_k is None and spike_rtol is None:
        return None
    if window.numel() < max(spike_warmup_steps, 1):
        return None
    mean = window.mean()
    spike = torch.zeros_like(losses, dtype=torch.bool)
    if spike_k is not None:
        spike |= losses > mean + spike_k * window.std(correction=0)
    if spike_rtol is not None:
        spike |= losses > spike_rtol * mean
    return spike


def fault_causes(
    losses: Tensor,
    norms: Tensor,
    window: Tensor,
    *,
    spike_k: float | None = 6.0,
    spike_rtol: float | None = None,
    spike_warmup_steps: int = 20,
    loss_mask: Tensor | None = None,
    weights_norm: Tensor | None = None,
    spike: Tensor | None = None,
) -> Tensor:
    """The fault code of each of ``n`` steps (``0``: good; codes in :data:`CAUSES`), as an int64 tensor.

    Tensors in, tensor out, on their device, no host sync. Per step, in order of precedence:

    1. ``1`` if its loss is NaN or infinite;
    2. ``3`` if its loss is a spike against ``window`` (:func:`spike_mask`);
    3. ``2`` if its gradient norm is NaN or infinite;
    4. ``4`` for the last step only, if ``weights_norm`` is given and not finite (weights poisoned by an
       update that no loss or norm has shown yet).

    Args:
        losses: Loss of each step, shape ``(n,)`` (any value where ``loss_mask`` is False).
        norms: Total gradient norm of each step, shape ``(n,)`` (``0`` where a step has none).
        window: Recent good losses, the spike statistics.
        spike_k: Spike threshold in standard deviations above the window mean; ``None``: off.
        spike_rtol: Spike threshold as a multiple of the window mean; ``None``: off.
        spike_warmup_steps: Window size needed before spikes are judged.
        loss_mask: Which steps have a loss (bool, shape ``(n,)``); ``None``: all.
        weights_norm: Norm of the weights at the end of the last step, or ``None`` not to check them.
        spike: Which steps are spikes, decided by the caller (bool, shape ``(n,)``; ``StabilityGuard`` passes
            its noise model's verdict, ``callbacks/_loss_noise.py``); replaces ``spike_k`` / ``spike_rtol`` /
            ``spike_warmup_steps``. ``None``: :func:`spike_mask`.

    Example:
        >>> nan, inf = float("nan"), float("inf")
        >>> window = torch.ones(4)
        >>> fault_causes(torch.tensor([1.0, nan, 9.0, 1.0, 9.0]), torch.tensor([1.0, 1.0, 1.0, inf, nan]),
        ...              window, spike_k=3.0, spike_warmup_steps=4)
        tensor([0, 1, 3, 2, 3])
        >>> fault_causes(torch.tensor([1.0, 1.0]), torch.zeros(2), window, weights_norm=torch.tensor(nan))
        tensor([0, 4])
    """
    causes = torch.zeros(losses.shape, dtype=torch.int64, device=losses.device)
    bad_loss = ~torch.isfinite(losses)
    if loss_mask is not None:
        bad_loss &= loss_mask
    causes = torch.where(bad_loss, 1, causes)
    if spike is None:
        spike = spike_mask(
            losses, window, spike_k=spike_k, spike_rtol=spike_rtol, spike_warmup_steps=spike_warmup_steps
        )
    if spike is not None:
        if loss_mask is not None:
            spike = spike & loss_mask
        causes = torch.where((causes == 0) & spike, 3, causes)
    causes = torch.where((causes == 0) & ~torch.isfinite(norms), 2, causes)
    if weights_norm is not None:
        last_bad = (causes[-1:] == 0) & ~torch.isfinite(weights_norm.reshape(1))
        causes = torch.cat([causes[:-1], torch.where(last_bad, 4, causes[-1:])])
    return causes


def fault_record(causes: Tensor) -> Tensor:
    """``[number of faulty steps, code of the first, index of the first]`` (index 0 when none), on the device.

    Built without indexing by a tensor value (``causes[first]`` would sync), so that the one host copy of the
    three integers is the check's only sync.

    Example:
        >>> fault_record(torch.tensor([0, 0, 2, 1])), fault_record(torch.tensor([0, 0]))
        (tensor([2, 2, 2]), tensor([0, 0, 0]))
    """
    first = torch.argmax((causes > 0).to(torch.uint8)).reshape(1)
    return torch.cat([(causes > 0).sum().reshape(1), causes.gather(0, first), first])


def choose_event(rows: Sequence[Sequence[float]]) -> Sequence[float] | None:
    """Among every rank's first fault ``(code, step, value, rank)`` (code 0: none), the one all ranks act on.

    The earliest step wins, then the lowest code (a NaN loss on one rank makes every rank's all-reduced
    gradient NaN: the loss is the root cause), then the lowest rank. ``None`` when no rank saw a fault.

    Example:
        >>> choose_event([(2, 7, float("nan"), 0), (1, 7, float("nan"), 1), (3, 5, 40.0, 2), (0, 0, 0.0, 3)])
        (3, 5, 40.0, 2)
        >>> choose_event([(0, 0, 0.0, 0)]) is None
        True
    """
    candidates = [row for row in rows if row[0] > 0]
    if not candidates:
        return None
    return min(candidates, key=lambda row: (row[1], row[0], row[3]))
