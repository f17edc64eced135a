"""Which target values can move a classification loss: the gradient of the loss with respect to its input,
grouped by target value, and whether a value the loss ignores is padding.

A target value whose positions all get exactly zero gradient is invisible to training: ``ignore_index`` on a
real class, a ``weight`` of 0, a mask that drops it. Positions the model already predicts with certainty
(a saturated softmax or sigmoid, whose gradient may round to exactly 0) are set aside, not counted as
evidence either way.

Example:
    >>> import torch
    >>> from torch.nn import functional as F
    >>> from lightning_recipes.harness import LossRecorder
    >>> logits = torch.zeros(6, 3, requires_grad=True)
    >>> target = torch.tensor([0, 1, 2, 0, 1, 2])
    >>> with LossRecorder() as recorder:
    ...     loss = F.cross_entropy(logits, target, ignore_index=0)
    >>> grad, = torch.autograd.grad(loss, logits)
    >>> evidence = label_evidence(recorder.calls[0], grad)
    >>> [(e.name, e.count, e.moved) for e in evidence.values()]
    [('class 0', 2, 0), ('class 1', 2, 2), ('class 2', 2, 2)]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from lightning_recipes.harness import LossCall, batch_entries

__all__ = ["CLASSIFICATION", "LabelCount", "drop_cause", "label_evidence", "padding_reason"]

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
