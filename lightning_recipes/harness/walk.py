"""The one walk over a nested batch (mappings by their items, lists and (named) tuples in order, dataclasses
by their fields; anything else is a leaf), so that every part agrees on what a batch contains."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from torch import Tensor

__all__ = ["batch_entries", "batch_keys", "children", "map_tensors", "tensors_of"]


def children(node: Any) -> list[tuple[Any, Any]] | None:
    """``(key, child)`` of a container (mapping key, sequence index, dataclass field); ``None`` for a leaf."""
    if isinstance(node, Tensor):
        return None
    if isinstance(node, Mapping):
        return list(node.items())
    if isinstance(node, (list, tuple)):
        return list(enumerate(node))
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        return [(field.name, getattr(node, field.name)) for field in dataclasses.fields(node)]
    return None


def tensors_of(batch: Any) -> list[Tensor]:
    """Every tensor in a (nested) batch, in order.

    Example:
        >>> import torch
        >>> batch = {"x": torch.zeros(4, 2), "meta": ["a", (torch.ones(4), 3)]}
        >>> [tuple(t.shape) for t in tensors_of(batch)], batch_keys(batch)
        ([(4, 2), (4,)], ['x', 'meta'])
    """
    if isinstance(batch, Tensor):
        return [batch]
    items = children(batch)
    return [] if items is None else [t for _, value in items for t in tensors_of(value)]


def map_tensors(batch: Any, fn: Callable[[Tensor], Tensor]) -> Any:
    """The batch rebuilt with ``fn`` applied to every tensor, the input unmodified: a mapping as a ``dict``, a
    (named) tuple or list as its own type, a dataclass by ``dataclasses.replace`` (else as it was).

    Example:
        >>> import torch
        >>> halved = map_tensors({"x": torch.zeros(4, 2), "meta": ["a", 3]}, lambda t: t[:2])
        >>> tuple(halved["x"].shape), halved["meta"]
        ((2, 2), ['a', 3])
    """
    if isinstance(batch, Tensor):
        return fn(batch)
    if isinstance(batch, Mapping):
        return {key: map_tensors(value, fn) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*(map_tensors(value, fn) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(map_tensors(value, fn) for value in batch)
    if dataclasses.is_dataclass(batch) and not isinstance(batch, type):
        changed = {
            f.name: map_tensors(getattr(batch, f.name), fn) for f in dataclasses.fields(batch) if f.init
        }
        try:
            return dataclasses.replace(batch, **changed)
        except (TypeError, ValueError):
            return batch
    return batch


def batch_entries(batch: Any) -> list[tuple[int | str | None, Tensor]]:
    """``(key, tensor)`` for every tensor of a batch, keyed by the top-level entry it sits in (what
    ``batch[key]`` reads: a mapping's key, a sequence's index; ``None``: a bare tensor)."""
    if isinstance(batch, Tensor):
        return [(None, batch)]
    if not isinstance(batch, (Mapping, list, tuple)):
        return []
    items = children(batch) or []
    return [(key, tensor) for key, value in items for tensor in tensors_of(value)]


def batch_keys(batch: Any) -> list[int | str | None]:
    """The keys (indices) of a batch's tensor entries, in order; ``[None]`` for a bare tensor."""
    return list(dict.fromkeys(key for key, _ in batch_entries(batch)))
