"""Sealed gallery B's data: small seeded synthetic sets for masked LM, token tagging, segmentation, quantile
regression, tabular data with categorical codes, forecasting, ordinal regression, multi-label classification
and counting. Each builder returns plain tensors (deterministic: its own generator), so a proof can score
every model on the same clean held-out data."""

from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from galleries.sealed import gen as _gen

# --- masked language modelling ------------------------------------------------------------------------------
PAD, MASK = 0, 1
MLM_VOCAB, MLM_LEN = 24, 16


def chain_sequences(n: int, seed: int) -> torch.Tensor:
    """Token chains: each token is a fixed successor of the one before (a permutation of the vocabulary), with
    a 10% chance of a random token instead; a masked token is readable from either neighbour."""
    successor = torch.randperm(MLM_VOCAB - 2, generator=_gen(77)) + 2
    g = _gen(seed)
    ids = torch.empty(n, MLM_LEN, dtype=torch.long)
    ids[:, 0] = torch.randint(2, MLM_VOCAB, (n,), generator=g)
    for t in range(1, MLM_LEN):
        random = torch.randint(2, MLM_VOCAB, (n,), generator=g)
        ids[:, t] = torch.where(torch.rand(n, generator=g) < 0.1, random, successor[ids[:, t - 1] - 2])
    return ids


def padded_chain_sequences(n: int, seed: int) -> torch.Tensor:
    """Chains of 5..16 tokens, padded with PAD to 16."""
    ids = chain_sequences(n, seed)
    lengths = torch.randint(5, MLM_LEN + 1, (n, 1), generator=_gen(seed + 100))
    return ids.masked_fill(torch.arange(MLM_LEN) >= lengths, PAD)


def mask_tokens(
    ids: torch.Tensor, generator: torch.Generator | None = None, maskable: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT-style masking: 15% of the (``maskable``) positions become MASK in the input; the labels keep the
    original token there and -100 everywhere else."""
    chosen = torch.rand(ids.shape, generator=generator) < 0.15
    if maskable is not None:
        chosen &= maskable
    labels = torch.where(chosen, ids, torch.full_like(ids, -100))
    return ids.masked_fill(chosen, MASK), labels


# --- token tagging ------------------------------------------------------------------------------------------
TAG_VOCAB, TRIGGERS, ENTITIES = 40, range(1, 9), range(9, 19)


def tagging_sequences(n: int, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Variable-length (3..20) token sequences with tags: 2 = the token after a trigger token (1..8), 1 = an
    entity token (9..18) not after a trigger, 0 = other. Tag 2 needs the previous token."""
    g = _gen(seed)
    out = []
    for _ in range(n):
        length = int(torch.randint(3, 21, (), generator=g))
        tokens = torch.randint(1, TAG_VOCAB, (length,), generator=g)
        tags = torch.zeros(length, dtype=torch.long)
        is_entity = (tokens >= ENTITIES.start) & (tokens < ENTITIES.stop)
        tags[is_entity] = 1
        after_trigger = torch.zeros(length, dtype=torch.bool)
        after_trigger[1:] = tokens[:-1] < TRIGGERS.stop
        tags[after_trigger] = 2
        out.append((tokens, tags))
    return out


def pad_tagging(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The correct collate: tokens padded with PAD, tags with -100, lengths kept."""
    tokens = torch.nn.utils.rnn.pad_sequence([t for t, _ in batch], batch_first=True, padding_value=PAD)
    tags = torch.nn.utils.rnn.pad_sequence([y for _, y in batch], batch_first=True, padding_value=-100)
    lengths = torch.tensor([len(t) for t, _ in batch])
    return {"tokens": tokens, "tags": tags, "lengths": lengths}


# --- segmentation -------------------------------------------------------------------------------------------
SEG_SIZE = 16


def stripe_scenes(
    n: int, seed: int, objects: int = 2, noise: float = 0.6
) -> tuple[torch.Tensor, torch.Tensor]:
    """1x16x16 noise images with rectangles of horizontal stripes (class 1) or vertical stripes (class 2); the
    mask gives every pixel's class (0 = background). Same mean intensity: the class is in the texture."""
    g = _gen(seed)
    images = noise * torch.randn(n, 1, SEG_SIZE, SEG_SIZE, generator=g)
    masks = torch.zeros(n, SEG_SIZE, SEG_SIZE, dtype=torch.long)
    rows = torch.arange(SEG_SIZE).view(-1, 1).expand(SEG_SIZE, SEG_SIZE)
    cols = rows.T
    stripes = {1: (rows % 2) * 2.0 - 1.0, 2: (cols % 2) * 2.0 - 1.0}
    for i in range(n):
        for _ in range(objects):
            h, w = (int(v) for v in torch.randint(4, 8, (2,), generator=g))
            top, left = (int(v) for v in torch.randint(0, SEG_SIZE - 4, (2,), generator=g))
            cls = int(torch.randint(1, 3, (), generator=g))
            region = (slice(top, top + h), slice(left, left + w))
            images[i, 0][region] = stripes[cls][region] + 0.3 * torch.randn(
                images[i, 0][region].shape, generator=g
            )
            masks[i][region] = cls
    return images, masks


class FlipAugmented(Dataset):
    """Random horizontal and vertical flips of image and mask together (the correct augmentation)."""

    def __init__(self, images: torch.Tensor, masks: torch.Tensor) -> None:
        self.images, self.masks = images, masks

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        image, mask = self.images[i], self.masks[i]
        if torch.rand(()) < 0.5:
            image, mask = image.flip(-1), mask.flip(-1)
        if torch.rand(()) < 0.5:
            image, mask = image.flip(-2), mask.flip(-2)
        return image, mask


class ImageOnlyFlips(FlipAugmented):
    """BUG: the flips are applied to the image only (an image transform pipeline that never sees the mask)."""

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        image = self.images[i]
        if torch.rand(()) < 0.5:
            image = image.flip(-1)
        if torch.rand(()) < 0.5:
            image = image.flip(-2)
        return image, self.masks[i]


# --- quantile regression ------------------------------------------------------------------------------------
QUANTILES = (0.1, 0.5, 0.9)


def heteroscedastic(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Raw features (mean ~5, scale ~3, as read from a file) and a target whose spread depends on x2."""
    g = _gen(seed)
    z = torch.randn(n, 4, generator=g)
    y = 2.0 * torch.sin(1.5 * z[:, 0]) + z[:, 1] + (0.3 + 0.7 * z[:, 2].abs()) * torch.randn(n, generator=g)
    return 5.0 + 3.0 * z, y


class Standardised(Dataset):
    """Standardises each row with the training statistics as it is read (returns a new tensor)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, mean: torch.Tensor, std: torch.Tensor) -> None:
        self.x, self.y, self.mean, self.std = x, y, mean, std

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return (self.x[i] - self.mean) / self.std, self.y[i]


class StandardisedInPlace(Standardised):
    """BUG: standardises the stored row in place: every epoch standardises already standardised data."""

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.x[i]
        x -= self.mean
        x /= self.std
        return x, self.y[i]


# --- tabular with categorical codes -------------------------------------------------------------------------
CARDINALITIES = (8, 12, 6)


def tabular(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Three categorical columns (integer codes) and three numeric ones; a binary target whose logit sums an
    effect per code (the third column's effects are the largest) and a numeric term."""
    g = _gen(1000)  # the effects are the same for every split
    effects = [torch.randn(c, generator=g) * s for c, s in zip(CARDINALITIES, (1.0, 1.0, 2.5), strict=True)]
    g = _gen(seed)
    cats = torch.stack([torch.randint(0, c, (n,), generator=g) for c in CARDINALITIES], dim=1)
    nums = torch.randn(n, 3, generator=g)
    logit = sum(e[cats[:, j]] for j, e in enumerate(effects)) + 1.5 * nums[:, 0] - nums[:, 1] * nums[:, 2]
    y = (logit + 0.3 * torch.randn(n, generator=g) > 0).float()
    return cats, nums, y


def customer_rows(customers: int, rows: int, seed: int, first_id: int = 1) -> tuple[torch.Tensor, ...]:
    """Rows of spend per visit: a large per-customer level plus a numeric effect; columns (customer id, 2
    numbers). Ids start at 1: 0 is the "unknown customer" id."""
    g = _gen(seed)
    level = 3.0 * torch.randn(customers, generator=g)
    ids = torch.arange(customers).repeat_interleave(rows)
    nums = torch.randn(customers * rows, 2, generator=g)
    y = level[ids] + nums[:, 0] - 0.5 * nums[:, 1] + 0.3 * torch.randn(customers * rows, generator=g)
    return ids + first_id, nums, y


def known_or_unknown(ids: torch.Tensor, known: torch.Tensor) -> torch.Tensor:
    """Customer ids not seen in training become 0, the unknown customer."""
    return torch.where(torch.isin(ids, known), ids, torch.zeros_like(ids))


# --- forecasting --------------------------------------------------------------------------------------------
LOOKBACK = 24


def seasonal_series(count: int, length: int, seed: int, noise: float = 0.5) -> torch.Tensor:
    """Sinusoids with a period of 6..14 steps, random amplitude and phase, plus white noise."""
    g = _gen(seed)
    t = torch.arange(length).float()
    period = torch.randint(6, 15, (count, 1), generator=g).float()
    amp = 1.0 + torch.rand(count, 1, generator=g)
    phase = 6.3 * torch.rand(count, 1, generator=g)
    return amp * torch.sin(6.2832 * t / period + phase) + noise * torch.randn(count, length, generator=g)


def windows(series: torch.Tensor, horizon: int = 1, stride: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """Input = LOOKBACK steps, target = the next ``horizon`` steps (the correct window)."""
    xs, ys = [], []
    for i in range(0, series.shape[1] - LOOKBACK - horizon + 1, stride):
        xs.append(series[:, i : i + LOOKBACK])
        ys.append(series[:, i + LOOKBACK : i + LOOKBACK + horizon])
    return torch.cat(xs), torch.cat(ys)


def windows_off_by_one(series: torch.Tensor, stride: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    """BUG: the one-step target is read at ``i + LOOKBACK - 1``, the last input step, not the next."""
    xs, ys = [], []
    for i in range(0, series.shape[1] - LOOKBACK, stride):
        xs.append(series[:, i : i + LOOKBACK])
        ys.append(series[:, i + LOOKBACK - 1 : i + LOOKBACK])
    return torch.cat(xs), torch.cat(ys)


# --- ordinal regression -------------------------------------------------------------------------------------
ORDINAL_K = 5


def ordinal(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Six features; a latent score cut at uneven thresholds into 5 ordered grades."""
    w = torch.tensor([1.0, -0.8, 0.6, 0.0, 0.4, 0.0])
    g = _gen(seed)
    x = torch.randn(n, 6, generator=g)
    score = x @ w + 0.5 * torch.tanh(2 * x[:, 3]) + 0.2 * torch.randn(n, generator=g)
    y = torch.bucketize(score, torch.tensor([-1.2, -0.3, 0.2, 1.0]))
    return x, y


# --- multi-label --------------------------------------------------------------------------------------------
LABELS = 6


def multilabel_numpy(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Ten features and six labels, each a half-space of the features (as a user would load them: numpy)."""
    w = np.random.default_rng(7).normal(size=(10, LABELS))
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 10)).astype(np.float32)
    y = (x @ w + 0.3 * rng.normal(size=(n, LABELS)) > 0.3).astype(np.float32)
    return x, y


def shuffled_multilabel(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The correct shuffle before the split: one permutation for features and labels."""
    x, y = multilabel_numpy(n, seed)
    perm = np.random.default_rng(0).permutation(n)
    return torch.from_numpy(x[perm]), torch.from_numpy(y[perm])


def shuffled_multilabel_twice(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """BUG: features and labels shuffled with two calls of the same generator: two different permutations."""
    x, y = multilabel_numpy(n, seed)
    rng = np.random.default_rng(0)
    rng.shuffle(x)
    rng.shuffle(y)
    return torch.from_numpy(x), torch.from_numpy(y)


# --- counting -----------------------------------------------------------------------------------------------
COUNT_SIZE = 12


def blobs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """1x12x12 images with 0..7 small bright blobs on noise; the target is the number of blobs."""
    g = _gen(seed)
    images = 0.3 * torch.randn(n, 1, COUNT_SIZE, COUNT_SIZE, generator=g)
    counts = torch.randint(0, 8, (n,), generator=g)
    yy, xx = torch.meshgrid(torch.arange(COUNT_SIZE).float(), torch.arange(COUNT_SIZE).float(), indexing="ij")
    for i in range(n):
        for _ in range(int(counts[i])):
            cy, cx = (float(v) for v in torch.rand(2, generator=g) * (COUNT_SIZE - 1))
            images[i, 0] += torch.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 1.0)
    return images, counts.float()


def loaders(train: Dataset, val: Dataset, batch_size: int = 64, **kwargs) -> dict[str, DataLoader]:
    """``train_dataloaders`` (shuffled) and ``val_dataloaders`` for ``preflight``/``Trainer.fit``."""
    return {
        "train_dataloaders": DataLoader(train, batch_size=batch_size, shuffle=True, **kwargs),
        "val_dataloaders": DataLoader(val, batch_size=batch_size, **kwargs),
    }
