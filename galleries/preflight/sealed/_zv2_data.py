"""Sealed gallery ZV's data (half ``zv2``): small seeded synthetic sets: arrow-shaped point sets seen from
above at a heading, particle jets (variable-size sets of constituents: a W's two balanced prongs or QCD's hard
prong and soft emission), speeds on a small road graph whose disturbances travel downstream, short strings of
five character-level "languages" (bigram Markov chains), noisy images of flat shapes and their edge maps, and
daily returns of six assets with a weak predictable part. Every builder is deterministic (its own generator);
random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch.nn.utils.rnn import pad_sequence
from torch.utils.data import DataLoader, Dataset, WeightedRandomSampler


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


class Rows(Dataset):
    """Rows of equally long tensors (or of a list), read through an optional ``transform(*row)``."""

    def __init__(self, *columns: Any, transform: Callable | None = None) -> None:
        self.columns, self.transform = columns, transform

    def __len__(self) -> int:
        return len(self.columns[0])

    def __getitem__(self, i: int) -> Any:
        row = tuple(column[i] for column in self.columns)
        if self.transform is not None:
            return self.transform(*row)
        return row if len(row) > 1 else row[0]


def loaders(train: Dataset, val: Dataset, batch_size: int = 64, collate=None, **train_kwargs: Any):
    """``train_dataloaders`` (shuffled unless a sampler is given) and ``val_dataloaders`` (batches of 256),
    both collated by ``collate``."""
    if "sampler" not in train_kwargs:
        train_kwargs.setdefault("shuffle", True)
    return {
        "train_dataloaders": DataLoader(train, batch_size=batch_size, collate_fn=collate, **train_kwargs),
        "val_dataloaders": DataLoader(val, batch_size=256, collate_fn=collate),
    }


# --- 2-D orientation: arrows seen from above ----------------------------------------------------------------
POINTS = 24
# The arrow's outline, heading along +x: a shaft and two barbs (mirror-symmetric about its heading).
_SEGMENTS = torch.tensor([[[-1.0, 0.0], [1.0, 0.0]], [[1.0, 0.0], [0.45, 0.45]], [[1.0, 0.0], [0.45, -0.45]]])


def rotation(angle: torch.Tensor) -> torch.Tensor:
    """Rotation matrices (..., 2, 2) that turn column vectors by ``angle``."""
    c, s = torch.cos(angle), torch.sin(angle)
    return torch.stack([torch.stack([c, -s], -1), torch.stack([s, c], -1)], -2)


def arrows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` unordered sets of 24 points sampled along an arrow's outline (a shaft and two barbs), turned to a
    random heading in [0, 2 pi), scaled by 0.7..1.3, moved by up to 2 and jittered (0.04); (n, 24, 2) and the
    heading in radians."""
    g = _gen(seed)
    heading = 2 * math.pi * torch.rand(n, generator=g)
    lengths = (_SEGMENTS[:, 1] - _SEGMENTS[:, 0]).norm(dim=-1)
    segment = torch.multinomial(lengths / lengths.sum(), n * POINTS, replacement=True, generator=g)
    t = torch.rand(n * POINTS, 1, generator=g)
    points = (_SEGMENTS[segment, 0] + t * (_SEGMENTS[segment, 1] - _SEGMENTS[segment, 0])).view(n, POINTS, 2)
    points = points @ rotation(heading).transpose(-1, -2)
    scale = 0.7 + 0.6 * torch.rand(n, 1, 1, generator=g)
    shift = 4 * torch.rand(n, 1, 2, generator=g) - 2
    return scale * points + shift + 0.04 * torch.randn(n, POINTS, 2, generator=g), heading


def turn_and_mirror(points: torch.Tensor, heading: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random turn about the set's centre and, half the time, a mirror image (y -> -y): the heading turns
    with the points and is reflected with them (theta -> -theta), wrapped into [0, 2 pi)."""
    angle = 2 * math.pi * torch.rand(())
    centre = points.mean(0)
    points = (points - centre) @ rotation(angle).T + centre
    heading = heading + angle
    if torch.rand(()) < 0.5:
        points = points * torch.tensor([1.0, -1.0])
        heading = -heading
    return points, heading % (2 * math.pi)


# --- particle jets: variable-size sets of constituents ------------------------------------------------------
MAX_PARTS = 40


def _jet(w: bool, g: torch.Generator) -> torch.Tensor:
    """One jet's constituents as (log pT fraction, d eta, d phi) about the pT-weighted centre, hardest first:
    a hard prong and a second one ``gap`` away carrying a share ``z`` of the pT (a W's decay is balanced:
    z 0.15..0.5; QCD's second prong is a soft emission: z 0.02..0.2)."""
    n = min(int(torch.randint(8, 30, (), generator=g)) + (3 if w else 0), MAX_PARTS)
    z = (0.15 + 0.35 * torch.rand((), generator=g)) if w else (0.02 + 0.18 * torch.rand((), generator=g))
    gap = 0.15 + 0.45 * torch.rand((), generator=g)
    direction = 2 * math.pi * torch.rand((), generator=g)
    axes = gap * torch.stack([torch.zeros(2), torch.stack([direction.cos(), direction.sin()])])
    second = torch.rand(n, generator=g) < 0.25 + 0.5 * z  # a softer prong has fewer constituents
    second[0], second[1] = False, True
    spread = 0.03 + 0.05 * torch.rand((), generator=g)
    where = axes[second.long()] + spread * torch.randn(n, 2, generator=g)
    pt = -torch.rand(n, generator=g).log()
    pt = torch.where(second, z * pt / pt[second].sum(), (1 - z) * pt / pt[~second].sum())
    where = where - (pt[:, None] * where).sum(0)
    order = pt.argsort(descending=True)
    return torch.cat([pt.log()[:, None], where], -1)[order]


def jets(n: int, seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``n`` jets, half of them a boosted W's (label 1: two balanced prongs 0.15..0.6 apart, a few more
    constituents) and half QCD's (label 0: a hard prong and a soft emission); each a (parts, 3) tensor of
    8..32 constituents."""
    g = _gen(seed)
    label = (torch.rand(n, generator=g) < 0.5).long()
    return [_jet(bool(y), g) for y in label], label


def pad_jets(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Collate jets padded with zeros to the batch's longest: ``parts`` (B, L, 3), ``padding`` (B, L; True on
    the padded slots, PyTorch's ``key_padding_mask`` convention) and ``label`` (B,)."""
    parts, label = zip(*batch, strict=True)
    lengths = torch.tensor([len(p) for p in parts])
    padded = pad_sequence(list(parts), batch_first=True)
    padding = torch.arange(padded.shape[1])[None] >= lengths[:, None]
    return {"parts": padded, "padding": padding, "label": torch.stack(label)}


def turn_jet(parts: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random rotation of the constituents about the jet axis and, half the time, a reflection (the
    physics is symmetric under both; the pT fractions are untouched)."""
    angle = 2 * math.pi * torch.rand(())
    where = parts[:, 1:] @ rotation(angle).T
    if torch.rand(()) < 0.5:
        where = where * torch.tensor([1.0, -1.0])
    return torch.cat([parts[:, :1], where], -1), label


def turn_jet_columns_0_1(parts: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The same rotation and reflection applied to columns 0 and 1 (log pT fraction, d eta), as if the
    angles came first: the pT is mixed into d eta and d phi is left alone."""
    angle = 2 * math.pi * torch.rand(())
    where = parts[:, :2] @ rotation(angle).T
    if torch.rand(()) < 0.5:
        where = where * torch.tensor([1.0, -1.0])
    return torch.cat([where, parts[:, 2:]], -1), label


# --- traffic on a small road graph --------------------------------------------------------------------------
SENSORS, PAST, AHEAD = 10, 12, 3
# A main road 0 -> 1 -> ... -> 7 and two on-ramps, 8 -> 3 and 9 -> 6: (upstream, downstream) pairs.
ROADS = [(i, i + 1) for i in range(7)] + [(8, 3), (9, 6)]
SPEED_MEAN, SPEED_STD = 60.0, 8.0


def upstream() -> torch.Tensor:
    """The row-normalised adjacency (SENSORS, SENSORS): row i averages the sensors just upstream of i."""
    a = torch.zeros(SENSORS, SENSORS)
    for up, down in ROADS:
        a[down, up] = 1.0
    return a / a.sum(-1, keepdim=True).clamp(min=1)


def speeds(steps: int, seed: int) -> torch.Tensor:
    """``steps`` 15-minute speed readings (km/h) of the 10 sensors, (steps, SENSORS): a daily rush-hour dip
    shared by all and disturbances that travel downstream (each sensor's next deviation is 0.3 of its own and
    0.65 of its upstream sensors' mean, a source's 0.85 of its own, plus noise)."""
    g = _gen(seed)
    a = upstream()
    source = a.sum(-1) == 0
    dev = torch.zeros(steps, SENSORS)
    noise = torch.randn(steps, SENSORS, generator=g)
    for t in range(1, steps):
        carried = torch.where(source, 0.85 * dev[t - 1], 0.3 * dev[t - 1] + 0.65 * (a @ dev[t - 1]))
        dev[t] = carried + 0.5 * noise[t]
    hour = (torch.arange(steps).float() % 96) / 4 + 24 * torch.rand((), generator=g)
    rush = torch.exp(-((hour % 24 - 8) ** 2) / 2) + torch.exp(-((hour % 24 - 17.5) ** 2) / 3)
    return SPEED_MEAN - 12 * rush[:, None] + 6 * dev


class Windows(Dataset):
    """Sliding windows over a (steps, SENSORS) series: the past 12 readings of every sensor (SENSORS, 12) and
    the next 3 (SENSORS, 3), starting ``offset`` steps after the window (1: the next reading)."""

    def __init__(self, series: torch.Tensor, offset: int = 1) -> None:
        self.series, self.offset = series, offset

    def __len__(self) -> int:
        return len(self.series) - PAST - AHEAD

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = i + PAST - 1 + self.offset
        return self.series[i : i + PAST].T, self.series[start : start + AHEAD].T


def lose_readings(series: torch.Tensor, share: float, seed: int) -> torch.Tensor:
    """``series`` with a ``share`` of its readings lost to detector faults, read as 0 km/h (as the loop
    detectors report them), fixed by ``seed``: a lost reading is lost in every window that holds it."""
    return series * (torch.rand(series.shape, generator=_gen(seed)) >= share)


# --- language identification from character n-gram counts --------------------------------------------------
LETTERS, LANGUAGES = 8, 5
PRIORS = torch.tensor([0.5, 0.24, 0.13, 0.08, 0.05])
NGRAMS = LETTERS + LETTERS**2


def _languages() -> tuple[torch.Tensor, torch.Tensor]:
    """The five languages (fixed, whatever the data seed): first-letter distributions (5, 8) and letter
    bigram transition matrices (5, 8, 8), each a perturbation of a shared one."""
    g = _gen(1234)
    shared = 1.5 * torch.randn(LETTERS, LETTERS, generator=g)
    own = 1.3 * torch.randn(LANGUAGES, LETTERS, LETTERS, generator=g)
    start = torch.softmax(torch.randn(LANGUAGES, LETTERS, generator=g), -1)
    return start, torch.softmax(shared + own, -1)


def strings(n: int, seed: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """``n`` strings of 4..11 letters (as letter indices), each drawn from a language chosen with the
    imbalanced priors 50/24/13/8/5%; and the language."""
    g = _gen(seed)
    start, moves = _languages()
    language = torch.multinomial(PRIORS, n, replacement=True, generator=g)
    out = []
    for lang in language.tolist():
        letters = [int(torch.multinomial(start[lang], 1, generator=g))]
        for _ in range(int(torch.randint(3, 11, (), generator=g))):
            letters.append(int(torch.multinomial(moves[lang, letters[-1]], 1, generator=g)))
        out.append(torch.tensor(letters))
    return out, language


def ngram_counts(letters: torch.Tensor) -> torch.Tensor:
    """The string's letter counts (8) followed by its letter-bigram counts (64), as floats."""
    unigrams = torch.bincount(letters, minlength=LETTERS)
    bigrams = torch.bincount(letters[:-1] * LETTERS + letters[1:], minlength=LETTERS**2)
    return torch.cat([unigrams, bigrams]).float()


def counted(letters: torch.Tensor, language: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return ngram_counts(letters), language


def shuffled_letters(letters: torch.Tensor, language: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation: the string's letters in a random order ("n-gram counts are a bag, order is free")."""
    return ngram_counts(letters[torch.randperm(len(letters))]), language


def random_window(letters: torch.Tensor, language: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation: a random contiguous window of at least 3 letters (a shorter string of the same
    language), half the time; counted."""
    if len(letters) > 3 and torch.rand(()) < 0.5:
        size = int(torch.randint(3, len(letters) + 1, ()))
        start = int(torch.randint(len(letters) - size + 1, ()))
        letters = letters[start : start + size]
    return ngram_counts(letters), language


def counts_matrix(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``strings(n, seed)`` as an (n, NGRAMS) matrix of n-gram counts, and the languages."""
    letters, language = strings(n, seed)
    return torch.stack([ngram_counts(s) for s in letters]), language


def language_sampler(language: torch.Tensor, per_class: bool = False) -> WeightedRandomSampler:
    """A sampler that balances the languages: each string weighted by the inverse of its language's count
    (or, with ``per_class``, handed the five class weights themselves)."""
    weights = 1.0 / torch.bincount(language, minlength=LANGUAGES).float()
    if not per_class:
        weights = weights[language]
    return WeightedRandomSampler(weights, num_samples=len(language), replacement=True)


# --- edge detection in small images -------------------------------------------------------------------------
SIDE = 24


def shapes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` 24 x 24 images of 1..3 flat rectangles and discs (each of its own grey level, 0.3 at least from
    the background) on a background, with noise (0.12); (n, 1, 24, 24), and the edge maps (n, 1, 24, 24):
    1 on every pixel whose 4-neighbour lies in another region (about 19% of the pixels)."""
    g = _gen(seed)
    ys, xs = torch.meshgrid(torch.arange(SIDE).float(), torch.arange(SIDE).float(), indexing="ij")
    background = torch.rand(n, generator=g)
    image = background[:, None, None].expand(n, SIDE, SIDE).clone()
    region = torch.zeros(n, SIDE, SIDE, dtype=torch.long)
    for k in range(1, 4):
        keep = (torch.rand(n, generator=g) < (1.0 if k == 1 else 0.6))[:, None, None]
        centre = 4 + 16 * torch.rand(n, 2, generator=g)
        size = 3 + 5 * torch.rand(n, 2, generator=g)
        box = ((ys - centre[:, 0, None, None]).abs() < size[:, 0, None, None]) & (
            (xs - centre[:, 1, None, None]).abs() < size[:, 1, None, None]
        )
        disc = (ys - centre[:, 0, None, None]) ** 2 + (xs - centre[:, 1, None, None]) ** 2 < size[
            :, 0, None, None
        ] ** 2
        is_disc = (torch.rand(n, generator=g) < 0.5)[:, None, None]
        inside = torch.where(is_disc, disc, box) & keep
        level = (background + 0.3 + 0.4 * torch.rand(n, generator=g)) % 1.0
        image = torch.where(inside, level[:, None, None], image)
        region = torch.where(inside, k, region)
    edge = torch.zeros(n, SIDE, SIDE)
    vertical = (region[:, 1:] != region[:, :-1]).float()
    horizontal = (region[:, :, 1:] != region[:, :, :-1]).float()
    edge[:, 1:] = torch.maximum(edge[:, 1:], vertical)
    edge[:, :-1] = torch.maximum(edge[:, :-1], vertical)
    edge[:, :, 1:] = torch.maximum(edge[:, :, 1:], horizontal)
    edge[:, :, :-1] = torch.maximum(edge[:, :, :-1], horizontal)
    image = image + 0.12 * torch.randn(n, SIDE, SIDE, generator=g)
    return image[:, None], edge[:, None]


EDGE_SHARE = 0.19  # about the share of edge pixels (the balancing weight is its odds)


def photometric(image: torch.Tensor, edge: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Heavy photometric augmentation: grey levels inverted half the time, then a random contrast (0.5..1.5)
    and brightness shift (-0.3..0.3); the edges are where they were."""
    if torch.rand(()) < 0.5:
        image = 1 - image
    return (0.5 + torch.rand(())) * (image - 0.5) + 0.5 + 0.6 * (torch.rand(()) - 0.5), edge


# --- portfolio weights from signals (a Sharpe-ratio objective) ----------------------------------------------
ASSETS = 6


def market(days: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``days`` days of 6 assets: each day's signals (a published score per asset, N(0, 1)) and returns
    (ASSETS each, as fractions). An asset's next return carries 0.3 of its score, -0.3 of its own last
    return (in units of 1%; short-term reversal), a common market move (0.6) and noise (0.7), times 1%,
    plus 0.02%."""
    g = _gen(seed)
    score = torch.randn(days, ASSETS, generator=g)
    move = torch.randn(days, 1, generator=g)
    noise = torch.randn(days, ASSETS, generator=g)
    unit = torch.zeros(days, ASSETS)
    for t in range(1, days):
        unit[t] = 0.3 * score[t - 1] - 0.3 * unit[t - 1] + 0.6 * move[t] + 0.7 * noise[t]
    return score, 0.0002 + 0.01 * unit


def trading_days(days: int, seed: int, lag: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """Rows of (features known at a day's close: the scores and the day's returns in %, (2 * ASSETS,)) and
    the returns ``lag`` days later (1: the next day's, what the weights set at that close earn)."""
    score, returns = market(days + 1, seed)
    features = torch.cat([score, 100 * returns], -1)
    return features[1 : days + 1 - lag], returns[1 + lag : days + 1]
