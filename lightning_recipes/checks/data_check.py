"""Check the first training batches: non-finite values, label range, constant or un-normalised inputs,
order."""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor
from torch.utils.data import DataLoader
from typing_extensions import override

from lightning_recipes._validation import check_int, check_positive
from lightning_recipes.checks._data_scans import NonFinite, input_scale, scan_nonfinite, scan_samples
from lightning_recipes.checks._data_splits import compare_splits
from lightning_recipes.checks._data_statistics import class_mixing, labels_in_range, split_labels
from lightning_recipes.checks._loader_samples import distinct_loader, served_indices
from lightning_recipes.checks._num_classes import IGNORE_INDEX, infer_num_classes
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.report import CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import is_shuffled
from lightning_recipes.harness.batches import Key

__all__ = ["DataCheck"]


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
        on_fail: ``"raise"`` or ``"warn"`` when used as a callback.
        input_key: Index or key of the input in a batch.
        target_key: Index or key of the target.

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
