"""StabilityGuard's fault classification and spike rule: pure tensor functions on the device, no sync."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from lightning_recipes._stats import robust_scale

__all__ = ["CAUSES", "CAUSE_CODES", "choose_event", "exceeds_noise", "fault_causes", "fault_record"]

#: Fault codes. A step with several faults gets one, first in this order: non-finite loss (1), loss spike (3),
#: non-finite gradient norm (2), non-finite weights (4).
CAUSES = {1: "nonfinite_loss", 2: "nonfinite_grad_norm", 3: "loss_spike", 4: "nonfinite_weights"}
CAUSE_CODES = {name: code for code, name in CAUSES.items()}


def exceeds_noise(
    losses: Tensor,
    window: Tensor,
    *,
    k: float | None,
    min_rise: float = 0.0,
    rtol: float | None = None,
    floor: Tensor | float = 0.0,
) -> Tensor:
    """The spike rule: which ``losses`` exceed the loss noise of ``window`` (recent good losses). No sync.

    Level and spread are :func:`~lightning_recipes._stats.robust_scale` of ``window``, in log space when every
    loss in it is positive (loss noise is multiplicative), linearly otherwise. A loss is a spike when it is
    above the level by more than ``k`` spreads **and** ``min_rise`` (a factor ``1 + min_rise`` in log space,
    ``min_rise * |level|`` linearly), or, with ``rtol``, above ``rtol`` x the level; either way also above
    the linear level by more than ``floor`` (a near-zero loss's noise). ``k=None`` turns the first rule off;
    NaN never exceeds.

    Example:
        >>> window = 0.6931 + 0.001 * torch.randn(20, generator=torch.Generator().manual_seed(0))
        >>> exceeds_noise(torch.tensor([0.6931 * 1.06, 0.6931 * 3]), window, k=6.0, min_rise=0.5)
        tensor([False,  True])
    """
    window, losses = window.float(), losses.float()
    log_space = (window > 0).all()
    tiny = torch.finfo(torch.float32).tiny
    level, spread = robust_scale(torch.where(log_space, window.clamp_min(tiny).log(), window))
    spike = torch.zeros_like(losses, dtype=torch.bool)
    linear_level = torch.where(log_space, level.exp(), level)
    if k is not None:
        values = torch.where(log_space, losses.clamp_min(tiny).log(), losses)
        rise = torch.where(log_space, math.log1p(min_rise), min_rise * level.abs())
        spike |= values > level + torch.maximum(k * spread, rise)
    if rtol is not None:
        spike |= losses > rtol * linear_level
    return spike & (losses - linear_level > floor)


def fault_causes(
    losses: Tensor,
    norms: Tensor,
    *,
    spike: Tensor | None = None,
    loss_mask: Tensor | None = None,
    weights_norm: Tensor | None = None,
) -> Tensor:
    """The fault code of each of ``n`` steps (``0``: good; codes in :data:`CAUSES`), int64, no host sync.

    Per step, first match wins: ``1`` a non-finite loss (where ``loss_mask``, bool ``(n,)``, says it has one);
    ``3`` a spike (``spike``, bool ``(n,)``: :func:`exceeds_noise`'s verdict, ``None``: not judged); ``2`` a
    non-finite gradient norm (``norms``: ``0`` where a step has none); ``4``, last step only, a non-finite
    ``weights_norm`` (weights poisoned by an update no loss or norm has shown yet).

    Example:
        >>> nan, inf = float("nan"), float("inf")
        >>> fault_causes(torch.tensor([1.0, nan, 9.0, 1.0, 9.0]), torch.tensor([1.0, 1.0, 1.0, inf, nan]),
        ...              spike=torch.tensor([False, False, True, False, True]))
        tensor([0, 1, 3, 2, 3])
        >>> fault_causes(torch.tensor([1.0, 1.0]), torch.zeros(2), weights_norm=torch.tensor(nan))
        tensor([0, 4])
    """
    causes = torch.zeros(losses.shape, dtype=torch.int64, device=losses.device)
    bad_loss = ~torch.isfinite(losses)
    if loss_mask is not None:
        bad_loss &= loss_mask
    causes = torch.where(bad_loss, 1, causes)
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
