"""Sealed gallery G's data: small seeded synthetic sets (token sequences with answer spans, a topical corpus,
a ratings matrix, digit episodes, collocation points, a chain MDP's replay buffer, point sets, images with
depth, spectrograms, sensor streams, a knowledge graph, priced tabular rows) and scikit-learn's digits. Every
builder is deterministic (its own generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from galleries.preflight.sealed._e_data import Records, Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Records", "Rows", "digits", "loaders"]


# --- extractive spans: the run of the asked-for token -------------------------------------------------------
SPAN_LEN, SPAN_VOCAB, SPAN_TYPES = 20, 17, 4  # 0 pads; 1..4 ask; 5..12 filler; 13..16 answer tokens


def spans(n: int, seed: int, padded: bool = False, end_exclusive: bool = False) -> tuple[torch.Tensor, ...]:
    """``n`` sequences: position 0 asks for type q, the context holds a run (1..4 long, inside positions
    1..15) of answer token 12 + q and a distractor run of another type: (tokens, start, end) with ``end``
    inclusive (exclusive with ``end_exclusive``). ``padded``: each row ends at a random length after its runs,
    padded with 0."""
    g = _gen(seed)
    tokens = torch.randint(5, 13, (n, SPAN_LEN), generator=g)
    q = torch.randint(1, SPAN_TYPES + 1, (n,), generator=g)
    other = (q - 1 + torch.randint(1, SPAN_TYPES, (n,), generator=g)) % SPAN_TYPES + 1
    tokens[:, 0] = q
    start, end = torch.zeros(n, dtype=torch.long), torch.zeros(n, dtype=torch.long)
    for i in range(n):
        a, b = torch.randint(1, 5, (2,), generator=g).tolist()
        s1 = int(torch.randint(1, 16 - a - b, (), generator=g))
        s2 = s1 + a + int(torch.randint(0, 16 - s1 - a - b + 1, (), generator=g))
        first = bool(torch.rand((), generator=g) < 0.5)
        (sq, lq), (so, lo) = ((s1, a), (s2, b)) if first else ((s2, b), (s1, a))
        tokens[i, sq : sq + lq], tokens[i, so : so + lo] = 12 + q[i], 12 + other[i]
        start[i], end[i] = sq, sq + lq - 1
        if padded:
            tokens[i, int(torch.randint(s2 + b, SPAN_LEN + 1, (), generator=g)) :] = 0
    return tokens, start, end + 1 if end_exclusive else end


def shift_context(tokens: torch.Tensor, start: torch.Tensor, end: torch.Tensor, move_span: bool = True):
    """Shifts the context right by 0..4 positions (random filler in front; the tail is cut, past every run),
    moving the span's positions with it unless ``move_span`` is off (the BUG)."""
    k = int(torch.randint(0, 5, ()))
    shifted = tokens.clone()
    shifted[1 + k :] = tokens[1 : SPAN_LEN - k]
    shifted[1 : 1 + k] = torch.randint(5, 13, (k,))
    return (shifted, start + k, end + k) if move_span else (shifted, start, end)


# --- a topical corpus for skip-gram -------------------------------------------------------------------------
WORDS, TOPICS = 60, 6


def skipgram_pairs(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` (centre, context) pairs from windows of 2 in 8-word sentences, each drawn from one of 6 topics of
    10 words (80%) or the whole vocabulary (20%)."""
    g = _gen(seed)
    sentences = n // 20 + 1
    topic = torch.randint(TOPICS, (sentences, 1), generator=g)
    words = topic * (WORDS // TOPICS) + torch.randint(WORDS // TOPICS, (sentences, 8), generator=g)
    noise = torch.rand(sentences, 8, generator=g) < 0.2
    words = torch.where(noise, torch.randint(WORDS, (sentences, 8), generator=g), words)
    pairs = [(words[:, i], words[:, i + d]) for i in range(8) for d in (-2, -1, 1, 2) if 0 <= i + d < 8]
    centre, context = (torch.cat(column) for column in zip(*pairs, strict=True))
    keep = torch.randperm(len(centre), generator=g)[:n]
    return centre[keep], context[keep]


def with_negatives(centre: torch.Tensor, context: torch.Tensor, k: int = 5):
    """Adds ``k`` negative words drawn uniformly on every read."""
    return centre, context, torch.randint(WORDS, (k,))


# --- ratings ------------------------------------------------------------------------------------------------
USERS, ITEMS = 100, 80


def _taste() -> tuple[torch.Tensor, ...]:
    g = _gen(71)
    p, q = torch.randn(USERS, 3, generator=g), torch.randn(ITEMS, 3, generator=g)
    return p, q, 0.5 * torch.randn(USERS, generator=g), 0.5 * torch.randn(ITEMS, generator=g)


def ratings(part: str, repeated: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Observed ratings 3.5 + user and item biases + a rank-3 taste (+ noise 0.3) of a fixed random 30% of
    (user, item) pairs: ``train`` 1,800, ``val`` 300 and ``test`` (all unobserved pairs). ``repeated``: 20%
    of the training rows were rated twice (two rows, two noisy ratings)."""
    p, q, bu, bi = _taste()
    order = torch.randperm(USERS * ITEMS, generator=_gen(72))
    rows = {"train": order[:1800], "val": order[1800:2100], "test": order[2100:]}[part]
    if repeated:
        rows = torch.cat([rows, rows[:360]])
    user, item = rows // ITEMS, rows % ITEMS
    noise = 0.3 * torch.randn(len(rows), generator=_gen(73 + len(rows)))
    return user, item, 3.5 + bu[user] + bi[item] + (p[user] * q[item]).sum(-1) / math.sqrt(3) + noise


# --- few-shot episodes of digits ----------------------------------------------------------------------------
WAYS, SHOTS, QUERIES = 10, 1, 4


class Episodes(Dataset):
    """``count`` episodes of ``WAYS`` of the 10 classes of a digits part: (support, query, query label)
    with labels relative to the episode (a random order of the drawn classes). Fresh per read, unless
    ``seed`` fixes them. ``queries_from_support`` (the BUG, validation): the queries are drawn from the
    support images."""

    def __init__(self, part: str, count: int, seed: int | None = None, queries_from_support: bool = False):
        self.x, self.y = digits(part)
        self.count, self.overlap = count, queries_from_support
        self.fixed = [self.episode(_gen(seed + i)) for i in range(count)] if seed is not None else None

    def __len__(self) -> int:
        return self.count

    def episode(self, g: torch.Generator | None = None):
        ways = torch.randperm(10, generator=g)[:WAYS]
        support, query = [], []
        for c in ways.tolist():
            pool = (self.y == c).nonzero().squeeze(1)
            pick = pool[torch.randperm(len(pool), generator=g)[: SHOTS + QUERIES]]
            support.append(self.x[pick[:SHOTS]])
            chosen = pick[torch.randint(SHOTS, (QUERIES,), generator=g)] if self.overlap else pick[SHOTS:]
            query.append(self.x[chosen])
        label = torch.arange(WAYS).repeat_interleave(QUERIES)
        return torch.stack(support), torch.cat(query), label

    def __getitem__(self, i: int):
        return self.fixed[i] if self.fixed is not None else self.episode()


# --- collocation points for u' = -1.5 u, u(0) = 1 on [0, 2] -------------------------------------------------
DECAY = 1.5


def collocation(n: int, seed: int) -> tuple[torch.Tensor]:
    """``n`` points in [0, 2] (the batch holds inputs only: the loss is the equation's residual)."""
    return (2 * torch.rand(n, 1, generator=_gen(seed)),)


# --- a chain MDP's replay buffer ----------------------------------------------------------------------------
STATES, GAMMA, GOAL_REWARD = 8, 0.9, 5.0


def transitions(n: int, seed: int) -> tuple[torch.Tensor, ...]:
    """``n`` uniformly random transitions of an 8-state chain: action 0 (left) pays 0.1 and returns to
    state 0; action 1 (right) pays 0 and moves on, and from the last state pays 5 and ends the episode
    (done = 1). Right is optimal everywhere: (state, action, reward, next state, done)."""
    g = _gen(seed)
    state, action = torch.randint(STATES, (n,), generator=g), torch.randint(2, (n,), generator=g)
    right, last = action == 1, state == STATES - 1
    reward = torch.where(right, torch.where(last, GOAL_REWARD, 0.0), 0.1)
    following = torch.where(right & ~last, state + 1, 0)
    return state, action, reward, following, (right & last).float()


# --- point sets on an image ---------------------------------------------------------------------------------
GRID, POINTS = 10, 3


def point_sets(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` 10x10 images of three Gaussian blobs at random places in [0.1, 0.9]^2, and the places (3, 2) in
    the order they were drawn (a set: no order means anything)."""
    g = _gen(seed)
    points = 0.1 + 0.8 * torch.rand(n, POINTS, 2, generator=g)
    axis = (torch.arange(GRID) + 0.5) / GRID
    grid = torch.stack(torch.meshgrid(axis, axis, indexing="ij"), -1).view(1, 1, -1, 2)
    image = torch.exp(-((grid - points[:, :, None]) ** 2).sum(-1) / (2 * 0.08**2)).sum(1)
    return image + 0.05 * torch.randn(image.shape, generator=g), points


def permute_points(image: torch.Tensor, points: torch.Tensor):
    """A fresh order of the set on every read."""
    return image, points[torch.randperm(POINTS)]


# --- images with a depth map --------------------------------------------------------------------------------
SIDE = 12


def depth_scenes(n: int, seed: int, holes: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` 1x12x12 images of three rectangles of random brightness; depth = 1 + 2 x the 3x3 local mean
    brightness (so always >= 1). ``holes``: that share of depth pixels is missing, stored as 0 (no sensor
    return: not visible in the image)."""
    g = _gen(seed)
    image = torch.zeros(n, 1, SIDE, SIDE)
    for _ in range(3):
        r, c = torch.randint(0, SIDE - 3, (2, n), generator=g)
        h, w = torch.randint(2, 6, (2, n), generator=g)
        level = torch.rand(n, generator=g)
        rows, cols = torch.arange(SIDE)[None, :, None], torch.arange(SIDE)[None, None, :]
        box = (rows >= r[:, None, None]) & (rows < (r + h)[:, None, None])
        box = box & (cols >= c[:, None, None]) & (cols < (c + w)[:, None, None])
        image[:, 0] = torch.maximum(image[:, 0], box * level[:, None, None])
    depth = 1 + 2 * F.avg_pool2d(image, 3, 1, 1, count_include_pad=False)
    depth = depth * (torch.rand(depth.shape, generator=g) >= holes)
    return image + 0.05 * torch.randn(image.shape, generator=g), depth


# --- spectrograms -------------------------------------------------------------------------------------------
BINS, FRAMES = 16, 24


def spectrograms(n: int, seed: int, upside_down: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` 1x16x24 magnitude spectrograms (bin 0 = the lowest frequency): a steady tone, an up-chirp, a
    down-chirp or a click (the class), at a random place, with a gain over three decades in exponential
    background noise. ``upside_down`` (the BUG): exported as an image, highest frequency in row 0."""
    g = _gen(seed)
    label = torch.randint(4, (n,), generator=g)
    f0 = torch.randint(3, BINS - 3, (n,), generator=g)
    t = torch.arange(FRAMES)
    slope = torch.tensor([0.0, 0.4, -0.4, 0.0])[label]
    track = (f0[:, None] + slope[:, None] * (t - FRAMES / 2)).round().long().clamp(0, BINS - 1)
    pattern = F.one_hot(track, BINS).transpose(1, 2).float()
    click = torch.zeros(n, BINS, FRAMES)
    click[torch.arange(n), :, torch.randint(2, FRAMES - 2, (n,), generator=g)] = 1.0
    pattern = torch.where((label == 3)[:, None, None], click, pattern)
    gain = 10 ** (3 * torch.rand(n, 1, 1, generator=g))
    noise = -torch.log(torch.rand(n, BINS, FRAMES, generator=g))
    spectrogram = (noise + 4 * gain * pattern)[:, None]
    return spectrogram.flip(-2) if upside_down else spectrogram, label


def mask_time(spectrogram: torch.Tensor, label: torch.Tensor):
    """SpecAugment-style, label-preserving: zeroes 1..4 random frames, never the loudest (a click's)."""
    loudest = int(spectrogram.sum((0, 1)).argmax())
    frames = torch.randperm(FRAMES)[: int(torch.randint(1, 5, ()))]
    frames = frames[frames != loudest]
    masked = spectrogram.clone()
    masked[..., frames] = 0
    return masked, label


# --- sensor streams (activity recognition) ------------------------------------------------------------------
WINDOW, STRIDE, CHANNELS, ACTIVITIES = 32, 16, 6, 6


def sensor_stream(steps: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A recording of ``steps`` x 6 channels (3 accelerometer axes, then 3 gyro axes: noisy derivatives of
    them) in activity segments of 100..300 steps; activity a shakes axis a % 3 at 2 or 4 cycles per window:
    (stream, activity per step)."""
    g = _gen(seed)
    activity = torch.empty(steps, dtype=torch.long)
    at = 0
    while at < steps:
        length = int(torch.randint(100, 301, (), generator=g))
        activity[at : at + length] = int(torch.randint(ACTIVITIES, (), generator=g))
        at += length
    t = torch.arange(steps).float()
    cycles = torch.where(activity >= 3, 4.0, 2.0)
    wave = torch.sin(2 * math.pi * cycles * t / WINDOW + torch.rand((), generator=g) * 6)
    acc = 0.5 * torch.randn(steps, 3, generator=g)
    acc[torch.arange(steps), activity % 3] += wave
    gyro = torch.diff(acc, dim=0, prepend=acc[:1]) + 0.3 * torch.randn(steps, 3, generator=g)
    return torch.cat([acc, gyro], 1), activity


def sensor_windows(steps: int, seed: int, label_by_window_number: bool = False):
    """Windows of 32 steps at stride 16, channels last, labelled by their middle step (the BUG,
    ``label_by_window_number``: by step i for window i, so labels and windows come apart)."""
    stream, activity = sensor_stream(steps, seed)
    windows = stream.unfold(0, WINDOW, STRIDE).transpose(1, 2).contiguous()
    number = torch.arange(len(windows))
    return windows, activity[number if label_by_window_number else number * STRIDE + WINDOW // 2]


# --- a knowledge graph: entities on a line, relations "k steps along" ---------------------------------------
ENTITIES, OFFSETS = 60, (1, 2, -1, -2)
RELATIONS = len(OFFSETS)


def triples(part: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All (h, r, h + offset r) inside the 60 entities (offsets +1, +2, -1, -2: relations come in inverse
    pairs), split 60/10/30 at random: (head, relation, tail)."""
    head = torch.arange(ENTITIES).repeat(RELATIONS)
    relation = torch.arange(RELATIONS).repeat_interleave(ENTITIES)
    tail = head + torch.tensor(OFFSETS)[relation]
    keep = (tail >= 0) & (tail < ENTITIES)
    head, relation, tail = head[keep], relation[keep], tail[keep]
    order = torch.randperm(len(head), generator=_gen(61))
    cut = int(0.6 * len(head)), int(0.7 * len(head))
    rows = {"train": order[: cut[0]], "val": order[cut[0] : cut[1]], "test": order[cut[1] :]}[part]
    return head[rows], relation[rows], tail[rows]


# --- a cascade: a first-stage quantity, then the target -----------------------------------------------------
def cascade_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` rows of 8 features; the first stage's target q is a function of them plus noise (0.7 of its
    spread is knowable); the final target depends on q: (features, q, target)."""
    g = _gen(seed)
    x = torch.randn(n, 8, generator=g)
    q = x[:, 0] + torch.sin(2 * x[:, 1]) + 0.8 * torch.randn(n, generator=g)
    return x, q, 2 * q + x[:, 2] * x[:, 3] + 0.1 * torch.randn(n, generator=g)


# --- priced rows: a log-normal target -----------------------------------------------------------------------
def priced_rows(n: int, seed: int, band: str = "mean") -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` rows of 8 features and a price exp(a smooth function + 0.4 noise), plus a 9th column, the price
    band (round log price): ``"true"`` (the BUG: known only after the sale) or ``"mean"`` (its training
    mean, what a new row can carry)."""
    g = _gen(seed)
    x = torch.randn(n, 8, generator=g)
    log_price = (
        3 + x[:, 0] + 0.5 * x[:, 1] * x[:, 2] + torch.tanh(x[:, 3]) + 0.4 * torch.randn(n, generator=g)
    )
    column = log_price.round() if band == "true" else torch.full((n,), 3.0)
    return torch.cat([x, column[:, None]], 1), log_price.exp()
