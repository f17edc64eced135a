"""Sealed gallery ZW's data (half ``zw2``): small seeded synthetic sets: chess-like 8 x 8 boards as 12 piece
planes with their material balance, 12-bin chroma vectors of major and minor triads, irregularly sampled
trajectories of a damped pendulum, objects seen by two sensors (either view missing at random, with a mask)
and small grid mazes with a start, a goal and their shortest-path length. Every builder is deterministic (its
own generator; the slow ones are cached and cloned); random augmentation at read time draws from the global
RNG."""

from __future__ import annotations

from collections import deque
from functools import cache

import torch
from torch.utils.data import Dataset

from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["Rows", "loaders"]


class Rows(Dataset):
    """Rows of equally long tensors, read as a tuple (``transform(*row)`` when a transform is given)."""

    def __init__(self, *tensors: torch.Tensor, transform=None) -> None:
        self.tensors, self.transform = tensors, transform

    def __len__(self) -> int:
        return len(self.tensors[0])

    def __getitem__(self, i: int):
        row = tuple(t[i] for t in self.tensors)
        return self.transform(*row) if self.transform else row


# --- board evaluation: 12 piece planes, white's six then black's six ---------------------------------------
PIECES = ("pawn", "knight", "bishop", "rook", "queen", "king")
VALUES = torch.tensor([1.0, 3.0, 3.0, 5.0, 9.0, 0.0])
MAX_COUNT = (8, 2, 2, 2, 1, 1)
ADVANCE = 0.2  # pawns: a fifth of a pawn per rank advanced


@cache
def _boards(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = _gen(seed)
    planes = torch.zeros(n, 12, 8, 8)
    for i in range(n):
        squares = torch.randperm(64, generator=g).tolist()
        pawn_squares = [s for s in squares if 8 <= s < 56]
        used: set[int] = set()
        for colour in range(2):
            for kind, most in enumerate(MAX_COUNT):
                count = 1 if kind == 5 else int(torch.randint(most + 1, (), generator=g))
                pool = pawn_squares if kind == 0 else squares
                for s in [s for s in pool if s not in used][:count]:
                    used.add(s)
                    planes[i, 6 * colour + kind, s // 8, s % 8] = 1.0
    return planes, evaluate(planes)


def boards(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` random positions: each side a king and random numbers of pawns (ranks 2..7), knights, bishops,
    rooks and a queen on distinct squares; (n, 12, 8, 8) planes (white's pawn..king, then black's; rank 1
    first) and the evaluation in pawns from white's side (:func:`evaluate`)."""
    planes, value = _boards(n, seed)
    return planes.clone(), value.clone()


def evaluate(planes: torch.Tensor) -> torch.Tensor:
    """Material (white's minus black's, pawn 1, knight and bishop 3, rook 5, queen 9) plus a fifth of a pawn
    for every rank a pawn has advanced from its side's second rank."""
    counts = planes.sum((-1, -2))
    material = (counts[:, :6] - counts[:, 6:]) @ VALUES
    rank = torch.arange(8).float()
    white_advance = (planes[:, 0].sum(-1) * (rank - 1)).sum(-1)
    black_advance = (planes[:, 6].sum(-1) * (6 - rank)).sum(-1)
    return material + ADVANCE * (white_advance - black_advance)


def colour_flip(planes: torch.Tensor) -> torch.Tensor:
    """The same position with the colours exchanged: white's planes become black's and back, and the ranks
    are mirrored (the evaluation is negated)."""
    return torch.cat([planes[6:], planes[:6]]).flip(-2)


def flip_colours(planes: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half the time, the position with the colours exchanged and its evaluation negated."""
    if torch.rand(()) < 0.5:
        return colour_flip(planes), -value
    return planes, value


def flip_colours_reversed(planes: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Half the time, the colours "exchanged" by reversing the plane axis (``planes.flip(0)``) and the ranks
    mirrored, the evaluation negated: the plane order is reversed too, so white's pawns become black's king,
    knights black's queen, bishops black's rook and so on."""
    if torch.rand(()) < 0.5:
        return planes.flip(0).flip(-2), -value
    return planes, value


# --- chord recognition from chroma: 24 classes, quality * 12 + root (0 major, 1 minor) ---------------------
CHORDS = 24


@cache
def _chroma(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = _gen(seed)
    label = torch.randint(CHORDS, (n,), generator=g)
    root, minor = label % 12, label // 12
    x = 0.35 * torch.rand(n, 12, generator=g)
    rows = torch.arange(n)
    x[rows, root] += 0.7 + 0.3 * torch.rand(n, generator=g)
    x[rows, (root + 4 - minor) % 12] += 0.4 + 0.4 * torch.rand(n, generator=g)
    x[rows, (root + 7) % 12] += 0.4 + 0.4 * torch.rand(n, generator=g)
    seventh = (root + 10 + (torch.rand(n, generator=g) < 0.5).long()) % 12  # minor or major seventh
    x[rows, seventh] += (torch.rand(n, generator=g) < 0.4) * 0.5 * torch.rand(n, generator=g)  # in 40%
    x[rows, (root + 2) % 12] += 0.3 * torch.rand(n, generator=g)  # the fifth's fifth (overtones)
    return x / x.amax(-1, keepdim=True), label


def chroma(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` 12-bin chroma vectors (C first, max-normalised) of a triad: the root, the third (4 semitones up
    for major, 3 for minor) and the fifth, with random strengths, a passing seventh in 40% of them, overtone
    leakage and broad noise; and the chord, ``quality * 12 + root`` (0 major, 1 minor)."""
    x, label = _chroma(n, seed)
    return x.clone(), label.clone()


def transpose(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random transposition: the chroma rotated k semitones up and the chord's root with it."""
    k = int(torch.randint(12, ()))
    return x.roll(k, -1), (label // 12) * 12 + (label % 12 + k) % 12


def transpose_chroma_only(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random transposition of the chroma written as a per-input transform: the label is left as it was."""
    return x.roll(int(torch.randint(12, ())), -1), label


def transpose_mod_24(x: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random transposition whose label is shifted as ``(label + k) % 24``: a root that passes B wraps into
    the other quality's block."""
    k = int(torch.randint(12, ()))
    return x.roll(k, -1), (label + k) % CHORDS


# --- learned dynamics on irregularly sampled trajectories (a damped pendulum) -------------------------------
STEPS, GAP = 16, (0.1, 0.6)  # samples per trajectory; the gaps between samples are uniform in GAP
DAMPING = 0.25


def pendulum(x: torch.Tensor) -> torch.Tensor:
    """The true vector field: angle' = velocity, velocity' = -sin(angle) - 0.25 velocity."""
    return torch.stack([x[..., 1], -torch.sin(x[..., 0]) - DAMPING * x[..., 1]], -1)


def rk4(field, x: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
    """One classical Runge-Kutta step of ``field`` from states ``x`` (..., 2) over gaps ``dt`` (...)."""
    h = dt[..., None]
    k1 = field(x)
    k2 = field(x + h / 2 * k1)
    k3 = field(x + h / 2 * k2)
    k4 = field(x + h * k3)
    return x + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)


@cache
def _trajectories(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = _gen(seed)
    x = torch.stack([4 * torch.rand(n, generator=g) - 2, 2 * torch.rand(n, generator=g) - 1], -1)
    gaps = GAP[0] + (GAP[1] - GAP[0]) * torch.rand(n, STEPS - 1, generator=g)
    states = [x]
    for j in range(STEPS - 1):
        for _ in range(20):
            x = rk4(pendulum, x, gaps[:, j] / 20)
        states.append(x)
    times = torch.cat([torch.zeros(n, 1), gaps.cumsum(-1)], -1)
    return times, torch.stack(states, 1)


def trajectories(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` trajectories of the damped pendulum from random states (angle in +-2, velocity in +-1: it
    swings, never over the top), sampled 16 times at irregular gaps of 0.1..0.6: the sample times (n, 16)
    and states (n, 16, 2)."""
    times, states = _trajectories(n, seed)
    return times.clone(), states.clone()


def transitions(n: int, seed: int, gap_before: bool = False):
    """Every consecutive pair of samples of ``n`` trajectories as (state, gap to the next sample, next
    state). With ``gap_before``, the gap is the "time since the previous sample" (``torch.diff(times,
    prepend=times[:, :1])``, the GRU-D convention), paired with the same sample: the gap before it, not the
    one to the state it is trained to predict."""
    times, states = trajectories(n, seed)
    if gap_before:
        gaps = torch.diff(times, prepend=times[:, :1])[:, :-1]
    else:
        gaps = torch.diff(times)
    return states[:, :-1].reshape(-1, 2), gaps.reshape(-1), states[:, 1:].reshape(-1, 2)


def windows(n: int, seed: int, length: int = 4):
    """Every window of ``length`` consecutive samples of ``n`` trajectories as (its first state, its
    ``length - 1`` gaps, its next ``length - 1`` states)."""
    times, states = trajectories(n, seed)
    gaps = torch.diff(times)
    starts = range(STEPS - length + 1)
    first = torch.cat([states[:, s] for s in starts])
    window_gaps = torch.cat([gaps[:, s : s + length - 1] for s in starts])
    later = torch.cat([states[:, s + 1 : s + length] for s in starts])
    return first, window_gaps, later


# --- multi-view fusion: two sensors of the same object, either missing at random ----------------------------
OBJECTS, LATENT, VIEW = 8, 6, 16


@cache
def _sensor_maps() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = _gen(1234)
    return (
        1.5 * torch.randn(OBJECTS, LATENT, generator=g),
        torch.randn(LATENT, VIEW, generator=g),
        torch.randn(LATENT, VIEW, generator=g),
    )


@cache
def _views(n: int, seed: int, sorted_b: bool):
    prototypes, to_a, to_b = _sensor_maps()
    g = _gen(seed)
    label = torch.randint(OBJECTS, (n,), generator=g)
    z = prototypes[label] + 0.7 * torch.randn(n, LATENT, generator=g)
    a = torch.tanh(z @ to_a / 2) + 0.3 * torch.randn(n, VIEW, generator=g)
    b = (z + 0.5 * torch.randn(n, LATENT, generator=g)) @ to_b / 3 + 0.3 * torch.randn(n, VIEW, generator=g)
    draw = torch.rand(n, generator=g)
    mask = torch.stack([draw >= 0.35, (draw < 0.35) | (draw >= 0.7)], -1).float()  # 35% no A, 35% no B
    if sorted_b:
        b = b[label.argsort(stable=True)]
    return a * mask[:, :1], b * mask[:, 1:], mask, label


def views(n: int, seed: int, sorted_b: bool = False):
    """``n`` objects of 8 kinds seen by two sensors: view A (16 features, a saturating map of the object's
    latent state) and view B (16 features, a linear map of a noisier copy); view A missing for 35% of the
    objects and view B for another 35% (never both), a missing view zero-filled. (view A, view B, presence
    mask (n, 2), kind). With ``sorted_b``, view B's rows come from a table sorted by kind (the view A table
    is in capture order): the rows of the two views no longer belong to the same object."""
    return tuple(t.clone() for t in _views(n, seed, sorted_b))


def drop_a_view(a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor, label: torch.Tensor):
    """Modality dropout: when both views are present, one of them is hidden (zeroed, its mask bit cleared)
    a third of the time."""
    if mask.sum() == 2 and torch.rand(()) < 1 / 3:
        mask = mask.clone()
        if torch.rand(()) < 0.5:
            a, mask[0] = torch.zeros_like(a), 0.0
        else:
            b, mask[1] = torch.zeros_like(b), 0.0
    return a, b, mask, label


# --- shortest-path length on grid mazes ---------------------------------------------------------------------
SIDE, WALLS = 7, 0.3
STEPS_4 = ((1, 0), (-1, 0), (0, 1), (0, -1))
STEPS_8 = (*STEPS_4, (1, 1), (1, -1), (-1, 1), (-1, -1))


def path_length(free: list[list[bool]], start: tuple[int, int], goal: tuple[int, int], moves=STEPS_4) -> int:
    """The number of moves from ``start`` to ``goal`` through free cells by breadth-first search (-1 if
    unreachable)."""
    seen = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            return seen[r, c]
        for dr, dc in moves:
            nr, nc = r + dr, c + dc
            if 0 <= nr < SIDE and 0 <= nc < SIDE and free[nr][nc] and (nr, nc) not in seen:
                seen[nr, nc] = seen[r, c] + 1
                queue.append((nr, nc))
    return -1


@cache
def _mazes(n: int, seed: int, diagonal: bool) -> tuple[torch.Tensor, torch.Tensor]:
    g = _gen(seed)
    planes, lengths = torch.zeros(n, 3, SIDE, SIDE), torch.zeros(n)
    i = 0
    while i < n:
        free = torch.rand(SIDE, SIDE, generator=g) >= WALLS
        cells = torch.nonzero(free)
        if len(cells) < 2:
            continue
        pick = torch.randperm(len(cells), generator=g)[:2]
        start, goal = (tuple(int(v) for v in cells[j]) for j in pick)
        grid = free.tolist()
        length = path_length(grid, start, goal)
        if length < 0:
            continue
        if diagonal:
            length = path_length(grid, start, goal, STEPS_8)
        planes[i, 0], planes[i, 1, start[0], start[1]], planes[i, 2, goal[0], goal[1]] = free.float(), 1, 1
        lengths[i] = length
        i += 1
    return planes, lengths


def mazes(n: int, seed: int, diagonal: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` 7 x 7 mazes (each cell a wall with probability 0.3) with a start and a goal connected through
    free cells: planes (free, start, goal) (n, 3, 7, 7), and the shortest path's number of moves between
    side-adjacent cells. With ``diagonal``, the search also takes diagonal moves (8-neighbours)."""
    planes, lengths = _mazes(n, seed, diagonal)
    return planes.clone(), lengths.clone()


def turn_maze(planes: torch.Tensor, length: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A random symmetry of the square (quarter turns and a mirror) of all three planes together: the
    path length is unchanged."""
    planes = planes.rot90(int(torch.randint(4, ())), (-2, -1))
    return (planes.flip(-1) if torch.rand(()) < 0.5 else planes), length
