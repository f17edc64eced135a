"""Sealed gallery ZZ2's data (half ``zz2``): small seeded synthetic sets (a table of correlated columns with
entries missing at random, a confounded treatment with a known heterogeneous effect, 2-D tracks of
turning walkers, spectrograms of spoken keywords, states of a damped pendulum with a time step) and
scikit-learn's digits with square holes cut out. Every builder is deterministic (its own generator); random
masks and augmentation at read time draw from the global RNG."""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import cache

import torch
from torch.utils.data import Dataset

from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


class Rows(Dataset):
    """Rows of equally long tensors, read as a tuple (or as ``transform(*row)`` when one is given: the row's
    tensors are views into the stored ones, as plain indexing gives them)."""

    def __init__(self, *tensors: torch.Tensor, transform: Callable | None = None) -> None:
        self.tensors, self.transform = tensors, transform

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int):
        row = tuple(t[i] for t in self.tensors)
        return self.transform(*row) if self.transform else row


# --- missing-value imputation on a table of correlated columns ----------------------------------------------
COLUMNS, MISSING = 8, 0.3


def table(n: int, seed: int) -> torch.Tensor:
    """``n`` rows of 8 columns, each a fixed mix of 3 latent factors (one of them through a product), plus a
    little noise; every column has roughly zero mean and unit variance."""
    mix = torch.randn(3, COLUMNS, generator=_gen(1234))
    mix = mix / mix.norm(dim=0, keepdim=True)
    g = _gen(seed)
    z = torch.randn(n, 3, generator=g)
    x = z @ mix + 0.5 * torch.tanh(z[:, :1] * z[:, 1:2]) * mix[2] + 0.2 * torch.randn(n, COLUMNS, generator=g)
    return x / 1.1


def mask_out(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fresh random 30% of the row's entries hidden per read: (the row with them zeroed, the mask of the
    hidden ones, the whole row)."""
    mask = torch.rand(x.shape) < MISSING
    return x.masked_fill(mask, 0.0), mask.float(), x


def mask_out_unassigned(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """As :func:`mask_out`, written with a copy and the out-of-place ``masked_fill``, whose result is
    dropped."""
    mask = torch.rand(x.shape) < MISSING
    hidden = x.clone()
    hidden.masked_fill(mask, 0.0)
    return hidden, mask.float(), x


def mask_out_heavy(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A fresh random 10..60% of the row's entries hidden per read (at least one)."""
    mask = torch.rand(x.shape) < 0.1 + 0.5 * torch.rand(())
    mask[torch.randint(COLUMNS, ())] = True
    return x.masked_fill(mask, 0.0), mask.float(), x


def masked_table(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` rows with a fixed 30% of entries hidden: (zeroed rows, masks, whole rows)."""
    x = table(n, seed)
    mask = torch.rand(x.shape, generator=_gen(seed + 100)) < MISSING
    return x.masked_fill(mask, 0.0), mask.float(), x


# --- treatment-effect (uplift) estimation -------------------------------------------------------------------
FEATURES = 6


def effect(x: torch.Tensor) -> torch.Tensor:
    """The true effect of the treatment on the outcome of each row (heterogeneous, mean about 1)."""
    return 1.0 + torch.tanh(2 * x[:, 2]) + 0.5 * x[:, 3]


def uplift(n: int, seed: int, shift: float = 0.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` customers: 6 features, a treatment given more often to high ``x0`` (propensity sigmoid(0.8 x0 +
    ``shift``): confounded), and the outcome: a baseline of ``x0`` and ``x1``, the effect if treated, noise.
    Returns (features, treatment as 0./1., outcome)."""
    g = _gen(seed)
    x = torch.randn(n, FEATURES, generator=g)
    t = (torch.rand(n, generator=g) < torch.sigmoid(0.8 * x[:, 0] + shift)).float()
    base = x[:, 0] + 0.5 * x[:, 1] ** 2 - 0.5 + 0.5 * torch.sin(2 * x[:, 4])
    return x, t, base + t * effect(x) + 0.5 * torch.randn(n, generator=g)


def uplift_shuffled_apart(
    n: int, seed: int, shift: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """:func:`uplift`, with the rows shuffled before the split as ``x, y = x[perm], y[perm]``: the treatment
    column, kept in its own array, is left in the old order."""
    x, t, y = uplift(n, seed, shift)
    perm = torch.randperm(n, generator=_gen(seed + 50))
    x, y = x[perm], y[perm]
    return x, t, y


# --- trajectory prediction: 2-D tracks of walkers that turn and change speed --------------------------------
PAST, FUTURE = 8, 8


def tracks(n: int, seed: int) -> torch.Tensor:
    """``n`` tracks of 16 positions: a walker at a random place and heading, at 0.3..1 units a step, turning
    at a constant random rate (up to 0.2 rad a step) and speeding up or slowing down a little; positions
    observed with a small noise. (n, 16, 2)."""
    g = _gen(seed)
    steps = PAST + FUTURE
    start = 10 * torch.rand(n, 1, 2, generator=g) - 5
    heading = 2 * math.pi * torch.rand(n, 1, generator=g)
    turn = 0.4 * torch.rand(n, 1, generator=g) - 0.2
    speed = 0.3 + 0.7 * torch.rand(n, 1, generator=g)
    accel = 0.06 * torch.rand(n, 1, generator=g) - 0.03
    k = torch.arange(steps).float()
    angle = heading + turn * k
    length = speed * (1 + accel) ** k
    velocity = torch.stack([length * torch.cos(angle), length * torch.sin(angle)], -1)
    positions = start + torch.cumsum(velocity, 1) - velocity[:, :1]
    return positions + 0.02 * torch.randn(n, steps, 2, generator=g)


def split(track: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The 8 observed positions and the 8 to predict."""
    return track[:PAST], track[PAST:]


def split_overlapping(track: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The future sliced from ``PAST - 1``: it starts at the last observed position."""
    return track[:PAST], track[PAST - 1 : PAST - 1 + FUTURE]


def reversed_whole(track: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half the time the track is played backwards (a walker turning the other way), then split."""
    return split(track.flip(0) if torch.rand(()) < 0.5 else track)


def reversed_halves(track: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half the time the observed part and the future are each reversed in place after the split."""
    past, future = split(track)
    return (past.flip(0), future.flip(0)) if torch.rand(()) < 0.5 else (past, future)


def rotated_whole(track: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The whole track turned by a random angle about the origin and mirrored half the time, then split."""
    a = 2 * math.pi * float(torch.rand(()))
    turn = torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]])
    if torch.rand(()) < 0.5:
        turn = turn * torch.tensor([1.0, -1.0])
    return split(track @ turn.T)


def split_tracks(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` tracks split into (observed, future)."""
    t = tracks(n, seed)
    return t[:, :PAST].clone(), t[:, PAST:].clone()


# --- image inpainting: square holes in 8 x 8 digits ---------------------------------------------------------
def hole_mask(size: int, row: int, col: int) -> torch.Tensor:
    """A (1, 8, 8) mask with a ``size`` x ``size`` square of ones at (``row``, ``col``)."""
    mask = torch.zeros(1, 8, 8)
    mask[:, row : row + size, col : col + size] = 1.0
    return mask


def _random_hole(size: int | None = None, generator: torch.Generator | None = None) -> torch.Tensor:
    size = size or int(torch.randint(2, 6, (), generator=generator))
    row, col = (int(v) for v in torch.randint(1, 8 - size, (2,), generator=generator))
    return hole_mask(size, row, col)


def cut_hole(image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh 4 x 4 hole per read: (the holed image and the hole's mask as two channels, the whole image)."""
    mask = _random_hole(4)
    return torch.cat([image * (1 - mask), mask]), image


def cut_hole_in_place(image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh 4 x 4 hole per read, zeroed into the image in place (the stored digit is a view)."""
    mask = _random_hole(4)
    image[mask.bool()] = 0.0
    return torch.cat([image, mask]), image


def cut_hole_reseeded(image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A 4 x 4 hole drawn per read from a generator seeded afresh in the transform (for reproducible
    holes): every read of every digit gets the same hole."""
    mask = _random_hole(4, generator=_gen(0))
    return torch.cat([image * (1 - mask), mask]), image


def cut_any_hole(image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A fresh hole of 2 x 2 to 5 x 5 per read, anywhere inside the border row."""
    mask = _random_hole()
    return torch.cat([image * (1 - mask), mask]), image


def holed_digits(part: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``part``'s digits with a fixed 4 x 4 hole each: (holed image and mask, (n, 2, 8, 8); whole
    image)."""
    clean, _ = digits(part, (1, 8, 8))
    where = torch.randint(1, 4, (len(clean), 2), generator=_gen(seed))
    mask = torch.stack([hole_mask(4, int(r), int(c)) for r, c in where])
    return torch.cat([clean * (1 - mask), mask], 1), clean


# --- keyword spotting on spectrograms -----------------------------------------------------------------------
BINS, FRAMES = 24, 32
# each keyword: its syllables as (starting bin, bins per frame, frames)
KEYWORDS = (
    ((5, 0.5, 6), (14, 0.0, 5)),
    ((14, 0.0, 5), (5, 0.5, 6)),
    ((8, 0.0, 3), (8, 0.0, 3), (8, 0.0, 3)),
    ((12, 0.0, 3), (12, 0.0, 3), (12, 0.0, 3)),
    ((18, -0.8, 8),),
    ((8, 0.8, 8),),
)
CLASSES = len(KEYWORDS) + 1  # 0: "unknown" (other words)
UNKNOWN_SHARE = 0.5


def _syllable(spec, at, bin0, slope, frames, amp, bins):
    for f in range(frames):
        if at + f >= FRAMES:
            return
        centre = bin0 + slope * f
        spec[:, at + f] += amp * (
            torch.exp(-((bins - centre) ** 2) / 1.5) + 0.5 * torch.exp(-((bins - 2 * centre) ** 2) / 3.0)
        )


def spectrograms(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`make_spectrograms`, made once per (``n``, ``seed``) and copied."""
    spec, label = _spectrograms(n, seed)
    return spec.clone(), label.clone()


@cache
def _spectrograms(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    return make_spectrograms(n, seed)


def make_spectrograms(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` log-spectrogram-like (1, 24, 32) clips (frequency bins x frames): half are "unknown" (1..3
    random syllables), the rest one of 6 keywords, each a sequence of syllables (a band and its harmonic,
    flat or sweeping) said at a random time, a speaker's pitch (+-1.5 bins) and loudness, with a slight
    tempo change, in background noise; and the class (0 unknown)."""
    g = _gen(seed)
    label = torch.where(
        torch.rand(n, generator=g) < UNKNOWN_SHARE, 0, 1 + torch.randint(len(KEYWORDS), (n,), generator=g)
    )
    bins = torch.arange(BINS).float()
    spec = 0.35 * torch.randn(n, BINS, FRAMES, generator=g)

    def r() -> float:
        return float(torch.rand((), generator=g))

    for i in range(n):
        if label[i]:
            syllables = KEYWORDS[int(label[i]) - 1]
        else:
            syllables = tuple(
                (3 + 17 * r(), 1.6 * r() - 0.8 if r() < 0.5 else 0.0, 3 + int(6 * r()))
                for _ in range(1 + int(3 * r()))
            )
        pitch, amp = 3 * r() - 1.5, 0.8 + 0.6 * r()
        at = int(torch.randint(0, 8, (), generator=g))
        for bin0, slope, frames in syllables:
            _syllable(spec[i], at, bin0 + pitch, slope, frames, amp, bins)
            at += frames + 1 + int(2 * r())
    return spec[:, None], label


def time_shift(spec: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random circular shift of up to 6 frames in time."""
    return spec.roll(int(torch.randint(-6, 7, ())), dims=-1), label


def time_shift_on_frequency(spec: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same shift, rolled along ``dims=-2`` (copied from code whose clips were time x frequency)."""
    return spec.roll(int(torch.randint(-6, 7, ())), dims=-2), label


def spec_augment(spec: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """SpecAugment: up to 4 frequency bins and two bands of up to 5 frames blanked (set to 0), per read."""
    spec = spec.clone()
    width, start = int(torch.randint(0, 5, ())), int(torch.randint(0, BINS - 4, ()))
    spec[:, start : start + width] = 0.0
    for _ in range(2):
        width, start = int(torch.randint(0, 6, ())), int(torch.randint(0, FRAMES - 5, ()))
        spec[:, :, start : start + width] = 0.0
    return spec, label


def class_shares(label: torch.Tensor) -> torch.Tensor:
    """Each class's share of ``label``."""
    return torch.bincount(label, minlength=CLASSES).float() / len(label)


# --- one-step dynamics of a damped pendulum -----------------------------------------------------------------
W0SQ, DAMPING, DT = 4.0, 0.2, 0.1


def _rate(s: torch.Tensor) -> torch.Tensor:
    return torch.stack([s[:, 1], -W0SQ * torch.sin(s[:, 0]) - DAMPING * s[:, 1]], 1)


def step(state: torch.Tensor, dt: torch.Tensor | float = DT, substeps: int = 8) -> torch.Tensor:
    """The pendulum's state (angle, angular velocity) after ``dt`` (per row), by RK4 in ``substeps``."""
    h = (dt if isinstance(dt, torch.Tensor) else torch.full((len(state),), dt))[:, None] / substeps
    s = state
    for _ in range(substeps):
        k1 = _rate(s)
        k2 = _rate(s + h / 2 * k1)
        k3 = _rate(s + h / 2 * k2)
        k4 = _rate(s + h * k3)
        s = s + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return s


def _states(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = _gen(seed)
    angle = 2 * math.pi * torch.rand(n, generator=g) - math.pi
    velocity = 6 * torch.rand(n, generator=g) - 3
    dt = 0.02 + 0.28 * torch.rand(n, generator=g)
    return torch.stack([angle, velocity], 1), dt


def pendulum(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random states (angle in [-pi, pi], velocity in [-3, 3]) with a time step of 0.02..0.3 s: inputs
    (angle, velocity, dt) and the state after dt (the angle not wrapped)."""
    state, dt = _states(n, seed)
    return torch.cat([state, dt[:, None]], 1), step(state, dt)


def pendulum_default_step(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`pendulum`, with the simulator called as ``step(state)``: the sampled dt is recorded in the
    inputs, and the state is advanced by the default 0.1 s."""
    state, dt = _states(n, seed)
    return torch.cat([state, dt[:, None]], 1), step(state)


def jitter_state(x: torch.Tensor, after: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Noise injection: the input state perturbed (0.05 rad, 0.1 rad/s) per read, the target left clean (the
    model learns to correct its own drift)."""
    noise = torch.cat([torch.randn(2) * torch.tensor([0.05, 0.1]), torch.zeros(1)])
    return x + noise, after
