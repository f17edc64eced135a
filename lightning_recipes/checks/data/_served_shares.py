"""Served vs dataset label shares, with the sampling noise of the comparison: :func:`compare_shares`.

Pure functions of label tensors: no loader, no model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor

__all__ = ["ClassShare", "ShareComparison", "compare_shares"]


@dataclass(frozen=True)
class ClassShare:
    """One class: its share of the dataset, of what the loader served, their ratio and the z-score of the
    served count against a sampler that keeps the dataset's shares (binomial noise)."""

    label: int
    dataset_count: int
    dataset_share: float
    served_count: int
    served_share: float
    expected: float
    z: float

    @property
    def ratio(self) -> float:
        return self.served_share / self.dataset_share


@dataclass(frozen=True)
class ShareComparison:
    """Every class of the dataset, rarest first, and how many samples each side counted."""

    classes: list[ClassShare]
    served: int
    reference: int
    reference_is_sample: bool


def compare_shares(dataset: Tensor, served: Tensor, *, reference_is_sample: bool) -> ShareComparison:
    """Compare the label shares of ``served`` (what one epoch of the loader served) with ``dataset``'s.

    Noise: a sampler that keeps the dataset's shares serves class ``c`` with share ``p_c`` about
    ``Binomial(N, p_c)`` times (exactly ``N p_c`` for a shuffled epoch; binomial is the upper bound, drawing
    with replacement), so ``z = (n_c - N p_c) / sqrt(N p_c (1 - p_c) (1 + N / M))``, where the ``N / M`` term
    counts the noise of ``dataset`` itself when it is a sample of ``M`` labels (``reference_is_sample``).

    Example:
        >>> import torch
        >>> data = torch.tensor([0] * 80 + [1] * 20)
        >>> served = torch.tensor([0] * 98 + [1] * 2)  # class 1 made rarer
        >>> rare = compare_shares(data, served, reference_is_sample=False).classes[0]
        >>> rare.label, rare.served_count, round(rare.ratio, 2), round(rare.z, 1)
        (1, 2, 0.1, -4.5)
    """
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
        classes.append(
            ClassShare(label, count, share, got, got / n if n else 0.0, expected, (got - expected) / std)
        )
    classes.sort(key=lambda c: (c.dataset_share, c.label))
    return ShareComparison(classes, n, total, reference_is_sample)
