"""The ``data`` check: the first training (and validation) batches before training reads them.

The scans (non-finite values per tensor role, input scale, blank and repeated samples) are pure functions
of the batches' tensors returning frozen records; :func:`compare_splits` compares the splits' labels
(``_data_statistics``), inputs (``_data_inputs``) and train-only shortcuts (``_data_shortcut``). The check
words its verdicts from the records' fields.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, Literal

import torch
from torch import Tensor
from torch.utils.data import DataLoader
from typing_extensions import override

from lightning_recipes._validation import check_int, check_positive
from lightning_recipes.checks._num_classes import IGNORE_INDEX, infer_num_classes
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.data._inputs import InputShift, input_shift
from lightning_recipes.checks.data._loader_samples import distinct_loader, served_indices
from lightning_recipes.checks.data._shortcut import Shortcut, train_only_shortcut
from lightning_recipes.checks.data._statistics import (
    LabelShift,
    Remapping,
    SplitLabels,
    class_mixing,
    distribution_shift,
    label_range,
    labels_in_range,
    proportions,
    remapped_classes,
    split_labels,
)
from lightning_recipes.checks.report import CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import is_shuffled
from lightning_recipes.harness.batches import Key, is_float
from lightning_recipes.harness.walk import tensors_of

__all__ = ["DataCheck"]


_ROLES = ("inputs", "targets", "other tensors")


@dataclass(frozen=True)
class NonFinite:
    """NaN and Inf counts of the float tensors of one role: ``"inputs"``, ``"targets"`` or ``"other
    tensors"``."""

    role: str
    nan: int
    inf: int


def scan_nonfinite(
    batches: Sequence[Any], inputs: Sequence[Tensor | None], targets: Sequence[Tensor | None]
) -> tuple[NonFinite, ...]:
    """NaN/Inf counts per role over the float tensors of ``batches``, roles with none left out, in the order
    inputs, targets, other tensors. One host sync.

    Example:
        >>> import torch
        >>> x, y = torch.tensor([[1.0, float("nan")]]), torch.tensor([float("inf"), float("-inf")])
        >>> scan_nonfinite([(x, y)], [x], [y])
        (NonFinite(role='inputs', nan=1, inf=0), NonFinite(role='targets', nan=0, inf=2))
    """
    counts: dict[str, list[Tensor]] = {role: [] for role in _ROLES}
    for batch, x, y in zip(batches, inputs, targets, strict=True):
        for tensor in tensors_of(batch):
            if not is_float(tensor):
                continue
            role = "inputs" if tensor is x else "targets" if tensor is y else "other tensors"
            counts[role].append(torch.stack([tensor.isnan().sum(), tensor.isinf().sum()]))
    found = {role: torch.stack(c).sum(0) for role, c in counts.items() if c}
    table = {role: c.tolist() for role, c in found.items()}  # sync: once
    return tuple(NonFinite(role, int(n), int(i)) for role, (n, i) in table.items() if n or i)


@dataclass(frozen=True)
class InputScale:
    """Means over the float input batches of each batch's mean and standard deviation (non-finite values read
    as 0 / the largest finite float), and the indices (among those batches) of constant batches."""

    mean: float
    std: float
    constant: tuple[int, ...]


def input_scale(floats: Sequence[Tensor]) -> InputScale:
    """The scale of non-empty float input batches (at least one). One host sync.

    Example:
        >>> import torch
        >>> input_scale([torch.tensor([1.0, 3.0]), torch.tensor([2.0, 2.0])])
        InputScale(mean=2.0, std=0.7071067690849304, constant=(1,))
    """
    stats = torch.stack(
        [
            torch.stack([x.float().nan_to_num().mean(), x.float().nan_to_num().std(), x.amax() - x.amin()])
            for x in floats
        ]
    ).tolist()  # sync: once
    constant = tuple(i for i, (_, _, spread) in enumerate(stats) if spread == 0)
    mean = sum(s[0] for s in stats) / len(stats)
    std = sum(s[1] for s in stats) / len(stats)
    return InputScale(mean, std, constant)


@dataclass(frozen=True)
class SampleScan:
    """Blank samples (every value of the sample equal) among ``total`` samples, the first one as ``(batch,
    row)``, and samples identical to another one among the ``checked_for_duplicates`` non-blank float
    samples."""

    total: int
    blank: int
    blank_example: tuple[int, int] | None
    duplicates: int
    checked_for_duplicates: int

    @property
    def blank_fraction(self) -> float:
        return self.blank / self.total

    @property
    def duplicate_fraction(self) -> float:
        return self.duplicates / self.checked_for_duplicates if self.checked_for_duplicates else 0.0


def scan_samples(inputs: Sequence[Tensor | None]) -> SampleScan | None:
    """Blank samples among all input batches of at least 2 dimensions and 4 values per sample, repeated
    samples among the float ones (token sequences repeat legitimately: short prompts); ``None`` when no
    batch qualifies. Batches are grouped by sample shape and dtype; one host sync per group.

    Example:
        >>> import torch
        >>> x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])
        >>> scan = scan_samples([x, torch.arange(8.0).view(2, 4)])
        >>> scan
        SampleScan(total=5, blank=1, blank_example=(0, 0), duplicates=1, checked_for_duplicates=4)
        >>> scan.blank_fraction, scan.duplicate_fraction
        (0.2, 0.25)
    """
    groups: dict[tuple[Any, ...], list[tuple[int, Tensor]]] = {}
    for index, x in enumerate(inputs):
        if x is None or x.ndim < 2 or x[0].numel() < 4:  # a sample of 1-3 values may be "constant"
            continue
        groups.setdefault((tuple(x.shape[1:]), x.dtype), []).append((index, x.flatten(1)))
    if not groups:
        return None
    total = blank_total = duplicates = checked_for_duplicates = 0
    blank_example: tuple[int, int] | None = None
    for parts in groups.values():
        flat = torch.cat([x for _, x in parts])
        where = [(batch, row) for batch, x in parts for row in range(len(x))]
        blank = (flat == flat[:, :1]).all(dim=1)
        blank_rows = torch.nonzero(blank).flatten().tolist()  # sync: once per input shape
        total += len(flat)
        blank_total += len(blank_rows)
        if blank_rows and blank_example is None:
            blank_example = where[blank_rows[0]]
        if torch.is_floating_point(flat):  # token sequences repeat legitimately (short prompts)
            rows = flat[~blank]
            checked_for_duplicates += len(rows)
            duplicates += len(rows) - len(torch.unique(rows, dim=0))  # sync: once per input shape
    return SampleScan(total, blank_total, blank_example, duplicates, checked_for_duplicates)


MAX_UNSEEN_FRACTION = 0.5  # validation samples with labels unseen in training from this share fail
MIN_UNSEEN_WARN = 3  # fewer validation samples with unseen labels than this are not reported

CONFIRMED_SIMILARITY = 0.5  # a remap is told when the remapped classes' means match another class this well
CONFIRMED_MARGIN = 0.2  # ... and better than their own class by this much (medians over the classes)

Stage = Literal["disjoint", "unseen", "input_shift", "unclear", "remapped", "shift"]


@dataclass(frozen=True)
class SplitComparison:
    """What the split comparison found, and how far it went.

    Args:
        labels: The labels of both splits.
        stage: Where it stopped: ``"disjoint"`` (no shared label), ``"unseen"`` (at least half of the
            validation samples carry labels unseen in training), ``"input_shift"`` (the validation inputs
            differ from the training inputs, with a measured cause, or while the class means mismatch),
            ``"unclear"`` (class means mismatch, no input shift measured, no clear remap: inconclusive),
            ``"remapped"`` (classes remapped), else ``"shift"`` (every test ran; the label distributions
            were compared).
        remapping: The remapped-class test (``None`` before ``"remapped"``, or when it does not apply).
        shift: The label-distribution shift (``"shift"`` only).
        inputs: The input comparison, when it found a shift (``None`` otherwise: saved reports stay equal).
        shortcut: The train-only shortcut, when one was found (``"shift"`` only).

    Example:
        >>> import torch
        >>> from lightning_recipes.checks.data._statistics import split_labels
        >>> x = torch.zeros(4, 2)
        >>> found = split_labels([(x, torch.tensor([0, 0, 1, 1]))], [(x, torch.tensor([2, 2, 3, 3]))], -100)
        >>> comparison = compare_splits(found)
        >>> comparison.stage, comparison.details()
        ('disjoint', {'train_class_counts': {0: 2, 1: 2}, 'val_class_counts': {2: 2, 3: 2}})
        >>> comparison.fails[0][:69]
        'the training and validation labels are disjoint: training has classes'
    """

    labels: SplitLabels
    stage: Stage
    remapping: Remapping | None = None
    shift: LabelShift | None = None
    inputs: InputShift | None = None
    shortcut: Shortcut | None = None

    def details(self) -> dict[str, Any]:
        """The check's details of the comparison, in the order the check reports them."""
        found = self.labels
        details: dict[str, Any] = {
            "train_class_counts": found.train_counts,
            "val_class_counts": found.val_counts,
        }
        if self.stage == "disjoint":
            return details
        details["val_unseen_label_fraction"] = found.unseen_fraction
        if self.stage == "unseen":
            return details
        details["remapped_classes"] = None if self.remapping is None else self.remapping.details()
        if self.inputs is not None:
            details["input_shift"] = self.inputs.details()
        if self.shortcut is not None:
            details["train_only_shortcut"] = self.shortcut.details()
        if self.stage == "shift":
            assert self.shift is not None
            details["label_distribution"] = self.shift.details()
        return details

    @property
    def fails(self) -> tuple[str, ...]:
        found = self.labels
        train_set, val_set = label_range(found.train_counts), label_range(found.val_counts)
        if self.stage == "disjoint":
            return (
                f"the training and validation labels are disjoint: training has classes {train_set}, "
                f"validation {val_set} (first batches). Every validation prediction is then wrong. Likely "
                "causes: a split by class (sorted data cut in two), different label encoders per split. "
                "Try: split with stratification (per class), and build one label mapping for both splits.",
            )
        if self.stage == "unseen":
            return (
                f"{found.unseen_fraction:.0%} of the validation samples carry labels never seen in the "
                f"training batches (training classes {train_set}, validation {val_set}). Likely causes: a "
                "split by class, labels shifted (1-based in one split), a different label encoder per split. "
                "Try: build one label mapping and apply it to both splits; split with stratification.",
            )
        if self.stage == "input_shift":
            assert self.inputs is not None
            return (self._input_message(),)
        if self.stage == "remapped":
            assert self.remapping is not None
            remapped = self.remapping
            shown = ", ".join(
                f"val {c.val} looks like train {c.train} (similarity {c.similarity:.2f} vs {c.own:.2f} to "
                f"train {c.val})"
                for c in remapped.classes[:4]
            )
            return (
                "the labels look remapped between the splits: the mean input of "
                f"{len(remapped.classes)} of {remapped.compared} validation classes is closest to the mean "
                f"input of another training class ({shown}). The model is graded against a different "
                "labelling than it learned. Likely causes: a label encoder fit separately on each split "
                "(class order differs), an off-by-one shift in one split, a column mix-up. Try: fit one "
                "label mapping on the training set and reuse it; compare a few samples per class across the "
                "splits.",
            )
        if self.shortcut is not None:
            return (
                f"a shortcut present only in the training data: {self.shortcut.stated}. The model can learn "
                "the training labels from that feature alone and then fails on validation data without it. "
                "Likely causes: a watermark, a border or a timestamp that marks the class in the training "
                "source only; a column filled from the label before the split in one split only. Try: look "
                f"at input feature {self.shortcut.feature} across the classes in both splits; remove it or "
                "make both splits come from the same source.",
            )
        return ()

    @property
    def inconclusive(self) -> tuple[str, ...]:
        """Findings that name no cause: the class means mismatch, but neither a remap nor an input shift was
        measured."""
        if self.stage != "unclear":
            return ()
        assert self.remapping is not None
        remapped = self.remapping
        best = median(c.similarity for c in remapped.classes)
        own = median(c.own for c in remapped.classes)
        inputs = "" if self.inputs is None else f" Inputs: {self.inputs.stated}."
        return (
            f"the mean input of {len(remapped.classes)} of {remapped.compared} validation classes matches "
            f"no training class well (median similarity {best:.2f} to the closest other class, {own:.2f} to "
            "its own): neither a clear label remap (which would match another class at "
            f">= {CONFIRMED_SIMILARITY}) nor a measured shift of the inputs.{inputs} Look at a few "
            "validation samples per class next to training samples of the same class: a transform or "
            "normalisation applied to one split only, or labels from another source.",
        )

    def _input_message(self) -> str:
        assert self.inputs is not None
        remapped = self.remapping
        consequence = (
            f" The class means then match no class ({len(remapped.classes)} of {remapped.compared} "
            "validation classes are closer to another training class): this is a shift of the inputs, not "
            "a label remap."
            if remapped is not None and remapped.flagged
            else ""
        )
        return (
            f"the validation inputs are not drawn like the training inputs: {self.inputs.stated}; "
            f"{self.inputs.explained}.{consequence} The validation metrics then grade the model on inputs "
            "it never saw. Likely causes: a different transform or normalisation in the validation "
            "pipeline (transposed or flipped images, other mean/std, a missing /255), data from another "
            "source. Try: build both splits with one preprocessing function; compare x.mean(0) of the "
            "splits."
        )

    @property
    def warns(self) -> tuple[str, ...]:
        if self.stage != "shift":
            return ()
        assert self.shift is not None
        found, shift, warns = self.labels, self.shift, []
        if self.inputs is not None and self.inputs.shifted:
            warns.append(
                f"the validation inputs differ from the training inputs beyond sampling noise: "
                f"{self.inputs.stated}; {self.inputs.explained}. A deliberate shift (a later time period, "
                "another site) is fine to validate on; otherwise the splits were preprocessed differently. "
                "Try: compare x.mean(0) and x.std(0) of the splits."
            )
        train_set, val_set = label_range(found.train_counts), label_range(found.val_counts)
        if found.unseen >= MIN_UNSEEN_WARN:
            warns.append(
                f"{found.unseen} validation sample(s) ({found.unseen_fraction:.1%}) carry labels absent from "
                f"the training batches read (training classes {train_set}, validation {val_set}). Rare "
                "classes can be missing from a few batches by chance; if not, the split is not "
                "stratified. Try: stratify the split per class."
            )
        if shift.significant:
            warns.append(
                f"the label distribution differs between the splits: total variation {shift.tv:.2f} "
                f"(chi-square {shift.chi2:.1f} on {shift.df} degrees of freedom; training "
                f"{proportions(found.train_counts)}, validation {proportions(found.val_counts)}). Validation "
                "metrics then weigh the classes differently from training. Try: a stratified split; if it is "
                "deliberate, report per-class metrics."
            )
        return tuple(warns)


def compare_splits(found: SplitLabels) -> SplitComparison:
    """Compare the splits' labels and inputs, stopping at the first failure: the label sets, then the
    inputs (a shift with a named cause, or any shift while the class means mismatch, fails as a shift of
    the inputs), the class means (a clear remap fails), a train-only shortcut (which also explains class
    means that match nothing), a class-mean mismatch no cause explains (inconclusive), then the label
    distributions."""
    if not found.shared:
        return SplitComparison(found, "disjoint")
    if found.unseen_fraction >= MAX_UNSEEN_FRACTION:
        return SplitComparison(found, "unseen")
    remapping = remapped_classes(found.train, found.val, found.keep_train, found.keep_val, found.shared)
    inputs = split_inputs(found)
    measured = None
    if inputs is not None and inputs[0].is_floating_point():
        measured = input_shift(inputs[0], inputs[2], inputs[1], inputs[3])
    shifted = measured if measured is not None and measured.shifted else None
    mismatch = remapping is not None and remapping.flagged
    if shifted is not None and (shifted.cause is not None or mismatch):
        return SplitComparison(found, "input_shift", remapping, inputs=shifted)
    if mismatch:
        assert remapping is not None
        if confirmed(remapping):
            return SplitComparison(found, "remapped", remapping)
    shortcut = None
    if shifted is None and inputs is not None:
        tested = train_only_shortcut(*inputs)
        shortcut = tested if tested is not None and tested.is_shortcut else None
    if mismatch and shortcut is None:  # a train-only shortcut also moves the training class means
        return SplitComparison(found, "unclear", remapping, inputs=shifted)
    return SplitComparison(
        found,
        "shift",
        remapping,
        distribution_shift(found.train_counts, found.val_counts),
        inputs=shifted,
        shortcut=shortcut,
    )


def confirmed(remapping: Remapping) -> bool:
    """The remapped classes' means match another training class (median cosine at least
    ``CONFIRMED_SIMILARITY``) clearly better than their own (by ``CONFIRMED_MARGIN``): a label remap, not
    inputs that match no class at all.

    Example:
        >>> from lightning_recipes.checks.data._statistics import RemappedClass
        >>> swap = (RemappedClass(0, 1, 0.91, -0.44), RemappedClass(1, 0, 0.90, -0.19))
        >>> confirmed(Remapping(swap, 2)), confirmed(Remapping((RemappedClass(0, 4, 0.0, -0.0),) * 2, 2))
        (True, False)
    """
    best = median(c.similarity for c in remapping.classes)
    margin = median(c.similarity - c.own for c in remapping.classes)
    return best >= CONFIRMED_SIMILARITY and margin >= CONFIRMED_MARGIN


def split_inputs(found: SplitLabels) -> tuple[Tensor, Tensor, Tensor, Tensor] | None:
    """``(x_train, y_train, x_val, y_val)`` of the labelled samples (host copies), when every input of both
    splits is a tensor of one sample shape and dtype kind (float or integer)."""
    xs = [x for x, _ in found.train + found.val]
    if any(x is None for x in xs):
        return None
    tensors = [x for x in xs if x is not None]
    if len({tuple(x.shape[1:]) for x in tensors}) != 1 or len({x.is_floating_point() for x in tensors}) != 1:
        return None
    x_train = torch.cat([x for x, _ in found.train if x is not None]).cpu()[found.keep_train]
    x_val = torch.cat([x for x, _ in found.val if x is not None]).cpu()[found.keep_val]
    y_train = torch.cat([y for _, y in found.train]).cpu()[found.keep_train]
    y_val = torch.cat([y for _, y in found.val]).cpu()[found.keep_val]
    return x_train, y_train, x_val, y_val


class DataCheck(SanityCheck):
    """Look at the first ``num_batches`` training (and validation) batches before training does.

    Fails on NaN/Inf (per tensor and kind), labels outside ``[0, C)`` (``-100`` allowed), a constant input
    batch, single-class or sorted batches, blank or identical samples beyond the ``(warn, fail)`` fractions,
    disjoint or remapped labels between the splits, validation inputs shifted with a named cause (transposed,
    flipped, renormalised) and a feature that predicts the training label only (a train-only shortcut). Warns
    on un-normalised inputs, an unshuffled loader, and label distributions that differ beyond sampling noise.
    ``C`` is ``num_classes``, the datamodule's, or inferred from the forward output.

    Cost: the batches read (shared), one forward pass, per-class and per-feature statistics.

    Args:
        num_batches: Batches inspected (of each loader).
        num_classes: Number of classes, when known.
        max_scale: Inputs whose mean magnitude or standard deviation exceeds this get a warning.
        blank_fractions: ``(warn, fail)`` fractions of blank samples.
        duplicate_fractions: ``(warn, fail)`` fractions of identical float samples.

    Raises:
        ValueError: If ``num_batches < 1``, ``num_classes < 2``, ``max_scale <= 0``, or a fraction pair is not
            ``(warn, fail)`` in (0, 1] with ``warn <= fail``.

    Example:
        >>> import torch
        >>> from torch.utils.data import DataLoader, TensorDataset
        >>> from lightning_recipes.checks import CheckContext
        >>> from lightning_recipes.testing import TinyClassifier
        >>> x, y = torch.randn(64, 16), torch.randint(0, 4, (64,))
        >>> y[5] = 7  # a label outside [0, 4)
        >>> loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
        >>> result = DataCheck().run(CheckContext(TinyClassifier(), loader))
        >>> result.status, result.details["labels_out_of_range"]
        ('fail', 1)
    """

    name = "data"

    def __init__(
        self,
        num_batches: int = 8,
        num_classes: int | None = None,
        max_scale: float = 5.0,
        *,
        blank_fractions: tuple[float, float] = (0.01, 0.05),
        duplicate_fractions: tuple[float, float] = (0.05, 0.3),
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_int("num_batches", num_batches, minimum=1)
        if num_classes is not None:
            check_int("num_classes", num_classes, minimum=2)
        check_positive("max_scale", max_scale)
        _check_fractions("blank_fractions", blank_fractions)
        _check_fractions("duplicate_fractions", duplicate_fractions)
        self.num_batches = num_batches
        self.num_classes = num_classes
        self.max_scale = max_scale
        self.blank_fractions = tuple(blank_fractions)
        self.duplicate_fractions = tuple(duplicate_fractions)
        self._judged_on_distinct = 0  # distinct sampler indices the sample scan used (0: the batches read)

    @override
    def check(self, context: CheckContext) -> CheckResult:
        self._judged_on_distinct = 0
        batches = context.train_batches(self.num_batches)
        fails: list[str] = []
        warns: list[str] = []
        details: dict[str, Any] = {"batches": len(batches)}

        inputs = [context.split(b)[0] for b in batches]
        targets = [context.split(b)[1] for b in batches]
        nonfinite = scan_nonfinite(batches, inputs, targets)
        details["nonfinite_values"] = sum(c.nan + c.inf for c in nonfinite)
        if details["nonfinite_values"]:  # new keys only when something is found: saved reports stay equal
            details["nonfinite_by_tensor"] = {c.role: {"nan": c.nan, "inf": c.inf} for c in nonfinite}
            fails.append(_nonfinite_message(nonfinite, len(batches)))

        # What each part of the check looked at: a PASS message states only these (issue 12, item 11).
        checked: dict[str, str] = {"finite": "finite"}
        unchecked: dict[str, str] = {}
        self._inputs(inputs, details, fails, warns, checked, unchecked)
        if not details.get("constant_input_batches"):  # a constant batch is reported once, above
            self._samples(self._distinct_inputs(context, inputs), details, fails, warns)
        classes = self._num_classes(context, batches[0], targets[0])
        details["num_classes"] = classes
        self._labels(targets, classes, context, details, fails, warns, checked, unchecked)
        unclear: list[str] = []
        self._compare_splits(context, inputs, targets, details, fails, warns, checked, unclear)

        if fails:
            return CheckResult(self.name, "fail", " | ".join(fails + warns), details)
        if warns:
            return CheckResult(self.name, "warn", " | ".join(warns + unclear), details)
        if unclear:
            return CheckResult(self.name, "inconclusive", " | ".join(unclear), details)
        order = ("finite", "labels", "inputs", "classes", "shuffle", "splits")
        looked = ", ".join(checked[k] for k in order if k in checked)
        message = f"{len(batches)} batch(es) look sane: {looked}."
        if unchecked:
            message += " Not checked: " + "; ".join(unchecked[k] for k in order if k in unchecked) + "."
        return CheckResult(self.name, "pass", message, details)

    def _inputs(
        self,
        inputs: list[Tensor | None],
        details: dict[str, Any],
        fails: list[str],
        warns: list[str],
        checked: dict[str, str],
        unchecked: dict[str, str],
    ) -> None:
        floats = [x for x in inputs if x is not None and torch.is_floating_point(x) and x.numel() > 0]
        if not floats:
            unchecked["inputs"] = "input scale and variation (no floating-point input tensor)"
            return
        checked["inputs"] = "inputs vary and are on a sensible scale"
        scale = input_scale(floats)
        mean, std, constant = scale.mean, scale.std, list(scale.constant)
        details.update(input_mean=mean, input_std=std, constant_input_batches=constant)
        if constant:
            fails.append(
                f"{len(constant)} of {len(floats)} input batch(es) are constant (every value equal, e.g. "
                f"batch {constant[0]}): the model cannot learn from them. Likely causes: images read as "
                "all-zero, a normalisation that divides by a huge number, the wrong tensor returned by "
                "__getitem__. Try: plot a few inputs; print x.min(), x.max() per sample."
            )
        elif abs(mean) > self.max_scale or std > self.max_scale:
            warns.append(
                f"inputs look un-normalised: mean {mean:.3g}, std {std:.3g} (expected roughly zero-mean, "
                f"unit-variance, or within [0, 1]; threshold {self.max_scale:g}). Large inputs saturate "
                "activations and make the init loss and learning rate wrong. Try: standardise with the "
                "training set's mean/std, or divide pixels by 255."
            )

    def _distinct_inputs(self, context: CheckContext, inputs: list[Tensor | None]) -> list[Tensor | None]:
        """The inputs to judge blank and repeated samples on: the batches read, unless the sampler served an
        index twice in them (drawing with replacement: a balanced ``WeightedRandomSampler``), then the
        batches of the distinct indices it served, so that its repeats are not counted as repeated data."""
        loader = context.train_dataloader
        read = sum(len(x) for x in inputs if x is not None and x.ndim > 0)
        served = served_indices(loader, read) if isinstance(loader, DataLoader) else None
        if served is None or not served.repeats:
            return inputs
        largest = max((len(x) for x in inputs if x is not None and x.ndim > 0), default=1)
        distinct = context.read_batches(distinct_loader(loader, served.indices, largest), self.num_batches)
        self._judged_on_distinct = len(set(served.indices))
        return [context.split(b)[0] for b in distinct]

    def _samples(
        self, inputs: list[Tensor | None], details: dict[str, Any], fails: list[str], warns: list[str]
    ) -> None:
        """Blank samples (every value equal) among all inputs; repeated samples among float inputs."""
        scan = scan_samples(inputs)
        if scan is None:
            return
        total, blank_total, blank_example = scan.total, scan.blank, scan.blank_example
        duplicates, checked_for_duplicates = scan.duplicates, scan.checked_for_duplicates
        blank_fraction, duplicate_fraction = scan.blank_fraction, scan.duplicate_fraction
        if self._judged_on_distinct:
            details["samples_judged_on_distinct_indices"] = self._judged_on_distinct
        if blank_total or duplicates:  # new keys only when something is found: saved reports stay equal
            details.update(
                blank_samples=blank_total,
                blank_fraction=blank_fraction,
                duplicate_samples=duplicates,
                duplicate_fraction=duplicate_fraction,
            )
        warn_blank, fail_blank = self.blank_fractions
        if blank_total >= 2 and blank_fraction >= warn_blank:
            assert blank_example is not None
            message = (
                f"{blank_total} of {total} samples ({blank_fraction:.1%}) are blank: every value equal (all "
                f"zero or constant; e.g. batch {blank_example[0]}, sample {blank_example[1]}). The model "
                "learns to map an empty input to whatever labels those samples carry. Likely causes: files "
                "that failed to decode returned as zeros, a crop outside the image, padding-only sequences. "
                "Try: count blank samples in the dataset (x.amax() == x.amin() per sample) and drop or fix "
                f"them. Thresholds: warn from {warn_blank:.0%}, fail from {fail_blank:.0%}."
            )
            (fails if blank_fraction >= fail_blank else warns).append(message)
        warn_dup, fail_dup = self.duplicate_fractions
        if duplicates >= 2 and duplicate_fraction >= warn_dup:
            message = (
                f"{duplicates} of {checked_for_duplicates} non-blank samples ({duplicate_fraction:.1%}) are "
                "identical copies of another sample in the batches read. Repeated samples weigh more in "
                "the loss and leak into validation when the data is split afterwards. Likely causes: a "
                "`__getitem__` that ignores (part of) its index, a dataset concatenated with itself, "
                "oversampling by copying. Try: check `dataset[i]` for a few i; deduplicate by hashing the "
                f"samples. Thresholds: warn from {warn_dup:.0%}, fail from {fail_dup:.0%}."
            )
            (fails if duplicate_fraction >= fail_dup else warns).append(message)

    def _compare_splits(
        self,
        context: CheckContext,
        inputs: list[Tensor | None],
        targets: list[Tensor | None],
        details: dict[str, Any],
        fails: list[str],
        warns: list[str],
        checked: dict[str, str],
        unclear: list[str],
    ) -> None:
        """Class labels and inputs of the training vs the validation batches: shared label set, inputs drawn
        alike (a shift with its cause), per-class inputs that look alike (a remapping), no feature that
        predicts the training labels only, similar label distributions."""
        if context.val_dataloader is None:
            return
        val = [context.split(b) for b in context.val_batches(self.num_batches)]
        found = split_labels(list(zip(inputs, targets, strict=True)), val, IGNORE_INDEX)
        if found is None:
            return
        checked["splits"] = "training and validation labels agree"
        comparison = compare_splits(found)
        details.update(comparison.details())
        fails.extend(comparison.fails)
        warns.extend(comparison.warns)
        unclear.extend(comparison.inconclusive)

    def _num_classes(self, context: CheckContext, batch: Any, targets: Tensor | None) -> int | None:
        if self.num_classes is not None:
            return self.num_classes
        if context.num_classes is not None:
            return context.num_classes
        declared = getattr(context.datamodule, "num_classes", None)
        if isinstance(declared, int) and declared >= 2:
            return declared
        inputs, _ = context.split(batch)
        if inputs is None or targets is None or targets.is_floating_point():
            return None
        try:
            model = context.copy_model()
            model.eval()
            with torch.no_grad():
                output = context.forward(model, inputs)
        except Exception:
            return None
        inferred = infer_num_classes(output, targets)
        return inferred[0] if inferred else None

    def _labels(
        self,
        targets: list[Tensor | None],
        classes: int | None,
        context: CheckContext,
        details: dict[str, Any],
        fails: list[str],
        warns: list[str],
        checked: dict[str, str],
        unchecked: dict[str, str],
    ) -> None:
        labels = [t for t in targets if t is not None and not t.is_floating_point() and t.dtype != torch.bool]
        if not labels:
            unchecked["labels"] = "labels, class mixing and shuffling (no integer targets in the batches)"
            return
        if classes is not None:
            checked["labels"] = "labels in range"
        else:
            checked["labels"] = "labels non-negative"
            unchecked["labels"] = "the labels' upper bound (number of classes unknown: pass `num_classes=`)"
        in_range = labels_in_range(labels, classes, IGNORE_INDEX)
        out_of_range = in_range.out_of_range
        details["labels_out_of_range"] = out_of_range
        if out_of_range:
            fails.append(
                f"{out_of_range} label(s) outside [0, {classes if classes is not None else 'C'}) (min "
                f"{in_range.low}, max {in_range.high}). Cross-entropy raises on these, or silently "
                "reads garbage on some devices. Likely causes: 1-based labels, a wrong num_classes in the "
                "head, padding value other than -100. Try: remap labels to 0..C-1; set the head width to the "
                "number of classes."
            )
        mixing = class_mixing(labels, IGNORE_INDEX)
        if mixing is None:
            unchecked["classes"] = "class mixing and shuffling (targets are not one label per sample)"
            return
        checked["classes"] = "classes mixed"
        single, sorted_labels, batches = list(mixing.single), mixing.sorted, mixing.batches
        shuffled = is_shuffled(context.train_dataloader)
        if shuffled is None:
            unchecked["shuffle"] = "shuffling (the loader has no sampler to inspect)"
        elif shuffled:
            checked["shuffle"] = "loader shuffles"  # a loader that does not shuffle never passes (see below)
        details.update(single_class_batches=single, labels_sorted=sorted_labels, loader_shuffles=shuffled)
        if mixing.all_single and batches >= 2:
            fails.append(
                f"every one of the first {batches} batches holds a single class: the data is ordered "
                "by label, so each step pulls the model toward one class. Try: DataLoader(shuffle=True) or a "
                "RandomSampler."
            )
        elif sorted_labels and shuffled is False:
            fails.append(
                "labels come in sorted order and the training loader does not shuffle: each step sees a "
                "narrow slice of the classes. Try: DataLoader(shuffle=True)."
            )
        elif single:
            warns.append(
                f"{len(single)} of {batches} batches hold a single class. Try: check the sampler "
                "shuffles across the whole dataset (not within shards ordered by label)."
            )
        if shuffled is False and not sorted_labels and not mixing.all_single:
            warns.append(
                "the training loader does not shuffle (SequentialSampler): every epoch sees the same order, "
                "which biases SGD if the data has any order. Try: DataLoader(shuffle=True)."
            )


def _check_fractions(name: str, value: Any) -> None:
    """A ``(warn, fail)`` pair of fractions in (0, 1] with ``warn <= fail``."""
    if (
        not isinstance(value, (tuple, list))
        or len(value) != 2
        or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 1 for v in value)
        or value[0] > value[1]
    ):
        raise ValueError(
            f"`{name}` must be a pair (warn, fail) of fractions in (0, 1] with warn <= fail, got {value!r}."
        )


def _nonfinite_message(nonfinite: tuple[NonFinite, ...], batches: int) -> str:
    parts = []
    for c in nonfinite:
        kinds = " and ".join(f"{count} {kind}" for count, kind in ((c.nan, "NaN"), (c.inf, "Inf")) if count)
        parts.append(f"{kinds} value(s) in the {c.role}")
    causes = []
    if any(c.role == "targets" for c in nonfinite):
        causes.append(
            "non-finite targets (regression targets with missing values, a log of 0 in a target "
            "transform) make the loss NaN on the first step that sees them"
        )
    if any(c.inf for c in nonfinite):
        causes.append("Inf comes from an overflow (float16 casts, exp) or a division by a zero std")
    if any(c.nan for c in nonfinite):
        causes.append("NaN comes from missing values in the source or 0/0 in normalisation")
    return (
        f"NaN/Inf in the data: {'; '.join(parts)} in the first {batches} batches. Non-finite data "
        f"turns the loss and every weight into NaN. Likely causes: {'; '.join(causes)}. Try: "
        "torch.nan_to_num or drop the rows; check the normalisation statistics (std > 0) and any "
        "log/exp in the data pipeline."
    )
