"""``data``'s split comparison: the class labels of the training batches against the validation batches
(shared label set, labels unseen in training, classes remapped between the splits, label distributions),
the inputs of the splits (``_data_inputs``: a shift with its measured cause, told apart from a label
remap) and a feature that predicts the training labels only (``_data_shortcut``).

A pure function of the splits' labels (``SplitLabels``) returning a frozen record that carries the
check's details and messages; the check only adds them to its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Any, Literal

import torch
from torch import Tensor

from lightning_recipes.checks._data_inputs import InputShift, input_shift
from lightning_recipes.checks._data_shortcut import Shortcut, train_only_shortcut
from lightning_recipes.checks._data_statistics import (
    LabelShift,
    Remapping,
    SplitLabels,
    distribution_shift,
    label_range,
    proportions,
    remapped_classes,
)

__all__ = [
    "MAX_UNSEEN_FRACTION",
    "MIN_UNSEEN_WARN",
    "SplitComparison",
    "compare_splits",
    "confirmed",
    "split_inputs",
]

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
        >>> from lightning_recipes.checks._data_statistics import split_labels
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
        >>> from lightning_recipes.checks._data_statistics import RemappedClass
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
