"""Copies and comparisons of a module's weights (its ``state_dict``), for tests that prove bitwise equality.

Example:
    >>> import torch
    >>> from tests.helpers.weights import same, weights
    >>> layer = torch.nn.Linear(2, 2)
    >>> same(weights(layer), weights(layer))
    True
"""

from __future__ import annotations

import torch


def weights(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """A detached copy of every entry of ``module.state_dict()``."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    """Whether two state dicts have the same keys and bitwise equal tensors."""
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
