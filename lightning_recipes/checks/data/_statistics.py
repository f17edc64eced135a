"""The label arithmetic of ``data``'s split comparison: class counts, label sets and proportions as text, the
label-distribution shift and the remapped-class test.

Pure functions of tensors and counts returning frozen records: no model, no context, no verdict wording
beyond the short label lists the messages quote. ``tests/checks/test_data_statistics.py`` pins them to
hand-computed values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

__all__ = [
    "ClassMixing",
    "LabelRange",
    "LabelShift",
    "RemappedClass",
    "Remapping",
    "class_counts",
    "class_mixing",
    "distribution_shift",
    "label_range",
    "labelled",
    "labels_in_range",
    "proportions",
    "remapped_classes",
    "split_labels",
]

_MAX_FEATURES = 4096  # class means of larger inputs use every k-th feature
_RESPLITS = 20  # random splits of the training samples: how well class means match under an i.i.d. split
NOISE_Z = 3.5  # class means match their own class this many of those re-splits' deviations worse: remapped


def labelled(pairs: Sequence[tuple[Tensor | None, Tensor | None]]) -> list[tuple[Tensor | None, Tensor]]:
    """``(inputs, labels)`` of the batches holding one integer class label per sample.

    Example:
        >>> import torch
        >>> x = torch.zeros(2, 3)
        >>> pairs = [(x, torch.tensor([0, 1])), (x, torch.tensor([0.5, 1.0])), (x, torch.ones(2, 2))]
        >>> len(labelled(pairs))
        1
    """
    return [
        (x, y)
        for x, y in pairs
        if y is not None and y.ndim == 1 and not y.is_floating_point() and y.dtype != torch.bool
    ]


@dataclass(frozen=True)
class LabelRange:
    """How many labels fall outside ``[0, classes)`` (``[0, inf)`` when the class count is unknown), and the
    smallest and largest of them (``None`` when none does)."""

    out_of_range: int
    low: int | None = None
    high: int | None = None


def labels_in_range(labels: Sequence[Tensor], classes: int | None, ignore_index: int) -> LabelRange:
    """Labels outside ``[0, classes)`` among integer label tensors, ``ignore_index`` allowed. One host sync
    (three when some are out of range).

    Example:
        >>> import torch
        >>> labels_in_range([torch.tensor([0, 3, -100]), torch.tensor([[5, -1]])], 4, ignore_index=-100)
        LabelRange(out_of_range=2, low=-1, high=5)
        >>> labels_in_range([torch.tensor([0, 9])], None, ignore_index=-100)
        LabelRange(out_of_range=0, low=None, high=None)
    """
    flat = torch.cat([t.flatten() for t in labels])
    bad = (flat < 0) & (flat != ignore_index)
    if classes is not None:
        bad = bad | (flat >= classes)
    out_of_range = int(bad.sum())  # sync: once
    if not out_of_range:
        return LabelRange(0)
    seen = flat[bad]
    return LabelRange(out_of_range, int(seen.min()), int(seen.max()))


@dataclass(frozen=True)
class ClassMixing:
    """How the classes mix over ``batches`` label batches (one label per sample, at least 2 samples):
    ``single`` lists the batches of at least 8 samples holding one class (``ignore_index`` aside),
    ``classes`` counts the distinct labels over all of them and ``sorted`` says whether, with at least 2
    classes, the labels never decrease from one sample to the next."""

    batches: int
    single: tuple[int, ...]
    classes: int
    sorted: bool

    @property
    def all_single(self) -> bool:
        """Every batch holds one class, and not all the same one."""
        return self.classes >= 2 and len(self.single) == self.batches


def class_mixing(labels: Sequence[Tensor], ignore_index: int) -> ClassMixing | None:
    """The class mixing of the label batches holding one label per sample; ``None`` when none does.

    Example:
        >>> import torch
        >>> class_mixing([torch.zeros(8).long(), torch.ones(8).long()], ignore_index=-100)
        ClassMixing(batches=2, single=(0, 1), classes=2, sorted=True)
        >>> class_mixing([torch.tensor([[0, 1]])], ignore_index=-100) is None
        True
    """
    per_sample = [t for t in labels if t.ndim == 1 and t.numel() >= 2]
    if not per_sample:
        return None
    distinct = [int(torch.unique(t[t != ignore_index]).numel()) for t in per_sample]
    overall = int(torch.unique(torch.cat(per_sample)).numel())
    single = tuple(i for i, n in enumerate(distinct) if n == 1 and per_sample[i].numel() >= 8)
    flat = torch.cat(per_sample)
    ordered = overall >= 2 and bool((flat[1:] >= flat[:-1]).all())
    return ClassMixing(len(per_sample), single, overall, ordered)


def class_counts(labels: Tensor) -> dict[int, int]:
    """``{label: count}`` in ascending label order.

    Example:
        >>> import torch
        >>> class_counts(torch.tensor([2, 0, 2, 2]))
        {0: 1, 2: 3}
    """
    return dict(zip(*(t.tolist() for t in torch.unique(labels, return_counts=True)), strict=True))


@dataclass(frozen=True)
class SplitLabels:
    """The labelled batches of the training and validation splits, the masks of their samples that carry a
    label (not ``ignore_index``) over the concatenated batches, and the class counts of those samples."""

    train: tuple[tuple[Tensor | None, Tensor], ...]
    val: tuple[tuple[Tensor | None, Tensor], ...]
    keep_train: Tensor
    keep_val: Tensor
    train_counts: dict[int, int]
    val_counts: dict[int, int]

    @property
    def shared(self) -> set[int]:
        return set(self.train_counts) & set(self.val_counts)

    @property
    def unseen(self) -> int:
        """Validation samples whose label no training sample carries."""
        return sum(count for label, count in self.val_counts.items() if label not in self.train_counts)

    @property
    def unseen_fraction(self) -> float:
        return self.unseen / sum(self.val_counts.values())


def split_labels(
    train: Sequence[tuple[Tensor | None, Tensor | None]],
    val: Sequence[tuple[Tensor | None, Tensor | None]],
    ignore_index: int,
) -> SplitLabels | None:
    """The labels of both splits' ``(inputs, targets)`` batches; ``None`` when a split has no batch of one
    integer label per sample or no sample with a label. One host sync.

    Example:
        >>> import torch
        >>> x = torch.zeros(3, 2)
        >>> found = split_labels([(x, torch.tensor([0, 1, 1]))], [(x, torch.tensor([1, 2, -100]))], -100)
        >>> found.train_counts, found.val_counts, found.shared, found.unseen, found.unseen_fraction
        ({0: 1, 1: 2}, {1: 1, 2: 1}, {1}, 1, 0.5)
    """
    train_pairs, val_pairs = labelled(train), labelled(val)
    if not train_pairs or not val_pairs:
        return None
    y_train = torch.cat([y for _, y in train_pairs]).cpu()  # sync: once
    y_val = torch.cat([y for _, y in val_pairs]).cpu()
    keep_train, keep_val = y_train != ignore_index, y_val != ignore_index
    y_train, y_val = y_train[keep_train], y_val[keep_val]
    if len(y_train) == 0 or len(y_val) == 0:
        return None
    return SplitLabels(
        tuple(train_pairs),
        tuple(val_pairs),
        keep_train,
        keep_val,
        class_counts(y_train),
        class_counts(y_val),
    )


def label_range(counts: dict[int, int]) -> str:
    """The labels of ``counts`` as a set, elided past 6.

    Example:
        >>> label_range({3: 1, 1: 2}), label_range({k: 1 for k in range(10)})
        ('{1, 3}', '{0, 1, ..., 9} (10 labels)')
    """
    labels = sorted(counts)
    if len(labels) > 6:
        return f"{{{labels[0]}, {labels[1]}, ..., {labels[-1]}}} ({len(labels)} labels)"
    return "{" + ", ".join(map(str, labels)) + "}"


def proportions(counts: dict[int, int]) -> str:
    """The four commonest labels with their shares, commonest first.

    Example:
        >>> proportions({0: 1, 1: 3}), proportions({0: 5, 1: 1, 2: 1, 3: 1, 4: 2})
        ('1: 75%, 0: 25%', '0: 50%, 4: 20%, 1: 10%, 2: 10%, ...')
    """
    total = sum(counts.values())
    shown = sorted(counts.items(), key=lambda kv: -kv[1])[:4]
    return ", ".join(f"{label}: {count / total:.0%}" for label, count in shown) + (
        ", ..." if len(counts) > 4 else ""
    )


@dataclass(frozen=True)
class LabelShift:
    """Total variation between two label distributions, the chi-square statistic of homogeneity on ``df``
    degrees of freedom, and whether both exceed sampling noise."""

    tv: float
    chi2: float
    df: int
    significant: bool

    def details(self) -> dict[str, Any]:
        """The check's ``label_distribution`` entry."""
        return {"tv": self.tv, "chi2": self.chi2, "df": self.df, "significant": self.significant}


def distribution_shift(train: dict[int, int], val: dict[int, int]) -> LabelShift:
    """Total variation between the label distributions and a chi-square test of homogeneity.

    Significant when the total variation exceeds 0.2 and chi-square exceeds its mean by five standard
    deviations (``df + 5 sqrt(2 df)``): sampling noise of a few batches stays below both.

    Example:
        >>> distribution_shift({0: 10, 1: 10}, {0: 10, 1: 10})
        LabelShift(tv=0.0, chi2=0.0, df=1, significant=False)
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
    return LabelShift(tv, chi2, df, significant)


@dataclass(frozen=True)
class RemappedClass:
    """A validation class whose mean input is closest (cosine) to another class's training mean."""

    val: int
    train: int
    similarity: float  # cosine to the training mean of ``train``
    own: float  # cosine to the training mean of the same class


@dataclass(frozen=True)
class Remapping:
    """The remapped classes among the ``compared`` classes (at least 3 samples in both splits)."""

    classes: tuple[RemappedClass, ...]
    compared: int

    @property
    def flagged(self) -> bool:
        """At least half of the compared classes, and at least 2, are closest to another class.

        Example:
            >>> one = RemappedClass(0, 1, 0.9, 0.1)
            >>> Remapping((one, one), 4).flagged, Remapping((one, one), 5).flagged
            (True, False)
            >>> Remapping((one,), 2).flagged
            False
        """
        return len(self.classes) >= max(2, (self.compared + 1) // 2)

    def details(self) -> tuple[list[tuple[int, int, float, float]], int]:
        """The check's ``remapped_classes`` entry: ``([(val, train, similarity, own), ...], compared)``."""
        return [(c.val, c.train, c.similarity, c.own) for c in self.classes], self.compared


def remapped_classes(
    train: Sequence[tuple[Tensor | None, Tensor]],
    val: Sequence[tuple[Tensor | None, Tensor]],
    keep_train: Tensor,
    keep_val: Tensor,
    shared: set[int],
) -> Remapping | None:
    """Validation classes whose mean (standardised) input is closest to another class's training mean, when
    the validation means match their own class worse than an i.i.d. split gives.

    The noise model: ``_RESPLITS`` random splits of the training samples, holding out as many per class as
    validation has (at most half), give the mean cosine of a held-out class mean to its own class mean
    under an i.i.d. split; only a validation mean ``NOISE_Z`` of their standard deviations below theirs
    names classes (class means that carry no class information, say of sines at random phases, match any
    class by chance).
    ``keep_train``/``keep_val`` select the samples with a label (not the ignore index) among the
    concatenated batches; only ``shared`` classes with at least 3 samples in both splits are compared.
    ``None`` when the inputs are not float tensors of one shape in both splits, fewer than 2 classes can
    be compared, or a similarity is not finite.

    Example:
        >>> import torch
        >>> x = torch.tensor([[1.0, 0.0]] * 3 + [[0.0, 1.0]] * 3)
        >>> y = torch.tensor([0, 0, 0, 1, 1, 1])
        >>> keep = torch.ones(6, dtype=torch.bool)
        >>> remapping = remapped_classes([(x, y)], [(x, 1 - y)], keep, keep, {0, 1})
        >>> remapping.classes[0], remapping.compared
        (RemappedClass(val=0, train=1, similarity=1.0, own=-1.0), 2)
        >>> remapped_classes([(x, y)], [(x, y)], keep, keep, {0, 1}).classes
        ()
    """
    xs_train = [x for x, _ in train]
    xs_val = [x for x, _ in val]
    shapes = {tuple(x.shape[1:]) for x in xs_train + xs_val if x is not None}
    if len(shapes) != 1 or any(x is None or not torch.is_floating_point(x) for x in xs_train + xs_val):
        return None
    x_train = torch.cat([x.flatten(1) for x in xs_train if x is not None]).float().cpu()[keep_train]
    x_val = torch.cat([x.flatten(1) for x in xs_val if x is not None]).float().cpu()[keep_val]
    stride = max(1, -(-x_train.shape[1] // _MAX_FEATURES))
    finite = {"nan": 0.0, "posinf": 0.0, "neginf": 0.0}  # non-finite values are reported by the scans
    x_train, x_val = x_train[:, ::stride].nan_to_num(**finite), x_val[:, ::stride].nan_to_num(**finite)
    y_train = torch.cat([y for _, y in train]).cpu()[keep_train]
    y_val = torch.cat([y for _, y in val]).cpu()[keep_val]
    mean, std = x_train.mean(0), x_train.std(0).clamp_min(1e-6)
    classes = [c for c in sorted(shared) if (y_train == c).sum() >= 3 and (y_val == c).sum() >= 3]
    if len(classes) < 2:
        return None
    compared = torch.tensor(classes)
    in_train, in_val = torch.isin(y_train, compared), torch.isin(y_val, compared)
    z_train, z_val = (x_train[in_train] - mean) / std, (x_val[in_val] - mean) / std
    i_train = torch.searchsorted(compared, y_train[in_train])  # class positions in [0, len(classes))
    i_val = torch.searchsorted(compared, y_val[in_val])
    similarity = _class_similarity(z_train, i_train, z_val, i_val, len(classes))
    if not bool(torch.isfinite(similarity).all()):
        return None
    iid = _resplit_own_similarity(z_train, i_train, torch.bincount(i_val, minlength=len(classes)))
    gap = float(iid.mean()) - float(similarity.diagonal().mean())
    if gap <= NOISE_Z * max(float(iid.std()), 1e-3):  # within what an i.i.d. split gives: no class named
        return Remapping((), len(classes))
    best = similarity.argmax(dim=1).tolist()
    remapped = tuple(
        RemappedClass(c, classes[j], float(similarity[i, j]), float(similarity[i, i]))
        for i, (c, j) in enumerate(zip(classes, best, strict=True))
        if j != i
    )
    return Remapping(remapped, len(classes))


def _class_similarity(z_train: Tensor, i_train: Tensor, z_val: Tensor, i_val: Tensor, n: int) -> Tensor:
    """Cosine of each validation class mean (rows) to each training class mean (columns); ``i_*`` are the
    samples' class positions in ``[0, n)``."""

    def means(z: Tensor, i: Tensor) -> Tensor:
        return torch.stack([z[i == k].mean(0) for k in range(n)])

    return F.normalize(means(z_val, i_val), dim=1) @ F.normalize(means(z_train, i_train), dim=1).T


def _resplit_own_similarity(z: Tensor, i: Tensor, n_val: Tensor) -> Tensor:
    """The mean cosine of a held-out class mean to its own class mean over ``_RESPLITS`` random splits of
    the training samples ``z`` (class positions ``i``), holding out ``n_val`` of each class (at most
    half): how well class means match under an i.i.d. split, measured on the training split alone."""
    counts = torch.bincount(i, minlength=len(n_val))
    held = torch.minimum(n_val, counts // 2)
    start = counts.cumsum(0) - counts
    generator = torch.Generator().manual_seed(0)
    own = []
    for _ in range(_RESPLITS):
        order = torch.argsort(i.double() + torch.rand(len(i), generator=generator, dtype=torch.float64))
        ranked = i[order]  # by class, in random order within it: the first `held` of each are held out
        out = torch.empty_like(i, dtype=torch.bool)
        out[order] = torch.arange(len(i)) - start[ranked] < held[ranked]
        own.append(_class_similarity(z[~out], i[~out], z[out], i[out], len(n_val)).diagonal().mean())
    return torch.stack(own)
