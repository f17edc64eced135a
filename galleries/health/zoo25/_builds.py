"""Builders of zoo 25's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data, all made in code: perspective projections of a rotating 3-D object (its orientation as sin
and cos), jets of padded constituents (a three-prong signal against one-prong QCD), speeds on a ten-sensor
road graph, documents in five made-up languages (character-bigram counts), shapes and their edge maps, and the
daily returns of eight assets.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.optim import SGD, Adam, Adamax, AdamW, NAdam, RMSprop, Rprop
from torch.optim.lr_scheduler import ConstantLR, CosineAnnealingLR, CyclicLR, OneCycleLR, StepLR
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo25._models import (
    MLP,
    EdgeCNN,
    JetDeepSet,
    PortfolioNet,
    RoadGCN,
    Task,
    TwoOptimizerTask,
    cross_entropy,
    mse,
    sharpe_loss,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(*tensors: Tensor, batch: int, shuffle: bool = True, seed: int = 0) -> DataLoader:
    """A loader of in-memory tensors; shuffled with its own generator (the same order in every run)."""
    return DataLoader(TensorDataset(*tensors), batch_size=batch, shuffle=shuffle,
                      generator=_gen(seed) if shuffle else None)  # fmt: skip


# ------------------------------------------------------------------------------------------------ orientation
POINTS = 12


@functools.cache
def _template() -> Tensor:
    """A fixed asymmetric 3-D object of 12 points (a chair-like scatter), ``(12, 3)``."""
    return torch.randn(POINTS, 3, generator=_gen(250)) * torch.tensor([1.0, 0.7, 0.5])


def projected_frames(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` camera frames of the object turned by a random angle about its vertical axis, at a random
    distance, projected in perspective onto the image plane, shifted and jittered: the image points
    ``(rows, 12, 2)`` and the orientation ``(sin, cos)`` ``(rows, 2)``."""
    g = _gen(seed)
    theta = torch.rand(rows, generator=g) * 2 * math.pi
    c, s = theta.cos().unsqueeze(1), theta.sin().unsqueeze(1)
    p = _template()
    x, y, z = p[:, 0] * c + p[:, 2] * s, p[:, 1].expand(rows, -1), -p[:, 0] * s + p[:, 2] * c
    depth = 4 + 4 * torch.rand(rows, 1, generator=g) + z
    image = torch.stack([x / depth, y / depth], -1) * 300 + 40 * torch.randn(rows, 1, 2, generator=g)
    image = image + 0.5 * torch.randn(image.shape, generator=g)  # pixels
    return image, torch.cat([s, c], 1)


def normalise_points(image: Tensor) -> Tensor:
    """Centre each frame on its centroid and divide by its RMS radius (translation and scale removed)."""
    centred = image - image.mean(1, keepdim=True)
    scale = centred.flatten(1).norm(dim=1) / POINTS**0.5
    return (centred / scale[:, None, None]).flatten(1)


BLANK_FRAMES = (700, 1900, 2600)  # frames where the tracker lost the object and wrote all points at (0, 0)


def _orientation_task(make_optimizer, blank: bool = False, batch: int = 32, rows: int = 3200):
    """Orientation regression from the normalised points of ``rows`` training frames (400 validate), an MLP
    and the MSE of ``(sin, cos)``; ``blank``: the :data:`BLANK_FRAMES` lost by the tracker."""
    image, target = projected_frames(rows, 0)
    if blank:
        image[list(BLANK_FRAMES)] = 0.0
    vimage, vtarget = projected_frames(400, 1)
    model = Task(MLP([2 * POINTS, 128, 128, 2]), mse, make_optimizer)
    train = loader(normalise_points(image), target, batch=batch)
    return model, train, loader(normalise_points(vimage), vtarget, batch=400, shuffle=False)


# ------------------------------------------------------------------------------------------------ jets
CONSTITUENTS = 24


def jets(rows: int, seed: int) -> tuple[Tensor, Tensor, Tensor]:
    """Jets of up to 24 constituents, each ``(log pt fraction, d_eta, d_phi, dR)`` relative to the jet axis,
    zero-padded, with a mask of the real ones; label 1: a three-prong (top-like) jet with ~4 more
    constituents, 0: a wider one-prong QCD jet (the classes overlap)."""
    g = _gen(seed)
    label = (torch.rand(rows, generator=g) < 0.5).long()
    count = (10 + 4 * label + torch.randn(rows, generator=g) * 4).round().clamp(3, CONSTITUENTS).long()
    mask = (torch.arange(CONSTITUENTS) < count.unsqueeze(1)).float()
    prong_axes = torch.randn(rows, 3, 2, generator=g) * 0.25 * label.view(-1, 1, 1)
    prong = torch.randint(0, 3, (rows, CONSTITUENTS), generator=g)
    axis = prong_axes.gather(1, prong.unsqueeze(-1).expand(-1, -1, 2))
    spread = 0.08 + 0.06 * (1 - label).view(-1, 1, 1)
    d = axis + spread * torch.randn(rows, CONSTITUENTS, 2, generator=g)
    pt = torch.empty(rows, CONSTITUENTS).exponential_(generator=g) * mask
    pt = pt / pt.sum(1, keepdim=True)
    x = torch.cat([torch.log(pt + 1e-3).unsqueeze(-1) + 3, d * 5, d.norm(dim=-1, keepdim=True) * 5], -1)
    return x * mask.unsqueeze(-1), mask, label


def jet_loss(net: nn.Module, batch) -> Tensor:
    x, mask, y = batch
    return F.cross_entropy(net(x, mask), y)


def _jets_task(make_optimizer, net: nn.Module | None = None, schedule=None, schedule_config=None,
               batch: int = 64, val_rows: int = 600):  # fmt: skip
    x, m, y = jets(4800, 0)
    vx, vm, vy = jets(val_rows, 1)
    net = net if net is not None else JetDeepSet()
    model = Task(net, jet_loss, make_optimizer, schedule, schedule_config)
    return model, loader(x, m, y, batch=batch), loader(vx, vm, vy, batch=val_rows, shuffle=False)


# ------------------------------------------------------------------------------------------------ languages
LANGUAGES, ALPHABET = 5, 27  # a-z and the space


@functools.cache
def _chains() -> Tensor:
    """Each language's character-bigram Markov chain ``(5, 27, 27)``: a shared chain mixed with a peaky
    language-specific one, so the languages share most of their bigrams."""
    g = _gen(2525)
    shared = torch.rand(ALPHABET, ALPHABET, generator=g) ** 3
    shared = shared / shared.sum(-1, keepdim=True)
    own = torch.rand(LANGUAGES, ALPHABET, ALPHABET, generator=g) ** 6
    own = own / own.sum(-1, keepdim=True)
    return 0.75 * shared + 0.25 * own


@functools.cache
def documents(rows: int, seed: int, length: int = 40) -> tuple[Tensor, Tensor]:
    """``rows`` documents of ``length`` characters drawn from the five languages' chains, as their
    character-bigram counts ``(rows, 729)``, and their languages (cached: callers copy before changing)."""
    g = _gen(seed)
    chains = _chains()
    label = torch.randint(0, LANGUAGES, (rows,), generator=g)
    char = torch.randint(0, ALPHABET, (rows,), generator=g)
    counts = torch.zeros(rows, ALPHABET * ALPHABET)
    for _ in range(length - 1):
        nxt = torch.multinomial(chains[label, char], 1, generator=g).squeeze(1)
        counts[torch.arange(rows), char * ALPHABET + nxt] += 1
        char = nxt
    return counts, label


def _langid_task(make_optimizer, net: nn.Module | None = None, schedule=None, labels=None, split=None,
                 batch: int = 64):  # fmt: skip
    """Language identification from log(1 + bigram counts): 6,400 training and 500 validation documents
    (``split``: ``(train, val)`` tensors instead), an MLP of width 64 unless ``net``; ``labels`` changes the
    training labels."""
    (x, y), (vx, vy) = split if split is not None else (documents(6400, 0), documents(500, 1))
    if labels is not None:
        y = labels(y)
    model = Task(net if net is not None else MLP([729, 64, LANGUAGES]), cross_entropy, make_optimizer,
                 schedule)  # fmt: skip
    return model, loader(x.log1p(), y, batch=batch), loader(vx.log1p(), vy, batch=len(vy), shuffle=False)


# ------------------------------------------------------------------------------------------------ edges
SIDE = 24


def shapes(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` noisy grey images ``(rows, 1, 24, 24)`` of one to three overlapping rectangles and discs of
    random intensities, and their edge maps (pixels whose region differs from the right or lower neighbour's):
    ~8% edges."""
    g = _gen(seed)
    yy, xx = torch.meshgrid(torch.arange(SIDE), torch.arange(SIDE), indexing="ij")
    region = torch.zeros(rows, SIDE, SIDE, dtype=torch.long)
    image = torch.zeros(rows, SIDE, SIDE)
    for k in range(1, 4):
        present = (torch.rand(rows, 1, 1, generator=g) < (1.0 if k == 1 else 0.5)).float()
        cx, cy = (torch.rand(2, rows, 1, 1, generator=g) * SIDE).unbind(0)
        size = 3 + torch.rand(rows, 1, 1, generator=g) * 6
        disc = ((xx - cx) ** 2 + (yy - cy) ** 2) < size**2
        box = ((xx - cx).abs() < size) & ((yy - cy).abs() < 0.6 * size)
        inside = torch.where(torch.rand(rows, 1, 1, generator=g) < 0.5, disc, box) & (present > 0)
        region = torch.where(inside, k, region)
        image = torch.where(inside, torch.rand(rows, 1, 1, generator=g), image)
    image = image + 0.1 * torch.randn(image.shape, generator=g)
    padded = F.pad(region.float(), (1, 1, 1, 1), mode="replicate")
    edge = torch.zeros(rows, SIDE, SIDE, dtype=torch.bool)
    for dy, dx in ((2, 1), (1, 2)):
        edge |= padded[:, dy : dy + SIDE, dx : dx + SIDE] != region
    return image.unsqueeze(1), edge.float().unsqueeze(1)


def edge_loss(pos_weight: float):
    """Per-pixel binary cross-entropy with the positive (edge) pixels weighted ``pos_weight``."""
    weight = torch.tensor(pos_weight)

    def loss(net: nn.Module, batch) -> Tensor:
        x, y = batch
        return F.binary_cross_entropy_with_logits(net(x), y, pos_weight=weight)

    return loss


def _edges_task(make_optimizer, net: nn.Module | None = None, schedule=None, pos_weight: float = 5.0,
                rows: int = 1024, val_rows: int = 128, batch: int = 16):  # fmt: skip
    x, y = shapes(rows, 0)
    vx, vy = shapes(val_rows, 1)
    model = Task(net if net is not None else EdgeCNN(), edge_loss(pos_weight), make_optimizer, schedule)
    return model, loader(x, y, batch=batch), loader(vx, vy, batch=val_rows, shuffle=False)


# ------------------------------------------------------------------------------------------------ traffic
SENSORS, LAGS, HORIZON, DAY = 10, 12, 3, 288  # 5-minute readings: 288 a day, forecast 15 minutes ahead


def road_adjacency() -> Tensor:
    """The road graph: eight sensors along a highway (0 upstream to 7 downstream) and two on-ramp sensors
    (8 joins at 3, 9 at 6); ``D^-1/2 (A + I) D^-1/2``."""
    a = torch.eye(SENSORS)
    for i, j in [*((k, k + 1) for k in range(7)), (8, 3), (9, 6)]:
        a[i, j] = a[j, i] = 1.0
    d = a.sum(1).rsqrt()
    return d[:, None] * a * d[None, :]


@functools.cache
def speeds(days: int = 14) -> Tensor:
    """``(days * 288, 10)`` speeds in mph: free flow near 65, a morning and an evening jam each day that
    starts at the downstream end and travels upstream (two readings a sensor), of a random depth; ramps slow
    with the highway sensor they join; AR(1) noise."""
    g = _gen(77)
    t = torch.arange(days * DAY, dtype=torch.float32)
    delay = torch.tensor([14.0, 12, 10, 8, 6, 4, 2, 0, 8, 2])  # readings behind the downstream jam
    speed = 65 + 2 * torch.randn(SENSORS, generator=g).expand(len(t), -1).clone()
    for rush in (8.0, 17.5):
        for day in range(days):
            depth = 15 + 20 * torch.rand(1, generator=g)
            start = day * DAY + rush * 12 + 6 * torch.randn(1, generator=g)
            width = 10 + 6 * torch.rand(1, generator=g)
            phase = (t[:, None] - start - delay[None, :]) / width
            speed = speed - depth * torch.exp(-0.5 * phase**2)
    noise = torch.zeros(SENSORS)
    rows = []
    for _ in range(len(t)):
        noise = 0.8 * noise + 1.5 * torch.randn(SENSORS, generator=g)
        rows.append(noise)
    return speed + torch.stack(rows)


TRAIN_DAYS = 10
SENTINEL = 6553.5  # the loop detectors' "no data" code (0xFFFF tenths of a mph)


class SpeedWindows(Dataset):
    """Windows of the speed series: the last 12 readings of every sensor ``(10, 12)`` and the reading
    ``HORIZON`` steps later ``(10,)``, scaled by a robust centre and spread (median and inter-quartile range
    of the training readings). ``stats``: ``(centre, spread)`` computed once; ``None`` recomputes them from
    the whole training series for every window (the bug of :func:`traffic_stats_per_item`)."""

    def __init__(self, series: Tensor, train_series: Tensor, stats: tuple[float, float] | None,
                 stride: int = 1) -> None:  # fmt: skip
        self.series, self.train_series, self.stats = series, train_series, stats
        self.starts = range(0, len(series) - LAGS - HORIZON + 1, stride)

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        centre, spread = self.stats if self.stats is not None else robust_stats(self.train_series)
        s = self.starts[i]
        window = (self.series[s : s + LAGS + HORIZON] - centre) / spread
        return window[:LAGS].T, window[LAGS + HORIZON - 1]


def robust_stats(series: Tensor) -> tuple[float, float]:
    q = torch.quantile(series.flatten(), torch.tensor([0.25, 0.5, 0.75]))
    return float(q[1]), float(q[2] - q[0])


def windows(series: Tensor, stats: tuple[float, float]) -> tuple[Tensor, Tensor]:
    """Every window of ``series`` at once, scaled with ``stats``: inputs ``(W, 10, 12)``, targets
    ``(W, 10)``."""
    centre, spread = stats
    w = ((series - centre) / spread).unfold(0, LAGS + HORIZON, 1)  # (W, 10, LAGS + HORIZON)
    return w[..., :LAGS].contiguous(), w[..., -1].contiguous()


def _traffic_task(make_optimizer, sentinels: int = 0, net: nn.Module | None = None, raw_units: bool = False,
                  two_optimizers: bool = False, batch: int = 32, dataset: str = "tensors"):  # fmt: skip
    """The road forecast: ten training days, four validation days (every fourth window). ``dataset``:
    ``"tensors"`` (every window made at once), ``"per_item"`` (a :class:`SpeedWindows` that recomputes the
    training statistics for every window) or ``"windows"`` (a :class:`SpeedWindows` given them)."""
    series = speeds().clone()
    train_series, val_series = series[: TRAIN_DAYS * DAY], series[TRAIN_DAYS * DAY :]
    if sentinels:
        g = _gen(31)
        rows = torch.randint(LAGS, len(train_series), (sentinels,), generator=g)
        cols = torch.randint(0, SENSORS, (sentinels,), generator=g)
        train_series[rows, cols] = SENTINEL
    stats = robust_stats(speeds()[: TRAIN_DAYS * DAY])
    if dataset == "tensors":
        train = TensorDataset(*windows(train_series, stats))
    else:
        train = SpeedWindows(train_series, train_series, None if dataset == "per_item" else stats)
    vx, vy = windows(val_series, stats)
    if raw_units:  # the targets in mph
        train = TensorDataset(train.tensors[0], train.tensors[1] * stats[1] + stats[0])
        vy = vy * stats[1] + stats[0]
    net = net if net is not None else RoadGCN(road_adjacency(), LAGS)
    model = (TwoOptimizerTask if two_optimizers else Task)(net, mse, make_optimizer)
    train_loader = DataLoader(train, batch_size=batch, shuffle=True, generator=_gen(0))
    return model, train_loader, loader(vx[::4], vy[::4], batch=len(vy[::4]), shuffle=False)


# ------------------------------------------------------------------------------------------------ portfolio
ASSETS, RETURN_LAGS, BILL_RATE = 8, 10, 1e-4  # asset 0: a treasury bill paying ~2.5% a year


@functools.cache
def returns(days: int = 3000) -> Tensor:
    """Daily returns ``(days, 8)``: asset 0 a treasury bill (``1e-4`` a day, a ``1e-6`` wobble), assets 1-7
    stocks with a market factor and a slowly drifting expected return (AR(1), so past returns predict it
    a little), ~1% daily volatility."""
    g = _gen(88)
    beta = 0.5 + torch.rand(ASSETS - 1, generator=g)
    drift = torch.zeros(ASSETS - 1)
    rows = []
    for _ in range(days):
        drift = 0.97 * drift + 0.0006 * torch.randn(ASSETS - 1, generator=g)
        market = 0.006 * torch.randn(1, generator=g)
        stocks = 3e-4 + drift + beta * market + 0.008 * torch.randn(ASSETS - 1, generator=g)
        bill = BILL_RATE + 1e-6 * torch.randn(1, generator=g)
        rows.append(torch.cat([bill, stocks]))
    return torch.stack(rows)


def portfolio_windows(r: Tensor) -> tuple[Tensor, Tensor]:
    """Each day's features, the last 10 returns of every asset in percent ``(D, 8, 10)``, and the next
    day's returns ``(D, 8)``."""
    w = r.unfold(0, RETURN_LAGS + 1, 1)  # (D, 8, lags + 1)
    return 100 * w[..., :RETURN_LAGS].contiguous(), w[..., -1].contiguous()


def sharpe(risk_free: float):
    def loss(net: nn.Module, batch) -> Tensor:
        x, r = batch
        return sharpe_loss(net(x), r, risk_free)

    return loss


def _portfolio_task(make_optimizer, risk_free: float = BILL_RATE, net: nn.Module | None = None,
                    batch: int = 64, schedule=None, history: int = 2200):  # fmt: skip
    """Daily portfolios: the first 2,200 days train (``history``: only the last ones of them), the other
    ~800 validate (their Sharpe ratio in one batch)."""
    x, r = portfolio_windows(returns())
    model = Task(net if net is not None else PortfolioNet(ASSETS, RETURN_LAGS), sharpe(risk_free),
                 make_optimizer, schedule)  # fmt: skip
    split = 2200
    return (model, loader(x[split - history : split], r[split - history : split], batch=batch),
            loader(x[split:], r[split:], batch=len(r) - split, shuffle=False))  # fmt: skip


# ------------------------------------------------------------------------------------------------ problems
def orientation_blank_frames(blank: bool = True):
    """Orientation, RMSprop ``1e-3``: three frames where the tracker lost the object (every point written at
    (0, 0)) are divided by their RMS radius, 0, in the scale normalisation: 0/0 inputs."""
    return _orientation_task(lambda p: RMSprop(p, lr=1e-3), blank=blank)


def orientation_sgd_momentum(dampening: float = 0.0):
    """Orientation, SGD at ``1.0`` with momentum 0.99 written as an average (meant ``dampening=0.99``: the
    step ``lr * EMA(grad)``) but PyTorch's default ``dampening=0`` sums the gradients: steps 100x larger."""
    return _orientation_task(lambda p: SGD(p, lr=1.0, momentum=0.99, dampening=dampening))


def jets_detached(detach: bool = True):
    """Jets, a deep set, Adamax ``5e-3``; a ``.detach()`` on the pooled embedding (left from caching the
    embeddings) cuts ``phi`` from the graph: only the linear readout trains."""
    return _jets_task(lambda p: Adamax(p, lr=5e-3), JetDeepSet(detach_pooled=detach))


def jets_step_frequency(interval: str = "step"):
    """Jets, Adamax ``5e-3``, StepLR(step_size=1, gamma=0.5) under ``{"interval": "step", "frequency": 10}``:
    meant to halve the LR every 10 epochs (``"interval": "epoch"``), it halves it every 10 steps."""
    return _jets_task(lambda p: Adamax(p, lr=5e-3), schedule=lambda o: StepLR(o, 1, 0.5),
                      schedule_config={"interval": interval, "frequency": 10})  # fmt: skip


def langid_swapped_split(train_fraction: float = 0.1):
    """Language identification on a 1,000-document corpus split ``random_split``-style with the fractions
    swapped (``[0.1, 0.9]``, meant ``[0.9, 0.1]``): 100 training documents, 900 validation ones; a width-256
    two-hidden-layer MLP, Adam ``3e-3``, batches of 50 (two steps an epoch)."""
    x, y = documents(1000, 5)
    order = torch.randperm(1000, generator=_gen(6))
    train, val = order[: round(1000 * train_fraction)], order[round(1000 * train_fraction) :]
    return _langid_task(lambda p: Adam(p, lr=3e-3), MLP([729, 256, 256, LANGUAGES]),
                        split=((x[train], y[train]), (x[val], y[val])), batch=50)  # fmt: skip


CONSTANT_STEPS = 100


def langid_constant_lr(lr: float = 0.3, factor: float = 0.01):
    """Language identification, RMSprop at ``0.3`` (the LR of the SGD recipe it replaced; meant ``3e-3``)
    behind a ConstantLR(0.01, total_iters=100) warm start that hides it for 100 steps: from step 100 the LR
    is 0.3."""
    return _langid_task(lambda p: RMSprop(p, lr=lr), schedule=lambda o: ConstantLR(o, factor, CONSTANT_STEPS))


def langid_shuffled_labels(shuffled: bool = True):
    """Language identification, a linear model (multinomial logistic regression on the n-gram counts),
    Adamax ``1e-2``; the labels were shuffled with their own permutation (``y[perm_b]``, the documents
    ``x[perm_a]``), so no label belongs to its document."""

    def shuffle(y: Tensor) -> Tensor:
        return y[torch.randperm(len(y), generator=_gen(9))] if shuffled else y

    return _langid_task(lambda p: Adamax(p, lr=1e-2), nn.Linear(729, LANGUAGES), labels=shuffle)


def langid_adamax(lr: float = 1e-5):
    """Language identification, a linear model, Adamax at ``1e-5`` (meant ``1e-2``)."""
    return _langid_task(lambda p: Adamax(p, lr=lr), nn.Linear(729, LANGUAGES))


PRIOR = 0.08  # the edge pixels' share


def _edges_onecycle(max_lr: float, net: nn.Module | None = None):
    def schedule(optimizer):
        return OneCycleLR(optimizer, max_lr, total_steps=300, three_phase=True)

    return _edges_task(lambda p: NAdam(p, lr=max_lr, momentum_decay=4e-3), net, schedule, pos_weight=11.0)


def edges_prior_bias(prior: bool = True):
    """Edges, NAdam under OneCycleLR(3e-3, three_phase=True); the focal-loss prior init ``bias =
    -log((1 - 0.08) / 0.08)`` (meant for the last layer only) looped over every convolution: every ReLU
    starts below zero."""
    net = EdgeCNN()
    if prior:
        for m in net.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.constant_(m.bias, -math.log((1 - PRIOR) / PRIOR))
    return _edges_onecycle(3e-3, net)


def edges_onecycle(max_lr: float = 0.3):
    """Edges, NAdam under OneCycleLR(max_lr=0.3, three_phase=True) (meant ``3e-3``: an SGD recipe's peak)."""
    return _edges_onecycle(max_lr)


def traffic_per_item_stats(per_item: bool = True):
    """The road forecast, Adam ``1e-3``, batches of 16, from a Dataset whose ``__getitem__`` recomputes the
    robust scaling (quantiles of the whole training series) for every window (meant: once, in
    ``__init__``)."""
    return _traffic_task(lambda p: Adam(p, lr=1e-3), batch=16, dataset="per_item" if per_item else "windows")


def traffic_sentinels(count: int = 4):
    """The road forecast, Adam ``1e-3``; four readings are the detectors' "no data" code 6553.5 mph, left in
    (meant: masked), so every batch holding one has a loss ~10^4 x the others'."""
    return _traffic_task(lambda p: Adam(p, lr=1e-3), sentinels=count)


def portfolio_one_year(history: int = 250):
    """Portfolios on a Sharpe loss from the last 250 days of the history only (one year, "for recency"), a
    width-256 network, AdamW ``1e-3``, batches of 125 (two steps an epoch)."""
    return _portfolio_task(lambda p: AdamW(p, lr=1e-3, weight_decay=1e-2), net=PortfolioNet(width=256),
                           history=history, batch=history // 2)  # fmt: skip


# ------------------------------------------------------------------------------------------------ healthy
def orientation_ema_momentum():
    """Orientation, SGD ``1.0`` with momentum 0.99 and dampening 0.99 (an average of the gradients)."""
    return orientation_sgd_momentum(dampening=0.99)


def orientation_rprop_full_batch():
    """Orientation, Rprop on the full batch of 800 frames (one step an epoch), its default step sizes."""
    return _orientation_task(lambda p: Rprop(p, lr=1e-3), batch=800, rows=800)


def jets_bf16():
    """Jets, Adamax ``5e-3`` (trained under ``precision="bf16-mixed"`` on the CPU with gradient clipping)."""
    return _jets_task(lambda p: Adamax(p, lr=5e-3))


def jets_cosine():
    """Jets, Adamax ``5e-3`` under CosineAnnealingLR(T_max=300): the LR reaches 0 at the last step."""
    return _jets_task(lambda p: Adamax(p, lr=5e-3), schedule=lambda o: CosineAnnealingLR(o, 300))


NOISE = 0.3


def langid_noisy_labels():
    """Language identification with 30% of the training labels replaced by random languages (weak labels
    from a URL heuristic; the validation labels are clean), Adamax ``2e-3``."""

    def noisy(y: Tensor) -> Tensor:
        flip = torch.rand(len(y), generator=_gen(3)) < NOISE
        return torch.where(flip, torch.randint(0, LANGUAGES, (len(y),), generator=_gen(4)), y)

    return _langid_task(lambda p: Adamax(p, lr=2e-3), labels=noisy)


CYCLE = 50


def langid_cyclic():
    """Language identification, SGD under a triangular CyclicLR between 0.01 and 0.5 (50 steps up, 50 down),
    momentum cycled 0.95 -> 0.8 against it."""

    def schedule(optimizer):
        return CyclicLR(optimizer, 0.01, 0.5, step_size_up=CYCLE, mode="triangular", cycle_momentum=True,
                        base_momentum=0.8, max_momentum=0.95)  # fmt: skip

    return _langid_task(lambda p: SGD(p, lr=0.01, momentum=0.9), schedule=schedule)


def langid_warm_start():
    """Language identification, RMSprop ``1e-3`` held at a tenth by ConstantLR(0.1, total_iters=100): the LR
    rises 10x at step 100, as meant."""
    return langid_constant_lr(1e-3, 0.1)


def edges_tiny_val():
    """Edges, BCE with ``pos_weight=11`` (8% edge pixels), NAdam ``2e-3`` with ``momentum_decay=4e-3``,
    validated on 4 images."""
    return _edges_task(lambda p: NAdam(p, lr=2e-3, momentum_decay=4e-3), pos_weight=11.0, val_rows=4)


def traffic_mph():
    """The road forecast with the targets in mph (losses in the tens), the readout's bias started at the mean
    speed, Adam ``3e-3`` with a coupled L2 ``weight_decay=1e-4``."""
    net = RoadGCN(road_adjacency(), LAGS)
    nn.init.constant_(net.head.bias, float(speeds()[: TRAIN_DAYS * DAY].mean()))
    return _traffic_task(lambda p: Adam(p, lr=3e-3, weight_decay=1e-4), net=net, raw_units=True)


def traffic_two_optimizers():
    """The road forecast with manual optimisation: Adam ``1e-3`` for the graph convolutions, RMSprop ``1e-3``
    for the readout, two optimizer steps a batch."""
    return _traffic_task(
        lambda net: (Adam(net.body.parameters(), lr=1e-3), RMSprop(net.head.parameters(), lr=1e-3)),
        two_optimizers=True,
    )


def portfolio_sharpe():
    """Portfolios on a Sharpe loss (negative, noisy from batch to batch) over 2,200 days, AdamW ``1e-3``."""
    return _portfolio_task(lambda p: AdamW(p, lr=1e-3, weight_decay=1e-2))
