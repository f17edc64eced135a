"""Builders of zoo 16's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data, all made in code or bundled: a stochastic-block graph of four communities (with a few
isolated nodes, as new accounts are) for node classification, query groups of sixteen documents with
click-through features and graded relevance for learning to rank, scikit-learn's diabetes table.
"""

from __future__ import annotations

import functools

import numpy as np
import torch
from torch import Tensor, nn
from torch.optim import SGD, Adagrad, Adamax, AdamW
from torch.optim.lr_scheduler import LinearLR, OneCycleLR, PolynomialLR, SequentialLR
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo16._models import GCN, MLP, GraphTask, RankTask, RegressionTask, Scorer


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(*tensors: Tensor, batch: int, shuffle: bool = True) -> DataLoader:
    return DataLoader(TensorDataset(*tensors), batch_size=batch, shuffle=shuffle)


# ------------------------------------------------------------------------------------------------ graph
NODES, CLASSES, ISOLATED = 400, 4, 12


@functools.cache
def _graph() -> tuple[Tensor, Tensor]:
    """A stochastic-block graph: ``NODES`` nodes in ``CLASSES`` equal communities, edges with probability
    0.04 inside a community and 0.004 across, symmetric, no self-loops; the last ``ISOLATED`` nodes (new
    accounts) have no edges. Returns the 0/1 adjacency and the community labels."""
    g = _gen(16)
    y = torch.arange(NODES) % CLASSES
    same = y.unsqueeze(0) == y.unsqueeze(1)
    upper = torch.rand(NODES, NODES, generator=g) < torch.where(same, 0.04, 0.004)
    a = torch.triu(upper, diagonal=1).float()
    a = a + a.T
    a[NODES - ISOLATED :] = 0.0
    a[:, NODES - ISOLATED :] = 0.0
    return a, y


def node_features(dims: int = 24, signal: float = 0.35, seed: int = 3) -> Tensor:
    """Node features ``(NODES, dims)``: the node's community centre (a fixed standard normal vector) times
    ``signal`` plus unit Gaussian noise, so the features alone classify poorly and the graph helps."""
    _, y = _graph()
    g = _gen(seed)
    centres = torch.randn(CLASSES, dims, generator=g)
    return signal * centres[y] + torch.randn(NODES, dims, generator=g)


def normalise(a: Tensor, self_loops: bool = True) -> Tensor:
    """``D^-1/2 (A + I) D^-1/2`` (``self_loops`` false: ``D^-1/2 A D^-1/2``, degrees of ``A`` alone)."""
    if self_loops:
        a = a + torch.eye(len(a))
    d = a.sum(1).pow(-0.5)
    return d.unsqueeze(1) * a * d.unsqueeze(0)


def masks(train: int = 160, val: int = 120, seed: int = 4) -> tuple[Tensor, Tensor]:
    """Disjoint train and validation node masks from a fixed shuffle of the nodes."""
    order = torch.randperm(NODES, generator=_gen(seed))
    train_mask, val_mask = torch.zeros(NODES, dtype=torch.bool), torch.zeros(NODES, dtype=torch.bool)
    train_mask[order[:train]] = True
    val_mask[order[train : train + val]] = True
    return train_mask, val_mask


def _graph_loader(x: Tensor, a: Tensor, y: Tensor, mask: Tensor) -> DataLoader:
    return loader(x.unsqueeze(0), a.unsqueeze(0), y.unsqueeze(0), mask.unsqueeze(0), batch=1, shuffle=False)


def _graph_task(make_optimizer, net=None, schedule=None, x=None, a=None, split=None, param_groups=None,
                hidden: int = 32):  # fmt: skip
    adjacency, y = _graph()
    x = node_features() if x is None else x
    a = normalise(adjacency) if a is None else a
    train_mask, val_mask = masks() if split is None else split
    net = GCN(x.shape[1], hidden, CLASSES, dropout=0.5) if net is None else net
    model = GraphTask(net, make_optimizer, schedule, param_groups)
    return model, _graph_loader(x, a, y, train_mask), _graph_loader(x, a, y, val_mask)


# ------------------------------------------------------------------------------------------------ ranking
DOCS, RANK_FEATURES = 16, 10
RANK_BATCH = 16  # queries a batch
UNSHOWN = ((30 * RANK_BATCH + 7, 3), (33 * RANK_BATCH + 1, 11), (38 * RANK_BATCH + 12, 0))  # (query, doc)


@functools.cache
def _queries(queries: int, seed: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """``queries`` groups of ``DOCS`` documents: ``RANK_FEATURES`` text-match features, impressions and
    clicks, and relevance grades 0-4 from a latent score (features, an interaction, the true attractiveness
    that clicks reveal, noise). Returns ``(features, impressions, clicks, grades)``."""
    g = _gen(seed)
    x = torch.randn(queries, DOCS, RANK_FEATURES, generator=g)
    w = torch.linspace(1.0, -0.6, RANK_FEATURES)
    attract = torch.randn(queries, DOCS, generator=g)
    latent = x @ w * 0.6 + 0.8 * torch.tanh(x[..., 0] * x[..., 1]) + 0.9 * attract
    latent = latent + 0.4 * torch.randn(queries, DOCS, generator=g)
    grades = torch.bucketize(latent, torch.tensor([0.0, 1.0, 1.8, 2.6])).float()
    impressions = torch.poisson(torch.full((queries, DOCS), 40.0), generator=g).clamp(min=1)
    clicks = torch.binomial(impressions, torch.sigmoid(attract - 1.0), generator=g)
    if seed == 0:  # three documents added to the index after the click log was taken: never shown
        for query, doc in UNSHOWN:
            impressions[query, doc] = clicks[query, doc] = 0.0
    return x, impressions, clicks, grades


def ranking_features(x: Tensor, impressions: Tensor, clicks: Tensor, guard: bool = True) -> Tensor:
    """The scorer's input: the text features, the click-through rate ``clicks / impressions`` (``guard``:
    0 where a document has no impressions) and ``log1p(impressions)``."""
    ctr = clicks / impressions.clamp(min=1) if guard else clicks / impressions
    return torch.cat([x, ctr.unsqueeze(-1) * 4 - 1, (impressions.log1p() - 3.7).unsqueeze(-1)], dim=-1)


def ranking(queries: int = 640, seed: int = 0, guard: bool = True) -> tuple[Tensor, Tensor]:
    """Training (``seed`` 0, 640 queries) or validation (``seed`` 1, 200 queries) groups: the scorer's
    inputs ``(queries, DOCS, RANK_FEATURES + 2)`` and the grades ``(queries, DOCS)``."""
    x, impressions, clicks, grades = _queries(queries, seed)
    return ranking_features(x, impressions, clicks, guard), grades


def _rank_task(make_optimizer, net=None, schedule=None, train=None, batch: int = RANK_BATCH,
               shuffle: bool = True, param_groups=None, train_loader=None):  # fmt: skip
    x, grades = ranking(640, 0) if train is None else train
    vx, vgrades = ranking(200, 1)
    net = Scorer(x.shape[-1]) if net is None else net
    model = RankTask(net, make_optimizer, schedule, param_groups)
    train_loader = loader(x, grades, batch=batch, shuffle=shuffle) if train_loader is None else train_loader
    return model, train_loader, loader(vx, vgrades, batch=200, shuffle=False)


# ------------------------------------------------------------------------------------------------ diabetes
@functools.cache
def _diabetes() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes(scaled=False)
    x = torch.tensor(bunch.data, dtype=torch.float32)
    y = torch.tensor(bunch.target, dtype=torch.float32)
    order = torch.randperm(len(y), generator=_gen(16))
    return x[order], y[order]


Split = tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]


def diabetes(standardise_target: bool = True, target=None) -> Split:
    """Scikit-learn's diabetes table (442 patients, 10 features, progression a year on, 25-346): the first
    340 rows of a fixed shuffle train, the other 102 validate; features standardised with the training
    rows' statistics, the target (a vector, ``(N,)``; ``target``: a function that edits the raw one first)
    too unless ``standardise_target`` is false."""
    x, y = _diabetes()
    y = y.clone() if target is None else target(y.clone())
    x = (x - x[:340].mean(0)) / x[:340].std(0)
    if standardise_target:
        y = (y - y[:340].mean()) / y[:340].std()
    return (x[:340], y[:340]), (x[340:], y[340:])


def _diabetes_task(make_optimizer, net=None, column: bool = True, batch: int = 32, data=None):
    (x, y), (vx, vy) = diabetes() if data is None else data
    if column:
        y, vy = y.unsqueeze(1), vy.unsqueeze(1)
    model = RegressionTask(MLP([10, 64, 64, 1]) if net is None else net, make_optimizer)
    return model, loader(x, y, batch=batch), loader(vx, vy, batch=102, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def gcn_no_self_loops(self_loops: bool = False):
    """A GCN, AdamW ``1e-2`` (decoupled weight decay 0.5); the adjacency normalised as ``D^-1/2 A D^-1/2``
    without the self-loops, so the twelve isolated nodes have degree 0: ``0^-1/2 = inf`` and ``inf * 0 =
    NaN`` fill their rows and columns of the normalised adjacency."""
    a = normalise(_graph()[0], self_loops=self_loops)
    return _graph_task(lambda p: AdamW(p, lr=1e-2, weight_decay=0.5), a=a)


def gcn_sgd(lr: float = 1e2):
    """A GCN, SGD with Nesterov momentum 0.9 at ``lr=1e2`` (the config's ``1e-2`` lost its minus sign)."""
    return _graph_task(lambda p: SGD(p, lr=lr, momentum=0.9, nesterov=True))


def ranking_ctr(guard: bool = False):
    """Ranking, Adamax ``2e-3``, queries read in log order; the click-through rate computed as ``clicks /
    impressions`` with no guard, so the three never-shown documents get ``0 / 0 = NaN``."""
    return _rank_task(lambda p: Adamax(p, lr=2e-3), train=ranking(guard=guard), shuffle=False)


def diabetes_adagrad(lr: float = 1e-5):
    """Diabetes, Adagrad at ``1e-5`` (the LR of a fine-tuning config; Adagrad wants ~``1e-2``)."""
    return _diabetes_task(lambda p: Adagrad(p, lr=lr), MLP([10, 32, 1]))


def diabetes_broadcast(column: bool = False):
    """Diabetes, AdamW ``3e-3``; the target kept a vector ``(N,)`` against the ``(N, 1)`` predictions, so
    ``mse_loss`` broadcasts to ``(N, N)``: every prediction against every patient's target."""
    return _diabetes_task(lambda p: AdamW(p, lr=3e-3, weight_decay=1e-2), MLP([10, 32, 1]), column=column)


def gcn_unregularised(dropout: float = 0.0, weight_decay: float = 0.0):
    """A GCN, AdamW ``1e-2`` with the recipe's dropout (0.5) and weight decay (0.5) both left out."""
    net = GCN(24, 32, CLASSES, dropout=dropout)
    return _graph_task(lambda p: AdamW(p, lr=1e-2, weight_decay=weight_decay), net=net)


def ranking_onecycle(max_lr: float = 1.0):
    """Ranking, AdamW under OneCycleLR(max_lr=1.0) (copied from an SGD recipe; meant ``1e-2``)."""
    return _rank_task(lambda p: AdamW(p, lr=max_lr, weight_decay=1e-2),
                      schedule=lambda o: OneCycleLR(o, max_lr=max_lr, total_steps=300))  # fmt: skip


WARMUP_STEPS = 10
DECAY_ITERS = 8  # the trainer's max_epochs: 300 steps are 7.5 epochs of 40 steps


def ranking_warmup_decay(decay_iters: int = DECAY_ITERS):
    """Ranking, AdamW ``3e-3`` under SequentialLR: a LinearLR warm-up from 10% over 10 steps, then a
    PolynomialLR decay whose ``total_iters`` is ``max_epochs`` (8) while the schedule steps every batch,
    so the LR reaches 0 at step 18 (meant ``max_steps - 10 = 290``)."""

    def schedule(o):
        decay = PolynomialLR(o, total_iters=decay_iters, power=1.0)
        return SequentialLR(o, [LinearLR(o, 0.1, 1.0, WARMUP_STEPS), decay], milestones=[WARMUP_STEPS])

    return _rank_task(lambda p: AdamW(p, lr=3e-3, weight_decay=1e-2), schedule=schedule)


def ranking_param_groups(prefixes: tuple[str, ...] = ("hidden", "out")):
    """Ranking, a compact width-8 scorer, AdamW ``3e-3`` with two groups built by name: weights of
    ``prefixes`` decayed, every bias not; ``prefixes`` copied from an older scorer without the ``encoder``
    layer, so the encoder's weight is in neither group."""

    def groups(net: nn.Module):
        named = list(net.named_parameters())
        decay = [p for n, p in named if n.startswith(prefixes) and n.endswith("weight")]
        return [{"params": decay, "weight_decay": 1e-2},
                {"params": [p for n, p in named if n.endswith("bias")], "weight_decay": 0.0}]  # fmt: skip

    net = Scorer(RANK_FEATURES + 2, width=8)  # a compact scorer (the latency budget)
    return _rank_task(lambda g: AdamW(g, lr=3e-3), net=net, param_groups=groups)


def ranking_deep_sigmoid(activation: type[nn.Module] = nn.Sigmoid):
    """Ranking, a scorer of eight width-32 hidden layers with sigmoid activations, SGD Nesterov 0.9 at
    ``0.05``."""
    net = Scorer(RANK_FEATURES + 2, 32, depth=8, activation=activation)
    if activation is nn.ReLU:  # the fix: ReLU with He initialisation
        for layer in [net.encoder, *net.hidden]:
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)
    return _rank_task(lambda p: SGD(p, lr=0.05, momentum=0.9, nesterov=True), net=net)


class QueryLog(Dataset):
    """Query groups read from the click log's CSV lines (``qid,grade,features...``, one line a document).
    ``indexed`` false: every item scans all the lines for its query id (``O(table)`` an item); true: the
    lines grouped by query once."""

    def __init__(self, x: Tensor, grades: Tensor, indexed: bool) -> None:
        self.lines = [
            ",".join([str(q), f"{float(grades[q, d]):g}", *(f"{v:.5f}" for v in x[q, d].tolist())])
            for q in range(len(x))
            for d in range(x.shape[1])
        ]
        self.queries = len(x)
        self.index: dict[str, list[str]] | None = None
        if indexed:
            self.index = {}
            for line in self.lines:
                self.index.setdefault(line.split(",", 1)[0], []).append(line)

    def __len__(self) -> int:
        return self.queries

    def __getitem__(self, q: int) -> tuple[Tensor, Tensor]:
        qid = str(q)
        if self.index is not None:
            rows = self.index[qid]
        else:
            rows = [line for line in self.lines if line.split(",")[0] == qid]
        table = np.array([[float(v) for v in line.split(",")[1:]] for line in rows], dtype=np.float32)
        return torch.from_numpy(table[:, 1:]), torch.from_numpy(table[:, 0])


def ranking_query_log(indexed: bool = False):
    """Ranking, AdamW ``3e-3``, batches of 8 queries from :class:`QueryLog`: each query's documents found by
    scanning every line of the log (10240 lines) for its id."""
    x, grades = ranking(640, 0)
    train = DataLoader(QueryLog(x, grades, indexed), batch_size=8, shuffle=True)
    return _rank_task(lambda p: AdamW(p, lr=3e-3, weight_decay=1e-2), train_loader=train)


MISTYPED = (17, 260)  # training rows whose progression was typed with an extra 0


def diabetes_mistyped(rows: tuple[int, ...] = MISTYPED):
    """Diabetes, Adamax ``2e-3``, batches of 16; two patients' progression typed with an extra zero (e.g.
    1510 for 151), the target then standardised with the training rows' (contaminated) statistics."""

    def mistype(y: Tensor) -> Tensor:
        y[list(rows)] *= 10
        return y

    data = diabetes(target=mistype)
    return _diabetes_task(lambda p: Adamax(p, lr=2e-3), MLP([10, 32, 1]), batch=16, data=data)


# ------------------------------------------------------------------------------------------------ healthy
GCN_WARMUP = 100


def gcn_warmup_polynomial():
    """A GCN, AdamW ``1e-2`` under SequentialLR: a LinearLR warm-up from 1% over 100 steps, then a
    quadratic PolynomialLR decay over the remaining 200."""

    def schedule(o):
        warm = LinearLR(o, 0.01, 1.0, GCN_WARMUP)
        return SequentialLR(o, [warm, PolynomialLR(o, total_iters=200, power=2.0)], milestones=[GCN_WARMUP])

    return _graph_task(lambda p: AdamW(p, lr=1e-2, weight_decay=0.5), schedule=schedule)


def gcn_random_projection():
    """A GCN whose first layer (24 -> 256) is frozen on purpose (a random projection), only the readout
    trained, Adamax ``1e-2``."""
    net = GCN(24, 256, CLASSES, dropout=0.5)
    net.conv1.requires_grad_(False)
    return _graph_task(lambda p: Adamax(p, lr=1e-2), net=net)


def gcn_tiny_validation():
    """A GCN, AdamW ``1e-2``, validated on 8 labelled nodes only."""
    train_mask, val_mask = masks()
    tiny = val_mask & (torch.cumsum(val_mask.int(), 0) <= 8)
    return _graph_task(lambda p: AdamW(p, lr=1e-2, weight_decay=0.5), split=(train_mask, tiny))


def diabetes_raw_clipped():
    """Diabetes with the target in its own units (variance ~6000, the readout's bias at the training mean),
    SGD Nesterov 0.9 at ``5e-2`` with ``gradient_clip_val=1.0`` (gradients in the hundreds, clipped every
    step)."""
    (x, y), (vx, vy) = diabetes(standardise_target=False)
    net = MLP([10, 32, 1])
    nn.init.constant_(net[2].bias, float(y.mean()))
    opt = lambda p: SGD(p, lr=5e-2, momentum=0.9, nesterov=True)  # noqa: E731
    return _diabetes_task(opt, net, data=((x, y), (vx, vy)))


def diabetes_adagrad_floor():
    """Diabetes, Adagrad ``1e-2``: the loss reaches the noise floor (~half the variance) in a few dozen
    steps and stays there."""
    return diabetes_adagrad(1e-2)


def ranking_accumulated():
    """Ranking in micro-batches of 2 queries, ``accumulate_grad_batches=8`` (16 queries an optimizer step),
    AdamW ``3e-3``."""
    return _rank_task(lambda p: AdamW(p, lr=3e-3, weight_decay=1e-2), batch=2)


def ranking_noisy_grades(share: float = 0.3):
    """Ranking with 30% of the training documents' grades drawn again at random (crowd judges); the
    validation grades are the editors'."""
    x, grades = ranking(640, 0)
    g = _gen(30)
    noisy = torch.rand(grades.shape, generator=g) < share
    grades = torch.where(noisy, torch.randint(0, 5, grades.shape, generator=g).float(), grades)
    return _rank_task(lambda p: AdamW(p, lr=3e-3, weight_decay=1e-2), train=(x, grades))


def ranking_onecycle_peak():
    """Ranking, AdamW under OneCycleLR(max_lr=1e-2): the LR climbs 25x to 1e-2 by step 90 and anneals."""
    return ranking_onecycle(1e-2)


def ranking_whole_set():
    """Ranking with the whole training set (640 queries) as every batch, Adamax ``2e-2``."""
    return _rank_task(lambda p: Adamax(p, lr=2e-2), batch=640)
