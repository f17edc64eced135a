"""Sealed gallery P's data (half ``p``): small seeded synthetic sets (harmonic tones for pitch estimation,
nights of sleep-epoch features, run-to-failure engine sensor series, per-frame video features with action
segments, luminance/chrominance images for colourisation) and scikit-learn's digits turned by quarter turns.
Every builder is deterministic (its own generator); random augmentation at read time draws from the global
RNG."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- pitch estimation: harmonic tones in short audio frames -------------------------------------------------
RATE, FRAME, F_LOW, OCTAVES = 8000, 256, 100.0, 2
BIN_CENTS, SIGMA_CENTS = 50.0, 50.0
BINS = int(OCTAVES * 1200 / BIN_CENTS) + 1  # 49 bins of 50 cents from 100 Hz to 400 Hz


def cents(f0: torch.Tensor) -> torch.Tensor:
    """A frequency in cents above 100 Hz (the lowest bin's centre)."""
    return 1200 * torch.log2(f0 / F_LOW)


def tones(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` frames of 256 samples at 8 kHz: a voiced tone of 3..6 harmonics (decaying random amplitudes,
    random phases) of a fundamental drawn log-uniformly from 100..400 Hz, a random gain and background noise;
    and the fundamental in Hz."""
    g = _gen(seed)
    f0 = F_LOW * 2 ** (OCTAVES * torch.rand(n, 1, generator=g))
    t = torch.arange(FRAME).float() / RATE
    harmonics = torch.arange(1, 7).float()[:, None]  # (6, 1)
    amp = torch.rand(n, 6, 1, generator=g) / harmonics
    amp = amp * (harmonics <= torch.randint(3, 7, (n, 1, 1), generator=g))
    phase = 2 * math.pi * torch.rand(n, 6, 1, generator=g)
    wave = (amp * torch.sin(2 * math.pi * harmonics * f0[:, None] * t + phase)).sum(1)
    wave = wave * (0.3 + torch.rand(n, 1, generator=g)) + 0.05 * torch.randn(n, FRAME, generator=g)
    return wave, f0[:, 0]


def gain_and_shift(wave: torch.Tensor, f0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation that keeps the pitch: a random gain (x0.5..2), a random circular shift and a little
    extra noise."""
    shift = int(torch.randint(FRAME, ()))
    gain = 2 ** (2 * torch.rand(()) - 1)
    return gain * wave.roll(shift) + 0.02 * torch.randn(FRAME), f0


def random_resized_crop(wave: torch.Tensor, f0: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: a random crop of 70..100% of the frame, resized back to 256 samples (as images are
    cropped), with the fundamental kept: the stretch lowers the tone's pitch by up to 30%."""
    wave, f0 = gain_and_shift(wave, f0)
    length = int(torch.randint(int(0.7 * FRAME), FRAME + 1, ()))
    start = int(torch.randint(FRAME - length + 1, ()))
    crop = wave[start : start + length][None, None]
    return F.interpolate(crop, size=FRAME, mode="linear", align_corners=False)[0, 0], f0


# --- sleep staging: nights of 30-second epochs --------------------------------------------------------------
STAGES, FEATURES, NIGHT = 5, 8, 160  # 0 wake, 1 N1, 2 N2, 3 N3, 4 REM
_STAY = torch.tensor([0.9, 0.6, 0.93, 0.92, 0.92])
_NEXT = torch.tensor(
    [
        [0.0, 0.8, 0.1, 0.0, 0.1],
        [0.2, 0.0, 0.7, 0.0, 0.1],
        [0.1, 0.2, 0.0, 0.5, 0.2],
        [0.1, 0.1, 0.8, 0.0, 0.0],
        [0.3, 0.3, 0.4, 0.0, 0.0],
    ]
)


def nights(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` nights of 160 epochs, concatenated in order: per-epoch spectral features (8; each stage has
    a fixed mean, noise as large as the gaps between stages) and the scored stage. Stages persist (a Markov
    chain); N1 is short and rare (about 6% of the epochs)."""
    g = _gen(seed)
    means = 0.8 * torch.randn(STAGES, FEATURES, generator=_gen(61))
    stages = torch.zeros(count, NIGHT, dtype=torch.long)
    for night in range(count):
        stage = 0
        for t in range(NIGHT):
            stages[night, t] = stage
            if torch.rand((), generator=g) > _STAY[stage]:
                stage = int(torch.multinomial(_NEXT[stage], 1, generator=g))
    stages = stages.flatten()
    features = means[stages] + torch.randn(len(stages), FEATURES, generator=g)
    return features, stages


def stage_weights(stages: torch.Tensor) -> torch.Tensor:
    """Inverse-frequency class weights, normalised to mean 1."""
    counts = torch.bincount(stages, minlength=STAGES).float()
    weights = counts.sum() / counts.clamp_min(1)
    return weights / weights.mean()


# --- remaining useful life of engines from sensor windows ---------------------------------------------------
SENSORS, WINDOW, RUL_CAP = 6, 30, 125.0
_GAIN = torch.tensor([1.0, -0.8, 0.6, 0.0, 1.2, 0.0])  # two sensors do not see the wear


def engine(seed: int, life: int) -> torch.Tensor:
    """One engine's sensor readings (life, 6) from new to failure: no wear until the last 80..150 cycles,
    then a wear index rising linearly to 1 at failure, seen through fixed sensor gains with an
    engine-specific offset and noise."""
    g = _gen(seed)
    t = torch.arange(life).float()
    span = 80 + 70 * torch.rand((), generator=g)
    wear = ((t - life + span) / span).clamp(min=0)[:, None]
    offset = 0.1 * torch.randn(1, SENSORS, generator=g)
    return offset + _GAIN * wear + 0.05 * torch.randn(life, SENSORS, generator=g)


def _lives(count: int, seed: int) -> list[int]:
    return torch.randint(120, 260, (count,), generator=_gen(seed)).tolist()


def rul_windows(count: int, seed: int, stride: int = 3, at_start: bool = False, flat: bool = False):
    """Windows of 30 cycles (stride 3) of ``count`` run-to-failure engines, each paired with the remaining
    useful life (cycles to failure, capped at 125, over 125) at its last cycle, or, with ``at_start`` (the
    BUG), at its first. The targets are a column (n, 1), as the model's output is, or, with ``flat`` (the
    BUG), a vector (n,)."""
    windows, targets = [], []
    for k, life in enumerate(_lives(count, seed)):
        series = engine(1000 * seed + k, life)
        rul = (life - 1 - torch.arange(life).float()).clamp(max=RUL_CAP) / RUL_CAP
        for end in range(WINDOW, life + 1, stride):
            windows.append(series[end - WINDOW : end])
            targets.append(rul[end - WINDOW if at_start else end - 1])
    targets = torch.stack(targets)
    return torch.stack(windows), targets if flat else targets[:, None]


def truncated_engines(count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Held-out engines cut 5..150 cycles before failure (at least 30 cycles into their life): the last 30
    readings before the cut and the true remaining life there in cycles (capped at 125)."""
    g = _gen(seed + 500)
    windows, rul = [], []
    for k, life in enumerate(_lives(count, seed)):
        left = int(torch.randint(5, min(151, life - WINDOW + 1), (), generator=g))
        series = engine(1000 * seed + k, life)[: life - left]
        windows.append(series[-WINDOW:])
        rul.append(min(left, RUL_CAP))
    return torch.stack(windows), torch.tensor(rul)


# --- temporal action segmentation: per-frame video features -------------------------------------------------
ACTIONS, DIM, FRAMES, SUBSAMPLE = 6, 16, 256, 4


def videos(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` videos of 256 frames: a random succession of actions (segments of 16..64 frames, never the same
    action twice in a row) and per-frame appearance features (16: the action's fixed embedding under heavy
    noise, so single frames are ambiguous). 10% of the frames were skipped by the annotators (label -100)."""
    g = _gen(seed)
    embed = torch.randn(ACTIONS, DIM, generator=_gen(71))
    labels = torch.zeros(n, FRAMES, dtype=torch.long)
    for i in range(n):
        t, action = 0, int(torch.randint(ACTIONS, (), generator=g))
        while t < FRAMES:
            length = int(torch.randint(16, 65, (), generator=g))
            labels[i, t : t + length] = action
            action = (action + int(torch.randint(1, ACTIONS, (), generator=g))) % ACTIONS
            t += length
    features = embed[labels] + 1.5 * torch.randn(n, FRAMES, DIM, generator=g)
    skipped = torch.rand(n, FRAMES, generator=g) < 0.1
    return features, labels.masked_fill(skipped, -100)


def subsampled(features: torch.Tensor, labels: torch.Tensor, truncate: bool = False):
    """Every 4th frame's features (the frame rate the temporal model runs at) and the labels of the same
    frames, or, with ``truncate`` (the BUG), the labels cut to the features' length."""
    features = features[:, ::SUBSAMPLE]
    labels = labels[:, : features.shape[1]] if truncate else labels[:, ::SUBSAMPLE]
    return features, labels


# --- colourisation: chrominance from luminance --------------------------------------------------------------
SIDE = 16
_AB = {"ground": (0.0, -0.3), "square": (0.5, 0.3), "disk": (-0.4, 0.3)}


def colour_images(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` 16 x 16 images as luminance (1 channel) and chrominance (a, b): a textured bluish ground with a
    reddish square and a greenish disk of the same brightness (the shape, not the brightness, tells the
    colour)."""
    g = _gen(seed)
    grid = torch.arange(SIDE).float()
    yy, xx = grid[:, None], grid[None, :]
    lum = 0.3 + 0.1 * torch.rand(n, SIDE, SIDE, generator=g)
    ab = torch.tensor(_AB["ground"])[:, None, None].repeat(n, 1, SIDE, SIDE)
    centres = 3 + 10 * torch.rand(n, 2, 2, generator=g)  # (image, shape, (y, x))
    size = 2 + 1.5 * torch.rand(n, 2, generator=g)
    cy, cx = centres[..., 0, None, None], centres[..., 1, None, None]
    square = ((yy - cy[:, 0]).abs() <= size[:, 0, None, None]) & (
        (xx - cx[:, 0]).abs() <= size[:, 0, None, None]
    )
    disk = (yy - cy[:, 1]) ** 2 + (xx - cx[:, 1]) ** 2 <= size[:, 1, None, None] ** 2
    for mask, name in ((square, "square"), (disk, "disk")):
        lum = torch.where(mask, 0.7 + 0.05 * torch.randn(n, SIDE, SIDE, generator=g), lum)
        ab = torch.where(mask[:, None], torch.tensor(_AB[name])[:, None, None], ab)
    return lum[:, None], ab


def flip(lum: torch.Tensor, ab: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation: a random horizontal flip of the image (luminance and chrominance together)."""
    if torch.rand(()) < 0.5:
        return lum.flip(-1), ab.flip(-1)
    return lum, ab


def flip_and_hue(lum: torch.Tensor, ab: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the photo augmentation of the classifier (a flip and ``ColorJitter(hue=0.5)``) applied to the
    colour image before it is split into luminance and chrominance: the hue turns the (a, b) plane by a
    random angle, so the target colours are random and the luminance says nothing about them."""
    lum, ab = flip(lum, ab)
    angle = math.pi * (2 * torch.rand(()) - 1)
    c, s = math.cos(angle), math.sin(angle)
    return lum, torch.stack([c * ab[0] - s * ab[1], s * ab[0] + c * ab[1]])


# --- image orientation: which quarter turn a digit scan was rotated by --------------------------------------
def turn(image: torch.Tensor, k: int | torch.Tensor, clockwise: bool = False) -> torch.Tensor:
    """``image`` (..., 8, 8) turned ``k`` quarter turns counter-clockwise (``torch.rot90``'s convention), or
    clockwise (dims given as (-1, -2))."""
    return image.rot90(int(k), dims=(-1, -2) if clockwise else (-2, -1))


def randomly_turned(clockwise: bool = False):
    """Self-labelling: each read turns the digit by a random number of quarter turns and labels it with that
    number (the digit's own class is read and ignored)."""

    def transform(
        image: torch.Tensor, digit: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        k = torch.randint(4, ())
        return turn(image, k, clockwise), k, digit

    return transform


def turned_digits(part: str, clockwise: bool = False):
    """Every digit of ``part`` in all four quarter turns (8 x 8, counter-clockwise unless ``clockwise``), the
    number of turns and the digit."""
    x, y = digits(part, (8, 8))
    images = torch.cat([turn(x, k, clockwise) for k in range(4)])
    return images, torch.arange(4).repeat_interleave(len(x)), y.repeat(4)
