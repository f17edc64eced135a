"""Sealed gallery N, second half (``o``): its data. Small seeded sets: stereo recordings of a click with a
time difference of arrival between two microphones, two-digit strips cut from scikit-learn's digits, digits
with labels flipped to the next class by a known noise process, compound fingerprints with the readouts of 8
assays (most of them never run), long-tailed digits, sensor series with gaps to fill and insurance policies
with their claims. Every builder is deterministic (its own generator); random augmentation at read time
draws from the global RNG."""

from __future__ import annotations

import math

import torch

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- time difference of arrival: a click heard by two microphones -------------------------------------------
RECORDED, WINDOW, MAX_DELAY = 80, 64, 6
DELAYS = 2 * MAX_DELAY + 1
CENTRE = (RECORDED - WINDOW) // 2


def stereo_clicks(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` two-channel recordings of 80 samples: a click (a short damped burst) reaches the left microphone
    at a random time and the right one ``delay`` samples later (-6..6), over independent hiss. The label is
    the delay's class ``delay + 6`` (0..12)."""
    g = _gen(seed)
    delay = torch.randint(-MAX_DELAY, MAX_DELAY + 1, (n,), generator=g)
    arrival = 24 + 32 * torch.rand(n, generator=g)
    amplitude = 0.5 + torch.rand(n, 1, generator=g)
    t = torch.arange(RECORDED).float()

    def click(at: torch.Tensor) -> torch.Tensor:
        lag = t - at[:, None]
        return amplitude * torch.exp(-(lag**2) / 2.0) * torch.cos(1.3 * lag)

    left, right = click(arrival), click(arrival + delay)
    x = torch.stack([left, right], 1) + 0.15 * torch.randn(n, 2, RECORDED, generator=g)
    return x, delay + MAX_DELAY


def random_crop(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per read: one 64-sample window, at a random offset, cut from both channels."""
    start = int(torch.randint(0, RECORDED - WINDOW + 1, ()))
    return x[:, start : start + WINDOW], label


def random_crop_per_channel(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: each channel is cropped at its own random offset (the crop is applied channel by channel)."""
    starts = torch.randint(0, RECORDED - WINDOW + 1, (2,)).tolist()
    return torch.stack([x[c, s : s + WINDOW] for c, s in enumerate(starts)]), label


def crop_and_swap(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per read: a random crop and, half the time, the microphones swapped, which negates the delay."""
    x, label = random_crop(x, label)
    if torch.rand(()) < 0.5:
        return x.flip(0), DELAYS - 1 - label
    return x, label


def crop_and_swap_keep_label(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the microphones are swapped half the time and the label is kept as it was."""
    x, label = random_crop(x, label)
    return (x.flip(0) if torch.rand(()) < 0.5 else x), label


def centre_crop(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation and serving: the centre window."""
    return x[:, CENTRE : CENTRE + WINDOW], label


# --- two-digit strips ---------------------------------------------------------------------------------------
def strips(part: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` strips (1 x 8 x 16) of two digits of the ``part`` side by side, labelled (left, right)."""
    x, y = digits(part, (1, 8, 8))
    g = _gen(seed)
    i, j = torch.randint(len(x), (2, n), generator=g)
    return torch.cat([x[i], x[j]], -1), torch.stack([y[i], y[j]], 1)


def jitter(strip: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per read: the strip moved up or down by up to one pixel (both digits together)."""
    return strip.roll(int(torch.randint(-1, 2, ())), dims=1), label


def jitter_and_mirror(strip: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the usual image recipe's random horizontal flip as well, labels kept (left, right)."""
    strip, label = jitter(strip, label)
    return (strip.flip(-1) if torch.rand(()) < 0.5 else strip), label


# --- digits with class-dependent label noise ----------------------------------------------------------------
NOISE = 0.4


def flip_matrix() -> torch.Tensor:
    """The noise process, ``T[clean, noisy]``: a label stays with probability .6, else becomes the next
    class."""
    return (1 - NOISE) * torch.eye(10) + NOISE * torch.eye(10).roll(1, dims=1)


def noisy_digits(part: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``part`` of the digits with labels as annotated: 40% moved to the next class."""
    x, y = digits(part)
    moved = torch.rand(len(y), generator=_gen(seed)) < NOISE
    return x, torch.where(moved, (y + 1) % 10, y)


# --- multi-task bioassays on compound fingerprints ----------------------------------------------------------
BITS, ASSAYS = 128, 8


def _assay_weights() -> torch.Tensor:
    return torch.randn(BITS, ASSAYS, generator=_gen(100)) / math.sqrt(BITS * 0.15)


def compounds(n: int, seed: int, own: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` compounds (128-bit fingerprints, 15% bits set) and their activity (0/1) in 8 assays: a
    fingerprint effect plus, with weight ``own``, an effect of the compound the bits do not explain."""
    g = _gen(seed)
    x = (torch.rand(n, BITS, generator=g) < 0.15).float()
    logit = (x - 0.15) @ _assay_weights() * 3 + own * torch.randn(n, ASSAYS, generator=g)
    return x, (logit > 0).float()


def screen(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A screening table: every compound run in 3 of the 8 assays; the rest are NaN (never measured)."""
    x, y = compounds(n, seed)
    run = torch.rand(n, ASSAYS, generator=_gen(seed + 50)).argsort(1) < 3
    return x, torch.where(run, y, torch.nan)


def missing_as_inactive(x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: ``nan_to_num`` on the table, so an assay never run reads as inactive."""
    return x, y.nan_to_num(0.0)


OWN = 1.5


def replicate_table(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` compounds each measured in 3 replicate runs (rows), with the compound id of each row."""
    x, y = compounds(n, seed, own=OWN)
    compound = torch.arange(n).repeat_interleave(3)
    return x[compound], y[compound], compound


def split_rows(n: int, seed: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """The BUG: rows shuffled and cut 5:1, so replicates of a validation compound are in training."""
    x, y, _ = replicate_table(n, seed)
    order = torch.randperm(len(x), generator=_gen(seed + 1))
    cut = len(x) * 5 // 6
    return {"train": (x[order[:cut]], y[order[:cut]]), "val": (x[order[cut:]], y[order[cut:]])}


def split_compounds(n: int, seed: int) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Compounds shuffled and cut 5:1, every replicate following its compound."""
    x, y, compound = replicate_table(n, seed)
    val = torch.randperm(n, generator=_gen(seed + 1))[: n // 6]
    in_val = torch.isin(compound, val)
    return {"train": (x[~in_val], y[~in_val]), "val": (x[in_val], y[in_val])}


# --- long-tailed digits -------------------------------------------------------------------------------------
def long_tail(part: str, ratio: float = 0.05) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``part`` of the digits with class k kept at ``ratio ** (k / 9)`` of its rows (from 100% for 0
    down to 5% for 9), as the data came in."""
    x, y = digits(part)
    keep_share = ratio ** (y.float() / 9)
    keep = torch.rand(len(y), generator=_gen(7)) < keep_share
    return x[keep], y[keep]


def class_prior() -> torch.Tensor:
    """The training label frequencies."""
    _, y = long_tail("train")
    return torch.bincount(y, minlength=10).float() / len(y)


# --- sensor series with gaps --------------------------------------------------------------------------------
STEPS, HIDDEN_SHARE = 32, 0.3


def series(n: int, seed: int) -> tuple[torch.Tensor]:
    """``n`` sensor series of 32 steps: two sinusoids of random frequency, amplitude and phase, plus noise."""
    g = _gen(seed)
    t = torch.arange(STEPS).float()
    freq = 0.15 + 0.35 * torch.rand(n, 2, 1, generator=g)
    phase = 2 * math.pi * torch.rand(n, 2, 1, generator=g)
    amp = 0.5 + torch.rand(n, 2, 1, generator=g)
    return ((amp * torch.sin(freq * t + phase)).sum(1) + 0.05 * torch.randn(n, STEPS, generator=g),)


def hide(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per read: a fresh mask, 1 where the value is observed and 0 where it is hidden (30%)."""
    return x, (torch.rand(STEPS) >= HIDDEN_SHARE).float()


def gappy_series(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Validation and held-out series with fixed masks."""
    (x,) = series(n, seed)
    return x, (torch.rand(n, STEPS, generator=_gen(seed + 1)) >= HIDDEN_SHARE).float()


# --- insurance claim frequency: counts over a policy's exposure ---------------------------------------------
RISK_FEATURES = 8


def policies(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` policies: 8 risk features, the years the policy was in force (0.1..1, unrelated to risk), the
    claims it made (Poisson with mean ``rate * exposure``) and its true yearly claim rate."""
    g = _gen(seed)
    x = torch.randn(n, RISK_FEATURES, generator=g)
    w = torch.randn(RISK_FEATURES, generator=_gen(200)) / math.sqrt(RISK_FEATURES)
    rate = torch.exp(0.7 * x @ w - 0.5)
    exposure = 0.1 + 0.9 * torch.rand(n, generator=g)
    claims = torch.poisson(rate * exposure, generator=g)
    return x, exposure, claims, rate
