"""Sealed gallery ZY2's data (half ``zy2``): a seeded community graph with noisy node features and its edges
split for link prediction, pairs of scikit-learn digits with their sum, sets of numbers with their ranks,
short clips of a digit moving across a canvas, a skewed price that rises with one input, and time-stamped
churn rows whose behaviour drifts. Every builder is deterministic (its own generator); random augmentation and
negative sampling at read time draw from the global RNG."""

from __future__ import annotations

import math
from functools import cache

import torch
from torch.utils.data import Dataset

from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


class Rows(Dataset):
    """Rows of aligned tensors; a row is passed through ``transform(*row)`` on every read when given (a
    one-tensor row without a transform is read as that tensor)."""

    def __init__(self, *tensors: torch.Tensor, transform=None) -> None:
        self.tensors, self.transform = tensors, transform

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int):
        row = tuple(t[i] for t in self.tensors)
        if self.transform is not None:
            return self.transform(*row)
        return row if len(row) > 1 else row[0]


# --- link prediction on a community graph -------------------------------------------------------------------
NODES, GROUPS, FEATURES = 800, 8, 16


@cache
def graph() -> tuple[torch.Tensor, torch.Tensor]:
    """The one graph (seed 0): 800 nodes in 8 hidden communities, an edge between two nodes of the same
    community with probability 0.04 and of different ones with 0.001 (1,951 undirected edges, each listed
    once as (u, v) with u < v, sorted); each node's 16 features are its community's centre plus noise
    (0.7 sd a coordinate), so a node's features tell its community only roughly and its neighbours' help."""
    g = _gen(0)
    group = torch.randint(GROUPS, (NODES,), generator=g)
    centres = torch.randn(GROUPS, FEATURES, generator=g)
    x = centres[group] + 0.7 * torch.randn(NODES, FEATURES, generator=g)
    same = group[:, None] == group[None, :]
    p = torch.where(same, 0.04, 0.001)
    upper = torch.triu(torch.rand(NODES, NODES, generator=g) < p, 1)
    return x, upper.nonzero()


@cache
def edge_split(doubled_before_split: bool = False) -> dict[str, torch.Tensor]:
    """The graph's edges split once (seed 0): 15% ``test`` (held out of every loader, for the proofs), then
    20% of the rest ``val`` and the others ``train``. With ``doubled_before_split`` the rest is first listed
    in both directions ((u, v) and (v, u)) and the directed list is split: most validation edges then have
    their reverse in training."""
    _, edges = graph()
    g = _gen(1)
    order = torch.randperm(len(edges), generator=g)
    n_test = int(0.15 * len(edges))
    test, rest = edges[order[:n_test]], edges[order[n_test:]]
    if doubled_before_split:
        rest = torch.cat([rest, rest.flip(1)])
    rest = rest[torch.randperm(len(rest), generator=g)]
    n_val = int(0.2 * len(rest))
    return {"test": test, "val": rest[:n_val], "train": rest[n_val:]}


def non_edges(n: int, seed: int) -> torch.Tensor:
    """``n`` node pairs (u != v) that are no edge of the graph, drawn with ``seed``."""
    _, edges = graph()
    adjacency = torch.zeros(NODES, NODES, dtype=torch.bool)
    adjacency[edges[:, 0], edges[:, 1]] = adjacency[edges[:, 1], edges[:, 0]] = True
    pairs = torch.randint(NODES, (4 * n, 2), generator=_gen(seed))
    keep = (pairs[:, 0] != pairs[:, 1]) & ~adjacency[pairs[:, 0], pairs[:, 1]]
    return pairs[keep][:n]


def scored_pairs(positives: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``positives`` (label 1) and as many fixed non-edges (label 0), as (pairs, labels)."""
    negatives = non_edges(len(positives), seed)
    labels = torch.cat([torch.ones(len(positives)), torch.zeros(len(negatives))])
    return torch.cat([positives, negatives]), labels


class EdgesWithNegatives(Dataset):
    """Each training edge read as (pair, 1.0), then as many node pairs drawn uniformly afresh on every read
    as (pair, 0.0) (uniform pairs are almost never edges: the graph's density is ~0.6%)."""

    def __init__(self, edges: torch.Tensor) -> None:
        self.edges = edges

    def __len__(self) -> int:
        return 2 * len(self.edges)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        if i < len(self.edges):
            return self.edges[i], torch.tensor(1.0)
        return torch.randint(NODES, (2,)), torch.tensor(0.0)


class EdgesOnly(Dataset):
    """Each training edge read once as (pair, 1.0): the negatives are made in the batch by the model."""

    def __init__(self, edges: torch.Tensor) -> None:
        self.edges = edges

    def __len__(self) -> int:
        return len(self.edges)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.edges[i], torch.tensor(1.0)


def train_adjacency(edges: torch.Tensor) -> torch.Tensor:
    """The row-normalised adjacency (both directions, self-loops added) of ``edges``: a mean over each
    node's neighbours and itself."""
    a = torch.eye(NODES)
    a[edges[:, 0], edges[:, 1]] = 1.0
    a[edges[:, 1], edges[:, 0]] = 1.0
    return a / a.sum(1, keepdim=True)


# --- arithmetic on images: two digits in, their sum out -----------------------------------------------------
SUMS = 19  # 0 + 0 .. 9 + 9
SUM_MEAN, SUM_STD = 9.0, 4.0  # the sum's standardisation (the sum of two uniform digits: mean 9, std ~4.1)


class FreshPairs(Dataset):
    """Pairs of the ``part``'s digits drawn afresh on every read (``length`` reads an epoch), each read as
    ``read(images (2, 64), labels (2,))``."""

    def __init__(self, part: str, length: int, read) -> None:
        self.x, self.y = digits(part)
        self.length, self.read = length, read

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        index = torch.randint(len(self.x), (2,))
        return self.read(self.x[index], self.y[index])


@cache
def digit_pairs(part: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` fixed pairs of the ``part``'s digits drawn with ``seed``: the images (n, 2, 64), and the two
    labels (n, 2)."""
    x, y = digits(part)
    index = torch.randint(len(x), (n, 2), generator=_gen(seed))
    return x[index], y[index]


def pair_and_sum(images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the two images, the sum of their labels)."""
    return images, labels[0] + labels[1]


def pair_and_first_twice(images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the two images, the first label added to itself: ``labels[0] + labels[0]``, a typo)."""
    return images, labels[0] + labels[0]


def pair_and_float_sum(images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(the two images, the sum as a float regression target)."""
    return images, (labels[0] + labels[1]).float()


def either_order(images: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The pair in a random order (half the time swapped): the sum is the same either way."""
    if torch.rand(()) < 0.5:
        images, labels = images.flip(0), labels.flip(0)
    return pair_and_sum(images, labels)


# --- sequence sorting: the rank of each number of a set -----------------------------------------------------
SET_SIZE = 8


def number_sets(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` sets of 8 numbers (uniform in [0, 1), distinct almost surely), and each number's position in
    ascending sorted order (its rank, 0..7)."""
    x = torch.rand(n, SET_SIZE, generator=_gen(seed))
    return x, x.argsort(-1).argsort(-1)


# --- frame-sequence classification: which way a digit moves -------------------------------------------------
CANVAS, FRAMES, DIRECTIONS = 12, 4, 4  # directions: 0 right, 1 left, 2 down, 3 up
OPPOSITE = torch.tensor([1, 0, 3, 2])


def moving_digits(part: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` clips of 4 frames (12 x 12): one of the ``part``'s digits (drawn with ``seed``), shifted by one
    pixel a frame to the right, left, down or up from a random start, with faint noise; (n, 4, 144) and the
    direction (0..3)."""
    g = _gen(seed)
    images, _ = digits(part, (8, 8))
    pick = torch.randint(len(images), (n,), generator=g)
    direction = torch.randint(DIRECTIONS, (n,), generator=g)
    across = torch.randint(0, 5, (n,), generator=g)  # the offset across the motion
    along = torch.randint(0, 2, (n,), generator=g)  # the start along it (0..1: four frames fit in 0..4)
    clips = torch.zeros(n, FRAMES, CANVAS, CANVAS)
    for i in range(n):
        for f in range(FRAMES):
            step = int(along[i]) + f
            pos = step if int(direction[i]) in (0, 2) else 4 - step
            row, col = (int(across[i]), pos) if int(direction[i]) < 2 else (pos, int(across[i]))
            clips[i, f, row : row + 8, col : col + 8] = images[pick[i]]
    clips += 0.05 * torch.randn(clips.shape, generator=g)
    return clips.view(n, FRAMES, -1), direction


def reversed_in_time(clip: torch.Tensor, direction: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half the time the clip played backwards (an action-recognition augmentation), the label kept."""
    if torch.rand(()) < 0.5:
        clip = clip.flip(0)
    return clip, direction


def reversed_and_relabelled(clip: torch.Tensor, direction: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half the time the clip played backwards, labelled with the opposite direction (which it now shows)."""
    if torch.rand(()) < 0.5:
        return clip.flip(0), OPPOSITE[direction]
    return clip, direction


# --- monotone regression: a price that rises with floor area ------------------------------------------------
def houses(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` rows of 4 inputs: the floor area (column 0, in [0, 1]), the season (column 1, in [0, 1), whose
    effect goes up and down), and two standardised local scores; and the price (thousands, skewed): its log
    is 4 + 1.5 sqrt(area) + 0.5 sin(2 pi season) + 0.3 score_a - 0.2 score_b + noise (0.15). The price rises
    with area whatever the rest."""
    g = _gen(seed)
    x = torch.cat([torch.rand(n, 2, generator=g), torch.randn(n, 2, generator=g)], 1)
    log_price = (
        4
        + 1.5 * x[:, 0].sqrt()
        + 0.5 * torch.sin(2 * math.pi * x[:, 1])
        + 0.3 * x[:, 2]
        - 0.2 * x[:, 3]
        + 0.15 * torch.randn(n, generator=g)
    )
    return x, log_price.exp()


# --- churn with a time-ordered split ------------------------------------------------------------------------
CHURN_FEATURES = 7  # month, tenure, charges, support calls, usage, discount use, days inactive (standardised)
PERIOD = 0.1  # the market (competitors' offers) changes every tenth of the timeline


@cache
def market(periods: int = 20) -> torch.Tensor:
    """The churn pressure of each period (a fixed draw, seed 7): shifts of the churn logit of sd 1.5."""
    return 1.5 * torch.randn(periods, generator=_gen(7))


def churn_rows(
    n: int, seed: int, start: float = 0.0, end: float = 1.0, leaky: bool = False
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` monthly customer snapshots with timestamps in [start, end) (sorted): 7 standardised features
    (the first is the month itself) and whether the customer churned in the next month. The market's churn
    pressure changes every period (:func:`market`), so the future is not the past: a model can learn the
    periods it has seen, through the month, but not the ones to come. The last feature, days inactive, is
    measured at the snapshot; with ``leaky`` it is measured at the export date (t = 1) instead, so a
    churner's row also counts the days since it left: a leak from the label that the serving data lack.
    Returns (features, churned, timestamps)."""
    g = _gen(seed)
    t = (start + (end - start) * torch.rand(n, generator=g)).sort().values
    tenure, charges, calls, usage, discount = torch.randn(5, n, generator=g)
    pressure = market()[(t / PERIOD).long()]
    logit = -1.8 - 1.0 * tenure + 0.8 * charges + 0.8 * calls - 0.6 * usage - 0.6 * discount + pressure
    churned = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
    inactive = -0.7 * usage + 0.7 * torch.randn(n, generator=g)
    if leaky:
        inactive = inactive + 5.0 * churned * (1.0 - t).clamp(min=0)
    month = (t - 0.5) / 0.3
    return torch.stack([month, tenure, charges, calls, usage, discount, inactive], 1), churned, t
