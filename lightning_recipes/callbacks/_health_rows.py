"""HealthMonitor's dead-unit detector for every Linear/Conv layer, with or without an activation module.

A unit ``j`` of a layer followed by a rectifier (``nn.ReLU`` or ``F.relu``, ``relu6``, ``hardtanh``'s floor
...) is dead when no input switches it on: its pre-activation is never positive and its weight row never gets
a gradient. Both are read on the sampled batches of an interval (the last ``activation_samples`` of each): a
forward hook on the layer marks the units whose output was positive for some sample, and the optimizer-step
hook marks the rows whose weight or bias gradient is non-zero. A unit marked by neither is dead. Requiring
both keeps out what only looks dead by one reading: a layer fed only zeros by dead units upstream (its bias
still learns), an output layer whose saturated softmax gives exact zero gradients (its
logits are positive for some samples), and a unit behind GELU/tanh with a negative pre-activation (its
gradient is not zero). Device tensors only; read at the check's one sync.

Example:
    >>> import torch
    >>> from torch import nn
    >>> layer = nn.Linear(4, 3)
    >>> with torch.no_grad():
    ...     _ = layer.bias.copy_(torch.tensor([-50.0, 0.0, 0.0]))  # unit 0 never fires
    >>> rows = RowLiveness([layer])
    >>> handles = rows.attach()
    >>> torch.relu(layer(torch.randn(16, 4))).sum().backward()
    >>> rows.record_gradients()
    >>> for handle in handles:
    ...     handle.remove()
    >>> [round(f, 3) for f in rows.dead_fractions(torch.device("cpu")).tolist()]
    [0.333]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor, nn

__all__ = ["RowLiveness", "sparse_groups"]


def _unit_dim(layer: nn.Module, output: Tensor) -> int:
    return output.ndim - 1 if isinstance(layer, nn.Linear) else 1


class RowLiveness:
    """Which output units of each watched layer were alive on the sampled batches (see the module
    docstring)."""

    def __init__(self, layers: Sequence[nn.Module]) -> None:
        self.layers = list(layers)
        self.alive: dict[int, Tensor] = {}

    def clear(self) -> None:
        self.alive = {}

    def _mark(self, i: int, alive: Tensor) -> None:
        previous = self.alive.get(i)
        self.alive[i] = alive if previous is None or previous.shape != alive.shape else previous | alive

    def attach(self) -> list[Any]:
        """Forward hooks marking units with a positive output; returns their handles."""

        def hook_for(i: int, layer: nn.Module) -> Any:
            def hook(module: nn.Module, args: Any, output: Any) -> None:
                if not isinstance(output, Tensor) or output.ndim < 1 or not output.is_floating_point():
                    return
                dim = _unit_dim(layer, output)
                positive = (output.detach() > 0).movedim(dim, -1).reshape(-1, output.shape[dim]).any(0)
                self._mark(i, positive)

            return hook

        return [layer.register_forward_hook(hook_for(i, layer)) for i, layer in enumerate(self.layers)]

    def record_gradients(self) -> None:
        """Mark the rows whose weight gradient is non-zero (call between backward and the optimizer step)."""
        for i, layer in enumerate(self.layers):
            grad = getattr(getattr(layer, "weight", None), "grad", None)
            if grad is None or grad.ndim < 1 or grad.numel() == 0:
                continue
            rows = grad.detach().flatten(1) if grad.ndim > 1 else grad.detach().reshape(-1, 1)
            alive = rows.abs().amax(1) != 0
            bias = getattr(getattr(layer, "bias", None), "grad", None)
            if bias is not None and bias.shape == alive.shape:
                alive = alive | (bias.detach() != 0)  # a unit fed zeros by dead units upstream still learns
            self._mark(i, alive)

    def dead_fractions(self, device: torch.device) -> Tensor:
        """Per layer, the fraction of units marked by neither reading (``-1`` for a layer not measured)."""
        out = [
            (1.0 - self.alive[i].double().mean()).to(device)
            if i in self.alive
            else torch.full((), -1.0, dtype=torch.float64, device=device)
            for i in range(len(self.layers))
        ]
        return torch.stack(out) if out else torch.zeros(0, dtype=torch.float64, device=device)


def sparse_groups(
    model: nn.Module, params: Sequence[Tensor], group_index: Sequence[int], group_names: Sequence[str]
) -> set[str]:
    """The parameter groups holding an embedding table: only the rows of the tokens in a batch get a gradient,
    so the table's gradient RMS is diluted by its vocabulary and says nothing about vanishing gradients.

    Example:
        >>> model = nn.Sequential(nn.Embedding(100, 8), nn.Linear(8, 2))
        >>> params = list(model.parameters())
        >>> sparse_groups(model, params, [0, 1, 1], ["0", "1"])
        {'0'}
    """
    tables = {
        id(p)
        for m in model.modules()
        if isinstance(m, (nn.Embedding, nn.EmbeddingBag))
        for p in m.parameters()
    }
    return {group_names[g] for p, g in zip(params, group_index) if id(p) in tables}
