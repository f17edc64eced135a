"""``jsonable``: a JSON-serialisable copy of a nested value (the one definition, for callbacks and checks)."""

from __future__ import annotations

import dataclasses
import math
from argparse import Namespace
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

__all__ = ["jsonable"]


def jsonable(
    value: Any,
    *,
    nonfinite_as_str: bool = False,
    max_tensor_elements: int | None = 16,
    fallback: Callable[[Any], str] = repr,
) -> Any:
    """A JSON-serialisable copy: dataclasses and mappings to dicts, sequences and tensors to lists (longer
    than ``max_tensor_elements``: described), dtypes, devices, paths as ``str``, classes and functions by
    name, the rest by ``fallback``; ``nonfinite_as_str``: ``"nan"`` / ``"inf"``.

    Example:
        >>> jsonable({"lr": 0.1, "betas": (0.9, 0.99), 3: torch.tensor([1, 2]), "dtype": torch.float16})
        {'lr': 0.1, 'betas': [0.9, 0.99], '3': [1, 2], 'dtype': 'torch.float16'}
        >>> jsonable({"ratio": float("nan"), "ok": [1.0, float("inf")]}, nonfinite_as_str=True)
        {'ratio': 'nan', 'ok': [1.0, 'inf']}
    """

    def convert(item: Any) -> Any:
        if dataclasses.is_dataclass(item) and not isinstance(item, type):
            return {f.name: convert(getattr(item, f.name)) for f in dataclasses.fields(item)}
        if isinstance(item, Namespace):
            item = vars(item)
        if isinstance(item, Mapping):
            return {str(k): convert(v) for k, v in item.items()}
        if isinstance(item, (list, tuple, set, frozenset)):
            return [convert(v) for v in item]
        if isinstance(item, Tensor):
            if max_tensor_elements is not None and item.numel() > max_tensor_elements:
                return f"Tensor(shape={list(item.shape)}, dtype={item.dtype})"
            return convert(item.tolist())
        if isinstance(item, float):
            return str(item) if nonfinite_as_str and not math.isfinite(item) else item
        if item is None or isinstance(item, (bool, int, str)):
            return item
        if isinstance(item, (torch.dtype, torch.device, Path)):
            return str(item)
        if hasattr(item, "__name__"):
            return f"{getattr(item, '__module__', '')}.{item.__name__}".lstrip(".")
        return fallback(item)

    return convert(value)
