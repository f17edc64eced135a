"""Sealed gallery N's data: small seeded synthetic sets (molecular fingerprints with sparsely measured assays,
multichannel sensor series with gaps, before/after image pairs with new buildings, hand-landmark gesture
sequences, household mains power with one appliance to disaggregate) and scikit-learn's digits with noisy
labels. Every builder is deterministic (its own generator); random augmentation at read time draws from the
global RNG."""

from __future__ import annotations

import torch

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- molecular property prediction: 6 assays, most outcomes never measured ----------------------------------
BITS, ASSAYS, MEASURED = 64, 6, 0.35


def molecules(n: int, seed: int, measured: float = MEASURED) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` molecules as 64 fingerprint bits (each set with probability .2) and the outcomes of 6 assays
    (1 active, 0 inactive) drawn from a fixed sparse structure-activity rule; each outcome is measured with
    probability ``measured`` and NaN where it was not."""
    g = _gen(seed)
    rule = torch.randn(BITS, ASSAYS, generator=_gen(81)) * (
        torch.rand(BITS, ASSAYS, generator=_gen(82)) < 0.3
    )
    x = (torch.rand(n, BITS, generator=g) < 0.2).float()
    logit = 1.5 * (x @ rule)
    y = torch.bernoulli(torch.sigmoid(logit - logit.mean(0)), generator=g)
    y[torch.rand(n, ASSAYS, generator=g) > measured] = float("nan")
    return x, y


# --- multichannel sensor series with gaps (imputation) ------------------------------------------------------
CHANNELS, LENGTH, GAPS, HIDE = 8, 24, 0.1, 0.25


def sensor_series(n: int, seed: int) -> tuple[torch.Tensor]:
    """``n`` series of 24 steps x 8 channels: two latent oscillations (random frequency and phase) mixed into
    the channels by a fixed matrix, plus noise; 10% of the readings are missing (NaN)."""
    g = _gen(seed)
    mix = torch.randn(CHANNELS, 2, generator=_gen(91))
    t = torch.arange(LENGTH).float()
    freq = 0.2 + 0.4 * torch.rand(n, 1, 2, generator=g)
    phase = 6.3 * torch.rand(n, 1, 2, generator=g)
    latent = torch.sin(freq * t[:, None] + phase)  # (n, length, 2)
    series = latent @ mix.T + 0.1 * torch.randn(n, LENGTH, CHANNELS, generator=g)
    series[torch.rand(n, LENGTH, CHANNELS, generator=g) < GAPS] = float("nan")
    return (series,)


def hide_some(series: torch.Tensor, hidden: torch.Tensor | None = None):
    """Self-supervised imputation: a quarter of the observed readings are hidden from the model (a fresh draw
    per read unless ``hidden`` is given). Returns (inputs with every unseen reading zeroed, the visible mask,
    the series with its gaps zeroed, the hidden mask)."""
    observed = ~series.isnan()
    if hidden is None:
        hidden = observed & (torch.rand(series.shape) < HIDE)
    visible = observed & ~hidden
    target = series.nan_to_num(0.0)
    return torch.where(visible, target, 0.0), visible.float(), target, hidden.float()


def held_out_series(n: int, seed: int):
    """Held-out series with a fixed quarter of their observed readings hidden, as :func:`hide_some`
    returns."""
    (series,) = sensor_series(n, seed)
    hidden = ~series.isnan() & (torch.rand(series.shape, generator=_gen(seed + 700)) < HIDE)
    return hide_some(series, hidden)


# --- bitemporal change detection: new buildings between two images ------------------------------------------
SIDE = 16


def _rectangles(n: int, count: int, g: torch.Generator) -> torch.Tensor:
    """``count`` random filled rectangles (2..4 pixels a side) per image, (n, side, side) booleans."""
    grid = torch.arange(SIDE)
    canvas = torch.zeros(n, SIDE, SIDE, dtype=torch.bool)
    for _ in range(count):
        h, w = torch.randint(2, 5, (2, n, 1), generator=g)
        top = (torch.rand(n, 1, generator=g) * (SIDE - h + 1)).long()
        left = (torch.rand(n, 1, generator=g) * (SIDE - w + 1)).long()
        rows = (grid >= top) & (grid < top + h)
        cols = (grid >= left) & (grid < left + w)
        canvas |= rows[:, :, None] & cols[:, None, :]
    return canvas


def image_pairs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` pairs of 16 x 16 aerial-like images (before, after) and the change mask: the before image holds
    4 buildings (bright rectangles) on a textured ground; the after image holds the same buildings plus 0..2
    new ones, under a different overall brightness, with fresh sensor noise. The mask marks the new
    buildings' pixels."""
    g = _gen(seed)
    old = _rectangles(n, 4, g)
    new = _rectangles(n, 2, g) & (torch.rand(n, 1, 1, generator=g) < 0.8) & ~old
    ground = 0.3 * torch.randn(n, SIDE // 4, SIDE // 4, generator=g)
    ground = ground.repeat_interleave(4, 1).repeat_interleave(4, 2)
    before = ground + old + 0.15 * torch.randn(n, SIDE, SIDE, generator=g)
    brightness = 0.3 * torch.randn(n, 1, 1, generator=g)
    after = ground + brightness + (old | new) + 0.15 * torch.randn(n, SIDE, SIDE, generator=g)
    return before[:, None], after[:, None], new[:, None].float()


def flip_pair(before, after, mask):
    """Augmentation: one random horizontal and one random vertical flip, applied to the whole pair and its
    mask (a fresh draw per read)."""
    dims = [d for d in (-1, -2) if torch.rand(()) < 0.5]
    return before.flip(dims), after.flip(dims), mask.flip(dims)


def _random_flip(image: torch.Tensor) -> torch.Tensor:
    dims = [d for d in (-1, -2) if torch.rand(()) < 0.5]
    return image.flip(dims)


def flip_each(before, after, mask):
    """The BUG: the flip helper written for single images is mapped over the pair and its mask, so each of
    the three draws its own flips."""
    return _random_flip(before), _random_flip(after), _random_flip(mask)


# --- gesture recognition from hand landmarks ----------------------------------------------------------------
FRAMES, POINTS, GESTURES = 16, 5, 5  # 0 swipe left, 1 swipe right, 2 swipe up, 3 swipe down, 4 pinch
SWAP = torch.tensor([1, 0, 2, 3, 4])  # a gesture's label in a mirror
_HAND = torch.tensor([[0.0, 0.0], [-0.25, 0.3], [-0.08, 0.42], [0.08, 0.42], [0.22, 0.3]])  # a right hand


def gestures(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` sequences of 16 frames of 5 hand landmarks (wrist and 4 fingertips, x and y: 10 features) and
    the gesture. Swipes move the hand .08 a frame from a random start; a pinch closes the fingers on the
    wrist. A third of the users are left-handed (their hands are mirror images)."""
    g = _gen(seed)
    label = torch.randint(GESTURES, (n,), generator=g)
    direction = torch.tensor([[-1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.0, -1.0], [0.0, 0.0]])[label]
    t = torch.arange(FRAMES).float()[None, :, None]
    wrist = 1.5 * torch.randn(n, 1, 2, generator=g) + 0.08 * direction[:, None] * t
    spread = torch.where(label[:, None] == 4, 1 - 0.04 * t[..., 0], 1.0)  # (n, frames)
    hand = _HAND * (0.8 + 0.4 * torch.rand(n, 1, 1, generator=g))
    left_handed = torch.rand(n, generator=g) < 1 / 3
    hand[left_handed, :, 0] *= -1
    points = wrist[:, :, None] + spread[..., None, None] * hand[:, None]  # (n, frames, points, 2)
    points = points + 0.03 * torch.randn(points.shape, generator=g)
    return points.flatten(2), label


def mirror(points: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation: half the reads are mirrored left to right (as a user of the other hand would make the
    gesture), and a swipe left becomes a swipe right."""
    if torch.rand(()) < 0.5:
        return _mirrored(points), SWAP[label]
    return points, label


def _mirrored(points: torch.Tensor) -> torch.Tensor:
    flipped = points.clone()
    flipped[..., 0::2] *= -1
    return flipped


def mirror_points_only(points: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the mirror flips the landmarks and keeps the label (as for a left or right hand)."""
    if torch.rand(()) < 0.5:
        return _mirrored(points), label
    return points, label


# --- energy disaggregation (seq2point): a heater's power from the house's mains -----------------------------
WINDOW, MAINS_SCALE = 33, 2.5


def house(steps: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``steps`` readings of a house's mains power and of its heater's: the heater runs 10..40 steps at 2 kW
    and rests 30..120; a kettle boils for 3..6 steps at 2.2 kW now and then, a fridge cycles at .4 kW, and
    the base load drifts."""
    g = _gen(seed)

    def bursts(on: tuple[int, int], off: tuple[int, int], power: float) -> torch.Tensor:
        trace = torch.zeros(steps)
        t = int(torch.randint(off[0], off[1], (), generator=g))
        while t < steps:
            length = int(torch.randint(on[0], on[1] + 1, (), generator=g))
            trace[t : t + length] = power
            t += length + int(torch.randint(off[0], off[1] + 1, (), generator=g))
        return trace

    heater = bursts((10, 40), (30, 120), 2.0)
    kettle = bursts((3, 6), (40, 200), 2.2)
    fridge = bursts((15, 25), (20, 30), 0.4)
    base = 0.2 + 0.1 * torch.randn(steps // 50 + 1, generator=g).repeat_interleave(50)[:steps]
    mains = heater + kettle + fridge + base + 0.05 * torch.randn(steps, generator=g)
    return mains, heater


def seq2point(
    mains: torch.Tensor, appliance: torch.Tensor, stride: int, offset: int = WINDOW // 2
) -> tuple[torch.Tensor, torch.Tensor]:
    """Windows of 33 mains readings (scaled) and the appliance's power ``offset`` steps into each window (the
    midpoint)."""
    windows = mains.unfold(0, WINDOW, stride) / MAINS_SCALE
    at = torch.arange(len(windows)) * stride + offset
    keep = at < len(appliance)
    return windows[keep], appliance[at[keep]][:, None]


# --- learning with noisy labels: digits, 40% of the labels flipped ------------------------------------------
NOISE = 0.4


def noisy_digits(part: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A part of the digits with 40% of its labels replaced by the next class (annotators confuse pairs of
    similar classes)."""
    x, y = digits(part)
    flip = torch.rand(len(y), generator=_gen(seed)) < NOISE
    return x, torch.where(flip, (y + 1) % 10, y)
