"""Sealed gallery ZX1's data (half ``zx1``): small seeded synthetic sets (pins on a 16 x 16 canvas with a head
and a tail to locate, key-value passages with a question about one key, two moons for a density, an expert's
shortest paths in a walled gridworld, matches between players of hidden skill) and scikit-learn's digits in
few-shot episodes. Every builder is deterministic (its own generator); random augmentation at read time draws
from the global RNG."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset, Sampler

from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["digits", "loaders"]


class Rows(Dataset):
    """Rows of equally long tensors, read as a tuple (through ``transform(*row)`` when one is given)."""

    def __init__(self, *tensors: Any, transform: Callable[..., tuple] | None = None) -> None:
        self.tensors, self.transform = tensors, transform

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int) -> tuple:
        row = tuple(t[i] for t in self.tensors)
        return self.transform(*row) if self.transform else row


# --- keypoints: the head and the tail of a pin on a 16 x 16 canvas ------------------------------------------
SIDE, KEYPOINTS, PAD = 16, 2, 2


def pins(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` canvases (1, 16, 16), each with a pin: a faint line between a head (a bright round blob) and a
    tail (the line's bare end), of random length, direction and brightness, on a noisy background; and the
    two keypoints as (row, col) pairs, head first, (n, 2, 2)."""
    g = _gen(seed)
    centre = 5 + 5 * torch.rand(n, 2, generator=g)
    angle = 2 * math.pi * torch.rand(n, generator=g)
    half = 2.5 + torch.rand(n, 1, generator=g)
    direction = torch.stack([torch.sin(angle), torch.cos(angle)], -1)
    head, tail = centre + half * direction, centre - half * direction
    ys, xs = torch.meshgrid(torch.arange(SIDE).float(), torch.arange(SIDE).float(), indexing="ij")
    grid = torch.stack([ys, xs], -1).view(1, SIDE * SIDE, 2)
    along = ((grid - tail[:, None]) * direction[:, None]).sum(-1).clamp(min=0)
    along = torch.minimum(along, 2 * half)
    nearest = tail[:, None] + along[..., None] * direction[:, None]
    line = torch.exp(-(grid - nearest).pow(2).sum(-1) / (2 * 0.5**2))
    blob = torch.exp(-(grid - head[:, None]).pow(2).sum(-1) / (2 * 1.1**2))
    bright = 0.6 + 0.6 * torch.rand(n, 1, generator=g)
    image = bright * (0.6 * line + blob) + 0.15 * torch.randn(n, SIDE * SIDE, generator=g)
    return image.view(n, 1, SIDE, SIDE), torch.stack([head, tail], 1)


def heatmaps(points: torch.Tensor, sigma: float = 1.0, indexing: str = "ij") -> torch.Tensor:
    """One Gaussian heatmap per keypoint of ``points`` (..., K, 2), normalised to sum 1 over the canvas;
    (..., K, 16, 16). ``indexing`` is passed to ``torch.meshgrid`` to lay out the (row, col) grid."""
    ys, xs = torch.meshgrid(torch.arange(SIDE).float(), torch.arange(SIDE).float(), indexing=indexing)
    dy = ys - points[..., 0, None, None]
    dx = xs - points[..., 1, None, None]
    heat = torch.exp(-(dy**2 + dx**2) / (2 * sigma**2))
    return heat / heat.sum((-2, -1), keepdim=True)


def to_heatmaps(
    image: torch.Tensor, points: torch.Tensor, indexing: str = "ij"
) -> tuple[torch.Tensor, torch.Tensor]:
    """The canvas and its keypoints' heatmaps (the grid laid out with ``indexing``)."""
    return image, heatmaps(points, indexing=indexing)


def _shifted(image: torch.Tensor, oy: int, ox: int) -> torch.Tensor:
    padded = torch.nn.functional.pad(image, (PAD, PAD, PAD, PAD))
    return padded[..., oy : oy + SIDE, ox : ox + SIDE]


def crop(
    image: torch.Tensor, points: torch.Tensor, indexing: str = "ij"
) -> tuple[torch.Tensor, torch.Tensor]:
    """A random crop of the canvas padded by 2 (a shift of up to 2 pixels each way), its keypoints moved
    with it, and their heatmaps (the grid laid out with ``indexing``)."""
    oy, ox = (int(v) for v in torch.randint(2 * PAD + 1, (2,)))
    moved = points + PAD - torch.tensor([oy, ox]).float()
    return _shifted(image, oy, ox), heatmaps(moved, indexing=indexing)


def crop_points_moved_back(image: torch.Tensor, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random crop of the padded canvas whose keypoints are moved by the crop's offset the other way."""
    oy, ox = (int(v) for v in torch.randint(2 * PAD + 1, (2,)))
    moved = points - PAD + torch.tensor([oy, ox]).float()
    return _shifted(image, oy, ox), heatmaps(moved)


def flip_both(image: torch.Tensor, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random left-right and up-down flip of the canvas and of its keypoints' heatmaps, the same flips for
    both (a head stays a head: no keypoint changes name)."""
    heat = heatmaps(points)
    for dim in (-1, -2):
        if torch.rand(()) < 0.5:
            image, heat = image.flip(dim), heat.flip(dim)
    return image, heat


def to_points(image: torch.Tensor, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The canvas and its keypoints' coordinates (for a soft-argmax model)."""
    return image, points


# --- extractive span question answering over key-value passages ---------------------------------------------
PAD_ID, CLS, SEP = 0, 1, 2
KEYS = list(range(3, 11))  # eight field names
VALUES = list(range(11, 43))  # 32 value words
VOCAB, LENGTH = 43, 3 + 5 * 5 + 1  # always room for one PAD after the last field
Record = tuple[int, list[tuple[int, list[int]]]]  # the asked key, the fields (key, values)


def records(n: int, seed: int, unanswerable: float = 0.0) -> list[Record]:
    """``n`` passages of 3..5 fields, each a distinct key and 1..4 value words, and a question naming one of
    the keys (or, a share ``unanswerable`` of the time, a key the passage lacks)."""
    g = _gen(seed)
    out = []
    for _ in range(n):
        count = 3 + int(torch.randint(3, (), generator=g))
        keys = [KEYS[int(i)] for i in torch.randperm(len(KEYS), generator=g)]
        fields = []
        for key in keys[:count]:
            size = 1 + int(torch.randint(4, (), generator=g))
            fields.append((key, [VALUES[int(i)] for i in torch.randint(len(VALUES), (size,), generator=g)]))
        asked = keys[int(torch.randint(count, (), generator=g))]
        if float(torch.rand((), generator=g)) < unanswerable:
            asked = keys[count + int(torch.randint(len(KEYS) - count, (), generator=g))]
        out.append((asked, fields))
    return out


def _tokens(asked: int, fields: list[tuple[int, list[int]]]) -> tuple[torch.Tensor, dict[int, tuple]]:
    """[CLS, asked, SEP, key, values..., key, values..., PAD...] and each key's value span (inclusive)."""
    tokens, spans = [CLS, asked, SEP], {}
    for key, values in fields:
        tokens.append(key)
        spans[key] = (len(tokens), len(tokens) + len(values) - 1)
        tokens += values
    return torch.tensor(tokens + [PAD_ID] * (LENGTH - len(tokens))), spans


def encode(record: Record) -> tuple[torch.Tensor, torch.Tensor]:
    """The passage's tokens and the answer's (start, end) positions, both inclusive ((0, 0), the CLS
    position, when the passage lacks the asked key)."""
    asked, fields = record
    tokens, spans = _tokens(asked, fields)
    return tokens, torch.tensor(spans.get(asked, (0, 0)))


def encode_end_exclusive(record: Record) -> tuple[torch.Tensor, torch.Tensor]:
    """The tokens and the answer's span as a Python slice: (start, end + 1)."""
    tokens, span = encode(record)
    return tokens, span + torch.tensor([0, 1])


def _shuffled(fields: list) -> list:
    return [fields[int(i)] for i in torch.randperm(len(fields))]


def encode_shuffled(record: Record) -> tuple[torch.Tensor, torch.Tensor]:
    """The fields in a random order (the answer does not depend on it), then encoded."""
    asked, fields = record
    return encode((asked, _shuffled(fields)))


def encode_shuffled_after_spans(record: Record) -> tuple[torch.Tensor, torch.Tensor]:
    """The answer's span found in the passage as stored, then the fields shuffled and the tokens written."""
    asked, fields = record
    _, span = encode(record)
    tokens, _ = encode((asked, _shuffled(fields)))
    return tokens, span


class Passages(Dataset):
    """Records read as (tokens, span) through ``encoder``."""

    def __init__(self, items: list[Record], encoder: Callable[[Record], tuple] = encode) -> None:
        self.items, self.encoder = items, encoder

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.encoder(self.items[i])


# --- prototypical few-shot classification of digits (episodes) ----------------------------------------------
class Episodes(Sampler):
    """A batch sampler of few-shot episodes: ``way`` distinct classes, and for each in turn ``shot`` support
    digits then ``query`` query digits, all distinct; drawn afresh (or fixed with ``seed``). With
    ``perm_of_way`` the classes are drawn as ``torch.randperm(way)``: always the first ``way`` digits."""

    def __init__(
        self,
        labels: torch.Tensor,
        way: int = 5,
        shot: int = 5,
        query: int = 5,
        episodes: int = 60,
        seed: int | None = None,
        perm_of_way: bool = False,
    ) -> None:
        self.by_class = [torch.nonzero(labels == c)[:, 0] for c in range(10)]
        self.way, self.shot, self.query, self.episodes = way, shot, query, episodes
        self.perm_of_way = perm_of_way
        self.fixed = None
        if seed is not None:
            self.g = _gen(seed)
            self.fixed = [self.draw() for _ in range(episodes)]
        self.g = None

    def draw(self) -> list[int]:
        classes = torch.randperm(self.way if self.perm_of_way else 10, generator=self.g)[: self.way]
        batch = []
        for c in classes.tolist():
            members = self.by_class[c]
            chosen = members[torch.randperm(len(members), generator=self.g)]
            batch += chosen[: self.shot + self.query].tolist()
        return batch

    def __len__(self) -> int:
        return self.episodes

    def __iter__(self) -> Iterator[list[int]]:
        yield from self.fixed or (self.draw() for _ in range(self.episodes))


def episode_loader(part: str, seed: int | None = None, **sampler: Any) -> DataLoader:
    """Episodes of the ``part``'s digits, each one batch of rows (digit, class)."""
    x, y = digits(part)
    return DataLoader(Rows(x, y), batch_sampler=Episodes(y, seed=seed, **sampler))


def held_out_episodes(n: int, seed: int, way: int = 5, shot: int = 1, query: int = 5) -> list[torch.Tensor]:
    """``n`` held-out ``way``-way ``shot``-shot episodes of the test digits, laid out as the sampler lays
    them out (each class's support, then its queries); the queries' episode classes are
    ``arange(way).repeat_interleave(query)``."""
    x, y = digits("test")
    return [x[batch] for batch in Episodes(y, way, shot, query, n, seed=seed)]


# --- density estimation: two moons --------------------------------------------------------------------------
MOON_MEAN, MOON_STD = torch.tensor([0.5, 0.25]), torch.tensor([0.87, 0.5])


def moons(n: int, seed: int, scale: float = 1.0) -> torch.Tensor:
    """``n`` points of two interleaved half circles with Gaussian noise (0.08), standardised (then times
    ``scale``)."""
    g = _gen(seed)
    t = math.pi * torch.rand(n, generator=g)
    upper = torch.rand(n, generator=g) < 0.5
    first = torch.stack([torch.cos(t), torch.sin(t)], -1)
    second = torch.stack([1 - torch.cos(t), 0.5 - torch.sin(t)], -1)
    x = torch.where(upper[:, None], first, second) + 0.08 * torch.randn(n, 2, generator=g)
    return scale * (x - MOON_MEAN) / MOON_STD


def jitter(x: torch.Tensor) -> tuple[torch.Tensor]:
    """A fresh small Gaussian jitter (0.05) of the point per read."""
    return (x + 0.05 * torch.randn_like(x),)


# --- behaviour cloning in a walled gridworld ----------------------------------------------------------------
GRID = 7
WALLS = {(1, 1), (1, 2), (1, 3), (3, 3), (3, 4), (3, 5), (5, 1), (5, 2), (5, 4)}
FREE = [(r, c) for r in range(GRID) for c in range(GRID) if (r, c) not in WALLS]
MOVES = [(-1, 0), (1, 0), (0, -1), (0, 1)]  # the environment's actions: up, down, left, right
CLOCKWISE = [(-1, 0), (0, 1), (1, 0), (0, -1)]  # up, right, down, left


def step(cell: tuple[int, int], move: tuple[int, int]) -> tuple[int, int]:
    """The environment: a move into a wall or off the grid leaves the agent in place."""
    r, c = cell[0] + move[0], cell[1] + move[1]
    return (r, c) if 0 <= r < GRID and 0 <= c < GRID and (r, c) not in WALLS else cell


def _distances(goal: tuple[int, int]) -> dict[tuple[int, int], int]:
    dist, todo = {goal: 0}, deque([goal])
    while todo:
        cell = todo.popleft()
        for move in MOVES:
            nxt = step(cell, move)
            if nxt not in dist:
                dist[nxt] = dist[cell] + 1
                todo.append(nxt)
    return dist


DISTANCES = {goal: _distances(goal) for goal in FREE}


def expert(cell: tuple[int, int], goal: tuple[int, int], g: torch.Generator | None = None) -> tuple[int, int]:
    """A shortest-path move: the first of up, down, left, right that brings the agent closer (or, with a
    generator ``g``, one of those moves at random)."""
    dist = DISTANCES[goal]
    best = [move for move in MOVES if dist[step(cell, move)] < dist[cell]]
    return best[int(torch.randint(len(best), (), generator=g))] if g is not None else best[0]


def observe(cell: tuple[int, int], goal: tuple[int, int]) -> torch.Tensor:
    """The state: the agent's (row, col) and the goal's, as 4 floats (the policy encodes them itself)."""
    return torch.tensor([*cell, *goal], dtype=torch.float32)


def starts(n: int, seed: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """``n`` (start, goal) pairs of distinct free cells."""
    g = _gen(seed)
    out = []
    while len(out) < n:
        a, b = (FREE[int(i)] for i in torch.randint(len(FREE), (2,), generator=g))
        if a != b:
            out.append((a, b))
    return out


def demonstrations(
    n: int,
    seed: int,
    actions: list[tuple[int, int]] = MOVES,
    lag: int = 0,
    random_ties: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The expert's state-action pairs along ``n`` shortest paths: states (m, 4) and the index of the move
    in ``actions``. ``lag=1`` pairs each action with the state it led to instead of the state it was taken
    in; ``random_ties`` breaks ties between equally short moves at random."""
    g = _gen(seed + 1000)
    obs, labels = [], []
    for start, goal in starts(n, seed):
        cells, moves, cell = [start], [], start
        while cell != goal:
            move = expert(cell, goal, g if random_ties else None)
            cell = step(cell, move)
            cells.append(cell)
            moves.append(move)
        for cell, move in zip(cells[lag:], moves, strict=False):
            obs.append(observe(cell, goal))
            labels.append(actions.index(move))
    return torch.stack(obs), torch.tensor(labels)


def rollout_success(policy: Callable[[torch.Tensor], torch.Tensor], pairs: list) -> float:
    """The share of (start, goal) pairs from which the policy's moves (indices into the environment's
    ``MOVES``) reach the goal within twice the shortest path plus 4 steps, all pairs rolled out together."""
    cells = [start for start, _ in pairs]
    goals = [goal for _, goal in pairs]
    budget = max(2 * DISTANCES[goal][start] + 4 for start, goal in pairs)
    limits = [2 * DISTANCES[goal][start] + 4 for start, goal in pairs]
    done = [cell == goal for cell, goal in zip(cells, goals, strict=True)]
    for t in range(budget):
        actions = policy(torch.stack([observe(c, g) for c, g in zip(cells, goals, strict=True)])).tolist()
        for i, a in enumerate(actions):
            if not done[i] and t < limits[i]:
                cells[i] = step(cells[i], MOVES[a])
                done[i] = cells[i] == goals[i]
    return sum(done) / len(done)


# --- pairwise skill rating (Bradley-Terry) ------------------------------------------------------------------
PLAYERS = 40
SKILLS = 1.2 * torch.randn(PLAYERS, generator=_gen(100))
# the match features' effects: home advantage (+1 when the first player is at home, -1 when the second is)
# and the difference in rest days (standardised)
EFFECTS = torch.tensor([0.8, 0.5])


def matches(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` matches between two distinct players: rows (first player's id, second's id, home, rest-day
    difference) (n, 4), the first player's true win probability, and whether they won (a float)."""
    g = _gen(seed)
    a = torch.randint(PLAYERS, (n,), generator=g)
    b = (a + 1 + torch.randint(PLAYERS - 1, (n,), generator=g)) % PLAYERS
    home = torch.where(torch.rand(n, generator=g) < 0.5, 1.0, -1.0)
    feats = torch.stack([home, torch.randn(n, generator=g)], 1)
    p = torch.sigmoid(SKILLS[a] - SKILLS[b] + feats @ EFFECTS)
    won = (torch.rand(n, generator=g) < p).float()
    return torch.cat([torch.stack([a, b], 1).float(), feats], 1), p, won


def both_ways(x: torch.Tensor, won: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each match twice: as played and seen from the other side (ids swapped, features negated, result
    flipped)."""
    other = torch.cat([x[:, [1, 0]], -x[:, 2:]], 1)
    return torch.cat([x, other]), torch.cat([won, 1 - won])


def relabelled(x: torch.Tensor, *others: torch.Tensor) -> list[torch.Tensor]:
    """The match rows ``x`` and ``others`` with their ids re-encoded by a label encoder fitted on ``x``'s:
    codes in order of first appearance."""
    codes: dict[int, int] = {}
    for i in x[:, :2].reshape(-1).long().tolist():
        codes.setdefault(i, len(codes))
    out = []
    for rows in (x, *others):
        rows = rows.clone()
        rows[:, :2] = torch.tensor([float(codes[i]) for i in rows[:, :2].reshape(-1).long().tolist()]).view(
            -1, 2
        )
        out.append(rows)
    return out
