"""Sealed gallery D's data: small seeded synthetic sets (dot images to count, level-and-slope sequences,
ordinal levels, censored survival times, multi-output targets on three scales, piecewise-linear regimes for
a mixture of experts, trending series to forecast, bags of words) and scikit-learn's digits. Every builder
is deterministic (its own generator), so a proof scores every model on the same clean held-out data."""

from __future__ import annotations

import math
from functools import cache

import torch
from torch.utils.data import Dataset

from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["digits", "loaders"]


class Augmented(Dataset):
    """``(transform(x[i]), y[i])``: a fresh random transform on every read (from the global RNG)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, transform) -> None:
        self.x, self.y, self.transform = x, y, transform

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.transform(self.x[i]), self.y[i]


# --- dot images (counting) ----------------------------------------------------------------------------------
SIDE = 10


def dots(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """1x10x10 images holding 1..9 bright dots (one pixel each, distinct places) on faint noise; the target
    is the number of dots (a float)."""
    g = _gen(seed)
    counts = torch.randint(1, 10, (n,), generator=g)
    images = 0.05 * torch.rand(n, SIDE * SIDE, generator=g)
    for i, k in enumerate(counts.tolist()):
        places = torch.randperm(SIDE * SIDE, generator=g)[:k]
        images[i, places] = 0.6 + 0.4 * torch.rand(k, generator=g)
    return images.view(n, 1, SIDE, SIDE), counts.float()


def random_flips(image: torch.Tensor) -> torch.Tensor:
    """A random horizontal and vertical flip: the count is unchanged."""
    dims = [d for d, flip in zip((-1, -2), torch.rand(2) < 0.5, strict=True) if flip]
    return image.flip(dims) if dims else image


def random_border_crop(image: torch.Tensor) -> torch.Tensor:
    """BUG (as an augmentation that keeps the label): blanks a 1..4 pixel strip along a random side, which
    erases the dots there while the target still counts them."""
    width, side = int(torch.randint(1, 5, ())), int(torch.randint(0, 4, ()))
    out = image.clone()
    strips = [(..., slice(0, width), slice(None)), (..., slice(-width, None), slice(None))]
    strips += [(..., slice(None), slice(0, width)), (..., slice(None), slice(-width, None))]
    out[strips[side]] = 0.0
    return out


# --- level-and-slope sequences (sequence-to-one regression) -------------------------------------------------
STEPS = 20


def level_sequences(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two channels over 20 steps: channel 0 a level in [-1, 1] plus noise, channel 1 a ramp of slope in
    [-1, 1] plus noise. Target: level + slope."""
    g = _gen(seed)
    level, slope = 2 * torch.rand(n, 1, generator=g) - 1, 2 * torch.rand(n, 1, generator=g) - 1
    ramp = torch.linspace(-1, 1, STEPS)
    x = torch.stack([level + 0.5 * torch.randn(n, STEPS, generator=g), slope * ramp], dim=-1)
    x[..., 1] += 0.3 * torch.randn(n, STEPS, generator=g)
    return x, (level + slope).squeeze(1)


# --- ordinal levels -----------------------------------------------------------------------------------------
LEVELS = 5


def ordinal_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Six features; a level 0..4 cut from a noisy linear score at its 50/75/90/97% quantiles (imbalanced:
    half the rows are level 0)."""
    w = torch.randn(6, generator=_gen(61))
    g = _gen(seed)
    x = torch.randn(n, 6, generator=g)
    score = (x @ w) / w.norm() + 0.3 * torch.randn(n, generator=g)
    cuts = torch.tensor([0.0, 0.674, 1.28, 1.88]) * math.sqrt(1.09)
    return x, torch.bucketize(score, cuts)


def level_weights(y: torch.Tensor) -> torch.Tensor:
    """One weight per row: the inverse frequency of its level (a balancing sampler's weights)."""
    return 1.0 / torch.bincount(y, minlength=LEVELS).float()[y]


# --- censored survival times --------------------------------------------------------------------------------
def survival(n: int, seed: int, censored: float = 0.5) -> tuple[torch.Tensor, ...]:
    """Four features; log event time linear in them plus noise, and an independent censoring time, its offset
    chosen so that about ``censored`` of the rows are censored. Returns (x, observed log time, event flag
    (1 = the event was seen), the true log event time)."""
    w = torch.tensor([0.8, -0.6, 0.5, 0.0])
    g = _gen(seed)
    x = torch.randn(n, 4, generator=g)
    log_t = x @ w + 0.4 * torch.randn(n, generator=g)
    offset = {0.5: 0.0, 0.7: -0.89}[censored]
    log_c = offset + 1.2 * torch.randn(n, generator=g)
    return x, torch.minimum(log_t, log_c), (log_t <= log_c).float(), log_t


# --- multi-output regression on three scales ----------------------------------------------------------------
def three_scales(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Five features; three targets in units of about 1, 100 and 0.01."""
    g = _gen(seed)
    x = torch.randn(n, 5, generator=g)
    y = torch.stack(
        [
            torch.sin(2 * x[:, 0]) + x[:, 1],
            100 * (x[:, 2] * x[:, 3] + 0.5 * x[:, 0]),
            0.01 * (x[:, 4] ** 2 + x[:, 1]),
        ],
        dim=1,
    )
    return x, y * (1 + 0.05 * torch.randn(n, 3, generator=g))


@cache
def target_stats() -> tuple[torch.Tensor, torch.Tensor]:
    """The training targets' per-output mean and standard deviation."""
    y = three_scales(1200, 1)[1]
    return y.mean(0), y.std(0)


# --- piecewise-linear regimes (mixture of experts) ----------------------------------------------------------
def regimes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two features in [-2, 2]; each quadrant is a regime with its own linear law."""
    slopes, offsets = 2 * torch.randn(4, 2, generator=_gen(71)), torch.randn(4, generator=_gen(72))
    g = _gen(seed)
    x = 4 * torch.rand(n, 2, generator=g) - 2
    q = 2 * (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    return x, (slopes[q] * x).sum(1) + offsets[q] + 0.05 * torch.randn(n, generator=g)


# --- trending series (forecasting with a lookback window) ---------------------------------------------------
LOOKBACK, HORIZON = 24, 4


def series(n: int, seed: int) -> torch.Tensor:
    """Windows of 28 steps: a level, a trend, a sine of period 8 and noise; forecast the last 4 steps from
    the first 24."""
    g = _gen(seed)
    t = torch.arange(LOOKBACK + HORIZON).float()
    level, trend = 5 * torch.randn(n, 1, generator=g), 0.3 * torch.randn(n, 1, generator=g)
    phase, amp = 6.283 * torch.rand(n, 1, generator=g), 0.5 + torch.rand(n, 1, generator=g)
    return (
        level + trend * t + amp * torch.sin(0.785 * t + phase) + 0.1 * torch.randn(n, t.numel(), generator=g)
    )


def scale_windows(windows: torch.Tensor, with_future: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(lookback, future) scaled by the lookback's mean and standard deviation; with ``with_future`` (the
    BUG) by those of the whole window, the 4 future steps included."""
    basis = windows if with_future else windows[:, :LOOKBACK]
    mean, std = basis.mean(1, keepdim=True), basis.std(1, keepdim=True)
    scaled = (windows - mean) / std
    return scaled[:, :LOOKBACK], scaled[:, LOOKBACK:]


# --- bags of words (text classification) --------------------------------------------------------------------
WORDS, DOC_LEN = 30, 16


def documents(n: int, seed: int, pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Reviews of 6..16 word ids (0..29) padded with ``pad``: words 0, 1 and 2 are the three opinions and the
    class is the one said most often; words 3..29 are filler."""
    g = _gen(seed)
    docs, labels = torch.full((n, DOC_LEN), pad), torch.randint(0, 3, (n,), generator=g)
    for i, label in enumerate(labels.tolist()):
        counts = torch.randint(0, 3, (3,), generator=g)
        counts[label] = counts.max() + int(torch.randint(1, 3, (), generator=g))
        filler = int(torch.randint(2, 6, (), generator=g))
        words = torch.cat(
            [torch.arange(3).repeat_interleave(counts), torch.randint(3, WORDS, (filler,), generator=g)]
        )
        docs[i, : len(words)] = words[torch.randperm(len(words), generator=g)]
    return docs, labels


# --- digits (semi-supervised and hierarchical labels) -------------------------------------------------------
def partly_labelled(missing: int = -1, labelled: int = 150) -> tuple[torch.Tensor, torch.Tensor]:
    """The training digits with only the first ``labelled`` labels known, the rest set to ``missing``."""
    x, y = digits("train")
    y[labelled:] = missing
    return x, y


def digit_pairs(part: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` pairs of digits from ``part``, half of them of one class: (first, second, same (1.0 or 0.0))."""
    x, y = digits(part)
    g = _gen(seed)
    first = torch.randint(len(y), (n,), generator=g)
    same = torch.rand(n, generator=g) < 0.5
    second = torch.empty(n, dtype=torch.long)
    for i, (j, want) in enumerate(zip(first.tolist(), same.tolist(), strict=True)):
        pool = torch.nonzero((y == y[j]) == want).flatten()
        second[i] = pool[torch.randint(len(pool), (), generator=g)]
    return x[first], x[second], same.float()
