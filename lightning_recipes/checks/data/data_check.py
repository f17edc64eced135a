"""The ``data`` check: the data is finite, varied, labelled in range, pure and paired (:class:`DataCheck`)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from contextlib import suppress
from typing import Any, Literal

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Subset
from typing_extensions import Unpack, override

from lightning_recipes._stats import entropy, label_counts, label_shift
from lightning_recipes._validation import check_int, check_positive
from lightning_recipes.checks._num_classes import IGNORE_INDEX, infer_num_classes
from lightning_recipes.checks._probe import Finding
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.data._loader_samples import check_pair, distinct_loader, served_indices
from lightning_recipes.checks.data._relation import Relation, Split, relations
from lightning_recipes.checks.data._split_repeats import drawn_from_a_small_space
from lightning_recipes.checks.report import CheckResult, Status
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import entries, is_float, other_rows, split_batch
from lightning_recipes.harness.forward_capture import first_layer_input
from lightning_recipes.harness.loaders import drawn_uniformly, is_shuffled, loader_length
from lightning_recipes.harness.walk import tensors_of

__all__ = ["DataCheck"]

PURITY_SAMPLES = 64  # samples read straight from the dataset by the purity test
MAX_SNAPSHOT = 50_000_000  # stored tensor elements snapshotted by the purity test (larger: not tested)


def scan_samples(
    inputs: Sequence[Tensor | None], marks: Sequence[Tensor | None] = ()
) -> tuple[int, int, int, int] | None:
    """``(samples, blank, duplicates, checked for duplicates)`` over input batches, or ``None``; blank rows a
    column of ``marks`` (per batch, ``other_rows``) sets apart are declared missing: neither."""
    groups: dict[tuple[Any, ...], list[tuple[Tensor, Tensor | None]]] = {}
    for x, mark in itertools.zip_longest(inputs, marks[: len(inputs)]):
        if x is not None and x.ndim >= 2 and x[0].numel() >= 4:
            groups.setdefault((tuple(x.shape[1:]), x.dtype), []).append((x.flatten(1), mark))
    if not groups:
        return None
    total = blank = duplicates = checked = 0
    for parts in groups.values():
        flat = torch.cat([x for x, _ in parts])
        constant = (flat == flat[:, :1]).all(dim=1)
        if _marked(constant, [m for _, m in parts]):  # missing parts, declared: neither blank nor copies
            flat, constant = flat[~constant], constant[~constant]
        total, blank = total + len(flat), blank + int(constant.sum())
        if torch.is_floating_point(flat) and not drawn_from_a_small_space(kept := flat[~constant]):
            checked += len(kept)
            duplicates += len(kept) - len(torch.unique(kept, dim=0))
    return total, blank, duplicates, checked


def _marked(blank: Tensor, marks: list[Tensor | None]) -> bool:
    """Whether one column of the other entries takes a value on every blank row that it takes on no other
    row: a presence mask declares those rows' input missing.

    Example:
        >>> _marked(torch.tensor([True, False, True]), [torch.tensor([[0.0, 1.0], [1.0, 1.0], [0.0, 1.0]])])
        True
    """
    if not blank.any() or blank.all() or any(m is None for m in marks):
        return False
    with suppress(RuntimeError):  # marks of other widths: nothing declared
        values = torch.cat([m for m in marks if m is not None])
        on_blank = values[blank][:1]
        same = (values[blank] == on_blank).all(0) & ~(values[~blank] == on_blank).any(0)
        return bool(same.any())
    return False


def stored_duplicate_fraction(
    loader: Any, inputs: Sequence[Tensor | None], limit: int = 2048
) -> float | None:
    """Share of repeats in the first ``limit`` rows of a stored tensor shaped like the inputs, or ``None``."""
    dataset = getattr(loader, "dataset", None)
    shapes = {tuple(x.shape[1:]) for x in inputs if x is not None and x.ndim >= 2}
    if (size := loader_length(dataset)) is None:
        return None
    for tensor in _stored_tensors(dataset).values():
        aligned = isinstance(tensor, Tensor) and tensor.is_floating_point() and len(tensor) == size > 1
        if aligned and tuple(tensor.shape[1:]) in shapes:
            rows = tensor[:limit].flatten(1)
            return 1 - len(torch.unique(rows, dim=0)) / len(rows)
    return None


class DataCheck(SanityCheck):
    """Look at the first ``num_batches`` training (and validation) batches before training does.

    The data is finite, varied, labelled in range, shuffled, pure and paired (the guide has every rule). Cost:
    the batches read (shared), 64 dataset reads, neighbours and lookup tables on at most 2048 samples per
    split.

    Args:
        num_batches: Batches inspected (of each loader).
        num_classes: Number of classes, when known.
        max_scale: Inputs whose mean magnitude or standard deviation exceeds this get a warning.
        blank_fractions: ``(warn, fail)`` fractions of blank samples.
        duplicate_fractions: ``(warn, fail)`` fractions of identical float samples.

    Example:
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
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("num_batches", num_batches, minimum=1)
        check_int("num_classes", num_classes, minimum=2, optional=True)
        check_positive("max_scale", max_scale)
        check_pair("blank_fractions", blank_fractions, "fractions in (0, 1] with warn <= fail")
        check_pair("duplicate_fractions", duplicate_fractions, "fractions in (0, 1] with warn <= fail")
        self.num_batches, self.num_classes, self.max_scale = num_batches, num_classes, max_scale
        self.blank_fractions = tuple(blank_fractions)
        self.duplicate_fractions = tuple(duplicate_fractions)

    @override
    def check(self, context: CheckContext) -> CheckResult:
        impure = _purity(context.train_dataloader)  # first: before this check reads anything
        batches = context.train_batches(self.num_batches)
        inputs = [context.split(b)[0] for b in batches]
        details: dict[str, Any] = {"batches": len(batches)}
        self._found: list[Finding] = []
        self._finite(context, batches, details)
        self._inputs(context, batches, inputs, details)
        if not details.get("constant_input_batches"):
            self._samples(context, batches, details)
        if impure is not None:
            details["purity"] = impure
            changed = f"{impure['changed_elements']} stored values of {impure['tensor']} changed"
            summary = f"reading the data changes it: {changed} after {impure['reads']} reads"
            action = "Build new tensors in `__getitem__`; never modify the stored ones in place (`+=`)."
            self._add("fail", summary, action)
        self._labels(context, batches, details)
        uniform = _drawn_uniformly(context, self.num_batches)
        self._splits(context, batches, details, relate=uniform is None, dataset=uniform)
        if uniform is not None:  # pairing is the dataset's: judged on samples drawn as validation's are
            self._splits(context, uniform, details, judge_labels=False)
        self._further_targets(context, batches, details)
        found = sorted(self._found, key=lambda f: f.status != "fail")
        if found:  # every finding's sentence, the worst first
            details["findings"] = [f.summary for f in found]
            worst = found[0]
            status: Status = "fail" if worst.status == "fail" else "warn"
            return self.verdict(status, worst.summary, details, action=worst.action)
        passed = f"{len(batches)} batch(es): finite, varied, labelled and paired"
        return self.verdict("pass", passed, details)

    def _add(self, status: Literal["fail", "warn"], summary: str, action: str) -> None:
        self._found.append(Finding(status, summary, action=action))

    def _finite(self, context: CheckContext, batches: list[Any], details: dict[str, Any]) -> None:
        counts: dict[str, list[int]] = {}
        splits: list[Any] = [(b, *context.split(b)) for b in batches]  # (batch, inputs, targets)
        for batch, x, y in splits:
            for tensor in tensors_of(batch):
                if is_float(tensor):
                    role = "inputs" if tensor is x else "targets" if tensor is y else "other tensors"
                    seen = counts.setdefault(role, [0, 0])
                    seen[0] += int(tensor.isnan().sum())
                    seen[1] += int(tensor.isinf().sum())
        bad = {role: {"nan": n, "inf": i} for role, (n, i) in counts.items() if n or i}
        details["nonfinite_values"] = sum(c["nan"] + c["inf"] for c in bad.values())
        if set(bad) == {"targets"}:  # gaps in the targets (missing cells) that the step masks are no fault
            batch = next(b for b, _, y in splits if not bool(y.isfinite().all()))
            if _finite_loss(context, batch):
                details["nonfinite_targets_masked"] = True
                return
        if bad:
            details["nonfinite_by_tensor"] = bad
            where = "; ".join(f"{c['nan']} NaN, {c['inf']} Inf in the {role}" for role, c in bad.items())
            summary = f"NaN/Inf in the data: {where} ({len(batches)} batches)"[:120]
            action = "Drop or impute those rows; check normalisation (std > 0) and any log/exp of the data."
            self._add("fail", summary, action)

    def _inputs(
        self, context: CheckContext, batches: list[Any], inputs: list[Tensor | None], details: dict[str, Any]
    ) -> None:
        floats = [x for x in inputs if x is not None and torch.is_floating_point(x) and x.numel() > 0]
        if not floats:
            return
        stats = torch.stack(
            [torch.stack([x.nan_to_num().mean(), x.nan_to_num().std(), x.amax() - x.amin()]) for x in floats]
        ).tolist()
        constant = [i for i, (_, _, spread) in enumerate(stats) if spread == 0]
        mean = sum(s[0] for s in stats) / len(stats)
        std = sum(s[1] for s in stats) / len(stats)
        details.update(input_mean=mean, input_std=std, constant_input_batches=constant)
        if constant:
            summary = f"{len(constant)} of {len(floats)} input batches are constant (every value equal)"
            action = "Plot a few inputs; check the decoding and normalisation in `__getitem__`."
            self._add("fail", summary, action)
        elif abs(mean) > self.max_scale or std > self.max_scale:
            finite = math.isfinite(mean) and math.isfinite(std)
            scale = first_layer_input(context, batches[0]) if batches and finite else None
            if scale is not None and abs(scale[0]) <= self.max_scale and scale[1] <= self.max_scale:
                details["first_layer_input"] = {"mean": scale[0], "std": scale[1]}
                return  # the model scales its inputs before its first learned layer
            summary = f"inputs look un-normalised: mean {mean:.3g}, std {std:.3g} (limit {self.max_scale:g})"
            action = "Standardise with the training set's mean/std, or divide pixels by 255."
            self._add("warn", summary, action)

    def _samples(self, context: CheckContext, batches: list[Any], details: dict[str, Any]) -> None:
        loader = context.train_dataloader
        inputs = [context.split(b)[0] for b in batches]
        read = sum(len(x) for x in inputs if x is not None and x.ndim > 0)
        served = served_indices(loader, read) if isinstance(loader, DataLoader) else None
        if served is not None and len(set(served.indices)) < len(served.indices):  # drawn with replacement
            largest = max((len(x) for x in inputs if x is not None and x.ndim > 0), default=1)
            distinct = distinct_loader(loader, served.indices, largest)
            batches = context.read_batches(distinct, self.num_batches)
            inputs = [context.split(b)[0] for b in batches]
            details["samples_judged_on_distinct_indices"] = len(set(served.indices))
        marks = [other_rows(b, *context.split(b)) for b in batches]
        scan = scan_samples(inputs, marks)
        if scan is None:
            return
        total, blank, duplicates, checked = scan
        if blank or duplicates:
            details.update(
                blank_samples=blank,
                blank_fraction=blank / total,
                duplicate_samples=duplicates,
                duplicate_fraction=duplicates / checked if checked else 0.0,
            )
        warn, fail = self.blank_fractions
        if blank >= 2 and blank / total >= warn:
            status: Literal["fail", "warn"] = "fail" if blank / total >= fail else "warn"
            summary = f"{blank} of {total} samples ({blank / total:.1%}) are blank (all zero or constant)"
            self._add(status, summary, "Drop or fix samples that failed to decode or are padding only.")
        warn, fail = self.duplicate_fractions
        if duplicates >= 2 and duplicates / checked >= warn:
            share = duplicates / checked
            stored = stored_duplicate_fraction(loader, inputs)  # the data's own repeats, where it is stored
            details["stored_duplicate_fraction"] = stored
            # a fail only where the stored rows are distinct: then reading (not the data) repeats them
            status = "fail" if share >= fail and stored is not None and stored < share / 2 else "warn"
            summary = f"{duplicates} of {checked} samples ({share:.1%}) are identical copies of another"
            if stored is None or stored >= share / 2:
                place = "not stored where the check can read" if stored is None else f"{stored:.1%} stored"
                summary += f" ({place})"
            self._add(status, summary, "Check that `__getitem__` uses its whole index; deduplicate.")

    def _declared(self, context: CheckContext) -> int | None:
        """The class count given by the user (the check, the preflight or the datamodule)."""
        given = (self.num_classes, context.num_classes, getattr(context.datamodule, "num_classes", None))
        return next((v for v in given if isinstance(v, int) and v >= 2), None)

    def _num_classes(self, context: CheckContext, batch: Any, targets: Tensor | None) -> int | None:
        if (declared := self._declared(context)) is not None:
            return declared
        inputs, _ = context.split(batch)
        if inputs is None or targets is None or targets.is_floating_point():
            return None
        with suppress(Exception):
            model = context.copy_model().eval()
            with torch.no_grad():
                inferred = infer_num_classes(context.forward(model, inputs), targets)
            return inferred[0] if inferred else None
        return None

    def _labels(self, context: CheckContext, batches: list[Any], details: dict[str, Any]) -> None:
        targets: list[Any] = [context.split(b)[1] for b in batches]
        details["num_classes"] = classes = self._num_classes(context, batches[0], targets[0])
        is_label = [t is not None and not t.is_floating_point() and t.dtype != torch.bool for t in targets]
        labels = [t for t, keep in zip(targets, is_label, strict=True) if keep]
        if not labels:
            return
        flat = torch.cat([t.flatten() for t in labels])
        bad = _outside(flat, classes)
        if bad.any():  # judged against the loss that consumes the labels, where one does
            rows = zip(batches, targets, is_label, strict=True)
            batch = next(b for b, t, k in rows if k and _outside(t, classes).any())
            consumer = _label_loss(context, batch)
            if consumer is None and self._declared(context) is None:
                details["labels_range"] = "not judged: no class-index loss consumes the labels"
                bad = torch.zeros_like(bad)
            elif isinstance(consumer, tuple):
                classes, ignore, reached = consumer
                details.update(num_classes=classes, ignore_index=ignore)
                bad = _outside(flat, classes) & (flat != ignore)
                if not reached and bool(bad.any()):  # masked in the step (unlabelled rows): never scored
                    masked = f"{int(bad.sum())} outside [0, {classes}): masked before the loss"
                    details.update(labels_range=masked, labels_masked=True)
                    bad = torch.zeros_like(bad)
        details["labels_out_of_range"] = int(bad.sum())
        if details["labels_out_of_range"]:
            seen = flat[bad]
            summary = f"{int(bad.sum())} labels outside [0, {classes if classes is not None else 'C'}) "
            summary += f"(min {int(seen.min())}, max {int(seen.max())})"
            action = "Remap the labels to 0..C-1 and set the head's width to the number of classes."
            self._add("fail", summary, action)
        per_sample = [t for t in labels if t.ndim == 1 and t.numel() >= 2]
        if not per_sample:
            return
        every = torch.cat(per_sample)
        one_class = [len(t) >= 8 and torch.unique(t[t != IGNORE_INDEX]).numel() == 1 for t in per_sample]
        single = [i for i, one in enumerate(one_class) if one]
        many = torch.unique(every).numel() >= 2
        ordered = many and bool((every[1:] >= every[:-1]).all())
        shuffled = is_shuffled(context.train_dataloader)
        details.update(single_class_batches=single, labels_sorted=ordered, loader_shuffles=shuffled)
        if (many and len(single) == len(per_sample) and len(single) >= 2) or (ordered and shuffled is False):
            summary = f"labels come sorted: {len(single)} of {len(per_sample)} batches hold one class; "
            summary += f"the loader {'does not shuffle' if shuffled is False else 'serves them in order'}"
            action = "Shuffle: DataLoader(shuffle=True) or a RandomSampler over the whole dataset."
            self._add("fail", summary, action)
        elif single:
            action = "Check that the sampler shuffles across the whole dataset, not within sorted shards."
            self._add("warn", f"{len(single)} of {len(per_sample)} batches hold a single class", action)
        elif shuffled is False:
            summary = "the training loader does not shuffle (SequentialSampler): every epoch sees one order"
            self._add("warn", summary, "Use DataLoader(shuffle=True).")

    def _splits(
        self,
        context: CheckContext,
        batches: list[Any],
        details: dict[str, Any],
        judge_labels: bool = True,
        relate: bool = True,
        dataset: list[Any] | None = None,
    ) -> None:
        """Label sets and distributions, and the input-target relation, of training vs validation;
        ``dataset``: batches drawn uniformly when a sampler with a rule of its own drew ``batches``."""
        val = context.val_batches(self.num_batches)
        if not val:
            return
        layouts = [[(key, t.ndim) for key, _, t in entries(b[0])] for b in (batches, val)]
        if layouts[0] != layouts[1]:  # one split's target need not be the other's
            details["relation"] = "not compared: training and validation batches hold different entries"
            return
        train, held = _stacked(context, batches), _stacked(context, val)
        if train is None or held is None:
            details["relation"] = "not compared: the inputs or targets differ in shape between batches"
            return
        (x_t, y_t, g_t), (x_v, y_v, g_v) = train, held
        if x_t.shape == y_t.shape and torch.equal(x_t, y_t) and not torch.equal(x_v, y_v):
            details["relation"] = "not compared: training reconstructs its input, validation does not"
            return
        classes = 0
        if y_t.ndim == 1 and not y_t.is_floating_point() and y_t.dtype != torch.bool:
            ignore = details.get("ignore_index", IGNORE_INDEX)  # missing labels the loss ignores: no class
            classes_of = details.get("num_classes")
            keep_t, keep_v = (y_t != IGNORE_INDEX) & (y_t != ignore), (y_v != IGNORE_INDEX) & (y_v != ignore)
            if details.get("labels_masked"):  # rows whose labels the step masks (unlabelled): no class either
                keep_t, keep_v = keep_t & ~_outside(y_t, classes_of), keep_v & ~_outside(y_v, classes_of)
            drawn = _stacked(context, dataset) if dataset else None
            y_d = drawn[1][(drawn[1] != IGNORE_INDEX) & (drawn[1] != ignore)] if drawn else None
            if judge_labels and self._label_splits(y_t[keep_t], y_v[keep_v], details, y_d):
                return
            x_t, y_t, g_t = x_t[keep_t], y_t[keep_t], {k: v[keep_t] for k, v in g_t.items()}
            x_v, y_v, g_v = x_v[keep_v], y_v[keep_v], {k: v[keep_v] for k, v in g_v.items()}
            codes, y_all = torch.unique(torch.cat([y_t, y_v]), return_inverse=True)
            y_t, y_v, classes = y_all[: len(y_t)], y_all[len(y_t) :], len(codes)
        if not relate or y_t.is_complex() or y_t.dtype == torch.bool:
            return
        if _aligned(x_t, y_t) or not (y_t.is_floating_point() or (classes and y_t.ndim == 1)):
            details["relation"] = "not compared: a target per position or not per sample (training_pairs')"
            return
        found = relations((x_t, y_t, g_t), (x_v, y_v, g_v), classes)
        if (worst := self._pairing(found)) is not None:
            details["relation"] = worst.details()

    def _label_splits(self, y_t: Tensor, y_v: Tensor, details: dict[str, Any], y_d: Tensor | None) -> bool:
        """Validation labels unseen in training (``True``: most, a fail) and a shifted distribution; a
        sampler's shift (``y_d``: the dataset's labels drawn uniformly) is none when it evens out a dataset
        that matches validation (balancing), but one when it makes the labels less even (weights inverted)."""
        counts_t, counts_v = label_counts(y_t), label_counts(y_v)
        details.update(train_class_counts=counts_t, val_class_counts=counts_v)
        unseen = sum(n for c, n in counts_v.items() if c not in counts_t) / max(1, sum(counts_v.values()))
        details["val_unseen_label_fraction"] = unseen
        if unseen >= 0.5:
            summary = f"{unseen:.0%} of validation samples carry labels unseen in training "
            summary += f"({len(counts_t)} training, {len(counts_v)} validation classes)"
            action = "Split with stratification and build one label mapping for both splits."
            self._add("fail", summary, action)
            return True
        details["label_distribution"] = shift = label_shift(counts_t, counts_v)
        sampler = None  # the sampler's doing: "balances" (no shift) or "unbalances"; None: the dataset's
        if shift["significant"] and y_d is not None and y_d.ndim == 1 and len(y_d):
            counts_d = label_counts(y_d)
            if not label_shift(counts_d, counts_v)["significant"]:
                sampler = "balances" if entropy(counts_t) >= entropy(counts_d) else "unbalances"
                shift["sampler"] = sampler
        if shift["significant"] and sampler != "balances":
            summary = f"the label distribution differs between splits: total variation {shift['tv']:.2f} "
            summary += f"(chi-square {shift['chi2']:.0f}, {shift['df']} df)"
            action = "Stratify the split per class; if deliberate, report per-class metrics."
            if sampler:
                summary = (
                    f"the sampler draws labels less evenly than the dataset holds them (TV {shift['tv']:.2f})"
                )
                action = "Weight each sample by 1 / its class's count (one weight per sample, not per class)."
            self._add("warn", summary, action)
        return False

    def _further_targets(self, context: CheckContext, batches: list[Any], details: dict[str, Any]) -> None:
        """Each further target the loss reads (a box beside its class) is paired like the main one."""
        val = context.val_batches(self.num_batches)
        x, y = context.split(batches[0])
        keys = {call.target_key for call in context.first_loss_calls() if call.target_key is not None}
        entries_of = {k: split_batch(batches[0], target_key=k)[1] for k in keys}
        further = [k for k, v in entries_of.items() if v is not None and v is not x and v is not y]
        for key in sorted(further, key=str) if val else []:
            stacked = [_stacked(context, b, key) for b in (batches, val)]
            if any(s is None or not s[1].is_floating_point() or not 1 <= s[1].ndim <= 2 for s in stacked):
                continue
            (x_t, y_t, _), (x_v, y_v, _) = stacked  # type: ignore[misc]
            found = relations((x_t, y_t, {}), (x_v, y_v, {}), 0, both_ways=True)
            details.setdefault("further_targets", {})[str(key)] = [r.details() for r in found]
            self._pairing(found, f"target {key!r}")

    def _pairing(self, found: list[Relation], target: str = "") -> Relation | None:
        """The worst relation found (its finding added unless it passes)."""
        r = max(found, key=lambda r: (("pass", "warn", "fail").index(r.level), r.z), default=None)
        if r is None or r.level == "pass":
            return r
        other = "val" if r.fitted == "train" else "train"
        summary = f"pairing{' of ' + target if target else ''} differs across splits: {r.rule} fit on "
        summary += f"{r.fitted} score {r.own:.2f} there, {r.other:.2f} on {other} ({r.z:.0f} SE)"
        fix = f"Compare a few {other} samples with their targets (remapped labels, a one-sided augmentation)."
        self._found.append(Finding(r.level, summary, action=fix))
        return r


def _drawn_uniformly(context: CheckContext, count: int) -> list[Any] | None:
    """Batches drawn uniformly when the sampler picks by a rule of its own, else ``None``."""
    if (uniform := drawn_uniformly(context.train_dataloader, context.seed)) is None:
        return None
    with suppress(Exception):
        return context.read_batches(uniform, count) or None
    return None


def _outside(labels: Tensor, classes: int | None) -> Tensor:
    return ((labels < 0) & (labels != IGNORE_INDEX)) | (labels >= classes if classes is not None else False)


def _finite_loss(context: CheckContext, batch: Any) -> bool:
    """Whether a copy's training step returns a finite loss on ``batch`` (it masks NaN targets)."""
    with suppress(Exception), torch.no_grad():  # a step that cannot run on a copy: the values as they are
        return bool(context.training_loss(context.copy_model(), batch).isfinite())  # sync: once
    return False


def _label_loss(context: CheckContext, batch: Any) -> tuple[int, int, bool] | str | None:
    """``(C, ignore_index, reached)`` of the class-index loss on the labels, ``"raises"`` or ``None``."""
    try:
        model = context.copy_model()
        if any(p.device.type != "cpu" for p in model.parameters()):
            return "raises"
        with torch.no_grad():
            calls = context.loss_calls(model, batch)
    except Exception:
        return "raises"
    # a target computed in the step (pseudo-labels filling the missing ones) still declares its ignore_index
    for call in sorted(calls, key=lambda c: not c.target_keys):
        read = call.target_keys or call.target_from_model
        if call.num_classes is not None and call.integer_target and read:
            ignore = int(call.kwargs.get("ignore_index", IGNORE_INDEX))
            received = call.target.flatten() if call.target is not None else torch.zeros(0, dtype=torch.long)
            reached = bool((_outside(received, call.num_classes) & (received != ignore)).any())  # sync: once
            return call.num_classes, ignore, reached
    return None


def _stacked(context: CheckContext, batches: list[Any], target_key: Any = None) -> Split | None:
    """The batches' inputs, targets (or entry ``target_key``) and per-sample tensors, concatenated."""
    xs, ys = [], []
    groups: dict[str, list[Tensor]] = {}
    for batch in batches:
        x, y = context.split(batch)
        if target_key is not None:
            y = split_batch(batch, target_key=target_key)[1]
        if x is None or y is None or x.ndim == 0 or y.ndim == 0 or len(x) != len(y):
            return None
        xs.append(x.detach().cpu())
        ys.append(y.detach().cpu())
        for key, label, value in entries(batch):
            if key is not None and value is not y and value.ndim >= 1 and len(value) == len(y):
                groups.setdefault(label if value is not x else "inputs", []).append(value.detach().cpu())
    try:
        stacked = {k: torch.cat(v) for k, v in groups.items() if len(v) == len(batches)}
        return torch.cat(xs), torch.cat(ys), stacked
    except RuntimeError:
        return None


def _aligned(x: Tensor, y: Tensor) -> bool:
    """The target holds one value per input position: ``[N, *S]`` for inputs ``[N, *S]`` or ``[N, C, *S]``."""
    if y.ndim < 2 or y[0].numel() < 2:
        return False
    shape, target = tuple(x.shape[1:]), tuple(y.shape[1:])
    return shape == target or shape[1:] == target or (target[0] == 1 and shape[1:] == target[1:])


def _purity(loader: Any) -> dict[str, Any] | None:
    """What reading ``PURITY_SAMPLES`` samples changed in the dataset's stored tensors (restored)."""
    dataset = getattr(loader, "dataset", None)
    while isinstance(dataset, Subset):
        dataset = dataset.dataset
    if dataset is None or not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        return None
    stored = _stored_tensors(dataset)
    if not stored or sum(t.numel() for t in stored.values()) > MAX_SNAPSHOT:
        return None
    snapshot = {name: t.detach().clone() for name, t in stored.items()}
    reads = min(len(dataset), PURITY_SAMPLES)
    try:
        for i in range(reads):
            dataset[i]
    except Exception:  # a dataset that cannot be indexed this way: not tested
        return None
    changed = {name: n for name, t in stored.items() if (n := _differing(t, snapshot[name]))}
    for name in changed:
        with torch.no_grad():
            stored[name].copy_(snapshot[name])
    if not changed:
        return None
    name = max(changed, key=changed.__getitem__)
    return {"tensor": name, "changed_elements": changed[name], "reads": reads}


def _differing(now: Tensor, before: Tensor) -> int:
    """Elements that differ, a stored NaN equal to itself (a gap in the data is not a change)."""
    differ = now != before
    if now.is_floating_point():
        differ &= ~(now.isnan() & before.isnan())
    return int(differ.sum())


def _stored_tensors(dataset: Any) -> dict[str, Tensor]:
    """The tensors a dataset holds as attributes (one level, and in lists, tuples and dicts)."""
    found: dict[str, Tensor] = {}
    for attr, value in vars(dataset).items() if hasattr(dataset, "__dict__") else ():
        items: Any = [(None, value)]
        if isinstance(value, dict):
            items = value.items()
        elif isinstance(value, (list, tuple)) and len(value) <= 16:
            items = enumerate(value)
        for key, item in items:
            if isinstance(item, Tensor) and not item.is_meta:
                found[f"dataset.{attr}" + (f"[{key!r}]" if key is not None else "")] = item
    return found
