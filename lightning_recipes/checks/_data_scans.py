"""The scans of ``data``'s input side: non-finite values per tensor role, input scale, blank and repeated
samples.

Pure functions of the batches' tensors returning frozen records: no model, no context, no messages (the
check words its verdicts from the records' fields). ``tests/checks/test_data_statistics.py`` pins them to
hand-computed values.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from lightning_recipes.harness.batches import is_float
from lightning_recipes.harness.walk import tensors_of

__all__ = ["InputScale", "NonFinite", "SampleScan", "input_scale", "scan_nonfinite", "scan_samples"]

_ROLES = ("inputs", "targets", "other tensors")


@dataclass(frozen=True)
class NonFinite:
    """NaN and Inf counts of the float tensors of one role: ``"inputs"``, ``"targets"`` or ``"other
    tensors"``."""

    role: str
    nan: int
    inf: int


def scan_nonfinite(
    batches: Sequence[Any], inputs: Sequence[Tensor | None], targets: Sequence[Tensor | None]
) -> tuple[NonFinite, ...]:
    """NaN/Inf counts per role over the float tensors of ``batches``, roles with none left out, in the order
    inputs, targets, other tensors. One host sync.

    Example:
        >>> import torch
        >>> x, y = torch.tensor([[1.0, float("nan")]]), torch.tensor([float("inf"), float("-inf")])
        >>> scan_nonfinite([(x, y)], [x], [y])
        (NonFinite(role='inputs', nan=1, inf=0), NonFinite(role='targets', nan=0, inf=2))
    """
    counts: dict[str, list[Tensor]] = {role: [] for role in _ROLES}
    for batch, x, y in zip(batches, inputs, targets, strict=True):
        for tensor in tensors_of(batch):
            if not is_float(tensor):
                continue
            role = "inputs" if tensor is x else "targets" if tensor is y else "other tensors"
            counts[role].append(torch.stack([tensor.isnan().sum(), tensor.isinf().sum()]))
    found = {role: torch.stack(c).sum(0) for role, c in counts.items() if c}
    table = {role: c.tolist() for role, c in found.items()}  # sync: once
    return tuple(NonFinite(role, int(n), int(i)) for role, (n, i) in table.items() if n or i)


@dataclass(frozen=True)
class InputScale:
    """Means over the float input batches of each batch's mean and standard deviation (non-finite values read
    as 0 / the largest finite float), and the indices (among those batches) of constant batches."""

    mean: float
    std: float
    constant: tuple[int, ...]


def input_scale(floats: Sequence[Tensor]) -> InputScale:
    """The scale of non-empty float input batches (at least one). One host sync.

    Example:
        >>> import torch
        >>> input_scale([torch.tensor([1.0, 3.0]), torch.tensor([2.0, 2.0])])
        InputScale(mean=2.0, std=0.7071067690849304, constant=(1,))
    """
    stats = torch.stack(
        [
            torch.stack([x.float().nan_to_num().mean(), x.float().nan_to_num().std(), x.amax() - x.amin()])
            for x in floats
        ]
    ).tolist()  # sync: once
    constant = tuple(i for i, (_, _, spread) in enumerate(stats) if spread == 0)
    mean = sum(s[0] for s in stats) / len(stats)
    std = sum(s[1] for s in stats) / len(stats)
    return InputScale(mean, std, constant)


@dataclass(frozen=True)
class SampleScan:
    """Blank samples (every value of the sample equal) among ``total`` samples, the first one as ``(batch,
    row)``, and samples identical to another one among the ``checked_for_duplicates`` non-blank float
    samples."""

    total: int
    blank: int
    blank_example: tuple[int, int] | None
    duplicates: int
    checked_for_duplicates: int

    @property
    def blank_fraction(self) -> float:
        return self.blank / self.total

    @property
    def duplicate_fraction(self) -> float:
        return self.duplicates / self.checked_for_duplicates if self.checked_for_duplicates else 0.0


def scan_samples(inputs: Sequence[Tensor | None]) -> SampleScan | None:
    """Blank samples among all input batches of at least 2 dimensions and 4 values per sample, repeated
    samples among the float ones (token sequences repeat legitimately: short prompts); ``None`` when no
    batch qualifies. Batches are grouped by sample shape and dtype; one host sync per group.

    Example:
        >>> import torch
        >>> x = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0]])
        >>> scan = scan_samples([x, torch.arange(8.0).view(2, 4)])
        >>> scan
        SampleScan(total=5, blank=1, blank_example=(0, 0), duplicates=1, checked_for_duplicates=4)
        >>> scan.blank_fraction, scan.duplicate_fraction
        (0.2, 0.25)
    """
    groups: dict[tuple[Any, ...], list[tuple[int, Tensor]]] = {}
    for index, x in enumerate(inputs):
        if x is None or x.ndim < 2 or x[0].numel() < 4:  # a sample of 1-3 values may be "constant"
            continue
        groups.setdefault((tuple(x.shape[1:]), x.dtype), []).append((index, x.flatten(1)))
    if not groups:
        return None
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
    return SampleScan(total, blank_total, blank_example, duplicates, checked_for_duplicates)
