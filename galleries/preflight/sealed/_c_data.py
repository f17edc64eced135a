"""Sealed gallery C's data: scikit-learn's digits and small seeded synthetic sets (entity tagging, a token
chain language, user-item preferences, multi-label half-spaces, regression targets, multivariate sequences, a
pulse stream, 2-D point sets, a tabular set with a high-cardinality category). Every builder is deterministic
(its own generator), so a proof scores every model on the same clean held-out data."""

from __future__ import annotations

import math
from functools import cache

import torch
from torch.utils.data import Dataset, Sampler

from galleries import sealed
from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["loaders"]


# --- digits (1x8x8 images in [0, 1], 10 classes) ------------------------------------------------------------
def digits(part: str) -> tuple[torch.Tensor, torch.Tensor]:
    """A fixed part of the 1,797 digits as 1x8x8 images: ``train`` (1,000), ``val`` (300), ``test`` (497)."""
    return sealed.digits(part, (1, 8, 8))


def shuffled_training_digits() -> tuple[torch.Tensor, torch.Tensor]:
    """The training digits in a fixed random order (writers mixed): the first 360 for a small set, the rest
    its held-out digits from the same writers."""
    x, y = digits("train")
    order = torch.randperm(len(y), generator=_gen(5))
    return x[order], y[order]


def shift(image: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """A random shift of up to one pixel each way, plus faint pixel noise (a new tensor)."""
    dy, dx = (int(v) for v in torch.randint(-1, 2, (2,), generator=generator))
    return image.roll((dy, dx), dims=(-2, -1)) + 0.05 * torch.randn(image.shape, generator=generator)


def jitter(image: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """A random brightness (x0.8..1.2) and faint pixel noise: a near-copy (a new tensor)."""
    scale = 0.8 + 0.4 * torch.rand((), generator=generator)
    return image * scale + 0.05 * torch.randn(image.shape, generator=generator)


class ShiftedDigits(Dataset):
    """Digits with a random shift per read; with ``seeded`` the shift of sample i is the same on every read
    (deterministic augmentation)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, seeded: bool = False) -> None:
        self.x, self.y, self.seeded = x, y, seeded

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return shift(self.x[i], _gen(i) if self.seeded else None), self.y[i]


def imbalanced(x: torch.Tensor, y: torch.Tensor, keep: float = 0.08) -> tuple[torch.Tensor, torch.Tensor]:
    """Keeps every digit 0-4 and the first ``keep`` share of each digit 5-9."""
    rows = [torch.nonzero(y == c).flatten() for c in range(10)]
    rows = [r if c < 5 else r[: max(2, int(keep * len(r)))] for c, r in enumerate(rows)]
    chosen = torch.cat(rows).sort().values
    return x[chosen], y[chosen]


def typicality(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Each digit's distance to its class mean (small = typical = easy)."""
    means = torch.stack([x[y == c].mean(0) for c in range(10)])
    return (x - means[y]).flatten(1).norm(dim=1)


class _Curriculum(Sampler[int]):
    """Serves the easiest ``start`` share of the data first and 25% more each epoch (drawn with
    replacement); ``self.epoch`` is the stage."""

    def __init__(self, difficulty: torch.Tensor, start: float = 0.2) -> None:
        self.order, self.start, self.epoch = difficulty.argsort(), start, 0

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self):
        share = min(1.0, self.start + 0.25 * self.epoch)
        pool = self.order[: max(1, int(share * len(self.order)))]
        return iter(pool[torch.randint(len(pool), (len(self.order),))].tolist())


class CurriculumSampler(_Curriculum):
    """Lightning advances it: it calls a sampler's ``set_epoch`` at the start of every epoch."""

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch


class CurriculumSamplerOwnHook(_Curriculum):
    """BUG: the hook is named ``advance`` (from the user's own training loop); Lightning calls only
    ``set_epoch``, so the sampler stays at its first stage, the easiest 20%, for the whole run."""

    def advance(self, epoch: int) -> None:
        self.epoch = epoch


# --- entity tagging (padded token rows; tags -100 at padding) -----------------------------------------------
PAD, TAG_VOCAB, TAG_LEN, TRIGGER = 0, 24, 16, 3
ENTITIES = range(5, 15)


def entity_sentences(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sentences of 4..15 tokens (always some padding) over tokens 4..23, half of them with the trigger token
    3 somewhere. Tag 0: other; entity tokens (5..14) are tagged 2 in a sentence with the trigger, else 1: the
    entity type is read from the sentence, not from the token."""
    g = _gen(seed)
    tokens = torch.randint(4, TAG_VOCAB, (n, TAG_LEN), generator=g)
    lengths = torch.randint(4, TAG_LEN, (n,), generator=g)
    has_trigger = torch.rand(n, generator=g) < 0.5
    where = (torch.rand(n, generator=g) * lengths).long()
    tokens[has_trigger, where[has_trigger]] = TRIGGER
    real = torch.arange(TAG_LEN) < lengths[:, None]
    is_entity = (tokens >= ENTITIES.start) & (tokens < ENTITIES.stop)
    tags = torch.where(is_entity, 1 + has_trigger[:, None].long(), torch.zeros_like(tokens))
    return tokens.masked_fill(~real, PAD), tags.masked_fill(~real, -100)


# --- a token chain language (causal LM) ---------------------------------------------------------------------
LM_VOCAB, LM_LEN = 16, 17


def chains(n: int, seed: int) -> torch.Tensor:
    """Each token is a fixed successor of the one before with probability 0.8, else uniform."""
    successor = torch.randperm(LM_VOCAB, generator=_gen(55))
    g = _gen(seed)
    ids = torch.empty(n, LM_LEN, dtype=torch.long)
    ids[:, 0] = torch.randint(LM_VOCAB, (n,), generator=g)
    for t in range(1, LM_LEN):
        noise = torch.randint(LM_VOCAB, (n,), generator=g)
        ids[:, t] = torch.where(torch.rand(n, generator=g) < 0.8, successor[ids[:, t - 1]], noise)
    return ids


# --- user-item preferences ----------------------------------------------------------------------------------
USERS, ITEMS, LIKED, HELD_OUT = 120, 60, 15, 5


@cache
def preferences() -> tuple[torch.Tensor, torch.Tensor]:
    """Each user's 15 liked items (top scores of a rank-3 taste model plus popularity): 10 per user to train
    on as (user, item) rows, 5 held out. Returns (train rows, held-out rows)."""
    g = _gen(31)
    taste = torch.randn(USERS, 3, generator=g) @ torch.randn(3, ITEMS, generator=g)
    liked = (taste + torch.randn(ITEMS, generator=g)).topk(LIKED, dim=1).indices
    liked = liked[:, torch.randperm(LIKED, generator=g)]
    users = torch.arange(USERS)[:, None]
    rows = torch.stack([users.expand(-1, LIKED), liked], dim=-1)
    return rows[:, HELD_OUT:].reshape(-1, 2), rows[:, :HELD_OUT].reshape(-1, 2)


def liked_matrix() -> torch.Tensor:
    """(USERS, ITEMS) booleans: every liked item, trained or held out."""
    liked = torch.zeros(USERS, ITEMS, dtype=torch.bool)
    for rows in preferences():
        liked[rows[:, 0], rows[:, 1]] = True
    return liked


# --- multi-label --------------------------------------------------------------------------------------------
TAGS = 5


def multilabel(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Twelve features; five labels, each a noisy half-space (about 1.5 positive labels per row)."""
    w = torch.randn(12, TAGS, generator=_gen(8))
    g = _gen(seed)
    x = torch.randn(n, 12, generator=g)
    return x, (x @ w + 0.5 * torch.randn(n, TAGS, generator=g) > 1.2).float()


# --- regression ---------------------------------------------------------------------------------------------
def prices(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Six features; a target in raw units (mean ~200, scale ~40), nonlinear in the features."""
    g = _gen(seed)
    x = torch.randn(n, 6, generator=g)
    signal = 1.5 * torch.sin(1.5 * x[:, 0]) + x[:, 1] * x[:, 2] + 0.8 * x[:, 3]
    return x, 200.0 + 40.0 * (signal + 0.2 * torch.randn(n, generator=g))


def positive_amounts(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A heavy-tailed positive target (log-normal in the features): regression on its logarithm."""
    x, y = prices(n, seed)
    return x, torch.exp((y - 200.0) / 40.0)


# --- multivariate sequences (time-series classification) ----------------------------------------------------
SEQ_MAX = 48


def sequences(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three-channel sequences of 8..48 steps (zero-padded to 48). Class = 2 x (channel 0's level > 0) +
    (channel 1 rises); channel 2 is noise. Returns (padded, lengths, classes)."""
    g = _gen(seed)
    lengths = torch.randint(8, SEQ_MAX + 1, (n,), generator=g)
    level, rises = torch.rand(n, generator=g) < 0.5, torch.rand(n, generator=g) < 0.5
    t = torch.arange(SEQ_MAX) / lengths[:, None]
    x = 0.6 * torch.randn(n, SEQ_MAX, 3, generator=g)
    x[:, :, 0] += torch.where(level, 0.4, -0.4)[:, None]
    x[:, :, 1] += 1.5 * torch.where(rises[:, None], t - 0.5, 0.5 - t)
    x = x * (torch.arange(SEQ_MAX) < lengths[:, None])[..., None]
    return x, lengths, 2 * level.long() + rises.long()


# --- a pulse stream (online event detection) ----------------------------------------------------------------
STREAM_LEN = 64


def pulse_stream(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Noise with events: stretches of 6..12 steps of a raised, oscillating amplitude. The per-step target is
    1 inside an event; detection is online (a step's prediction may use that step and earlier ones)."""
    g = _gen(seed)
    x = 0.5 * torch.randn(n, 1, STREAM_LEN, generator=g)
    y = torch.zeros(n, STREAM_LEN)
    for i in range(n):
        for _ in range(3):
            start, length = (
                int(torch.randint(0, STREAM_LEN - 6, (), generator=g)),
                int(torch.randint(6, 13, (), generator=g)),
            )
            y[i, start : start + length] = 1.0
    wave = torch.cos(math.pi * torch.arange(STREAM_LEN))  # +1, -1, +1, ...
    return x + 0.9 * y[:, None] * wave, y


# --- 2-D point sets -----------------------------------------------------------------------------------------
POINTS = 24


def _outline(shape: int, u: torch.Tensor) -> torch.Tensor:
    """Points at positions ``u`` in [0, 1) along a circle, a square, a segment or a triangle's outline."""
    if shape == 0:
        return torch.stack([torch.cos(6.283 * u), torch.sin(6.283 * u)], dim=-1)
    corners = {
        1: [(1, 1), (-1, 1), (-1, -1), (1, -1)],
        2: [(-1, -1), (1, 1)],
        3: [(0, 1.2), (-1, -0.6), (1, -0.6)],
    }
    c = torch.tensor(corners[shape], dtype=torch.float32)
    closed = torch.cat([c, c[:1]]) if shape != 2 else c
    sides = len(closed) - 1
    k, frac = (u * sides).long().clamp(max=sides - 1), (u * sides) % 1
    return closed[k] + frac[:, None] * (closed[k + 1] - closed[k])


def point_sets(
    n: int, seed: int, min_points: int = POINTS
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sets of ``min_points``..24 points on one of 4 outlines (the class), each scaled 0.7..1.3 and placed at
    a random position in [-4, 4]^2, padded to 24 with zeros. Returns (points, real-point mask, classes)."""
    g = _gen(seed)
    classes = torch.randint(0, 4, (n,), generator=g)
    points = torch.zeros(n, POINTS, 2)
    sizes = torch.randint(min_points, POINTS + 1, (n,), generator=g)
    for i in range(n):
        u = torch.rand(POINTS, generator=g)
        scale, offset = 0.7 + 0.6 * torch.rand((), generator=g), 8 * torch.rand(2, generator=g) - 4
        points[i] = _outline(int(classes[i]), u) * scale + offset + 0.05 * torch.randn(POINTS, 2, generator=g)
    mask = torch.arange(POINTS) < sizes[:, None]
    return points * mask[..., None], mask, classes


# --- tabular: a high-cardinality category -------------------------------------------------------------------
SHOPS = 400


def shop_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(shop id, 3 numeric columns, binary target): a shop effect (400 shops, ~5 rows each in training) plus
    a numeric effect."""
    effect = 1.2 * torch.randn(SHOPS, generator=_gen(404))
    g = _gen(seed)
    shop = torch.randint(0, SHOPS, (n,), generator=g)
    nums = torch.randn(n, 3, generator=g)
    logit = effect[shop] + 1.2 * nums[:, 0] - 0.8 * nums[:, 1]
    return shop, nums, (logit + 0.5 * torch.randn(n, generator=g) > 0).float()


def target_encode(
    shop: torch.Tensor, y: torch.Tensor, query: torch.Tensor, exclude: torch.Tensor | None = None
) -> torch.Tensor:
    """The smoothed mean target of each ``query`` row's shop over the rows (``shop``, ``y``); with
    ``exclude`` (a fold id per row, and per query row) a query row sees only the rows of other folds."""
    prior, weight = y.mean(), 2.0
    if exclude is None:
        sums = torch.zeros(SHOPS).index_add_(0, shop, y)
        counts = torch.zeros(SHOPS).index_add_(0, shop, torch.ones_like(y))
        return (sums[query] + weight * prior) / (counts[query] + weight)
    out = torch.empty(len(query))
    for fold in exclude.unique():
        rows = exclude != fold
        out[exclude == fold] = target_encode(shop[rows], y[rows], query[exclude == fold])
    return out
