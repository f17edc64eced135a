"""The ``loss`` check's probes of one ``training_step``, seen from the loss.

:func:`probe_step` records the loss calls, the model's output and their gradients; :func:`loss_along`
replays the step with the output moved along a ray (:func:`falls_without_bound`); :func:`loss_floor`
proves a floor from the op that produced a loss's input (``softmax`` into ``cross_entropy``: ``ln(e + C - 1)
- 1`` for probabilities); :func:`label_evidence` groups the loss's gradient by target value (a value
whose positions all get zero gradient is dropped from training); :func:`scale_of` and
:func:`learned_scale` compare regression targets with the output's scale.

Example:
    >>> import torch
    >>> from torch.nn import functional as F
    >>> from lightning_recipes.checks.loss._expected_loss import record_loss_calls
    >>> logits = torch.zeros(6, 3, requires_grad=True)
    >>> with record_loss_calls() as calls:
    ...     loss = F.cross_entropy(logits.softmax(-1), torch.tensor([0, 1, 2, 0, 1, 2]))
    >>> floor = loss_floor(calls[0])
    >>> round(floor.value, 4), floor.bounded  # probabilities are logits in [0, 1]
    (0.5514, True)
    >>> with record_loss_calls() as calls:
    ...     loss = F.cross_entropy(logits, torch.tensor([0, 1, 2, 0, 1, 2]), ignore_index=0)
    >>> grad, = torch.autograd.grad(loss, logits)
    >>> [(e.name, e.count, e.moved) for e in label_evidence(calls[0], grad).values()]
    [('class 0', 2, 0), ('class 1', 2, 2), ('class 2', 2, 2)]
    >>> scale_of(torch.tensor([1000.0, 2000.0, 3000.0])).scale
    2000.0
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import itertools
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import numpy as np
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.modules.loss import _Loss
from torch.overrides import TorchFunctionMode

from lightning_recipes.checks.loss._expected_loss import KINDS, loss_call_for, target_of
from lightning_recipes.harness import Harness, LossCall, LossRecorder, batch_entries, first_tensor
from lightning_recipes.harness.loss_calls import LOSS_FUNCTIONS

__all__ = [
    "CLASSIFICATION",
    "DISTANCE_LOSSES",
    "LabelCount",
    "LossFloor",
    "LossProbe",
    "Ray",
    "ScaleStats",
    "descent_ray",
    "drop_cause",
    "falls_without_bound",
    "input_bounds",
    "label_evidence",
    "learned_scale",
    "loss_along",
    "loss_floor",
    "padding_reason",
    "probe_step",
    "scale_of",
]


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


@dataclass
class _Site:
    """Which forward call produced the model's output: ``module``'s ``index``-th call in the step."""

    module: nn.Module
    index: int


@dataclass
class LossProbe:
    """What one ``training_step`` showed.

    Attributes:
        loss: The returned loss (a scalar, detached).
        calls: Every recorded loss call.
        call: The main one: the call whose value is the returned loss, else the first whose target comes
            from the batch and whose input the loss depends on (``None``: a hand-written loss).
        call_grad: d loss / d ``call.output`` (``None`` when the loss does not depend on it).
        output: The model's output (the module's forward, else its last direct child's), or ``None``.
        output_grad: d loss / d ``output`` (``None`` when the loss does not depend on it differentiably).
        differentiable: Whether the returned loss has a gradient at all.
    """

    loss: Tensor
    calls: list[LossCall]
    call: LossCall | None = None
    call_grad: Tensor | None = None
    output: Tensor | None = None
    output_grad: Tensor | None = None
    differentiable: bool = True
    site: _Site | None = field(default=None, repr=False)


def seed_all(seed: int) -> None:
    """The same random draws in every replay of a step (torch, Python and NumPy generators)."""
    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed % 2**32)


def probe_step(context: Harness, model: pl.LightningModule, batch: Any, seed: int = 0) -> LossProbe:
    """Run ``training_step`` once with gradients and read the loss's dependence on the output."""
    sites: list[tuple[int, nn.Module, int, Tensor]] = []  # (depth, module, call index, output)
    counts: dict[int, int] = {}

    def hook(depth: int) -> Any:
        def record(module: nn.Module, _args: Any, output: Any) -> None:
            index = counts.get(id(module), 0)
            counts[id(module)] = index + 1
            tensor = first_tensor(output)
            if tensor is not None and (depth == 0 or tensor.ndim > 0):
                sites.append((depth, module, index, tensor))

        return record

    handles = [model.register_forward_hook(hook(0))]
    handles += [
        child.register_forward_hook(hook(1)) for child in model.children() if not isinstance(child, _Loss)
    ]
    seed_all(seed)
    try:
        with LossRecorder(batch, inspect_output=input_bounds) as recorder, torch.enable_grad():
            loss = context.training_loss(model, batch)
    finally:
        for handle in handles:
            handle.remove()
    calls = recorder.calls
    root = [s for s in sites if s[0] == 0]
    chosen = root[-1] if root else (sites[-1] if sites else None)
    probe = LossProbe(loss.detach(), calls, differentiable=loss.requires_grad)
    if chosen is not None:
        probe.output, probe.site = chosen[3], _Site(chosen[1], chosen[2])
    if not loss.requires_grad:
        probe.call = loss_call_for(calls, loss)
        return probe
    wanted = [probe.output] + [call.output for call in calls]
    usable = [t is not None and t.requires_grad for t in wanted]
    inputs = [t for t, ok in zip(wanted, usable) if ok]
    grads: list[Tensor | None] = list(torch.autograd.grad(loss, inputs, allow_unused=True)) if inputs else []
    per: list[Tensor | None] = []
    it = iter(grads)
    for ok in usable:
        per.append(next(it) if ok else None)
    probe.output_grad = per[0]
    call_grads = per[1:]
    main = loss_call_for(calls, loss)
    if main is None:
        connected = [c for c, g in zip(calls, call_grads) if g is not None]
        main = next((c for c in connected if c.target_keys), connected[0] if connected else None)
    if main is not None:
        probe.call = main
        probe.call_grad = next((g for c, g in zip(calls, call_grads) if c is main), None)
    return probe


@dataclass
class Ray:
    """A descent ray for the model's output: ``squash(start + s * direction)``. ``squash`` is the output's own
    normalising activation (``log_softmax``, ``softmax``, ``sigmoid``) when the model ends in one, so the ray
    moves its logits and every point stays a valid output (moving log-probabilities freely would make
    ``nll_loss`` unbounded); ``None`` otherwise. ``direction`` has unit RMS."""

    start: Tensor
    direction: Tensor
    squash: Callable[[Tensor], Tensor] | None = None
    through: str = ""

    def at(self, step: float) -> Tensor:
        point = self.start + step * self.direction
        return point if self.squash is None else self.squash(point)


def descent_ray(output: Tensor, grad: Tensor) -> Ray | None:
    """The ray along the negative gradient ``grad`` of the loss at the model's ``output`` (through its final
    activation when the graph shows one), or ``None`` when the gradient is zero or not finite."""
    fn, dim = _final_activation(output)
    name = fn.name() if fn is not None else ""
    base = output.detach()
    squash: Callable[[Tensor], Tensor] | None = None
    if name in ("LogSoftmaxBackward0", "SoftmaxBackward0"):
        if name == "LogSoftmaxBackward0":
            start, squash = base, functools.partial(torch.log_softmax, dim=dim)
        else:
            start, squash = base.clamp_min(1e-30).log(), functools.partial(torch.softmax, dim=dim)
    elif name == "SigmoidBackward0":
        p = base.clamp(1e-7, 1 - 1e-7)
        start, squash = p.log() - (-p).log1p(), torch.sigmoid
    else:
        start = base
    if squash is not None:
        with torch.enable_grad():
            leaf = start.clone().requires_grad_(True)
            (grad,) = torch.autograd.grad(squash(leaf), leaf, grad_outputs=grad.to(base.dtype))
    grad = grad.detach().double()
    rms = float(grad.pow(2).mean().sqrt())  # sync: once
    if rms == 0 or not math.isfinite(rms):
        return None
    through = "" if squash is None else f" (through its final {_NAMES[name]})"
    return Ray(start, (-grad / rms).to(base.dtype), squash, through)


_NAMES = {"LogSoftmaxBackward0": "log_softmax", "SoftmaxBackward0": "softmax", "SigmoidBackward0": "sigmoid"}
_RESHAPES = frozenset({"ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "CloneBackward0"})


def _final_activation(output: Tensor) -> tuple[Any, int]:
    """The ``(log_)softmax``/``sigmoid`` node that produced ``output`` (through reshapes that keep the
    softmax's dim last), and the dim of ``output`` it normalises; ``(None, -1)`` when there is none."""
    fn: Any = output.grad_fn
    reshaped = False
    for _ in range(4):
        if fn is None:
            return None, -1
        name = fn.name()
        if name in _RESHAPES:
            fn, reshaped = fn.next_functions[0][0], True
            continue
        if name == "SigmoidBackward0":
            return fn, -1
        if name in ("LogSoftmaxBackward0", "SoftmaxBackward0"):
            dim = int(fn._saved_dim)
            dim = dim - 2**64 if dim >= 2**63 else dim  # a negative dim is saved as an unsigned 64-bit int
            width = fn._saved_result.shape
            last = dim in (-1, len(width) - 1)
            if not reshaped:
                return fn, dim
            return (fn, -1) if last and output.shape[-1] == width[-1] else (None, -1)
        return None, -1
    return None, -1


def loss_along(
    context: Harness,
    model: pl.LightningModule,
    batch: Any,
    probe: LossProbe,
    ray: Ray,
    steps: Sequence[float],
    seed: int = 0,
    *,
    at_loss_input: bool = False,
) -> list[float]:
    """The returned loss with the model's output (or, with ``at_loss_input``, the input of the main loss
    call) replaced by ``ray.at(s)`` for each ``s``.

    Replacing the loss call's input reaches a loss computed inside a wrapped model (a Hugging Face model
    given ``labels``), where the model's output is only returned next to the finished loss. Stops at the first
    step where ``training_step`` raises (an output out of the loss's domain, such as a probability above 1),
    returns NaN (not kept) or ``+inf`` (kept); the list is then shorter.
    """
    call = probe.call
    if at_loss_input and (call is None or call.function not in _INPUT_NAMED):
        return []
    if not at_loss_input and probe.site is None:
        return []
    values: list[float] = []
    for step in steps:
        point = ray.at(step)
        handle = None
        if at_loss_input:
            assert call is not None
            index = sum(1 for c in probe.calls[: probe.calls.index(call)] if c.function == call.function)
            swap: contextlib.AbstractContextManager[Any] = _SwapLossInput(call.function, index, point)
        else:
            assert probe.site is not None
            handle = probe.site.module.register_forward_hook(_Replace(point, probe.site.index))
            swap = contextlib.nullcontext()
        seed_all(seed)
        try:
            with torch.no_grad(), swap:
                loss = context.training_loss(model, batch)
        except Exception:  # out of the loss's domain: the ray ends here
            break
        finally:
            if handle is not None:
                handle.remove()
        value = float(loss)  # sync: once per step of the probe
        if value != value:
            break
        values.append(value)
        if value == float("inf"):  # it rose past any bound: the ray ends here
            break
    return values


_INPUT_NAMED = frozenset(KINDS | {"kl_div", "poisson_nll_loss", "gaussian_nll_loss", "soft_margin_loss"})


class _SwapLossInput(TorchFunctionMode):
    """Replace the ``input`` of the ``index``-th call of loss ``function`` by ``tensor``."""

    def __init__(self, function: str, index: int, tensor: Tensor) -> None:
        super().__init__()
        self.function, self.index, self.tensor, self.calls = function, index, tensor, 0

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if LOSS_FUNCTIONS.get(func) == self.function:
            index, self.calls = self.calls, self.calls + 1
            if index == self.index:
                bound = inspect.signature(func).bind(*args, **kwargs)
                bound.arguments["input"] = self.tensor
                args, kwargs = bound.args, bound.kwargs
        return func(*args, **kwargs)


class _Replace:
    """A forward hook that replaces the output of the module's ``index``-th call by ``tensor``."""

    def __init__(self, tensor: Tensor, index: int) -> None:
        self.tensor, self.index, self.calls = tensor, index, 0

    def __call__(self, _module: nn.Module, _args: Any, output: Any) -> Any:
        index, self.calls = self.calls, self.calls + 1
        return _with_first_tensor(output, self.tensor) if index == self.index else None


def _with_first_tensor(output: Any, tensor: Tensor) -> Any:
    """``output`` with its first tensor (as :func:`first_tensor` reads it) replaced by ``tensor``."""
    if isinstance(output, Tensor):
        return tensor
    current = first_tensor(output)
    if isinstance(output, (tuple, list)):
        items = [tensor if item is current else item for item in output]
        return type(output)(items) if isinstance(output, list) else tuple(items)
    if getattr(output, "logits", None) is current:  # a Hugging Face ModelOutput
        duplicate = copy.copy(output)
        duplicate.logits = tensor
        return duplicate
    if isinstance(output, Mapping):
        replaced = dict(output)
        for key, value in output.items():
            if value is current:
                replaced[key] = tensor
        return replaced
    raise TypeError(f"cannot replace the output of type {type(output).__name__}")


def falls_without_bound(values: Sequence[float]) -> bool:
    """Whether losses at steps growing tenfold keep falling at a pace that does not slow down: the last three
    drops are positive and none is below half the one before (a loss bounded below approaches its bound with
    shrinking drops), and the loss fell by more than ten times its first magnitude; or it reached ``-inf``.

    Example:
        >>> falls_without_bound([-1.0, -2.0, -101.0, -1e4, -1e6, -1e8])  # -mse along the descent
        True
        >>> falls_without_bound([2.3, 0.4, 1e-3, 1e-5, 0.0, 0.0])  # cross-entropy: bounded by 0
        False
    """
    if any(v == float("-inf") for v in values):
        return True
    if len(values) < 4:
        return False
    last = list(values[-4:])
    drops = [a - b for a, b in itertools.pairwise(last)]
    steady = all(d > 0 for d in drops) and all(b >= 0.5 * a for a, b in itertools.pairwise(drops))
    return steady and values[0] - values[-1] > 10 * (abs(values[0]) + 1e-3)


CLASSIFICATION = frozenset(
    {"cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits"}
)
_SATURATED = 1e-6  # a predicted probability this close to the target: the gradient may round to exactly 0
_LOGIT_SATURATED = 16.0


@dataclass
class LabelCount:
    """Positions of one target value (``kind``: ``"class"`` an integer class, ``"column"`` the positives of
    one label of a multi-label or soft target, ``"binary"`` a 0/1 value of a single output) in one batch:
    ``count`` non-saturated positions, ``moved`` of them with a nonzero gradient, ``saturated`` set aside."""

    name: str
    kind: str
    value: int
    count: int = 0
    moved: int = 0
    saturated: int = 0


def label_evidence(call: LossCall, grad: Tensor | None) -> dict[tuple[str, int], LabelCount] | None:
    """Per target value of ``call``, how many positions the gradient ``grad`` (of the loss with respect to
    ``call.output``) reaches; ``None`` when ``call`` is no classification loss this module reads."""
    if call.function not in CLASSIFICATION or call.target is None or grad is None:
        return None
    out, g, target = call.output.detach(), grad.detach(), call.target.detach()
    if call.function in ("cross_entropy", "nll_loss"):
        return _categorical(call, out, g, target)
    if target.shape != out.shape:
        return None
    moved = g != 0
    if call.function == "binary_cross_entropy_with_logits":
        saturated = ((target == 1) & (out > _LOGIT_SATURATED)) | ((target == 0) & (out < -_LOGIT_SATURATED))
    else:
        saturated = (out.float() - target.float()).abs() < _SATURATED
    if out.ndim >= 2 and out.shape[-1] > 1:
        width = out.shape[-1]
        positive = (target > 0).reshape(-1, width)
        moved, saturated = moved.reshape(-1, width), saturated.reshape(-1, width)
        return {
            ("column", k): _count(
                f"label {k} (positive)", "column", k, positive[:, k], moved[:, k], saturated[:, k]
            )
            for k in range(width)
        }
    flat_t, flat_m, flat_s = target.reshape(-1), moved.reshape(-1), saturated.reshape(-1)
    binary = bool(((flat_t == 0) | (flat_t == 1)).all())  # sync: once
    if not binary:
        return {("column", 0): _count("positive target", "column", 0, flat_t > 0, flat_m, flat_s)}
    return {("binary", v): _count(f"target {v}", "binary", v, flat_t == v, flat_m, flat_s) for v in (0, 1)}


def _categorical(
    call: LossCall, out: Tensor, g: Tensor, target: Tensor
) -> dict[tuple[str, int], LabelCount] | None:
    if out.ndim < 2:
        return None
    classes = out.shape[1]
    scores = out.movedim(1, -1).reshape(-1, classes).float()
    moved = (g.movedim(1, -1).reshape(-1, classes) != 0).any(-1)
    if not call.integer_target:
        if target.shape != out.shape:
            return None
        soft = target.movedim(1, -1).reshape(-1, classes)
        none = torch.zeros_like(moved)
        return {
            ("class", k): _count(f"class {k}", "class", k, soft[:, k] > 0, moved, none)
            for k in range(classes)
        }
    flat = target.reshape(-1)
    if flat.numel() != scores.shape[0]:
        return None
    probs = scores.softmax(-1) if call.function == "cross_entropy" else scores.exp()
    valid = (flat >= 0) & (flat < classes)
    on_target = probs.gather(1, flat.clamp(0, classes - 1)[:, None])[:, 0]
    saturated = valid & (on_target > 1 - _SATURATED)
    values, inverse = torch.unique(flat, return_inverse=True)
    total = torch.bincount(inverse, minlength=len(values))
    sat = torch.bincount(inverse, weights=saturated.double(), minlength=len(values))
    hit = torch.bincount(inverse, weights=(moved & ~saturated).double(), minlength=len(values))
    rows = zip(values.tolist(), total.tolist(), sat.tolist(), hit.tolist())  # sync: once
    return {
        ("class", v): LabelCount(f"class {v}", "class", v, int(n - s), int(m), int(s)) for v, n, s, m in rows
    }


def _count(name: str, kind: str, value: int, where: Tensor, moved: Tensor, saturated: Tensor) -> LabelCount:
    counted = where & ~saturated
    numbers = torch.stack([counted.sum(), (counted & moved).sum(), (where & saturated).sum()]).tolist()
    return LabelCount(name, kind, value, int(numbers[0]), int(numbers[1]), int(numbers[2]))  # sync: once


def drop_cause(call: LossCall, label: LabelCount) -> str:
    """The likely reason ``label`` gets no gradient, read from the loss call's arguments."""
    kwargs = call.kwargs
    v = label.value
    if label.kind == "class" and kwargs.get("ignore_index") == v:
        return f"`ignore_index={v}` in {call.function} makes the loss skip class {v}, a real class here"
    weight = kwargs.get("weight")
    if (
        isinstance(weight, Tensor)
        and weight.ndim == 1
        and 0 <= v < weight.numel()
        and label.kind != "binary"
        and float(weight[v]) == 0
    ):  # sync: once, on a failure
        return f"`weight[{v}] = 0` in {call.function} gives {label.name} no weight"
    pos_weight = kwargs.get("pos_weight")
    if isinstance(pos_weight, Tensor) and label.kind == "column":
        flat = pos_weight.reshape(-1)
        if (flat.numel() == 1 or v < flat.numel()) and float(flat[min(v, flat.numel() - 1)]) == 0:  # sync
            return f"`pos_weight[{v}] = 0` in {call.function} gives {label.name} no weight"
    return (
        f"the loss of these positions is masked or multiplied by 0 after (or around) the {call.function} "
        "call (e.g. `loss[y != k].mean()`, a mask built from the targets), or their gradient is cut "
        "(a `.detach()` on part of the output)"
    )


def padding_reason(value: int, target: Tensor, call: LossCall, batch: Any) -> str | None:
    """Why the ignored integer ``value`` is padding rather than a class, or ``None``.

    Padding: a negative value (``-100``, ``-1``: no class index); a value that only ever fills the end (or
    the start) of each sequence of a ``[B, S]`` target; a value at exactly the positions where another
    integer batch entry of the target's size (the inputs, an attention mask) holds one constant.
    """
    if value < 0:
        return f"{value} is negative: an ignore value, not a class index"
    hit = target == value
    rows = _rows(target, call, batch)
    if rows is not None and int(hit.sum()) >= 2:  # sync: once per ignored value
        grid = hit.reshape(rows)
        suffix = bool((grid[:, 1:] >= grid[:, :-1]).all())
        prefix = bool((grid[:, 1:] <= grid[:, :-1]).all())
        if (suffix or prefix) and not bool(grid.all()):
            where = "end" if suffix else "start"
            return f"{value} only fills the {where} of the sequences (the padding pattern)"
    flat_hit = hit.reshape(-1)
    for key, entry in batch_entries(batch):
        if key in call.target_keys or entry.is_floating_point() or entry.numel() != target.numel():
            continue
        flat = entry.reshape(-1).to(target.device)
        inside = flat[flat_hit].unique()
        if inside.numel() != 1:
            continue
        pad = flat == inside[0]
        if bool((pad == flat_hit).all()):  # sync: once per candidate entry
            return f"{value} sits exactly where batch entry {key!r} holds {int(inside[0])} (its padding)"
    return None


def _rows(target: Tensor, call: LossCall, batch: Any) -> tuple[int, int] | None:
    """``(B, S)`` of a sequence target, also when the loss saw it flattened (``[B*S]``, or shifted
    ``[B*(S-1)]``)."""
    if target.ndim == 2:
        return int(target.shape[0]), int(target.shape[1])
    if target.ndim != 1:
        return None
    for key, entry in batch_entries(batch):
        if key not in call.target_keys or entry.ndim != 2:
            continue
        b, s = int(entry.shape[0]), int(entry.shape[1])
        if target.numel() == b * s:
            return b, s
        if s > 1 and target.numel() == b * (s - 1):
            return b, s - 1
    return None


# ops that keep a tensor's scale parameter-free (a learned scale is looked for through them)
_SCALE_PASS_THROUGH = frozenset(
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
        if name in _SCALE_PASS_THROUGH:
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
        if fn.name() not in _SCALE_PASS_THROUGH:
            return False
        fn = fn.next_functions[0][0]
    return False
