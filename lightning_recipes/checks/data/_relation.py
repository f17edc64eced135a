"""``data``'s pairing test: a rule fitted on one split scores as well on the other (see the guide)."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from lightning_recipes._stats import (
    Z,
    dependence_factor,
    distribution_distance,
    significantly_above,
    standard_error,
)

FAIL_GAP, WARN_GAP = 0.25, 0.15  # score lost from the own split to the other split
FAIL_SHARE = 0.35  # ... or this share of the own split's score
SAME_VALUES_KS = 0.3  # a feature whose values are spread alike in both splits (Kolmogorov-Smirnov distance)
DEPENDENCE_Z = 4.0  # widen a score's error for dependent rows (one question per feature and block width)
Z_FLOOR = 5.0  # standard errors of the gap, at least (one feature: sqrt(2 ln D) + 3 over D features)
_K, _REPEATS, _BINS, _SIDE, _MAX_SAMPLES = 5, 10, 32, 16, 2048
Split = tuple[Tensor, Tensor, dict[str, Tensor]]  # one split's inputs, targets and per-sample tensors


@dataclass(frozen=True)
class Relation:
    """One rule fitted on ``fitted`` (a split), scored held out there (``own``) and on the ``other`` split."""

    rule: str
    fitted: str
    own: float
    other: float
    noise: float
    own_noise: float
    needed_z: float
    feature: str | None = None
    other_within: float | None = None  # one feature: refitted on the other split, scored held out there

    @property
    def shifted(self) -> bool:
        """The input predicts the other split's targets too, another way: a moved relation, not a marker."""
        within = self.other_within
        return within is not None and within - self.other >= (self.own - self.other) / 2

    @property
    def one_sided(self) -> bool:
        """Holds where fitted (above the mean by 2 SE, one-sided 98%), not on the other split."""
        return self.own > 2 * self.own_noise and not self.shifted

    @property
    def z(self) -> float:
        return (self.own - self.other) / max(self.noise, 1e-9)

    @property
    def level(self) -> str:
        """``"fail"``, ``"warn"`` or ``"pass"``."""
        gap = self.own - self.other
        if self.z < self.needed_z or not self.one_sided:
            return "pass"
        if gap >= FAIL_GAP or (gap >= WARN_GAP and gap >= FAIL_SHARE * self.own):
            return "fail"
        return "warn" if gap >= WARN_GAP else "pass"

    def details(self) -> dict[str, Any]:
        numbers = {"own_score": self.own, "other_score": self.other, "gap_noise": self.noise}
        numbers["own_noise"] = self.own_noise
        if self.other_within is not None:
            numbers["other_within_score"] = self.other_within
        found = {"rule": self.rule, "fitted_on": self.fitted, "feature": self.feature}
        rounded = {k: round(v, 4) for k, v in numbers.items()}
        return {**found, **rounded, "z": round(self.z, 1), "needed_z": round(self.needed_z, 1)}


def features(x: Tensor) -> Tensor:
    """Samples ``[N, ...]`` as float rows ``[N, D]``; images larger than 16x16 average-pooled to 16x16."""
    x = x.detach().float().cpu()
    if x.ndim >= 3 and (x.shape[-1] > _SIDE or x.shape[-2] > _SIDE):
        x = F.adaptive_avg_pool2d(x.reshape(-1, 1, *x.shape[-2:]), _SIDE).reshape(*x.shape[:-2], -1)
    return x.reshape(len(x), -1).nan_to_num(nan=0.0, posinf=0.0, neginf=0.0)


def _targets(y: Tensor, classes: int) -> Tensor:
    """Targets as rows to average: one-hot for class labels, values otherwise."""
    return F.one_hot(y, classes).float() if classes else y.float().reshape(len(y), -1)


def _scores(predicted: Tensor, y: Tensor, classes: int, rows: Tensor) -> Tensor:
    """Per sample: 1 for a right class (0 wrong), or ``1 - squared error / variance of rows``."""
    if classes:
        return (predicted.argmax(-1) == y).float()
    variance = float(rows.var(0).sum().clamp_min(1e-12))
    return 1 - (predicted - y.float().reshape(len(y), -1)).square().sum(-1) / variance


def lookup_scores(fit: Tensor, y_fit: Tensor, held: Tensor, y_held: Tensor, classes: int) -> Tensor:
    """Per feature of ``fit`` ``[N, D]``, a lookup table of ``y_fit`` scored on ``held``: ``[D, M]``."""
    ordered = fit.sort(0).values
    new = torch.ones_like(ordered, dtype=torch.bool)
    new[1:] = ordered[1:] != ordered[:-1]
    positions = torch.linspace(0, len(fit) - 1, _BINS + 1)[1:-1].round().long()
    slots = (new.cumsum(0) - 1).clamp(max=_BINS - 1)  # rank among distinct values (the last bin: the rest)
    exact = torch.full((_BINS, fit.shape[1]), math.inf).scatter_(0, slots, ordered)
    edges = torch.where(new.sum(0) <= _BINS, exact[: _BINS - 1], ordered[positions]).T.contiguous()
    rows = _targets(y_fit, classes)
    bins = torch.searchsorted(edges, fit.T.contiguous())  # [D, N]
    table = torch.zeros(fit.shape[1], _BINS, rows.shape[1]).index_put_(
        (torch.arange(fit.shape[1])[:, None].expand_as(bins), bins), rows.expand(fit.shape[1], -1, -1), True
    )
    counts = torch.zeros(fit.shape[1], _BINS).scatter_add_(1, bins, torch.ones_like(bins, dtype=torch.float))
    table = torch.where(counts[..., None] > 0, table / counts.clamp_min(1)[..., None], rows.mean(0))
    held_bins = torch.searchsorted(edges, held.T.contiguous())[..., None]  # [D, M, 1]
    predicted = table.gather(1, held_bins.expand(-1, -1, rows.shape[1]))
    return _scores(predicted, y_held, classes, rows)  # [D, M]


def _neighbour_scores(distance: Tensor, y_fit: Tensor, y_held: Tensor, classes: int) -> Tensor:
    nearest = distance.topk(min(_K, distance.shape[1] - 1), largest=False).indices
    rows = _targets(y_fit, classes)
    return _scores(rows[nearest].mean(1), y_held, classes, rows)


def _compare(
    own: Tensor, y_own: Tensor, other: Tensor, y_other: Tensor, classes: int
) -> tuple[float, float, float, float]:
    """Own score (under the other split's class mix), other score, the noise of the gap and of the own."""
    weights = torch.ones(len(own))
    if classes:
        share = torch.bincount(y_other, minlength=classes).float() / len(y_other)
        present = torch.bincount(y_own, minlength=classes).float()
        keep = present[y_other] > 0
        other, y_other = other[keep], y_other[keep]
        weights = share[y_own] / present[y_own].clamp_min(1)
    if len(other) < 2 or float(weights.sum()) <= 0:
        return 0.0, 0.0, math.inf, math.inf
    weights = weights / weights.sum()
    mean_own = float((weights * own).sum())
    spread = float((weights.square() * (own - mean_own).square()).sum())
    var_own = spread * dependence_factor(own, weights, DEPENDENCE_Z) ** 2
    var_other = _mean_variance(other)
    return mean_own, float(other.mean()), math.sqrt(var_own + var_other + 1e-12), math.sqrt(var_own)


def relations(train: Split, val: Split, classes: int, both_ways: bool = False) -> list[Relation]:
    """Every rule fitted on the training split and scored on validation's; ``both_ways``: also the other way
    (for the main target that is ``training_pairs``': a rule this simple mistakes augmentation for it)."""
    if both_ways:
        return relations(train, val, classes) + [
            replace(r, fitted="val") for r in relations(val, train, classes)
        ]
    (xf, yf, groups), (xo, yo, other) = train, val
    if features(xf[:1]).shape != features(xo[:1]).shape or yf[:1].numel() != yo[:1].numel():
        return []  # rows of another width per split (crops trained, whole images validated): no common rule
    xf, yf, xo, yo = xf[:_MAX_SAMPLES], yf[:_MAX_SAMPLES], xo[:_MAX_SAMPLES], yo[:_MAX_SAMPLES]
    ordered = neighbours_alike(features(xf))
    held = torch.arange(len(yf)) >= (len(yf) + 1) // 2 if ordered else torch.arange(len(yf)) % 2 == 1
    a, b = features(xf), features(xo)  # scaled by the training split's spread
    mean, std = a.mean(0), a.std(0).clamp_min(1e-6)
    a, b = (a - mean) / std, (b - mean) / std
    cross = torch.cdist(b, a)
    within = torch.cdist(a, a).fill_diagonal_(math.inf)
    spacing = within.min(1).values
    apart = torch.cdist(b, b).fill_diagonal_(math.inf).min(1).values
    near = cross.min(1).values <= spacing.quantile(0.95)  # within reach; rescaled rows: all (the guide)
    near |= not 0.5 <= float(apart.median() / spacing.median().clamp_min(1e-9)) <= 2
    # repeats inside the training split would make its held-out score a memory test: closest pairs left out
    lone = (within[held][:, ~held] > 0).all(1)  # held-out half without an exact copy in the fitted half
    if ordered:  # rows served in runs (one trajectory, one subject): neighbours from the other half only
        within[held[:, None] == held[None, :]] = math.inf
    if len(a) > _REPEATS:
        within[within < within.kthvalue(_REPEATS, dim=1).values.quantile(0.05)] = math.inf
    found: list[Relation] = []
    if xf.is_floating_point() and len(yf) > 2 * _K and int(near.sum()) >= 20:
        own = _neighbour_scores(within, yf, yf, classes)
        scored = _neighbour_scores(cross[near], yf, yo[near], classes)
        compared = _compare(own, yf, scored, yo[near], classes)
        found.append(Relation("nearest neighbours", "train", *compared, Z_FLOOR))
    return found + _one_feature(groups, yf, other, yo, classes, held, lone)


def neighbours_alike(rows: Tensor, z: float = Z) -> bool:
    """Whether rows next in order are closer than rows half the set apart, beyond ``z`` SE (a trajectory)."""
    half = len(rows) // 2
    if half < 20:
        return False
    near = (rows[1:] - rows[:-1]).norm(dim=1).double()
    far = (rows[half:] - rows[: len(rows) - half]).norm(dim=1).double()
    se = [float(standard_error(d)) for d in (near, far)]
    return significantly_above(float(far.mean()), se[1], float(near.mean()), se[0], z)


def _one_feature(
    fit: dict[str, Tensor],
    y_fit: Tensor,
    other: dict[str, Tensor],
    y_other: Tensor,
    classes: int,
    held: Tensor,
    lone: Tensor,
) -> list[Relation]:
    names = [k for k in fit if k in other and fit[k].shape[1:] == other[k].shape[1:] and fit[k][:1].numel()]
    if not names or int(lone.sum()) < 20 or len(y_other) < 20 or y_fit.ndim > 1 + (classes == 0):
        return []
    a = torch.cat([features(fit[k][: len(y_fit)]) for k in names], 1)
    b = torch.cat([features(other[k][: len(y_other)]) for k in names], 1)
    half, y_held = (a[~held], y_fit[~held]), y_fit[held][lone]
    own = lookup_scores(*half, a[held][lone], y_held, classes)
    cross = lookup_scores(*half, b, y_other, classes)
    needed = max(Z_FLOOR, math.sqrt(2 * math.log(max(2, a.shape[1]))) + 3)
    # each feature refitted on half the other split, scored on its other half: a moved relation (values
    # spread alike in both splits, not rescaled in one) or a marker on one side
    split = torch.arange(len(b)) % 2 == 1
    within = lookup_scores(b[~split], y_other[~split], b[split], y_other[split], classes).mean(1)
    within = torch.where(distribution_distance(a, b) <= SAME_VALUES_KS, within, math.nan)
    columns = [f"{k}[:, {i}]" for k in names for i in range(features(fit[k][:1]).shape[1])]
    compared = [_compare(own[d], y_held, cross[d], y_other, classes) for d in range(a.shape[1])]
    kept = [None if math.isnan(w) else w for w in within.tolist()]
    found = [Relation("one feature", "train", *c, needed, n, w) for c, n, w in zip(compared, columns, kept)]
    return [max(found, key=lambda r: (r.one_sided, r.z))]  # the first of the largest one-sided


def _mean_variance(scores: Tensor) -> float:  # widened for dependent rows
    return float(scores.var()) / len(scores) * dependence_factor(scores, z=DEPENDENCE_Z) ** 2
