"""The scale of regression targets against the scale of the model's output at init, and whether the output
passes through a learned scale (a parameter that can stretch it to the targets' scale).

Example:
    >>> import torch
    >>> stats = scale_of(torch.tensor([1000.0, 2000.0, 3000.0]))
    >>> stats.mean, stats.std, stats.scale
    (2000.0, 1000.0, 2000.0)
    >>> head = torch.nn.Parameter(torch.ones(()))
    >>> learned_scale(torch.randn(4, 1) * head)
    'the output is multiplied by a learned scalar parameter'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

__all__ = ["ScaleStats", "learned_scale", "scale_of"]

_PASS_THROUGH = frozenset(
    {
        "ViewBackward0",
        "UnsafeViewBackward0",
        "ReshapeAliasBackward0",
        "SqueezeBackward0",
        "SqueezeBackward1",
        "SqueezeBackward2",
        "UnsqueezeBackward0",
        "ExpandBackward0",
        "CloneBackward0",
        "ToCopyBackward0",
        "ExpBackward0",
        "SoftplusBackward0",
        "AbsBackward0",
    }
)


@dataclass(frozen=True)
class ScaleStats:
    """``mean``, ``std`` and ``scale = max(|mean|, std)`` of a tensor's values (what a head must reach)."""

    mean: float
    std: float

    @property
    def scale(self) -> float:
        return max(abs(self.mean), self.std)

    def __str__(self) -> str:
        return f"mean {self.mean:.4g}, std {self.std:.4g}"


def scale_of(values: Tensor) -> ScaleStats:
    """The :class:`ScaleStats` of ``values`` (in float64)."""
    flat = values.detach().double().reshape(-1)
    std = flat.std() if flat.numel() > 1 else torch.zeros((), dtype=torch.float64)
    mean, spread = torch.stack([flat.mean(), std]).tolist()  # sync: once
    return ScaleStats(mean, spread)


def learned_scale(output: Tensor) -> str | None:
    """How ``output`` is stretched by a learned parameter, read from the autograd graph, or ``None``.

    Recognised within the last few ops: a multiplication (or an addition after it) by a parameter with at most
    as many values as the output's last dim (a learned scalar or per-output scale), possibly through
    ``exp``/``softplus``/``abs`` (a learned log-scale).
    """
    fn: Any = output.grad_fn
    for _ in range(6):
        if fn is None:
            return None
        name = fn.name()
        if name in _PASS_THROUGH:
            fn = fn.next_functions[0][0]
            continue
        if name == "MulBackward0":
            width = output.shape[-1] if output.ndim else 1
            for upstream, _ in fn.next_functions:
                if _small_parameter(upstream, width):
                    return "the output is multiplied by a learned scalar parameter"
        if name in ("MulBackward0", "AddBackward0", "SubBackward0"):
            fn = next((f for f, _ in fn.next_functions if f is not None and not _is_leaf(f)), None)
            continue
        return None
    return None


def _is_leaf(fn: Any) -> bool:
    return fn.name() == "torch::autograd::AccumulateGrad"


def _small_parameter(fn: Any, width: int) -> bool:
    for _ in range(4):
        if fn is None:
            return False
        if _is_leaf(fn):
            variable = fn.variable
            return variable.numel() <= max(width, 1)
        if fn.name() not in _PASS_THROUGH:
            return False
        fn = fn.next_functions[0][0]
    return False
