"""Builders of zoo 19's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: scikit-learn's bundled 8x8 digits paired into sums, a multi-modal inverse-sine table, small
random graphs made in code, noisy observations of a logistic growth curve, and a building table made in code
with three targets in their own units (kWh a year, degrees Celsius, a humidity fraction).
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.optim import ASGD, SGD, Adam, AdamW, RMSprop
from torch.optim.lr_scheduler import ExponentialLR, LambdaLR, MultiStepLR, ReduceLROnPlateau
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo19._models import MDN, MLP, PINN, DigitAdder, GraphNet, MDNTask, PINNTask, Task


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(
    dataset: Dataset | tuple[Tensor, ...], batch: int, shuffle: bool = True, seed: int = 0
) -> DataLoader:
    """A loader of ``dataset`` (tensors: a ``TensorDataset``), shuffled by its own seeded generator."""
    if isinstance(dataset, tuple):
        dataset = TensorDataset(*dataset)
    return DataLoader(dataset, batch_size=batch, shuffle=shuffle, generator=_gen(seed) if shuffle else None)


# ------------------------------------------------------------------------------------------------ digit sums
@functools.cache
def _digits() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    x = torch.tensor(bunch.data, dtype=torch.float32) / 16.0
    y = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=_gen(19))
    return x[order], y[order]


def digit_pairs(split: str, pairs: int, shared_draw: bool = True) -> tuple[Tensor, Tensor]:
    """``pairs`` pairs of 8x8 digits of one split (the first 1200 digits of a fixed shuffle train, the other
    597 validate), side by side ``(pairs, 128)``, and their sums. ``shared_draw`` false: the bug, the image
    pairs and the label pairs are two separate draws of the pair sampler, so a sum belongs to other digits."""
    x, y = _digits()
    x, y = (x[:1200], y[:1200]) if split == "train" else (x[1200:], y[1200:])
    g = _gen(1 if split == "train" else 2)

    def sample() -> Tensor:
        return torch.randint(len(y), (pairs,), generator=g)

    a, b = sample(), sample()
    images = torch.cat([x[a], x[b]], 1)
    if not shared_draw:
        a, b = sample(), sample()
    return images, y[a] + y[b]


# ---------------------------------------------------------------------------------------------- inverse sine
def inverse_sine(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """Bishop's inverse problem: ``y ~ U(0, 1)``, ``x = y + 0.3 sin(2 pi y) + noise``; predict ``y`` from
    ``x`` (up to three branches for one ``x``). Both standardised with fixed constants, ``(rows, 1)`` each."""
    g = _gen(seed)
    y = torch.rand(rows, 1, generator=g)
    x = y + 0.3 * torch.sin(2 * math.pi * y) + 0.03 * torch.randn(rows, 1, generator=g)
    return (x - 0.5) / 0.19, (y - 0.5) / 0.29


# ------------------------------------------------------------------------------------------------ graphs
MAX_NODES = 14


def _shortest_paths(adj: list[list[float]]) -> list[list[float]]:
    """All-pairs hop distances by Floyd-Warshall in plain Python (``inf``: unreachable)."""
    n = len(adj)
    d = [[0.0 if i == j else (1.0 if adj[i][j] else math.inf) for j in range(n)] for i in range(n)]
    for k in range(n):
        dk = d[k]
        for i in range(n):
            dik = d[i][k]
            if dik == math.inf:
                continue
            di = d[i]
            for j in range(n):
                if dik + dk[j] < di[j]:
                    di[j] = dik + dk[j]
    return d


def _walks(a: list[list[float]], b: list[list[float]]) -> list[list[float]]:
    """The matrix product ``a @ b`` in plain Python (walk counts)."""
    n = len(a)
    return [[sum(a[i][k] * b[k][j] for k in range(n)) for j in range(n)] for i in range(n)]


FEATURES = 8


def _node_features(adj: Tensor, raw: Tensor, n: int) -> Tensor:
    """Node features ``(MAX_NODES, 8)``: three raw attributes, the degree, the closeness (mean inverse hop
    distance), the eccentricity over the node's component, and the closed walks of length 2 and 3 through
    the node (shortest paths and walk counts in plain Python)."""
    a = adj[:n, :n].tolist()
    d = _shortest_paths(a)
    a2 = _walks(a, a)
    a3 = _walks(a2, a)
    feats = torch.zeros(MAX_NODES, FEATURES)
    feats[:n, :3] = raw[:n]
    for i in range(n):
        reach = [v for j, v in enumerate(d[i]) if j != i and v < math.inf]
        feats[i, 3] = sum(a[i]) / 4.0
        feats[i, 4] = sum(1.0 / v for v in reach) / max(n - 1, 1)
        feats[i, 5] = (max(reach) if reach else 0.0) / 4.0
        feats[i, 6] = a2[i][i] / 4.0
        feats[i, 7] = a3[i][i] / 8.0
    return feats


class RandomGraphs(Dataset):
    """``count`` Erdos-Renyi graphs of 6 to 14 nodes (edge probability 0.3), padded to 14: items are
    ``((adjacency, node features, node mask), target)``. The target, standardised, is the mean over the
    nodes of a nonlinear function of a node's attributes, its neighbours' attributes and its closeness, plus
    ``noise``. ``cache`` false: the bug, the node features (shortest paths in plain Python) are computed again
    in ``__getitem__`` on every read instead of once."""

    def __init__(self, count: int, seed: int, noise: float = 0.05, cache: bool = True) -> None:
        g = _gen(seed)
        self.adj = torch.zeros(count, MAX_NODES, MAX_NODES)
        self.raw = torch.randn(count, MAX_NODES, 3, generator=g)
        self.mask = torch.zeros(count, MAX_NODES)
        self.n = torch.randint(6, MAX_NODES + 1, (count,), generator=g)
        for k in range(count):
            n = int(self.n[k])
            upper = (torch.rand(n, n, generator=g) < 0.3).float().triu(1)
            self.adj[k, :n, :n] = upper + upper.T
            self.mask[k, :n] = 1.0
            self.raw[k, n:] = 0.0
        feats = torch.stack([_node_features(self.adj[k], self.raw[k], int(self.n[k])) for k in range(count)])
        degree = self.adj.sum(-1, keepdim=True).clamp(min=1.0)
        neighbours = self.adj @ self.raw / degree
        node = torch.tanh(self.raw[..., 0] * neighbours[..., 1] + neighbours[..., 2]) + 2.0 * feats[..., 4]
        node = node - 0.5 * self.raw[..., 2] ** 2 * feats[..., 3]
        y = (node * self.mask).sum(1) / self.mask.sum(1)
        y = y + noise * torch.randn(count, generator=g)
        self.y = ((y - 0.74) / 0.39).unsqueeze(1)
        self.cache = cache
        self.feats = feats if cache else None

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, k: int) -> tuple[tuple[Tensor, Tensor, Tensor], Tensor]:
        if self.feats is not None:
            feats = self.feats[k]
        else:
            feats = _node_features(self.adj[k], self.raw[k], int(self.n[k]))
        return (self.adj[k], feats, self.mask[k]), self.y[k]


@functools.cache
def graphs(split: str, count: int, noise: float = 0.05) -> RandomGraphs:
    return RandomGraphs(count, 1 if split == "train" else 2, noise)


# ---------------------------------------------------------------------------------------------- logistic ODE
RATE, U0, HORIZON = 1.5, 0.05, 8.0


def logistic(t: Tensor) -> Tensor:
    """The exact solution of ``u' = RATE u (1 - u)``, ``u(0) = U0``."""
    return 1.0 / (1.0 + (1.0 / U0 - 1.0) * torch.exp(-RATE * t))


def logistic_data() -> tuple[tuple[Tensor, Tensor], Tensor, tuple[Tensor, Tensor]]:
    """Eight noisy observations on ``[0, 4]`` (the growth phase only), 640 collocation times on the whole
    horizon, and the exact solution on a 200-point validation grid."""
    g = _gen(3)
    t_obs = torch.linspace(0.0, 4.0, 8).unsqueeze(1)
    u_obs = logistic(t_obs) + 0.01 * torch.randn(8, 1, generator=g)
    colloc = HORIZON * torch.rand(640, 1, generator=g)
    t_val = torch.linspace(0.0, HORIZON, 200).unsqueeze(1)
    return (t_obs, u_obs), colloc, (t_val, logistic(t_val))


# ------------------------------------------------------------------------------------------------ buildings
TARGET_UNITS = ("kWh/year", "degC", "fraction")


def buildings(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """A building table made in code: eight standardised features (floor area, insulation, glazing ratio,
    occupants, outdoor temperature, ventilation, orientation, age) and three targets in their own units:
    annual energy (kWh, ~1e5), peak indoor temperature (degC, ~26) and mean relative humidity (0..1)."""
    g = _gen(seed)
    f = torch.randn(rows, 8, generator=g)
    noise = torch.randn(rows, 3, generator=g)
    energy = 1e5 * (1 + 0.3 * f[:, 0] - 0.15 * f[:, 1] + 0.1 * f[:, 2] * f[:, 4] + 0.08 * F.relu(f[:, 3]))
    energy = energy + 3e3 * noise[:, 0]
    temp = 26 + 2 * torch.tanh(f[:, 2] + f[:, 5] - 0.5 * f[:, 1]) + 0.6 * f[:, 6] + 0.2 * noise[:, 1]
    humid = torch.sigmoid(0.8 * f[:, 4] - 0.6 * f[:, 7] + 0.4 * f[:, 1] * f[:, 5]) + 0.02 * noise[:, 2]
    return f, torch.stack([energy, temp, humid], 1)


TARGET_MEAN = torch.tensor([1e5, 26.0, 0.5])
TARGET_SCALE = torch.tensor([3.5e4, 1.6, 0.22])


# ------------------------------------------------------------------------------------------------ tasks
def _digits_task(make_optimizer, pairs: int = 20000, shared_draw: bool = True, labels=None, batch: int = 64):
    x, y = digit_pairs("train", pairs, shared_draw)
    vx, vy = digit_pairs("val", 1000, shared_draw)
    if labels is not None:
        y = labels(y)
    model = Task(DigitAdder(), F.cross_entropy, make_optimizer)
    return model, loader((x, y), batch), loader((vx, vy), 1000, shuffle=False)


def _mdn_task(make_optimizer, schedule=None):
    x, y = inverse_sine(4000, 0)
    vx, vy = inverse_sine(1000, 1)
    return MDNTask(MDN(), make_optimizer, schedule), loader((x, y), 64), loader((vx, vy), 1000, shuffle=False)


def _graph_task(make_optimizer, schedule=None, net: nn.Module | None = None, cache: bool = True):
    train = graphs("train", 3000) if cache else RandomGraphs(3000, 1, cache=False)
    model = Task(net if net is not None else GraphNet(), F.mse_loss, make_optimizer, schedule)
    return model, loader(train, 32), loader(graphs("val", 400), 400, shuffle=False)


def _pinn_task(make_optimizer, schedule=None, net: PINN | None = None, interval: str = "step",
               monitor: bool = False):  # fmt: skip
    observed, colloc, val = logistic_data()
    net = net if net is not None else PINN(HORIZON)
    model = PINNTask(net, observed, RATE, make_optimizer, schedule, interval, monitor)
    return model, loader((colloc,), 64), loader(val, 200, shuffle=False)


def standardise(y: Tensor) -> Tensor:
    """Each building target in its own fixed units of spread: ``(y - TARGET_MEAN) / TARGET_SCALE``."""
    return (y - TARGET_MEAN) / TARGET_SCALE


def _buildings_task(make_optimizer, y: Tensor | None = None, shuffle: bool = True, schedule=None,
                    net: nn.Module | None = None, raw: bool = False, val_rows: int = 500,
                    **task):  # fmt: skip
    x, ty = buildings(4000, 0)
    vx, vy = buildings(500, 1)
    ty = ty if y is None else y
    if not raw:
        ty, vy = standardise(ty), standardise(vy)
    model = Task(
        net if net is not None else MLP([8, 64, 64, 3]), F.mse_loss, make_optimizer, schedule, **task
    )
    return model, loader((x, ty), 64, shuffle), loader((vx[:val_rows], vy[:val_rows]), 500, shuffle=False)


def _adam_gan_betas(lr: float):
    return lambda net: Adam(net.parameters(), lr=lr, betas=(0.5, 0.9))


def _adamw_amsgrad(lr: float):
    return lambda net: AdamW(net.parameters(), lr=lr, weight_decay=1e-2, amsgrad=True)


# ------------------------------------------------------------------------------------------------ problems
def digits_labels_drawn_apart(shared_draw: bool = False):
    """Digit sums, Adam betas ``(0.5, 0.9)`` at ``5e-3``; the pair builder draws the image pairs and the
    label pairs with two separate calls of its sampler, so every sum belongs to two other digits."""
    return _digits_task(_adam_gan_betas(5e-3), shared_draw=shared_draw)


def digits_sgd_adam_lr(lr: float = 1e-4):
    """Digit sums, plain SGD (no momentum) at ``1e-4``, the LR of the Adam config it was copied from
    (plain SGD needs ~1 here)."""
    return _digits_task(lambda net: SGD(net.parameters(), lr=lr))


NAN_ROWS = (25 * 64 + 9, 26 * 64 + 40, 51 * 64 + 3)  # read in order: in batches 25, 26 and 51 of 63


def buildings_nan_humidity(nan: bool = True):
    """Buildings read in order, AdamW (amsgrad) ``3e-3`` under MultiStepLR([150, 250], 0.3); three rows
    whose humidity sensor dropped out keep a NaN target (the cleaning step dropped NaN features only)."""
    _, y = buildings(4000, 0)
    y = y.clone()
    if nan:
        y[list(NAN_ROWS), 2] = float("nan")
    schedule = lambda o: MultiStepLR(o, [150, 250], 0.3)  # noqa: E731
    return _buildings_task(_adamw_amsgrad(3e-3), y, shuffle=False, schedule=schedule)


def buildings_sgd_lr(lr: float = 3.0):
    """Buildings, plain SGD (no momentum) at ``3.0`` (meant ``0.3``: a digit slipped)."""
    return _buildings_task(lambda net: SGD(net.parameters(), lr=lr))


def digits_debug_subset(pairs: int = 320):
    """The digit adder on ``320`` training pairs (a smoke-test subset left in the config), AdamW (amsgrad)
    ``3e-3``, five steps an epoch, validated on 1000 pairs every epoch."""
    return _digits_task(_adamw_amsgrad(3e-3), pairs=pairs)


LR_START, LR_END = 3e-3, 3e-6


def graphs_exponential_inverted(inverted: bool = True):
    """Graphs, Adam betas ``(0.5, 0.9)`` at ``3e-3`` under ExponentialLR with ``gamma = (end / start) **
    (1 / 300)`` meant to decay 1000x over the run; the start and end LRs are passed the wrong way round, so
    ``gamma > 1`` and the LR grows 1000x."""
    start, end = (LR_END, LR_START) if inverted else (LR_START, LR_END)
    gamma = (end / start) ** (1 / 300)
    return _graph_task(_adam_gan_betas(LR_START), lambda o: ExponentialLR(o, gamma))


def pinn_plateau_mode_max(mode: str = "max"):
    """The logistic PINN, AdamW (amsgrad) ``1e-2`` under ReduceLROnPlateau(mode="max", factor=0.1,
    patience=1) on ``val_loss`` (the mode copied from an accuracy monitor), stepped each 10-step epoch."""
    return _pinn_task(
        _adamw_amsgrad(1e-2),
        lambda o: ReduceLROnPlateau(o, mode=mode, factor=0.1, patience=1),
        interval="epoch",
        monitor=True,
    )


def graphs_readout_only(readout_only: bool = True):
    """Graphs, RMSprop momentum ``0.9`` at ``1e-3``, built from ``net.readout.parameters()`` (meant
    ``net.parameters()``): the encoder and message layers get gradients and never move."""

    def make(net: GraphNet):
        return RMSprop((net.readout if readout_only else net).parameters(), lr=1e-3, momentum=0.9)

    return _graph_task(make)


def graphs_features_every_read(cache: bool = False):
    """Graphs (120 steps), ASGD ``0.05``; the dataset computes each graph's node features (plain-Python
    Floyd-Warshall and walk counts) in ``__getitem__`` on every read instead of once in ``__init__``."""
    return _graph_task(lambda net: ASGD(net.parameters(), lr=0.05), cache=cache)


def wh_rows() -> list[int]:
    """The four buildings whose energy was exported in Wh instead of kWh (fixed by a seed)."""
    return torch.randperm(4000, generator=_gen(7))[:4].tolist()


def buildings_energy_in_wh(factor: float = 1000.0):
    """Buildings, Adam betas ``(0.5, 0.9)`` at ``3e-3``; four rows' annual energy came from a meter
    exported in Wh (1000x the kWh of the rest) and were standardised like the others."""
    _, y = buildings(4000, 0)
    y = y.clone()
    y[wh_rows(), 0] *= factor
    return _buildings_task(_adam_gan_betas(3e-3), y)


def pinn_tiny_init(std: float | None = 0.01):
    """The logistic PINN, six tanh layers of 32, ASGD ``0.1``; every weight drawn ``normal(0, 0.01)`` and
    every bias 0 ("small init keeps PINNs stable", copied from a shallow model), so each layer shrinks the
    signal ~20x."""
    net = PINN(HORIZON, 32, 6)
    if std is not None:
        for module in net.modules():
            if isinstance(module, nn.Linear):
                nn.init.normal_(module.weight, 0.0, std)
                nn.init.zeros_(module.bias)
    return _pinn_task(lambda net: ASGD(net.parameters(), lr=0.1), net=net)


def mdn_adam_lr(lr: float = 0.1):
    """The mixture density network, Adam betas ``(0.5, 0.9)`` at ``0.1`` (meant ``1e-3``)."""
    return _mdn_task(_adam_gan_betas(lr))


# ------------------------------------------------------------------------------------------------ healthy
def digits_noisy_labels(noisy: float = 0.3):
    """Digit sums with 30% of the training sums replaced by a uniform random sum (a crowd-labelled set;
    the validation sums are the checked ones), Adam betas ``(0.5, 0.9)`` at ``5e-3``."""

    def noise(y: Tensor) -> Tensor:
        g = _gen(23)
        return torch.where(
            torch.rand(len(y), generator=g) < noisy, torch.randint(19, y.shape, generator=g), y
        )

    return _digits_task(_adam_gan_betas(5e-3), labels=noise)


WARMUP = 100


def mdn_warmup():
    """The mixture density network, AdamW (amsgrad) ``3e-3`` after a linear LambdaLR warm-up from 1% over
    100 steps, then constant; its NLL goes below zero."""
    return _mdn_task(_adamw_amsgrad(3e-3), lambda o: LambdaLR(o, lambda s: min(1.0, (s + 1) / WARMUP)))


PINN_MILESTONES = (100, 200)


def pinn_step_decay():
    """The logistic PINN, Adam betas ``(0.5, 0.9)`` at ``1e-2`` divided by 5 at steps 100 and 200."""
    return _pinn_task(_adam_gan_betas(1e-2), lambda o: MultiStepLR(o, list(PINN_MILESTONES), 0.2))


def graphs_frozen_encoder():
    """Graphs with the node encoder and the first message layer frozen on purpose (random features), AdamW
    (amsgrad) ``3e-3`` on the rest."""
    net = GraphNet()
    net.encode.requires_grad_(False)
    net.messages[0].requires_grad_(False)
    return _graph_task(
        lambda n: AdamW([p for p in n.parameters() if p.requires_grad], 3e-3, amsgrad=True), net=net
    )


def graphs_asgd_slow():
    """Graphs, ASGD ``0.02``: slow and steady."""
    return _graph_task(lambda net: ASGD(net.parameters(), lr=0.02))


class UnitsHead(nn.Module):
    """A network whose outputs are mapped to each target's own units: ``TARGET_MEAN + TARGET_SCALE * net``."""

    def __init__(self, net: nn.Module) -> None:
        super().__init__()
        self.body = net
        self.register_buffer("mean", TARGET_MEAN.clone())
        self.register_buffer("scale", TARGET_SCALE.clone())

    def forward(self, x: Tensor) -> Tensor:
        return self.mean + self.scale * self.body(x)


def buildings_raw_units():
    """Buildings trained on the MSE in the targets' own units (kWh, degC, fraction): a head maps the
    network's outputs to each target's units, RMSprop momentum ``0.9`` at ``1e-3``; the loss starts ~1e9."""
    return _buildings_task(lambda net: RMSprop(net.parameters(), 1e-3, momentum=0.9),
                           net=UnitsHead(MLP([8, 64, 64, 3])), raw=True)  # fmt: skip


def buildings_tiny_val():
    """Buildings validated on 10 rows every 20 steps, AdamW (amsgrad) ``3e-3`` under ReduceLROnPlateau
    (factor 0.5, patience 1) on that jittery ``val_loss``."""
    return _buildings_task(
        _adamw_amsgrad(3e-3),
        schedule=lambda o: ReduceLROnPlateau(o, mode="min", factor=0.5, patience=1),
        val_rows=10,
        monitor=True,
        frequency=20,
    )


def graphs_exponential_decay():
    """Graphs, Adam betas ``(0.5, 0.9)`` at ``3e-3`` decayed 1000x over the run by ExponentialLR (the fixed
    schedule): the LR ends at ``3e-6`` and the loss flattens."""
    return graphs_exponential_inverted(inverted=False)
