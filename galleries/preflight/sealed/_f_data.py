"""Sealed gallery F's data: small seeded synthetic sets (tones, series chunks, subjects' sensor rows, strings
with motifs, 2-D fields, heteroscedastic curves, preference pairs, rare events) and scikit-learn's digits
(placed on a canvas for detection, fused with a side code, decoded from their class). Every builder is
deterministic (its own generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.utils.data import Sampler

from galleries.preflight.sealed._d_data import digits, loaders
from galleries.preflight.sealed._e_data import Records, Rows

__all__ = ["Records", "Rows", "digits", "loaders"]

SEEDS = {"train": 1, "val": 2, "test": 3}


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# --- detection: a digit placed on a 16x16 canvas ------------------------------------------------------------
CANVAS = 16


def canvases(part: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Digits of ``part`` pasted at a random (row, column) offset in 0..8 on a blank 16x16 canvas: (flat
    canvas, class, offset / 8)."""
    x, y = digits(part)
    offset = torch.randint(0, 9, (len(y), 2), generator=_gen(SEEDS[part]))
    canvas = torch.zeros(len(y), CANVAS, CANVAS)
    for i, (r, c) in enumerate(offset.tolist()):
        canvas[i, r : r + 8, c : c + 8] = x[i].view(8, 8)
    return canvas.flatten(1), y, offset.float() / 8


def shift_canvas(image: torch.Tensor, label: torch.Tensor, box: torch.Tensor, move_box: bool = True):
    """A random translation by up to 2 pixels that keeps the digit on the canvas; the box moves with it
    unless ``move_box`` is off (the BUG)."""
    offset = (box * 8).round().long()
    step = torch.stack([torch.randint(max(-2, -o), min(2, 8 - o) + 1, ()) for o in offset.tolist()])
    image = image.view(CANVAS, CANVAS).roll(step.tolist(), (0, 1)).flatten()
    return image, label, (offset + step).float() / 8 if move_box else box


def snap_to_anchors(image: torch.Tensor, label: torch.Tensor, box: torch.Tensor):
    """BUG (a target encoder): assigns each box to the nearest of three anchors (offsets 0, 4 and 8) and
    keeps the anchor but drops the residual, so the box targets are off by up to 2 pixels."""
    return image, label, (box * 2).round() / 2


# --- audio-like tones ---------------------------------------------------------------------------------------
FREQUENCIES, LENGTH = (3, 5, 7, 9, 11), 64


def tones(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` clips of 64 samples: a sine of the class's frequency (cycles per clip), random phase and gain, in
    white noise of a per-clip level in 0.2..2 (the clip's difficulty): (clip, class, noise level)."""
    g = _gen(seed)
    label = torch.randint(len(FREQUENCIES), (n,), generator=g)
    phase, gain = 2 * math.pi * torch.rand(n, 1, generator=g), 0.5 + torch.rand(n, 1, generator=g)
    noise = 0.2 + 1.8 * torch.rand(n, generator=g)
    t = torch.arange(LENGTH) / LENGTH
    frequency = torch.tensor(FREQUENCIES, dtype=torch.float)[label, None]
    clip = gain * torch.sin(2 * math.pi * frequency * t + phase) + noise[:, None] * torch.randn(
        n, LENGTH, generator=g
    )
    return clip, label, noise


def roll_and_gain(clip: torch.Tensor, label: torch.Tensor, *rest):
    """Label-preserving: a random circular shift in time and a random gain in 0.5..1.5."""
    return (clip.roll(int(torch.randint(LENGTH, ()))) * (0.5 + torch.rand(())), label)


def time_stretch(clip: torch.Tensor, label: torch.Tensor, *rest):
    """BUG (as augmentation): reads the clip at a random speed in 0.6..1.4, which scales its frequency across
    the class boundaries while the label stays."""
    rate = 0.6 + 0.8 * torch.rand(())
    return clip[(torch.arange(LENGTH) * rate).long() % LENGTH], label


class Curriculum(Sampler):
    """Easiest clips first: each epoch draws ``len(difficulty)`` indices from the easiest fraction, which
    grows from ``start`` to 1 over ``epochs`` (Lightning calls ``set_epoch``). With ``integer_division`` (the
    BUG) the growth is ``epoch // (epochs - 1)``: 0 until the last planned epoch."""

    def __init__(self, difficulty: torch.Tensor, epochs: int = 8, start: float = 0.1, integer_division=False):
        self.order, self.epochs, self.start = difficulty.argsort(), epochs, start
        self.integer_division, self.epoch = integer_division, 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self):
        progress = (
            self.epoch // (self.epochs - 1) if self.integer_division else self.epoch / (self.epochs - 1)
        )
        pool = self.order[
            : max(32, int(len(self.order) * min(1.0, self.start + (1 - self.start) * progress)))
        ]
        return iter(pool[torch.randint(len(pool), (len(self.order),))].tolist())


# --- series chunks for forecasting-based anomaly detection --------------------------------------------------
WINDOW = 16


def series_chunks(n: int, seed: int, anomalies: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` chunks of 17 steps of two sines of random periods (8..16 and 3..5 steps) in faint noise; the
    task: forecast step 17 from the first 16. With ``anomalies``, half the chunks get a spike of 0.6..1.5
    (either sign) on their last step: (chunk, is_anomaly)."""
    g = _gen(seed)
    t = torch.arange(WINDOW + 1).float()
    p1, p2 = 8 + 8 * torch.rand(n, 1, generator=g), 3 + 2 * torch.rand(n, 1, generator=g)
    f1, f2 = (2 * math.pi * torch.rand(n, 1, generator=g) for _ in range(2))
    chunk = torch.sin(2 * math.pi * t / p1 + f1) + 0.4 * torch.sin(2 * math.pi * t / p2 + f2)
    chunk = chunk + 0.05 * torch.randn(n, WINDOW + 1, generator=g)
    flag = (torch.rand(n, generator=g) < 0.5) & anomalies
    sign = torch.randint(2, (n,), generator=g) * 2 - 1
    chunk[:, -1] += flag * sign * (0.6 + 0.9 * torch.rand(n, generator=g))
    return chunk, flag.float()


def sliding_chunks(series: int, length: int, seed: int) -> torch.Tensor:
    """Overlapping chunks (stride 1) of a few long series, in their time order: dependent rows by design."""
    g = _gen(seed)
    t = torch.arange(length + WINDOW).float()
    p1, p2 = 8 + 8 * torch.rand(series, 1, generator=g), 3 + 2 * torch.rand(series, 1, generator=g)
    wave = torch.sin(2 * math.pi * t / p1) + 0.4 * torch.sin(2 * math.pi * t / p2)
    wave = wave + 0.05 * torch.randn(wave.shape, generator=g)
    return wave.unfold(1, WINDOW + 1, 1).reshape(-1, WINDOW + 1)


# --- digits fused with a side code --------------------------------------------------------------------------
SIDE = 2


def fused_digits(part: str) -> dict[str, torch.Tensor]:
    """Dict rows: a digit image, a one-hot side code k (0 or 1, the scanner) and the label, digit + 10 k (it
    needs both inputs), plus a ``row_id`` (metadata)."""
    x, y = digits(part)
    k = torch.randint(SIDE, (len(y),), generator=_gen(SEEDS[part] + 10))
    side = F.one_hot(k, SIDE).float()
    return {"image": x, "side": side, "target": y + 10 * k, "row_id": torch.arange(len(y))}


# --- subjects' sensor rows ----------------------------------------------------------------------------------
def subject_rows(subjects: int, seed: int, per_subject: int = 20) -> tuple[torch.Tensor, ...]:
    """Rows of (a device fingerprint of the subject + noise, 8 features) and a target: a linear function of
    the features plus the subject's own offset (unknowable for a new subject): (inputs, target, subject)."""
    g = _gen(seed)
    w = torch.randn(8, generator=_gen(81)) / math.sqrt(8)
    fingerprint, offset = torch.randn(subjects, 8, generator=g), torch.randn(subjects, generator=g)
    subject = torch.arange(subjects).repeat_interleave(per_subject)
    features = torch.randn(len(subject), 8, generator=g)
    device = fingerprint[subject] + 0.1 * torch.randn(len(subject), 8, generator=g)
    y = 2 * features @ w + offset[subject] + 0.1 * torch.randn(len(subject), generator=g)
    return torch.cat([device, features], 1), y, subject


def subject_split(by_subject: bool) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """60 subjects split 80/20 into training and validation rows, by subject or (the BUG) by row."""
    x, y, subject = subject_rows(60, 1)
    key = subject if by_subject else torch.arange(len(y))
    val = torch.randperm(int(key.max()) + 1, generator=_gen(5))[: (int(key.max()) + 1) // 5]
    is_val = torch.isin(key, val)
    return (x[~is_val], y[~is_val]), (x[is_val], y[is_val])


# --- strings with motifs ------------------------------------------------------------------------------------
CHARS, MAX_LEN = 8, 24
MOTIFS = ((7, 8, 7), (8, 7, 8), (7, 7, 8), (8, 8, 7))  # the same letter counts in pairs: order decides


def motif_strings(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` strings of 10..24 letters (codes 1..6, 0 pads on the right) with one of four 3-letter motifs
    (letters 7 and 8) planted at a random place: (codes, which motif)."""
    g = _gen(seed)
    label = torch.randint(len(MOTIFS), (n,), generator=g)
    length = torch.randint(10, MAX_LEN + 1, (n,), generator=g)
    codes = torch.randint(1, 7, (n, MAX_LEN), generator=g)
    codes[torch.arange(MAX_LEN) >= length[:, None]] = 0
    start = (torch.rand(n, generator=g) * (length - 2)).long()
    motif = torch.tensor(MOTIFS)[label]
    for j in range(3):
        codes[torch.arange(n), start + j] = motif[:, j]
    return codes, label


# --- 2-D fields, heteroscedastic curves, sensor rows --------------------------------------------------------
def field(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A smooth field on [-1, 1]^2 at ``n`` random coordinates: (x, y) -> sin(2x) cos(y) + xy."""
    xy = 2 * torch.rand(n, 2, generator=_gen(seed)) - 1
    x, y = xy.unbind(-1)
    return xy, torch.sin(2 * x) * torch.cos(y) + x * y


def noisy_curve(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """y = sin(2x) + (0.1 + 0.4|x|) noise on x in [-2, 2]: the noise grows away from 0."""
    g = _gen(seed)
    x = 4 * torch.rand(n, 1, generator=g) - 2
    return x, (torch.sin(2 * x) + (0.1 + 0.4 * x.abs()) * torch.randn(n, 1, generator=g)).squeeze(-1)


def sensor_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Six raw sensor readings on scales of 1..300 around offsets of 50: the target is a smooth function of
    the standardised readings."""
    g = _gen(seed)
    z = torch.randn(n, 6, generator=g)
    scale = torch.tensor([1.0, 3, 10, 30, 100, 300])
    y = z[:, 0] * z[:, 1] + torch.sin(2 * z[:, 2]) + z[:, 3] - 0.5 * z[:, 4] ** 2 + 0.5 * z[:, 5]
    return 50 + scale * z, y


# --- preference pairs and rare events -----------------------------------------------------------------------
def utility(items: torch.Tensor) -> torch.Tensor:
    w = torch.randn(8, generator=_gen(91))
    return items @ w / math.sqrt(8) + 0.5 * torch.sin(2 * items[..., 0])


def preference_pairs(n: int, seed: int, chosen_first: bool = False) -> tuple[torch.Tensor, ...]:
    """``n`` pairs of 8-feature items judged by a noisy annotator: (a, b, winner) with winner 0 when a won and
    1 when b did; with ``chosen_first``, (chosen, rejected, 1.0) instead: a constant target by design."""
    g = _gen(seed)
    a, b = torch.randn(n, 8, generator=g), torch.randn(n, 8, generator=g)
    b_won = utility(b) - utility(a) + 0.3 * torch.randn(n, generator=g) > 0
    if chosen_first:
        chosen, rejected = torch.where(b_won[:, None], b, a), torch.where(b_won[:, None], a, b)
        return chosen, rejected, torch.ones(n)
    return a, b, b_won.float()


def rare_events(n: int, seed: int, rate: float = 0.03) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` rows of 8 features; about 3% are events, shifted by 1.2 along a fixed direction."""
    g = _gen(seed)
    label = (torch.rand(n, generator=g) < rate).float()
    direction = torch.randn(8, generator=_gen(92))
    return torch.randn(n, 8, generator=g) + 1.2 * label[:, None] * direction / direction.norm() * 2, label
