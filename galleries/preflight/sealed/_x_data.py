"""Sealed gallery X's data (half ``x``): small seeded synthetic sets (vibration windows of healthy and faulty
rolling bearings, clips of a blob moving across small frames, textured plates with round defects and their
masks, wrist PPG windows with a heart rate) and scikit-learn's digits, noisy (denoising) or in triplets
(metric learning). Every builder is deterministic (its own generator); random augmentation at read time
draws from the global RNG."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- image denoising: digits with additive Gaussian noise ---------------------------------------------------
SIGMA = 0.3


def noisy_digits(part: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``part``'s digits as (1, 8, 8) images with fixed Gaussian noise (sigma 0.3), and the clean ones."""
    clean, _ = digits(part, (1, 8, 8))
    return clean + SIGMA * torch.randn(clean.shape, generator=_gen(seed)), clean


def add_noise(clean: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh noisy copy of ``clean`` per read, paired with the clean image."""
    return clean + SIGMA * torch.randn_like(clean), clean


def add_noise_then_flip(clean: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh noisy copy per read, mirrored left-right half the time (the flip written on the input only)."""
    noisy = clean + SIGMA * torch.randn_like(clean)
    if torch.rand(()) < 0.5:
        noisy = noisy.flip(-1)
    return noisy, clean


def two_noisy_copies(clean: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Noise2Noise: two independent noisy copies of the same image (the clean one is never shown)."""
    return clean + SIGMA * torch.randn_like(clean), clean + SIGMA * torch.randn_like(clean)


def noisy_pairs(part: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Fixed pairs of independent noisy copies of the ``part``'s digits."""
    clean, _ = digits(part, (1, 8, 8))
    g = _gen(seed)
    return clean + SIGMA * torch.randn(clean.shape, generator=g), clean + SIGMA * torch.randn(
        clean.shape, generator=g
    )


# --- bearing fault diagnosis from vibration windows ---------------------------------------------------------
LENGTH, FAULTS = 256, 4
PERIODS = (0, 12, 19, 29)  # samples between impacts: none (healthy), inner race, ball, outer race


def vibrations(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` accelerometer windows of 256 samples: a shaft harmonic of random amplitude, white noise and, for
    a faulty bearing, a train of impacts (each a decaying ring of a random resonance) every 12, 19 or 29
    samples with a little jitter; and the class (0 healthy)."""
    g = _gen(seed)
    label = torch.randint(FAULTS, (n,), generator=g)
    t = torch.arange(LENGTH).float()
    shaft = torch.rand(n, 1, generator=g) * torch.sin(
        2 * math.pi * t / 64 + 2 * math.pi * torch.rand(n, 1, generator=g)
    )
    x = shaft + 0.4 * torch.randn(n, LENGTH, generator=g)
    ring = torch.arange(16).float()
    for i in range(n):
        period = PERIODS[int(label[i])]
        if not period:
            continue
        resonance = 0.2 + 0.15 * float(torch.rand((), generator=g))
        impact = torch.exp(-ring / 3) * torch.sin(2 * math.pi * resonance * ring)
        start = int(torch.randint(period, (), generator=g))
        for at in range(start, LENGTH, period):
            at = min(LENGTH - 1, max(0, at + int(torch.randint(-1, 2, (), generator=g))))
            end = min(LENGTH, at + len(ring))
            x[i, at:end] += 1.5 * impact[: end - at]
    return x[:, None], label


def circular_shift(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random circular shift in time (the impacts' rate, which tells the fault, is kept)."""
    return x.roll(int(torch.randint(LENGTH, ())), -1), label


# --- video frame interpolation: a blob moving across 16 x 16 frames -----------------------------------------
SIDE = 16


def clips(n: int, seed: int, frames: int = 4) -> torch.Tensor:
    """``n`` clips of ``frames`` 16 x 16 frames: a Gaussian blob (random width and brightness) moving at a
    constant random velocity, on a faint fixed random background; (n, frames, 16, 16)."""
    g = _gen(seed)
    start = 4 + 8 * torch.rand(n, 2, generator=g)
    velocity = 3 * torch.rand(n, 2, generator=g) - 1.5
    width = 1.0 + torch.rand(n, 1, 1, generator=g)
    bright = 0.5 + torch.rand(n, 1, 1, generator=g)
    background = 0.1 * torch.rand(n, 1, SIDE, SIDE, generator=g)
    ys, xs = torch.meshgrid(torch.arange(SIDE).float(), torch.arange(SIDE).float(), indexing="ij")
    out = []
    for f in range(frames):
        centre = start + (f - 1) * velocity
        d2 = (ys - centre[:, 0, None, None]) ** 2 + (xs - centre[:, 1, None, None]) ** 2
        out.append(bright * torch.exp(-d2 / (2 * width**2)))
    return torch.stack(out, 1) + background


def middle_frame(clip: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Frames 0 and 2 of a clip as two input channels; frame 1, between them, is the target."""
    return clip[0::2][:2], clip[1:2]


def middle_by_length(clip: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Frames 0 and 2 as inputs; the target indexed ``len(clip) // 2`` (the middle only of an odd clip)."""
    return clip[0::2][:2], clip[len(clip) // 2][None]


def middle_either_way(clip: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Frames 0 and 2 as inputs, in reverse order half the time (played backwards, the middle is the same)."""
    inputs, target = middle_frame(clip)
    return (inputs.flip(0) if torch.rand(()) < 0.5 else inputs), target


# --- defect segmentation on textured plates -----------------------------------------------------------------
def plates(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` plates drawn at 32 x 32: a smooth random texture, noise and 1..2 round defects (radius 3..7,
    brighter or darker); the image (1, 32, 32) and its binary mask (1, 32, 32)."""
    g = _gen(seed)
    texture = F.interpolate(torch.randn(n, 1, 8, 8, generator=g), size=32, mode="bilinear")
    image = 0.4 * texture + 0.2 * torch.randn(n, 1, 32, 32, generator=g)
    mask = torch.zeros(n, 1, 32, 32)
    ys, xs = torch.meshgrid(torch.arange(32).float(), torch.arange(32).float(), indexing="ij")
    for _ in range(2):
        centre = 6 + 20 * torch.rand(n, 2, generator=g)
        radius = 3 + 4 * torch.rand(n, generator=g)
        keep = (torch.rand(n, generator=g) < 0.6)[:, None, None]
        disc = ((ys - centre[:, 0, None, None]) ** 2 + (xs - centre[:, 1, None, None]) ** 2) < radius[
            :, None, None
        ] ** 2
        mask[:, 0] = torch.maximum(mask[:, 0], (disc & keep).float())
    sign = torch.where(torch.rand(n, 1, 1, 1, generator=g) < 0.5, -1.0, 1.0)
    return image + 0.9 * sign * mask, mask


def downsampled(image: torch.Tensor, mask: torch.Tensor, truncate: bool = False):
    """The plates at 16 x 16 (2 x 2 average pooling); the mask pooled too and thresholded at half (or cast
    to an integer with ``truncate``: only cells wholly inside a defect stay 1)."""
    pooled = F.avg_pool2d(mask, 2)
    small = pooled.long().float() if truncate else (pooled >= 0.5).float()
    return F.avg_pool2d(image, 2), small


def ignore_border(image: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The (16 x 16) mask with 2 ("don't care") on a defect's boundary cells (the pooled mask is neither 0
    nor 1 there)."""
    pooled = F.avg_pool2d(mask, 2)
    target = (pooled >= 0.5).float()
    target[(pooled > 0) & (pooled < 1)] = 2.0
    return F.avg_pool2d(image, 2), target


def turn_together(image: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random quarter turn, the same for the plate and its mask."""
    k = int(torch.randint(4, ()))
    return image.rot90(k, (-2, -1)), mask.rot90(k, (-2, -1))


def _random_turn(x: torch.Tensor) -> torch.Tensor:
    return x.rot90(int(torch.randint(4, ())), (-2, -1))


def turn_each(image: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random quarter turn applied as a per-tensor transform: plate and mask each draw their own."""
    return _random_turn(image), _random_turn(mask)


# --- heart rate from wrist PPG windows ----------------------------------------------------------------------
RATE, SECONDS = 25, 8
SAMPLES = RATE * SECONDS
HR_MEAN, HR_STD = 110.0, 40.0


def ppg(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` 8-second PPG windows at 25 Hz: a pulse of 45..180 bpm (fundamental and a weaker second
    harmonic, random phase), a strong breathing baseline of 0.15..0.45 Hz, a slow drift and noise; and the
    heart rate in bpm."""
    g = _gen(seed)
    bpm = 45 + 135 * torch.rand(n, 1, generator=g)
    t = torch.arange(SAMPLES).float() / RATE
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    pulse = torch.sin(2 * math.pi * bpm / 60 * t + phase) + 0.4 * torch.sin(
        4 * math.pi * bpm / 60 * t + 2 * phase
    )
    breath = 0.15 + 0.3 * torch.rand(n, 1, generator=g)
    baseline = 2 * torch.sin(2 * math.pi * breath * t + 6 * torch.rand(n, 1, generator=g))
    drift = torch.randn(n, 1, generator=g) * t / SECONDS
    wave = (0.3 + torch.rand(n, 1, generator=g)) * pulse + baseline + drift
    return wave + 0.5 * torch.randn(n, SAMPLES, generator=g), bpm[:, 0]


# --- metric learning on digits (triplets) -------------------------------------------------------------------
class Triplets(Dataset):
    """Digits as (anchor, positive, negative): a positive of the anchor's class and a negative of another,
    drawn on every read (or fixed with ``seed``)."""

    def __init__(self, part: str, seed: int | None = None) -> None:
        self.x, self.y = digits(part)
        self.by_class = [torch.nonzero(self.y == c)[:, 0] for c in range(10)]
        self.g = _gen(seed) if seed is not None else None
        self.fixed = [self.draw(i) for i in range(len(self.x))] if seed is not None else None

    def __len__(self) -> int:
        return len(self.x)

    def draw(self, i: int) -> tuple[int, int]:
        same = self.by_class[int(self.y[i])]
        positive = int(same[torch.randint(len(same), (), generator=self.g)])
        other = (int(self.y[i]) + 1 + int(torch.randint(9, (), generator=self.g))) % 10
        negatives = self.by_class[other]
        return positive, int(negatives[torch.randint(len(negatives), (), generator=self.g)])

    def __getitem__(self, i: int):
        positive, negative = self.fixed[i] if self.fixed else self.draw(i)
        return self.x[i], self.x[positive], self.x[negative]
