"""Data of the development gallery, generated in code (or scikit-learn's digits), small and CPU-cheap.

Every case's data factory takes ``fixed`` (build the healthy twin's data: the bug fixed) and ``seed`` (the
order of the training batches and the draws of the augmentation) and returns the data keyword arguments of
``preflight``. ``held_out_*`` functions build the clean data both twins are scored on in the proofs.

Example:
    >>> data = shuffled_labels()
    >>> sorted(data)
    ['train_dataloaders', 'val_dataloaders']
    >>> x, y = next(iter(data["train_dataloaders"]))
    >>> tuple(x.shape), tuple(y.shape)
    ((64, 1, 8, 8), (64,))
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, TensorDataset

BATCH = 64


def gen(seed: int) -> torch.Generator:
    """A seeded CPU generator."""
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def loader(
    dataset: Dataset | tuple[Tensor, ...],
    batch_size: int = BATCH,
    shuffle: bool = True,
    seed: int = 0,
    **kwargs: Any,
) -> DataLoader:
    """A loader over ``dataset`` (tensors make a ``TensorDataset``), shuffled with a seeded generator."""
    if isinstance(dataset, tuple):
        dataset = TensorDataset(*dataset)
    return DataLoader(
        dataset, batch_size=batch_size, shuffle=shuffle, generator=gen(seed) if shuffle else None, **kwargs
    )


def pair(train: DataLoader, val: DataLoader, **extra: Any) -> dict[str, Any]:
    """The data keyword arguments of ``preflight``."""
    return {"train_dataloaders": train, "val_dataloaders": val, **extra}


# ---------------------------------------------------------------- digits


@lru_cache(maxsize=1)
def _digits() -> dict[str, tuple[Tensor, Tensor]]:
    from sklearn.datasets import load_digits

    raw = load_digits()
    x = torch.tensor(raw.data, dtype=torch.float32) / 16.0
    y = torch.tensor(raw.target, dtype=torch.long)
    perm = torch.randperm(len(y), generator=gen(0))
    parts = {"train": perm[:1000], "val": perm[1000:1300], "test": perm[1300:]}
    return {name: (x[idx], y[idx]) for name, idx in parts.items()}


def digits(split: str, images: bool = False) -> tuple[Tensor, Tensor]:
    """Copies of sklearn's digits (1797 8x8 images, pixels in [0, 1]): 1000 train, 300 val, 497 test."""
    x, y = _digits()[split]
    x = x.clone()
    return (x.view(-1, 1, 8, 8) if images else x), y.clone()


def held_out_digits(images: bool = False) -> DataLoader:
    """The 497 test digits, in order."""
    return loader(digits("test", images), shuffle=False)


# ---------------------------------------------------------------- shuffled_labels


class LabelLookupDigits(Dataset):
    """Digit images and labels kept apart (as two files); sample ``i`` is ``images[i]`` with
    ``labels[label_row[i]]``. The bug: the label rows were shuffled by an independent permutation (the images
    were re-ordered once, the labels once more), so no image keeps its own label."""

    def __init__(self, images: Tensor, labels: Tensor, label_row: Tensor) -> None:
        self.images, self.labels, self.label_row = images, labels, label_row

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        return self.images[i], self.labels[self.label_row[i]]


def shuffled_labels(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """1000 training digits (8x8 images) with their labels drawn through an independent permutation; clean
    validation digits. ``fixed``: every image with its own label."""
    x, y = digits("train", images=True)
    row = torch.arange(len(y)) if fixed else torch.randperm(len(y), generator=gen(7))
    train = loader(LabelLookupDigits(x, y, row), seed=seed)
    return pair(train, loader(digits("val", images=True), shuffle=False))


# ---------------------------------------------------------------- hflip_position_target

SIDE = 16


def blobs(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """``n`` 1x16x16 images, each a bright Gaussian blob (sigma 1.2) at a random position plus faint noise;
    the target is the blob's centre ``(x, y)`` scaled to [-1, 1] (x: column, left to right)."""
    g = gen(seed)
    centre = 2.0 + (SIDE - 5.0) * torch.rand(n, 2, generator=g)  # columns/rows in [2, 13]
    grid = torch.arange(SIDE, dtype=torch.float32)
    dx = (grid[None, :] - centre[:, 0:1]) ** 2  # (n, W)
    dy = (grid[None, :] - centre[:, 1:2]) ** 2  # (n, H)
    image = torch.exp(-(dy[:, :, None] + dx[:, None, :]) / (2 * 1.2**2))
    image = image + 0.05 * torch.randn(n, SIDE, SIDE, generator=g)
    return image[:, None], (centre - (SIDE - 1) / 2) / ((SIDE - 1) / 2)


class FlipAugmentedBlobs(Dataset):
    """Blob images flipped left-right with probability 1/2 as they are read (an augmentation). The bug: the
    target's x is not mirrored with the image. ``mirror_target``: it is (the fix)."""

    def __init__(self, images: Tensor, targets: Tensor, mirror_target: bool) -> None:
        self.images, self.targets, self.mirror_target = images, targets, mirror_target

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        image, target = self.images[i], self.targets[i]
        if torch.rand(()) < 0.5:
            image = image.flip(-1)
            if self.mirror_target:
                target = target * torch.tensor([-1.0, 1.0])
        return image, target


def hflip_position_target(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """2000 blob images with random horizontal flips whose x target is not mirrored; 300 clean validation
    images. ``fixed``: the target mirrored with the image."""
    train = loader(FlipAugmentedBlobs(*blobs(2000, 1), mirror_target=fixed), seed=seed)
    return pair(train, loader(blobs(300, 2), shuffle=False))


def held_out_blobs() -> DataLoader:
    """500 clean blob images."""
    return loader(blobs(500, 3), shuffle=False)


# ---------------------------------------------------------------- distillation_t2_kl


@lru_cache(maxsize=1)
def teacher_weights() -> tuple[Tensor, Tensor]:
    """A multinomial logistic regression fitted on the training digits (scikit-learn, deterministic): the
    frozen teacher's weight (10, 64) and bias (10,)."""
    from sklearn.linear_model import LogisticRegression

    x, y = digits("train")
    fit = LogisticRegression(C=1.0, max_iter=2000).fit(x.numpy(), y.numpy())
    return torch.tensor(fit.coef_, dtype=torch.float32), torch.tensor(fit.intercept_, dtype=torch.float32)


def digits_flat(fixed: bool = False, seed: int = 0, **extra: Any) -> dict[str, Any]:
    """Training and validation digits as 64-pixel rows (no bug in the data; ``fixed`` is unused)."""
    return pair(loader(digits("train"), seed=seed), loader(digits("val"), shuffle=False), **extra)


def distillation(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Digits rows; ``num_classes=10`` passed as a user distilling a 10-class teacher would."""
    return digits_flat(fixed, seed, num_classes=10)


# ---------------------------------------------------------------- seq2seq

PAD, BOS = 0, 1
SEQ_VOCAB = 12  # tokens 2..11
SEQ_MAX = 10


def reverse_pairs(n: int, seed: int) -> dict[str, Tensor]:
    """Sources of 5-10 tokens (2..11, right-padded with 0 to 10) and targets: the source reversed, padded."""
    g = gen(seed)
    length = torch.randint(5, SEQ_MAX + 1, (n,), generator=g)
    tokens = torch.randint(2, SEQ_VOCAB, (n, SEQ_MAX), generator=g)
    keep = torch.arange(SEQ_MAX)[None, :] < length[:, None]
    src = torch.where(keep, tokens, torch.zeros_like(tokens))
    tgt = torch.zeros_like(src)
    for i in range(n):
        tgt[i, : length[i]] = src[i, : length[i]].flip(0)
    return {"src": src, "tgt": tgt}


class DictDataset(Dataset):
    """Rows of a dict of equally long tensors, as dicts."""

    def __init__(self, columns: dict[str, Tensor]) -> None:
        self.columns = columns

    def __len__(self) -> int:
        return len(next(iter(self.columns.values())))

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        return {key: value[i] for key, value in self.columns.items()}


def seq2seq_reverse(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """2000 training and 300 validation reverse-the-sequence pairs as ``{"src", "tgt"}`` dict batches."""
    return pair(
        loader(DictDataset(reverse_pairs(2000, 1)), seed=seed),
        loader(DictDataset(reverse_pairs(300, 2)), shuffle=False),
        input_key="src",
        target_key="tgt",
    )


# ---------------------------------------------------------------- quantile regression

QUANTILES = (0.1, 0.5, 0.9)


def heteroscedastic(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """6 features in [-1, 1]; ``y = sin(2 x0) + x1^2 + (0.2 + 0.6 |x2|) * noise`` (noise spread varies)."""
    g = gen(seed)
    x = 2 * torch.rand(n, 6, generator=g) - 1
    y = torch.sin(2 * x[:, 0]) + x[:, 1] ** 2 + (0.2 + 0.6 * x[:, 2].abs()) * torch.randn(n, generator=g)
    return x, y


def quantile_regression(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """2000 training and 400 validation rows of the heteroscedastic regression."""
    return pair(loader(heteroscedastic(2000, 1), seed=seed), loader(heteroscedastic(400, 2), shuffle=False))


def held_out_heteroscedastic() -> DataLoader:
    """1000 clean rows."""
    return loader(heteroscedastic(1000, 3), shuffle=False)
