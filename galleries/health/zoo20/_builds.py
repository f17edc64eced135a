"""Builders of zoo 20's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data, all made in code or bundled with scikit-learn: two moons for the flow, scikit-learn's 8x8
digits for few-shot episodes (classes 0-6 train, 7-9 validate), a walled gridworld and its shortest-path
expert for behaviour cloning, rotated moons seen through a fixed 10-d embedding for domain adaptation,
16x16 images of an L-shaped part and a bar for corner heatmaps, and a loan-style table (numeric columns and
a region category) for the tabular classifier.
"""

from __future__ import annotations

import collections
import functools
import math

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adam, Adamax, AdamW, NAdam, RAdam
from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts, OneCycleLR, StepLR
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo20._models import (
    DANN,
    MLP,
    BehaviourCloning,
    CouplingFlow,
    FlowTask,
    HeatmapCNN,
    KeypointTask,
    ProtoNet,
    ProtoTask,
    TabularNet,
    TabularTask,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(*tensors: Tensor, batch: int, shuffle: bool = True) -> DataLoader:
    return DataLoader(TensorDataset(*tensors), batch_size=batch, shuffle=shuffle)


# ------------------------------------------------------------------------------------------------ data
def moons(rows: int, seed: int, noise: float = 0.08) -> Tensor:
    """Two interleaving half circles ``(rows, 2)`` with Gaussian noise, roughly standardised."""
    g = _gen(seed)
    angle = math.pi * torch.rand(rows, generator=g)
    upper = torch.rand(rows, generator=g) < 0.5
    x = torch.where(upper, torch.cos(angle), 1 - torch.cos(angle))
    y = torch.where(upper, torch.sin(angle), 0.5 - torch.sin(angle))
    points = torch.stack([x, y], 1) + noise * torch.randn(rows, 2, generator=g)
    return (points - torch.tensor([0.5, 0.25])) / torch.tensor([0.87, 0.5])


def moons_labelled(rows: int, seed: int, noise: float = 0.1) -> tuple[Tensor, Tensor]:
    """:func:`moons` with the half circle each point is drawn from (0 upper, 1 lower)."""
    g = _gen(seed)
    angle = math.pi * torch.rand(rows, generator=g)
    label = (torch.rand(rows, generator=g) < 0.5).long()
    x = torch.where(label == 0, torch.cos(angle), 1 - torch.cos(angle))
    y = torch.where(label == 0, torch.sin(angle), 0.5 - torch.sin(angle))
    points = torch.stack([x, y], 1) + noise * torch.randn(rows, 2, generator=g)
    return (points - torch.tensor([0.5, 0.25])) / torch.tensor([0.87, 0.5]), label


@functools.cache
def _digits() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.tensor(bunch.data, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
    return x, torch.tensor(bunch.target)


class Episodes(Dataset):
    """``episodes`` few-shot episodes from the digits of ``classes``: ``ways`` classes drawn at random, then
    ``shots`` support and ``queries`` query images of each; episode ``i`` is drawn from seed ``seed + i``, so
    a fixed set (validation) or a fresh stream (training, with a different seed). The query labels follow the
    order the queries are stacked in (class by class) unless ``interleaved_labels``."""

    def __init__(self, classes: list[int], episodes: int, ways: int = 5, shots: int = 5, queries: int = 5,
                 seed: int = 0, interleaved_labels: bool = False) -> None:  # fmt: skip
        x, y = _digits()
        self.pools = [x[y == c] for c in classes]
        self.episodes, self.ways, self.shots, self.queries, self.seed = episodes, ways, shots, queries, seed
        self.interleaved_labels = interleaved_labels

    def __len__(self) -> int:
        return self.episodes

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor, Tensor]:
        g = _gen(self.seed + i)
        chosen = torch.randperm(len(self.pools), generator=g)[: self.ways]
        support, query = [], []
        for c in chosen.tolist():
            pool = self.pools[c]
            pick = torch.randperm(len(pool), generator=g)[: self.shots + self.queries]
            support.append(pool[pick[: self.shots]])
            query.append(pool[pick[self.shots :]])
        if self.interleaved_labels:  # 0, 1, 2, ..., 0, 1, 2, ...: not the order the queries are stacked in
            labels = torch.arange(self.ways).repeat(self.queries)
        else:
            labels = torch.arange(self.ways).repeat_interleave(self.queries)
        return torch.stack(support), torch.cat(query), labels


# an 11x11 gridworld: '#' walls, '.' free cells (57 of them)
GRID = (
    "###########",
    "#....#....#",
    "#.##...##.#",
    "#.#..#..#.#",
    "#...###...#",
    "#.#.....#.#",
    "#.#.#.#.#.#",
    "#...#.#...#",
    "#.##...##.#",
    "#....#....#",
    "###########",
)
MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))  # up, down, left, right
FREE = [(r, c) for r, row in enumerate(GRID) for c, ch in enumerate(row) if ch == "."]
CELLS = len(GRID) * len(GRID[0])


def bfs_distances(goal: tuple[int, int]) -> dict[tuple[int, int], int]:
    """Shortest-path distances from every free cell to ``goal`` (a breadth-first search)."""
    distance = {goal: 0}
    frontier = collections.deque([goal])
    while frontier:
        r, c = frontier.popleft()
        for dr, dc in MOVES:
            cell = (r + dr, c + dc)
            if GRID[cell[0]][cell[1]] == "." and cell not in distance:
                distance[cell] = distance[(r, c)] + 1
                frontier.append(cell)
    return distance


def expert_action(agent: tuple[int, int], distance: dict[tuple[int, int], int]) -> int:
    """The expert's move: the first of up, down, left, right that brings the agent closer to the goal."""
    r, c = agent
    return next(a for a, (dr, dc) in enumerate(MOVES) if distance.get((r + dr, c + dc), 99) < distance[agent])


def encode_state(agent: tuple[int, int], goal: tuple[int, int]) -> Tensor:
    """The policy's input: the agent's cell one-hot, then the goal's cell one-hot (``2 * 121`` features)."""
    state = torch.zeros(2 * CELLS)
    state[agent[0] * len(GRID[0]) + agent[1]] = 1.0
    state[CELLS + goal[0] * len(GRID[0]) + goal[1]] = 1.0
    return state


@functools.cache
def _grid_pairs() -> tuple[list[tuple[tuple[int, int], tuple[int, int]]], list[int]]:
    """Every (agent, goal) pair of distinct free cells in a fixed shuffle, and the expert's action for
    each."""
    pairs = [(a, g) for g in FREE for a in FREE if a != g]
    order = torch.randperm(len(pairs), generator=_gen(20)).tolist()
    pairs = [pairs[i] for i in order]
    tables = {g: bfs_distances(g) for g in FREE}
    return pairs, [expert_action(a, tables[g]) for a, g in pairs]


GRID_TRAIN = 2400


def gridworld(split: str) -> tuple[Tensor, Tensor]:
    """The expert's (state, action) pairs: the first 2400 pairs of the shuffle train, the rest validate."""
    pairs, actions = _grid_pairs()
    rows = slice(0, GRID_TRAIN) if split == "train" else slice(GRID_TRAIN, None)
    states = torch.stack([encode_state(a, g) for a, g in pairs[rows]])
    return states, torch.tensor(actions[rows])


def domain_data(rows: int, seed: int, target: bool) -> tuple[Tensor, Tensor]:
    """Labelled moons seen through a fixed 10-d embedding (2 signal and 8 noise directions mixed by a fixed
    orthogonal matrix); the ``target`` domain's moons are rotated by 35 degrees and shifted first."""
    points, labels = moons_labelled(rows, seed)
    if target:
        turn = math.radians(35)
        rotation = torch.tensor([[math.cos(turn), -math.sin(turn)], [math.sin(turn), math.cos(turn)]])
        points = points @ rotation.T + torch.tensor([0.4, -0.3])
    noise = 0.5 * torch.randn(rows, 8, generator=_gen(seed + 1))
    mix = torch.linalg.qr(torch.randn(10, 10, generator=_gen(99)))[0]
    return torch.cat([points, noise], 1) @ mix, labels


def corner_images(rows: int, seed: int, size: int = 16, sigma: float = 1.0) -> tuple[Tensor, Tensor]:
    """``rows`` images ``(1, size, size)`` of an L-shaped part (two arms of 4 pixels from its corner, in one
    of four orientations) and a straight bar (a distractor) on a noisy background, and the target heatmaps:
    a Gaussian bump (peak 1, std ``sigma`` pixels) at the L's corner."""
    g = _gen(seed)
    images = 0.1 * torch.randn(rows, 1, size, size, generator=g)
    corners = torch.randint(4, size - 4, (rows, 2), generator=g)
    turns = torch.randint(0, 4, (rows,), generator=g)
    bars = torch.randint(1, size - 5, (rows, 2), generator=g)
    upright = torch.rand(rows, generator=g) < 0.5
    for i in range(rows):
        r, c = corners[i].tolist()
        dr, dc = ((1, 1), (1, -1), (-1, 1), (-1, -1))[int(turns[i])]
        for k in range(4):
            images[i, 0, r + dr * k, c] = 1.0
            images[i, 0, r, c + dc * k] = 1.0
        br, bc = bars[i].tolist()
        for k in range(4):
            if upright[i]:
                images[i, 0, br + k, bc] = torch.maximum(images[i, 0, br + k, bc], torch.tensor(0.8))
            else:
                images[i, 0, br, bc + k] = torch.maximum(images[i, 0, br, bc + k], torch.tensor(0.8))
    grid = torch.arange(size, dtype=torch.float32)
    rr = (grid.view(1, -1, 1) - corners[:, 0].view(-1, 1, 1)).pow(2)
    cc = (grid.view(1, 1, -1) - corners[:, 1].view(-1, 1, 1)).pow(2)
    heatmaps = torch.exp(-(rr + cc) / (2 * sigma**2)).unsqueeze(1)
    return images, heatmaps


REGIONS = 6


def loans(rows: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """A loan-style table: 8 standardised numeric columns, a region (6 categories) and one of 3 outcomes
    drawn from a nonlinear score of both (~10% label noise)."""
    g = _gen(seed)
    x = torch.randn(rows, 8, generator=g)
    region = torch.randint(0, REGIONS, (rows,), generator=g)
    effect = torch.tensor([-1.0, -0.5, 0.0, 0.3, 0.8, 1.2])[region]
    score = 1.2 * x[:, 0] - 0.8 * x[:, 1] * x[:, 2] + torch.sin(2 * x[:, 3]) + 0.6 * x[:, 4].abs() + effect
    score = score + 0.5 * x[:, 5] * (region >= 3).float()
    label = torch.bucketize(score, torch.tensor([-0.3, 1.2]))
    noisy = torch.rand(rows, generator=g) < 0.1
    label = torch.where(noisy, torch.randint(0, 3, (rows,), generator=g), label)
    return x, region, label


class PlannedExpert(Dataset):
    """The gridworld's (state, action) pairs for ``pairs``, the expert's action planned per sample, on the
    fly, by value iteration over the whole grid in pure Python (nothing cached)."""

    def __init__(self, pairs: list[tuple[tuple[int, int], tuple[int, int]]]) -> None:
        self.pairs = pairs

    def __len__(self) -> int:
        return len(self.pairs)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        agent, goal = self.pairs[i]
        value = {cell: 0.0 if cell == goal else -1e9 for cell in FREE}
        changed = True
        while changed:
            changed = False
            for r, c in FREE:
                if (r, c) != goal:
                    best = max(value.get((r + dr, c + dc), -1e9) for dr, dc in MOVES) - 1.0
                    if best != value[(r, c)]:
                        value[(r, c)], changed = best, True
        distance = {cell: -v for cell, v in value.items()}
        return encode_state(agent, goal), torch.tensor(expert_action(agent, distance))


# ------------------------------------------------------------------------------------------------ tasks
FLOW_ROWS, FLOW_BATCH = 4096, 64  # 64 steps an epoch


def _flow_task(make_optimizer, x: Tensor | None = None, shuffle: bool = True, val: Tensor | None = None):
    """The flow of six affine couplings on 4096 two-moons rows (batches of 64), validated on 512 others."""
    x = moons(FLOW_ROWS, 0) if x is None else x
    val = moons(512, 1) if val is None else val
    model = FlowTask(CouplingFlow(), make_optimizer)
    return model, loader(x, batch=FLOW_BATCH, shuffle=shuffle), loader(val, batch=512, shuffle=False)


TRAIN_CLASSES, NOVEL_CLASSES = [0, 1, 2, 3, 4, 5, 6], [7, 8, 9]


def _proto_task(max_lr: float, interleaved_labels: bool = False):
    """5-way 5-shot episodes of digits 0-6 (300 an epoch), validated on 20 fixed 3-way episodes of the novel
    digits 7-9; SGD momentum 0.9 under OneCycleLR over the 300 steps."""
    train = Episodes(TRAIN_CLASSES, 300, seed=1000, interleaved_labels=interleaved_labels)
    val = Episodes(NOVEL_CLASSES, 20, ways=3, seed=0)
    model = ProtoTask(ProtoNet(), lambda m: SGD(m.parameters(), lr=max_lr, momentum=0.9),
                      lambda o: OneCycleLR(o, max_lr=max_lr, total_steps=300))  # fmt: skip
    return model, DataLoader(train, batch_size=None, shuffle=True), DataLoader(val, batch_size=None)


def _bc_task(make_optimizer, train=None, restart: int = 100, mult: int = 2, actions=None):
    """Behaviour cloning on the gridworld: an MLP policy (242-128-128-4), batches of 64 (38 steps an epoch),
    CosineAnnealingWarmRestarts every ``restart`` steps (the period times ``mult`` after each restart),
    validated on the 792 held-out (agent, goal) pairs."""
    x, y = gridworld("train")
    vx, vy = gridworld("val")
    if actions is not None:
        y = actions(y)
    model = BehaviourCloning(MLP([2 * CELLS, 128, 128, 4]), make_optimizer,
                             lambda o: CosineAnnealingWarmRestarts(o, restart, mult))  # fmt: skip
    train = train if train is not None else loader(x, y, batch=64)
    return model, train, loader(vx, vy, batch=792, shuffle=False)


def _adamw(lr: float = 3e-3, weight_decay: float = 1e-4):
    return lambda m: AdamW(m.parameters(), lr=lr, weight_decay=weight_decay)


def _dann_task(make_optimizer=None, reversal: float = 0.3):
    """Moons adapted from the source domain (labelled, 2000 rows) to a rotated, shifted target (unlabelled,
    2000 rows), batches of 64 of each; validated on 500 held-out labelled source rows (the target's labels
    are unknown). Adam ``3e-3`` over every module unless ``make_optimizer`` says otherwise."""
    xs, ys = domain_data(2000, 0, target=False)
    xt, _ = domain_data(2000, 10, target=True)
    vx, vy = domain_data(500, 20, target=False)
    make = make_optimizer or (lambda m: Adam(m.parameters(), lr=3e-3))
    model = DANN(MLP([10, 64, 64]), 64, 2, make, reversal)
    return model, loader(xs, ys, xt, batch=64), loader(vx, vy, batch=500, shuffle=False)


def _keypoint_task(make_optimizer, net: nn.Module | None = None, scale: float = 256.0, val_images: int = 256):
    """Corner heatmaps: 2000 training images in batches of 32 (63 steps an epoch), ``val_images`` held-out
    ones; the loss is the per-pixel MSE times ``scale`` (256: summed over the 16x16 pixels)."""
    x, h = corner_images(2000, 0)
    vx, vh = corner_images(val_images, 1)
    model = KeypointTask(net if net is not None else HeatmapCNN(), make_optimizer, scale=scale)
    return model, loader(x, h, batch=32), loader(vx, vh, batch=val_images, shuffle=False)


def _tabular_task(make_optimizer, schedule, rows=None, widths=(64, 64), batch: int = 64,
                  interval: str = "epoch", net: nn.Module | None = None):  # fmt: skip
    """The loan table: ``rows`` (train, validation), by default 3000 training rows (batches of 64, 47 steps an
    epoch) and 600 validation rows."""
    train, val = rows if rows is not None else (loans(3000, 0), loans(600, 1))
    (x, region, label), (vx, vregion, vlabel) = train, val
    net = net if net is not None else TabularNet(8, REGIONS, list(widths), 3)
    model = TabularTask(net, make_optimizer, schedule, interval)
    val = loader(vx, vregion, vlabel, batch=len(vx), shuffle=False)
    return model, loader(x, region, label, batch=batch), val


# ------------------------------------------------------------------------------------------------ problems
def flow_adamax(lr: float = 0.3):
    """The flow, Adamax at ``0.3`` (meant ``3e-3``: a dropped ``e-2``)."""
    return _flow_task(lambda m: Adamax(m.parameters(), lr=lr))


BAD_BATCH = 45
MISSING_ROWS = (BAD_BATCH * FLOW_BATCH + 9, BAD_BATCH * FLOW_BATCH + 50)  # read in order: both in batch 45


def flow_missing_rows(missing: bool = True):
    """The flow, Adamax ``5e-3``, the rows read in their export's (already shuffled) order; two rows lost
    their second coordinate in export (``NaN``) and are kept (``missing=False``: dropped, as meant)."""
    x = moons(FLOW_ROWS, 0)
    if missing:
        x[list(MISSING_ROWS), 1] = float("nan")
    else:
        keep = torch.ones(len(x), dtype=torch.bool)
        keep[list(MISSING_ROWS)] = False
        x = x[keep]
    return _flow_task(lambda m: Adamax(m.parameters(), lr=5e-3), x, shuffle=False)


def proto_onecycle(max_lr: float = 0.5):
    """Prototypical networks, SGD momentum 0.9 under OneCycleLR with ``max_lr=0.5`` (meant ``0.02``)."""
    return _proto_task(max_lr)


def proto_interleaved_labels(interleaved: bool = True):
    """Prototypical networks, OneCycleLR to ``0.02``; the queries are stacked class by class but their labels
    built with ``arange(ways).repeat(queries)`` (0, 1, 2, 3, 4, 0, ...; meant ``repeat_interleave``)."""
    return _proto_task(0.02, interleaved_labels=interleaved)


def bc_zero_states(typo: bool = True):
    """Behaviour cloning, AdamW ``3e-3``; the state encoder writes its one-hots with ``state[i] == 1.0`` (a
    comparison, not an assignment), so every state is all zeros."""
    x, y = gridworld("train")
    vx, vy = gridworld("val")
    if typo:
        x, vx = torch.zeros_like(x), torch.zeros_like(vx)
    model, _, _ = _bc_task(_adamw())
    return model, loader(x, y, batch=64), loader(vx, vy, batch=792, shuffle=False)


def bc_lr_weight_decay_swapped(swapped: bool = True):
    """Behaviour cloning, ``AdamW(lr=cfg.weight_decay, weight_decay=cfg.lr)`` with ``lr 3e-3`` and ``weight
    decay 1e-6`` in the config: the policy trains at ``1e-6``."""
    lr, weight_decay = 3e-3, 1e-6
    return _bc_task(_adamw(weight_decay, lr) if swapped else _adamw(lr, weight_decay))


def bc_planned_per_sample(planned: bool = True):
    """Behaviour cloning, AdamW ``3e-3``; the expert's actions are planned per sample in ``__getitem__`` by a
    pure-Python value iteration (meant: planned once per goal and cached)."""
    pairs, _ = _grid_pairs()
    train = DataLoader(PlannedExpert(pairs[:GRID_TRAIN]), batch_size=64, shuffle=True) if planned else None
    return _bc_task(_adamw(), train)


def dann_optimizer_heads_only(heads_only: bool = True):
    """DANN, Adam ``3e-3`` built over ``label_head`` and ``domain_head`` only (the feature extractor left out
    of the list): the shared features get gradients and never move."""

    def make(m):
        if heads_only:
            return Adam([*m.label_head.parameters(), *m.domain_head.parameters()], lr=3e-3)
        return Adam(m.parameters(), lr=3e-3)

    return _dann_task(make)


def keypoint_nadam(lr: float = 0.1):
    """Corner heatmaps, NAdam at ``0.1`` (meant ``2e-3``)."""
    return _keypoint_task(lambda m: NAdam(m.parameters(), lr=lr))


FOCAL_PRIOR = -math.log((1 - 0.01) / 0.01)  # RetinaNet's classification-head bias for a 1% prior: -4.6


def keypoint_prior_bias(every_conv: bool = True):
    """Corner heatmaps, NAdam ``2e-3``; RetinaNet's prior bias (``-4.6``), meant for a detection head's
    classifier, applied by an init loop to every hidden conv of the heatmap CNN."""
    net = HeatmapCNN()
    if every_conv:
        for layer in list(net)[:-1]:
            if isinstance(layer, nn.Conv2d):
                nn.init.constant_(layer.bias, FOCAL_PRIOR)
    return _keypoint_task(lambda m: NAdam(m.parameters(), lr=2e-3), net)


def tabular_split_swapped(swapped: bool = True):
    """The loan table (3300 rows), ``train, val = train_test_split(..., test_size=0.1)`` unpacked the wrong
    way round (``val, train``): a width-512 MLP trains on the 330 rows meant for validation (batches of 33, 10
    steps an epoch) and validates on the other 2970; RAdam ``3e-3``, StepLR(20, 0.5) per epoch."""
    table = loans(3300, 0)
    small, large = tuple(t[:330] for t in table), tuple(t[330:] for t in table)
    rows = (small, large) if swapped else (large, small)
    return _tabular_task(lambda m: RAdam(m.parameters(), lr=3e-3), lambda o: StepLR(o, 20, 0.5), rows,
                         widths=(512, 512), batch=33)  # fmt: skip


def tabular_steplr(interval: str = "step"):
    """The loan table, RAdam ``1e-2`` under StepLR(step_size=2, gamma=0.5) written for epochs but scheduled
    with ``interval="step"``: the LR halves every two steps."""
    return _tabular_task(lambda m: RAdam(m.parameters(), lr=1e-2), lambda o: StepLR(o, 2, 0.5),
                         interval=interval)  # fmt: skip


# ------------------------------------------------------------------------------------------------ healthy
def flow_adamax_slow():
    """The flow, Adamax ``2e-3``: slow and steady."""
    return _flow_task(lambda m: Adamax(m.parameters(), lr=2e-3))


def flow_raw_units(scale: float = 25.0):
    """The flow on the moons in raw units (``25x``: a spread of ~25, so NLLs ~9.3 nats at first), Adamax
    ``5e-3``."""
    return _flow_task(lambda m: Adamax(m.parameters(), lr=5e-3), scale * moons(FLOW_ROWS, 0),
                      val=scale * moons(512, 1))  # fmt: skip


def proto_warmup():
    """Prototypical networks, OneCycleLR to ``0.02``: 90 steps of warm-up from ``8e-4``."""
    return _proto_task(0.02)


def bc_warm_restarts():
    """Behaviour cloning, AdamW ``3e-3`` with a warm restart every 60 steps (``T_mult=1``)."""
    return _bc_task(_adamw(), restart=60, mult=1)


NOISY_ACTIONS = 0.3


def bc_noisy_expert():
    """Behaviour cloning on demonstrations with 30% exploration noise on purpose (a uniformly random action
    recorded instead of the expert's), validated on clean expert actions."""

    def noisy(y: Tensor) -> Tensor:
        g = _gen(31)
        explore = torch.rand(len(y), generator=g) < NOISY_ACTIONS
        return torch.where(explore, torch.randint(0, 4, y.shape, generator=g), y)

    return _bc_task(_adamw(), actions=noisy)


def dann_full_reversal():
    """DANN with the gradient reversal at full weight (1.0): the features are made domain-invariant, so the
    domain head's loss stays near ``ln 2`` by design."""
    return _dann_task(reversal=1.0)


def keypoint_mean_mse():
    """Corner heatmaps, NAdam ``2e-3``, the loss the plain per-pixel mean (a bump of ~13 pixels among 256:
    losses ~1e-2 to 1e-3, gradients to match)."""
    return _keypoint_task(lambda m: NAdam(m.parameters(), lr=2e-3), scale=1.0)


def keypoint_tiny_val():
    """Corner heatmaps, NAdam ``2e-3``, validated on 4 images only."""
    return _keypoint_task(lambda m: NAdam(m.parameters(), lr=2e-3), val_images=4)


def tabular_step_decay():
    """The loan table, RAdam ``1e-2`` halved every two epochs (StepLR(2, 0.5) per epoch, as meant)."""
    return tabular_steplr(interval="epoch")


def tabular_frozen_region_embedding():
    """The loan table, RAdam ``1e-2``, StepLR(2, 0.5) per epoch; the region embedding is set from last year's
    model and frozen on purpose: only the MLP trains."""
    net = TabularNet(8, REGIONS, [64, 64], 3)
    with torch.no_grad():
        net.embed.weight.copy_(torch.randn(REGIONS, 4, generator=_gen(41)))
        net.embed.weight[:, 0] = torch.tensor([-1.0, -0.5, 0.0, 0.3, 0.8, 1.2])
    net.embed.requires_grad_(False)
    return _tabular_task(lambda m: RAdam([p for p in m.parameters() if p.requires_grad], lr=1e-2),
                         lambda o: StepLR(o, 2, 0.5), net=net)  # fmt: skip
