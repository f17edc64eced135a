"""Data and loaders of the data-stage gallery (loaders and sampler, splits, forward, loss).

Every factory returns the data keyword arguments of ``preflight`` (``train_dataloaders``, ``val_dataloaders``,
optionally ``target_key``); ``fixed=True`` builds the healthy twin's data (the bug fixed) and ``seed`` the
order of the training batches. ``held_out(name)`` gives the clean data both twins are scored on.

Example:
    >>> data = sampler_frequency_weights()
    >>> sorted(data)
    ['train_dataloaders', 'val_dataloaders']
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, SubsetRandomSampler, TensorDataset, WeightedRandomSampler

BATCH = 64


def gen(seed: int) -> torch.Generator:
    """A seeded CPU generator."""
    g = torch.Generator()
    g.manual_seed(seed)
    return g


def loader(*tensors: Tensor, batch_size: int = BATCH, shuffle: bool = True, seed: int = 0) -> DataLoader:
    """A ``TensorDataset`` loader, shuffled with a seeded generator."""
    return DataLoader(
        TensorDataset(*tensors),
        batch_size=batch_size,
        shuffle=shuffle,
        generator=gen(seed) if shuffle else None,
    )


def _pair(train: DataLoader, val: DataLoader, **extra: Any) -> dict[str, Any]:
    return {"train_dataloaders": train, "val_dataloaders": val, **extra}


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


# ---------------------------------------------------------------- loaders and sampler


def drop_last_empty(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """48 labelled digits (a small fine-tuning set) served with ``batch_size=64, drop_last=True``: none."""
    x, y = digits("train")
    train = DataLoader(
        TensorDataset(x[:48], y[:48]), batch_size=64, shuffle=True, drop_last=not fixed, generator=gen(seed)
    )
    return _pair(train, loader(*digits("val"), shuffle=False))


def imbalanced_digits() -> tuple[Tensor, Tensor]:
    """Training digits with classes 5-9 cut to one in ten (about 100 per common class, 10 per rare one)."""
    x, y = digits("train")
    keep = (y < 5) | (torch.arange(len(y)) % 10 == 0)
    return x[keep], y[keep]


def sampler_frequency_weights(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """A ``WeightedRandomSampler`` meant to balance the classes, weighted by class FREQUENCY (not its
    inverse): the rare classes become rarer still. ``fixed``: weights ``1 / count`` (healthy)."""
    x, y = imbalanced_digits()
    counts = torch.bincount(y, minlength=10).double()
    weights = 1.0 / counts[y] if fixed else counts[y] / len(y)
    sampler = WeightedRandomSampler(weights, num_samples=len(y), replacement=True, generator=gen(seed))
    train = DataLoader(TensorDataset(x, y), batch_size=BATCH, sampler=sampler)
    return _pair(train, loader(*digits("val"), shuffle=False))


def subset_sampler_first_rows(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """A dataset stored class by class (one file per digit, concatenated) and a ``SubsetRandomSampler`` over
    its first 80% of rows: digits 8 and 9 are in the dataset but never served. ``fixed``: a random 80%."""
    x, y = digits("train")
    order = torch.argsort(y, stable=True)
    x, y = x[order], y[order]
    n = int(0.8 * len(y))
    rows = torch.randperm(len(y), generator=gen(1))[:n] if fixed else torch.arange(n)
    sampler = SubsetRandomSampler(rows.tolist(), generator=gen(seed))
    train = DataLoader(TensorDataset(x, y), batch_size=BATCH, sampler=sampler)
    return _pair(train, loader(*digits("val"), shuffle=False))


def unshuffled_sorted(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Training rows stored class by class and served with ``shuffle=False``: every batch holds one or two
    digits and each epoch ends on nines. ``fixed``: ``shuffle=True``."""
    x, y = digits("train")
    order = torch.argsort(y, stable=True)
    train = loader(x[order], y[order], shuffle=fixed, seed=seed)
    return _pair(train, loader(*digits("val"), shuffle=False))


# ---------------------------------------------------------------- splits

_SUBJECT_DIM = 32


def subjects(n_subjects: int, reps: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Repeat measurements: each subject has a profile (``x``), measured ``reps`` times with small noise
    (cosine between repeats ~0.96); its label follows the profile only weakly (the best population model
    reaches ~0.6)."""
    g = gen(seed)
    profile = torch.randn(n_subjects, _SUBJECT_DIM, generator=g)
    direction = torch.randn(_SUBJECT_DIM, generator=gen(99))
    score = profile @ direction / direction.norm() + 3.0 * torch.randn(n_subjects, generator=g)
    label = (score > 0).long()
    x = profile.repeat_interleave(reps, 0) + 0.2 * torch.randn(n_subjects * reps, _SUBJECT_DIM, generator=g)
    return x, label.repeat_interleave(reps), torch.arange(n_subjects).repeat_interleave(reps)


def repeat_measurements_split(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """250 subjects x 4 measurements split 80/20 at random by ROW: every validation subject also has
    measurements in training. ``fixed``: split by subject (the healthy look-alike)."""
    x, y, subject = subjects(250, 4, seed=1)
    if fixed:
        val = subject >= 200
    else:
        val = torch.zeros(len(y), dtype=torch.bool)
        val[torch.randperm(len(y), generator=gen(2))[: len(y) // 5]] = True
    return _pair(loader(x[~val], y[~val], batch_size=64, seed=seed), loader(x[val], y[val], shuffle=False))


def shortcut_column(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Digits plus a 65th column, the scanner id (0-9): in the training data each digit was scanned on its own
    scanner (the id equals the label); validation (and the world) uses any scanner.
    ``fixed``: the training data comes from mixed scanners too."""
    x, y = digits("train")
    g = gen(5)
    column = torch.randint(0, 10, (len(y),), generator=g) if fixed else y
    x_val, y_val = digits("val")
    x_val = torch.cat([x_val, torch.randint(0, 10, (len(y_val), 1), generator=g).float()], 1)
    return _pair(
        loader(torch.cat([x, column[:, None].float()], 1), y, seed=seed), loader(x_val, y_val, shuffle=False)
    )


def transposed_train_images(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Training images exported column-major (H and W swapped) and never transposed back; validation images
    come upright from another export. ``fixed``: the training images are transposed back."""
    x, y = digits("train", images=True)
    if not fixed:
        x = x.transpose(-1, -2).contiguous()
    return _pair(loader(x, y, seed=seed), loader(*digits("val", images=True), shuffle=False))


def standardise_like_train(x: Tensor) -> Tensor:
    """Standardise digits with the TRAINING pixels' mean and std (what the training pipeline does)."""
    train, _ = digits("train")
    return (x - train.mean(0)) / (train.std(0) + 0.1)


def val_skips_standardisation(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """The training pipeline standardises the pixels; the validation (and inference) pipeline, written
    separately, forgets to and serves raw pixels in [0, 1]. ``fixed``: validation standardised too."""
    x, y = digits("train")
    x_val, y_val = digits("val")
    x_val = standardise_like_train(x_val) if fixed else x_val
    return _pair(loader(standardise_like_train(x), y, seed=seed), loader(x_val, y_val, shuffle=False))


# ---------------------------------------------------------------- forward

SEQ = 12
VOCAB = 9  # token 0 is padding


def first_token_sequences(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """Sequences of tokens 1..8; the label is the FIRST token (8 classes): position carries the answer."""
    x = torch.randint(1, VOCAB, (n, SEQ), generator=gen(seed))
    return x, x[:, 0] - 1


def first_token_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """First-token sequences (the bug lives in the model; ``fixed`` is unused)."""
    return _pair(
        loader(*first_token_sequences(1024, 1), seed=seed),
        loader(*first_token_sequences(256, 2), shuffle=False),
    )


def digits_loaders(fixed: bool = False, seed: int = 0, images: bool = False) -> dict[str, Any]:
    """Plain digits (the bug lives in the model)."""
    return _pair(loader(*digits("train", images), seed=seed), loader(*digits("val", images), shuffle=False))


PAD_LEN = 24


def last_token_sequences(n: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Right-padded sequences (0 = pad) of 2..24 tokens in 1..8 with their lengths; the label is the LAST real
    token mod 4."""
    g = gen(seed)
    lengths = torch.randint(2, PAD_LEN + 1, (n,), generator=g)
    x = torch.randint(1, VOCAB, (n, PAD_LEN), generator=g)
    x[torch.arange(PAD_LEN)[None, :] >= lengths[:, None]] = 0
    return x, lengths, (x[torch.arange(n), lengths - 1] - 1) % 4


def last_token_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """``(tokens, lengths, label)`` batches for a ``forward(x, lengths)`` model."""
    return _pair(
        loader(*last_token_sequences(768, 1), seed=seed), loader(*last_token_sequences(256, 2), shuffle=False)
    )


FEATURES = 4
LEVELS = (0.5, 1.0, 1.5, 2.0)


def loudness_recordings(n: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Recordings of 4..24 frames of 4 energy features, zero-padded to 24 frames, with their lengths; the
    label is the recording's loudness class (the mean frame energy is one of 0.5, 1, 1.5, 2, times noise)."""
    g = gen(seed)
    lengths = torch.randint(4, PAD_LEN + 1, (n,), generator=g)
    label = torch.randint(0, len(LEVELS), (n,), generator=g)
    level = torch.tensor(LEVELS)[label]
    x = level[:, None, None] * (1 + 0.15 * torch.randn(n, PAD_LEN, FEATURES, generator=g))
    x[torch.arange(PAD_LEN)[None, :] >= lengths[:, None]] = 0.0
    return x, lengths, label


def loudness_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """``(frames, lengths, label)`` batches for a ``forward(x, lengths)`` model."""
    return _pair(
        loader(*loudness_recordings(1024, 1), seed=seed), loader(*loudness_recordings(256, 2), shuffle=False)
    )


class DictDataset(Dataset):
    """Dict samples ``{"input_ids", "attention_mask", "labels"}`` from tensors of the same length."""

    def __init__(self, **tensors: Tensor) -> None:
        self.tensors = tensors

    def __len__(self) -> int:
        return len(next(iter(self.tensors.values())))

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        return {k: v[i] for k, v in self.tensors.items()}


def masked_mean_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Dict batches with an ``attention_mask`` (the healthy masked-mean look-alike)."""

    def part(n: int, s: int) -> DictDataset:
        x, lengths, _ = last_token_sequences(n, s)
        mask = (torch.arange(PAD_LEN)[None, :] < lengths[:, None]).long()
        # the label: is the majority of the real tokens > 4 (a bag-of-tokens task a masked mean can solve)
        frac = ((x > 4) & mask.bool()).sum(1) / lengths
        return DictDataset(input_ids=x, attention_mask=mask, labels=(frac > 0.5).long())

    train = DataLoader(part(1024, 1), batch_size=BATCH, shuffle=True, generator=gen(seed))
    return _pair(train, DataLoader(part(256, 2), batch_size=BATCH), target_key="labels")


# ---------------------------------------------------------------- loss

REG_DIM = 8


def regression(n: int, seed: int, scale: float = 1.0) -> tuple[Tensor, Tensor]:
    """A smooth nonlinear target of 8 standard-normal features (unit scale), times ``scale``."""
    x = torch.randn(n, REG_DIM, generator=gen(seed))
    y = (
        torch.sin(x[:, 0])
        + 0.5 * x[:, 1] * x[:, 2]
        + 0.3 * x[:, 3]
        + 0.1 * torch.randn(n, generator=gen(seed + 50))
    )
    return x, (y * scale)[:, None]


def raw_unit_regression(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Targets in raw units (x1000, e.g. prices in dollars, std ~1000) for a head that outputs unit scale (the
    fix lives in the model: it divides the targets by 1000 and multiplies its predictions back)."""
    return _pair(
        loader(*regression(1024, 1, 1000.0), seed=seed), loader(*regression(256, 2, 1000.0), shuffle=False)
    )


def star_ratings(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """Ratings on a 0..5 scale (mean ~2.5): a smooth function of 8 features plus noise."""
    x, y = regression(n, seed)
    return x, (2.5 + 1.2 * y).clamp(0.0, 5.0)


def star_rating_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Rating regression data (the bug lives in the model's output layer)."""
    return _pair(loader(*star_ratings(1024, 1), seed=seed), loader(*star_ratings(256, 2), shuffle=False))


def heteroscedastic(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """y = a linear function of 4 features plus noise whose scale grows with |x_0|."""
    x = torch.randn(n, 4, generator=gen(seed))
    mean = x @ torch.tensor([1.0, -2.0, 0.5, 1.5]) + torch.sin(2 * x[:, 1])
    noise = (0.1 + 0.5 * x[:, 0].abs()) * torch.randn(n, generator=gen(seed + 50))
    return x, (mean + noise)[:, None]


def heteroscedastic_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Heteroscedastic regression data (the bug lives in the model's Gaussian NLL)."""
    return _pair(
        loader(*heteroscedastic(1024, 1), seed=seed), loader(*heteroscedastic(256, 2), shuffle=False)
    )


LABELS = 6


def multilabel(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """16 features, 6 independent binary labels (each a thresholded linear function): multi-hot targets."""
    x = torch.randn(n, 16, generator=gen(seed))
    w = torch.randn(16, LABELS, generator=gen(77))
    return x, (x @ w > 0.5).float()


def multilabel_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Multi-label data with multi-hot float targets."""
    return _pair(loader(*multilabel(1024, 1), seed=seed), loader(*multilabel(256, 2), shuffle=False))


def imbalanced_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """The imbalanced digits served plainly (shuffled), for the prior-bias look-alike."""
    return _pair(loader(*imbalanced_digits(), seed=seed), loader(*digits("val"), shuffle=False))


def lm_sequences(n: int, seed: int) -> Tensor:
    """Right-padded token sequences (pad 0) of 6..24 tokens following ``t+1 = t + 1 mod 8`` with 10% noise."""
    g = gen(seed)
    lengths = torch.randint(6, PAD_LEN + 1, (n,), generator=g)
    start = torch.randint(0, 8, (n, 1), generator=g)
    x = (start + torch.arange(PAD_LEN)) % 8 + 1
    noisy = torch.rand(n, PAD_LEN, generator=g) < 0.1
    x[noisy] = torch.randint(1, VOCAB, (int(noisy.sum()),), generator=g)
    x[torch.arange(PAD_LEN)[None, :] >= lengths[:, None]] = 0
    return x


def lm_loaders(fixed: bool = False, seed: int = 0) -> dict[str, Any]:
    """Padded LM sequences; inputs ``x[:, :-1]``, targets ``x[:, 1:]`` with pad 0 to be ignored."""
    train, val = lm_sequences(1024, 1), lm_sequences(256, 2)
    return _pair(
        loader(train[:, :-1], train[:, 1:], seed=seed), loader(val[:, :-1], val[:, 1:], shuffle=False)
    )
