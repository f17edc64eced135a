"""Check the first training batches: non-finite values, label range, constant or un-normalised inputs,
order."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from torch import Tensor
from torch.nn import functional as F
from typing_extensions import override

from lightning_recipes._validation import check_int, check_positive
from lightning_recipes.checks._num_classes import IGNORE_INDEX, infer_num_classes
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.report import CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import is_shuffled, tensors_of
from lightning_recipes.harness.batches import Key, is_float

__all__ = ["DataCheck"]


class DataCheck(SanityCheck):
    """Look at the first ``num_batches`` training batches (and validation batches) before training does.

    Fails on: NaN/Inf in any tensor of a batch, reported per tensor (inputs, targets - regression targets
    included - or other) and per kind (NaN, Inf); integer labels outside ``[0, C)`` (``-100``, the
    cross-entropy ignore index, is allowed); an input batch that is entirely constant; every batch holding a
    single class, or labels in sorted order from a loader that does not shuffle; blank samples (every value
    of a sample equal: all-zero images, padding-only sequences) from ``blank_fractions[1]`` of the samples
    read (default 5%); identical float samples (exact copies of another sample read) from
    ``duplicate_fractions[1]`` (default 30%); training and validation label sets that are disjoint, or 50%
    of the validation samples carrying labels absent from the training batches; labels remapped between the
    splits (see below). Warns on: inputs far from unit scale (``|mean|`` or ``std`` above ``max_scale``:
    raw pixels 0-255, unscaled features), some single-class batches, a training loader that does not
    shuffle, blank samples from ``blank_fractions[0]`` (1%, at least 2), identical samples from
    ``duplicate_fractions[0]`` (5%, at least 2), validation labels absent from the training batches (at
    least 3 samples), a label distribution that differs between the splits (total variation above 0.2 and a
    chi-square homogeneity statistic above ``df + 5 sqrt(2 df)``: more than sampling noise of a few batches).

    Why these thresholds: a real dataset can hold a few blank or repeated samples (black video frames, the
    same image scraped twice; scikit-learn's digits has none of either), but 5% blank or 30% repeated is a
    pipeline bug (decoding failures returned as zeros, a ``__getitem__`` that ignores its index). Token
    sequences are not checked for repeats: short prompts and synthetic token data repeat legitimately.

    Remapped labels: with a validation loader and float inputs of one shape, the mean standardised input of
    each class is computed per split (classes with at least 3 samples in both); when the validation mean
    of at least half of the classes (and at least 2) is closest (cosine) to the training mean of *another*
    class, the labels were remapped (a label encoder fit per split, an off-by-one shift). A permutation of
    balanced classes is invisible to label counts, hence the input means. On digits split properly every
    class matches itself (cosine >= 0.90 to its own training mean, <= 0.48 to any other).

    ``C`` is ``num_classes``, else the datamodule's ``num_classes`` attribute, else inferred from the model's
    forward output on the first batch (logits ``[B, C]`` / ``[B, S, V]``). Class checks apply to 1-D integer
    targets. A PASS message names only what was checked and lists what could not be (no integer targets: no
    label checks; a loader with no inspectable sampler: no shuffling check); "inputs vary" covers blank and
    identical samples; the split comparison is named when a validation loader was given.

    Blind spots: only the batches read are seen (a 1% blank rate in a shuffled dataset shows in 8 batches of
    64 as about 5 samples: a warning at best); near-blank samples (faint noise on black) and near-duplicate
    samples within the training set (the ``split_overlap`` check reports near duplicates across the splits);
    remapped labels of token inputs, of classes with fewer than 3 samples per split, or of classes whose
    mean inputs look alike; label noise that keeps the class means in place.

    Cost: reads ``num_batches`` batches of each loader (shared with the other checks) and runs one forward
    pass (to infer ``C``); a ``torch.unique`` over the float samples read, per-class means; a handful of
    host syncs, once. Measured with one thread on a shared 2-core CPU: 17 ms on the demo CNN (digits, 8 + 2
    batches, reads cached), 26 ms on TinyTransformerLM's token data.

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

    @override
    def check(self, context: CheckContext) -> CheckResult:
        batches = context.train_batches(self.num_batches)
        fails: list[str] = []
        warns: list[str] = []
        details: dict[str, Any] = {"batches": len(batches)}

        inputs = [context.split(b)[0] for b in batches]
        targets = [context.split(b)[1] for b in batches]
        nonfinite = self._nonfinite(batches, inputs, targets)
        details["nonfinite_values"] = sum(n + i for n, i in nonfinite.values())
        if details["nonfinite_values"]:  # new keys only when something is found: saved reports stay equal
            by_tensor = {role: {"nan": nan, "inf": inf} for role, (nan, inf) in nonfinite.items()}
            details["nonfinite_by_tensor"] = by_tensor
            fails.append(self._nonfinite_message(nonfinite, len(batches)))

        # What each part of the check looked at: a PASS message states only these (issue 12, item 11).
        checked: dict[str, str] = {"finite": "finite"}
        unchecked: dict[str, str] = {}
        self._inputs(inputs, details, fails, warns, checked, unchecked)
        if not details.get("constant_input_batches"):  # a constant batch is reported once, above
            self._samples(inputs, details, fails, warns)
        classes = self._num_classes(context, batches[0], targets[0])
        details["num_classes"] = classes
        self._labels(targets, classes, context, details, fails, warns, checked, unchecked)
        self._compare_splits(context, inputs, targets, details, fails, warns, checked)

        if fails:
            return CheckResult(self.name, "fail", " | ".join(fails + warns), details)
        if warns:
            return CheckResult(self.name, "warn", " | ".join(warns), details)
        order = ("finite", "labels", "inputs", "classes", "shuffle", "splits")
        looked = ", ".join(checked[k] for k in order if k in checked)
        message = f"{len(batches)} batch(es) look sane: {looked}."
        if unchecked:
            message += " Not checked: " + "; ".join(unchecked[k] for k in order if k in unchecked) + "."
        return CheckResult(self.name, "pass", message, details)

    @staticmethod
    def _nonfinite(
        batches: list[Any], inputs: list[Tensor | None], targets: list[Tensor | None]
    ) -> dict[str, tuple[int, int]]:
        """``{role: (NaN count, Inf count)}`` for the inputs, the targets and any other float tensor."""
        counts: dict[str, list[Tensor]] = {"inputs": [], "targets": [], "other tensors": []}
        for batch, x, y in zip(batches, inputs, targets, strict=True):
            for tensor in tensors_of(batch):
                if not is_float(tensor):
                    continue
                role = "inputs" if tensor is x else "targets" if tensor is y else "other tensors"
                counts[role].append(torch.stack([tensor.isnan().sum(), tensor.isinf().sum()]))
        found = {role: torch.stack(c).sum(0) for role, c in counts.items() if c}
        table = {role: c.tolist() for role, c in found.items()}  # sync: once
        return {role: (int(n), int(i)) for role, (n, i) in table.items() if n or i}

    @staticmethod
    def _nonfinite_message(nonfinite: dict[str, tuple[int, int]], batches: int) -> str:
        parts = []
        for role, (nan, inf) in nonfinite.items():
            kinds = " and ".join(f"{count} {kind}" for count, kind in ((nan, "NaN"), (inf, "Inf")) if count)
            parts.append(f"{kinds} value(s) in the {role}")
        causes = []
        if "targets" in nonfinite:
            causes.append(
                "non-finite targets (regression targets with missing values, a log of 0 in a target "
                "transform) make the loss NaN on the first step that sees them"
            )
        if any(inf for _, inf in nonfinite.values()):
            causes.append("Inf comes from an overflow (float16 casts, exp) or a division by a zero std")
        if any(nan for nan, _ in nonfinite.values()):
            causes.append("NaN comes from missing values in the source or 0/0 in normalisation")
        return (
            f"NaN/Inf in the data: {'; '.join(parts)} in the first {batches} batches. Non-finite data "
            f"turns the loss and every weight into NaN. Likely causes: {'; '.join(causes)}. Try: "
            "torch.nan_to_num or drop the rows; check the normalisation statistics (std > 0) and any "
            "log/exp in the data pipeline."
        )

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
        stats = torch.stack(
            [
                torch.stack(
                    [x.float().nan_to_num().mean(), x.float().nan_to_num().std(), x.amax() - x.amin()]
                )
                for x in floats
            ]
        ).tolist()  # sync: once
        constant = [i for i, (_, _, spread) in enumerate(stats) if spread == 0]
        mean = sum(s[0] for s in stats) / len(stats)
        std = sum(s[1] for s in stats) / len(stats)
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

    def _samples(
        self, inputs: list[Tensor | None], details: dict[str, Any], fails: list[str], warns: list[str]
    ) -> None:
        """Blank samples (every value equal) among all inputs; repeated samples among float inputs."""
        groups: dict[tuple[Any, ...], list[tuple[int, Tensor]]] = {}
        for index, x in enumerate(inputs):
            if x is None or x.ndim < 2 or x[0].numel() < 4:  # a sample of 1-3 values may be "constant"
                continue
            groups.setdefault((tuple(x.shape[1:]), x.dtype), []).append((index, x.flatten(1)))
        if not groups:
            return
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
        blank_fraction = blank_total / total
        duplicate_fraction = duplicates / checked_for_duplicates if checked_for_duplicates else 0.0
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
    ) -> None:
        """Class labels of the training vs the validation batches: shared label set, per-class inputs that
        look alike (a remapping), similar label distributions."""
        if context.val_dataloader is None:
            return
        val = [context.split(b) for b in context.val_batches(self.num_batches)]
        train_pairs = _labelled(list(zip(inputs, targets, strict=True)))
        val_pairs = _labelled(val)
        if not train_pairs or not val_pairs:
            return
        y_train = torch.cat([y for _, y in train_pairs]).cpu()  # sync: once
        y_val = torch.cat([y for _, y in val_pairs]).cpu()
        keep_train, keep_val = y_train != IGNORE_INDEX, y_val != IGNORE_INDEX
        y_train, y_val = y_train[keep_train], y_val[keep_val]
        if len(y_train) == 0 or len(y_val) == 0:
            return
        checked["splits"] = "training and validation labels agree"
        train_counts = dict(
            zip(*(t.tolist() for t in torch.unique(y_train, return_counts=True)), strict=True)
        )
        val_counts = dict(zip(*(t.tolist() for t in torch.unique(y_val, return_counts=True)), strict=True))
        details.update(train_class_counts=train_counts, val_class_counts=val_counts)
        shared = set(train_counts) & set(val_counts)
        train_set, val_set = _label_range(train_counts), _label_range(val_counts)
        if not shared:
            fails.append(
                f"the training and validation labels are disjoint: training has classes {train_set}, "
                f"validation {val_set} (first batches). Every validation prediction is then wrong. Likely "
                "causes: a split by class (sorted data cut in two), different label encoders per split. "
                "Try: split with stratification (per class), and build one label mapping for both splits."
            )
            return
        unseen = sum(count for label, count in val_counts.items() if label not in train_counts)
        unseen_fraction = unseen / len(y_val)
        details["val_unseen_label_fraction"] = unseen_fraction
        if unseen_fraction >= 0.5:
            fails.append(
                f"{unseen_fraction:.0%} of the validation samples carry labels never seen in the training "
                f"batches (training classes {train_set}, validation {val_set}). Likely causes: a split by "
                "class, labels shifted (1-based in one split), a different label encoder per split. Try: "
                "build one label mapping and apply it to both splits; split with stratification."
            )
            return
        remapped = _remapped_classes(train_pairs, val_pairs, keep_train, keep_val, shared)
        details["remapped_classes"] = remapped
        if remapped is not None and len(remapped[0]) >= max(2, (remapped[1] + 1) // 2):
            shown = ", ".join(
                f"val {v} looks like train {t} (similarity {sim:.2f} vs {own:.2f} to train {v})"
                for v, t, sim, own in remapped[0][:4]
            )
            fails.append(
                f"the labels look remapped between the splits: the mean input of {len(remapped[0])} of "
                f"{remapped[1]} validation classes is closest to the mean input of another training class "
                f"({shown}). The model is graded against a different labelling than it learned. Likely "
                "causes: a label encoder fit separately on each split (class order differs), an off-by-one "
                "shift in one split, a column mix-up. Try: fit one label mapping on the training set and "
                "reuse it; compare a few samples per class across the splits."
            )
            return
        if unseen >= 3:
            warns.append(
                f"{unseen} validation sample(s) ({unseen_fraction:.1%}) carry labels absent from the "
                f"training batches read (training classes {train_set}, validation {val_set}). Rare "
                "classes can be missing from a few batches by chance; if not, the split is not "
                "stratified. Try: stratify the split per class."
            )
        shift = _distribution_shift(train_counts, val_counts)
        details["label_distribution"] = shift
        if shift["significant"]:
            warns.append(
                f"the label distribution differs between the splits: total variation {shift['tv']:.2f} "
                f"(chi-square {shift['chi2']:.1f} on {shift['df']} degrees of freedom; training "
                f"{_proportions(train_counts)}, validation {_proportions(val_counts)}). Validation metrics "
                "then weigh the classes differently from training. Try: a stratified split; if it is "
                "deliberate, report per-class metrics."
            )

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
        flat = torch.cat([t.flatten() for t in labels])
        valid = flat != IGNORE_INDEX
        bad = (flat < 0) & valid
        if classes is not None:
            bad = bad | (flat >= classes)
        out_of_range = int(bad.sum())  # sync: once
        details["labels_out_of_range"] = out_of_range
        if out_of_range:
            seen = flat[bad]
            fails.append(
                f"{out_of_range} label(s) outside [0, {classes if classes is not None else 'C'}) (min "
                f"{int(seen.min())}, max {int(seen.max())}). Cross-entropy raises on these, or silently "
                "reads garbage on some devices. Likely causes: 1-based labels, a wrong num_classes in the "
                "head, padding value other than -100. Try: remap labels to 0..C-1; set the head width to the "
                "number of classes."
            )
        per_sample = [t for t in labels if t.ndim == 1 and t.numel() >= 2]
        if not per_sample:
            unchecked["classes"] = "class mixing and shuffling (targets are not one label per sample)"
            return
        checked["classes"] = "classes mixed"
        distinct = [int(torch.unique(t[t != IGNORE_INDEX]).numel()) for t in per_sample]
        overall = int(torch.unique(torch.cat(per_sample)).numel())
        single = [i for i, n in enumerate(distinct) if n == 1 and per_sample[i].numel() >= 8]
        flat_labels = torch.cat(per_sample)
        sorted_labels = overall >= 2 and bool((flat_labels[1:] >= flat_labels[:-1]).all())
        shuffled = is_shuffled(context.train_dataloader)
        if shuffled is None:
            unchecked["shuffle"] = "shuffling (the loader has no sampler to inspect)"
        elif shuffled:
            checked["shuffle"] = "loader shuffles"  # a loader that does not shuffle never passes (see below)
        details.update(single_class_batches=single, labels_sorted=sorted_labels, loader_shuffles=shuffled)
        if overall >= 2 and len(single) == len(per_sample) and len(per_sample) >= 2:
            fails.append(
                f"every one of the first {len(per_sample)} batches holds a single class: the data is ordered "
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
                f"{len(single)} of {len(per_sample)} batches hold a single class. Try: check the sampler "
                "shuffles across the whole dataset (not within shards ordered by label)."
            )
        if shuffled is False and not sorted_labels and not (overall >= 2 and len(single) == len(per_sample)):
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


def _labelled(pairs: list[tuple[Tensor | None, Tensor | None]]) -> list[tuple[Tensor | None, Tensor]]:
    """``(inputs, labels)`` of the batches holding one integer class label per sample."""
    return [
        (x, y)
        for x, y in pairs
        if y is not None and y.ndim == 1 and not y.is_floating_point() and y.dtype != torch.bool
    ]


def _label_range(counts: dict[int, int]) -> str:
    labels = sorted(counts)
    if len(labels) > 6:
        return f"{{{labels[0]}, {labels[1]}, ..., {labels[-1]}}} ({len(labels)} labels)"
    return "{" + ", ".join(map(str, labels)) + "}"


def _proportions(counts: dict[int, int]) -> str:
    total = sum(counts.values())
    shown = sorted(counts.items(), key=lambda kv: -kv[1])[:4]
    return ", ".join(f"{label}: {count / total:.0%}" for label, count in shown) + (
        ", ..." if len(counts) > 4 else ""
    )


_MAX_FEATURES = 4096  # class means of larger inputs use every k-th feature


def _remapped_classes(
    train: list[tuple[Tensor | None, Tensor]],
    val: list[tuple[Tensor | None, Tensor]],
    keep_train: Tensor,
    keep_val: Tensor,
    shared: set[int],
) -> tuple[list[tuple[int, int, float, float]], int] | None:
    """Validation classes whose mean (standardised) input is closest to another class's training mean.

    Returns ``([(val class, closest train class, its cosine, cosine to the same class), ...], classes
    compared)``, or ``None`` when the inputs are not float tensors of one shape in both splits.
    """
    xs_train = [x for x, _ in train]
    xs_val = [x for x, _ in val]
    shapes = {tuple(x.shape[1:]) for x in xs_train + xs_val if x is not None}
    if len(shapes) != 1 or any(x is None or not torch.is_floating_point(x) for x in xs_train + xs_val):
        return None
    x_train = torch.cat([x.flatten(1) for x in xs_train if x is not None]).float().cpu()[keep_train]
    x_val = torch.cat([x.flatten(1) for x in xs_val if x is not None]).float().cpu()[keep_val]
    stride = max(1, -(-x_train.shape[1] // _MAX_FEATURES))
    finite = {"nan": 0.0, "posinf": 0.0, "neginf": 0.0}  # non-finite values are reported above
    x_train, x_val = x_train[:, ::stride].nan_to_num(**finite), x_val[:, ::stride].nan_to_num(**finite)
    y_train = torch.cat([y for _, y in train]).cpu()[keep_train]
    y_val = torch.cat([y for _, y in val]).cpu()[keep_val]
    mean, std = x_train.mean(0), x_train.std(0).clamp_min(1e-6)
    classes = [c for c in sorted(shared) if (y_train == c).sum() >= 3 and (y_val == c).sum() >= 3]
    if len(classes) < 2:
        return None
    centroid_train = torch.stack([((x_train[y_train == c] - mean) / std).mean(0) for c in classes])
    centroid_val = torch.stack([((x_val[y_val == c] - mean) / std).mean(0) for c in classes])
    similarity = F.normalize(centroid_val, dim=1) @ F.normalize(centroid_train, dim=1).T
    if not bool(torch.isfinite(similarity).all()):
        return None
    best = similarity.argmax(dim=1).tolist()
    remapped = [
        (c, classes[j], float(similarity[i, j]), float(similarity[i, i]))
        for i, (c, j) in enumerate(zip(classes, best, strict=True))
        if j != i
    ]
    return remapped, len(classes)


def _distribution_shift(train: dict[int, int], val: dict[int, int]) -> dict[str, Any]:
    """Total variation between the label distributions and a chi-square test of homogeneity.

    Significant when the total variation exceeds 0.2 and chi-square exceeds its mean by five standard
    deviations (``df + 5 sqrt(2 df)``): sampling noise of a few batches stays below both.
    """
    labels = sorted(set(train) | set(val))
    n_train, n_val = sum(train.values()), sum(val.values())
    tv = 0.5 * sum(abs(train.get(k, 0) / n_train - val.get(k, 0) / n_val) for k in labels)
    chi2 = 0.0
    for k in labels:
        column = train.get(k, 0) + val.get(k, 0)
        for observed, n in ((train.get(k, 0), n_train), (val.get(k, 0), n_val)):
            expected = column * n / (n_train + n_val)
            chi2 += (observed - expected) ** 2 / expected if expected > 0 else 0.0
    df = max(1, len(labels) - 1)
    significant = tv > 0.2 and chi2 > df + 5 * math.sqrt(2 * df)
    return {"tv": tv, "chi2": chi2, "df": df, "significant": significant}
