"""Sealed gallery Y's data (half ``y``): small seeded synthetic sets for explicit-feedback ratings, listwise
learning to rank, Cox survival, transductive node classification on one graph, hierarchical topic
classification of bag-of-words documents, tabular regression with categorical columns and multiple-instance
bags. Every builder is deterministic (its own generator); random augmentation at read time draws from the
global RNG."""

from __future__ import annotations

import torch
from torch.utils.data import Dataset

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["Rows", "loaders"]


# --- explicit ratings (matrix factorisation) ----------------------------------------------------------------
USERS = ITEMS = 200
_TASTE = 4


def ratings(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` (user, item, rating) triples: a rating of 1..5 made of a global mean, a user bias, an item bias,
    a taste match of 4 factors and noise."""
    t = _gen(81)
    user_bias, item_bias = 0.6 * torch.randn(USERS, generator=t), 0.6 * torch.randn(ITEMS, generator=t)
    user_taste, item_taste = torch.randn(USERS, _TASTE, generator=t), torch.randn(ITEMS, _TASTE, generator=t)
    g = _gen(seed)
    users = torch.randint(USERS, (n,), generator=g)
    items = torch.randint(ITEMS, (n,), generator=g)
    taste = 0.3 * (user_taste[users] * item_taste[items]).sum(1)
    rating = 3.5 + user_bias[users] + item_bias[items] + taste + 0.3 * torch.randn(n, generator=g)
    return users, items, rating.clamp(1, 5)


# --- listwise learning to rank ------------------------------------------------------------------------------
DOCS, QFEATS = 20, 10


def query_lists(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` queries of 20 candidate documents with 10 features each (a per-query offset, irrelevant to the
    ranking, on top) and graded relevance 0..4 from a fixed linear utility plus noise."""
    w = torch.randn(QFEATS, generator=_gen(82))
    g = _gen(seed)
    x = torch.randn(n, DOCS, QFEATS, generator=g)
    utility = x @ w / QFEATS**0.5 + 0.3 * torch.randn(n, DOCS, generator=g)
    relevance = (utility + 2).round().clamp(0, 4)
    offset = 2 * torch.randn(n, 1, QFEATS, generator=g)
    return x + offset, relevance


def docs_shuffled_features_only(x: torch.Tensor, relevance: torch.Tensor):
    """The BUG: the candidates are shuffled within the list (against position bias) by indexing the features
    with a random permutation; the relevance labels stay in their old order."""
    return x[torch.randperm(DOCS)], relevance


def docs_shuffled(x: torch.Tensor, relevance: torch.Tensor):
    """The candidates shuffled within the list, features and labels together."""
    order = torch.randperm(DOCS)
    return x[order], relevance[order]


# --- survival (Cox proportional hazards) --------------------------------------------------------------------
COVARIATES = 8


def patients(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` patients: 8 covariates, the observed time (the event or the censoring, whichever came first),
    the event flag (1 = the event was observed) and the true event time. The hazard is exponential in a
    non-linear risk; censoring is independent, about 40% of patients."""
    beta = torch.randn(COVARIATES, generator=_gen(83))
    g = _gen(seed)
    x = torch.randn(n, COVARIATES, generator=g)
    risk = 2.5 * x @ beta / COVARIATES**0.5 + x[:, 0] * x[:, 1]
    event_time = -torch.log(torch.rand(n, generator=g)) / torch.exp(risk)
    censor_time = -torch.log(torch.rand(n, generator=g)) / 0.7
    time = torch.minimum(event_time, censor_time)
    return x, time, (event_time <= censor_time).float(), event_time


# --- transductive node classification on one graph ----------------------------------------------------------
NODES, NODE_FEATS, NODE_CLASSES = 1200, 16, 4


class Graph(Dataset):
    """The whole graph as every item (a full-batch epoch of ``steps`` steps): node features, the dense 0/1
    adjacency (symmetric, no self-loops), labels and the train/val/test masks."""

    def __init__(self, graph: dict[str, torch.Tensor], steps: int = 20) -> None:
        self.graph, self.steps = graph, steps

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return self.graph


def citation_graph(seed: int = 84) -> dict[str, torch.Tensor]:
    """1,200 nodes in 4 classes with noisy 16-feature descriptions; each node links to about 6 others, 60% of
    its links within its class. 10% of the nodes are labelled for training, 20% for validation, the rest are
    the test nodes."""
    g = _gen(seed)
    y = torch.randint(NODE_CLASSES, (NODES,), generator=g)
    centre = torch.randn(NODE_CLASSES, NODE_FEATS, generator=g)
    x = 0.3 * centre[y] + torch.randn(NODES, NODE_FEATS, generator=g)
    same = y[:, None] == y[None, :]
    p = torch.where(same, 0.6 * 6 / (NODES / NODE_CLASSES), 0.4 * 6 / (NODES * 0.75))
    adj = (torch.rand(NODES, NODES, generator=g) < p).float().triu(1)
    adj = adj + adj.T
    order = torch.randperm(NODES, generator=g)
    masks = {
        name: torch.zeros(NODES, dtype=torch.bool).index_fill(0, order[part], True)
        for name, part in (("train", slice(0, 120)), ("val", slice(120, 360)), ("test", slice(360, None)))
    }
    return {"x": x, "adj": adj, "y": y, **{f"{k}_mask": v for k, v in masks.items()}}


# --- hierarchical topics of bag-of-words documents ----------------------------------------------------------
VOCAB, COARSE, CHILDREN, DOC_WORDS = 300, 5, 4, 40
FINE = COARSE * CHILDREN
PARENT = torch.arange(FINE) // CHILDREN  # fine topic f belongs to coarse topic f // 4 (taxonomy order)
SORTED_NAMES_PARENT = torch.arange(FINE) % COARSE  # the BUG's parent map (fine ids of the sorted names)


def documents(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` documents of 40 words as word counts over 300 words, their coarse and fine topics. A fine topic's
    words mix background words, its coarse topic's words and a few of its own."""
    t = _gen(85)
    coarse_words = torch.rand(COARSE, VOCAB, generator=t).pow(8)
    fine_words = torch.rand(FINE, VOCAB, generator=t).pow(12)
    mix = 0.3 / VOCAB + 0.4 * coarse_words[PARENT] / coarse_words.sum(1)[PARENT, None]
    mix = mix + 0.3 * fine_words / fine_words.sum(1, keepdim=True)
    g = _gen(seed)
    fine = torch.randint(FINE, (n,), generator=g)
    words = torch.multinomial(mix[fine], DOC_WORDS, replacement=True, generator=g)
    counts = torch.zeros(n, VOCAB).scatter_add_(1, words, torch.ones(n, DOC_WORDS))
    return counts, PARENT[fine], fine


# --- tabular regression with categorical columns ------------------------------------------------------------
CARDINALITY, NUMERIC = (12, 40, 60), 5


def listings(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` rows of a price table: 3 categorical columns (12, 40 and 60 levels, coded by their sorted level
    names), 5 numeric columns, a row id and the log price (an additive effect per level, a linear numeric
    part, an interaction and noise)."""
    t = _gen(86)
    effects = [torch.randn(k, generator=t) for k in CARDINALITY]
    w = torch.randn(NUMERIC, generator=t) / 2
    g = _gen(seed)
    cats = torch.stack([torch.randint(k, (n,), generator=g) for k in CARDINALITY], 1)
    num = torch.randn(n, NUMERIC, generator=g)
    price = (
        sum(e[cats[:, j]] for j, e in enumerate(effects)) + num @ w + 0.5 * num[:, 0] * effects[0][cats[:, 0]]
    )
    price = price + 0.2 * torch.randn(n, generator=g)
    return cats, num, torch.arange(n) + 10_000 * seed, price


def coded_by_appearance(cats: torch.Tensor) -> torch.Tensor:
    """The BUG's coding: each column's levels numbered in order of first appearance in this table
    (``pd.factorize``), not by the sorted level names the serving pipeline uses."""
    coded = torch.empty_like(cats)
    for j in range(cats.shape[1]):
        seen: dict[int, int] = {}
        for row, level in enumerate(cats[:, j].tolist()):
            coded[row, j] = seen.setdefault(level, len(seen))
    return coded


# --- multiple-instance bags ---------------------------------------------------------------------------------
MAX_BAG, INSTANCE = 16, 6


def bags(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` bags of 4..16 instances (6 features; padded with zeros to 16 and masked) labelled positive when
    any instance is a key instance (about half of the bags), and the instances' own labels (never used for
    training)."""
    key = torch.randn(INSTANCE, generator=_gen(87))
    key = 3.0 * key / key.norm()
    g = _gen(seed)
    x = torch.randn(n, MAX_BAG, INSTANCE, generator=g)
    sizes = torch.randint(4, MAX_BAG + 1, (n,), generator=g)
    mask = torch.arange(MAX_BAG)[None] < sizes[:, None]
    positive = torch.rand(n, generator=g) < 0.5
    which = (torch.rand(n, generator=g) * sizes).long()
    instance = torch.zeros(n, MAX_BAG).scatter_(1, which[:, None], positive[:, None].float())
    x = (x + instance[..., None] * key) * mask[..., None]
    return x, mask, positive.float(), instance
