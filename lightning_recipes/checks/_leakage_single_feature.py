"""Sub-test (b) of ``target_leakage``: one feature determines the label. Every input feature and every other
per-sample tensor of the batch is scored on its own: a lookup table per feature (classification), the
correlation with the target (regression)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import Tensor

from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks._leakage_batch import (
    FeatureGroup,
    feature_groups,
    per_sample_targets,
    replace_entry,
    tensor_at,
)
from lightning_recipes.checks._leakage_statistics import (
    class_values,
    encodes_label,
    lookup_accuracy,
    lookup_leaks,
    loss_changed,
    max_abs_correlation,
)
from lightning_recipes.harness import CannotRunOnCopy
from lightning_recipes.harness import Harness as CheckContext

__all__ = ["MIN_HELD_OUT", "SingleFeature", "probe_single_feature"]

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
