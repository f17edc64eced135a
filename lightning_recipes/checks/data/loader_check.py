"""Check what the loaders serve: at least one batch per epoch, drawn from the dataset rather than a few of its
samples over and over, and every class at no less than its share."""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, Subset, TensorDataset
from typing_extensions import Unpack, override

from lightning_recipes._validation import check_int, check_positive
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.data._loader_samples import (
    check_pair,
    dataset_labels,
    served_indices,
    yields_a_batch,
)
from lightning_recipes.checks.report import CheckInconclusive, CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.loaders import describe_loader, is_shuffled, loader_length

__all__ = ["LoaderCheck"]

#: Indices of one epoch read from a sampler (integers only, no sample is loaded).
MAX_EPOCH_INDICES = 200_000


class LoaderCheck(SanityCheck):
    """The loaders yield batches and serve every class about as often as the dataset holds it.
    Cost: one epoch of sampler indices, at most ``max_samples`` label reads.

    Args:
        max_samples: Most ``dataset[i]`` reads for labels when the dataset has no cheaper label source.
        z_threshold: Standard deviations of binomial noise a served count must fall below its expected count.
        rarer_ratios: ``(warn, fail)`` served share / dataset share of a rare class.
        min_expected: A class never served is a fail only when it should have been served this many times.
        target_key: Index or key of the target (default: the one the loss consumes).

    Example:
        >>> import torch
        >>> from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier
        >>> y = torch.tensor([0] * 700 + [1] * 200 + [2] * 60 + [3] * 40)
        >>> data = TensorDataset(torch.randn(1000, 16), y)
        >>> wrong = WeightedRandomSampler(torch.bincount(y).float()[y], num_samples=1000)  # meant 1 / counts
        >>> report = preflight(TinyClassifier(), train_dataloaders=DataLoader(data, 50, sampler=wrong),
        ...                    checks=[LoaderCheck()], progress=False)
        >>> report["loader"].status
        'fail'
    """

    name = "loader"

    def __init__(
        self,
        max_samples: int = 4096,
        z_threshold: float = 4.0,
        rarer_ratios: tuple[float, float] = (0.8, 0.5),
        min_expected: float = 10.0,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("max_samples", max_samples, minimum=10)
        check_positive("z_threshold", z_threshold)
        check_positive("min_expected", min_expected)
        check_pair("rarer_ratios", rarer_ratios, "ratios in (0, 1) with fail <= warn", descending=True)
        self.max_samples, self.z_threshold = max_samples, z_threshold
        self.rarer_ratios = (float(rarer_ratios[0]), float(rarer_ratios[1]))
        self.min_expected = min_expected

    @override
    def check(self, context: CheckContext) -> CheckResult:
        train = context.train_dataloader
        if train is None:
            raise CheckSkipped("no training loader: pass `train_dataloaders=` or `datamodule=`.")
        for split, loader in (("training", train), ("validation", context.val_dataloader)):
            if loader is not None and not yields_a_batch(loader):
                summary, action = _empty(split, loader)
                empty = {"empty_loaders": 1, "split": split, "loader": describe_loader(loader)}
                return self.verdict("fail", summary, empty, action=action)
        details: dict[str, Any] = {"empty_loaders": 0}
        served = served_indices(train, MAX_EPOCH_INDICES)
        length = served.batches if served is not None and served.complete else loader_length(train)
        batches = f"{'>= 1' if length is None else length} batch(es) per epoch"
        if served is None or not isinstance(train, DataLoader):
            details["not_checked"] = "the served label distribution (not a map-style DataLoader)"
            return self.verdict("pass", f"the training loader yields {batches}", details)
        details["batches_per_epoch"] = served.batches if served.complete else None
        if (repeated := _few_repeated(served, train)) is not None:
            later = _later_epoch(context, train)  # a curriculum that widens with set_epoch: judged at its end
            if later is None or _few_repeated(served_indices(later[1], MAX_EPOCH_INDICES), later[1]):
                reached, draws, size = repeated
                details |= {"distinct_served": reached, "served_samples": draws, "dataset_samples": size}
                summary = f"an epoch draws {draws} samples from only {reached} of the dataset's {size}"
                action = "Weight each sample, not each class: WeightedRandomSampler(w[y], len(y))."
                return self.verdict("fail", summary, details, action=action)
        if not served.complete and is_shuffled(train) is not True:
            details["not_checked"] = f"the served label distribution (a fixed order of > {MAX_EPOCH_INDICES})"
            return self.verdict("pass", f"the training loader yields {batches}", details)
        if (comparison := self._compare(context, train, served.indices)) is None:
            raise CheckSkipped(f"{batches}; targets not one integer label per sample (else `target_key=`)")
        result = self._verdict(comparison, batches, details)
        later = _later_epoch(context, train) if result.status in ("fail", "warn") else None
        if later is not None:  # an epoch-dependent sampler (a curriculum): judge it where the run ends up
            epoch, loader = later
            indices = served_indices(loader, MAX_EPOCH_INDICES)
            shares = None if indices is None else self._compare(context, loader, indices.indices)
            ended = None if shares is None else self._verdict(shares, batches, {})
            if ended is not None and ended.status == "pass":
                details = {**result.details, "epoch_dependent": {"epoch": epoch, "epoch_0": result.summary}}
                summary = f"set_epoch moves the mix: a class short in epoch 0, all at their share at {epoch}"
                return self.verdict("pass", summary, details)
        return result

    def _compare(
        self, context: CheckContext, loader: DataLoader[Any], served: list[int]
    ) -> tuple[list[ClassShare], int, int] | None:
        dataset = loader.dataset
        size = len(dataset)  # type: ignore[arg-type]
        if _cheap_labels(dataset):  # every label, read without loading a sample
            if (labels := dataset_labels(dataset, range(size), context.keys()[1])) is None:
                return None
            served_labels = labels[torch.as_tensor(served, dtype=torch.long)]
            return compare_shares(labels, served_labels, reference_is_sample=False)
        half = self.max_samples // 2
        generator = torch.Generator().manual_seed(context.seed)
        reference = torch.randperm(size, generator=generator)[:half].tolist()  # every sample when <= half
        step = max(1, len(served) // half)
        part = served[::step][:half]  # evenly spaced through the epoch: representative for any order
        needed = sorted(set(reference) | set(part))
        if (labels := dataset_labels(dataset, needed, context.keys()[1])) is None:
            return None
        at = dict(zip(needed, labels.tolist(), strict=True))
        reference_labels, part_labels = (torch.tensor([at[i] for i in ids]) for ids in (reference, part))
        return compare_shares(reference_labels, part_labels, reference_is_sample=len(reference) < size)

    def _verdict(
        self, comparison: tuple[list[ClassShare], int, int], batches: str, details: dict[str, Any]
    ) -> CheckResult:
        classes, n, total = comparison
        uniform = 1.0 / len(classes)
        warn_ratio, fail_ratio = self.rarer_ratios
        details.update(
            served_samples=n,
            dataset_samples=total,
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
        never = [c for c in classes if c.served_count == 0 and c.expected >= self.min_expected]
        rarer = [c for c in classes if c not in never and c.dataset_share < uniform and c.ratio <= warn_ratio]
        beyond = sorted((c for c in rarer if c.z <= -self.z_threshold), key=lambda c: c.ratio)
        action = "Check the sampler's indices and weights per class: WeightedRandomSampler(1.0 / counts[y])."
        if never:
            c = never[0]
            summary = f"{len(never)} class(es) never served in an epoch of {n}: class {c.label} is "
            summary += f"{c.dataset_share:.1%} of the data"
            return self.verdict("fail", summary, details, action=action)
        if beyond:
            c = beyond[0]
            status: Literal["fail", "warn"] = "fail" if c.ratio <= fail_ratio else "warn"  # never served: 0
            summary = f"the sampler makes class {c.label} rarer: {c.dataset_share:.2%} of the data, "
            summary += f"{c.served_share:.2%} served (z = {c.z:.1f})"
            return self.verdict(status, summary, details, action=action)
        if rarer:
            c = rarer[0]
            noise = f"within sampling noise (z = {c.z:.1f}); a longer epoch (`num_samples`) would tell"
            raise CheckInconclusive(f"class {c.label} is served at {c.ratio:.2f} x its share, {noise}")
        passed = f"{batches}; all {len(classes)} classes served at their share or more "
        return self.verdict("pass", passed + f"(rarest z = {classes[0].z:.1f})", details)


def _later_epoch(context: CheckContext, loader: DataLoader[Any]) -> tuple[int, DataLoader[Any]] | None:
    """``loader`` with its sampler copied at the last epoch (10 if unknown); ``None``: no ``set_epoch``."""
    sampler = loader.sampler
    by_epoch = callable(getattr(sampler, "set_epoch", None)) and not isinstance(sampler, DistributedSampler)
    if not by_epoch or loader.batch_size is None or not isinstance(loader.batch_sampler, BatchSampler):
        return None
    planned = context.run_length.max_epochs
    epoch = planned - 1 if planned is not None and planned > 1 else 10
    try:
        later: Any = copy.deepcopy(sampler, {id(loader.dataset): loader.dataset})  # the dataset is shared
        later.set_epoch(epoch)
    except Exception:  # a sampler that cannot be copied: judge epoch 0 alone
        return None
    return epoch, DataLoader(
        loader.dataset, batch_size=loader.batch_size, sampler=later, drop_last=loader.drop_last
    )


def _few_repeated(served: Any, loader: DataLoader[Any]) -> tuple[int, int, int] | None:
    """``(distinct, draws, dataset size)`` of an epoch drawing >= 10x from < 10% of the dataset, else None."""
    if served is None or not served.complete:
        return None
    reached, draws, size = len(set(served.indices)), len(served.indices), loader_length(loader.dataset)
    return (reached, draws, size) if size and draws >= 10 * reached and 10 * reached <= size else None


def _empty(split: str, loader: Any) -> tuple[str, str]:
    fix = "Make the loader yield at least one batch."
    if isinstance(loader, DataLoader):
        size, indices = loader_length(loader.dataset), loader_length(loader.sampler)
        batch_size = loader.batch_size
        if size == 0:
            fix = "The dataset is empty: check its path, split or filters."
        elif indices == 0:
            fix = f"The sampler ({type(loader.sampler).__name__}) yields no index: check the indices it gets."
        elif loader.drop_last and batch_size is not None and indices is not None and batch_size > indices:
            fix = f"drop_last drops the only batch ({indices} < batch_size={batch_size}): drop_last=False."
    return f"the {split} loader yields no batch per epoch", fix


def _cheap_labels(dataset: Any) -> bool:
    """Whether every label of ``dataset`` can be read without loading samples."""
    if isinstance(dataset, Subset):
        return _cheap_labels(dataset.dataset)
    if isinstance(dataset, TensorDataset):
        return True
    targets = getattr(dataset, "targets", None)
    sized = isinstance(targets, (list, tuple, torch.Tensor))
    return sized and loader_length(targets) == loader_length(dataset)


@dataclass(frozen=True)
class ClassShare:
    """One class: its dataset and served shares, their ratio and the served count's binomial z-score."""

    label: int
    dataset_share: float
    served_count: int
    served_share: float
    expected: float
    z: float

    @property
    def ratio(self) -> float:
        return self.served_share / self.dataset_share


def compare_shares(
    dataset: Tensor, served: Tensor, *, reference_is_sample: bool
) -> tuple[list[ClassShare], int, int]:
    """Every class of ``dataset``, rarest first, with its share of ``served`` and its ``z``; both counts."""
    labels, counts = torch.unique(dataset, return_counts=True)
    total, n = int(counts.sum()), len(served)
    served_counts = {int(k): int(v) for k, v in zip(*torch.unique(served, return_counts=True), strict=True)}
    extra = n / total if reference_is_sample and total else 0.0
    classes = []
    for label, count in zip(labels.tolist(), counts.tolist(), strict=True):
        share = count / total
        got = served_counts.get(label, 0)
        expected = n * share
        std = math.sqrt(max(n * share * (1 - share) * (1 + extra), 1e-12))
        classes.append(ClassShare(label, share, got, got / n if n else 0.0, expected, (got - expected) / std))
    classes.sort(key=lambda c: (c.dataset_share, c.label))
    return classes, n, total
