"""Batch plumbing of ``target_leakage``: a batch's tensors by key, replacing one, per-sample targets, and
every per-sample tensor flattened to a feature matrix (:class:`FeatureGroup`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import batch_size_of, slice_batch

__all__ = [
    "MAX_FEATURES",
    "FeatureGroup",
    "entries",
    "feature_groups",
    "first_samples",
    "label_of",
    "per_sample_targets",
    "replace_entry",
    "same_tensor",
    "tensor_at",
]

MAX_FEATURES = 1 << 16  # features per batch tensor looked at one by one; larger tensors are not scanned


@dataclass(frozen=True)
class FeatureGroup:
    """One tensor of the batch flattened to features: ``train`` ``[N, D]`` training rows, ``held`` ``[M, D]``
    held-out rows; ``key``/``label`` name the batch entry, ``shape`` is one sample's shape.

    Example:
        >>> import torch
        >>> group = FeatureGroup(None, "batch", True, (2, 3), None, torch.zeros(1, 6), torch.zeros(1, 6))
        >>> group.feature_name(4)
        'inputs[:, 1, 1]'
    """

    key: Any
    label: str
    is_input: bool
    shape: tuple[int, ...]
    first_batch: Any  # the first training batch, for a probe that re-runs the loss on it
    train: Tensor
    held: Tensor

    def feature_name(self, index: int) -> str:
        """``inputs[:, i, j]`` (or ``batch['key'][:, i, j]``) for flat feature ``index``."""
        position = []
        for size in reversed(self.shape):
            position.append(index % size)
            index //= size
        where = ", ".join(str(p) for p in reversed(position)) if position else "0"
        return f"{'inputs' if self.is_input else self.label}[:, {where}]"


def entries(batch: Any) -> list[tuple[Any, str, Tensor]]:
    """``(key, label, tensor)`` for every tensor at the top level of ``batch`` (key ``None``: the batch is a
    tensor).

    Example:
        >>> import torch
        >>> [(k, label) for k, label, _ in entries({"x": torch.zeros(1), "n": 3})]
        [('x', "batch['x']")]
    """
    if isinstance(batch, Tensor):
        return [(None, "batch", batch)]
    if isinstance(batch, Mapping):
        return [(k, f"batch[{k!r}]", v) for k, v in batch.items() if isinstance(v, Tensor)]
    if isinstance(batch, (list, tuple)):
        return [(i, f"batch[{i}]", v) for i, v in enumerate(batch) if isinstance(v, Tensor)]
    return []


def tensor_at(batch: Any, key: Any) -> Tensor | None:
    """The tensor of ``batch`` at ``key`` (``None`` if there is none)."""
    return {k: tensor for k, _, tensor in entries(batch)}.get(key)


def label_of(batch: Any, key: Any) -> str:
    """How a message names the entry at ``key``: ``batch[1]``, ``batch['label']``."""
    return next((label for k, label, _ in entries(batch) if k == key), "the target")


def replace_entry(batch: Any, key: Any, value: Tensor) -> Any:
    """A new batch with entry ``key`` replaced (dict key or tuple/list index).

    Example:
        >>> import torch
        >>> replace_entry((torch.zeros(1), torch.zeros(1)), 1, torch.ones(1))[1].tolist()
        [1.0]
    """
    if isinstance(batch, Tensor):
        return value
    if isinstance(batch, Mapping):
        changed: Any = dict(batch)
        changed[key] = value
        return changed
    items = list(batch)
    items[key] = value
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*items)
    return tuple(items) if isinstance(batch, tuple) else items


def same_tensor(a: Tensor, b: Tensor) -> bool:
    """Whether two batch entries are one tensor (or views of one storage): a target read from the input."""
    if a is b:
        return True
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # tensors without storage (meta, some subclasses)
        return False


def first_samples(context: CheckContext, batch: Any, count: int) -> Any:
    """The first ``count`` samples of ``batch`` (the whole batch if it is no larger or has no size)."""
    size = batch_size_of(batch, context.input_key)
    return batch if size is None or size <= count else slice_batch(batch, count, size)


def per_sample_targets(context: CheckContext, batches: list[Any]) -> Tensor | None:
    """The targets of ``batches`` as one ``[N]`` tensor, or ``None`` unless every batch has one real value
    per sample (``[B]`` or ``[B, 1]``)."""
    values = []
    for batch in batches:
        _, targets = context.split(batch)
        if targets is None or targets.ndim == 0 or targets.is_complex():
            return None
        if targets.ndim == 2 and targets.shape[1] == 1:
            targets = targets[:, 0]
        if targets.ndim != 1:
            return None
        values.append(targets.detach())
    return torch.cat(values) if values else None


def feature_groups(context: CheckContext, train: list[Any], held_out: list[Any]) -> list[FeatureGroup]:
    """The input and every other per-sample tensor of the batch (not the target), as feature matrices.
    Tensors over ``MAX_FEATURES`` features per sample, or missing or reshaped in some batch, are left out."""
    inputs, targets = context.split(train[0])
    size = len(targets) if targets is not None and targets.ndim > 0 else 0
    groups = []
    for key, label, tensor in entries(train[0]):
        if tensor is targets or tensor.ndim == 0 or tensor.shape[0] != size or tensor.is_complex():
            continue
        shape = tuple(tensor.shape[1:])
        if math.prod(shape) > MAX_FEATURES:
            continue
        train_rows = _rows(train, key, shape)
        held_rows = None if train_rows is None else _rows(held_out, key, shape)
        if train_rows is not None and held_rows is not None:
            groups.append(FeatureGroup(key, label, tensor is inputs, shape, train[0], train_rows, held_rows))
    return groups


def _rows(batches: list[Any], key: Any, shape: tuple[int, ...]) -> Tensor | None:
    """Entry ``key`` of every batch as ``[samples, features]`` floats, or ``None`` if a batch lacks it or
    holds it in another shape."""
    parts = []
    for batch in batches:
        value = tensor_at(batch, key)
        if value is None or tuple(value.shape[1:]) != shape:
            return None
        parts.append(value.detach().reshape(len(value), -1).float())
    return torch.cat(parts)
