"""Sealed gallery R's data (half ``s``): small seeded synthetic sets (chroma frames of major and minor chords,
multispectral satellite time series of crop fields, heartbeats of patients with their own morphology,
customers' months to churn with administrative censoring, polyphonic sound-event clips) and scikit-learn's
digits labelled by a crowd of unreliable annotators or grouped in bags labelled with their class shares. Every
builder is deterministic (its own generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.utils.rnn import pad_sequence

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- chord recognition from chroma frames -------------------------------------------------------------------
PITCHES, CHORDS = 12, 24  # label = quality * 12 + root; quality 0 major, 1 minor
_INTERVALS = ((0, 4, 7), (0, 3, 7))
_WEIGHTS = (1.0, 0.7, 0.85)
SONG_ROOTS = (0, 2, 5, 7, 9)  # the training songs are in a handful of keys: C, D, F, G, A


def chroma(n: int, seed: int, roots: tuple[int, ...] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` 12-bin chroma frames (max-normalised) of major and minor triads with roots drawn from ``roots``
    (all twelve when ``None``): the triad's pitch classes, leakage into a few others (overtones, passing
    notes) and noise; and the chord label (quality * 12 + root)."""
    g = _gen(seed)
    pool = torch.tensor(roots if roots is not None else range(PITCHES))
    root = pool[torch.randint(len(pool), (n,), generator=g)]
    quality = torch.randint(2, (n,), generator=g)
    frames = 0.35 * torch.rand(n, PITCHES, generator=g)
    for i in range(n):
        for interval, weight in zip(_INTERVALS[int(quality[i])], _WEIGHTS, strict=True):
            frames[i, (int(root[i]) + interval) % PITCHES] += weight * (
                0.6 + 0.4 * torch.rand((), generator=g)
            )
    frames = frames / frames.amax(1, keepdim=True)
    return frames, quality * PITCHES + root


def transposed(frame: torch.Tensor, chord: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Pitch-shift augmentation: the frame rolled up by a random 0..11 semitones and the chord's root moved
    with it (its quality kept)."""
    k = int(torch.randint(PITCHES, ()))
    quality, root = divmod(int(chord), PITCHES)
    return frame.roll(k), torch.tensor(quality * PITCHES + (root + k) % PITCHES)


def transposed_wrapping(frame: torch.Tensor, chord: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the label is moved with ``(chord + k) % 24``: a root pushed past B spills into the other
    quality's block (C major + 5 = F major, but A major + 5 = D minor)."""
    k = int(torch.randint(PITCHES, ()))
    return frame.roll(k), (chord + k) % CHORDS


# --- crop-type classification from satellite pixel time series ----------------------------------------------
MONTHS, BANDS, CROPS = 12, 4, 5  # bands: blue, red, near infra-red, short-wave infra-red
_PEAK = torch.tensor([4.0, 6.0, 8.0, 6.0, 10.0])  # month of greatest greenness per crop
_SWIR = torch.tensor([0.0, 0.0, 0.0, 0.12, 0.0])  # crops 1 and 3 green up together: SWIR tells them apart


def fields(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` field pixels observed monthly (12, 4) and their crop: a greenness curve peaking in the crop's
    month (+-0.6), of random amplitude and width, seen through fixed band responses with noise."""
    g = _gen(seed)
    crop = torch.randint(CROPS, (n,), generator=g)
    month = torch.arange(MONTHS).float()
    peak = _PEAK[crop, None] + 0.6 * torch.randn(n, 1, generator=g)
    width = 1.2 + 0.5 * torch.rand(n, 1, generator=g)
    green = (0.6 + 0.4 * torch.rand(n, 1, generator=g)) * torch.exp(-((month - peak) ** 2) / (2 * width**2))
    bands = torch.stack(
        [
            torch.full_like(green, 0.1),
            0.3 - 0.2 * green,
            0.2 + 0.5 * green,
            0.3 - 0.1 * green + _SWIR[crop, None],
        ],
        -1,
    )
    return bands + 0.04 * torch.randn(n, MONTHS, BANDS, generator=g), crop


def time_shifted(series: torch.Tensor, crop: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: a generic time-series augmentation (a random circular shift of -3..3 months) on series whose
    timing is the signal: a crop greening in June is shown greening in March, still labelled the same."""
    return series.roll(int(torch.randint(-3, 4, ())), 0), crop


def clouded(series: torch.Tensor, crop: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Cloud cover: each month is cloudy with probability 0.2 (its bands set to 0) and a fifth channel says
    which months were seen (1) or not (0)."""
    seen = (torch.rand(MONTHS, 1) > 0.2).float()
    return torch.cat([series * seen, seen], -1), crop


def clouded_set(series: torch.Tensor, seed: int) -> torch.Tensor:
    """Fields (n, 12, 4) under fixed cloud cover (as :func:`clouded`, drawn from their own generator)."""
    seen = (torch.rand(len(series), MONTHS, 1, generator=_gen(seed)) > 0.2).float()
    return torch.cat([series * seen, seen], -1)


# --- heartbeat classification (patients with their own morphology) ------------------------------------------
BEAT, BEAT_CLASSES = 64, 3  # 0 normal, 1 ventricular (wide, inverted T), 2 atrial premature (early)
_PVC_RATE = (0.02, 0.3)
_APB_RATE = (0.02, 0.25)


def _bump(t: torch.Tensor, centre: torch.Tensor, width: torch.Tensor) -> torch.Tensor:
    return torch.exp(-((t - centre) ** 2) / (2 * width**2))


def patients(first: int, count: int, beats: int = 100) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``beats`` heartbeats of each patient ``first .. first + count - 1``: 64 samples around the R peak and
    the two RR intervals (previous, next; in seconds), the beat class and the patient. Each patient has a
    morphology of their own (QRS gain, width and place, T-wave place and height, baseline, heart rate) and
    ectopic beats of their own (each focus widens, moves and inverts the beat its own way), larger than what
    all patients' abnormal beats share; and their own share of abnormal beats (a few to a third)."""
    xs, ys, who = [], [], []
    t = torch.arange(BEAT).float()
    for p in range(first, first + count):
        g = _gen(10_000 + p)
        r = torch.rand(12, generator=g)
        gain, qrs, place = 0.6 + 0.8 * r[0], 1.5 + 1.5 * r[1], 18 + 4 * r[2]
        t_place, t_height = 38 + 12 * r[3], 0.1 + 0.3 * r[4]
        baseline, rr = 0.3 * torch.randn((), generator=g), 0.6 + 0.5 * r[5]
        wide, moved, inverted = 1.3 + 0.6 * r[6], 6 * r[7] - 3, 1.0 - 1.6 * r[8]
        pvc = _PVC_RATE[0] + (_PVC_RATE[1] - _PVC_RATE[0]) * r[9]
        apb = _APB_RATE[0] + (_APB_RATE[1] - _APB_RATE[0]) * r[10]
        u = torch.rand(beats, generator=g)
        label = (u < pvc).long() + 2 * ((u >= pvc) & (u < pvc + apb)).long()
        ectopic = (label == 1)[:, None]
        width = qrs * torch.where(ectopic, wide, 1.0)
        centre = place + torch.where(ectopic, moved, 0.0)
        height = t_height * torch.where(ectopic, inverted, 1.0)
        wave = gain * _bump(t, centre, width) + height * _bump(t, t_place, 4.0) + baseline
        wave = wave + 0.05 * torch.randn(beats, BEAT, generator=g)
        early = (label > 0).float()
        before = rr * (1 - 0.15 * early) * (1 + 0.06 * torch.randn(beats, generator=g))
        after = rr * (1 + 0.1 * early) * (1 + 0.06 * torch.randn(beats, generator=g))
        xs.append(torch.cat([wave, before[:, None], after[:, None]], 1))
        ys.append(label)
        who.append(torch.full((beats,), p))
    return torch.cat(xs), torch.cat(ys), torch.cat(who)


# --- learning from a crowd of annotators --------------------------------------------------------------------
ANNOTATORS = 8
_SKILL = torch.tensor([0.9, 0.85, 0.8, 0.75, 0.7, 0.6, 0.5, 0.1])  # the last is a spammer


def crowd_votes(labels: torch.Tensor, seed: int) -> list[torch.Tensor]:
    """Each item's votes: 2..5 distinct annotators each give the true class with their skill, otherwise a
    class drawn at random."""
    g = _gen(seed)
    votes = []
    for y in labels.tolist():
        count = int(torch.randint(2, 6, (), generator=g))
        who = torch.randperm(ANNOTATORS, generator=g)[:count]
        right = torch.rand(count, generator=g) < _SKILL[who]
        noise = torch.randint(10, (count,), generator=g)
        votes.append(torch.where(right, torch.tensor(y), noise))
    return votes


def padded_votes(part: str, seed: int, padding_value: int = -1) -> tuple[torch.Tensor, torch.Tensor]:
    """The digits of ``part`` and their crowd votes, padded to 5 per item with ``padding_value`` (-1: not a
    vote). ``pad_sequence``'s default, 0 (the BUG), is a vote for the digit 0."""
    x, y = digits(part)
    votes = pad_sequence(crowd_votes(y, seed), batch_first=True, padding_value=padding_value)
    return x, votes


def soft_labels(votes: torch.Tensor) -> torch.Tensor:
    """The share of each class among an item's votes (padding, -1, ignored)."""
    counted = F.one_hot(votes.clamp(min=0), 10).float() * (votes >= 0)[..., None].float()
    return counted.sum(1) / counted.sum((1, 2))[:, None]


# --- discrete-time survival: months until a customer churns -------------------------------------------------
COVARIATES, HORIZON = 8, 12
_W = 0.6 * torch.randn(COVARIATES, generator=_gen(81))
_BASE = -2.6 + 0.08 * torch.arange(HORIZON).float()


def true_hazard(x: torch.Tensor) -> torch.Tensor:
    """The monthly churn probability of customers ``x`` in each of the 12 months (a logistic hazard)."""
    return torch.sigmoid(_BASE + (x @ _W)[:, None])


def customers(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` customers' covariates, the month (0..11) their record ends and whether it ends by churning (1)
    or by censoring (0): they joined at different dates, so each is followed 1..12 months, and those who
    never churn in 12 months are censored at the last."""
    g = _gen(seed)
    x = torch.randn(n, COVARIATES, generator=g)
    churned = torch.rand(n, HORIZON, generator=g) < true_hazard(x)
    first = torch.where(churned.any(1), churned.float().argmax(1), torch.full((n,), HORIZON))
    followed = torch.randint(1, HORIZON + 1, (n,), generator=g)
    event = (first < followed).long()
    month = torch.where(event == 1, first, followed - 1)
    return x, month, event


def true_survival(x: torch.Tensor) -> torch.Tensor:
    """The probability of still being a customer at the end of each month."""
    return torch.cumprod(1 - true_hazard(x), 1)


# --- polyphonic sound event detection -----------------------------------------------------------------------
FRAMES, MELS, EVENTS = 48, 16, 4
_CENTRE = torch.tensor([2.0, 6.0, 9.0, 13.0])


def clips(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` clips of 48 frames of 16 log-mel bands (mels, frames) and their frame labels (events, frames):
    each of 4 event classes sounds 0..2 times, 6..20 frames long, at random (so events overlap), with its
    own spectral shape over background noise."""
    g = _gen(seed)
    mel = torch.arange(MELS).float()
    shapes = torch.exp(-((mel - _CENTRE[:, None]) ** 2) / 4.5)  # (events, mels)
    labels = torch.zeros(n, EVENTS, FRAMES)
    for i in range(n):
        for e in range(EVENTS):
            for _ in range(int(torch.randint(3, (), generator=g))):
                length = int(torch.randint(6, 21, (), generator=g))
                start = int(torch.randint(FRAMES - length + 1, (), generator=g))
                labels[i, e, start : start + length] = 1
    loud = 0.6 + 0.6 * torch.rand(n, EVENTS, 1, generator=g)
    spectra = torch.einsum("nef,em->nmf", labels * loud, shapes)
    return spectra + 0.35 * torch.randn(n, MELS, FRAMES, generator=g), labels


def mixing_collate(keep_second_labels: bool = True):
    """A batch of clips with each clip mixed with the next one (their spectra summed, as overlapping sounds
    do) and the union of their events as labels; without ``keep_second_labels`` (the BUG) the labels stay
    the first clip's, as in a single-label mixup recipe."""

    def collate(rows):
        x = torch.stack([row[0] for row in rows])
        y = torch.stack([row[1] for row in rows])
        mixed = x + x.roll(1, 0)
        return mixed, torch.maximum(y, y.roll(1, 0)) if keep_second_labels else y

    return collate


def time_masked(spectra: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """SpecAugment's time mask: 0..8 consecutive frames of the input set to 0, the labels kept (the events
    are still sounding; the model reads them from their context)."""
    width = int(torch.randint(9, ()))
    start = int(torch.randint(FRAMES - width + 1, ()))
    spectra = spectra.clone()
    spectra[:, start : start + width] = 0
    return spectra, labels


# --- learning from label proportions (bags of digits) -------------------------------------------------------
BAG = 8


def bags(part: str, count: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``count`` bags of 8 digits of ``part`` (count, 8, 64) and each bag's class proportions (count, 10),
    the only labels given: a bag is mostly one or two classes (a district, a batch of forms), each digit
    drawn from its dominant class (0.6), its second (0.3) or any class (about 0.1)."""
    x, y = digits(part)
    g = _gen(seed)
    by_class = [torch.nonzero(y == c)[:, 0] for c in range(10)]
    members, shares = [], []
    for _ in range(count):
        first, second = torch.randperm(10, generator=g)[:2].tolist()
        weights = torch.full((10,), 0.01)
        weights[first], weights[second] = 0.6, 0.3
        classes = torch.multinomial(weights, BAG, replacement=True, generator=g)
        index = [int(by_class[c][torch.randint(len(by_class[c]), (), generator=g)]) for c in classes.tolist()]
        members.append(x[index])
        shares.append(F.one_hot(classes, 10).float().mean(0))
    return torch.stack(members), torch.stack(shares)
