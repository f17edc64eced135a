"""The sub-tests of ``target_leakage``, on the batch's tensors by key (:class:`FeatureGroup`).

(0) :func:`probe_target_fed`: change only the target and watch the model's output. (a)
:func:`probe_copy_targets`: the class the loss pulls each output position toward must not be an input
token the model has already read. (b) :func:`probe_single_feature`: one feature or batch entry that
determines the label (a lookup table per feature, or the correlation with a regression target). (c)
:func:`probe_too_good`: a held-out loss far below ``ln C`` after a few steps. The arithmetic is in
``_leakage_statistics``.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import Tensor

from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks._num_classes import IGNORE_INDEX
from lightning_recipes.checks.data._leakage_statistics import (
    CopyShares,
    CopyShift,
    class_values,
    copy_leak,
    copy_shares,
    encodes_label,
    lookup_accuracy,
    lookup_leaks,
    loss_changed,
    max_abs_correlation,
    output_moved,
    too_good_bound,
)
from lightning_recipes.checks.model.causality_check import aligned_output
from lightning_recipes.checks.report import CheckSkipped
from lightning_recipes.harness import CannotRunOnCopy
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import batch_size_of, slice_batch

__all__ = [
    "MAX_FEATURES",
    "MIN_HELD_OUT",
    "MIN_TRAINED_POSITIONS",
    "CopyTargets",
    "FeatureGroup",
    "Look",
    "SingleFeature",
    "TargetFed",
    "TooGood",
    "entries",
    "feature_groups",
    "first_samples",
    "label_of",
    "other_values",
    "per_sample_targets",
    "probe_copy_targets",
    "probe_single_feature",
    "probe_target_fed",
    "probe_too_good",
    "replace_entry",
    "same_tensor",
    "tensor_at",
]


MAX_FEATURES = 1 << 16  # features per batch tensor looked at one by one; larger tensors are not scanned


@dataclass(frozen=True)
class FeatureGroup:
    """One tensor of the batch flattened to features: ``train`` ``[N, D]`` training rows, ``held`` ``[M, D]``
    held-out rows; ``key``/``label`` name the batch entry, ``shape`` is one sample's shape.

    Example:
        >>> import torch
        >>> group = FeatureGroup(None, "batch", True, (2, 3), None, torch.zeros(1, 6), torch.zeros(1, 6))
        >>> group.feature_name(4)
        'inputs[:, 1, 1]'
    """

    key: Any
    label: str
    is_input: bool
    shape: tuple[int, ...]
    first_batch: Any  # the first training batch, for a probe that re-runs the loss on it
    train: Tensor
    held: Tensor

    def feature_name(self, index: int) -> str:
        """``inputs[:, i, j]`` (or ``batch['key'][:, i, j]``) for flat feature ``index``."""
        position = []
        for size in reversed(self.shape):
            position.append(index % size)
            index //= size
        where = ", ".join(str(p) for p in reversed(position)) if position else "0"
        return f"{'inputs' if self.is_input else self.label}[:, {where}]"


def entries(batch: Any) -> list[tuple[Any, str, Tensor]]:
    """``(key, label, tensor)`` for every tensor at the top level of ``batch`` (key ``None``: the batch is a
    tensor).

    Example:
        >>> import torch
        >>> [(k, label) for k, label, _ in entries({"x": torch.zeros(1), "n": 3})]
        [('x', "batch['x']")]
    """
    if isinstance(batch, Tensor):
        return [(None, "batch", batch)]
    if isinstance(batch, Mapping):
        return [(k, f"batch[{k!r}]", v) for k, v in batch.items() if isinstance(v, Tensor)]
    if isinstance(batch, (list, tuple)):
        return [(i, f"batch[{i}]", v) for i, v in enumerate(batch) if isinstance(v, Tensor)]
    return []


def tensor_at(batch: Any, key: Any) -> Tensor | None:
    """The tensor of ``batch`` at ``key`` (``None`` if there is none)."""
    return {k: tensor for k, _, tensor in entries(batch)}.get(key)


def label_of(batch: Any, key: Any) -> str:
    """How a message names the entry at ``key``: ``batch[1]``, ``batch['label']``."""
    return next((label for k, label, _ in entries(batch) if k == key), "the target")


def replace_entry(batch: Any, key: Any, value: Tensor) -> Any:
    """A new batch with entry ``key`` replaced (dict key or tuple/list index).

    Example:
        >>> import torch
        >>> replace_entry((torch.zeros(1), torch.zeros(1)), 1, torch.ones(1))[1].tolist()
        [1.0]
    """
    if isinstance(batch, Tensor):
        return value
    if isinstance(batch, Mapping):
        changed: Any = dict(batch)
        changed[key] = value
        return changed
    items = list(batch)
    items[key] = value
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*items)
    return tuple(items) if isinstance(batch, tuple) else items


def same_tensor(a: Tensor, b: Tensor) -> bool:
    """Whether two batch entries are one tensor (or views of one storage): a target read from the input."""
    if a is b:
        return True
    try:
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    except (RuntimeError, NotImplementedError):  # tensors without storage (meta, some subclasses)
        return False


def first_samples(context: CheckContext, batch: Any, count: int) -> Any:
    """The first ``count`` samples of ``batch`` (the whole batch if it is no larger or has no size)."""
    size = batch_size_of(batch, context.input_key)
    return batch if size is None or size <= count else slice_batch(batch, count, size)


def per_sample_targets(context: CheckContext, batches: list[Any]) -> Tensor | None:
    """The targets of ``batches`` as one ``[N]`` tensor, or ``None`` unless every batch has one real value
    per sample (``[B]`` or ``[B, 1]``)."""
    values = []
    for batch in batches:
        _, targets = context.split(batch)
        if targets is None or targets.ndim == 0 or targets.is_complex():
            return None
        if targets.ndim == 2 and targets.shape[1] == 1:
            targets = targets[:, 0]
        if targets.ndim != 1:
            return None
        values.append(targets.detach())
    return torch.cat(values) if values else None


def feature_groups(context: CheckContext, train: list[Any], held_out: list[Any]) -> list[FeatureGroup]:
    """The input and every other per-sample tensor of the batch (not the target), as feature matrices.
    Tensors over ``MAX_FEATURES`` features per sample, or missing or reshaped in some batch, are left out."""
    inputs, targets = context.split(train[0])
    size = len(targets) if targets is not None and targets.ndim > 0 else 0
    groups = []
    for key, label, tensor in entries(train[0]):
        if tensor is targets or tensor.ndim == 0 or tensor.shape[0] != size or tensor.is_complex():
            continue
        shape = tuple(tensor.shape[1:])
        if math.prod(shape) > MAX_FEATURES:
            continue
        train_rows = _rows(train, key, shape)
        held_rows = None if train_rows is None else _rows(held_out, key, shape)
        if train_rows is not None and held_rows is not None:
            groups.append(FeatureGroup(key, label, tensor is inputs, shape, train[0], train_rows, held_rows))
    return groups


def _rows(batches: list[Any], key: Any, shape: tuple[int, ...]) -> Tensor | None:
    """Entry ``key`` of every batch as ``[samples, features]`` floats, or ``None`` if a batch lacks it or
    holds it in another shape."""
    parts = []
    for batch in batches:
        value = tensor_at(batch, key)
        if value is None or tuple(value.shape[1:]) != shape:
            return None
        parts.append(value.detach().reshape(len(value), -1).float())
    return torch.cat(parts)


@dataclass(frozen=True)
class TargetFed:
    """What (0) found.

    Args:
        reason: Why the test does not apply (``None`` when it does). The measurements may still be there
            (``target_as_input=False`` measures whether the loss reads the target, then reports the test off).
        starts: Sequence positions from which the targets were changed (``(0,)`` for one target per sample);
            ``None`` when nothing was measured.
        changes: Largest output change at each start (outputs up to the start, for sequence targets).
        loss_uses_target: Whether the loss changed with the target alone; ``None`` when unknown (the outputs
            are uniform, so an unchanged loss proves nothing, or the step returned no loss).
        leaking: The starts where the output moved.
        sequence: Whether the targets were treated as a sequence ``[B, S]`` aligned with the inputs.
        target_label: How the message names the target entry (``batch[1]``).

    Example:
        >>> TargetFed(starts=(0,), changes=(0.0,), loss_uses_target=True).details()["message"]
        '(0) the outputs do not change when only the target changes'
    """

    reason: str | None = None
    starts: tuple[int, ...] | None = None
    changes: tuple[float, ...] = ()
    loss_uses_target: bool | None = None
    leaking: tuple[int, ...] = ()
    sequence: bool = False
    target_label: str = "the target"

    @property
    def leak(self) -> bool:
        """The output moved when only the target changed (and the test applies)."""
        return self.reason is None and bool(self.leaking)

    @property
    def message(self) -> str:
        """What was found, for the check's message (the reason when the test does not apply)."""
        if self.reason is not None:
            return self.reason
        if not self.leaking:
            return "(0) the outputs do not change when only the target changes" + (
                " from position t on (outputs up to t compared)" if self.sequence else ""
            )
        if self.sequence:
            start = self.leaking[0]
            return (
                f"the model's output at position {start} changes when only the target from position {start} "
                "on changes: the target is fed to the model, so the output at t sees the token it must "
                "predict (e.g. `self(inputs, target)` into a decoder that reads target[t] at position t). "
                "Try: feed the decoder the target shifted right (a start token + target[:, :-1]) or only the "
                "inputs; the target belongs in the loss."
            )
        return (
            f"the model's output changes when only the target ({self.target_label}) changes: the "
            "label reaches the model (`self(x, y)`, a concatenation, a label-conditioned layer). Try: "
            "pass the label only to the loss. A head that uses the label by design (a margin head such "
            "as ArcFace) is the exception: TargetLeakageCheck(target_as_input=False)."
        )

    def details(self) -> dict[str, Any]:
        """The JSON record under ``details["target_as_input"]``."""
        if self.starts is None:
            return {"reason": self.reason}
        record: dict[str, Any] = {
            "starts": list(self.starts),
            "changes": list(self.changes),
            "leak": self.leak,
            "loss_uses_target": self.loss_uses_target,
        }
        record["reason" if self.reason is not None else "message"] = self.message
        return record


def probe_target_fed(context: CheckContext, batch: Any, target_as_input: bool) -> TargetFed:
    """Change only the target and watch the model's output: it must not move (for sequence targets: the
    outputs up to ``t`` must not move when the targets from ``t`` on change; teacher forcing with targets
    shifted right is legitimate). Also records whether the loss reads the target at all
    (``loss_uses_target``): (b) and (c) mean nothing for a loss that ignores it (an autoencoder).
    ``target_as_input=False`` measures only that, at one start, and reports the test off."""
    inputs, targets = context.split(batch)
    assert inputs is not None and targets is not None
    if same_tensor(inputs, targets):
        return TargetFed(
            reason="target fed to the model: the target is the input (a reconstruction or "
            "self-supervised loss), so changing it changes the input"
        )
    key = next((k for k, _, t in entries(batch) if t is targets), None)
    if key is None or targets.ndim == 0 or targets.dtype == torch.bool or targets.is_complex():
        return TargetFed(reason="target fed to the model: the target tensor cannot be replaced")
    replacement = other_values(targets, context.seed)
    if replacement is None:
        return TargetFed(reason="target fed to the model: the target holds a single value")
    model = context.copy_model()
    if not model.automatic_optimization:
        return TargetFed(
            reason="target fed to the model: manual optimisation (its training_step steps the optimizer and "
            "cannot be replayed outside the Trainer)"
        )
    model.eval()
    base, base_loss = _observed_output(context, model, batch)
    if base is None:
        return TargetFed(reason="target fed to the model: no output tensor was observed")
    sequence = targets.ndim >= 2 and targets.shape[1] >= 2 and inputs.ndim >= 2
    sequence = sequence and targets.shape[:2] == inputs.shape[:2]
    if sequence:
        try:
            base = aligned_output(base, inputs)
        except CheckSkipped:
            sequence = False
    seq = int(targets.shape[1]) if sequence else 1
    starts = sorted({0, seq // 2, seq - 1}) if sequence and target_as_input else [0]
    moved: list[Tensor] = []
    changed_loss: Tensor | None = None
    for start in starts:
        if out_of_time() and moved:
            break
        changed = targets.clone()
        if sequence:
            changed[:, start:] = replacement[:, start:]
        else:
            changed = replacement
        output, loss = _observed_output(context, model, replace_entry(batch, key, changed))
        if start == 0:
            changed_loss = loss
        if output is None or output.numel() != base.numel():
            return TargetFed(reason="target fed to the model: the output's shape changed with the target")
        delta = (output.reshape(base.shape) - base).float().abs()
        moved.append(delta[:, : start + 1].amax() if sequence else delta.amax())
    scale = base.float().abs().amax()
    # Uniform outputs (a zero-initialised head) give a cross-entropy of ln C whatever the target: then an
    # unchanged loss proves nothing, and (b)/(c) run.
    flat = base.float().reshape(len(base), -1) if base.ndim > 1 else base.float()[None, :]
    spread = (flat.amax(-1) - flat.amin(-1)).amax()
    losses = [base_loss, changed_loss] if base_loss is not None and changed_loss is not None else []
    values = torch.stack([*moved, scale, spread, *losses]).tolist()  # sync: once
    changes, magnitude, varies = values[: len(moved)], values[len(moved)], values[len(moved) + 1] > 0
    uses = loss_changed(values[-2], values[-1]) if losses and varies else None
    measured = tuple(starts[: len(changes)]), tuple(changes)
    if not target_as_input:
        reason = "target fed to the model: turned off (target_as_input=False)"
        return TargetFed(reason, *measured, loss_uses_target=uses)
    leaking = tuple(start for start, change in zip(starts, changes) if output_moved(change, magnitude))
    return TargetFed(None, *measured, uses, leaking, sequence, label_of(batch, key))


def other_values(targets: Tensor, seed: int) -> Tensor | None:
    """A tensor like ``targets`` that differs from it (almost) everywhere and stays inside the targets' own
    range, so the loss accepts it; ``None`` if the targets hold one value.

    Integer targets, and float targets that hold whole numbers (class ids or 0/1 labels stored as floats):
    other values present in the batch (``ignore_index`` entries kept). Other float targets (soft labels,
    probabilities, regression values): another sample's target (rolled along the batch), and where that is
    the same value, the value mirrored inside the targets' range ``[min, max]`` - never a value outside it
    (a probability stays in [0, 1], a one-hot row stays a distribution where rolled).

    Example:
        >>> import torch
        >>> targets = torch.tensor([0, 1, 2, -100])
        >>> changed = other_values(targets, seed=0)
        >>> bool((changed[:3] != targets[:3]).all()), int(changed[3]), set(changed[:3].tolist()) <= {0, 1, 2}
        (True, -100, True)
        >>> as_floats = other_values(torch.tensor([0.0, 2.0, 1.0, 2.0]), seed=0)  # class ids stored as floats
        >>> set(as_floats.tolist()) <= {0.0, 1.0, 2.0}
        True
        >>> soft = other_values(torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]), seed=0)
        >>> bool(((soft >= 0.1) & (soft <= 0.9)).all())
        True
    """
    if torch.is_floating_point(targets):
        finite = targets[torch.isfinite(targets)]
        if finite.numel() == 0:
            return None
        if bool((finite == finite.round()).all()):  # sync: once; whole numbers: labels stored as floats
            changed = _other_labels(targets.round().long(), seed)
            return None if changed is None else changed.to(targets.dtype)
        low, high = finite.amin(), finite.amax()
        if bool(low == high):  # sync: once
            return None
        rolled = targets.roll(1, 0) if targets.ndim and targets.shape[0] > 1 else targets
        mirrored = (low + high - targets).clamp(low, high)
        return torch.where(rolled != targets, rolled, mirrored)
    return _other_labels(targets, seed)


def _other_labels(targets: Tensor, seed: int) -> Tensor | None:
    """Integer targets: each replaced by another value present in the batch (``ignore_index`` kept)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    valid = targets != IGNORE_INDEX
    pool = torch.unique(targets[valid])
    if len(pool) < 2:
        return None
    offsets = torch.randint(1, len(pool), targets.shape, generator=generator).to(targets.device)
    position = torch.searchsorted(pool, targets.clamp(min=int(pool[0])))  # sync: once
    return torch.where(valid, pool[(position + offsets) % len(pool)], targets)


def _observed_output(context: CheckContext, model: Any, batch: Any) -> tuple[Tensor | None, Tensor | None]:
    """The output tensor seen (forward hooks) while ``training_step`` runs on ``batch`` and the loss (``None``
    when the step returns none), seeded, no grad."""
    torch.manual_seed(context.seed)
    loss = None
    with torch.no_grad(), context.capture_forward(model) as captured, contextlib.suppress(CannotRunOnCopy):
        loss = context.training_loss(model, batch).float()
    output = captured.last()
    return (None if output is None else output.detach()), loss


MIN_TRAINED_POSITIONS = 8  # trained positions needed before the shares mean anything

_WHERE = {"same": "at the same position", "back1": "one position back", "back2": "two positions back"}


@dataclass(frozen=True)
class CopyTargets:
    """What (a) found.

    Args:
        reason: Why the test does not apply (``None`` when it does).
        shares: Shares of the trained positions paired with the next, same, previous and second previous
            input token.
        trained_positions: Positions the loss trains (where the shares are taken).
        leak: The shift the loss trains the model to copy (:func:`copy_leak`), ``None`` for none.

    Example:
        >>> found = CopyTargets(shares=CopyShares(1.0, 0.0, 0.0, 0.0), trained_positions=12)
        >>> found.leak is None, found.message[-60:]
        (True, ' token at 100% and with the input at t at 0% of 12 positions')
    """

    reason: str | None = None
    shares: CopyShares | None = None
    trained_positions: int = 0
    leak: CopyShift | None = None

    @property
    def measured(self) -> float:
        """The share of positions trained to copy the leaking shift (0.0 without a leak)."""
        return 0.0 if self.shares is None or self.leak is None else self.shares.as_dict()[self.leak]

    @property
    def message(self) -> str:
        """What was found, for the check's message (the reason when the test does not apply)."""
        if self.reason is not None or self.shares is None:
            return self.reason or ""
        shares, trained = self.shares, self.trained_positions
        if self.leak is None:
            return (
                f"(a) the loss pairs output t with the next token at {shares.next:.0%} and with the input "
                f"at t at {shares.same:.0%} of {trained} positions"
            )
        return (
            f"the loss trains the output at position t toward the input token {_WHERE[self.leak]} "
            f"({self.measured:.0%} of {trained} trained positions; the next token only "
            f"{shares.next:.0%}), which the model reads at t: it learns to copy. "
            + (
                "The LM targets are not shifted (targets == inputs). "
                if self.leak == "same"
                else "The targets are shifted the wrong way. "
            )
            + "Try: inputs = tokens[:, :-1], targets = tokens[:, 1:]; or shift the logits against the "
            "labels (logits[:, :-1] vs labels[:, 1:]) as Hugging Face LM heads do inside their loss."
        )

    def details(self) -> dict[str, Any]:
        """The JSON record under ``details["copy_targets"]``."""
        if self.reason is not None or self.shares is None:
            return {"reason": self.reason}
        return {
            "shares": self.shares.as_dict(),
            "trained_positions": self.trained_positions,
            "leak": self.leak,
            "message": self.message,
        }


def probe_copy_targets(context: CheckContext, batch: Any) -> CopyTargets:
    """Token inputs ``[B, S]``, outputs ``[B, S, V]``: one backward pass of ``training_step``'s loss on a copy
    gives, for every output position, the class the loss pulls it toward (the most negative gradient of the
    logits); count how often that class is the input token one position ahead, at the same position, one
    or two back."""
    inputs, _ = context.split(batch)
    assert inputs is not None
    if inputs.ndim != 2 or torch.is_floating_point(inputs) or inputs.shape[1] < 2:
        return CopyTargets("copy targets: the inputs are not token ids [B, S]")
    if not context.model.automatic_optimization:
        return CopyTargets("copy targets: manual optimisation, the loss cannot be replayed")
    model = context.copy_model()
    model.eval()
    torch.manual_seed(context.seed)
    with torch.enable_grad(), context.capture_forward(model) as captured:
        loss = context.training_loss(model, batch)
    logits = captured.last()
    try:
        aligned = logits is not None and aligned_output(logits, inputs).ndim == 3
    except CheckSkipped:
        aligned = False
    if logits is None or not aligned or not logits.requires_grad or not loss.requires_grad:
        shape = None if logits is None else list(logits.shape)
        return CopyTargets(f"copy targets: the output {shape} is not position-aligned logits [B, S, V]")
    logits.retain_grad()
    loss.backward()
    if logits.grad is None:
        return CopyTargets("copy targets: the loss does not flow through the observed output")
    grad = aligned_output(logits.grad.detach().float(), inputs)
    active = grad.abs().amax(-1) > 0  # positions the loss trains
    paired = grad.argmin(-1)  # cross-entropy pulls each trained position toward its target class
    shares_t, counts = copy_shares(paired, inputs, active)
    shares = CopyShares(*shares_t.tolist())  # sync: once
    trained = int(counts[1])  # sync: once
    if trained < MIN_TRAINED_POSITIONS:
        return CopyTargets(f"copy targets: only {trained} trained positions")
    return CopyTargets(None, shares, trained, copy_leak(shares))


CHUNK = 2048  # features scored at once (memory: chunk x samples x bins comparisons)
MIN_HELD_OUT = 20  # held-out samples needed before a per-feature accuracy means anything


@dataclass(frozen=True)
class SingleFeature:
    """What (b) found: the best single feature and whether it determines the label.

    Args:
        reason: Why the test does not apply (``None`` when it does).
        task: ``"classification"`` (lookup tables) or ``"regression"`` (correlation).
        classes: Number of classes (classification).
        name: The feature reported (``inputs[:, 7]``, ``batch['label_copy'][:, 0]``).
        score: The best held-out lookup accuracy, or the best ``|r|``.
        samples: Samples behind the score (held-out ones for a lookup, all for a correlation).
        threshold: ``max_accuracy`` or ``max_correlation``.
        majority_baseline: Held-out accuracy of the majority class alone (classification).
        features_scanned: Features the lookup tables (or correlations) were computed for.
        features_total: Features there were to scan; fewer scanned: the time budget stopped the scan.
        encodes_label: The feature reported takes one value per class within each split (values differing
            between the splits), found after no lookup reached the threshold.
        determines: The feature reaches the threshold or encodes the label.
        is_input: The feature is part of the model's input (else another batch entry, named ``entry``).
        entry: How the message names the batch entry holding the feature.
        reads_tested: Whether the loss was re-run with the entry permuted (a non-input entry that
            determines the label, classification only).
        model_reads_it: The outcome: ``None`` when the loss could not be run.

    Example:
        >>> found = SingleFeature(task="regression", name="inputs[:, 3]", score=0.5, samples=40, threshold=0.9)
        >>> found.leak, found.stated
        (False, '`inputs[:, 3]` alone correlates with the regression target at |r| = 0.5000 over 40 samples (leakage at >= 0.9)')
    """  # noqa: E501 (a doctest's expected output is one line)

    reason: str | None = None
    task: Literal["classification", "regression"] | None = None
    classes: int | None = None
    name: str = ""
    score: float = 0.0
    samples: int = 0
    threshold: float = 0.0
    majority_baseline: float = 0.0
    features_scanned: int = 0
    features_total: int = 0
    encodes_label: bool = False
    determines: bool = False
    is_input: bool = True
    entry: str = ""
    reads_tested: bool = False
    model_reads_it: bool | None = None

    @property
    def budget_cut(self) -> bool:
        """The time budget stopped the scan before every feature was scored."""
        return self.features_scanned < self.features_total

    @property
    def leak(self) -> bool:
        """A feature determines the label and the model reads it (or it is part of the input)."""
        return (
            self.reason is None
            and self.determines
            and not (self.reads_tested and self.model_reads_it is False)
        )

    @property
    def stated(self) -> str:
        """The finding in one clause."""
        if self.encodes_label:
            return (
                f"`{self.name}` takes one value per class and a different value for each "
                f"class within the training samples and again within the held-out samples ({self.classes} "
                "classes): it encodes the label (a statistic grouped by the label, a per-split label "
                "encoding), though the values differ between the splits"
            )
        if self.task == "classification":
            return (
                f"a lookup table on `{self.name}` alone predicts {self.score:.1%} of {self.samples} held-out "
                f"labels ({self.classes} classes, majority class {self.majority_baseline:.1%}; leakage at >= "
                f"{self.threshold:.0%})"
            )
        return (
            f"`{self.name}` alone correlates with the regression target at |r| = {self.score:.4f} over "
            f"{self.samples} samples (leakage at >= {self.threshold})"
        )

    @property
    def message(self) -> str:
        """What was found, for the check's message (the reason when the test does not apply)."""
        if self.reason is not None:
            return self.reason
        if not self.determines:
            return f"(b) best single feature: {self.stated}"
        if not self.leak:
            return (
                f"(b) {self.stated}, but the loss does not change when it is permuted: the model does not "
                "read it (harmless; drop it from the batch to be sure)"
            )
        source = (
            "an input feature"
            if self.is_input
            else f"`{self.entry}`, a batch entry the model reads besides its input"
        )
        return (
            f"{self.stated}: {source} determines the label. Likely causes: the label (or a column computed "
            "from it after the fact) was joined into the features, written into the sample (a pixel, a "
            "token), or passed to the model with the batch. Try: remove "
            f"`{self.name}` from the model's inputs and check how the dataset builds each sample."
        )

    def details(self) -> dict[str, Any]:
        """The JSON record under ``details["single_feature"]``."""
        if self.reason is not None:
            return {"reason": self.reason}
        record: dict[str, Any] = {"task": (self.task, self.classes), "name": self.name, "score": self.score}
        if self.task == "classification":
            record["majority_baseline"] = self.majority_baseline
            record["features_scanned"] = self.features_scanned
        record["leak"] = self.leak
        if self.encodes_label:
            record["encodes_label_within_each_split"] = True
        if self.reads_tested:
            record["model_reads_it"] = self.model_reads_it
        record["message"] = self.message
        return record


def probe_single_feature(
    context: CheckContext,
    train: list[Any],
    held_out: list[Any],
    *,
    max_accuracy: float,
    max_correlation: float,
    num_bins: int,
) -> SingleFeature:
    """Score every feature of every per-sample tensor of the batch on its own against one-value-per-sample
    targets: lookup tables of ``num_bins`` bins (classes), correlation (regression)."""
    y_train, y_held = per_sample_targets(context, train), per_sample_targets(context, held_out)
    if y_train is None or y_held is None:
        return SingleFeature("single feature: the targets are not one value per sample")
    if len(y_held) < MIN_HELD_OUT:
        return SingleFeature(f"single feature: only {len(y_held)} held-out samples (need {MIN_HELD_OUT})")
    groups = feature_groups(context, train, held_out)
    if not groups:
        return SingleFeature("single feature: no batch tensor with one row per sample besides the target")
    everything = torch.cat([y_train, y_held])
    classes, is_classification = class_values(everything)
    if is_classification:
        if len(classes) < 2:
            return SingleFeature("single feature: the labels hold one class")
        index = torch.searchsorted(classes, everything)
        y_train, y_held = index[: len(y_train)], index[len(y_train) :]
        return _lookup(context, groups, y_train, y_held, len(classes), max_accuracy, num_bins)
    return _correlation(groups, y_train.float(), y_held.float(), max_correlation)


def _lookup(
    context: CheckContext,
    groups: list[FeatureGroup],
    y_train: Tensor,
    y_held: Tensor,
    classes: int,
    max_accuracy: float,
    bins: int,
) -> SingleFeature:
    majority = torch.bincount(y_train, minlength=classes).argmax()
    baseline = float((y_held == majority).float().mean())  # sync: once
    best, best_group, best_index, scanned = -1.0, None, 0, 0
    for group in groups:
        for start in range(0, group.train.shape[1], CHUNK):
            if out_of_time() and scanned:
                break
            x, h = group.train[:, start : start + CHUNK], group.held[:, start : start + CHUNK]
            accuracy = lookup_accuracy(x, h, y_train, y_held, classes, bins, majority)
            value, where = accuracy.max(0)
            scanned += x.shape[1]
            if float(value) > best:  # sync: once per chunk
                best, best_group, best_index = float(value), group, start + int(where)
    assert best_group is not None
    found = SingleFeature(
        task="classification",
        classes=classes,
        name=best_group.feature_name(best_index),
        score=best,
        samples=len(y_held),
        threshold=max_accuracy,
        majority_baseline=baseline,
        features_scanned=scanned,
        features_total=sum(int(group.train.shape[1]) for group in groups),
    )
    if lookup_leaks(best, baseline, max_accuracy):
        return _confirm(context, best_group, found)
    encoded = _label_encoding_feature(groups, y_train, y_held, classes)
    if encoded is not None:
        group, index = encoded
        return _confirm(context, group, replace(found, name=group.feature_name(index), encodes_label=True))
    return found


def _correlation(
    groups: list[FeatureGroup], y_train: Tensor, y_held: Tensor, max_correlation: float
) -> SingleFeature:
    y = torch.cat([y_train, y_held])
    best, best_group, best_index, scanned = -1.0, None, 0, 0
    for group in groups:
        for start in range(0, group.train.shape[1], CHUNK):
            if out_of_time() and best_group is not None:
                break
            x = torch.cat([group.train[:, start : start + CHUNK], group.held[:, start : start + CHUNK]])
            scanned += x.shape[1]
            value, where = max_abs_correlation(x, y).max(0)
            if float(value) > best:  # sync: once per chunk
                best, best_group, best_index = float(value), group, start + int(where)
    assert best_group is not None
    found = SingleFeature(
        task="regression",
        name=best_group.feature_name(best_index),
        score=best,
        samples=len(y),
        threshold=max_correlation,
        features_scanned=scanned,
        features_total=sum(int(group.train.shape[1]) for group in groups),
    )
    if best >= max_correlation:
        return _confirm(None, best_group, found)
    return found


def _confirm(context: CheckContext | None, group: FeatureGroup, found: SingleFeature) -> SingleFeature:
    """The feature determines the label; a tensor other than the input counts only if the model reads it
    (asked when ``context`` is given)."""
    found = replace(found, determines=True, is_input=group.is_input, entry=group.label)
    if group.is_input or context is None:
        return found
    return replace(
        found, reads_tested=True, model_reads_it=_model_reads(context, group.key, group.first_batch)
    )


def _label_encoding_feature(
    groups: list[FeatureGroup], y_train: Tensor, y_held: Tensor, classes: int
) -> tuple[FeatureGroup, int] | None:
    """The first feature that encodes the label within the training samples and within the held-out
    samples (a function of the label in each split, even when its values differ between the splits)."""
    for group in groups:
        train, held = group.train.cpu(), group.held.cpu()
        both = encodes_label(train, y_train.cpu(), classes) & encodes_label(held, y_held.cpu(), classes)
        if bool(both.any()):  # sync: once per group
            return group, int(both.nonzero()[0, 0])
    return None


def _model_reads(context: CheckContext, key: Any, batch: Any) -> bool | None:
    """Whether ``training_step``'s loss changes when batch entry ``key`` is rolled across the batch."""
    value = tensor_at(batch, key)
    assert value is not None
    changed = replace_entry(batch, key, value.roll(1, 0))
    model = context.copy_model()
    model.eval()
    losses = []
    with torch.no_grad():
        for candidate in (batch, changed):
            torch.manual_seed(context.seed)
            try:
                losses.append(context.training_loss(model, candidate).float())
            except CannotRunOnCopy:
                return None
    before, after = torch.stack(losses).tolist()  # sync: once
    return loss_changed(before, after)


FIRST_LOOK = 5  # steps before the first look at the held-out loss; each later look doubles them


@dataclass(frozen=True)
class Look:
    """The held-out loss after ``step`` training steps."""

    step: int
    loss: float


@dataclass(frozen=True)
class TooGood:
    """What (c) found.

    Args:
        reason: Why the test does not apply (``None`` when it does).
        looks: The held-out loss at each look (after 5, 10, 20 ... steps).
        bound: ``fraction x ln C``: a held-out loss below it is too good.
        classes: ``C``.
        fraction: ``too_good_fraction``.
        budget_stopped: The time budget ended training before ``train_steps``.

    Example:
        >>> found = TooGood(looks=(Look(5, 1.2), Look(10, 0.9)), bound=0.0693, classes=4, fraction=0.05)
        >>> found.leak, found.message
        (False, '(c) held-out loss after 10 steps 0.9 = 0.65 x ln 4 (too good below 5%)')
    """

    reason: str | None = None
    looks: tuple[Look, ...] = ()
    bound: float = 0.0
    classes: int = 0
    fraction: float = 0.0
    budget_stopped: bool = False

    @property
    def leak(self) -> bool:
        """The last held-out loss is below the bound."""
        return self.reason is None and bool(self.looks) and self.looks[-1].loss < self.bound

    @property
    def message(self) -> str:
        """What was found, for the check's message (the reason when the test does not apply)."""
        if self.reason is not None or not self.looks:
            return self.reason or ""
        step, loss, classes = self.looks[-1].step, self.looks[-1].loss, self.classes
        if not self.leak:
            stopped = f" (the time budget stopped training at step {step})" if self.budget_stopped else ""
            return (
                f"(c) held-out loss after {step} steps {loss:.4g} = {loss / math.log(classes):.2f} x ln "
                f"{classes} (too good below {self.fraction:.0%}){stopped}"
            )
        return (
            f"held-out loss {loss:.4g} after only {step} training steps of a copy, below "
            f"{self.fraction:.0%} of ln {classes} = {self.bound:.3g} (the held-out labels get a "
            f"geometric-mean probability of {math.exp(-loss):.1%}). Honest models are still learning "
            "this early (the library's digits CNN is at 0.3-0.6 x ln 10 after 20 steps): the target is "
            "likely recoverable from the inputs through several features at once (a one-hot copy, an ID "
            "that encodes the class), or held-out samples duplicate training ones. Try: train a model on "
            "a few input features at a time to find them; run the split_overlap check. If the task is "
            "simply easy, TargetLeakageCheck(train_steps=0) turns this test off."
        )

    def details(self) -> dict[str, Any]:
        """The JSON record under ``details["too_good"]``."""
        if self.reason is not None or not self.looks:
            return {"reason": self.reason}
        return {
            "looks": [{"step": look.step, "loss": look.loss} for look in self.looks],
            "bound": self.bound,
            "classes": self.classes,
            "leak": self.leak,
            "message": self.message,
        }


def probe_too_good(
    context: CheckContext,
    train: list[Any],
    held_out: list[Any],
    classes: int | None,
    *,
    train_steps: int,
    fraction: float,
) -> TooGood:
    """Train a copy ``train_steps`` steps with the module's optimizer on ``train``, reading the loss on
    ``held_out`` after 5, 10, 20 ... steps; stop at the first look below ``fraction x ln classes``."""
    if train_steps == 0:
        return TooGood("too good to be true: turned off (train_steps=0)")
    if not context.model.automatic_optimization:
        return TooGood("too good to be true: manual optimisation")
    if classes is None:  # regression has no ln C; an LM on predictable data collapses honestly
        return TooGood("too good to be true: needs classification with one label per sample")
    bound = too_good_bound(fraction, classes)
    torch.manual_seed(context.seed)
    model = context.copy_model()
    optimizers = context.build_optimizers(model).optimizers
    looks: list[Look] = []
    step, look = 0, min(FIRST_LOOK, train_steps)
    stopped = False
    while True:
        while step < look:
            if out_of_time():
                stopped = True
                break
            context.optimization_step(model, optimizers, train[step % len(train)], step)
            step += 1
        loss = _held_out_loss(context, model, held_out)  # sync: once per look
        looks.append(Look(step, loss))
        if loss < bound or step >= train_steps or stopped:
            break
        look = min(2 * look, train_steps)
    return TooGood(None, tuple(looks), bound, classes, fraction, stopped)


def _held_out_loss(context: CheckContext, model: Any, held_out: list[Any]) -> float:
    model.eval()
    with torch.no_grad():
        losses = [context.training_loss(model, batch, i).float() for i, batch in enumerate(held_out)]
    model.train()
    return float(torch.stack(losses).mean())  # sync: once
