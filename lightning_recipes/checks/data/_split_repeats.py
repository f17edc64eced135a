"""``split_overlap``'s repeat test: validation samples that repeat a training sample (see the guide)."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import Tensor

from lightning_recipes._stats import Z
from lightning_recipes.checks.data._relation import features as repeat_features

REFERENCE_RANK = 10  # d_1 is compared with the distance to the 10th nearest training sample
_SCALE_RANK = 20  # the local dimension is measured from the 10th and 20th neighbour distances
ALPHA = 1e-3  # chance probability below which a validation sample's nearest neighbour is a repeat
MAX_QUERIES = 512  # validation samples tested (the first ones read)
MAX_KEYS = 2048  # training samples searched (the first ones read)
_MAX_DIM = 256  # standardised rows with more features are projected (seeded Gaussian) to this many
_CHUNK = 256
_CANDIDATES = _SCALE_RANK + 4  # nearest candidates whose distances are recomputed in float64


@dataclass(frozen=True)
class Repeats:
    """What the repeat test found: samples tested and searched, flagged, local dimension, first pairs."""

    queries: int
    keys: int
    flagged: int
    dimension: float
    median_ratio: float
    examples: tuple[tuple[int, int], ...] = ()
    own: tuple[float, float, int, int] | None = None

    @property
    def within_training(self) -> bool:
        """Validation repeats training no more than training repeats itself (a minority), within ``Z`` SE."""
        if self.own is None:
            return False
        across, own, n_across, n_own = self.own
        noise = math.sqrt(max(own * (1 - own), 1e-12) * (1 / max(1, n_across) + 1 / max(1, n_own)))
        return own < _SUBJECTS_SHARE and across - own <= Z * noise

    @property
    def expected(self) -> float:
        """Flagged samples expected by chance on a clean split."""
        return ALPHA * self.queries

    @property
    def noise(self) -> float:
        """Binomial standard deviation of the flagged count on a clean split."""
        return math.sqrt(self.queries * ALPHA * (1 - ALPHA))

    @property
    def chance_p(self) -> float:
        """Probability of at least ``flagged`` flagged samples on a clean split (Poisson tail)."""
        if self.flagged <= 0:
            return 1.0
        return float(torch.special.gammainc(torch.tensor(float(self.flagged)), torch.tensor(self.expected)))

    @property
    def excess(self) -> float:
        """Flagged samples beyond chance."""
        return max(0.0, self.flagged - self.expected)

    @property
    def excess_fraction(self) -> float:
        """Share of the tested validation samples flagged beyond chance."""
        return self.excess / max(1, self.queries)

    def details(self) -> dict[str, Any]:
        """The check's ``details["repeats"]`` entry."""
        names = ("queries", "keys", "flagged", "expected", "noise", "chance_p", "dimension", "median_ratio")
        return {
            **{name: getattr(self, name) for name in names},
            "examples": [{"val_index": v, "train_index": t} for v, t in self.examples],
            "val_vs_own_share": None if self.own is None else list(self.own[:2]),
            "within_training_rate": self.within_training,
        }


def repeat_test(train: Tensor, val: Tensor, dimension: float | None = None) -> Repeats | None:
    """The repeat test (the guide) on rows ``[N, D]``, ``[M, D]``; ``None`` under 40 training or 20 val."""
    train, val = train[:MAX_KEYS].float(), val[:MAX_QUERIES].float()
    if len(train) < 2 * _SCALE_RANK or len(val) < _SCALE_RANK:
        return None
    mean, std = train.mean(0), train.std(0)
    std = torch.where(std > 0, std, torch.ones_like(std))  # a constant feature keeps its raw differences
    train, val = ((train - mean) / std), ((val - mean) / std)
    if train.shape[1] > _MAX_DIM:  # distances kept within about 10% (Johnson-Lindenstrauss)
        generator = torch.Generator().manual_seed(0)  # fixed: the same projection for both splits
        projection = torch.randn(train.shape[1], _MAX_DIM, generator=generator).to(train.device)
        train, val = train @ projection / math.sqrt(_MAX_DIM), val @ projection / math.sqrt(_MAX_DIM)
    train, val = train.double(), val.double()  # exact small distances in _nearest
    nearest, where = _nearest(train, val)
    d1, dk = nearest[:, 0], nearest[:, REFERENCE_RANK - 1]
    usable = (dk > 0) & (d1 > 0)
    if int(usable.sum()) < _SCALE_RANK:  # sync: once
        return None
    if dimension is None:  # training's own neighbourhoods, half against half (a shifted validation set sits
        own = _nearest(train[len(train) // 2 :], train[: len(train) // 2])[0]  # far from all alike)
        own = own[own[:, REFERENCE_RANK - 1] > 0]
        if len(own) < _SCALE_RANK:  # sync: once
            return None
        spread = torch.log(own[:, _SCALE_RANK - 1] / own[:, REFERENCE_RANK - 1]).mean()
        gain = math.fsum(1.0 / j for j in range(REFERENCE_RANK, _SCALE_RANK))  # psi(20) - psi(10)
        dimension = min(1000.0, gain / max(float(spread), 1e-12))  # sync: once
    ratio = d1 / dk.clamp_min(1e-300)
    # chance probability 1 - (1 - r^m)^(k - 1), computed stably
    inside = (ratio.clamp(0, 1) ** dimension).clamp(max=1 - 1e-16)
    chance = -torch.expm1((REFERENCE_RANK - 1) * torch.log1p(-inside))
    flagged = usable & (chance < ALPHA)
    examples = tuple((int(r), int(where[r, 0])) for r in flagged.nonzero().flatten()[:5].tolist())
    return Repeats(
        queries=int(usable.sum()),
        keys=len(train),
        flagged=int(flagged.sum()),
        dimension=dimension,
        median_ratio=float(ratio[usable].median()),
        examples=examples,
    )


def _nearest(train: Tensor, val: Tensor) -> tuple[Tensor, Tensor]:
    """Per validation row, the sorted distances to its 20 nearest training rows and their indices."""
    keys32 = train.float()
    key_norms = (keys32 * keys32).sum(1)
    distances, indices = [], []
    count = min(_CANDIDATES, len(train))
    for start in range(0, len(val), _CHUNK):
        rows = val[start : start + _CHUNK]
        rows32 = rows.float()
        squared = (rows32 * rows32).sum(1, keepdim=True) + key_norms[None, :] - 2 * rows32 @ keys32.T
        candidates = squared.topk(count, dim=1, largest=False).indices
        exact = (rows[:, None, :] - train[candidates]).norm(dim=-1)
        exact, order = exact.sort(dim=1)
        distances.append(exact[:, :_SCALE_RANK])
        indices.append(candidates.gather(1, order)[:, :_SCALE_RANK])
    return torch.cat(distances), torch.cat(indices)


_FAIL_P, _WARN_P, _HINT_P = 1e-6, 1e-4, 1e-2  # chance probabilities of the flagged count per level
# training samples repeated within training from which the data is organised in subjects
_SUBJECTS_SHARE = 0.5
_SMALL_SPACE = 10  # possible rows per draw at most: copies are chance


def repeats_of(
    train: list[Tensor], val: list[Tensor], train_blank: list[bool], val_blank: list[bool]
) -> Repeats | None:
    """The repeat test on the float samples of the commonest shape (``None`` without enough of them)."""
    shapes = [tuple(s.shape) for s, b in zip(val, val_blank, strict=True) if not b and s.is_floating_point()]
    if not shapes:
        return None
    shape = Counter(shapes).most_common(1)[0][0]  # the first seen of the commonest
    keys, queries = (
        [i for i, s in enumerate(x) if not b[i] and s.is_floating_point() and s.shape == shape]
        for x, b in ((train, train_blank), (val, val_blank))
    )
    if not keys:
        return None
    keyed = repeat_features(torch.stack([train[i] for i in keys]))
    queried = repeat_features(torch.stack([val[i] for i in queries]))
    if (found := repeat_test(keyed, queried)) is None:
        return None
    examples = tuple((queries[v], keys[t]) for v, t in found.examples)  # indices among the samples read
    # training's own rate, like for like: half of it, and validation, against the other half
    half = min(len(keyed), MAX_KEYS) // 2
    pairs = ((keyed[half : 2 * half], keyed[:half]), (keyed[half:], queried))  # one dimension for all three
    own_found, across = (repeat_test(keys, queries, found.dimension) for keys, queries in pairs)
    own = None
    if own_found is not None and across is not None and own_found.chance_p < _WARN_P:  # it repeats itself
        shares = across.flagged / max(1, across.queries), own_found.flagged / max(1, own_found.queries)
        own = (*shares, across.queries, own_found.queries)
    return replace(found, examples=examples, own=own)


def drawn_from_a_small_space(rows: Tensor) -> bool:
    """Whether ``[N, D]`` rows come from so few possible rows that ``N`` draws repeat by chance: the product
    of each column's distinct values at most ``10 N`` (grid cells, small integer codes). Sync: once."""
    if len(rows) < 2:
        return False
    ordered = rows.flatten(1).sort(dim=0).values
    distinct = 1 + (ordered[1:] != ordered[:-1]).sum(0)
    return float(distinct.double().log().sum()) <= math.log(_SMALL_SPACE * len(rows))


def repeat_level(
    repeats: Repeats | None, estimate: float, fail_fraction: float
) -> Literal["pass", "warn", "fail", "inconclusive"]:
    """The repeat test's verdict from the estimated overlap and the flagged count's chance probability."""
    if repeats is None or estimate < fail_fraction:  # a few % is within the chance model's own error
        return "pass"
    p = repeats.chance_p
    if repeats.within_training and p < _HINT_P:
        return "inconclusive"
    if p < _FAIL_P and repeats.excess >= 3:
        return "fail"
    if p < _WARN_P and repeats.excess >= 2:
        return "warn"
    return "inconclusive" if p < _HINT_P else "pass"
