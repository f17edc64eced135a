"""grad_flow's second stage: the gradient autograd reports is the loss's derivative (central differences)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_leaves

from lightning_recipes.harness import Harness, map_tensors, preserved_rng
from lightning_recipes.harness.isolation import seed_all

STEP = 1e-5  # along a direction scaled to each tensor's RMS: near float64's best central step (eps ** 1/3)
SMOOTH = 1e-3  # the differences at STEP and STEP / 2 agree to this share of the slope: smooth there
MARGIN = 0.01  # a disagreement past this share of the slope and 100x the smoothness gap is not noise
SUSPECT = 1e-6  # the whole model's disagreement past this share (float64 noise is ~1e-9): compare by tensor
MAX_GROUPS = 8  # parameter tensors compared one by one, or in this many contiguous groups


class _StopGradients(TorchFunctionMode):
    """Records what the user's code cuts from autograd in the first pass and plays it back in the next."""

    def __init__(self, recorded: list[Any] | None = None) -> None:
        super().__init__()
        self.replay = recorded is not None
        self.values: list[Any] = [] if recorded is None else recorded
        self.count, self.user_no_grad = 0, False

    def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        func = Tensor.double if func is Tensor.float else func  # a mask or one-hot made float: float64 here
        out = func(*args, **(kwargs or {}))
        if getattr(func, "__name__", "") == "_set_grad_enabled":
            self.user_no_grad = not args[0]
        held = isinstance(out, float) or (
            isinstance(out, Tensor) and out.is_floating_point() and not out.requires_grad
        )
        if not held or not (torch.is_grad_enabled() or self.user_no_grad):
            return out
        if not any(isinstance(t, Tensor) and t.requires_grad for t in tree_leaves((args, kwargs))):
            return out
        if not self.replay:
            self.values.append(out.detach().clone() if isinstance(out, Tensor) else out)
            return out
        self.count += 1
        if self.count > len(self.values) or type(kept := self.values[self.count - 1]) is not type(out):
            raise RuntimeError("a perturbed pass cut other values from autograd than the first")
        return kept.clone() if isinstance(kept, Tensor) else kept


def derivative_check(context: Harness, model: Any, trainable: Sequence[tuple[str, Tensor]]) -> dict[str, Any]:
    """Autograd's directional derivatives vs central differences of the loss in float64; the evidence."""
    default = torch.get_default_dtype()
    with preserved_rng():
        torch.set_default_dtype(torch.float64)
        try:
            return _compare(context, model.double(), trainable)
        except Exception as err:  # the user's code in float64 or under the recording mode; a replay diverged
            return {"compared": False, "why": f"{type(err).__name__} in float64: {err}"[:160]}
        finally:
            torch.set_default_dtype(default)


def _compare(context: Harness, model: Any, trainable: Sequence[tuple[str, Tensor]]) -> dict[str, Any]:
    batch = context.train_batches(1)[0]
    live = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    start = {name: t.detach().clone() for name, t in live.items()}
    passes = 0

    def loss(shift: list[tuple[Tensor, Tensor]], mode: _StopGradients) -> Tensor:
        nonlocal passes
        passes += 1
        with torch.no_grad():
            for name, t in live.items():  # buffers a forward updates, then the parameters, as they were
                t.copy_(start[name])
            for p, d in shift:
                p.add_(d)
        seed_all(context.seed)
        inputs = map_tensors(batch, lambda t: t.double() if t.is_floating_point() else t.clone())
        with mode:
            return context.training_loss(model, inputs, 0)

    first = _StopGradients()
    value = loss([], first)
    if value.dtype != torch.float64 or not bool(value.isfinite()):
        why = f"the loss is {value.dtype} once the model is float64, or not finite"
        return {"compared": False, "why": why}
    custom = _custom_functions(value)
    params = [p for _, p in trainable]
    grads = list(torch.autograd.grad(value, params, allow_unused=True, materialize_grads=True))  # 0: unused
    base, again = float(value.detach()), float(loss([], _StopGradients(first.values)).detach())
    if abs(again - base) > 1e-12 * max(1.0, abs(base)):
        return {"compared": False, "why": "the loss differs between two passes under one seed"}
    gen = torch.Generator(device="cpu").manual_seed(context.seed)
    floor = 1e-9 * max(1.0, abs(base))

    def slopes(chosen: list[int], dirs: list[Tensor]) -> tuple[float, float, float, float, float]:
        """Autograd's slope, differences at STEP and STEP / 2, the scale, one-sided ones' gap (at a kink)."""
        parts = [float((grads[i] * dirs[i]).sum()) for i in chosen]
        at = [
            float(loss([(params[i], t * dirs[i]) for i in chosen], _StopGradients(first.values)).detach())
            for t in (STEP, -STEP, STEP / 2, -STEP / 2)
        ]
        sides = (at[2] - base) - (base - at[3])
        wide, narrow = (at[0] - at[1]) / (2 * STEP), (at[2] - at[3]) / STEP
        return sum(parts), wide, narrow, float(np.hypot.reduce(parts)), abs(sides) / (STEP / 2)

    def judge(slope: float, wide: float, narrow: float, scale: float, sides: float, margin: float) -> str:
        size = max(scale, abs(narrow), floor)
        gap, off = max(abs(wide - narrow), sides), abs(slope - narrow)
        if gap > SMOOTH * size:
            return "rough"
        if off <= max(100 * gap, margin * size):
            return "agree"
        return "flat" if abs(narrow) <= MARGIN * abs(slope) else "disagree"

    # Two directions scaled to each tensor's RMS: a random one on the elements autograd moves (a zero is a
    # stop-gradient, stage one's), and the gradient, along which a loss that stays put marks a surrogate.
    pairs = list(zip(params, grads, strict=True))
    ways = [
        [torch.randn(p.shape, generator=gen).to(p) * _rms(p) * (g != 0) for p, g in pairs],
        [g * _rms(p) / g.pow(2).mean().sqrt().clamp(min=1e-30) for p, g in pairs],
    ]

    def kind(chosen: list[int], margin: float) -> tuple[str, tuple[float, float, float, float, float]]:
        """The verdict on the tensors ``chosen`` along both directions, and the slopes it rests on."""
        random_way, gradient_way = slopes(chosen, ways[0]), slopes(chosen, ways[1])
        verdicts = judge(*random_way, margin), judge(*gradient_way, margin)
        if verdicts[1] == "flat":
            return "flat", gradient_way
        if "disagree" in verdicts:
            return "disagree", random_way if verdicts[0] == "disagree" else gradient_way
        return ("rough" if "rough" in verdicts and "agree" not in verdicts else "agree"), gradient_way

    everything = list(range(len(params)))
    verdict, joint = kind(everything, SUSPECT)  # a screen: one tensor's error is diluted in the whole
    found: dict[str, Any] = {"compared": verdict != "rough", "slope": joint[0], "difference": joint[2]}
    found.update(mismatch=[], surrogate=[], passes=passes, custom_functions=custom)
    if verdict == "rough":
        found["why"] = "the loss is not smooth along either direction (kinks, jumps, rounding)"
    if verdict in ("agree", "rough"):
        return found
    size = -(-len(params) // MAX_GROUPS)
    for lo in range(0, len(params), size):
        group = everything[lo : lo + size]
        names = [trainable[i][0] for i in group]
        local, evidence = kind(group, MARGIN)
        if local in ("disagree", "flat"):
            found["mismatch" if local == "disagree" else "surrogate"] += names
        if local == "disagree" and len(found["mismatch"]) == len(names):
            found.update(slope=evidence[0], difference=evidence[2])  # the first group's, for the summary
    found["passes"] = passes
    if not found["mismatch"]:
        found["why"] = "no tensor or group disagrees alone, or only as a surrogate"
    return found


def _custom_functions(loss: Tensor) -> list[str]:
    """The custom ``autograd.Function`` nodes and backward hooks in the loss's graph, by name."""
    seen: dict[int, Any] = {}
    todo: list[Any] = [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is not None and id(node) not in seen:
            seen[id(node)] = node
            todo += [child for child, _ in node.next_functions]
    custom = (n for n in seen.values() if isinstance(n, torch.autograd.function.BackwardCFunction))
    return sorted({type(n).__name__.removesuffix("Backward") for n in custom})


def _rms(p: Tensor) -> Tensor:
    """The scale of a direction in ``p``: its root mean square, at least 0.01 (a zero-initialised bias)."""
    return p.detach().pow(2).mean().sqrt().clamp(min=1e-2)
