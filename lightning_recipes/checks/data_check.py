"""Check the first training batches: non-finite values, label range, constant or un-normalised inputs,
order."""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch import Tensor
from typing_extensions import override

from lightning_recipes._validation import check_int, check_positive
from lightning_recipes.checks._batches import Key, is_float, tensors_of
from lightning_recipes.checks._inference import IGNORE_INDEX, infer_num_classes
from lightning_recipes.checks.base import SanityCheck
from lightning_recipes.checks.context import CheckContext, is_shuffled
from lightning_recipes.checks.report import CheckResult

__all__ = ["DataCheck"]


class DataCheck(SanityCheck):
    """Look at the first ``num_batches`` training batches before training does.

    Fails on: NaN/Inf in any tensor of a batch; integer labels outside ``[0, C)`` (``-100``, the
    cross-entropy ignore index, is allowed); an input batch that is entirely constant; every batch holding a
    single class, or labels in sorted order from a loader that does not shuffle. Warns on: inputs far from
    unit scale (``|mean|`` or ``std`` above ``max_scale``: raw pixels 0-255, unscaled features), some
    single-class batches, a training loader that does not shuffle.

    ``C`` is ``num_classes``, else the datamodule's ``num_classes`` attribute, else inferred from the model's
    forward output on the first batch (logits ``[B, C]`` / ``[B, S, V]``). Class checks apply to 1-D integer
    targets. A PASS message names only what was checked and lists what could not be (no integer targets: no
    label checks; a loader with no inspectable sampler: no shuffling check).

    Cost: reads ``num_batches`` batches and runs one forward pass (to infer ``C``); a handful of host syncs,
    once.

    Args:
        num_batches: Batches inspected.
        num_classes: Number of classes, when known.
        max_scale: Inputs whose mean magnitude or standard deviation exceeds this get a warning.
        on_fail: ``"raise"`` or ``"warn"`` when used as a callback.
        input_key: Index or key of the input in a batch.
        target_key: Index or key of the target.

    Raises:
        ValueError: If ``num_batches < 1``, ``num_classes < 2`` or ``max_scale <= 0``.

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
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key)
        check_int("num_batches", num_batches, minimum=1)
        if num_classes is not None:
            check_int("num_classes", num_classes, minimum=2)
        check_positive("max_scale", max_scale)
        self.num_batches = num_batches
        self.num_classes = num_classes
        self.max_scale = max_scale

    @override
    def check(self, context: CheckContext) -> CheckResult:
        batches = context.train_batches(self.num_batches)
        fails: list[str] = []
        warns: list[str] = []
        details: dict[str, Any] = {"batches": len(batches)}

        nonfinite = self._nonfinite(batches)
        details["nonfinite_values"] = nonfinite
        if nonfinite:
            fails.append(
                f"{nonfinite} NaN/Inf value(s) in the first {len(batches)} batches. NaN in the data turns "
                "the loss and every weight into NaN. Likely causes: missing values in the source, division "
                "by a zero std in normalisation, log of 0. Try: torch.nan_to_num or drop the rows; check the "
                "normalisation statistics."
            )

        inputs = [context.split(b)[0] for b in batches]
        targets = [context.split(b)[1] for b in batches]
        # What each part of the check looked at: a PASS message states only these (issue 12, item 11).
        checked: dict[str, str] = {"finite": "finite"}
        unchecked: dict[str, str] = {}
        self._inputs(inputs, details, fails, warns, checked, unchecked)
        classes = self._num_classes(context, batches[0], targets[0])
        details["num_classes"] = classes
        self._labels(targets, classes, context, details, fails, warns, checked, unchecked)

        if fails:
            return CheckResult(self.name, "fail", " | ".join(fails + warns), details)
        if warns:
            return CheckResult(self.name, "warn", " | ".join(warns), details)
        order = ("finite", "labels", "inputs", "classes", "shuffle")
        looked = ", ".join(checked[k] for k in order if k in checked)
        message = f"{len(batches)} batch(es) look sane: {looked}."
        if unchecked:
            message += " Not checked: " + "; ".join(unchecked[k] for k in order if k in unchecked) + "."
        return CheckResult(self.name, "pass", message, details)

    @staticmethod
    def _nonfinite(batches: list[Any]) -> int:
        counts = [(~torch.isfinite(t)).sum() for b in batches for t in tensors_of(b) if is_float(t)]
        return int(torch.stack(counts).sum()) if counts else 0  # sync: once

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
