"""Sealed gallery R's data (half ``r``): scikit-learn's digits paired for visual addition and relabelled by
simulated annotators, and small seeded synthetic sets (mixed reflectance spectra for unmixing, patients
followed over discrete intervals for survival, single heartbeats of many patients, sound-event clips with
frame-level truth). Every builder is deterministic (its own generator); random augmentation at read time
draws from the global RNG."""

from __future__ import annotations

import math

import torch
from torch.utils.data import Dataset

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- visual addition: the sum of two handwritten digits -----------------------------------------------------
SUMS = 19  # 0 + 0 .. 9 + 9


class DigitPairs(Dataset):
    """Each digit of a part paired with a partner and labelled with the sum of the two: a fixed partner (a
    seeded permutation), or with ``redraw`` a partner drawn afresh at every read for variety. With ``swap``,
    the two images change places at random per read (the sum does not change). With ``stale`` (the BUG), the
    redrawn partner's image comes with the sum computed once for the fixed partner."""

    def __init__(self, part: str, seed: int, redraw: bool = False, swap: bool = False, stale: bool = False):
        self.x, self.y = digits(part, (64,))
        self.partner = torch.randperm(len(self.y), generator=_gen(seed))
        self.sums = self.y + self.y[self.partner]
        self.redraw, self.swap, self.stale = redraw, swap, stale

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int):
        j = int(torch.randint(len(self.y), ())) if self.redraw else int(self.partner[i])
        a, b = self.x[i], self.x[j]
        if self.swap and torch.rand(()) < 0.5:
            a, b = b, a
        return a, b, self.sums[i] if self.stale else self.y[i] + self.y[j]


def digit_pairs(part: str, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every pair of :class:`DigitPairs` as tensors (first image, second image, sum)."""
    pairs = DigitPairs(part, seed)
    return pairs.x, pairs.x[pairs.partner], pairs.sums


# --- spectral unmixing: the abundances of four materials in a pixel's spectrum ------------------------------
BANDS, MATERIALS = 48, 4


def endmembers() -> torch.Tensor:
    """The four materials' reflectance spectra (smooth, in 0.1..0.9), fixed: (materials, bands)."""
    g = _gen(1234)
    bands = torch.linspace(0, 1, BANDS)
    centres, widths = (
        torch.rand(MATERIALS, 3, 1, generator=g),
        0.05 + 0.2 * torch.rand(MATERIALS, 3, 1, generator=g),
    )
    bumps = torch.exp(-((bands - centres) ** 2) / (2 * widths**2)).sum(1)
    return 0.1 + 0.8 * bumps / bumps.amax(1, keepdim=True)


def pixels(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` pixels mixed linearly from the endmembers with Dirichlet(1) abundances, under a random
    illumination (x0.6..1.4) and sensor noise; and the abundances (which sum to 1)."""
    g = _gen(seed)
    gamma = -torch.log(torch.rand(n, MATERIALS, generator=g))  # Gamma(1): normalised, Dirichlet(1)
    abundance = gamma / gamma.sum(1, keepdim=True)
    light = 0.6 + 0.8 * torch.rand(n, 1, generator=g)
    spectra = light * abundance @ endmembers() + 0.01 * torch.randn(n, BANDS, generator=g)
    return spectra, abundance


def brightness(spectrum: torch.Tensor, abundance: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation that keeps the abundances: the whole spectrum scaled by a random illumination
    (x0.8..1.25)."""
    return spectrum * 1.25 ** (2 * torch.rand(()) - 1), abundance


# --- discrete-time survival: patients followed over ten intervals -------------------------------------------
INTERVALS, COVARIATES = 10, 5
_BASELINE = torch.linspace(-3.0, -1.2, INTERVALS)  # the hazard's logit rises with time
_EFFECT = torch.tensor([0.9, -0.7, 0.5, 0.0, 0.0])


def true_hazard(x: torch.Tensor) -> torch.Tensor:
    """The probability of the event in each interval, given no event before: (n, intervals)."""
    return torch.sigmoid(_BASELINE + (x @ _EFFECT)[:, None])


def true_survival(x: torch.Tensor) -> torch.Tensor:
    """The probability of no event up to the end of each interval: (n, intervals)."""
    return torch.cumprod(1 - true_hazard(x), 1)


def patients(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` patients' covariates, the interval of their event or censoring, and whether the event was seen.
    Half of the patients drop out at a random interval (censored at its start); everyone still event-free
    at the end of the study is censored there (``INTERVALS``)."""
    g = _gen(seed)
    x = torch.randn(n, COVARIATES, generator=g)
    events = torch.rand(n, INTERVALS, generator=g) < true_hazard(x)
    first = torch.where(events.any(1), events.float().argmax(1), torch.full((n,), INTERVALS))
    dropout = torch.where(
        torch.rand(n, generator=g) < 0.5, torch.randint(1, INTERVALS, (n,), generator=g), INTERVALS
    )
    seen = first < dropout
    return x, torch.minimum(first, dropout), seen.float()


# --- heartbeat classification from single ECG beats ---------------------------------------------------------
BEAT, BEAT_CLASSES = 64, 3  # samples per beat; normal, ventricular premature, atrial premature
PATIENT_BEATS = 100


def _wave(t: torch.Tensor, centre: float, width: float, height: float) -> torch.Tensor:
    return height * torch.exp(-((t - centre) ** 2) / (2 * width**2))


def _templates() -> torch.Tensor:
    t = torch.arange(BEAT).float()
    qrs, twave = _wave(t, 32, 2.0, 1.0), _wave(t, 48, 4.0, 0.3)
    normal = _wave(t, 18, 3.0, 0.15) + qrs + twave
    ventricular = _wave(t, 32, 4.5, 0.8) + _wave(t, 46, 5.0, -0.3)  # wide QRS, no P wave, inverted T
    atrial = _wave(t, 12, 3.0, 0.15) + qrs + twave  # an early P wave
    return torch.stack([normal, ventricular, atrial])


def beats(patients_n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``PATIENT_BEATS`` beats of each of ``patients_n`` patients: their own morphology (a smooth random wave
    of three sines added, and a gain), their own mix of beat types
    (most patients mostly one type), a little noise; the beats, their classes and their patient."""
    g = _gen(seed)
    t = torch.arange(BEAT).float()
    freq = 1 + 4 * torch.rand(patients_n, 3, 1, generator=g)
    phase = 2 * math.pi * torch.rand(patients_n, 3, 1, generator=g)
    own = (0.1 * torch.sin(2 * math.pi * freq * t / BEAT + phase)).sum(1)
    gain = 0.7 + 0.6 * torch.rand(patients_n, 1, generator=g)
    mix = torch.softmax(2.5 * torch.randn(patients_n, BEAT_CLASSES, generator=g), 1)
    classes = torch.multinomial(mix, PATIENT_BEATS, replacement=True, generator=g)  # (patients, beats)
    shape = _templates()[classes]  # (patients, beats, samples)
    wave = gain[:, :, None] * (shape + own[:, None]) + 0.05 * torch.randn(shape.shape, generator=g)
    patient = torch.arange(patients_n)[:, None].expand(-1, PATIENT_BEATS)
    return wave.reshape(-1, BEAT), classes.reshape(-1), patient.reshape(-1)


# --- weakly labelled sound event detection ------------------------------------------------------------------
FRAMES, MELS, EVENTS = 48, 16, 3
_EVENT_BINS = ((2, 3), (7, 8), (11, 13))  # the mel bins each event class sounds in


def clips(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` clips of 48 frames x 16 mel bins (linear energies): background noise and up to two events (6..16
    frames long, anywhere); the clip-level tags (what a weak label says) and each frame's activity (frames,
    events), the truth the served detector is scored on."""
    g = _gen(seed)
    mel = 0.3 * torch.rand(n, FRAMES, MELS, generator=g)
    active = torch.zeros(n, FRAMES, EVENTS)
    for _ in range(2):
        present = torch.rand(n, generator=g) < 0.7
        kind = torch.randint(EVENTS, (n,), generator=g)
        length = torch.randint(6, 17, (n,), generator=g)
        start = (torch.rand(n, generator=g) * (FRAMES - length + 1)).long()
        frames = torch.arange(FRAMES)
        on = present[:, None] & (frames >= start[:, None]) & (frames < (start + length)[:, None])
        active[torch.arange(n)[:, None], frames, kind[:, None]] += on.float()
    active = active.clamp(max=1)
    for e, (lo, hi) in enumerate(_EVENT_BINS):
        loudness = 0.2 + 0.4 * torch.rand(n, 1, 1, generator=g)
        mel[:, :, lo : hi + 1] += loudness * active[:, :, e : e + 1]
    return mel, active.amax(1), active


class MixedClips(Dataset):
    """Weakly labelled clips, each mixed at every read with another clip of the set drawn at random (as mixup
    is applied to every batch): the two spectrograms add (energies add), and the mixture's tags are the union
    of the two clips' tags."""

    def __init__(self, mel: torch.Tensor, tags: torch.Tensor) -> None:
        self.mel, self.tags = mel, tags

    def __len__(self) -> int:
        return len(self.tags)

    def __getitem__(self, i: int):
        j = int(torch.randint(len(self.tags), ()))
        mel = self.mel[i] + self.mel[j]
        return mel, torch.maximum(self.tags[i], self.tags[j])


# --- learning from several annotators -----------------------------------------------------------------------
ANNOTATORS, PER_ITEM, MISSING = 5, 3, -1
_ACCURACY = torch.tensor([0.85, 0.7, 0.6, 0.45, 0.2])  # the last one mostly clicks at random


def votes(part: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The digits of ``part`` with the votes of the 5 annotators, 3 of whom labelled each digit (``MISSING``
    where an annotator did not): each vote is right with the annotator's accuracy, else a uniformly random
    other class."""
    g = _gen(seed)
    x, y = digits(part, (64,))
    n = len(y)
    right = torch.rand(n, ANNOTATORS, generator=g) < _ACCURACY
    other = (y[:, None] + torch.randint(1, 10, (n, ANNOTATORS), generator=g)) % 10
    vote = torch.where(right, y[:, None], other)
    asked = torch.rand(n, ANNOTATORS, generator=g).argsort(1) < PER_ITEM
    return x, torch.where(asked, vote, MISSING)
