"""Where a batch holds its inputs and targets (the convention: ``docs/guides/harness.md``), and how to rebuild
it with other inputs or fewer samples."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import Tensor

from lightning_recipes.harness.walk import map_tensors, tensors_of

__all__ = [
    "INPUT_KEYS",
    "TARGET_KEYS",
    "Key",
    "batch_size_of",
    "check_key",
    "clone_tensors",
    "entries",
    "input_key_of",
    "is_float",
    "other_rows",
    "replace_entries",
    "replace_inputs",
    "slice_batch",
    "split_batch",
    "target_key_of",
]

INPUT_KEYS = (
    *("x", "input", "inputs", "input_ids", "tokens", "image", "images"),
    *("pixel_values", "input_values", "features", "data"),
)
TARGET_KEYS = ("y", "target", "targets", "label", "labels", "next_tokens")

Key = int | str | None


def check_key(name: str, value: Any) -> None:
    """``ValueError`` unless ``value`` is a batch index (``int``, not ``bool``), a key (``str``) or ``None``.

    Example:
        >>> check_key("target_key", -0.5)
        Traceback (most recent call last):
        ...
        ValueError: `target_key` must be an int index, a str key or None, got -0.5.
    """
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, str))):
        raise ValueError(f"`{name}` must be an int index, a str key or None, got {value!r}.")


def input_key_of(batch: Any, key: Key) -> Key:
    """The input's key or index in ``batch``: ``key`` when given, else by the convention above."""
    return _conventional_key(batch, key, INPUT_KEYS, target=False)


def target_key_of(batch: Any, key: Key) -> Key:
    """The target's key or index in ``batch``: ``key`` when given, else by the convention above."""
    return _conventional_key(batch, key, TARGET_KEYS, target=True)


def _conventional_key(batch: Any, key: Key, names: tuple[str, ...], target: bool) -> Key:
    """``key``, else the first of ``names`` in a mapping, else a sequence's first (``target``: last) index."""
    if key is not None:
        return key
    if isinstance(batch, Mapping):
        return next((k for k in names if k in batch), None)
    if isinstance(batch, Sequence) and not isinstance(batch, str) and len(batch) > int(target):
        return len(batch) - 1 if target else 0
    return None


def _get(batch: Any, key: int | str | None) -> Tensor | None:
    if key is None:
        return None
    try:
        value = batch[key]
    except (KeyError, IndexError, TypeError):
        return None
    return value if isinstance(value, Tensor) else None


def split_batch(
    batch: Any, input_key: Key = None, target_key: Key = None
) -> tuple[Tensor | None, Tensor | None]:
    """``(inputs, targets)`` of a batch by the convention above; either is ``None`` when absent.

    Example:
        >>> import torch
        >>> x, y = split_batch((torch.zeros(2, 3), torch.tensor([0, 1])))
        >>> tuple(x.shape), y.tolist(), split_batch({"input_ids": torch.ones(2, 4)})[1]
        ((2, 3), [0, 1], None)
    """
    if isinstance(batch, Tensor):
        return (batch if input_key is None else None), None
    return _get(batch, input_key_of(batch, input_key)), _get(batch, target_key_of(batch, target_key))


def replace_inputs(batch: Any, inputs: Tensor, input_key: Key = None) -> Any:
    """A new batch equal to ``batch`` with its input tensor replaced; the original is not modified.

    Example:
        >>> import torch
        >>> batch = (torch.ones(2, 3), torch.tensor([0, 1]))
        >>> replace_inputs(batch, torch.zeros(2, 3))[0].sum().item(), batch[0].sum().item()
        (0.0, 6.0)
    """
    if isinstance(batch, Tensor):
        return inputs
    key = input_key_of(batch, input_key)
    if key is None:
        raise ValueError("cannot find the input tensor in the batch; pass `input_key`.")
    if isinstance(batch, Mapping):
        new = {**batch, key: inputs}
        return type(batch)(new) if type(batch) is not dict else new  # type: ignore[call-arg]
    items = list(batch)
    items[key] = inputs  # type: ignore[index]
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):  # namedtuple
        return type(batch)(*items)
    return type(batch)(items) if isinstance(batch, tuple) else items


def batch_size_of(batch: Any, input_key: Key = None) -> int | None:
    """The leading dimension of the batch's input tensor, or ``None`` if it has none."""
    inputs, _ = split_batch(batch, input_key)
    return None if inputs is None or inputs.ndim == 0 else int(inputs.shape[0])


def slice_batch(batch: Any, count: int, batch_size: int) -> Any:
    """The first ``count`` samples of a batch whose every tensor has one row per sample (``batch_size``); a
    batch holding another layout (an edge list, a packed sequence's data) is returned whole: cutting only
    its per-sample tensors would break the indices between them.

    Example:
        >>> import torch
        >>> x, y = slice_batch((torch.zeros(8, 3), torch.arange(8)), 2, 8)
        >>> tuple(x.shape), y.tolist()
        ((2, 3), [0, 1])
        >>> nodes, edges = slice_batch((torch.zeros(8, 3), torch.tensor([[0, 7], [7, 0]])), 2, 8)
        >>> tuple(nodes.shape)
        (8, 3)
    """
    if not one_row_per_sample(batch, batch_size):
        return batch
    return map_tensors(batch, lambda tensor: tensor[:count] if tensor.ndim else tensor)


def one_row_per_sample(batch: Any, batch_size: int) -> bool:
    """Whether every tensor of ``batch`` leads with ``batch_size`` rows (not an edge list, packed data)."""
    return all(tensor.ndim == 0 or tensor.shape[0] == batch_size for tensor in tensors_of(batch))


def clone_tensors(batch: Any) -> Any:
    """The batch with every tensor cloned (so a slice no longer keeps its parent's storage alive)."""
    return map_tensors(batch, Tensor.clone)


def is_float(tensor: Tensor) -> bool:
    return torch.is_floating_point(tensor) or torch.is_complex(tensor)


def other_rows(batch: Any, inputs: Tensor | None, targets: Tensor | None) -> Tensor | None:
    """The batch's top-level tensors besides ``inputs`` and ``targets`` with one row per input sample, as
    one float row of values per sample (``None``: none), e.g. a presence mask beside the views it marks."""
    parts = (
        batch.values() if isinstance(batch, Mapping) else batch if isinstance(batch, (list, tuple)) else []
    )
    rows = len(inputs) if inputs is not None and inputs.ndim else -1
    others = [t for t in parts if isinstance(t, Tensor) and t is not inputs and t is not targets]
    others = [t.reshape(rows, -1).float() for t in others if t.ndim and len(t) == rows and t.numel()]
    return torch.cat(others, 1) if others else None


def entries(batch: Any) -> list[tuple[Any, str, Tensor]]:
    """``(key, label, tensor)`` of each top-level tensor of ``batch`` (key ``None``: a tensor batch)."""
    if isinstance(batch, Tensor):
        return [(None, "batch", batch)]
    if isinstance(batch, Mapping):
        return [(k, f"batch[{k!r}]", v) for k, v in batch.items() if isinstance(v, Tensor)]
    if isinstance(batch, (list, tuple)):
        return [(i, f"batch[{i}]", v) for i, v in enumerate(batch) if isinstance(v, Tensor)]
    return []


def replace_entries(batch: Any, changes: dict[Any, Tensor]) -> Any:
    """A new batch with the entries ``changes`` names replaced (key ``None``: the batch is that tensor)."""
    for key, value in changes.items():
        batch = replace_inputs(batch, value, key)
    return batch
