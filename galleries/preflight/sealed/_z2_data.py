"""Sealed gallery Z's data (half ``z2``): small seeded synthetic sets (pen trajectories of drawn digits, words
of a made-up script with their transliterations, multichannel EEG windows of imagined movements from many
subjects, poker hands) and scikit-learn's digits (learned compression, binary hashing). Every builder is
deterministic (its own generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import torch
from torch.utils.data import Dataset

from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


class Rows(Dataset):
    """Rows of equally long tensors (one column: the row itself; several: a tuple), passed through
    ``transform(*row)`` on every read when one is given."""

    def __init__(self, *columns: torch.Tensor, transform=None) -> None:
        self.columns, self.transform = columns, transform

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, i: int):
        row = tuple(column[i] for column in self.columns)
        if self.transform is not None:
            return self.transform(*row)
        return row[0] if len(row) == 1 else row


# --- online handwriting: pen trajectories of digits ---------------------------------------------------------
POINTS = 40
# Each digit as the strokes a writer draws (control points in a unit box, y upwards), in drawing order.
STROKES: dict[int, list[list[tuple[float, float]]]] = {
    0: [[(0.5, 1.0), (0.2, 0.85), (0.1, 0.5), (0.2, 0.15), (0.5, 0.0), (0.8, 0.15), (0.9, 0.5), (0.8, 0.85)]],
    1: [[(0.3, 0.75), (0.55, 1.0), (0.55, 0.0)]],
    2: [[(0.15, 0.75), (0.35, 0.97), (0.7, 0.95), (0.85, 0.7), (0.15, 0.0), (0.9, 0.0)]],
    3: [[(0.15, 0.9), (0.5, 1.0), (0.8, 0.8), (0.45, 0.55), (0.85, 0.3), (0.6, 0.0), (0.15, 0.1)]],
    4: [[(0.25, 1.0), (0.1, 0.4), (0.9, 0.4)], [(0.65, 0.75), (0.65, 0.0)]],
    5: [[(0.8, 1.0), (0.25, 1.0), (0.2, 0.55), (0.6, 0.6), (0.85, 0.3), (0.6, 0.0), (0.15, 0.1)]],
    6: [[(0.75, 1.0), (0.35, 0.65), (0.15, 0.25), (0.4, 0.0), (0.75, 0.15), (0.7, 0.45), (0.2, 0.35)]],
    7: [[(0.1, 1.0), (0.9, 1.0), (0.4, 0.0)], [(0.35, 0.5), (0.8, 0.5)]],
    8: [
        [
            (0.5, 0.5),
            (0.8, 0.75),
            (0.5, 1.0),
            (0.2, 0.75),
            (0.5, 0.5),
            (0.8, 0.25),
            (0.5, 0.0),
            (0.2, 0.25),
            (0.5, 0.5),
        ]
    ],
    9: [[(0.8, 0.75), (0.5, 1.0), (0.2, 0.75), (0.5, 0.5), (0.8, 0.75), (0.7, 0.0)]],
}


def _resample(strokes: list[np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` points spaced evenly along the strokes (each stroke gets points in proportion to its length, at
    least 3), and the pen-up flag: 1 on the first point of every stroke after the first (the pen moved there
    in the air)."""
    lengths = [np.linalg.norm(np.diff(s, axis=0), axis=1).sum() for s in strokes]
    counts = [max(3, round(n * length / sum(lengths))) for length in lengths]
    counts[int(np.argmax(counts))] += n - sum(counts)
    points, pen = [], []
    for k, (stroke, count) in enumerate(zip(strokes, counts, strict=True)):
        along = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(stroke, axis=0), axis=1))])
        at = np.linspace(0.0, along[-1], count)
        points.append(np.stack([np.interp(at, along, stroke[:, 0]), np.interp(at, along, stroke[:, 1])], 1))
        pen.append(np.eye(1, count)[0] * (k > 0))
    return np.concatenate(points), np.concatenate(pen)


@cache
def _pen_digits(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    label = rng.integers(10, size=n)
    rows = np.zeros((n, POINTS, 3), dtype=np.float32)
    for i, c in enumerate(label):
        strokes = [np.array(s) for s in STROKES[int(c)]]
        if c == 7 and rng.random() < 0.5:  # the crossbar of a 7 is optional
            strokes = strokes[:1]
        angle, shear = rng.uniform(-0.25, 0.25), rng.uniform(-0.3, 0.3)
        scale = rng.uniform(0.7, 1.3, size=2)
        turn = np.array([[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]])
        affine = turn @ np.array([[1.0, shear], [0.0, 1.0]]) @ np.diag(scale)
        strokes = [(s - 0.5 + rng.normal(0, 0.05, s.shape)) @ affine.T for s in strokes]
        points, pen = _resample(strokes, POINTS)
        points = points + rng.normal(0, 0.01, points.shape)
        rows[i, 1:, :2] = 10 * np.diff(points, axis=0)
        rows[i, :, 2] = pen
    return torch.from_numpy(rows), torch.from_numpy(label)


def pen_digits(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` drawn digits as pen trajectories of 40 points: each row (dx, dy, pen-up), the pen's move since
    the last point (x10; the first is 0) and 1 where it moved in the air to start a new stroke; the digit
    drawn with a random rotation, slant, stretch and wobble of its control points; and the digit."""
    x, y = _pen_digits(n, seed)
    return x.clone(), y.clone()


def backwards_half_the_time(seq: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half the time the drawing played backwards (the same digit, drawn from its end): the moves in reverse
    order and negated, each pen-up flag kept with its move; the first row stays the zero move."""
    if torch.rand(()) < 0.5:
        moves = seq[1:].flip(0)
        seq = torch.cat([seq[:1], torch.cat([-moves[:, :2], moves[:, 2:]], 1)])
    return seq, label


# --- transliteration: words of a made-up script to their Latin spelling -------------------------------------
PAD, BOS, EOS = 0, 1, 2
SOURCE_LETTERS = "aeioucgklmnpsthx"
TARGET_LETTERS = "aeioukgjlmnpstfSCT"
SOURCE_VOCAB, TARGET_VOCAB = 3 + len(SOURCE_LETTERS), 3 + len(TARGET_LETTERS)
SOURCE_LENGTH, TARGET_LENGTH = 10, 14  # with BOS/EOS and padding
DIGRAPHS = {"sh": "S", "ch": "C", "ph": "f", "th": "T"}


def transliterate(word: str) -> str:
    """The rules, left to right: the digraphs sh, ch, ph, th are one letter each (S, C, f, T); x is written
    ks; c is s before e or i and k elsewhere; g is j before e or i; a lone h is silent; the rest is kept."""
    out, i = [], 0
    while i < len(word):
        pair, a, after = word[i : i + 2], word[i], word[i + 1 : i + 2]
        if pair in DIGRAPHS:
            out.append(DIGRAPHS[pair])
            i += 2
            continue
        if a == "x":
            out.append("ks")
        elif a == "c":
            out.append("s" if after in ("e", "i") else "k")
        elif a == "g":
            out.append("j" if after in ("e", "i") else "g")
        elif a != "h":
            out.append(a)
        i += 1
    return "".join(out)


def _encode(text: str, letters: str, length: int) -> list[int]:
    ids = [BOS] + [3 + letters.index(ch) for ch in text] + [EOS]
    return ids + [PAD] * (length - len(ids))


@cache
def _words(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    sources, targets = [], []
    while len(sources) < n:
        length = int(rng.integers(3, SOURCE_LENGTH - 1))
        word = "".join(SOURCE_LETTERS[int(i)] for i in rng.integers(len(SOURCE_LETTERS), size=length))
        spelt = transliterate(word)
        if 0 < len(spelt) <= TARGET_LENGTH - 2:
            sources.append(_encode(word, SOURCE_LETTERS, SOURCE_LENGTH))
            targets.append(_encode(spelt, TARGET_LETTERS, TARGET_LENGTH))
    return torch.tensor(sources), torch.tensor(targets)


def words(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random words of 3..8 letters of the made-up script and their transliterations, as token ids
    (BOS, letters, EOS, then PAD) of lengths 10 and 14."""
    src, tgt = _words(n, seed)
    return src.clone(), tgt.clone()


def reverse_source(src: torch.Tensor, tgt: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The source word's letters in reverse order (BOS, then the letters last to first, EOS, padding), as
    Sutskever et al. feed their encoder; the target is unchanged."""
    return reversed_letters(src), tgt


def reversed_letters(src: torch.Tensor) -> torch.Tensor:
    """Token rows (or one row) with the letters between BOS and EOS in reverse order."""
    rows = src.view(-1, src.shape[-1]).clone()
    for row in rows:
        end = int((row == EOS).nonzero()[0])
        row[1:end] = row[1:end].flip(0)
    return rows.view(src.shape)


# --- learned compression and binary hashing of digits -------------------------------------------------------
def class_by_class(part: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``part``'s digits (64 pixels) read class by class, as from one folder per class: all the zeros
    first, then the ones, and so on."""
    x, y = digits(part)
    order = torch.sort(y, stable=True).indices
    return x[order], y[order]


# --- motor-imagery EEG across subjects ----------------------------------------------------------------------
CHANNELS = ("F3", "Fz", "F4", "C3", "Cz", "C4", "P3", "P4")
MIRROR = [2, 1, 0, 5, 4, 3, 7, 6]  # each channel's mirror image across the midline
EEG_RATE, EEG_SAMPLES = 128, 128  # one-second windows
IMAGERY = ("left hand", "right hand", "feet")
# where each imagined movement suppresses the mu rhythm (event-related desynchronisation), by channel
_ERD = torch.tensor(
    [
        [0.0, 0.0, 0.2, 0.1, 0.2, 1.0, 0.1, 0.5],  # left hand: the right motor cortex (C4)
        [0.2, 0.0, 0.0, 1.0, 0.2, 0.1, 0.5, 0.1],  # right hand: the left motor cortex (C3)
        [0.0, 0.3, 0.0, 0.3, 1.0, 0.3, 0.0, 0.0],  # feet: the vertex (Cz)
    ]
)


def _subject(subject: int, windows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = _gen(1000 * subject + 7)  # a subject is the same person in every set
    gain = torch.exp(0.6 * torch.randn(8, 1, generator=g))  # electrode impedance, skull thickness
    mu_hz = 8.5 + 3.5 * torch.rand((), generator=g)
    mu_amp = torch.tensor([1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 1.2, 1.2]) * torch.exp(
        0.3 * torch.randn(8, generator=g)
    )
    erd = (_ERD + 0.5 * torch.randn(3, 8, generator=g)).clamp(0, 1) * (
        0.5 + 0.4 * torch.rand((), generator=g)
    )
    beta_hz = 18 + 6 * torch.rand((), generator=g)
    g = _gen(seed * 100_003 + subject)
    label = torch.randint(3, (windows,), generator=g)
    t = torch.arange(EEG_SAMPLES).float() / EEG_RATE
    amp = mu_amp * (1 - erd[label]) * torch.exp(0.15 * torch.randn(windows, 8, generator=g))
    phase = 2 * math.pi * torch.rand(windows, 8, 1, generator=g)
    mu = amp[..., None] * torch.sin(2 * math.pi * mu_hz * t + phase)
    beta = 0.5 * torch.sin(2 * math.pi * beta_hz * t + 2 * math.pi * torch.rand(windows, 8, 1, generator=g))
    white = torch.randn(windows, 8, EEG_SAMPLES, generator=g)
    slow = torch.cumsum(0.3 * torch.randn(windows, 8, EEG_SAMPLES, generator=g), -1)
    slow = slow - slow.mean(-1, keepdim=True)
    return gain * (mu + beta + white + slow), label


def per_subject_standardised(x: torch.Tensor) -> torch.Tensor:
    """One subject's windows with each channel divided by its standard deviation over all their windows (the
    subject's own calibration: no labels used)."""
    return (x - x.mean((0, 2), keepdim=True)) / x.std((0, 2), keepdim=True)


@cache
def _eeg(
    subjects: tuple[int, ...], windows: int, seed: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    xs, ys = zip(*(_subject(s, windows, seed) for s in subjects), strict=True)
    x = torch.cat([per_subject_standardised(x) for x in xs])
    return x, torch.cat(ys), torch.tensor(subjects).repeat_interleave(windows)


def eeg(subjects, windows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``windows`` one-second windows of 8-channel EEG (128 Hz) per subject of ``subjects`` while they imagine
    moving their left hand, right hand or feet, each subject's channels standardised on their own windows;
    the imagery (0, 1, 2) and the subject. A subject has their own electrode gains, mu-rhythm frequency and
    strength and where on the scalp each imagery suppresses it."""
    x, y, subject = _eeg(tuple(subjects), windows, seed)
    return x.clone(), y.clone(), subject.clone()


def mirrored_with_labels(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half the time the scalp mirrored across the midline (F3<->F4, C3<->C4, P3<->P4), and the imagined hand
    with it (left <-> right; feet stay)."""
    if torch.rand(()) < 0.5:
        return x[MIRROR], torch.tensor([1, 0, 2])[label]
    return x, label


def mirrored(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half the time the scalp mirrored across the midline (F3<->F4, C3<->C4, P3<->P4); the label kept."""
    return (x[MIRROR] if torch.rand(()) < 0.5 else x), label


# --- poker hands: unordered sets of five cards --------------------------------------------------------------
RANKS, SUITS, CARDS = 13, 4, 5
HANDS = (
    "high card",
    "pair",
    "two pair",
    "three of a kind",
    "straight",
    "flush",
    "full house",
    "four of a kind",
)


def _ranks(hand: int, rng: np.random.Generator) -> list[int]:
    """Five ranks (0 = deuce .. 12 = ace) with the multiplicities of ``hand`` (straights, flushes and high
    cards: five distinct ranks, consecutive only for a straight)."""
    if hand == 4:
        low = int(rng.integers(RANKS - 4))
        return list(range(low, low + 5))
    counts = {0: [1] * 5, 1: [2, 1, 1, 1], 2: [2, 2, 1], 3: [3, 1, 1], 5: [1] * 5, 6: [3, 2], 7: [4, 1]}[hand]
    while True:
        distinct = rng.choice(RANKS, size=len(counts), replace=False)
        if len(counts) < 5 or np.ptp(distinct) > 4:  # five distinct ranks must not make a straight
            return [int(r) for r, k in zip(distinct, counts, strict=True) for _ in range(k)]


def _suits(ranks: list[int], flush: bool, rng: np.random.Generator) -> list[int]:
    if flush:
        return [int(rng.integers(SUITS))] * CARDS
    while True:
        suits, seen = [], {}
        for r in ranks:  # cards of one rank have different suits
            taken = seen.setdefault(r, [])
            suit = int(rng.choice([s for s in range(SUITS) if s not in taken]))
            taken.append(suit)
            suits.append(suit)
        if len(set(suits)) > 1:  # no accidental flush
            return suits


@cache
def _hands(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    label = rng.integers(len(HANDS), size=n)
    cards = np.zeros((n, CARDS), dtype=np.int64)
    for i, hand in enumerate(label):
        ranks = _ranks(int(hand), rng)
        suits = _suits(ranks, hand == 5, rng)
        cards[i] = np.array(ranks) * SUITS + np.array(suits)
        cards[i] = cards[i][rng.permutation(CARDS)]
    return torch.from_numpy(cards), torch.from_numpy(label)


def hands(n: int, seed: int, dealt: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` poker hands of five cards, each card ``4 * rank + suit`` (rank 0..12, deuce to ace; suit 0..3),
    in the order dealt (or sorted, as the hand evaluator's export lists them, unless ``dealt``); and the
    hand's category (``HANDS``), each category equally often (no straight flushes; ace-low straights are not
    straights)."""
    cards, label = _hands(n, seed)
    return (cards.clone() if dealt else cards.sort(-1).values), label.clone()


def suits_relabelled(cards: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The suits renamed by a random permutation (a poker hand's category does not depend on the suits'
    names) and the cards shuffled."""
    suit = torch.randperm(SUITS)[cards % SUITS]
    return (cards // SUITS * SUITS + suit)[torch.randperm(CARDS)], label


def ranks_relabelled(cards: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The ranks renamed by a random permutation (written as if, like suits, their names did not matter)."""
    rank = torch.randperm(RANKS)[cards // SUITS]
    return rank * SUITS + cards % SUITS, label
