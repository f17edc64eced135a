"""The lowest value a recorded loss call can reach: bounded inputs to a logits loss put a floor under it.

A loss that "trains" but can never get near zero because its input is bounded is a silent bug:
probabilities fed to a logits loss (``cross_entropy(softmax(z), y)``), a sigmoid before
``binary_cross_entropy_with_logits``, logits clamped or squashed by ``tanh``. The bound is read from the
autograd graph (the op that produced the loss's input: ``softmax``, ``sigmoid``, ``tanh``, ``clamp``,
``hardtanh``, through reshapes and a scalar scale), so it is proven, not guessed from values.
The floor is then computed from the loss's formula:

- ``cross_entropy`` over ``C`` classes with label smoothing ``e`` and logits whose spread is at most ``d``
  (``hi - lo``; 1 for probabilities): with ``t = 1 - e + e / C`` the target class's smoothed weight,
  ``floor = min over 0 <= s <= d of  -t s + log(exp(s) + C - 1)`` (the target logit ``s`` above the others,
  all others equal: optimal by symmetry and convexity). Unbounded and ``e = 0`` give 0.
- ``binary_cross_entropy_with_logits`` per element with target ``y`` and logit ``x`` in ``[lo, hi]``:
  ``y softplus(-x) + (1 - y) softplus(x)`` at ``x = clip(logit(y), lo, hi)``, averaged.

Example:
    >>> import torch
    >>> from torch.nn import functional as F
    >>> from lightning_recipes.checks._expected_loss import record_loss_calls
    >>> logits = torch.zeros(8, 10, requires_grad=True)
    >>> with record_loss_calls() as calls:
    ...     loss = F.cross_entropy(logits.softmax(-1), torch.arange(8))
    >>> floor = loss_floor(calls[0])
    >>> round(floor.value, 4), floor.bounded  # ln(e + 9) - 1: probabilities are logits in [0, 1]
    (1.4611, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from lightning_recipes.checks._expected_loss import target_of
from lightning_recipes.harness import LossCall

__all__ = ["LossFloor", "input_bounds", "loss_floor"]

_PASS_THROUGH = {  # ops that keep every value of their input: bounds carry through them
    "ViewBackward0",
    "UnsafeViewBackward0",
    "ReshapeAliasBackward0",
    "TransposeBackward0",
    "TransposeBackward1",
    "PermuteBackward0",
    "SqueezeBackward0",
    "SqueezeBackward1",
    "SqueezeBackward2",
    "UnsqueezeBackward0",
    "CloneBackward0",
    "ToCopyBackward0",
    "SliceBackward0",
    "SelectBackward0",
}


@dataclass(frozen=True)
class Bounds:
    low: float
    high: float
    how: str
    simplex: bool = False


@dataclass(frozen=True)
class LossFloor:
    """``value``: the lowest loss reachable; ``bounded``: a bound on the input (not the loss itself) causes
    it; ``how``: the reason in words."""

    value: float
    bounded: bool
    how: str


def input_bounds(tensor: Tensor) -> Bounds | None:
    """Proven bounds of ``tensor``'s values from the op that produced it, or ``None`` (unbounded/unknown)."""
    fn: Any = tensor.grad_fn
    scale, scaled = 1.0, ""
    for _ in range(16):
        if fn is None:
            return None
        name = fn.name()
        if name in _PASS_THROUGH:
            fn = fn.next_functions[0][0]
            continue
        if name in ("MulBackward0", "DivBackward0") and scale == 1.0:
            try:
                factor = _scalar(getattr(fn, "_saved_other", None))
            except RuntimeError:  # the saved tensors were freed by a backward pass
                return None
            upstream = [f for f, _ in fn.next_functions if f is not None]
            if factor is None or factor == 0 or len(upstream) != 1:
                return None
            scale = factor if name == "MulBackward0" else 1.0 / factor
            scaled = f" x {scale:g}"
            fn = upstream[0]
            continue
        break
    else:
        return None
    bounds = _op_bounds(fn)
    if bounds is None:
        return None
    low, high = sorted((bounds.low * scale, bounds.high * scale))
    return Bounds(low, high, bounds.how + scaled, bounds.simplex and scale == 1.0)


def _op_bounds(fn: Any) -> Bounds | None:
    name = fn.name()
    if name == "SoftmaxBackward0":
        return Bounds(0.0, 1.0, "softmax (probabilities)", simplex=True)
    if name == "SigmoidBackward0":
        return Bounds(0.0, 1.0, "sigmoid (probabilities)")
    if name == "TanhBackward0":
        return Bounds(-1.0, 1.0, "tanh")
    if name == "HardtanhBackward0":
        low, high = _scalar(fn._saved_min_val), _scalar(fn._saved_max_val)
        return None if low is None or high is None else Bounds(low, high, f"hardtanh to [{low:g}, {high:g}]")
    if name in ("ClampBackward0", "ClampBackward1", "ClampMinBackward0", "ClampMaxBackward0"):
        low, high = _scalar(getattr(fn, "_saved_min", None)), _scalar(getattr(fn, "_saved_max", None))
        if low is None and high is None:
            return None
        low_, high_ = -math.inf if low is None else low, math.inf if high is None else high
        return Bounds(low_, high_, f"clamp to [{low_:g}, {high_:g}]")
    return None


def _scalar(value: Any) -> float | None:
    if isinstance(value, Tensor):
        return float(value) if value.numel() == 1 else None  # sync: once, on a saved scalar
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _bounds(call: LossCall) -> Bounds | None:
    return call.inspection if call.inspected else input_bounds(call.output)


def ce_floor(classes: int, smoothing: float, spread: float) -> float:
    """Lowest per-sample cross-entropy with ``classes`` classes, label smoothing and logit ``spread``."""
    top = 1 - smoothing + smoothing / classes
    best = math.inf if smoothing <= 0 else math.log(top * (classes - 1) / (1 - top))
    s = min(best, spread)
    if math.isinf(s):
        return 0.0
    return -top * s + s + math.log1p((classes - 1) * math.exp(-s))  # log(exp(s) + C - 1), stably


def loss_floor(call: LossCall) -> LossFloor | None:
    """The floor of ``call``'s loss (same reduction), or ``None`` when it is 0 or cannot be proven."""
    reduction = call.kwargs.get("reduction", "mean")
    if reduction not in ("mean", "sum") or call.kwargs.get("weight") is not None:
        return None
    if call.function == "cross_entropy" and call.integer_target:
        return _ce(call, reduction)
    if call.function == "binary_cross_entropy_with_logits":
        return _bce_logits(call, reduction)
    return None


def _ce(call: LossCall, reduction: str) -> LossFloor | None:
    classes = call.num_classes
    assert classes is not None
    smoothing = float(call.kwargs.get("label_smoothing") or 0.0)
    bounds = _bounds(call)
    spread = math.inf if bounds is None else bounds.high - bounds.low
    if bounds is not None and bounds.simplex:
        spread = min(spread, 1.0)
    per_sample = ce_floor(classes, smoothing, spread)
    if per_sample <= 0:
        return None
    count = 1
    if reduction == "sum":
        count = int((target_of(call) != call.kwargs.get("ignore_index", -100)).sum())  # sync: once
    if bounds is not None and per_sample > ce_floor(classes, smoothing, math.inf) + 1e-9:
        how = (
            f"cross_entropy reads its input as logits, but the input comes from {bounds.how}: the logits of "
            f"{classes} classes differ by at most {spread:g}, so the loss cannot fall below {per_sample:.4g} "
            "per sample"
        )
        return LossFloor(per_sample * count, True, how)
    return LossFloor(per_sample * count, False, f"label smoothing {smoothing:g} over {classes} classes")


def _bce_logits(call: LossCall, reduction: str) -> LossFloor | None:
    target = target_of(call).detach().double()
    bounds = _bounds(call)
    low, high = (-math.inf, math.inf) if bounds is None else (bounds.low, bounds.high)
    pos_weight = call.kwargs.get("pos_weight")
    weight = 1.0 if pos_weight is None else pos_weight.detach().double()
    ideal = torch.log(weight * target) - torch.log1p(-target)  # logit of the weighted target: the minimiser
    best = ideal.clamp(min=low, max=high)
    best = torch.where(torch.isnan(best), torch.zeros_like(best), best)
    per_element = weight * target * F.softplus(-best) + (1 - target) * F.softplus(best)
    per_element = torch.nan_to_num(per_element, nan=0.0)
    floor = float(per_element.sum() if reduction == "sum" else per_element.mean())  # sync: once
    unbounded_target = target.clamp(1e-12, 1 - 1e-12)
    entropy = -(
        unbounded_target * unbounded_target.log() + (1 - unbounded_target) * (-unbounded_target).log1p()
    )
    entropy_floor = float(entropy.sum() if reduction == "sum" else entropy.mean())  # sync: once
    if floor <= 1e-9:
        return None
    if bounds is not None and floor > entropy_floor + 1e-6 and pos_weight is None:
        how = (
            "binary_cross_entropy_with_logits reads its input as logits, but the input comes from "
            f"{bounds.how}: logits in [{low:g}, {high:g}] keep the loss above {floor:.4g}"
        )
        return LossFloor(floor, True, how)
    if pos_weight is not None:
        return None
    return LossFloor(floor, False, "the soft targets' own entropy")
