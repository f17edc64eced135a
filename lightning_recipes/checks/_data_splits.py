"""``data``'s split comparison: the class labels of the training batches against the validation batches
(shared label set, labels unseen in training, classes remapped between the splits, label distributions).

A pure function of the splits' labels (``SplitLabels``) returning a frozen record that carries the
check's details and messages; the check only adds them to its verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from lightning_recipes.checks._data_statistics import (
    LabelShift,
    Remapping,
    SplitLabels,
    distribution_shift,
    label_range,
    proportions,
    remapped_classes,
)

__all__ = ["MAX_UNSEEN_FRACTION", "MIN_UNSEEN_WARN", "SplitComparison", "compare_splits"]

MAX_UNSEEN_FRACTION = 0.5  # validation samples with labels unseen in training from this share fail
MIN_UNSEEN_WARN = 3  # fewer validation samples with unseen labels than this are not reported

Stage = Literal["disjoint", "unseen", "remapped", "shift"]


@dataclass(frozen=True)
class SplitComparison:
    """What the split comparison found, and how far it went.

    Args:
        labels: The labels of both splits.
        stage: Where it stopped: ``"disjoint"`` (no shared label), ``"unseen"`` (at least half of the
            validation samples carry labels unseen in training), ``"remapped"`` (classes remapped), else
            ``"shift"`` (every test ran; the label distributions were compared).
        remapping: The remapped-class test (``None`` before ``"remapped"``, or when it does not apply).
        shift: The label-distribution shift (``"shift"`` only).

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
        return ()

    @property
    def warns(self) -> tuple[str, ...]:
        if self.stage != "shift":
            return ()
        assert self.shift is not None
        found, shift, warns = self.labels, self.shift, []
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
    """Compare the splits' labels, stopping at the first failure (the remapped-class test runs only when
    the label sets overlap enough, the distributions are compared only when no class is remapped)."""
    if not found.shared:
        return SplitComparison(found, "disjoint")
    if found.unseen_fraction >= MAX_UNSEEN_FRACTION:
        return SplitComparison(found, "unseen")
    remapping = remapped_classes(found.train, found.val, found.keep_train, found.keep_val, found.shared)
    if remapping is not None and remapping.flagged:
        return SplitComparison(found, "remapped", remapping)
    return SplitComparison(
        found, "shift", remapping, distribution_shift(found.train_counts, found.val_counts)
    )
