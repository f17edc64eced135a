"""One ``training_step`` seen from the loss: the loss calls, the model's output, the gradient of the returned
loss with respect to both, and the returned loss re-evaluated with the model's output replaced.

:func:`probe_step` runs ``training_step`` once on a copy, with gradients, under a
:class:`~lightning_recipes.harness.LossRecorder` (which loss consumed which tensors; the bounds of each
loss's input, read while the graph still holds them) and forward hooks on the module and its direct children
(which forward produced the model's output). :func:`loss_along` then runs the same step again with that
output replaced by ``output + s * direction``: the whole ``training_step`` after the forward (a minus sign,
a mask, a mean) is what is evaluated, not only the recorded loss function. Every run is seeded the same, so
random parts of a step (mixup, dropout in the loss) repeat exactly.

Example:
    >>> import torch
    >>> from lightning_recipes.harness import Harness
    >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
    >>> context = Harness(TinyClassifier(), random_classification_loader())
    >>> model = context.copy_model()
    >>> probe = probe_step(context, model, context.train_batches(1)[0])
    >>> probe.call.function, probe.output.shape == probe.output_grad.shape
    ('cross_entropy', True)
    >>> batch = context.train_batches(1)[0]
    >>> ray = descent_ray(probe.output, probe.output_grad)
    >>> losses = loss_along(context, model, batch, probe, ray, [0.0, 1.0])
    >>> losses[1] < losses[0]
    True
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
from torch.nn.modules.loss import _Loss
from torch.overrides import TorchFunctionMode

from lightning_recipes.checks._expected_loss import KINDS, loss_call_for
from lightning_recipes.checks._loss_floor import input_bounds
from lightning_recipes.harness import Harness, LossCall, LossRecorder, first_tensor
from lightning_recipes.harness.loss_calls import LOSS_FUNCTIONS

__all__ = ["LossProbe", "Ray", "descent_ray", "falls_without_bound", "loss_along", "probe_step"]


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
