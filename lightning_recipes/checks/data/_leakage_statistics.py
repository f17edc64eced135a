"""The arithmetic of ``target_leakage``: per-feature scores, the copy-target shares and the thresholds.

Pure functions of tensors and numbers: no model, no batch layout, no context. The sub-tests in
``_leakage_*.py`` call them; ``tests/checks/test_target_leakage_statistics.py`` pins them to hand-computed
values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

__all__ = [
    "COPY_MARGIN",
    "COPY_SHARE",
    "MAX_CLASSES",
    "MAX_MAJORITY",
    "CopyShares",
    "abs_pearson",
    "class_values",
    "copy_leak",
    "copy_shares",
    "encodes_label",
    "lookup_accuracy",
    "lookup_leaks",
    "lookup_predictions",
    "loss_changed",
    "max_abs_correlation",
    "output_moved",
    "ranks",
    "too_good_bound",
]

COPY_SHARE, COPY_MARGIN = 0.95, 0.5  # sequence targets: share of positions trained to copy an input
MAX_CLASSES = 32  # integral float targets with at most this many values are class labels
MAX_MAJORITY = 0.9  # above this majority-class share, a lookup table's accuracy proves nothing
_LOSS_RTOL = 1e-6  # relative change of a loss that counts as "changed"
_OUTPUT_RTOL = 1e-5  # change of an output, relative to its largest magnitude, that counts as "moved"

CopyShift = Literal["same", "back1", "back2"]
_COPY_SHIFTS: tuple[CopyShift, ...] = ("same", "back1", "back2")


def lookup_predictions(x: Tensor, h: Tensor, y: Tensor, classes: int, bins: int, majority: Tensor) -> Tensor:
    """Held-out predictions of a per-feature lookup table: quantile bins of the training values (one bin
    per value for a feature with at most ``bins`` values), majority label per bin (an empty bin predicts the
    overall majority). ``x`` ``[N, D]`` with labels ``y``, ``h`` ``[M, D]`` -> predicted labels ``[D, M]``.
    Shared by ``target_leakage`` (held-out accuracy) and ``data``'s train-only shortcut.

    Example:
        >>> import torch
        >>> x = torch.tensor([[0.0, 5.0], [0.0, 5.0], [1.0, 5.0], [1.0, 6.0]])  # column 0 copies the label
        >>> h = torch.tensor([[1.0, 5.0], [0.0, 6.0]])
        >>> lookup_predictions(x, h, torch.tensor([0, 0, 1, 1]), 2, 2, majority=torch.tensor(0)).tolist()
        [[1, 0], [0, 1]]
    """
    count, features = x.shape
    ordered = x.sort(0).values
    positions = torch.linspace(0, count - 1, bins + 1, device=x.device)[1:-1].round().long()
    edges = ordered[positions]  # [bins - 1, D], ascending per feature
    # A feature with at most `bins` distinct values gets one bin per value (a rare value is no quantile).
    new = torch.ones_like(ordered, dtype=torch.bool)
    new[1:] = ordered[1:] != ordered[:-1]
    rank = new.long().cumsum(0) - 1  # index of each sorted value among the column's distinct values
    exact = torch.full((bins, features), math.inf, device=x.device, dtype=x.dtype)
    exact.scatter_(0, rank.clamp(max=bins - 1), ordered)
    edges = torch.where(new.sum(0) <= bins, exact[: bins - 1], edges).T.contiguous()  # [D, bins - 1]
    train_bins = torch.searchsorted(edges, x.T.contiguous())  # [D, N]: count of edges below each value
    codes = train_bins * classes + y.to(x.device)[None, :]
    table = torch.zeros(features, bins * classes, device=x.device).scatter_add_(
        1, codes, torch.ones_like(codes, dtype=torch.float)
    )
    table = table.view(features, bins, classes)
    predict = torch.where(table.sum(-1) > 0, table.argmax(-1), majority.to(x.device))  # [D, bins]
    held_bins = torch.searchsorted(edges, h.T.contiguous())  # [D, M]
    return predict.gather(1, held_bins)


def lookup_accuracy(
    x: Tensor, h: Tensor, y: Tensor, y_held: Tensor, classes: int, bins: int, majority: Tensor
) -> Tensor:
    """Held-out accuracy of the per-feature lookup tables of :func:`lookup_predictions` (fit on ``x``,
    ``y``) on ``h``, ``y_held``: ``[D]``.

    Example:
        >>> import torch
        >>> x = torch.tensor([[0.0, 5.0], [0.0, 5.0], [1.0, 5.0], [1.0, 6.0]])  # column 0 copies the label
        >>> y = torch.tensor([0, 0, 1, 1])
        >>> h, y_held = torch.tensor([[1.0, 5.0], [0.0, 5.0]]), torch.tensor([1, 0])
        >>> lookup_accuracy(x, h, y, y_held, classes=2, bins=2, majority=torch.tensor(0)).tolist()
        [1.0, 0.5]
    """
    predictions = lookup_predictions(x, h, y, classes, bins, majority)
    return (predictions == y_held.to(x.device)[None, :]).float().mean(1)


def lookup_leaks(accuracy: float, majority_baseline: float, max_accuracy: float) -> bool:
    """Whether one feature's lookup table predicts the held-out labels well enough to be a leak: at least
    ``max_accuracy``, with the majority class alone at most ``MAX_MAJORITY``.

    Example:
        >>> lookup_leaks(0.99, 0.5, 0.99), lookup_leaks(1.0, 0.95, 0.99), lookup_leaks(0.98, 0.5, 0.99)
        (True, False, False)
    """
    return accuracy >= max_accuracy and majority_baseline <= MAX_MAJORITY


def abs_pearson(x: Tensor, y: Tensor) -> Tensor:
    """``|corr(x[:, d], y)|`` for every column (0 for constant columns).

    Example:
        >>> import torch
        >>> x = torch.tensor([[1.0, 3.0, 7.0], [2.0, 2.0, 7.0], [3.0, 1.0, 7.0]])
        >>> abs_pearson(x, torch.tensor([10.0, 20.0, 30.0])).tolist()
        [1.0, 1.0, 0.0]
    """
    xc, yc = x - x.mean(0), y - y.mean()
    denominator = xc.norm(dim=0) * yc.norm()
    return torch.where(denominator > 0, (xc * yc[:, None]).sum(0).abs() / denominator.clamp(min=1e-12), 0.0)


def ranks(x: Tensor) -> Tensor:
    """Ordinal ranks ``0 .. N-1`` down each column of ``x`` ``[N, D]`` (tied values get distinct ranks, in
    the order the sort returns them).

    Example:
        >>> import torch
        >>> ranks(torch.tensor([[3.0], [0.5], [2.0], [1.0]]))[:, 0].tolist()
        [3.0, 0.0, 2.0, 1.0]
    """
    return x.argsort(0).argsort(0).float()


def max_abs_correlation(x: Tensor, y: Tensor) -> Tensor:
    """Per column of ``x`` ``[N, D]``: the larger of ``|Pearson|`` and ``|Spearman|`` (Pearson of the ranks)
    with ``y`` ``[N]``: 1 for an affine or a monotone copy of the target.

    Example:
        >>> import torch
        >>> x = torch.tensor([[1.0], [2.0], [3.0], [4.0]]) ** 3  # monotone, not affine
        >>> round(float(max_abs_correlation(x, torch.tensor([1.0, 2.0, 3.0, 4.0]))[0]), 6)
        1.0
    """
    return torch.maximum(abs_pearson(x, y), abs_pearson(ranks(x), ranks(y[:, None])[:, 0]))


def encodes_label(x: Tensor, y: Tensor, classes: int) -> Tensor:
    """Per feature of ``x`` ``[N, F]``: constant within every class of ``y`` present at least twice, with a
    different value for each class (at least two such classes; a class seen once makes every feature
    ``False``).

    Example:
        >>> import torch
        >>> x = torch.tensor([[0.5, 1.0], [0.5, 2.0], [0.9, 1.0], [0.9, 1.0]])
        >>> encodes_label(x, torch.tensor([0, 0, 1, 1]), classes=2).tolist()
        [True, False]
    """
    x = x.float()
    counts = torch.bincount(y, minlength=classes)
    index = y[:, None].expand_as(x)
    low = torch.full((classes, x.shape[1]), float("inf")).scatter_reduce(0, index, x, "amin")
    high = torch.full((classes, x.shape[1]), float("-inf")).scatter_reduce(0, index, x, "amax")
    present = counts >= 2
    if int(present.sum()) < 2 or bool((counts == 1).any()):
        return torch.zeros(x.shape[1], dtype=torch.bool)
    constant = ((high - low)[present] == 0).all(0)
    values = low[present].sort(0).values
    distinct = (values[1:] > values[:-1]).all(0)
    return constant & distinct & torch.isfinite(values).all(0)


def class_values(targets: Tensor) -> tuple[Tensor, bool]:
    """The sorted distinct values of per-sample ``targets`` and whether they are class labels (an integer
    dtype, or integral floats with at most ``MAX_CLASSES`` values); otherwise a regression target.

    Example:
        >>> import torch
        >>> values, classification = class_values(torch.tensor([2.0, 0.0, 2.0, 1.0]))
        >>> values.tolist(), classification
        ([0.0, 1.0, 2.0], True)
        >>> class_values(torch.tensor([0.5, 1.0]))[1]
        False
    """
    integral = bool((targets == targets.round()).all())  # sync: once
    values = torch.unique(targets)
    return values, not torch.is_floating_point(targets) or (integral and len(values) <= MAX_CLASSES)


@dataclass(frozen=True)
class CopyShares:
    """Shares of the trained positions whose target (the class the loss pulls the output toward) is the
    input token one position ahead (``next``), at the same position (``same``), one or two back."""

    next: float
    same: float
    back1: float
    back2: float

    def as_dict(self) -> dict[str, float]:
        """``{"next": ..., "same": ..., "back1": ..., "back2": ...}``."""
        return {"next": self.next, "same": self.same, "back1": self.back1, "back2": self.back2}


def copy_shares(paired: Tensor, inputs: Tensor, active: Tensor) -> tuple[Tensor, Tensor]:
    """For the shifts next, same, one back, two back (target at ``t`` == input at ``t + 1, t, t - 1,
    t - 2``): the share of the trained positions (``active`` ``[B, S]``) whose paired class (``paired``
    ``[B, S]``) equals that input token (``inputs`` ``[B, S]``), and the number of trained positions the
    share is taken over. Two ``[4]`` tensors (no host sync).

    Example:
        >>> import torch
        >>> inputs = torch.tensor([[1, 2, 3, 4]])
        >>> target_is_input = inputs  # each position is trained toward its own input token
        >>> shares, counts = copy_shares(target_is_input, inputs, torch.ones(1, 4, dtype=torch.bool))
        >>> shares.tolist(), counts.tolist()
        ([0.0, 1.0, 0.0, 0.0], [3, 4, 3, 2])
    """
    shares, counts = [], []
    for shift in (-1, 0, 1, 2):  # target at t == input at t - shift (-1: the next token)
        if shift >= 0:
            p, x, a = paired[:, shift:], inputs[:, : inputs.shape[1] - shift], active[:, shift:]
        else:
            p, x, a = paired[:, :shift], inputs[:, -shift:], active[:, :shift]
        counts.append(a.sum())
        shares.append(((p == x) & a).sum() / a.sum().clamp(min=1))
    return torch.stack(shares), torch.stack(counts)


def copy_leak(shares: CopyShares) -> CopyShift | None:
    """The copying shift (same position, one or two back) when at least ``COPY_SHARE`` of the trained
    positions copy it and the next token explains ``COPY_MARGIN`` fewer; else ``None``.

    Example:
        >>> copy_leak(CopyShares(next=0.0, same=1.0, back1=0.0, back2=0.0))
        'same'
        >>> copy_leak(CopyShares(next=0.6, same=1.0, back1=0.0, back2=0.0)) is None  # the next token too
        True
    """
    by_shift = shares.as_dict()
    worst = max(_COPY_SHIFTS, key=lambda k: by_shift[k])  # the first of equal shares
    if by_shift[worst] >= COPY_SHARE and by_shift[worst] - shares.next >= COPY_MARGIN:
        return worst
    return None


def loss_changed(before: float, after: float) -> bool:
    """Whether a loss changed beyond float round-off: by more than ``1e-6`` of its size.

    Example:
        >>> loss_changed(2.0, 2.0 + 1e-7), loss_changed(2.0, 2.00001)
        (False, True)
    """
    return abs(after - before) > _LOSS_RTOL * max(abs(before), 1e-12)


def output_moved(change: float, magnitude: float) -> bool:
    """Whether an output moved: its largest absolute change exceeds ``1e-5`` of its largest magnitude.

    Example:
        >>> output_moved(1e-6, 1.0), output_moved(1e-4, 1.0)
        (False, True)
    """
    return change > _OUTPUT_RTOL * max(magnitude, 1e-12)


def too_good_bound(fraction: float, classes: int) -> float:
    """The held-out loss below which a short training is too good to be true: ``fraction x ln C``.

    Example:
        >>> round(too_good_bound(0.05, 4), 6)  # 0.05 x ln 4
        0.069315
    """
    return fraction * math.log(classes)
