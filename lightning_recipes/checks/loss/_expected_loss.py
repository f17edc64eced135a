"""Which loss function produced the returned loss, what an untrained model scores on it, its floor."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from lightning_recipes.harness import LossCall
from lightning_recipes.harness.loss_calls import (  # noqa: F401  (their home; re-used here)
    CLASSIFICATION,
    KINDS,
    REGRESSION,
    loss_call_for,
    record_loss_calls,
)

_PRIOR_SHARE = 0.25  # KL(labels || mean prediction) below this share of KL(labels || uniform): a prior
_MIN_SKEW = 0.1  # nats: labels closer than this to uniform are read as uniform (the verdict cannot change)


def is_prior_output(kl_to_prediction: float, kl_to_uniform: float, categories: int, samples: int) -> bool:
    """Whether a mean prediction ``q`` is the label prior ``p`` (small ``KL(p || q)``, ``p`` not uniform)."""
    noise = (categories - 1) / (2 * max(samples, 1))
    return kl_to_uniform > max(_MIN_SKEW, 3 * noise) and kl_to_prediction < _PRIOR_SHARE * kl_to_uniform


@dataclass(frozen=True)
class Expectation:
    """What an untrained model scores: ``value``, ``source`` (else why not), a short ``label`` (``ln 10``)."""

    value: float | None
    source: str
    num_classes: int | None = None
    label: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def target_of(call: LossCall) -> Tensor:
    """The target tensor of a recorded call (each of :data:`KINDS` has one)."""
    if call.target is None:
        raise ValueError(f"the {call.function} call has no target tensor")
    return call.target


@dataclass(frozen=True)
class LossFloor:
    """The lowest loss reachable (as reduced), whether an input bound causes it, why, own minimum, a fix."""

    value: float
    bounded: bool
    how: str
    minimum: float = 0.0
    fix: str = "Return raw logits, let the loss apply softmax/sigmoid (a sigmoid per label); no clamp."


def known_floor(
    calls: Sequence[LossCall], loss: Tensor, again: tuple[Sequence[LossCall], Tensor] | None = None
) -> LossFloor | None:
    """The floor of ``loss`` when it is one recorded call or the plain sum of all, each of known floor, or a
    constant multiple of one call: the same ratio on ``again``, another batch's calls and loss."""
    call = loss_call_for(calls, loss)
    if call is None and again is not None and (multiple := _constant_multiple((calls, loss), again)):
        (scale, one), floor = multiple, own_floor(multiple[1])
        return floor and LossFloor(scale * floor[0], False, f"{scale:.4g} x {one.function} ({floor[1]})")
    terms = [call] if call is not None else [c for c in calls if c.loss is not None and c.loss.numel() > 0]
    if call is None:  # a plain sum of two or more calls, else not known
        value = loss.detach().double().reshape(-1).cpu()
        if len(terms) < 2 or value.numel() != 1:
            return None
        means = [c.loss.detach().double().mean().cpu() for c in terms if c.loss is not None]
        if not bool(torch.isclose(torch.stack(means).sum(), value[0], rtol=1e-5)):  # sync: once
            return None
    floors = [floor for floor in map(own_floor, terms) if floor is not None]
    if len(floors) < len(terms):
        return None
    hows = [f"{c.function} ({how})" for c, (_, how) in zip(terms, floors, strict=True)]
    how = hows[0] if len(hows) == 1 else "sum of " + " + ".join(hows)
    return LossFloor(sum(value for value, _ in floors), False, how)


_SAME_RATIO = 1e-6  # relative: two batches' loss-to-call ratios this close are one constant (rounding)


def _constant_multiple(*pairs: tuple[Sequence[LossCall], Tensor]) -> tuple[float, LossCall] | None:
    """``(c, call)`` when each ``(calls, loss)`` is ``c`` times its one scalar call, the same ``c`` on each
    (``4 * cross_entropy`` over four heads, a loss in bits), else ``None``."""
    ones = [[(c, c.loss) for c in calls if c.loss is not None and c.loss.numel() > 0] for calls, _ in pairs]
    if any(len(o) != 1 or o[0][1].numel() != 1 or v.numel() != 1 for o, (_, v) in zip(ones, pairs)):
        return None
    c, d = (
        float(v.detach().double()) / float(o[0][1].detach().double()) for o, (_, v) in zip(ones, pairs)
    )  # sync
    return (c, ones[0][0][0]) if math.isfinite(c) and c > 0 and abs(c - d) <= _SAME_RATIO * c else None


def own_floor(call: LossCall) -> tuple[float, str] | None:
    """The lowest value of one loss call over every prediction, as reduced, and what it is; else ``None``."""
    reduction = call.kwargs.get("reduction", "mean")
    if call.function in REGRESSION or call.function == "nll_loss":
        return 0.0, "0"
    if call.target is None or call.function not in KINDS:
        return None
    target, weighted = call.target.detach().double(), call.kwargs.get("weight") is not None
    if call.function == "cross_entropy":
        classes, smoothing = call.num_classes, float(call.kwargs.get("label_smoothing") or 0.0)
        assert classes is not None
        if call.integer_target and smoothing <= 0:
            return 0.0, "0"
        if weighted:
            return None
        if call.integer_target:
            kept = int((call.target != call.kwargs.get("ignore_index", -100)).sum())  # sync: once
            total = ce_floor(classes, smoothing, math.inf) * kept
            divisor = 1 if reduction == "sum" else max(kept if reduction == "mean" else target.numel(), 1)
            return total / divisor, f"label smoothing {smoothing:g}'s entropy"
        if bool((target < 0).any()):  # sync: once
            return None
        smoothed = target * (1 - smoothing) + smoothing / classes
        dim = 1 if target.ndim >= 2 else 0
        mass = smoothed.sum(dim)  # 1 for a distribution; m for m-hot targets (floor m ln m)
        entropy = torch.xlogy(mass, mass) - torch.xlogy(smoothed, smoothed).sum(dim)
        return reduced(entropy, reduction), "the targets' entropy"
    if bool(((target == 0) | (target == 1)).all()):  # sync: once
        return 0.0, "0"
    if weighted or call.kwargs.get("pos_weight") is not None:
        return None
    return reduced(binary_entropy(target), reduction), "the targets' entropy"


def ce_floor(classes: int, smoothing: float, spread: float) -> float:
    """Lowest per-sample cross-entropy over ``classes``, label smoothing given, logit spread <= ``spread``."""
    top = 1 - smoothing + smoothing / classes
    best = math.inf if smoothing <= 0 else math.log(top * (classes - 1) / (1 - top))
    s = min(best, spread)
    return 0.0 if math.isinf(s) else -top * s + s + math.log1p((classes - 1) * math.exp(-s))


def binary_entropy(target: Tensor) -> Tensor:
    """The per-element binary entropy of probability targets: the lowest binary cross-entropy they allow."""
    return -(torch.xlogy(target, target) + torch.xlogy(1 - target, 1 - target))


def reduced(per_element: Tensor, reduction: str) -> float:
    """``per_element`` reduced as a loss with ``reduction`` (``"sum"``, else the mean), as a float."""
    return float(per_element.sum() if reduction == "sum" else per_element.mean())  # sync: once


def expected_initial_loss(call: LossCall, batches: Sequence[LossCall] = ()) -> Expectation:
    """The loss an untrained model scores on ``call`` (``ln C``, ``ln 2``, prior entropy; else why not)."""
    if call.function in ("cross_entropy", "nll_loss"):
        return _categorical(call, [call, *batches])
    if call.function in ("binary_cross_entropy_with_logits", "binary_cross_entropy"):
        return _binary(call, [call, *batches])
    kind = " (regression, reconstruction)" if call.function in REGRESSION else ""
    return Expectation(None, f"{call.function}{kind} has no known value at init")


def _categorical(call: LossCall, calls: list[LossCall]) -> Expectation:
    classes = call.num_classes
    assert classes is not None
    uniform = math.log(classes)
    scores = "logits" if call.function == "cross_entropy" else "log-probabilities"
    kind = "integer" if call.integer_target else "soft"
    shapes = f"{scores} {list(call.output.shape)} for {kind} targets {list(target_of(call).shape)}"
    smoothing = float(call.kwargs.get("label_smoothing") or 0.0) if call.function == "cross_entropy" else 0.0
    smoothed = {"floor": ce_floor(classes, smoothing, math.inf), "label_smoothing": smoothing}
    extra = smoothed if smoothing > 0 else {}
    plain = Expectation(uniform, f"ln {classes}, {shapes}", classes, f"ln {classes}", extra=extra)
    if not smoothing and (masked := _open_classes(call, classes)) is not None:  # a mask shuts the rest
        open_, on_shut = masked
        source = f"ln of each row's classes not masked out (mean {float(open_.mean()):.3g} of {classes})"
        extra = {"targets_on_masked_classes": on_shut}
        return Expectation(float(open_.log().mean()), source, classes, "mean ln(open classes)", extra=extra)
    if not call.integer_target or classes < 2:
        return plain
    prior, predicted, samples = _class_frequencies(calls, classes)
    if prior is None or predicted is None:
        return plain
    seen = prior > 0
    entropy = float(-(prior[seen] * prior[seen].log()).sum())  # sync: once
    kl_prediction = float((prior[seen] * (prior[seen] / predicted[seen].clamp_min(1e-12)).log()).sum())
    if not is_prior_output(kl_prediction, uniform - entropy, classes, samples):
        return plain
    return _prior(call, entropy, kl_prediction, uniform - entropy, **extra)


#: A score this far below its row's largest (a mask's -1e4 or -inf) shuts its class: e^-50 of it.
SHUT_BELOW = 50.0


def _open_classes(call: LossCall, classes: int) -> tuple[Tensor, int] | None:
    """Per counted row, the classes whose score lies within ``SHUT_BELOW`` of the row's largest, and the rows
    whose target is (or puts mass on) a shut class; ``None`` when every row has all ``classes`` open."""
    scores, target = (t.detach() for t in (call.output, target_of(call)))
    scores = (scores.movedim(1, -1) if scores.ndim >= 2 else scores).reshape(-1, classes)
    if call.integer_target:
        kept = target.reshape(-1) != call.kwargs.get("ignore_index", -100)
        scores, target = scores[kept], F.one_hot(target.reshape(-1)[kept].clamp(0, classes - 1), classes)
    target = (target.movedim(1, -1) if target.ndim >= 2 else target).reshape(-1, classes)
    shut = scores < scores.amax(-1, keepdim=True) - SHUT_BELOW
    open_ = (~shut).sum(-1).double()
    if not len(open_) or not bool((open_ < classes).any()):  # sync: once
        return None
    return open_, int(((target > 0) & shut).any(-1).sum())


def _class_frequencies(calls: list[LossCall], classes: int) -> tuple[Tensor | None, Tensor | None, int]:
    """Label frequencies and the mean predicted distribution over all recorded batches."""
    counts = torch.zeros(classes, dtype=torch.float64)
    predicted = torch.zeros(classes, dtype=torch.float64)
    rows = 0
    for call in calls:
        scores = call.output.detach().double()
        scores = (scores.movedim(1, -1) if scores.ndim >= 2 else scores).reshape(-1, classes)
        target = target_of(call).reshape(-1).to(scores.device)
        keep = (target != call.kwargs.get("ignore_index", -100)) & (target >= 0) & (target < classes)
        probs = scores.exp() if call.function == "nll_loss" else scores.softmax(-1)
        counts += torch.bincount(target[keep], minlength=classes)[:classes].double().cpu()
        predicted += probs[keep].sum(0).cpu()
        rows += int(keep.sum())  # sync: once per batch
    return (counts / rows, predicted / rows, rows) if rows else (None, None, 0)


def _binary(call: LossCall, calls: list[LossCall]) -> Expectation:
    logits = call.function == "binary_cross_entropy_with_logits"
    target = target_of(call)
    if not bool(((target == 0) | (target == 1)).all()):  # sync: once
        return Expectation(None, f"{call.function} on targets that are not 0/1 has no known value at init")
    pos_weight = call.kwargs.get("pos_weight") if logits else None
    ln2 = math.log(2)
    if isinstance(pos_weight, Tensor):
        t = target.double()
        weighted = float((pos_weight.double() * t + (1 - t)).mean()) * ln2  # sync: once
        source = f"ln 2 per output weighted by pos_weight, {call.function}"
        return Expectation(weighted, source, label="ln 2 weighted")
    rate, predicted, samples = _positive_rates(calls, logits)
    entropy_t = binary_entropy(rate)
    q = predicted.clamp(1e-12, 1 - 1e-12)
    kl_t = -entropy_t - rate * q.log() - (1 - rate) * (1 - q).log()  # KL(rate || q) per output
    kl_prediction, kl_uniform = float(kl_t.sum()), float((ln2 - entropy_t).sum())
    if is_prior_output(kl_prediction, kl_uniform, 1 + len(rate), samples):
        return _prior(call, float(entropy_t.mean()), kl_prediction, kl_uniform)  # sync: once
    return Expectation(ln2, f"ln 2 per output, {call.function} at p = 0.5", label="ln 2")


def _prior(call: LossCall, entropy: float, kl: float, uniform: float, **extra: Any) -> Expectation:
    """The entropy of the label prior, expected when the mean prediction at init is that prior."""
    source = f"entropy of the label prior ({call.function}): KL {kl:.3f} nats at init, {uniform:.3f} uniform"
    extra |= {"prior_entropy": entropy, "prior_kl": kl}
    return Expectation(entropy, source, call.num_classes, "prior entropy", extra=extra)


def _positive_rates(calls: list[LossCall], logits: bool) -> tuple[Tensor, Tensor, int]:
    """Per-output positive rate and mean predicted probability (one column for non-2-D outputs)."""
    targets, probs = [], []
    for call in calls:
        p = call.output.detach().double()
        p = p.sigmoid() if logits else p
        target = target_of(call)
        if target.numel() != p.numel():
            continue
        columns = p.shape[-1] if p.ndim == 2 else 1
        targets.append(target.detach().double().reshape(-1, columns))
        probs.append(p.reshape(-1, columns))
    rows = torch.cat(targets)
    return rows.mean(0), torch.cat(probs).mean(0), len(rows)
