"""Sealed gallery ZY's data (half ``zy1``): small seeded synthetic sets (a noisy curve whose noise grows with
the input, the inverted sinusoid of the mixture-density literature, small random graphs with typed nodes,
sparse observations of a logistic growth curve, strings from per-language character bigram chains) and bags
of scikit-learn's digits. Every builder is deterministic (its own generator); random augmentation and
resampling at read time draw from the global RNG."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import Dataset

from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


class Rows(Dataset):
    """Rows of equal-length tensors; ``transform(*row)`` (if given) runs on every read."""

    def __init__(self, *tensors: torch.Tensor, transform: Callable[..., Any] | None = None) -> None:
        self.tensors = tensors
        self.transform = transform

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int) -> Any:
        row = tuple(t[i] for t in self.tensors)
        if self.transform is not None:
            return self.transform(*row)
        return row if len(row) > 1 else row[0]


# --- heteroscedastic regression: a curve whose noise grows with |x| -----------------------------------------
Y_MEAN, Y_STD = 40.0, 6.5  # the target's standardisation (the data's own mean and spread, rounded)


def noise_scale(x: torch.Tensor) -> torch.Tensor:
    """The true noise standard deviation at ``x``: 0.4 at the centre, 2.8 at the edges."""
    return 0.4 + 0.8 * x.abs()


def curve(x: torch.Tensor) -> torch.Tensor:
    """The true mean of the target at ``x``."""
    return Y_MEAN + 8 * torch.sin(1.5 * x) + 1.5 * x


def hetero(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` inputs uniform on [-3, 3], shape (n, 1), and their noisy targets, ``curve(x) + noise_scale(x) *
    eps``."""
    g = _gen(seed)
    x = 6 * torch.rand(n, 1, generator=g) - 3
    return x, curve(x)[:, 0] + noise_scale(x)[:, 0] * torch.randn(n, generator=g)


# --- mixture density network: the inverted sinusoid ---------------------------------------------------------
def inverted_sinusoid(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` pairs of the inverse problem of ``x = y + 0.3 sin(2 pi y) + noise`` (y uniform on [0, 1]): the
    input x, shape (n, 1), and the target y, which has up to three modes for an x near the middle."""
    g = _gen(seed)
    y = torch.rand(n, generator=g)
    x = y + 0.3 * torch.sin(2 * math.pi * y) + 0.05 * torch.randn(n, generator=g)
    return x[:, None], y


# --- multiple-instance learning: bags of digits, positive if they hold a 7 ----------------------------------
TARGET_DIGIT, MIN_BAG, MAX_BAG = 7, 3, 9


def digit_bags(part: str, n: int, seed: int, label: str = "any") -> tuple[list[torch.Tensor], torch.Tensor]:
    """``n`` bags of 3..9 digits from the ``part`` digits, each a (size, 64) tensor, half of them positive:
    other digits with one or two of them replaced by a 7; and the bag's label, whether any instance is a 7
    (``label="any"``) or, with ``label="mean"``, the share of its instances that are 7s."""
    g = _gen(seed)
    x, y = digits(part)
    sevens = torch.nonzero(y == TARGET_DIGIT)[:, 0]
    rest = torch.nonzero(y != TARGET_DIGIT)[:, 0]
    bags, labels = [], torch.zeros(n)
    for i in range(n):
        size = int(torch.randint(MIN_BAG, MAX_BAG + 1, (), generator=g))
        index = rest[torch.randint(len(rest), (size,), generator=g)]
        if torch.rand((), generator=g) < 0.5:
            labels[i] = 1.0
            k = int(torch.randint(1, 3, (), generator=g))
            at = torch.randperm(size, generator=g)[:k]
            index[at] = sevens[torch.randint(len(sevens), (k,), generator=g)]
            if label == "mean":
                labels[i] = (y[index] == TARGET_DIGIT).float().mean()
        bags.append(x[index])
    return bags, labels


class Bags(Dataset):
    """Bags of instances and their labels; ``transform(bag)`` (if given) runs on every read."""

    def __init__(self, bags: list[torch.Tensor], labels: torch.Tensor, transform=None) -> None:
        self.bags, self.labels, self.transform = bags, labels, transform

    def __len__(self) -> int:
        return len(self.bags)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        bag = self.bags[i]
        return (self.transform(bag) if self.transform else bag), self.labels[i]


def shuffle_instances(bag: torch.Tensor) -> torch.Tensor:
    """The bag's instances in a fresh random order (a bag is a set: its label does not change)."""
    return bag[torch.randperm(len(bag))]


def pad_bags(items, replicate: bool = False):
    """Collate: the bags zero-padded to the longest in the batch (or padded by repeating each bag's last
    instance with ``replicate``), with a mask of the real instances: ``((bags, mask), labels)``."""
    bags, labels = zip(*items, strict=True)
    longest = max(len(bag) for bag in bags)
    padded = torch.zeros(len(bags), longest, bags[0].shape[-1])
    mask = torch.zeros(len(bags), longest, dtype=torch.bool)
    for i, bag in enumerate(bags):
        padded[i, : len(bag)] = bag
        mask[i, : len(bag)] = True
        if replicate:
            padded[i, len(bag) :] = bag[-1]
    return (padded, mask), torch.stack(labels)


def pad_bags_replicate(items):
    """:func:`pad_bags` padding with copies of each bag's last instance."""
    return pad_bags(items, replicate=True)


# --- graph-level regression: same-type edges of small random graphs -----------------------------------------
N_MAX, TYPES = 12, 3
EDGES_MEAN, EDGES_STD = 3.5, 2.5  # the target's standardisation (its mean and spread, rounded)


def graphs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` random graphs of 5..12 nodes (each edge present with probability 0.3), padded to 12 nodes: the
    symmetric adjacency (n, 12, 12), the one-hot node types (n, 12, 3), the node mask (n, 12) and the target,
    the number of edges that join two nodes of the same type."""
    g = _gen(seed)
    size = torch.randint(5, N_MAX + 1, (n,), generator=g)
    mask = torch.arange(N_MAX)[None] < size[:, None]
    upper = (torch.rand(n, N_MAX, N_MAX, generator=g) < 0.3).triu(1)
    adj = (upper | upper.transpose(1, 2)) & mask[:, :, None] & mask[:, None, :]
    kind = torch.randint(TYPES, (n, N_MAX), generator=g)
    feats = torch.nn.functional.one_hot(kind, TYPES).float() * mask[..., None]
    same = (kind[:, :, None] == kind[:, None, :]) & adj
    return adj.float(), feats, mask.float(), same.float().sum((1, 2)) / 2


def permute_graph(adj, feats, mask, y):
    """Node-order augmentation: the real nodes relabelled by a random permutation, in the adjacency and the
    features together (the graph, and so its target, is the same)."""
    size = int(mask.sum())
    perm = torch.cat([torch.randperm(size), torch.arange(size, N_MAX)])
    return (adj[perm][:, perm], feats[perm], mask[perm]), y


def permute_features_only(adj, feats, mask, y):
    """Node-order augmentation written on the feature matrix only: the adjacency keeps the old order."""
    size = int(mask.sum())
    perm = torch.cat([torch.randperm(size), torch.arange(size, N_MAX)])
    return (adj, feats[perm], mask[perm]), y


def as_graph(adj, feats, mask, y):
    """A row read as ``((adjacency, features, mask), target)``."""
    return (adj, feats, mask), y


# --- physics-informed fitting: logistic growth u' = r u (1 - u) ---------------------------------------------
RATE, U0, HORIZON = 1.2, 0.05, 8.0
OBSERVED_UNTIL = 3.0  # observations only in the growth phase: the plateau is left to the physics


def logistic(t: torch.Tensor) -> torch.Tensor:
    """The exact solution of u' = 1.2 u (1 - u), u(0) = 0.05."""
    return 1 / (1 + (1 / U0 - 1) * torch.exp(-RATE * t))


def observations(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` noisy observations (noise 0.02) of the solution at random times in [0, 3]: the times scaled by
    the horizon to tau = t / 8 in [0, 0.375], shape (n, 1), and the values (n, 1)."""
    g = _gen(seed)
    t = OBSERVED_UNTIL * torch.rand(n, 1, generator=g)
    return t / HORIZON, logistic(t) + 0.02 * torch.randn(n, 1, generator=g)


class Collocation(Dataset):
    """Rows ``(tau_obs, u_obs, tau_col)``: the observations cycled through ``length`` rows, each with a
    collocation time for the ODE residual, uniform on [0, 1] (the scaled horizon): drawn afresh on every read,
    or fixed with ``seed``."""

    def __init__(self, tau: torch.Tensor, u: torch.Tensor, length: int, seed: int | None = None) -> None:
        self.tau, self.u, self.length = tau, u, length
        self.fixed = torch.rand(length, 1, generator=_gen(seed)) if seed is not None else None

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int):
        col = self.fixed[i] if self.fixed is not None else torch.rand(1)
        j = i % len(self.tau)
        return self.tau[j], self.u[j], col


# --- character-level language identification ----------------------------------------------------------------
CHARS, LANGS, MIN_LEN, MAX_LEN = 12, 4, 5, 20
GRAMS = CHARS + CHARS * CHARS  # unigram and bigram frequencies


def _chains(sharpness: float = 1.5) -> tuple[torch.Tensor, torch.Tensor]:
    """Each language's start distribution (4, 12) and character bigram transition matrix (4, 12, 12): a
    chain shared by all languages mixed half and half with the language's own (fixed: seed 1234)."""
    g = _gen(1234)
    shared = torch.softmax(sharpness * torch.randn(CHARS, CHARS, generator=g), -1)
    own = torch.softmax(sharpness * torch.randn(LANGS, CHARS, CHARS, generator=g), -1)
    start = torch.softmax(sharpness * torch.randn(LANGS, CHARS, generator=g), -1)
    return start, 0.5 * shared + 0.5 * own


START, CHAIN = _chains()


def strings(counts: list[int], seed: int, ordered: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``counts[k]`` strings of 5..20 characters of each language ``k``: character ids 1..12, zero-padded to
    20 (n, 20), and the language. Generated language by language; shuffled unless ``ordered``."""
    g = _gen(seed)
    ids, langs = [], []
    for lang, n in enumerate(counts):
        length = torch.randint(MIN_LEN, MAX_LEN + 1, (n,), generator=g)
        chars = torch.zeros(n, MAX_LEN, dtype=torch.long)
        state = torch.multinomial(START[lang].expand(n, CHARS), 1, generator=g)[:, 0]
        for step in range(MAX_LEN):
            chars[:, step] = state + 1
            state = torch.multinomial(CHAIN[lang][state], 1, generator=g)[:, 0]
        chars[torch.arange(MAX_LEN)[None] >= length[:, None]] = 0
        ids.append(chars)
        langs.append(torch.full((n,), lang))
    ids, langs = torch.cat(ids), torch.cat(langs)
    if not ordered:
        order = torch.randperm(len(ids), generator=g)
        ids, langs = ids[order], langs[order]
    return ids, langs


def ngrams(ids: torch.Tensor) -> torch.Tensor:
    """Bag of character n-grams: each string's unigram and bigram counts divided by its length, (n, 156)."""
    n = len(ids)
    real = ids > 0
    length = real.sum(1, keepdim=True).clamp(min=1).float()
    uni = torch.zeros(n, CHARS).scatter_add_(1, (ids - 1).clamp(min=0), real.float())
    pair = real[:, :-1] & real[:, 1:]
    code = ((ids[:, :-1] - 1).clamp(min=0) * CHARS + (ids[:, 1:] - 1).clamp(min=0)).long()
    bi = torch.zeros(n, CHARS * CHARS).scatter_add_(1, code, pair.float())
    return torch.cat([uni, bi], 1) / length
