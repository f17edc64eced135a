"""What one ``training_step`` shows of its loss: bounded inputs, gradients per target value, a descent ray."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.nn.modules.loss import _Loss

from lightning_recipes.checks.loss._expected_loss import (
    CLASSIFICATION,
    LossFloor,
    binary_entropy,
    ce_floor,
    loss_call_for,
    reduced,
    target_of,
)
from lightning_recipes.harness import Harness, LossCall, LossRecorder, batch_entries, first_tensor
from lightning_recipes.harness.isolation import seed_all
from lightning_recipes.harness.loss_calls import RowMix

_CLAMPS = {"HardtanhBackward0", "ClampBackward0", "ClampBackward1", "ClampMinBackward0", "ClampMaxBackward0"}
_RESHAPES = frozenset({"ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0", "CloneBackward0"})
_PASS_THROUGH = _RESHAPES | {  # ops that keep every value of their input: bounds carry through them
    f"{op}Backward{n}"
    for op in ("Transpose", "Permute", "ToCopy", "Unsqueeze", "Squeeze", "Slice", "Select")
    for n in range(3)
}


@dataclass(frozen=True)
class Bounds:
    """Proven ``[low, high]`` of a tensor's values; ``simplex``: they sum to 1 along ``simplex_dim``."""

    low: float
    high: float
    how: str
    simplex: bool = False
    simplex_dim: int | None = None


def input_bounds(tensor: Tensor) -> Bounds | None:
    """Proven bounds of ``tensor``'s values from the ops that produced it, or ``None``."""
    return _fn_bounds(tensor.grad_fn, 0)


def _fn_bounds(fn: Any, depth: int) -> Bounds | None:
    scale, reshaped = 1.0, False
    for _ in range(16):
        if fn is None:
            return None
        name = fn.name()
        if name in _PASS_THROUGH:
            fn, reshaped = fn.next_functions[0][0], True
        elif name in ("MulBackward0", "DivBackward0") and scale == 1.0:
            try:
                factor = _scalar(getattr(fn, "_saved_other", None))
            except RuntimeError:  # the saved tensors were freed by a backward pass
                return None
            upstream = [f for f, _ in fn.next_functions if f is not None]
            if not factor or len(upstream) != 1:
                return None
            scale, fn = (factor if name == "MulBackward0" else 1.0 / factor), upstream[0]
        else:
            break
    bounds = _op_bounds(fn, depth) if fn is not None else None
    if bounds is None:
        return None
    low, high = sorted((bounds.low * scale, bounds.high * scale))
    how = bounds.how + (f" x {scale:g}" if scale != 1.0 else "")
    return Bounds(low, high, how, bounds.simplex and scale == 1.0, None if reshaped else bounds.simplex_dim)


_SQUASHERS = {
    "SigmoidBackward0": ("sigmoid", lambda x: torch.tensor(x, dtype=torch.double).sigmoid().item(), 0.0, 1.0),
    "TanhBackward0": ("tanh", math.tanh, -1.0, 1.0),
    "ExpBackward0": ("exp", lambda x: math.exp(min(x, 700.0)), 0.0, math.inf),
}


def _op_bounds(fn: Any, depth: int) -> Bounds | None:
    name = fn.name()
    if name == "SoftmaxBackward0":
        return Bounds(0.0, 1.0, "softmax (probabilities)", True, _signed(fn._saved_dim))
    if name in _SQUASHERS:
        what, squash, low, high = _SQUASHERS[name]
        inner = _fn_bounds(fn.next_functions[0][0], depth + 1) if depth < 3 and fn.next_functions else None
        if inner is None:
            return Bounds(low, high, what + (" (probabilities)" if what == "sigmoid" else ""))
        low, high = squash(inner.low), squash(inner.high)
        return Bounds(low, high, f"{what} of {inner.how}: values in [{low:.4g}, {high:.4g}]")
    if name in _CLAMPS:
        op, suffix = ("hardtanh", "_val") if name == "HardtanhBackward0" else ("clamp", "")
        low_, high_ = (_scalar(getattr(fn, f"_saved_{end}{suffix}", None)) for end in ("min", "max"))
        if low_ is None and high_ is None:
            return None
        low, high = -math.inf if low_ is None else low_, math.inf if high_ is None else high_
        return Bounds(low, high, f"{op} to [{low:g}, {high:g}]")
    return None


def _signed(dim: Any) -> int | None:
    """A dim saved by autograd (a negative one comes back as an unsigned 64-bit int)."""
    return (dim - 2**64 if dim >= 2**63 else dim) if isinstance(dim, int) else None


def _scalar(value: Any) -> float | None:
    if isinstance(value, Tensor):
        return float(value.detach()) if value.numel() == 1 else None  # sync: once, on a saved scalar
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


#: Regression losses as a function of the distance ``d >= 0`` between input and target (torch's defaults).
_DISTANCE_LOSSES: dict[str, Callable[[Tensor, dict[str, Any]], Tensor]] = {
    "mse_loss": lambda d, kw: d**2,
    "l1_loss": lambda d, kw: d,
    "smooth_l1_loss": lambda d, kw: _huber(d, beta := float(kw.get("beta", 1.0))) / max(beta, 1e-12),
    "huber_loss": lambda d, kw: _huber(d, float(kw.get("delta", 1.0))),
}


def _huber(d: Tensor, delta: float) -> Tensor:
    return torch.where(d < delta, 0.5 * d**2, delta * (d - 0.5 * delta))


def loss_floor(call: LossCall) -> LossFloor | None:
    """The floor of ``call``'s loss (same reduction), or ``None`` when it is 0 or cannot be proven."""
    reduction = call.kwargs.get("reduction", "mean")
    if reduction not in ("mean", "sum") or call.kwargs.get("weight") is not None:
        return None
    bounds = call.inspection if call.inspected else input_bounds(call.output)
    if call.function == "cross_entropy" and call.integer_target:
        return _ce(call, reduction, bounds)
    if call.function.startswith("binary_cross_entropy"):
        return _bce(call, reduction, bounds)
    if call.function in _DISTANCE_LOSSES and bounds is not None:
        return _distance(call, reduction, bounds)
    return None


def _distance(call: LossCall, reduction: str, bounds: Bounds) -> LossFloor | None:
    """A regression head bounded (``sigmoid``, ``tanh``, a clamp) below targets outside its range."""
    target, output = target_of(call).detach().double(), call.output.detach()
    if not target.is_floating_point() or target.shape != output.shape:
        return None
    distance = (bounds.low - target).clamp(min=0) + (target - bounds.high).clamp(min=0)
    floor = reduced(_DISTANCE_LOSSES[call.function](distance, call.kwargs), reduction)
    if floor <= 1e-12:
        return None
    outside = float((distance > 0).double().mean())  # sync: once
    how = f"{outside:.0%} of targets outside the head's range [{bounds.low:g}, {bounds.high:g}], {bounds.how}"
    fix = "Drop the bounded activation on the regression output, or scale the targets into its range."
    return LossFloor(floor, True, how, 0.0, fix)


def _ce(call: LossCall, reduction: str, bounds: Bounds | None) -> LossFloor | None:
    classes = call.num_classes
    assert classes is not None
    smoothing = float(call.kwargs.get("label_smoothing") or 0.0)
    spread = math.inf if bounds is None else bounds.high - bounds.low
    spread = min(spread, 1.0) if bounds is not None and bounds.simplex else spread
    per_sample, own = ce_floor(classes, smoothing, spread), ce_floor(classes, smoothing, math.inf)
    if per_sample <= 0:
        return None
    count = 1
    if reduction == "sum":
        count = int((target_of(call) != call.kwargs.get("ignore_index", -100)).sum())  # sync: once
    if bounds is not None and per_sample > own + 1e-9:
        how = f"cross_entropy reads logits, but its input comes from {bounds.how} (spread <= {spread:g})"
        return LossFloor(per_sample * count, True, how, own * count)
    how = f"label smoothing {smoothing:g} over {classes} classes"
    return LossFloor(per_sample * count, False, how, own * count)


def _bce(call: LossCall, reduction: str, bounds: Bounds | None) -> LossFloor | None:
    """Logits or probabilities bounded in range (a double sigmoid) or in sum (a softmax over multi-label)."""
    logits = call.function == "binary_cross_entropy_with_logits"
    if (call.kwargs.get("pos_weight") is not None) if logits else (bounds is None):
        return None
    target, output = target_of(call).detach().double(), call.output
    own = reduced(binary_entropy(target.clamp(1e-12, 1 - 1e-12)), reduction)
    if logits:
        low, high = (-math.inf, math.inf) if bounds is None else (bounds.low, bounds.high)
        best = (target.log() - torch.log1p(-target)).clamp(min=low, max=high).nan_to_num(nan=0.0)  # minimiser
        per_element = (target * F.softplus(-best) + (1 - target) * F.softplus(best)).nan_to_num(nan=0.0)
        floor = reduced(per_element, reduction)
        if floor <= 1e-9:
            return None
        if bounds is not None and floor > own + 1e-6:
            how = f"binary_cross_entropy_with_logits reads logits, but its input comes from {bounds.how}"
            return LossFloor(floor, True, how, own)
        return LossFloor(floor, False, "the soft targets' own entropy", floor)
    assert bounds is not None
    dim = bounds.simplex_dim
    if bounds.simplex and dim is not None and target.shape == output.shape and output.ndim >= 2:
        if not bool(((target == 0) | (target == 1)).all()):  # sync: once
            return None
        width, positives = output.shape[dim], target.sum(dim)
        empty = -width * math.log1p(-1.0 / width) if width > 1 else math.inf  # no positive: spread evenly
        per_row = torch.where(positives > 0, positives * positives.clamp_min(1).log(), empty)
        total = float(per_row.sum())  # sync: once
        floor = total if reduction == "sum" else total / max(target.numel(), 1)
        how = f"binary_cross_entropy scores labels alone, but its input is {bounds.how} across {width}"
        return LossFloor(floor, True, how, own) if floor > own + 1e-6 else None
    low, high = max(bounds.low, 0.0), min(bounds.high, 1.0)
    if low <= 0.0 and high >= 1.0:
        return None
    best = target.clamp(low, high).clamp(1e-12, 1 - 1e-12)
    floor = reduced(-(target * best.log() + (1 - target) * (-best).log1p()), reduction)
    how = f"binary_cross_entropy reads probabilities in [0, 1], but its input comes from {bounds.how}"
    return LossFloor(floor, True, how, own) if floor > own + 1e-6 else None


@dataclass
class LossProbe:
    """One ``training_step`` with gradients: the loss, the main loss call, the output, their gradients."""

    loss: Tensor
    call: LossCall | None = None
    call_grad: Tensor | None = None
    output: Tensor | None = None
    output_grad: Tensor | None = None
    differentiable: bool = True
    site: tuple[nn.Module, int] | None = None
    mixed: list[RowMix] = field(default_factory=list)  # broadcasts that paired rows of other samples


def probe_step(context: Harness, model: pl.LightningModule, batch: Any, seed: int = 0) -> LossProbe:
    """Run ``training_step`` once with gradients and read the loss's dependence on the output."""
    sites: list[tuple[int, nn.Module, int, Tensor]] = []  # (depth, module, call index, output)
    counts: dict[int, int] = {}

    def record(depth: int, module: nn.Module, _args: Any, output: Any) -> None:
        counts[id(module)] = index = counts.get(id(module), -1) + 1
        tensor = first_tensor(output)
        if tensor is not None and (depth == 0 or tensor.ndim > 0):
            sites.append((depth, module, index, tensor))

    children = [c for c in model.children() if not isinstance(c, _Loss)]
    seed_all(seed)
    with ExitStack() as hooks:  # every hook removed on leaving
        for m in [model, *children]:
            hooks.enter_context(m.register_forward_hook(functools.partial(record, int(m is not model))))
        with LossRecorder(batch, inspect_output=input_bounds) as recorder, torch.enable_grad():
            loss = context.training_loss(model, batch)
    calls, root = recorder.calls, [s for s in sites if s[0] == 0]
    chosen = root[-1] if root else (sites[-1] if sites else None)
    probe = LossProbe(loss.detach(), differentiable=loss.requires_grad, mixed=recorder.mixed)
    if chosen is not None:
        probe.output, probe.site = chosen[3], (chosen[1], chosen[2])
    probe.call = loss_call_for(calls, loss)
    if not loss.requires_grad:
        return probe
    wanted = [probe.output] + [call.output for call in calls]
    usable = [t for t in wanted if t is not None and t.requires_grad]
    found = iter(torch.autograd.grad(loss, usable, allow_unused=True) if usable else [])
    grads = [next(found) if t is not None and t.requires_grad else None for t in wanted]
    probe.output_grad = grads[0]
    if probe.call is None:
        connected = [c for c, g in zip(calls, grads[1:]) if g is not None]
        probe.call = next((c for c in connected if c.target_keys), connected[0] if connected else None)
    probe.call_grad = next((g for c, g in zip(calls, grads[1:]) if c is probe.call), None)
    return probe


def modules_run(context: Harness, model: pl.LightningModule, batch: Any) -> list[tuple[str, nn.Module]]:
    """``(name, module)`` per forward one no-grad ``training_step`` on ``batch`` ran, as each one ended."""
    ran: list[tuple[str, nn.Module]] = []
    with ExitStack() as hooks, torch.no_grad():  # every hook removed on leaving
        for n, m in model.named_modules():
            hooks.enter_context(m.register_forward_hook(lambda m, *_, n=n: ran.append((n, m))))
        context.training_loss(model, batch)
    return ran


@dataclass
class Ray:
    """``squash(start + s * direction)``: the descent direction through the output's final activation."""

    start: Tensor
    direction: Tensor
    squash: Callable[[Tensor], Tensor] | None = None
    through: str = ""

    def at(self, step: float) -> Tensor:
        point = self.start + step * self.direction
        return point if self.squash is None else self.squash(point)


def descent_ray(output: Tensor, grad: Tensor) -> Ray | None:
    """The descent ray of the loss at ``output`` (``None`` when the gradient is zero or not finite)."""
    fn, dim = _final_activation(output)
    name, base = (fn.name() if fn is not None else ""), output.detach()
    squash: Callable[[Tensor], Tensor] | None = None
    start = base
    if name == "LogSoftmaxBackward0":
        squash = functools.partial(torch.log_softmax, dim=dim)
    elif name == "SoftmaxBackward0":
        start, squash = base.clamp_min(1e-30).log(), functools.partial(torch.softmax, dim=dim)
    elif name == "SigmoidBackward0":
        p = base.clamp(1e-7, 1 - 1e-7)
        start, squash = p.log() - (-p).log1p(), torch.sigmoid
    if squash is not None:
        with torch.enable_grad():
            leaf = start.clone().requires_grad_(True)
            (grad,) = torch.autograd.grad(squash(leaf), leaf, grad_outputs=grad.to(base.dtype))
    grad = grad.detach().double()
    rms = float(grad.pow(2).mean().sqrt())  # sync: once
    if rms == 0 or not math.isfinite(rms):
        return None
    direction = (-grad / rms).to(base.dtype)
    if squash is None and base.is_floating_point() and bool((base >= 0).all()):  # sync: once
        # a point the model cannot reach measures nothing: a ray that needs negative squared errors does
        return Ray(start, direction, torch.relu, " (kept >= 0, as every output at init is)")
    final = name.removesuffix("Backward0").lower().replace("logsoftmax", "log_softmax")
    return Ray(start, direction, squash, f" (through its final {final})" if squash is not None else "")


def _final_activation(output: Tensor) -> tuple[Any, int]:
    """The ``(log_)softmax``/``sigmoid`` node behind ``output`` and its dim, or ``(None, -1)``."""
    fn: Any = output.grad_fn
    reshaped = False
    for _ in range(4):
        name = fn.name() if fn is not None else ""
        if name in _RESHAPES:
            fn, reshaped = fn.next_functions[0][0], True
        elif name == "SigmoidBackward0":
            return fn, -1
        elif name in ("LogSoftmaxBackward0", "SoftmaxBackward0"):
            dim, width = _signed(int(fn._saved_dim)), fn._saved_result.shape
            assert dim is not None
            if not reshaped:
                return fn, dim
            last = dim in (-1, len(width) - 1) and output.shape[-1] == width[-1]
            return (fn, -1) if last else (None, -1)
        else:
            return None, -1
    return None, -1


def loss_along(
    context: Harness,
    model: pl.LightningModule,
    batch: Any,
    probe: LossProbe,
    ray: Ray,
    steps: Sequence[float],
) -> list[float]:
    """The loss with the output replaced by ``ray.at(s)`` per ``s``, until it raises or is NaN."""
    values: list[float] = []
    for step in steps if probe.site is not None else ():
        assert probe.site is not None
        handle = probe.site[0].register_forward_hook(_replace(ray.at(step), probe.site[1]))
        seed_all(0)
        try:
            with handle, torch.no_grad():  # the hook removed on leaving
                value = float(context.training_loss(model, batch))  # sync: once per step of the ray
        except Exception:  # out of the loss's domain: the ray ends here
            break
        if value != value:
            break
        values.append(value)
        if value == math.inf:
            break
    return values


def _replace(tensor: Tensor, index: int) -> Callable[[nn.Module, Any, Any], Any]:
    """A forward hook that replaces the first tensor of the module's ``index``-th output by ``tensor``."""
    calls = itertools.count()

    def hook(_module: nn.Module, _args: Any, output: Any) -> Any:
        if next(calls) != index:
            return None
        current = first_tensor(output)
        if isinstance(output, (tuple, list)):
            return type(output)(tensor if item is current else item for item in output)
        if isinstance(output, Mapping):
            return {key: tensor if value is current else value for key, value in output.items()}
        return tensor if isinstance(output, Tensor) else None

    return hook


def falls_without_bound(values: Sequence[float]) -> bool:
    """Whether losses at tenfold steps keep falling unslowed, over ten times their start, or hit ``-inf``."""
    if any(v == -math.inf for v in values):
        return True
    if len(values) < 4:
        return False
    drops = [a - b for a, b in itertools.pairwise(values[-4:])]
    steady = all(d > 0 for d in drops) and all(b >= 0.5 * a for a, b in itertools.pairwise(drops))
    return steady and values[0] - values[-1] > 10 * (abs(values[0]) + 1e-3)


_SATURATED = 1e-6  # a predicted probability this close to the target: the gradient may round to exactly 0
_LOGIT_SATURATED = 16.0


@dataclass
class LabelCount:
    """Positions of one target value: ``count`` unsaturated, ``moved`` with a gradient, ``saturated``."""

    name: str
    kind: str
    value: int
    count: int = 0
    moved: int = 0
    saturated: int = 0


def label_evidence(call: LossCall, grad: Tensor | None) -> list[LabelCount] | None:
    """Per target value of ``call``, how many positions ``grad`` reaches; ``None`` for other losses."""
    if call.function not in CLASSIFICATION or call.target is None or grad is None:
        return None
    out, moved, target = call.output.detach(), grad.detach() != 0, call.target.detach()
    if call.function in ("cross_entropy", "nll_loss"):
        return _categorical(call, out, moved, target)
    if target.shape != out.shape:
        return None
    if call.function == "binary_cross_entropy_with_logits":
        saturated = ((target == 1) & (out > _LOGIT_SATURATED)) | ((target == 0) & (out < -_LOGIT_SATURATED))
    else:
        saturated = (out.float() - target.float()).abs() < _SATURATED
    if out.ndim >= 2 and out.shape[-1] > 1:
        w = out.shape[-1]
        positive, moved, saturated = (t.reshape(-1, w) for t in (target > 0, moved, saturated))
        return [
            _count(f"label {k} (positive)", "column", k, positive[:, k], moved[:, k], saturated[:, k])
            for k in range(w)
        ]
    flat, moved, saturated = target.reshape(-1), moved.reshape(-1), saturated.reshape(-1)
    if not bool(((flat == 0) | (flat == 1)).all()):  # sync: once
        return [_count("positive target", "column", 0, flat > 0, moved, saturated)]
    return [_count(f"target {v}", "binary", v, flat == v, moved, saturated) for v in (0, 1)]


def _categorical(call: LossCall, out: Tensor, moved: Tensor, target: Tensor) -> list[LabelCount] | None:
    if out.ndim < 2:
        return None
    classes = out.shape[1]
    scores = out.movedim(1, -1).reshape(-1, classes).float()
    moved = moved.movedim(1, -1).reshape(-1, classes).any(-1)
    if not call.integer_target:
        if target.shape != out.shape:
            return None
        soft, none = target.movedim(1, -1).reshape(-1, classes), torch.zeros_like(moved)
        return [_count(f"class {k}", "class", k, soft[:, k] > 0, moved, none) for k in range(classes)]
    flat = target.reshape(-1)
    if flat.numel() != scores.shape[0]:
        return None
    probs = scores.softmax(-1) if call.function == "cross_entropy" else scores.exp()
    on_target = probs.gather(1, flat.clamp(0, classes - 1)[:, None])[:, 0]
    saturated = (flat >= 0) & (flat < classes) & (on_target > 1 - _SATURATED)
    values, inverse = torch.unique(flat, return_inverse=True)
    total = torch.bincount(inverse, minlength=len(values))
    sat = torch.bincount(inverse, weights=saturated.double(), minlength=len(values))
    hit = torch.bincount(inverse, weights=(moved & ~saturated).double(), minlength=len(values))
    rows = zip(values.tolist(), total.tolist(), sat.tolist(), hit.tolist())  # sync: once
    return [LabelCount(f"class {v}", "class", v, int(n - s), int(m), int(s)) for v, n, s, m in rows]


def _count(name: str, kind: str, value: int, where: Tensor, moved: Tensor, saturated: Tensor) -> LabelCount:
    counted = where & ~saturated
    numbers = torch.stack([counted.sum(), (counted & moved).sum(), (where & saturated).sum()]).tolist()
    return LabelCount(name, kind, value, int(numbers[0]), int(numbers[1]), int(numbers[2]))  # sync: once


def drop_cause(call: LossCall, label: LabelCount) -> str:
    """The likely reason ``label`` gets no gradient, read from the loss call's arguments."""
    v, kwargs = label.value, call.kwargs
    if label.kind == "class" and kwargs.get("ignore_index") == v:
        return f"`ignore_index={v}` in {call.function}"
    name = {"class": "weight", "column": "pos_weight"}.get(label.kind, "")
    weights = kwargs.get(name)
    if isinstance(weights, Tensor):
        flat = weights.reshape(-1)
        at = min(v, flat.numel() - 1) if flat.numel() == 1 or v < flat.numel() else None
        if at is not None and v >= 0 and float(flat[at]) == 0:  # sync: once, on a failure
            return f"`{name}[{v}] = 0` in {call.function}"
    return f"masked or multiplied by 0 around the {call.function} call, or its gradient cut (a .detach())"


def padding_reason(value: int, target: Tensor, call: LossCall, batch: Any) -> str | None:
    """Why the ignored integer ``value`` is padding rather than a class, or ``None``."""
    if value < 0:
        return f"{value} is negative: an ignore value"
    hit = target == value
    rows = _rows(target, call, batch)
    if rows is not None and int(hit.sum()) >= 2:  # sync: once per ignored value
        grid = hit.reshape(rows)
        suffix, prefix = bool((grid[:, 1:] >= grid[:, :-1]).all()), bool((grid[:, 1:] <= grid[:, :-1]).all())
        if (suffix or prefix) and not bool(grid.all()):
            return f"{value} only fills the {'end' if suffix else 'start'} of the sequences"
    flat_hit = hit.reshape(-1)
    for key, entry in batch_entries(batch):
        if key in call.target_keys or entry.is_floating_point() or entry.numel() != target.numel():
            continue
        flat = entry.reshape(-1).to(target.device)
        inside = flat[flat_hit].unique()
        if inside.numel() == 1 and bool(((flat == inside[0]) == flat_hit).all()):  # sync: once per entry
            return f"{value} sits exactly where batch entry {key!r} holds {int(inside[0])}"
    return None


def _rows(target: Tensor, call: LossCall, batch: Any) -> tuple[int, int] | None:
    """``(B, S)`` of a sequence target, also when the loss saw it flattened (``[B*S]`` or shifted)."""
    if target.ndim == 2:
        return int(target.shape[0]), int(target.shape[1])
    for key, entry in batch_entries(batch) if target.ndim == 1 else ():
        if key in call.target_keys and entry.ndim == 2:
            b, s = int(entry.shape[0]), int(entry.shape[1])
            for length in (s, s - 1):
                if length > 0 and target.numel() == b * length:
                    return b, length
    return None


def scale_of(values: Tensor) -> float:
    """The scale of ``values`` in float64, ``max(|mean|, std)``: what a head must reach."""
    flat = values.detach().double().reshape(-1)
    std = flat.std() if flat.numel() > 1 else torch.zeros((), dtype=torch.float64)
    mean, spread = torch.stack([flat.mean(), std]).tolist()  # sync: once
    return max(abs(mean), spread)


_SCALE_PASS_THROUGH = _PASS_THROUGH | {"ExpandBackward0", "ExpBackward0", "SoftplusBackward0", "AbsBackward0"}


def learned_scale(output: Tensor) -> bool:
    """Whether ``output`` is scaled, within its last few ops, by a small learned parameter."""
    width, fn = (output.shape[-1] if output.ndim else 1), output.grad_fn
    for _ in range(6):
        if fn is None:
            return False
        name = fn.name()
        if name in _SCALE_PASS_THROUGH:
            fn = fn.next_functions[0][0]
        elif name in ("MulBackward0", "AddBackward0", "SubBackward0"):
            if name == "MulBackward0" and any(_small_parameter(f, width) for f, _ in fn.next_functions):
                return True
            fn = next((f for f, _ in fn.next_functions if f is not None and f.name() != _LEAF), None)
        else:
            return False
    return False


_LEAF = "torch::autograd::AccumulateGrad"


def _small_parameter(fn: Any, width: int) -> bool:
    for _ in range(4):
        if fn is None or (fn.name() != _LEAF and fn.name() not in _SCALE_PASS_THROUGH):
            return False
        if fn.name() == _LEAF:
            return bool(fn.variable.numel() <= max(width, 1))
        fn = fn.next_functions[0][0]
    return False
