"""The sub-tests of ``target_leakage`` (hidden, target fed, copy targets, single feature, too good)."""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from lightning_recipes._stats import rank_correlation
from lightning_recipes.checks._num_classes import IGNORE_INDEX
from lightning_recipes.checks.data._relation import lookup_scores
from lightning_recipes.checks.model.causality_check import aligned_output
from lightning_recipes.checks.report import CheckSkipped
from lightning_recipes.harness import CannotRunOnCopy, LossRecorder
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import entries, replace_entries
from lightning_recipes.harness.isolation import seeded
from lightning_recipes.harness.loss_calls import CLASSIFICATION, loss_call_for, record_loss_calls

COPY_SHARE, COPY_MARGIN = 0.95, 0.5  # sequence targets: share of trained positions that copy an input token
MAX_MAJORITY = 0.9  # above this majority-class share, a lookup table's accuracy proves nothing
MAX_CLASSES = 32  # integral float targets with at most this many values are class labels
MIN_HELD_OUT = 20  # held-out samples needed before a per-feature accuracy means anything
MAX_FEATURES = 1 << 16  # features per batch tensor scored one by one; larger tensors are not scanned
# the input token the loss pairs output t with: t + 1, t, t - 1, t - 2, t + 2
_SHIFTS = ("next", "same", "back1", "back2", "ahead2")


@dataclass(frozen=True)
class Probe:
    """What one sub-test found: ``reason`` when it does not apply, else ``leak``, a summary and evidence."""

    reason: str | None = None
    leak: bool = False
    summary: str = ""
    action: str = ""
    evidence: dict[str, Any] = field(default_factory=dict)
    severity: Literal["warn", "fail"] = "fail"  # of a leak: "warn" where it may also be a legitimate signal

    def record(self) -> dict[str, Any]:
        """The JSON record the check reports under the sub-test's name."""
        if self.reason is not None:
            return {"reason": self.reason, **self.evidence}
        return {**self.evidence, "leak": self.leak, "message": self.summary}


def _same_storage(a: Tensor, b: Tensor) -> bool:
    try:
        return a is b or a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return False


def other_values(targets: Tensor, seed: int) -> Tensor | None:
    """``targets`` changed (almost) everywhere within their own range; ``None``: one value only."""
    if torch.is_floating_point(targets):
        finite = targets[torch.isfinite(targets)]
        if finite.numel() == 0:
            return None
        if bool((finite == finite.round()).all()):
            changed = other_values(targets.round().long(), seed)
            return None if changed is None else changed.to(targets.dtype)
        low, high = finite.amin(), finite.amax()
        if bool(low == high):
            return None
        rolled = targets.roll(1, 0) if targets.ndim and targets.shape[0] > 1 else targets
        return torch.where(rolled != targets, rolled, (low + high - targets).clamp(low, high))
    valid = targets != IGNORE_INDEX
    pool = torch.unique(targets[valid])
    if len(pool) < 2:
        return None
    generator = torch.Generator().manual_seed(seed)
    offsets = torch.randint(1, len(pool), targets.shape, generator=generator).to(targets.device)
    position = torch.searchsorted(pool, targets.clamp(min=int(pool[0])))
    return torch.where(valid, pool[(position + offsets) % len(pool)], targets)


def _observed(context: CheckContext, model: Any, batch: Any) -> tuple[Tensor | None, Tensor | None, bool]:
    """The last output seen in a seeded ``training_step``, its loss, and whether it took input gradients."""
    loss = None
    with torch.no_grad(), context.capture_forward(model) as captured, contextlib.suppress(CannotRunOnCopy):
        loss = seeded(context.seed, context.training_loss, model, batch).float()
    output = captured.last()
    return (None if output is None else output.detach()), loss, captured.input_gradients


def probe_target_fed(context: CheckContext, batch: Any, target_as_input: bool) -> tuple[Probe, bool | None]:
    """(0) Change only the target and watch the output; also whether the loss reads the target."""
    inputs, targets = context.split(batch)
    assert inputs is not None and targets is not None
    if _same_storage(inputs, targets):
        return Probe("the target is the input (a reconstruction loss): changing it changes the input"), None
    if targets.is_floating_point() and targets.shape == inputs.shape:
        return Probe("the target is shaped like the input (a second view, a clean image): an input"), None
    key, label = next(((k, name) for k, name, t in entries(batch) if t is targets), (None, "the target"))
    fixed = key is None or targets.ndim == 0 or targets.dtype == torch.bool
    replacement = None if fixed else other_values(targets, context.seed)
    if replacement is None:
        return Probe("the target cannot be replaced by other values of its own"), None
    model = context.copy_model().eval()
    if not model.automatic_optimization:
        return Probe("manual optimisation: training_step cannot be replayed outside the Trainer"), None
    base, base_loss, input_gradients = _observed(context, model, batch)
    again, _, _ = _observed(context, model, batch)  # the control: the same batch twice
    if base is None or again is None:
        return Probe("no output tensor was observed"), None
    if again.shape != base.shape or not torch.equal(again, base):
        return Probe("the output changes between two identical calls (a state updated, randomness)"), None
    sequence = inputs.ndim >= 2 and targets.shape[:2] == inputs.shape[:2] and targets.shape[1] >= 2
    # teacher forcing: a decoder fed the target and scored on each next token; output t may read targets <= t
    fed = not sequence and targets.ndim == 2 and targets.shape[1] >= 3
    shift = int(fed and _scores_next(context, model, batch, targets[:, 1:]))
    if sequence or shift:
        try:
            base = aligned_output(base, targets[:, 1:] if shift else inputs)
            sequence = True
        except CheckSkipped:
            sequence = False
    length = int(targets.shape[1]) if sequence else 1
    starts = sorted({shift, length // 2, length - 1}) if sequence and target_as_input else [0]
    moved, changed_loss = [], None
    for start in starts:
        changed = targets.clone()
        if sequence:
            changed[:, start:] = replacement[:, start:]
        replaced = replace_entries(batch, {key: changed if sequence else replacement})
        output, loss, _ = _observed(context, model, replaced)
        changed_loss = loss if start == starts[0] else changed_loss
        if output is None or output.numel() != base.numel():
            return Probe("the output's shape changed with the target"), None
        delta = (output.reshape(base.shape) - base).float().abs()
        moved.append(float(delta[:, : start + 1 - shift].amax() if sequence else delta.amax()))
    flat = base.float().reshape(len(base), -1)
    varies = float((flat.amax(-1) - flat.amin(-1)).amax()) > 0  # uniform: an unchanged loss proves nothing
    uses = _moved(base_loss, changed_loss) if varies else None
    evidence = {"starts": starts, "changes": moved, "loss_uses_target": uses}
    if not target_as_input:
        return Probe("turned off (target_as_input=False)", evidence=evidence), uses
    scale = float(base.float().abs().amax())
    leaking = [s for s, change in zip(starts, moved, strict=True) if change > 1e-5 * max(scale, 1e-12)]
    if not leaking:
        return Probe(summary="the outputs do not move when only the target changes", evidence=evidence), uses
    if input_gradients:  # adversarial training, gradient penalties: the target reaches the input by design
        reason = "the step differentiates with respect to its input, so the target may shape the input"
        return Probe(reason, evidence={**evidence, "input_gradients": True}), uses
    if context.target_guessed():  # no loss reads it as a target: the model reading it makes it an input
        reason = f"{label} is read by the model, by no loss as a target: an input (else `target_key`)"
        return Probe(reason, evidence={**evidence, "target_guessed": True}), uses
    where = f" at position {leaking[0]}" if sequence else ""
    summary = f"the output{where} moves by {max(moved):.3g} when only the target ({label}) changes"
    fix = "Pass the target only to the loss (decoders: shifted right); if meant: target_as_input=False."
    evidence = {**evidence, "leaking_starts": leaking}
    return Probe(leak=True, summary=summary, action=fix, evidence=evidence), uses


def _scores_next(context: CheckContext, model: Any, batch: Any, after: Tensor) -> bool:
    """Whether a loss of the step scores ``after`` (``target[:, 1:]``): the token after each one the decoder
    reads."""
    with LossRecorder(batch) as recorder, torch.no_grad(), contextlib.suppress(Exception):
        seeded(context.seed, context.training_loss, model, batch)
    scored = [c.target for c in recorder.calls if c.target is not None and c.target.numel() == after.numel()]
    return any(torch.equal(t.reshape(after.shape), after) for t in scored)


def probe_hidden_unscored(context: CheckContext, batch: Any) -> Probe:
    """(d) A float entry the model is shown only in part: the loss scores some of the part it is denied."""
    floats = {k: t.detach() for k, _, t in entries(batch) if t.is_floating_point()}
    if not floats or not context.model.automatic_optimization:
        return Probe("no float batch entry, or manual optimisation (the loss cannot be replayed)")
    model = context.copy_model().eval()
    scored = _entry_gradients(context, model, batch, floats, hold_outputs=True)  # what the loss itself reads
    read = _entry_gradients(context, model, batch, floats, hold_outputs=False)  # what the modules read
    judged = []  # the scored entries the model is shown only in part: their denied part holds real values
    for key, label, _ in entries(batch):
        if (gradient := scored.get(key)) is None:
            continue
        values, on = floats[key], gradient != 0
        shown = torch.zeros_like(values, dtype=torch.bool)
        for other, grad in read.items():
            if grad is not None and floats[other].shape == values.shape:
                shown |= (grad != 0) & (floats[other] == values)
        denied = values[~shown]
        if not on.any() or not shown.any() or denied.unique().numel() < 3:
            continue  # nothing scored, nothing shown, nothing real denied (a fill): not the premise
        judged.append(label)
        if (on & ~shown).any():
            continue
        summary = f"the loss scores {int(on.sum())} values of {label}, each shown to the model as it is; "
        summary += f"the {denied.numel()} it is denied are never scored"
        action = "Score the loss where the input hides the target (check the mask: 1 = hidden or 1 = kept?)."
        evidence = {"entry": label, "scored": int(on.sum()), "denied": denied.numel(), "measured": 1.0}
        return Probe(leak=True, summary=summary, action=action, evidence=evidence)
    if not judged:
        return Probe("no scored entry is shown to the model only in part (values behind a mask, a window)")
    return Probe(summary=f"the loss scores values the model is denied in {', '.join(judged)}")


def _entry_gradients(
    context: CheckContext, model: Any, batch: Any, floats: dict[Any, Tensor], hold_outputs: bool
) -> dict[Any, Tensor | None]:
    """Each float entry's gradient: of the loss with every module's output held, or of those outputs."""
    leaves = {key: values.clone().requires_grad_(True) for key, values in floats.items()}
    outputs: list[Tensor] = []

    def hook(module: Any, _args: Any, output: Any) -> Any:
        items = list(output) if type(output) in (tuple, list) else [output]
        if module is model or isinstance(module, torch.nn.modules.loss._Loss):
            return None
        if not hold_outputs:
            outputs.extend(t for t in items if isinstance(t, Tensor) and t.requires_grad)
            return None
        held = [t.detach() if isinstance(t, Tensor) else t for t in items]
        return type(output)(held) if type(output) in (tuple, list) else held[0]

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        with torch.enable_grad():
            loss = seeded(context.seed, context.training_loss, model, replace_entries(batch, leaves))
    finally:
        handle.remove()
    roots = [loss] if hold_outputs else outputs
    if not roots or not roots[0].requires_grad:
        return dict.fromkeys(leaves)
    noise = torch.Generator().manual_seed(context.seed)  # random weights: no two outputs cancel
    weights = [torch.randn(t.shape, generator=noise).to(t) for t in roots]
    return dict(zip(leaves, torch.autograd.grad(roots, list(leaves.values()), weights, allow_unused=True)))


def probe_copy_targets(context: CheckContext, batch: Any) -> Probe:
    """(a) Token inputs: how often the class the loss pulls each position toward is a nearby input token."""
    inputs, _ = context.split(batch)
    assert inputs is not None
    if inputs.ndim != 2 or torch.is_floating_point(inputs) or inputs.shape[1] < 2:
        return Probe("the inputs are not token ids [B, S]")
    if not context.model.automatic_optimization:
        return Probe("manual optimisation: the loss cannot be replayed")
    model = context.copy_model().eval()
    with torch.enable_grad(), context.capture_forward(model) as captured:
        loss = seeded(context.seed, context.training_loss, model, batch)
    logits = captured.last()
    try:
        aligned = logits is not None and aligned_output(logits, inputs).ndim == 3
    except CheckSkipped:
        aligned = False
    if logits is None or not aligned or not logits.requires_grad or not loss.requires_grad:
        return Probe("the output is not position-aligned logits [B, S, V]")
    logits.retain_grad()
    loss.backward()
    if logits.grad is None:
        return Probe("the loss does not flow through the observed output")
    grad = aligned_output(logits.grad.detach().float(), inputs)
    active, paired = grad.abs().amax(-1) > 0, grad.argmin(-1)
    shares, counts = copy_shares(paired, inputs, active)
    trained = int(counts[1])
    if trained < 8:
        return Probe(f"only {trained} trained positions")
    by_shift = dict(zip(_SHIFTS, shares, strict=True))
    evidence = {"shares": by_shift, "trained_positions": trained}
    worst = max(_SHIFTS[1:], key=lambda k: by_shift[k])
    if by_shift[worst] < COPY_SHARE or by_shift[worst] - by_shift["next"] < COPY_MARGIN:
        paired_next = f"the loss pairs output t with the next token at {by_shift['next']:.0%}"
        return Probe(summary=paired_next, evidence=evidence)
    where = {"same": "at the same position", "back1": "one back", "back2": "two back"}.get(worst, "")
    learns = f"to copy the input token {where}" if where else "the token two ahead, not the next"
    once = "Shift the targets once: in the dataset or in the loss, not in both."
    fix = "Shift the LM targets: logits[:, :-1] vs labels[:, 1:] (or the tokens)." if where else once
    summary = f"{by_shift[worst]:.0%} of {trained} trained positions learn {learns}"
    evidence = {**evidence, "leak_shift": worst, "measured": by_shift[worst]}
    return Probe(leak=True, summary=summary, action=fix, evidence=evidence)


def copy_shares(paired: Tensor, inputs: Tensor, active: Tensor) -> tuple[list[float], list[int]]:
    """Per offset (``t + 1, t, t - 1, t - 2, t + 2``): share of ``active`` positions copying it, and count."""
    shares, counts = [], []
    for shift in (-1, 0, 1, 2, -2):
        if shift >= 0:
            p, x, a = paired[:, shift:], inputs[:, : inputs.shape[1] - shift], active[:, shift:]
        else:
            p, x, a = paired[:, :shift], inputs[:, -shift:], active[:, :shift]
        counts.append(int(a.sum()))
        shares.append(float(((p == x) & a).sum() / a.sum().clamp(min=1)))
    return shares, counts


def per_sample_targets(context: CheckContext, batches: list[Any]) -> Tensor | None:
    """The targets of ``batches`` as one ``[N]`` tensor, unless a batch has not one real value per sample."""
    values = []
    for batch in batches:
        _, targets = context.split(batch)
        if targets is None or targets.ndim == 0 or targets.is_complex():
            return None
        targets = targets[:, 0] if targets.ndim == 2 and targets.shape[1] == 1 else targets
        if targets.ndim != 1:
            return None
        values.append(targets.detach().cpu())
    return torch.cat(values) if values else None


def _columns(
    context: CheckContext, train: list[Any], held: list[Any]
) -> list[tuple[Any, str, bool, tuple[int, ...], Tensor, Tensor]]:
    """Every per-sample tensor of the batch but the target, as columns (key, label, shape, rows)."""
    inputs, targets = context.split(train[0])
    size = len(targets) if targets is not None and targets.ndim > 0 else 0
    found = []
    for key, label, tensor in entries(train[0]):
        shape = tuple(tensor.shape[1:])
        per_sample = tensor is not targets and tensor.ndim > 0 and tensor.shape[0] == size
        if not per_sample or tensor.is_complex() or math.prod(shape) > MAX_FEATURES:
            continue
        rows = []
        for part in (train, held):
            values = [dict((k, t) for k, _, t in entries(b)).get(key) for b in part]
            if any(v is None or tuple(v.shape[1:]) != shape for v in values):
                break
            blocks = [v.detach().reshape(len(v), -1).float().cpu() for v in values if v is not None]
            rows.append(torch.cat(blocks))
        if len(rows) == 2:
            found.append((key, label, tensor is inputs, shape, rows[0], rows[1]))
    return found


def _name(label: str, is_input: bool, shape: tuple[int, ...], index: int) -> str:
    position = ", ".join(map(str, np.unravel_index(index, shape))) or "0"
    return f"{'inputs' if is_input else label}[:, {position}]"


def probe_single_feature(
    context: CheckContext, train: list[Any], held: list[Any], *, max_accuracy: float, max_correlation: float
) -> Probe:
    """(b) Each feature alone against the target: a lookup table's accuracy, or its |correlation|."""
    y_train, y_held = per_sample_targets(context, train), per_sample_targets(context, held)
    if y_train is None or y_held is None:
        return Probe("the targets are not one value per sample")
    if len(y_held) < MIN_HELD_OUT:
        return Probe(f"only {len(y_held)} held-out samples (need {MIN_HELD_OUT})")
    columns = _columns(context, train, held)
    if not columns:
        return Probe("no batch tensor with one row per sample besides the target")
    every = torch.cat([y_train, y_held])
    values, integral = torch.unique(every), bool((every == every.round()).all())
    categorical = not y_train.is_floating_point() or (integral and len(values) <= MAX_CLASSES)
    classes = len(values) if categorical else 0
    if classes == 1:
        return Probe("the labels hold one class")
    if classes:
        y_train, y_held = torch.searchsorted(values, y_train), torch.searchsorted(values, y_held)
        majority = float((y_held == torch.bincount(y_train, minlength=classes).argmax()).float().mean())
    best: tuple[float, int, int] = (-1.0, 0, 0)  # score, column, feature
    encoded: tuple[int, int] | None = None
    for c, (_, _, _, _, rows, held_rows) in enumerate(columns):
        if classes:
            scores = lookup_scores(rows, y_train, held_rows, y_held, classes).mean(1)
            both = _encodes_label(rows, y_train, classes) & _encodes_label(held_rows, y_held, classes)
            if encoded is None and bool(both.any()):
                encoded = (c, int(both.nonzero()[0, 0]))
        else:
            both = torch.cat([rows, held_rows])
            scores, banded = rank_correlation(both, every.float()), _bands_of(both, every.float())
            if encoded is None and bool(banded.any()) and not context.target_guessed():
                encoded = (c, int(banded.nonzero()[0, 0]))
        value, where = scores.max(0)
        best = max(best, (float(value), c, int(where)))
    score, c, index = best
    threshold = max_accuracy if classes else max_correlation
    determines = score >= threshold and (not classes or majority <= MAX_MAJORITY)
    if not determines and encoded is not None:
        c, index = encoded
    key, label, is_input, shape, _, _ = columns[c]
    name = _name(label, is_input, shape, index)
    evidence: dict[str, Any] = {"task": ("classification", classes) if classes else ("regression", None)}
    scanned = sum(int(rows.shape[1]) for *_, rows, _ in columns)
    evidence.update(name=name, score=score, threshold=threshold, features_scanned=scanned)
    if classes:
        evidence["majority_baseline"] = majority
    if not determines and encoded is None:
        best_feature = f"the best single feature, {name}, scores {score:.3f} (leak from {threshold:g})"
        return Probe(summary=best_feature, evidence=evidence)
    if encoded is not None and not determines:
        evidence["encodes_label_within_each_split"] = True
    if not is_input:
        evidence["model_reads_it"] = reads = _loss_reads(context, key, train[0])
        if reads is False:
            unread = f"{name} determines the label but the loss does not read it"
            return Probe(summary=unread, evidence=evidence)
    encodes = "encodes the label in each split" if classes else "is bands of the target, in its order"
    what = f"alone scores {score:.3f} on held-out labels" if determines else encodes
    fix = f"Remove {name} from what the model reads; check how each sample is built from the label."
    # a class lookup missing some held-out labels may be a sensor that tracks the label: no proof of a copy
    tracks = determines and bool(classes) and score < 1.0
    found = "a leak, or a feature that tracks it" if tracks else "the label is in the input"
    severity: Literal["warn", "fail"] = "warn" if tracks else "fail"
    summary = f"{name} {what}: {found}"
    return Probe(leak=True, summary=summary, action=fix, evidence=evidence, severity=severity)


def _encodes_label(x: Tensor, y: Tensor, classes: int) -> Tensor:
    """Per feature: constant within every class present twice or more, a different value per class."""
    counts = torch.bincount(y, minlength=classes)
    if int((counts >= 2).sum()) < 2 or bool((counts == 1).any()):
        return torch.zeros(x.shape[1], dtype=torch.bool)
    index = y[:, None].expand_as(x)
    low = torch.full((classes, x.shape[1]), math.inf).scatter_reduce(0, index, x, "amin")[counts >= 2]
    high = torch.full((classes, x.shape[1]), -math.inf).scatter_reduce(0, index, x, "amax")[counts >= 2]
    ordered = low.sort(0).values
    return ((high - low) == 0).all(0) & (ordered[1:] > ordered[:-1]).all(0) & torch.isfinite(ordered).all(0)


def _bands_of(x: Tensor, y: Tensor) -> Tensor:
    """Per feature: monotone in the target, with 2 to ``N / 2`` values (a price band, an age group)."""
    steps = x[y.argsort()].diff(dim=0)
    ordered = (steps >= 0).all(0) | (steps <= 0).all(0)
    changes = (steps != 0).sum(0)
    return ordered & (changes >= 1) & (changes < len(y) // 2)


def _loss_reads(context: CheckContext, key: Any, batch: Any) -> bool | None:
    """Whether ``training_step``'s loss changes when batch entry ``key`` is rolled across the batch."""
    value = dict((k, t) for k, _, t in entries(batch))[key]
    model = context.copy_model().eval()
    rolled = replace_entries(batch, {key: value.roll(1, 0)})
    return _moved(*(_observed(context, model, b)[1] for b in (batch, rolled)))


def _moved(before: Tensor | None, after: Tensor | None) -> bool | None:
    """Whether a loss moved beyond round-off (``None``: one of them is unknown)."""
    if before is None or after is None:
        return None
    return abs(float(after) - float(before)) > 1e-6 * max(abs(float(before)), 1e-12)


def probe_too_good(
    context: CheckContext,
    train: list[Any],
    held: list[Any],
    classes: int | None,
    *,
    steps: int,
    fraction: float,
) -> Probe:
    """(c) A copy trained ``steps`` steps with held-out loss below ``fraction x ln C`` is too good."""
    if steps == 0:
        return Probe("turned off (train_steps=0)")
    if not context.model.automatic_optimization:
        return Probe("manual optimisation")
    if classes is None:
        return Probe("needs classification with one label per sample")
    bound = fraction * math.log(classes)
    model = seeded(context.seed, context.copy_model)
    with torch.no_grad(), record_loss_calls(batch=train[0]) as calls:
        call = loss_call_for(calls, context.training_loss(model, train[0]))
    if call is None or call.function not in CLASSIFICATION:  # ln C is a cross-entropy's scale only
        return Probe("the loss is not one cross-entropy: ln C is not its scale")
    optimizers = context.build_optimizers(model).optimizers
    looks: list[dict[str, float]] = []
    step, look = 0, min(5, steps)
    while True:
        for index in range(step, look):
            context.optimization_step(model, optimizers, train[index % len(train)], index)
        step = look
        model.eval()
        with torch.no_grad():
            losses = [context.training_loss(model, b, i).float() for i, b in enumerate(held)]
            loss = float(torch.stack(losses).mean())
        model.train()
        looks.append({"step": step, "loss": loss})
        if loss < bound or step >= steps:
            break
        look = min(2 * look, steps)
    evidence = {"looks": looks, "bound": bound, "classes": classes}
    ratio = loss / math.log(classes)
    if loss >= bound:
        usual = f"held-out loss after {step} steps is {ratio:.2f} x ln {classes}"
        return Probe(summary=usual, evidence=evidence)
    summary = f"held-out loss {loss:.3g} after only {step} steps: {ratio:.3f} x ln {classes} "
    summary += f"(too good below {fraction:g})"
    fix = "Find the features giving the label away; run split_overlap; for an easy task: train_steps=0."
    return Probe(leak=True, summary=summary, action=fix, evidence=evidence, severity="warn")
