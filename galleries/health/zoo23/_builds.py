"""Builders of zoo 23's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data, all made in code: synthetic 8x8 chess-like boards and their evaluations, 12-bin chroma
vectors of 48 chords, irregularly sampled trajectories of a damped pendulum, two sensor views of a latent
state with a missing-view mask, and small grid mazes with their shortest-path lengths (breadth-first search).
"""

from __future__ import annotations

import functools
import math
from collections import deque

import torch
from torch import Tensor, nn
from torch.optim import ASGD, SGD, Adadelta, Adam, Adamax, NAdam
from torch.optim.lr_scheduler import (
    ExponentialLR,
    LambdaLR,
    LinearLR,
    MultiStepLR,
    ReduceLROnPlateau,
    SequentialLR,
)
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo23._models import (
    MLP,
    BoardNet,
    FlowTask,
    FusionNet,
    ManualFusionTask,
    MazeCNN,
    Task,
    VectorField,
)

# ------------------------------------------------------------------------------------------------ helpers


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(*tensors: Tensor, batch: int, shuffle: bool = True) -> DataLoader:
    """A loader of fresh copies of ``tensors`` (a builder may break them in place)."""
    return DataLoader(TensorDataset(*(t.clone() for t in tensors)), batch_size=batch, shuffle=shuffle)


# ------------------------------------------------------------------------------------------------ boards
VALUES = (1.0, 3.0, 3.0, 5.0, 9.0, 0.0)  # pawn, knight, bishop, rook, queen, king
CENTRE = {r * 8 + c for r in range(2, 6) for c in range(2, 6)}


def _board(g: torch.Generator) -> tuple[Tensor, float]:
    """One random position: each side a king and random numbers of pawns (ranks 2-7 only), knights, bishops,
    rooks and a queen on distinct squares; its evaluation in pawns (white's view): material, pawn advancement,
    centralised knights, the bishop pair."""
    planes = torch.zeros(12, 64)
    squares = torch.randperm(64, generator=g).tolist()
    score = 0.0
    for side, sign in ((0, 1.0), (1, -1.0)):
        counts = [int(torch.randint(0, hi, (), generator=g)) for hi in (9, 3, 3, 3, 2)] + [1]
        for piece, count in enumerate(counts):
            for _ in range(count):
                if piece == 0:  # pawns never stand on the first or last rank
                    at = next((s for s in squares if 8 <= s < 56), None)
                    if at is None:
                        continue
                    squares.remove(at)
                    rank = at // 8 if side == 0 else 7 - at // 8
                    score += sign * 0.15 * (rank - 1)
                else:
                    at = squares.pop()
                    if piece == 1 and at in CENTRE:
                        score += sign * 0.4
                planes[6 * side + piece, at] = 1.0
                score += sign * VALUES[piece]
        if counts[2] == 2:
            score += sign * 0.5
    return planes.view(12, 8, 8), score


@functools.cache
def _boards(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    g = _gen(seed)
    boards, scores = zip(*(_board(g) for _ in range(rows)))
    y = torch.tensor(scores).unsqueeze(1) + 0.2 * torch.randn(rows, 1, generator=g)
    return torch.stack(boards), y


BOARD_SCALE = 11.0  # pawns: the evaluations' spread (std) is ~11 pawns


def boards(units: str = "scaled") -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """3200 training and 400 validation positions; the evaluation ``"scaled"`` (pawns / 11, ~unit variance)
    or in ``"centipawns"``."""
    (x, y), (vx, vy) = _boards(3200, 23), _boards(400, 24)
    scale = {"scaled": 1 / BOARD_SCALE, "centipawns": 100.0}[units]
    return (x, y * scale), (vx, vy * scale)


# ------------------------------------------------------------------------------------------------ chords
QUALITIES = ((0, 4, 7), (0, 3, 7), (0, 3, 6), (0, 5, 7))  # major, minor, diminished, suspended fourth
CHORDS = len(QUALITIES) * 12


@functools.cache
def chords(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` 12-bin chroma vectors and their chord (48 classes: 12 roots x major, minor, diminished, sus4):
    the chord's notes at random loudness, each note's third and fifth harmonics leaking into the bins 7 and 4
    semitones up, a random passing note, noise; scaled to a maximum of 1."""
    g = _gen(seed)
    label = torch.randint(0, CHORDS, (rows,), generator=g)
    root, quality = label % 12, label // 12
    chroma = torch.zeros(rows, 12)
    for q, notes in enumerate(QUALITIES):
        for note in notes:
            bins = (root + note) % 12
            loud = torch.where(quality == q, 0.5 + 0.5 * torch.rand(rows, generator=g), torch.zeros(rows))
            chroma[torch.arange(rows), bins] += loud
            chroma[torch.arange(rows), (bins + 7) % 12] += 0.3 * loud
            chroma[torch.arange(rows), (bins + 4) % 12] += 0.15 * loud
    passing = torch.randint(0, 12, (rows,), generator=g)
    chroma[torch.arange(rows), passing] += 0.4 * torch.rand(rows, generator=g)
    chroma = chroma + 0.1 * torch.rand(rows, 12, generator=g)
    return chroma / chroma.amax(1, keepdim=True), label


# ------------------------------------------------------------------------------------------------ dynamics
FINE_DT = 0.01


def _pendulum(state: Tensor) -> Tensor:
    theta, omega = state.unbind(1)
    return torch.stack([omega, -torch.sin(theta) - 0.15 * omega], 1)


@functools.cache
def trajectories(count: int, seed: int, length: float = 12.0) -> tuple[Tensor, Tensor, Tensor]:
    """``count`` damped-pendulum trajectories sampled at irregular times (gaps of 0.05 to 1.0, exponential
    with mean 0.3): consecutive samples as ``(x, dt, x_next)`` rows, trajectory by trajectory in time
    order."""
    g = _gen(seed)
    state = torch.stack(
        [4.0 * torch.rand(count, generator=g) - 2.0, 3.0 * torch.rand(count, generator=g) - 1.5], 1
    )
    path = [state]
    for _ in range(int(length / FINE_DT)):
        k1 = _pendulum(state)
        k2 = _pendulum(state + FINE_DT / 2 * k1)
        k3 = _pendulum(state + FINE_DT / 2 * k2)
        k4 = _pendulum(state + FINE_DT * k3)
        state = state + FINE_DT / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        path.append(state)
    fine = torch.stack(path, 1)  # (count, steps + 1, 2)
    xs, dts, nexts = [], [], []
    for i in range(count):
        gaps = (-30.0 * torch.rand(200, generator=g).log()).round().clamp(5, 100).long()
        times = torch.cat([torch.zeros(1, dtype=torch.long), gaps.cumsum(0)])
        times = times[times < fine.shape[1]]
        xs.append(fine[i, times[:-1]])
        nexts.append(fine[i, times[1:]])
        dts.append((times[1:] - times[:-1]).float() * FINE_DT)
    return torch.cat(xs), torch.cat(dts), torch.cat(nexts)


# ------------------------------------------------------------------------------------------------ fusion
@functools.cache
def _fusion_maps() -> tuple[Tensor, Tensor, Tensor]:
    g = _gen(230)
    w = torch.randn(6, 8, generator=g)
    a = torch.randn(6, 16, generator=g) * torch.tensor([1.0, 1.0, 1.0, 1.0, 0.1, 0.1]).unsqueeze(1)
    b = torch.randn(6, 12, generator=g) * torch.tensor([0.1, 0.1, 1.0, 1.0, 1.0, 1.0]).unsqueeze(1)
    return w, a, b


@functools.cache
def fusion(rows: int, seed: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Two sensor views of a 6-d latent state and its class (8, the argmax of a fixed linear map): view A (16
    channels) sees mostly the first four latent dimensions through a tanh, view B (12) mostly the last four;
    in a quarter of the rows view A is missing, in another quarter view B (zeros, flagged in the ``(N, 2)``
    mask). Returns ``(view_a, view_b, mask, label)``."""
    w, a, b = _fusion_maps()
    g = _gen(seed)
    z = torch.randn(rows, 6, generator=g)
    label = (z @ w).argmax(1)
    xa = torch.tanh(z @ a / 1.5) + 0.1 * torch.randn(rows, 16, generator=g)
    xb = z @ b / 2.0 + 0.1 * torch.randn(rows, 12, generator=g)
    which = torch.rand(rows, generator=g)
    mask = torch.stack([(which >= 0.25).float(), (which < 0.25) | (which >= 0.5)], 1).float()
    return xa * mask[:, :1], xb * mask[:, 1:], mask, label


# ------------------------------------------------------------------------------------------------ mazes
SIDE = 8


def shortest_path(walls: list[list[int]], start: tuple[int, int], goal: tuple[int, int]) -> int:
    """Breadth-first search on a 4-connected grid: the number of moves from ``start`` to ``goal`` (-1:
    none)."""
    seen = {start: 0}
    queue = deque([start])
    while queue:
        r, c = queue.popleft()
        if (r, c) == goal:
            return seen[(r, c)]
        for nr, nc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
            if 0 <= nr < SIDE and 0 <= nc < SIDE and not walls[nr][nc] and (nr, nc) not in seen:
                seen[(nr, nc)] = seen[(r, c)] + 1
                queue.append((nr, nc))
    return -1


def maze_text(rows: int, seed: int) -> str:
    """``rows`` solvable mazes as a text file would hold them: 8 lines of ``#`` (wall), ``.``, ``S`` and
    ``G`` each, a blank line between mazes."""
    g = _gen(seed)
    mazes: list[str] = []
    while len(mazes) < rows:
        walls = (torch.rand(SIDE, SIDE, generator=g) < 0.3).int().tolist()
        free = [(r, c) for r in range(SIDE) for c in range(SIDE) if not walls[r][c]]
        i, j = torch.randperm(len(free), generator=g)[:2].tolist()
        start, goal = free[i], free[j]
        if shortest_path(walls, start, goal) < 0:
            continue
        grid = [["#" if w else "." for w in row] for row in walls]
        grid[start[0]][start[1]], grid[goal[0]][goal[1]] = "S", "G"
        mazes.append("\n".join("".join(row) for row in grid))
    return "\n\n".join(mazes)


def parse_maze(block: str) -> tuple[Tensor, float]:
    """One maze's text: its ``(3, 8, 8)`` planes (walls, start, goal) and its shortest-path length."""
    lines = block.split("\n")
    planes = torch.zeros(3, SIDE, SIDE)
    walls = [[int(ch == "#") for ch in line] for line in lines]
    for r, line in enumerate(lines):
        for c, ch in enumerate(line):
            if ch in "#SG":
                planes["#SG".index(ch), r, c] = 1.0
    start = next((r, c) for r, line in enumerate(lines) for c, ch in enumerate(line) if ch == "S")
    goal = next((r, c) for r, line in enumerate(lines) for c, ch in enumerate(line) if ch == "G")
    return planes, float(shortest_path(walls, start, goal))


PATH_MEAN, PATH_STD = 6.0, 3.5  # the path lengths' rough spread: the target is standardised with these


@functools.cache
def mazes(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    planes, lengths = zip(*(parse_maze(b) for b in maze_text(rows, seed).split("\n\n")))
    return torch.stack(planes), (torch.tensor(lengths).unsqueeze(1) - PATH_MEAN) / PATH_STD


class MazeFile(Dataset):
    """Mazes read lazily from their text file, each parsed (and solved) when asked for: ``reparse``: every
    item splits the whole file's text again to find its maze (the split meant for ``__init__`` left in
    ``__getitem__``); else the file is split once."""

    def __init__(self, text: str, reparse: bool) -> None:
        self.text, self.reparse = text, reparse
        self.blocks = text.split("\n\n")

    def __len__(self) -> int:
        return len(self.blocks)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        if self.reparse:
            planes, length = parse_maze(self.text.split("\n\n")[i])
        else:
            planes, length = parse_maze(self.blocks[i])
        return planes, torch.tensor([(length - PATH_MEAN) / PATH_STD])


class ShardBatches(Dataset):
    """Batches stored whole, as a sharded pipeline writes them (one item = one batch): load with
    ``batch_size=None``, shuffled shard by shard."""

    def __init__(self, *tensors: Tensor, batch: int) -> None:
        self.batches = list(zip(*(t.split(batch) for t in tensors)))

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int) -> tuple[Tensor, ...]:
        return self.batches[i]


# ------------------------------------------------------------------------------------------------ tasks
def opt(cls, **kw):
    """``make_optimizer``: ``cls`` over all of a network's parameters."""
    return lambda net: cls(net.parameters(), **kw)


def _board_task(make_optimizer, net=None, schedule=None, units: str = "scaled", batch: int = 32):
    (x, y), (vx, vy) = boards(units)
    model = Task(net if net is not None else BoardNet(), "mse", make_optimizer, schedule)
    return model, loader(x, y, batch=batch), loader(vx, vy, batch=400, shuffle=False)


def _chord_task(make_optimizer, net=None, rows: int = 4800, labels=None, batch: int = 48, schedule=None):
    x, y = chords(4800, 1)
    x, y = x[:rows], y[:rows]
    if labels is not None:
        y = labels(y)
    vx, vy = chords(960, 2)
    model = Task(net if net is not None else MLP([12, 128, 128, CHORDS]), "ce", make_optimizer, schedule)
    return model, loader(x, y, batch=batch), loader(vx, vy, batch=960, shuffle=False)


def _flow_task(make_optimizer, schedule=None, data=None, batch: int = 64, shuffle: bool = True):
    x, dt, x_next = data if data is not None else trajectories(160, 0)
    model = FlowTask(VectorField(), make_optimizer, schedule)
    return (
        model,
        loader(x, dt, x_next, batch=batch, shuffle=shuffle),
        loader(*trajectories(40, 1), batch=2000, shuffle=False),
    )


def _fusion_task(make_optimizer, schedule=None, net=None, model=None, train=None):
    views = fusion(3200, 0)
    model = (
        model
        if model is not None
        else Task(net if net is not None else FusionNet(), "ce", make_optimizer, schedule)
    )
    train = train if train is not None else loader(*views, batch=32)
    return model, train, loader(*fusion(800, 1), batch=800, shuffle=False)


def _maze_task(make_optimizer, net=None, val_rows: int = 400, train=None):
    x, y = mazes(3200, 0)
    vx, vy = mazes(400, 1)
    model = Task(net if net is not None else MazeCNN(24, 3), "mse", make_optimizer)
    train = train if train is not None else loader(x, y, batch=32)
    return model, train, loader(vx[:val_rows], vy[:val_rows], batch=400, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def chords_shuffled_apart(apart: bool = True):
    """Chords, NAdam ``3e-3`` with decoupled weight decay; the training chroma rows were shuffled in place
    by one permutation and the labels by another (two ``randperm`` calls), so no label matches its chroma."""

    def labels(y: Tensor) -> Tensor:
        return y[torch.randperm(len(y), generator=_gen(31))] if apart else y

    return _chord_task(opt(NAdam, lr=3e-3, weight_decay=1e-2, decoupled_weight_decay=True), labels=labels)


def chords_adadelta(lr: float = 1e-3):
    """Chords, Adadelta at ``1e-3`` (Adam's LR copied in; Adadelta's LR is a multiplier meant ~1.0)."""
    return _chord_task(opt(Adadelta, lr=lr))


PRIOR_BIAS = -math.log((1 - 0.01) / 0.01)  # a prior-probability bias for rare positives, ~-4.6


def chords_prior_bias(every_layer: bool = True):
    """Chords, Adam ``3e-3``; an init loop copied from a multi-label note detector, meant to set the prior
    bias ``-log(99)`` on the output layer, sets it on every ``nn.Linear``: every ReLU starts (and stays)
    dead."""
    net = MLP([12, 128, 128, CHORDS])
    layers = [m for m in net.modules() if isinstance(m, nn.Linear)]
    for m in layers if every_layer else layers[-1:]:
        nn.init.constant_(m.bias, PRIOR_BIAS)
    return _chord_task(opt(Adam, lr=3e-3), net)


DUPLICATE_ROWS = (60 * 64 + 21, 61 * 64 + 5)  # read in time order: in batches 60 and 61


def flow_duplicate_timestamps(duplicates: bool = True):
    """Pendulum trajectories read in time order, Adam ``3e-3``; two samples were logged twice (same time,
    same state) when two loggers were merged, so two rows have ``dt = 0`` and the loss, divided by ``dt``,
    is ``0 / 0``."""
    x, dt, x_next = (t.clone() for t in trajectories(160, 0))
    if duplicates:
        for row in DUPLICATE_ROWS:
            dt[row], x_next[row] = 0.0, x[row]
    return _flow_task(opt(Adam, lr=3e-3), data=(x, dt, x_next), shuffle=False)


def board_asgd(lr: float = 10.0):
    """Boards, ASGD at ``10.0`` (meant ``0.1``)."""
    return _board_task(opt(ASGD, lr=lr))


def board_resumed(nan_rows: bool = True):
    """Boards, Adamax ``2e-3``, warm-started from the ``last.ckpt`` of an earlier run saved after it
    diverged: three rows of the first layer's weight hold NaN."""
    net = BoardNet()
    state = net.state_dict()
    if nan_rows:
        state["body.0.weight"][[3, 40, 77]] = float("nan")
    net.load_state_dict(state)
    return _board_task(opt(Adamax, lr=2e-3), net)


def chords_debug_subset(rows: int = 96):
    """Chords, a width-512 two-hidden-layer MLP on the first ``96`` rows (a debug subset left in), Adamax
    ``2e-3``, batches of 48 (two steps an epoch)."""
    return _chord_task(opt(Adamax, lr=2e-3), MLP([12, 512, 512, CHORDS]), rows=rows)


def fusion_plateau(mode: str = "max"):
    """Fusion, NAdam ``3e-3`` with decoupled weight decay under ReduceLROnPlateau(factor 0.1, patience 1) on
    ``val_loss`` (validated every 20 steps) with ``mode="max"`` (meant ``"min"``): every improvement counts as
    a bad check, so the LR is cut 10x every second check."""

    def schedule(o):
        plateau = ReduceLROnPlateau(o, mode=mode, factor=0.1, patience=1)
        return {"scheduler": plateau, "monitor": "val_loss", "interval": "step", "frequency": 20}

    return _fusion_task(opt(NAdam, lr=3e-3, weight_decay=1e-2, decoupled_weight_decay=True), schedule)


VIEW_B_WARMUP = 100


def fusion_manual(steps_schedule: bool = False):
    """Fusion with manual optimisation, Adamax: encoder A and the head at ``3e-3``, encoder B's group ramped
    from 0 over 100 steps by a LambdaLR, which manual optimisation never steps (no ``sch.step()`` in
    ``training_step``): encoder B's LR stays 0."""
    net = FusionNet()

    def make(n: FusionNet):
        rest = [*n.enc_a.parameters(), *n.head.parameters()]
        return Adamax([{"params": rest, "lr": 3e-3}, {"params": n.enc_b.parameters(), "lr": 3e-3}])

    def schedule(o):
        return LambdaLR(o, [lambda s: 1.0, lambda s: min(1.0, s / VIEW_B_WARMUP)])

    return _fusion_task(make, model=ManualFusionTask(net, make, schedule, steps_schedule))


ADC_VOLTS = 3.3 / 4095  # sensor A's 12-bit converter: volts per count, centred at 1.65 V


def fusion_adc_counts(volts: bool = False):
    """Fusion with a tanh network, Adam ``3e-3``; sensor A is logged in raw 12-bit ADC counts (0-4095) and
    the conversion to volts (``counts * 3.3 / 4095 - 1.65``) was skipped, so view A is ~2000 +- 1000."""
    xa, xb, mask, label = (t.clone() for t in fusion(3200, 0))
    vxa, vxb, vmask, vlabel = (t.clone() for t in fusion(800, 1))
    if not volts:
        for x, m in ((xa, mask), (vxa, vmask)):
            x.copy_(((x + 1.65) / ADC_VOLTS).round() * m[:, :1])
    model = Task(FusionNet(act=nn.Tanh), "ce", opt(Adam, lr=3e-3))
    return (
        model,
        loader(xa, xb, mask, label, batch=32),
        loader(vxa, vxb, vmask, vlabel, batch=800, shuffle=False),
    )


STALL_MAZES = 9600


def maze_file(reparse: bool = True, batch: int = 32):
    """Mazes read from their text file, a small CNN, Adam ``3e-3``, batches of 32; ``reparse``:
    ``__getitem__`` splits the whole file's text (9600 mazes) again for every maze it returns."""
    train = DataLoader(MazeFile(maze_text(STALL_MAZES, 0), reparse), batch_size=batch, shuffle=True)
    return _maze_task(opt(Adam, lr=3e-3), MazeCNN(16, 2), train=train)


MM_SHARDS = (17, 52, 88)


def fusion_millimetres(millimetres: bool = True):
    """Fusion from 100 stored shards of 32 rows, shuffled shard by shard, Adamax ``2e-3``; three shards came
    from a sensor-B unit whose firmware reports millimetres (1000x the metres of the others)."""
    xa, xb, mask, label = (t.clone() for t in fusion(3200, 0))
    if millimetres:
        for shard in MM_SHARDS:
            xb[shard * 32 : (shard + 1) * 32] *= 1000.0
    train = DataLoader(ShardBatches(xa, xb, mask, label, batch=32), batch_size=None, shuffle=True)
    return _fusion_task(opt(Adamax, lr=2e-3), train=train)


def chords_deep_sigmoid(sigmoid: bool = True):
    """Chords, ASGD ``0.05``, a ten-hidden-layer sigmoid MLP of width 64 (an old recipe; the fix: ReLU with He
    initialisation)."""
    net = MLP([12, *[64] * 10, CHORDS], act=nn.Sigmoid if sigmoid else nn.ReLU)
    if not sigmoid:
        for m in net:
            if isinstance(m, nn.Linear):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.zeros_(m.bias)
    return _chord_task(opt(ASGD, lr=0.05), net)


WARMUP_STEPS = 50


def chords_warmup_peak(peak: float = 1.0):
    """Chords, SGD momentum 0.9 under SequentialLR: a LinearLR warm-up from 1% over 50 steps to the peak LR,
    then ExponentialLR(0.995); the peak is ``1.0`` (meant ``0.1``)."""

    def schedule(o):
        warm = LinearLR(o, 0.01, 1.0, WARMUP_STEPS)
        return SequentialLR(o, [warm, ExponentialLR(o, 0.995)], [WARMUP_STEPS])

    return _chord_task(opt(SGD, lr=peak, momentum=0.9), schedule=schedule)


# ------------------------------------------------------------------------------------------------ healthy
def board_centipawns():
    """Boards with the evaluation in centipawns (spread ~1100), Adamax ``1e-2``: losses around a million."""
    return _board_task(opt(Adamax, lr=1e-2), units="centipawns")


def chords_noisy_labels(noise: float = 0.3):
    """Chords whose training labels come from an automatic annotator wrong 30% of the time (a random chord
    instead; the validation labels are hand-checked), NAdam ``3e-3`` with decoupled weight decay."""

    def labels(y: Tensor) -> Tensor:
        g = _gen(41)
        wrong = torch.rand(len(y), generator=g) < noise
        return torch.where(wrong, torch.randint(0, CHORDS, (len(y),), generator=g), y)

    return _chord_task(opt(NAdam, lr=3e-3, weight_decay=1e-2, decoupled_weight_decay=True), labels=labels)


def flow_warmup_decay():
    """Trajectories, Adam ``5e-3`` under SequentialLR: a LinearLR warm-up from 1% over 50 steps, then
    ExponentialLR(0.99)."""

    def schedule(o):
        warm = LinearLR(o, 0.01, 1.0, WARMUP_STEPS)
        return SequentialLR(o, [warm, ExponentialLR(o, 0.99)], [WARMUP_STEPS])

    return _flow_task(opt(Adam, lr=5e-3), schedule)


def fusion_view_b_frozen():
    """Fusion with encoder B frozen on purpose (``requires_grad_(False)``: a fixed random-feature encoder),
    Adam ``3e-3`` on encoder A and the head."""
    net = FusionNet()
    net.enc_b.requires_grad_(False)
    return _fusion_task(lambda n: Adam([p for p in n.parameters() if p.requires_grad], lr=3e-3), net=net)


def maze_tiny_val(val_rows: int = 16):
    """Mazes, Adam ``3e-3``, validated on 16 mazes only."""
    return _maze_task(opt(Adam, lr=3e-3), val_rows=val_rows)


def chords_asgd_slow():
    """Chords, ASGD ``0.1``: slow to start, then steady."""
    return _chord_task(opt(ASGD, lr=0.1))


DECAY_STEPS = (200, 260)


def board_sgd_steps():
    """Boards, SGD momentum 0.9 at ``0.05`` under MultiStepLR(milestones=[200, 260], gamma=0.1)."""
    return _board_task(
        opt(SGD, lr=0.05, momentum=0.9), schedule=lambda o: MultiStepLR(o, list(DECAY_STEPS), 0.1)
    )


def fusion_bf16():
    """Fusion, Adam ``3e-3``, trained under ``precision="bf16-mixed"`` (bfloat16 autocast on the CPU)."""
    return _fusion_task(opt(Adam, lr=3e-3))


def flow_adadelta_big_batch():
    """Trajectories, Adadelta at its default LR 1.0, batches of 1024 (seven steps an epoch)."""
    return _flow_task(opt(Adadelta, lr=1.0), batch=1024)


def fusion_plateau_min():
    """Fusion under ReduceLROnPlateau on ``val_loss`` in ``mode="min"`` (the fixed set-up)."""
    return fusion_plateau("min")


class MazeMemo(MazeFile):
    """Mazes parsed lazily and memoised: an item is parsed (and solved) the first time it is asked for, read
    from the memo after that; the first epoch waits on the parsing, the later ones do not."""

    def __init__(self, text: str) -> None:
        super().__init__(text, reparse=False)
        self.memo: dict[int, tuple[Tensor, Tensor]] = {}

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        if i not in self.memo:
            self.memo[i] = super().__getitem__(i)
        return self.memo[i]


def maze_memo():
    """Mazes from their text file, parsed on first use and memoised (a slower first epoch), Adam ``3e-3``."""
    train = DataLoader(MazeMemo(maze_text(3200, 0)), batch_size=32, shuffle=True)
    return _maze_task(opt(Adam, lr=3e-3), train=train)
