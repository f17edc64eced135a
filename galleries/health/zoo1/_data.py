"""The sealed zoo's data, generated in code (or scikit-learn's bundled digits): no downloads."""

from __future__ import annotations

import functools
import math
import time

import torch
from torch import Tensor
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, TensorDataset


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(x: Tensor, y: Tensor, batch_size: int, shuffle: bool = True, seed: int = 0) -> DataLoader:
    """A plain loader; shuffled with its own seeded generator so the batch order is the same every run."""
    return DataLoader(
        TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle, generator=_gen(seed) if shuffle else None
    )


def batched_loader(x: Tensor, y: Tensor, batch_size: int, seed: int = 0) -> DataLoader:
    """A shuffled loader that indexes whole batches at once (the usual way to feed big tabular batches: no
    per-row ``__getitem__`` and collate)."""
    sampler = BatchSampler(RandomSampler(range(len(y)), generator=_gen(seed)), batch_size, drop_last=False)
    return DataLoader(TensorDataset(x, y), sampler=sampler, batch_size=None)


# ------------------------------------------------------------------------------------------------ digits
@functools.cache
def _digits() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.tensor(bunch.data, dtype=torch.float32) / 16.0
    y = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=_gen(1234))
    return x[order], y[order]


def digits(split: str, images: bool = False) -> tuple[Tensor, Tensor]:
    """Scikit-learn's 8x8 digits in [0, 1]: ``"train"`` (first 1400 rows of a fixed shuffle) or ``"val"``
    (the other 397). ``images``: shaped ``(N, 1, 8, 8)``, else ``(N, 64)``."""
    x, y = _digits()
    x, y = (x[:1400], y[:1400]) if split == "train" else (x[1400:], y[1400:])
    return (x.view(-1, 1, 8, 8) if images else x), y


# ------------------------------------------------------------------------------------------------ tabular
def tabular_classes(rows: int, features: int = 12, classes: int = 4, seed: int = 0, noise: float = 0.3):
    """Standardised features; the class is the argmax of a fixed random two-layer teacher plus noise."""
    g = _gen(seed)
    teacher_seed = _gen(99)
    w1 = torch.randn(features, 32, generator=teacher_seed)
    w2 = torch.randn(32, classes, generator=teacher_seed)
    x = torch.randn(rows, features, generator=g)
    scores = torch.tanh(x @ w1 / math.sqrt(features)) @ w2
    y = (scores + noise * torch.randn(rows, classes, generator=g)).argmax(1)
    return x, y


def tabular_regression(rows: int, features: int = 8, seed: int = 0, noise: float = 0.1):
    """A smooth nonlinear target of standardised features (a sum of effects), float ``(N, 1)``."""
    g = _gen(seed)
    x = torch.randn(rows, features, generator=g)
    y = (
        torch.sin(x[:, 0])
        + 0.5 * x[:, 1] * x[:, 2]
        + 0.3 * x[:, 3] ** 2
        - 0.4 * x[:, 4]
        + noise * torch.randn(rows, generator=g)
    )
    return x, y.unsqueeze(1)


def sensor_log_with_sentinels(
    rows: int, first_bad_row: int, bad_rows: int, features: int = 10, sentinel: float = -99.0
):
    """Standardised sensor readings in time order; from ``first_bad_row`` a sensor dropped out for a few rows
    and the export wrote its missing value as a sentinel (``-99``) in column 3. Target: a smooth function of
    the readings."""
    g = _gen(7)
    x = torch.randn(rows, features, generator=g)
    y = torch.tanh(x[:, 0] - x[:, 1]) + 0.5 * x[:, 2] + 0.3 * x[:, 3] + 0.05 * torch.randn(rows, generator=g)
    x[first_bad_row : first_bad_row + bad_rows, 3] = sentinel
    return x, y.unsqueeze(1)


# ------------------------------------------------------------------------------------------------ sequences
def adding_problem(rows: int, length: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Hochreiter's adding problem: two channels (a value in [0, 1], a marker); target: the sum of the two
    marked values."""
    g = _gen(seed)
    values = torch.rand(rows, length, generator=g)
    marks = torch.zeros(rows, length)
    first = torch.randint(0, length // 2, (rows,), generator=g)
    second = torch.randint(length // 2, length, (rows,), generator=g)
    marks[torch.arange(rows), first] = 1.0
    marks[torch.arange(rows), second] = 1.0
    target = (values * marks).sum(1, keepdim=True)
    return torch.stack([values, marks], dim=2), target


def majority_tokens(rows: int, length: int = 16, vocab: int = 6, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Token sequences; the label: which of tokens 1..3 occurs most (ties to the lowest). Token 0 and 4.. are
    distractors."""
    g = _gen(seed)
    x = torch.randint(0, vocab, (rows, length), generator=g)
    counts = torch.stack([(x == t).sum(1) for t in (1, 2, 3)], dim=1).float()
    y = (counts + 0.01 * torch.arange(3, 0, -1)).argmax(1)
    return x, y


# ------------------------------------------------------------------------------------------------ text
_WORDS = ["the", "cat", "dog", "sat", "ran", "on", "a", "mat", "log", "and", "saw"]
_WORDS += ["big", "small", "red", "blue"]
VOCAB = ["<pad>", "<eos>", *_WORDS]


def sentences(rows: int, length: int = 16, seed: int = 0) -> Tensor:
    """Token ids of little sentences of a fixed grammar (``the big cat sat on a red mat``), padded with 0
    to ``length``."""
    g = _gen(seed)
    ids = {w: i for i, w in enumerate(VOCAB)}
    out = torch.zeros(rows, length, dtype=torch.long)

    def pick(options: list[str]) -> str:
        return options[int(torch.randint(len(options), (1,), generator=g))]

    for r in range(rows):
        words = ["the", pick(["big", "small", "red", "blue"]), pick(["cat", "dog"])]
        words += [pick(["sat", "ran"]), "on", "a", pick(["red", "blue", "big"]), pick(["mat", "log"])]
        if int(torch.randint(2, (1,), generator=g)):
            words += ["and", pick(["saw", "sat"])]
        tokens = [*[ids[w] for w in words][: length - 1], ids["<eos>"]]
        out[r, : len(tokens)] = torch.tensor(tokens)
    return out


class SlowCacheDataset(Dataset):
    """Rows from memory, except that every ``miss_every``-th row is a cache miss that reads "from network
    storage" (a ``time.sleep`` of ``miss_s``)."""

    def __init__(self, x: Tensor, y: Tensor, miss_every: int, miss_s: float) -> None:
        self.x, self.y, self.miss_every, self.miss_s = x, y, miss_every, miss_s

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        if index % self.miss_every == 0:
            time.sleep(self.miss_s)
        return self.x[index], self.y[index]
