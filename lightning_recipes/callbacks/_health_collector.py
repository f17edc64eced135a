"""HealthMonitor's collection helpers: the forward hooks that measure activations on sampled batches, and
the combination of every rank's gathered numbers into one check's window (:class:`CheckData`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn

from lightning_recipes.callbacks._health_window import CheckData

__all__ = ["combine", "flat_tensors", "leaf_hook", "relu_hook", "saturation_hook"]


def leaf_hook(store: dict[int, Tensor], i: int) -> Callable[..., None]:
    """A forward hook adding leaf module ``i``'s count of non-finite outputs to ``store[i]`` (no sync)."""

    def hook(module: nn.Module, args: Any, output: Any) -> None:
        tensors = [output] if isinstance(output, Tensor) else [o for o in flat_tensors(output)]
        for out in tensors:
            if out.is_floating_point() or out.is_complex():
                bad = (~torch.isfinite(out.detach())).sum()
                previous = store.get(i)
                store[i] = bad if previous is None else previous + bad

    return hook


def relu_hook(store: dict[int, Tensor], i: int) -> Callable[..., None]:
    """A forward hook OR-ing which units of ReLU ``i`` were ever active into ``store[i]`` (no sync)."""

    def hook(module: nn.Module, args: Any, output: Any) -> None:
        if not isinstance(output, Tensor) or output.ndim < 2:
            return
        out = output.detach()
        unit_dim = 1 if out.ndim in (4, 5) else out.ndim - 1
        alive = (out > 0).movedim(unit_dim, -1).reshape(-1, out.shape[unit_dim]).any(0)
        previous = store.get(i)
        store[i] = alive if previous is None else previous | alive

    return hook


def saturation_hook(store: dict[int, Tensor], i: int, kind: nn.Module) -> Callable[..., None]:
    """A forward hook appending the saturated fraction of tanh/sigmoid ``i``'s output to ``store[i]``."""
    tanh = isinstance(kind, nn.Tanh)

    def hook(module: nn.Module, args: Any, output: Any) -> None:
        if not isinstance(output, Tensor):
            return
        out = output.detach()
        near = out.abs() > 0.99 if tanh else (out < 0.01) | (out > 0.99)
        fraction = near.float().mean().reshape(1)
        previous = store.get(i)
        store[i] = fraction if previous is None else torch.cat([previous, fraction])

    return hook


def combine(
    rows: list[list[float]],
    layout: dict[str, slice],
    step: int,
    epoch: int,
    groups: tuple[list[str], list[int]],
    layers: tuple[list[str], list[str], list[str]],
) -> CheckData:
    """Every rank's packed vector (``rows``, in ``layout``) combined into one check's :class:`CheckData`.

    ``groups``: the parameter groups' names and sizes; ``layers``: the names of the ReLU, saturating and
    leaf modules, in hook order. Host floats only, identical on every rank.
    """
    group_names, group_numel = groups
    relu, saturating, leaves = layers

    def column(name: str) -> list[list[float]]:
        return [row[layout[name]] for row in rows]

    losses = column("loss")
    total, count = sum(r[0] for r in losses), sum(r[1] for r in losses)
    data = CheckData(step=step, epoch=epoch)
    data.loss_mean = total / count if count else math.nan
    data.loss_nonfinite = int(sum(r[2] for r in losses))
    if any(r[0] for r in column("grad_sampled")):
        grad = [max(values) for values in zip(*column("grad"))]
        param = [max(values) for values in zip(*column("param"))]
        update = [max(values) for values in zip(*column("update"))]
        data.grad_sampled = True
        data.grad_total = math.sqrt(sum(grad)) if all(math.isfinite(g) for g in grad) else math.nan
        for g, name in enumerate(group_names):
            data.group_grad_rms[name] = math.sqrt(grad[g] / max(group_numel[g], 1))
            if param[g] > 0 and math.isfinite(update[g]):
                data.update_ratio[name] = math.sqrt(update[g] / param[g])
    if any(r[0] for r in column("act_sampled")):
        for name, values in zip(relu, zip(*column("dead"))):
            measured = [v for v in values if v >= 0]
            if measured:
                data.dead[name] = min(measured)
        for name, values in zip(saturating, zip(*column("saturated"))):
            measured = [v for v in values if v >= 0]
            if measured:
                data.saturated[name] = sum(measured) / len(measured)
        for name, values in zip(leaves, zip(*column("nonfinite"))):
            if sum(values) > 0:
                data.nonfinite_modules.append(name or "<root>")
    waits = [r[0] for r in column("wait") if r[0] >= 0]
    data.wait_fraction = max(waits) if waits else None
    vals = column("validations")
    for k in range(len(vals[0]) // 3):
        epoch = int(vals[0][3 * k])
        val = sum(v[3 * k + 1] for v in vals) / len(vals)
        train = sum(v[3 * k + 2] for v in vals) / len(vals)
        data.validations.append((epoch, val, train, math.nan, 0))
    return data


def flat_tensors(output: Any) -> list[Tensor]:
    """Every tensor in a nested output (lists, tuples, dicts)."""
    if isinstance(output, Tensor):
        return [output]
    if isinstance(output, (list, tuple)):
        return [t for item in output for t in flat_tensors(item)]
    if isinstance(output, dict):
        return [t for item in output.values() for t in flat_tensors(item)]
    return []
