"""Check what the loaders serve: at least one batch per epoch, and every class at no less than its share."""

from __future__ import annotations

from typing import Any, Literal

import torch
from torch.utils.data import DataLoader
from typing_extensions import override

from lightning_recipes._validation import check_int, check_positive
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.data._loader_samples import dataset_labels, served_indices, yields_a_batch
from lightning_recipes.checks.data._served_shares import ClassShare, ShareComparison, compare_shares
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import is_shuffled
from lightning_recipes.harness.batches import Key
from lightning_recipes.harness.loaders import describe_loader

__all__ = ["LoaderCheck"]

#: Indices of one epoch read from a sampler (integers only, no sample is loaded).
MAX_EPOCH_INDICES = 200_000


class LoaderCheck(SanityCheck):
    """The training (and validation) loader yields batches, and serves every class about as often as the
    dataset holds it.

    An empty loader fails, naming ``len(dataset)``, ``batch_size`` and ``drop_last``. For integer targets, one
    epoch of the sampler's indices is compared with the dataset's labels: a class never served, or a rare
    class served at most ``rarer_ratios`` of its share ``z_threshold`` binomial standard errors below it,
    fails (warns); oversampling rare classes passes; too few samples to tell is ``inconclusive``.

    Cost: the sampler's indices for one epoch; labels read for at most ``max_samples`` indices.

    Args:
        max_samples: Most ``dataset[i]`` reads for labels when the dataset has no cheaper label source.
        z_threshold: Standard deviations of binomial noise a served count must fall below its expected count.
        rarer_ratios: ``(warn, fail)`` served share / dataset share of a rare class.
        min_expected: A class never served is a fail only when it should have been served this many times.
        target_key: Index or key of the target (default: the one the loss consumes).

    Raises:
        ValueError: If ``max_samples < 10``, ``min_expected <= 0``, ``z_threshold <= 0`` or ``rarer_ratios``
            is not ``(warn, fail)`` in (0, 1) with ``fail <= warn``.

    Example:
        >>> import torch
        >>> from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier
        >>> y = torch.tensor([0] * 700 + [1] * 200 + [2] * 60 + [3] * 40)
        >>> data = TensorDataset(torch.randn(1000, 16), y)
        >>> counts = torch.bincount(y).float()
        >>> wrong = WeightedRandomSampler(counts[y], num_samples=1000)  # meant 1 / counts[y]
        >>> report = preflight(TinyClassifier(), train_dataloaders=DataLoader(data, 50, sampler=wrong),
        ...                    checks=[LoaderCheck()], progress=False)
        >>> report["loader"].status
        'fail'
        >>> right = WeightedRandomSampler(1 / counts[y], num_samples=1000)
        >>> report = preflight(TinyClassifier(), train_dataloaders=DataLoader(data, 50, sampler=right),
        ...                    checks=[LoaderCheck()], progress=False)
        >>> report["loader"].status
        'pass'
    """

    name = "loader"

    def __init__(
        self,
        max_samples: int = 4096,
        z_threshold: float = 4.0,
        rarer_ratios: tuple[float, float] = (0.8, 0.5),
        min_expected: float = 10.0,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_int("max_samples", max_samples, minimum=10)
        check_positive("z_threshold", z_threshold)
        check_positive("min_expected", min_expected)
        if (
            not isinstance(rarer_ratios, (tuple, list))
            or len(rarer_ratios) != 2
            or not all(
                isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1 for v in rarer_ratios
            )
            or rarer_ratios[1] > rarer_ratios[0]
        ):
            raise ValueError(
                "`rarer_ratios` must be a pair (warn, fail) of ratios in (0, 1) with fail <= warn, got "
                f"{rarer_ratios!r}."
            )
        self.max_samples = max_samples
        self.z_threshold = z_threshold
        self.rarer_ratios = (float(rarer_ratios[0]), float(rarer_ratios[1]))
        self.min_expected = min_expected

    @override
    def check(self, context: CheckContext) -> CheckResult:
        train = context.train_dataloader
        if train is None:
            raise CheckSkipped("no training loader: pass `train_dataloaders=` or `datamodule=`.")
        empty = [
            _empty_message(split, loader)
            for split, loader in (("training", train), ("validation", context.val_dataloader))
            if loader is not None and not yields_a_batch(loader)
        ]
        details: dict[str, Any] = {"empty_loaders": len(empty)}
        if empty:
            return CheckResult(self.name, "fail", " | ".join(empty), details)
        served = served_indices(train, MAX_EPOCH_INDICES)
        batches = f"the training loader yields {_batches(train, served)} batch(es) per epoch"
        if served is None or not isinstance(train, DataLoader):
            return CheckResult(
                self.name,
                "pass",
                f"{batches}. Not checked: the served label distribution (not a map-style DataLoader, so its "
                "sampler's indices cannot be read).",
                details,
            )
        details["batches_per_epoch"] = served.batches if served.complete else None
        if not served.complete and is_shuffled(train) is not True:
            return CheckResult(
                self.name,
                "pass",
                f"{batches}. Not checked: the served label distribution (an epoch of more than "
                f"{MAX_EPOCH_INDICES} indices in a fixed order: its first part does not represent it).",
                details,
            )
        comparison = self._compare(context, train, served.indices)
        if comparison is None:
            raise CheckSkipped(
                f"{batches}, but its targets are not one integer label per sample (regression, sequences or "
                "masks; or a dataset whose samples have no target at the target key), so there is no class "
                "distribution to compare. Pass `target_key=` if the labels are elsewhere."
            )
        return self._verdict(comparison, batches, details)

    def _compare(
        self, context: CheckContext, loader: DataLoader[Any], served: list[int]
    ) -> ShareComparison | None:
        dataset = loader.dataset
        size = len(dataset)  # type: ignore[arg-type]
        cheap = _cheap_labels(dataset)
        half = self.max_samples // 2
        if cheap:
            return self._compare_cheap(context, dataset, size, served)
        generator = torch.Generator().manual_seed(context.seed)
        reference = (
            list(range(size)) if size <= half else torch.randperm(size, generator=generator)[:half].tolist()
        )
        step = max(1, len(served) // half)
        part = served[::step][:half]  # evenly spaced through the epoch: representative for any order
        needed = sorted(set(reference) | set(part))
        labels = dataset_labels(dataset, needed, context.keys()[1])
        if labels is None:
            return None
        at = dict(zip(needed, labels.tolist(), strict=True))
        return compare_shares(
            torch.tensor([at[i] for i in reference]),
            torch.tensor([at[i] for i in part]),
            reference_is_sample=len(reference) < size,
        )

    def _compare_cheap(
        self, context: CheckContext, dataset: Any, size: int, served: list[int]
    ) -> ShareComparison | None:
        labels = dataset_labels(dataset, range(size), context.keys()[1])
        if labels is None:
            return None
        return compare_shares(
            labels, labels[torch.as_tensor(served, dtype=torch.long)], reference_is_sample=False
        )

    def _verdict(self, comparison: ShareComparison, batches: str, details: dict[str, Any]) -> CheckResult:
        classes = comparison.classes
        n = comparison.served
        uniform = 1.0 / len(classes)
        warn_ratio, fail_ratio = self.rarer_ratios
        details.update(
            served_samples=n,
            dataset_samples=comparison.reference,
            noise="binomial z of each class's served count",
            classes={
                str(c.label): {
                    "dataset_share": round(c.dataset_share, 5),
                    "served_share": round(c.served_share, 5),
                    "z": round(c.z, 2),
                }
                for c in classes[:50]
            },
            measured=round(min(c.ratio for c in classes), 4),
        )
        fails: list[str] = []
        warns: list[str] = []
        thin: list[ClassShare] = []
        never = [c for c in classes if c.served_count == 0 and c.expected >= self.min_expected]
        if never:
            fails.append(_never_message(never, n))
        for c in classes:
            if c in never or c.dataset_share >= uniform or c.ratio > warn_ratio:
                continue
            if c.z > -self.z_threshold:
                thin.append(c)
            elif c.ratio <= fail_ratio or c.served_count == 0:
                fails.append(self._rarer_message(c, classes, n))
            else:
                warns.append(self._rarer_message(c, classes, n))
        if fails:
            return CheckResult(self.name, "fail", " | ".join(fails + warns), details)
        if warns:
            return CheckResult(self.name, "warn", " | ".join(warns), details)
        if thin:
            c = thin[0]
            return CheckResult(
                self.name,
                "inconclusive",
                f"{batches}; class {c.label} is served at {c.ratio:.2f} x its dataset share "
                f"({c.served_share:.2%} vs {c.dataset_share:.2%}), but only {c.served_count} of {n} served "
                f"samples: within sampling noise (z = {c.z:.1f}, threshold -{self.z_threshold:g}). "
                "Try: a longer epoch (the sampler's "
                "`num_samples`), or check the sampler's weights by hand.",
                details,
            )
        rarest = classes[0]
        return CheckResult(
            self.name,
            "pass",
            f"{batches}; it serves all {len(classes)} classes at no less than their dataset share beyond "
            f"noise (rarest class {rarest.label}: {rarest.dataset_share:.2%} of the dataset, "
            f"{rarest.served_share:.2%} of {n} served samples, z = {rarest.z:.1f}).",
            details,
        )

    def _rarer_message(self, c: ClassShare, classes: list[ClassShare], n: int) -> str:
        gainer = max(classes, key=lambda k: k.ratio)
        return (
            f"the sampler makes rare class {c.label} rarer: {c.dataset_share:.2%} of the dataset but "
            f"{c.served_share:.2%} of {n} served samples ({c.ratio:.2f} x its share; expected "
            f"{c.expected:.0f}, served {c.served_count}, z = {c.z:.1f}, beyond the binomial noise threshold "
            f"-{self.z_threshold:g}) while class {gainer.label} gains ({gainer.dataset_share:.2%} -> "
            f"{gainer.served_share:.2%}). Likely cause: sample weights proportional to the class frequency "
            "(`counts[y]`) where the inverse was meant (`1 / counts[y]`), or a filter in the sampler. "
            "Try: WeightedRandomSampler(1.0 / counts[y], ...)."
        )


def _never_message(never: list[ClassShare], n: int) -> str:
    listed = ", ".join(
        f"class {c.label} ({c.dataset_count} samples, {c.dataset_share:.2%}; expected {c.expected:.0f})"
        for c in never[:5]
    )
    return (
        f"{len(never)} class(es) of the dataset are never served in one epoch of {n} samples: {listed}. The "
        "model never sees them and cannot predict them. Likely causes: a sampler or Subset whose indices "
        "exclude them, zero weights in a WeightedRandomSampler, a split that put them all in validation. "
        "Try: check the sampler's indices / weights per class; split with stratification."
    )


def _empty_message(split: str, loader: Any) -> str:
    described = describe_loader(loader)
    fix = "make the loader yield at least one batch"
    if isinstance(loader, DataLoader):
        size = _length(loader.dataset)
        indices = _length(loader.sampler)
        batch_size = loader.batch_size
        if size == 0:
            fix = "the dataset is empty: check its path, split or a filter that removed every sample"
        elif indices == 0:
            sampler = type(loader.sampler).__name__
            fix = f"the sampler ({sampler}) yields no index: check the indices it is given"
        elif loader.drop_last and batch_size is not None and indices is not None and batch_size > indices:
            fix = (
                f"drop_last=True drops the only, partial batch ({indices} samples < "
                f"batch_size={batch_size}): set drop_last=False or batch_size <= {indices}"
            )
    return (
        f"the {split} loader yields no batch per epoch ({described}): "
        + ("no training step runs" if split == "training" else "validation never runs")
        + f", and every metric of the run is empty. Try: {fix}."
    )


def _batches(loader: Any, served: Any) -> str:
    if served is not None and served.complete:
        return str(served.batches)
    try:
        return str(len(loader))
    except Exception:
        return ">= 1"


def _length(obj: Any) -> int | None:
    try:
        return len(obj)
    except Exception:
        return None


def _cheap_labels(dataset: Any) -> bool:
    """Whether every label of ``dataset`` can be read without loading samples."""
    from torch.utils.data import Subset, TensorDataset

    if isinstance(dataset, Subset):
        return _cheap_labels(dataset.dataset)
    if isinstance(dataset, TensorDataset):
        return True
    targets = getattr(dataset, "targets", None)
    return isinstance(targets, (list, tuple, torch.Tensor)) and _length(targets) == _length(dataset)
