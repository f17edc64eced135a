"""Sealed gallery H's data: small seeded synthetic sets (a community graph with node splits, frame sequences
with letter runs for CTC, multiple-choice questions, speaker utterances, series with one change point,
implicit feedback, a seasonal series with changing noise) and scikit-learn's digits. Every builder is
deterministic (its own generator); random augmentation and sampling at read time draw from the global RNG."""

from __future__ import annotations

import math

import torch
from torch.utils.data import Dataset

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- a community graph for transductive node classification -------------------------------------------------
NODES, NODE_CLASSES, NODE_FEATURES = 400, 4, 16


def node_graph(edges_shifted: bool = False) -> dict[str, torch.Tensor]:
    """One graph of 400 nodes in 4 communities: noisy features around a community centre, 3 edges drawn per
    node (60% inside its community), made undirected; masks split the nodes 30/20/50 (train/val/test).
    ``edges_shifted`` (the BUG): the 0-based edge list is read as 1-based (``- 1``), so every edge lands one
    node over (node 0's on the last node, by negative indexing)."""
    g = _gen(41)
    label = torch.randint(NODE_CLASSES, (NODES,), generator=g)
    centres = torch.randn(NODE_CLASSES, NODE_FEATURES, generator=g)
    x = 0.45 * centres[label] + torch.randn(NODES, NODE_FEATURES, generator=g)
    members = [torch.nonzero(label == c).flatten() for c in range(NODE_CLASSES)]
    src = torch.arange(NODES).repeat_interleave(3)
    dst = torch.randint(NODES, (len(src),), generator=g)
    inside = torch.rand(len(src), generator=g) < 0.6
    for i in torch.nonzero(inside).flatten().tolist():
        group = members[int(label[src[i]])]
        dst[i] = group[int(torch.randint(len(group), (), generator=g))]
    if edges_shifted:
        src, dst = src - 1, dst - 1
    adj = torch.zeros(NODES, NODES)
    adj[src, dst] = 1.0
    adj = ((adj + adj.T) > 0).float().fill_diagonal_(0)
    split = torch.rand(NODES, generator=g)
    masks = {"train": split < 0.3, "val": (split >= 0.3) & (split < 0.5), "test": split >= 0.5}
    return {"x": x, "adj": adj, "label": label, **masks}


def graph_rows(graph: dict[str, torch.Tensor], part: str, copies: int, unknown_as_minus_one: bool = False):
    """The whole graph ``copies`` times as rows (x, adj, label, mask of ``part``); with
    ``unknown_as_minus_one`` the rows are (x, adj, label) with every label outside ``part`` set to -1."""
    label = graph["label"]
    if unknown_as_minus_one:
        label = torch.where(graph[part], label, -1)
        columns = (graph["x"], graph["adj"], label)
    else:
        columns = (graph["x"], graph["adj"], label, graph[part])
    return Rows(*(column.expand(copies, *column.shape) for column in columns))


# --- digit pairs (verification) -----------------------------------------------------------------------------
def digit_pairs(part: str, n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` fixed pairs of the ``part`` digits, half of the same digit and half of different ones:
    (a, b, same)."""
    g = _gen(seed)
    x, y = digits(part)
    first = torch.randint(len(x), (n,), generator=g)
    same = torch.arange(n) % 2 == 0
    second = torch.empty(n, dtype=torch.long)
    for i in range(n):
        wanted = (y == y[first[i]]) if same[i] else (y != y[first[i]])
        wanted[first[i]] = False
        pool = torch.nonzero(wanted).flatten()
        second[i] = pool[int(torch.randint(len(pool), (), generator=g))]
    return x[first], x[second], same.long()


class RandomPairs(Dataset):
    """Each read pairs digit ``i`` with a random other digit, of the same class half the time (drawn afresh
    on every read): (a, b, same)."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y
        self.by_class = [torch.nonzero(y == c).flatten() for c in range(10)]

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        same = bool(torch.rand(()) < 0.5)
        if same:
            pool = self.by_class[int(self.y[i])]
        else:
            pool = torch.nonzero(self.y != self.y[i]).flatten()
        j = pool[int(torch.randint(len(pool), ()))]
        return self.x[i], self.x[j], torch.tensor(int(same))


# --- frame sequences of letter runs (CTC) -------------------------------------------------------------------
LETTERS, FRAME_DIM, FRAMES, MAX_LABELS = 5, 8, 32, 5


def letter_frames(n: int, seed: int, padded: bool = False) -> tuple[torch.Tensor, ...]:
    """``n`` sequences of 2..5 letters (0..4; a letter repeats its predecessor 35% of the time), each spoken
    as a run of 2..4 frames of its prototype (plus noise) with 1..2 silent frames around every run: (frames
    (n, 32, 8), letters padded with 0 to 5, frame counts, letter counts). The tail is silence, or zeros with
    ``padded`` (the frame count then stops where the speech does)."""
    g = _gen(seed)
    prototypes = 1.5 * torch.randn(LETTERS, FRAME_DIM, generator=_gen(77))
    frames = 0.4 * torch.randn(n, FRAMES, FRAME_DIM, generator=g)
    letters = torch.zeros(n, MAX_LABELS, dtype=torch.long)
    frame_counts, letter_counts = torch.full((n,), FRAMES), torch.zeros(n, dtype=torch.long)
    for i in range(n):
        count = int(torch.randint(2, MAX_LABELS + 1, (), generator=g))
        at = int(torch.randint(1, 3, (), generator=g))
        for k in range(count):
            repeat = k > 0 and bool(torch.rand((), generator=g) < 0.35)
            letter = int(letters[i, k - 1]) if repeat else int(torch.randint(LETTERS, (), generator=g))
            run = int(torch.randint(2, 5, (), generator=g))
            frames[i, at : at + run] += prototypes[letter]
            letters[i, k] = letter
            at += run + int(torch.randint(1, 3, (), generator=g))
        letter_counts[i] = count
        if padded:
            frame_counts[i] = at
            frames[i, at:] = 0.0
    return frames, letters, frame_counts, letter_counts


# --- multiple-choice questions ------------------------------------------------------------------------------
OPTIONS, MC_DIM = 4, 8


def choices(n: int, seed: int, variable: bool = False) -> tuple[torch.Tensor, ...]:
    """``n`` questions: a context vector, 4 option vectors and the index of the one option that answers it
    (the highest o . tanh(A c)); with ``variable`` some questions have only 2 or 3 options (the rest are zero
    padding, off in the mask): (context, options, mask, answer)."""
    g = _gen(seed)
    a = torch.randn(MC_DIM, MC_DIM, generator=_gen(78)) / math.sqrt(MC_DIM)
    context = torch.randn(n, MC_DIM, generator=g)
    options = torch.randn(n, OPTIONS, MC_DIM, generator=g)
    mask = torch.ones(n, OPTIONS, dtype=torch.bool)
    if variable:
        count = torch.randint(2, OPTIONS + 1, (n,), generator=g)
        mask = torch.arange(OPTIONS) < count[:, None]
        options = options * mask[..., None]
    fit = (options @ torch.tanh(context @ a.T)[..., None]).squeeze(-1)
    answer = fit.masked_fill(~mask, float("-inf")).argmax(-1)
    return context, options, mask, answer


# --- speaker utterances -------------------------------------------------------------------------------------
SPEAKERS, FEATURE_DIM, UTTERANCE = 16, 12, 24


def utterances(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` utterances of 24 frames x 12 features: the speaker's mean voice plus a small per-recording
    channel offset, with frame noise of the speaker's own spread per feature (0.5..1.5): (frames, speaker)."""
    voices = _gen(79)
    mean = torch.randn(SPEAKERS, FEATURE_DIM, generator=voices)
    spread = 0.5 + torch.rand(SPEAKERS, FEATURE_DIM, generator=voices)
    g = _gen(seed)
    speaker = torch.randint(SPEAKERS, (n,), generator=g)
    channel = 0.3 * torch.randn(n, 1, FEATURE_DIM, generator=g)
    noise = torch.randn(n, UTTERANCE, FEATURE_DIM, generator=g) * spread[speaker][:, None]
    return mean[speaker][:, None] + channel + noise, speaker


def recordings(seed: int, per_speaker: int, each: int = 10) -> tuple[torch.Tensor, ...]:
    """``per_speaker`` recordings of every speaker, ``each`` utterances cut from each; a recording's channel
    (its microphone and room: std 0.8) is shared by all its utterances: (frames, speaker, recording number
    within the speaker, 0..per_speaker-1)."""
    voices = _gen(79)
    mean = torch.randn(SPEAKERS, FEATURE_DIM, generator=voices)
    spread = 0.5 + torch.rand(SPEAKERS, FEATURE_DIM, generator=voices)
    g = _gen(seed)
    speaker = torch.arange(SPEAKERS).repeat_interleave(per_speaker * each)
    recording = torch.arange(per_speaker).repeat_interleave(each).repeat(SPEAKERS)
    channel = 0.8 * torch.randn(SPEAKERS * per_speaker, 1, FEATURE_DIM, generator=g)
    channel = channel.repeat_interleave(each, 0)
    noise = torch.randn(len(speaker), UTTERANCE, FEATURE_DIM, generator=g) * spread[speaker][:, None]
    return mean[speaker][:, None] + channel + noise, speaker, recording


# --- series with one change in level ------------------------------------------------------------------------
SERIES = 64


def level_changes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` series of 64 steps whose level jumps once, by 0.6..2 either way, at step 8..55 (the index of the
    first step of the new level), under noise 0.5 and a gentle random slope: (series (n, 1, 64), change)."""
    g = _gen(seed)
    change = torch.randint(8, SERIES - 8, (n,), generator=g)
    jump = (0.6 + 1.4 * torch.rand(n, generator=g)) * torch.where(torch.rand(n, generator=g) < 0.5, -1, 1)
    t = torch.arange(SERIES)
    slope = 0.01 * torch.randn(n, 1, generator=g)
    series = slope * t + jump[:, None] * (t >= change[:, None]) + 0.5 * torch.randn(n, SERIES, generator=g)
    return series[:, None], change


def reverse_time(series: torch.Tensor, change: torch.Tensor, move_change: bool = True):
    """Half the time, the series backwards (a level change is one either way); the change's index becomes
    64 - change, unless ``move_change`` is off (the BUG)."""
    if bool(torch.rand(()) < 0.5):
        return series.flip(-1), SERIES - change if move_change else change
    return series, change


# --- implicit feedback: who clicked what --------------------------------------------------------------------
USERS, ITEMS, LIKED = 120, 200, 20


def clicks() -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """Each of 120 users clicked 20 of 200 items, drawn by a hidden rank-4 taste; per user 14 clicks train,
    2 validate and 4 are held out: the (user, item) pairs of each part."""
    g = _gen(80)
    taste = torch.randn(USERS, 4, generator=g) @ torch.randn(4, ITEMS, generator=g)
    parts: dict[str, list[tuple[int, int]]] = {"train": [], "val": [], "test": []}
    for user in range(USERS):
        liked = torch.multinomial(torch.softmax(1.5 * taste[user], 0), LIKED, generator=g).tolist()
        for part, items in (("train", liked[:14]), ("val", liked[14:16]), ("test", liked[16:])):
            parts[part] += [(user, item) for item in items]
    return {part: tuple(torch.tensor(pairs).T) for part, pairs in parts.items()}  # type: ignore[misc]


def factorised(items: torch.Tensor) -> torch.Tensor:
    """Item codes in order of first appearance (what ``pandas.factorize`` returns)."""
    codes: dict[int, int] = {}
    return torch.tensor([codes.setdefault(int(item), len(codes)) for item in items])


def with_random_negative(user: torch.Tensor, item: torch.Tensor):
    """A (user, clicked item, random item) triple: the negative is drawn afresh on every read."""
    return user, item, torch.randint(ITEMS, ())


# --- a seasonal series with changing noise (probabilistic forecasting) --------------------------------------
LOOKBACK, PERIOD = 24, 24


def noisy_season(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Windows of 24 past values and the next value of a series with a 24-step season whose noise itself
    follows the season (std 0.05..0.5): (window, next value)."""
    g = _gen(seed)
    t = torch.arange(n + LOOKBACK).float() + float(torch.randint(PERIOD, (), generator=g))
    phase = 2 * math.pi * t / PERIOD
    std = 0.05 + 0.45 * (1 + torch.sin(phase + 1.0)) / 2
    series = torch.sin(phase) + 0.4 * torch.sin(2 * phase) + std * torch.randn(len(t), generator=g)
    windows = series.unfold(0, LOOKBACK, 1)[:n]
    return windows, series[LOOKBACK : LOOKBACK + n]
