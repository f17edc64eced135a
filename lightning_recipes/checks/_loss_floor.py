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
- ``binary_cross_entropy`` (probabilities) from a squashing op whose input is itself bounded (a double
  sigmoid: ``[0.5, 0.731]``): per element at ``p = clip(y, lo, hi)``; from a softmax across the labels of a
  multi-label row with ``m`` positives: ``m ln m`` per row (``p = 1/m`` on each positive is best).

Each floor is compared with the loss's own minimum (``LossFloor.minimum``: label smoothing's or soft
targets' entropy, else 0); only a bound that lifts the floor above it is ``bounded`` (a bug).

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

__all__ = ["DISTANCE_LOSSES", "LossFloor", "input_bounds", "loss_floor"]

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
    """Proven ``[low, high]`` of a tensor's values; ``simplex``: its values sum to 1 along ``simplex_dim``
    (``None`` when a reshape on the way hides which dim)."""

    low: float
    high: float
    how: str
    simplex: bool = False
    simplex_dim: int | None = None


@dataclass(frozen=True)
class LossFloor:
    """``value``: the lowest loss reachable; ``bounded``: a bound on the input (not the loss itself) causes
    it; ``how``: the reason in words; ``minimum``: the loss's own minimum with an unbounded input (label
    smoothing's or soft targets' entropy, else 0), in the same reduction."""

    value: float
    bounded: bool
    how: str
    minimum: float = 0.0
    fix: str = ""  # what to try, when it differs from the logits advice of the classification losses


def input_bounds(tensor: Tensor) -> Bounds | None:
    """Proven bounds of ``tensor``'s values from the op that produced it, or ``None`` (unbounded/unknown).

    A squashing op (``sigmoid``, ``tanh``) whose own input is bounded narrows further: ``sigmoid`` of a
    probability lies in ``[0.5, 0.731]`` (a double sigmoid).
    """
    return _fn_bounds(tensor.grad_fn, depth=0)


def _fn_bounds(fn: Any, depth: int) -> Bounds | None:
    scale, scaled, reshaped = 1.0, "", False
    for _ in range(16):
        if fn is None:
            return None
        name = fn.name()
        if name in _PASS_THROUGH:
            fn = fn.next_functions[0][0]
            reshaped = True
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
    bounds = _op_bounds(fn, depth)
    if bounds is None:
        return None
    low, high = sorted((bounds.low * scale, bounds.high * scale))
    simplex = bounds.simplex and scale == 1.0
    return Bounds(low, high, bounds.how + scaled, simplex, None if reshaped else bounds.simplex_dim)


def _inner_bounds(fn: Any, depth: int) -> Bounds | None:
    """Bounds of the input of a squashing op (a few levels deep at most)."""
    if depth >= 3 or not fn.next_functions:
        return None
    return _fn_bounds(fn.next_functions[0][0], depth + 1)


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _op_bounds(fn: Any, depth: int = 0) -> Bounds | None:
    name = fn.name()
    if name == "SoftmaxBackward0":
        dim = getattr(fn, "_saved_dim", None)
        if isinstance(dim, int) and dim >= 2**63:  # a negative dim is saved as an unsigned 64-bit int
            dim -= 2**64
        return Bounds(0.0, 1.0, "softmax (probabilities)", simplex=True, simplex_dim=dim)
    if name == "SigmoidBackward0":
        inner = _inner_bounds(fn, depth)
        if inner is not None:
            bottom, top = _sigmoid(inner.low), _sigmoid(inner.high)
            return Bounds(bottom, top, f"sigmoid of {inner.how}: values in [{bottom:.4g}, {top:.4g}]")
        return Bounds(0.0, 1.0, "sigmoid (probabilities)")
    if name == "TanhBackward0":
        inner = _inner_bounds(fn, depth)
        if inner is not None:
            bottom, top = math.tanh(inner.low), math.tanh(inner.high)
            return Bounds(bottom, top, f"tanh of {inner.how}: values in [{bottom:.4g}, {top:.4g}]")
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
        return float(value.detach()) if value.numel() == 1 else None  # sync: once, on a saved scalar
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
    if call.function == "binary_cross_entropy":
        return _bce_probabilities(call, reduction)
    if call.function in _DISTANCE_LOSSES:
        return _distance(call, reduction)
    return None


#: Regression losses as a function of the distance ``d >= 0`` between input and target (defaults of torch).
_DISTANCE_LOSSES = {
    "mse_loss": lambda d, kw: d**2,
    "l1_loss": lambda d, kw: d,
    "smooth_l1_loss": lambda d, kw: (
        _huber(d, float(kw.get("beta", 1.0))) / max(float(kw.get("beta", 1.0)), 1e-12)
    ),
    "huber_loss": lambda d, kw: _huber(d, float(kw.get("delta", 1.0))),
}


def _huber(d: Tensor, delta: float) -> Tensor:
    return torch.where(d < delta, 0.5 * d**2, delta * (d - 0.5 * delta))


def _distance(call: LossCall, reduction: str) -> LossFloor | None:
    """A regression loss whose input is bounded (``sigmoid``, ``tanh``, a clamp) cannot reach targets
    outside its range: each such target keeps the loss above the loss of its distance to the range."""
    bounds = _bounds(call)
    if bounds is None:
        return None
    target = target_of(call).detach().double()
    output = call.output.detach()
    if target.is_floating_point() is False or target.shape != output.shape:
        return None
    distance = (bounds.low - target).clamp(min=0) + (target - bounds.high).clamp(min=0)
    per_element = _DISTANCE_LOSSES[call.function](distance, call.kwargs)
    floor = float(per_element.sum() if reduction == "sum" else per_element.mean())  # sync: once
    if floor <= 1e-12:
        return None
    outside = float((distance > 0).double().mean())
    how = (
        f"{call.function} compares the input with the targets, but the input comes from {bounds.how} "
        f"(values in [{bounds.low:g}, {bounds.high:g}]) while {outside:.0%} of the targets lie outside that "
        "range (they "
        f"span [{float(target.min()):.3g}, {float(target.max()):.3g}]): the loss cannot fall below "
        f"{floor:.4g}"
    )
    fix = (
        "Try: drop the bounded activation on the regression output (or scale it to the targets' range), "
        "or standardise the targets into the output's range."
    )
    return LossFloor(floor, True, how, 0.0, fix)


#: The regression losses whose floor on a bounded input is known.
DISTANCE_LOSSES = frozenset(_DISTANCE_LOSSES)


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
    own = ce_floor(classes, smoothing, math.inf)
    if bounds is not None and per_sample > own + 1e-9:
        how = (
            f"cross_entropy reads its input as logits, but the input comes from {bounds.how}: the logits of "
            f"{classes} classes differ by at most {spread:g}, so the loss cannot fall below {per_sample:.4g} "
            "per sample"
        )
        return LossFloor(per_sample * count, True, how, own * count)
    how = f"label smoothing {smoothing:g} over {classes} classes"
    return LossFloor(per_sample * count, False, how, per_sample * count)


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
        return LossFloor(floor, True, how, entropy_floor)
    if pos_weight is not None:
        return None
    return LossFloor(floor, False, "the soft targets' own entropy", floor)


def _bce_probabilities(call: LossCall, reduction: str) -> LossFloor | None:
    """``binary_cross_entropy`` on probabilities whose range or sum is bounded: a double sigmoid (``[0.5,
    0.731]``), or a softmax across the labels of a multi-label task (each row sums to 1, so a row with ``m``
    positive labels scores at least ``m ln m``: its best is ``p = 1/m`` on each)."""
    bounds = _bounds(call)
    if bounds is None:
        return None
    target = target_of(call).detach().double()
    output = call.output
    binary = bool(((target == 0) | (target == 1)).all())  # sync: once
    clipped = target.clamp(1e-12, 1 - 1e-12)
    entropy = -(clipped * clipped.log() + (1 - clipped) * (-clipped).log1p())
    own = float(entropy.sum() if reduction == "sum" else entropy.mean())  # sync: once
    dim = bounds.simplex_dim
    if bounds.simplex and binary and dim is not None and target.shape == output.shape and output.ndim >= 2:
        width = output.shape[dim]
        positives = target.sum(dim)
        none = -width * math.log1p(-1.0 / width) if width > 1 else math.inf  # no positive: spread evenly
        per_row = torch.where(
            positives > 0, positives * positives.clamp_min(1).log(), torch.full_like(positives, none)
        )
        total = float(per_row.sum())  # sync: once
        floor = total if reduction == "sum" else total / max(target.numel(), 1)
        if floor > own + 1e-6:
            most = int(positives.max())  # sync: once
            how = (
                f"binary_cross_entropy scores each label on its own, but its input comes from {bounds.how} "
                f"across {width} labels, which sum to 1: a row with m > 1 positive labels (up to {most} "
                f"here) cannot give each a probability near 1, so the loss cannot fall below {floor:.4g}"
            )
            return LossFloor(floor, True, how, own)
        return None
    low, high = max(bounds.low, 0.0), min(bounds.high, 1.0)
    if low <= 0.0 and high >= 1.0:
        return None
    best = target.clamp(low, high).clamp(1e-12, 1 - 1e-12)
    per_element = -(target * best.log() + (1 - target) * (-best).log1p())
    floor = float(per_element.sum() if reduction == "sum" else per_element.mean())  # sync: once
    if floor <= own + 1e-6:
        return None
    how = (
        f"binary_cross_entropy reads probabilities in [0, 1], but its input comes from {bounds.how}, so the "
        f"loss cannot fall below {floor:.4g}"
    )
    return LossFloor(floor, True, how, own)
