"""Builders of zoo 21's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. All data is made in code from fixed seeds: questions over short generated contexts with a number,
a name and a place span; transitions of a ten-state ring MDP; shoppers' baskets; 12x12 canvases of coloured
squares, discs and crosses; points labelled by a random teacher network; strings of brackets.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adadelta, Adagrad, Adam, AdamW, RMSprop
from torch.optim.lr_scheduler import CyclicLR, LambdaLR, MultiStepLR
from torch.utils.data import (
    BatchSampler,
    DataLoader,
    Dataset,
    RandomSampler,
    SequentialSampler,
    TensorDataset,
)

from galleries.health.zoo21._models import (
    MLP,
    BasketTask,
    BracketGRU,
    BracketTask,
    ColourNet,
    ColourTask,
    FittedQTask,
    SelectiveTask,
    SpanEncoder,
    SpanTask,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(*tensors: Tensor, batch: int = 32, shuffle: bool = True, seed: int = 0) -> DataLoader:
    """Batches of ``tensors`` gathered with one index each (no per-row collate), shuffled (or not) by a
    generator of their own: the order does not depend on the global RNG."""
    data = TensorDataset(*tensors)
    rows = RandomSampler(data, generator=_gen(seed)) if shuffle else SequentialSampler(data)
    return DataLoader(data, sampler=BatchSampler(rows, batch, drop_last=False), batch_size=None)


# ================================================================================================ span QA
PAD, SEP = 0, 1
QA_LENGTH, QA_VOCAB = 24, 60
QA_BATCH = 32


@functools.cache
def questions(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` questions ``[asked kind, SEP, context, PAD...]`` (length 24) and their answer spans
    ``(start, end)``, inclusive positions. A context is 2-10 filler words (ids 40-59) around three runs of
    1-4 tokens, one of each kind: a number (ids 10-19), a name (20-29), a place (30-39), in random order and
    never adjacent; the question (id 2, 3 or 4) asks for one kind, the answer is that run. Only the longest
    contexts (10 fillers and three 4-token runs, ~0.2% of them) fill all 24 positions."""
    g = _gen(seed)
    ids = torch.zeros(rows, QA_LENGTH, dtype=torch.long)
    spans = torch.zeros(rows, 2, dtype=torch.long)

    def words(low: int, count: int) -> list[int]:
        return torch.randint(low, low + (20 if low == 40 else 10), (count,), generator=g).tolist()

    for i in range(rows):
        asked = int(torch.randint(3, (1,), generator=g))
        lengths = torch.randint(1, 5, (3,), generator=g).tolist()
        fillers = int(torch.randint(2, 11, (1,), generator=g))
        gaps = [0, 1, 1, 0]
        for j in torch.randint(0, 4, (fillers - 2,), generator=g).tolist():
            gaps[j] += 1
        seq = [2 + asked, SEP]
        for j, kind in enumerate(torch.randperm(3, generator=g).tolist()):
            seq += words(40, gaps[j])
            if kind == asked:
                spans[i, 0] = len(seq)
            seq += words(10 + 10 * kind, lengths[kind])
            if kind == asked:
                spans[i, 1] = len(seq) - 1
        seq += words(40, gaps[3])
        ids[i, : len(seq)] = torch.tensor(seq)
    return ids, spans


QA_TRAIN_SEED = 3
#: the first training batch (read in order) holding a context with no padding at all
QA_FULL_BATCH = int((questions(4096, QA_TRAIN_SEED)[0] != PAD).all(1).nonzero()[0]) // QA_BATCH


QA_WARMUP = 30
#: the first step run below 1% of the LR: the seventh halving after the warm-up
QA_COLLAPSE = QA_WARMUP + 7


def _qa_task(schedule: Callable[[int], float], mask_from: Any = None, val_rows: int = 512, lr: float = 3e-3):
    x, y = questions(4096, QA_TRAIN_SEED)
    vx, vy = questions(512, 1)
    net = SpanEncoder(QA_VOCAB, QA_LENGTH, mask_from=mask_from)
    model = SpanTask(
        net,
        lambda n: AdamW(n.parameters(), lr=lr, weight_decay=0.01),
        lambda o: LambdaLR(o, schedule),
    )
    val = loader(vx[:val_rows], vy[:val_rows], batch=512, shuffle=False)
    # generated i.i.d., read in the order generated
    return model, loader(x, y, batch=QA_BATCH, shuffle=False), val


def warmup(steps: int) -> Callable[[int], float]:
    """A linear warm-up to the full LR over ``steps`` steps, then constant."""
    return lambda step: min(1.0, (step + 1) / steps)


def qa_decay(per_step: bool = True):
    """Span QA, AdamW ``3e-3`` under a LambdaLR: a 30-step linear warm-up, then a decay meant to halve the
    LR every 100 steps, written ``0.5 ** (step - 30)`` (the ``/ 100`` left out): the LR halves every step."""

    def schedule(step: int) -> float:
        if step < QA_WARMUP:
            return (step + 1) / QA_WARMUP
        return 0.5 ** (step - QA_WARMUP) if per_step else 0.5 ** ((step - QA_WARMUP) / 100)

    return _qa_task(schedule)


def qa_mask_convention(inverted: bool = True):
    """Span QA, AdamW ``3e-3`` with a 30-step warm-up; the hand-written attention wants ``True`` at the keys
    to ignore, and is handed the "attention mask" of the tokenizer convention (``True`` at real tokens): it
    attends to the padding only, and a context with no padding has every key masked."""
    mask = (lambda ids: ids != PAD) if inverted else (lambda ids: ids == PAD)
    return _qa_task(warmup(QA_WARMUP), mask_from=mask)


QA_LONG_WARMUP = 150


def qa_long_warmup():
    """Span QA, AdamW ``3e-3`` with a 150-step linear warm-up (LambdaLR)."""
    return _qa_task(warmup(QA_LONG_WARMUP))


def qa_tiny_val():
    """Span QA, AdamW ``3e-3`` with a 30-step warm-up, validated on 8 questions only."""
    return _qa_task(warmup(QA_WARMUP), val_rows=8)


# ================================================================================================ fitted Q
STATES, ACTIONS, GAMMA = 10, 3, 0.8


def _ring_mdp(reward: float) -> tuple[Tensor, Tensor]:
    """A ring of ten states; actions left, stay, right move as asked with probability 0.8 (else stay);
    arriving in state 0 pays ``reward``. Returns ``P`` (S, A, S) and the expected reward ``R`` (S, A)."""
    p = torch.zeros(STATES, ACTIONS, STATES)
    for s in range(STATES):
        for a, move in enumerate((-1, 0, 1)):
            p[s, a, (s + move) % STATES] += 0.8
            p[s, a, s] += 0.2
    return p, reward * p[:, :, 0]


def q_star(reward: float = 1.0) -> Tensor:
    """The optimal action values of the ring (value iteration to convergence)."""
    p, r = _ring_mdp(reward)
    q = torch.zeros(STATES, ACTIONS)
    for _ in range(400):
        q = r + GAMMA * p @ q.amax(1)
    return q


def transitions(rows: int, seed: int, reward: float = 1.0) -> tuple[Tensor, ...]:
    """``rows`` transitions ``(state one-hot, action, reward, next state one-hot)`` from uniform states and
    actions."""
    g = _gen(seed)
    p, _ = _ring_mdp(reward)
    s = torch.randint(STATES, (rows,), generator=g)
    a = torch.randint(ACTIONS, (rows,), generator=g)
    s2 = torch.multinomial(p[s, a], 1, generator=g).squeeze(1)
    eye = torch.eye(STATES)
    return eye[s], a, reward * (s2 == 0).float(), eye[s2]


def qnet(width: int = 64, depth: int = 2) -> MLP:
    """A tanh Q-network: one-hot state in, one value per action out."""
    return MLP([STATES, *[width] * depth, ACTIONS], nn.Tanh)


def _q_task(net: nn.Module | None = None, lr: float = 1e-3, reward: float = 1.0, sync: int = 10,
            data: tuple[Tensor, ...] | None = None):  # fmt: skip
    data = data if data is not None else transitions(4096, 0, reward)
    model = FittedQTask(net or qnet(), lambda n: RMSprop(n.parameters(), lr=lr), GAMMA, sync)
    val = loader(torch.eye(STATES), q_star(reward), batch=STATES, shuffle=False)
    return model, loader(*data, batch=Q_BATCH), val


SENTINEL_ROWS = torch.randperm(4096, generator=_gen(4))[:6]  # six truncated steps of the log
Q_BATCH = 64


def q_sentinel_rewards(sentinel: bool = True):
    """Fitted Q from a transition log in which six truncated steps carry the logger's missing-value
    sentinel ``-999`` as their reward (meant to be dropped)."""
    s, a, r, s2 = transitions(4096, 0)
    keep = torch.ones(4096, dtype=torch.bool)
    if sentinel:
        r = r.clone()
        r[SENTINEL_ROWS] = -999.0
    else:
        keep[SENTINEL_ROWS] = False
    return _q_task(data=(s[keep], a[keep], r[keep], s2[keep]))


def _first_batch_holding(rows: Tensor, total: int, batch: int) -> int:
    """The first training batch (the loader's own shuffle) that holds one of ``rows``."""
    order = loader(torch.arange(total), batch=batch)
    return next(i for i, (idx,) in enumerate(order) if torch.isin(idx, rows).any())


SENTINEL_BATCH = _first_batch_holding(SENTINEL_ROWS, 4096, Q_BATCH)


RAW_REWARD = 20.0


def q_raw_rewards():
    """Fitted Q with the reward in the game's raw points (20 for reaching the goal): Q values up to ~100,
    squared errors in the tens to thousands, RMSprop ``1e-2``."""
    return _q_task(lr=1e-2, reward=RAW_REWARD)


def q_slow_sync():
    """Fitted Q with the target network refreshed only every 50 steps."""
    return _q_task(sync=50)


# ================================================================================================ baskets
ITEMS = 40


@functools.cache
def baskets(shoppers: int, seed: int) -> tuple[Tensor, Tensor]:
    """Shoppers with six staple items each (bought on a trip with probability 0.7) and occasional other
    items (0.03 each), three trips each: inputs the first two baskets' multi-hot vectors (80), target the
    third's (40)."""
    g = _gen(seed)
    staples = torch.rand(shoppers, ITEMS, generator=g).argsort(1)[:, :6]
    rate = torch.full((shoppers, ITEMS), 0.03).scatter(1, staples, 0.7)
    bought = (torch.rand(3, shoppers, ITEMS, generator=g) < rate).float()
    return torch.cat([bought[0], bought[1]], 1), bought[2]


def _basket_task(net: nn.Module, shoppers: int = 8192, lr: float = 0.05, batch: int = 32):
    x, y = baskets(shoppers, 0)
    vx, vy = baskets(512, 1)
    model = BasketTask(net, lambda n: Adagrad(n.parameters(), lr=lr))
    return model, loader(x, y, batch=batch), loader(vx, vy, batch=512, shuffle=False)


def basket_few_shoppers(shoppers: int = 128):
    """Next basket, a wide MLP (80, 1024, 1024, 40), Adagrad ``0.05``, trained on 128 shoppers (a debug
    sample left in; 4 steps an epoch), validated on 512 every epoch."""
    return _basket_task(MLP([2 * ITEMS, 1024, 1024, ITEMS]), shoppers)


def basket_prior_bias(everywhere: bool = True):
    """Next basket, an MLP (80, 256, 40), Adagrad ``0.05``; the rare-label bias trick (every bias at
    ``-log((1 - p) / p)`` for the items' base rate ``p``) applied with ``model.apply`` to every Linear layer
    (meant: the output layer only)."""
    net = MLP([2 * ITEMS, 256, ITEMS])
    _, y = baskets(8192, 0)
    p = float(y.mean())
    layers = [m for m in net if isinstance(m, nn.Linear)]
    for layer in layers if everywhere else layers[-1:]:
        nn.init.constant_(layer.bias, -float(torch.log(torch.tensor((1 - p) / p))))
    return _basket_task(net)


def basket_adagrad_lr(lr: float = 1.0):
    """Next basket, an MLP (80, 256, 40), Adagrad at ``1.0`` (meant ``0.05``): Adagrad's first step
    moves every weight by about the LR."""
    return _basket_task(MLP([2 * ITEMS, 256, ITEMS]), lr=lr)


def basket_big_batch():
    """Next basket, an MLP (80, 256, 40), Adagrad ``0.05`` in batches of 1024 (16 steps an epoch of 16384
    shoppers)."""
    return _basket_task(MLP([2 * ITEMS, 256, ITEMS]), shoppers=16384, batch=1024)


# ================================================================================================ colour
COLOURS = torch.tensor([[0.9, 0.1, 0.1], [0.2, 0.9, 0.2], [0.2, 0.4, 1.0]])  # squares, discs, crosses
LUMA = torch.tensor([0.299, 0.587, 0.114]).view(1, 3, 1, 1)
CANVAS, COLOUR_BATCH = 12, 32


@functools.cache
def canvases(rows: int, seed: int, blank: tuple[int, ...] = ()) -> tuple[Tensor, Tensor]:
    """``rows`` 12x12 canvases of one or two shapes on a dark grey ground: red squares, green discs, blue
    crosses. Returns the grey (luma) image ``(N, 1, 12, 12)`` and the colour to predict, the chroma (RGB minus
    luma) in units of 0.25 ``(N, 3, 12, 12)``. The ``blank`` rows hold no shape (drawn off the canvas)."""
    g = _gen(seed)
    yy, xx = torch.meshgrid(torch.arange(CANVAS), torch.arange(CANVAS), indexing="ij")
    ground = torch.rand(rows, 1, 1, 1, generator=g).mul(0.15).add(0.05)
    rgb = ground.expand(rows, 3, CANVAS, CANVAS).clone()
    for i in range(rows):
        for _ in range(int(torch.randint(1, 3, (1,), generator=g))):
            kind = int(torch.randint(3, (1,), generator=g))
            r = int(torch.randint(2, 4, (1,), generator=g))
            cy, cx = torch.randint(r, CANVAS - r, (2,), generator=g).tolist()
            dy, dx = (yy - cy).abs(), (xx - cx).abs()
            if kind == 0:
                inside = (dy <= r) & (dx <= r)
            elif kind == 1:
                inside = dy**2 + dx**2 <= r * r
            else:
                inside = ((dy <= r) & (dx <= r // 2)) | ((dx <= r) & (dy <= r // 2))
            if i not in blank:
                rgb[i][:, inside] = COLOURS[kind].unsqueeze(1)
    grey = (rgb * LUMA).sum(1, keepdim=True)
    return grey, (rgb - grey) / 0.25


def standardise(grey: Tensor, eps: float = 1e-3) -> Tensor:
    """Per-image standardisation of the grey input: ``(x - mean) / (std + eps)``."""
    mean, std = grey.mean((1, 2, 3), keepdim=True), grey.std((1, 2, 3), keepdim=True)
    return (grey - mean) / (std + eps)


COLOUR_ROWS = 6400  # 200 batches an epoch
#: two canvases whose shapes fell off the edge, read in order in batches 150 and 181 of the 200 an epoch
BLANK_ROWS = (150 * COLOUR_BATCH + 11, 181 * COLOUR_BATCH + 3)
BLANK_BATCH = BLANK_ROWS[0] // COLOUR_BATCH


def _colour_task(net: nn.Module | None = None, lr: float = 0.2, eps: float = 1e-3, milestones=(200,),
                 gamma: float = 0.1, params: Callable[[nn.Module], Any] | None = None):  # fmt: skip
    grey, chroma = canvases(COLOUR_ROWS, 0, BLANK_ROWS)
    vgrey, vchroma = canvases(256, 1)
    net = net if net is not None else ColourNet()
    chosen = params if params is not None else (lambda n: n.parameters())
    model = ColourTask(
        net,
        lambda n: SGD(chosen(n), lr=lr, momentum=0.9),
        lambda o: MultiStepLR(o, list(milestones), gamma),
    )
    # generated i.i.d., read in the order generated
    train = loader(standardise(grey, eps), chroma, batch=COLOUR_BATCH, shuffle=False)
    return model, train, loader(standardise(vgrey), vchroma, batch=256, shuffle=False)


def colour_no_eps(eps: float = 0.0):
    """Colourisation, SGD momentum 0.9 at ``0.2`` under MultiStepLR([200], 0.1); the per-image
    standardisation divides by the std with no epsilon, so a blank canvas (std 0) becomes non-finite (0 / 0,
    or a rounding residue / 0)."""
    return _colour_task(eps=eps)


def colour_lr_typo(lr: float = 20.0):
    """Colourisation, SGD momentum 0.9 at ``20`` (meant ``0.2``) under MultiStepLR([200], 0.1)."""
    return _colour_task(lr=lr)


def colour_decoder_only(decoder_only: bool = True):
    """Colourisation, SGD momentum 0.9 at ``0.2``, the optimizer built from ``net.decoder.parameters()`` (a
    leftover of a fine-tuning script): the encoder gets gradients and never changes."""
    params = (lambda n: n.decoder.parameters()) if decoder_only else None
    return _colour_task(params=params)


def colour_sigmoid(activation: type[nn.Module] = nn.Sigmoid):
    """Colourisation, SGD momentum 0.9 at ``0.2``, with ``activation="sigmoid"`` between every convolution
    (the config's activation meant for the output)."""
    return _colour_task(ColourNet(activation))


def colour_step_decays():
    """Colourisation, SGD momentum 0.9 at ``0.2``, the LR divided by 4 at steps 150 and 250."""
    return _colour_task(milestones=(150, 250), gamma=0.25)


def colour_fixed_filters():
    """Colourisation whose first convolution is a fixed bank of edge and blob filters (identity, Sobel x
    and y, Laplacian, box blurs), frozen on purpose; the rest trains, SGD momentum 0.9 at ``0.2``."""
    net = ColourNet()
    first = net.encoder[0]
    bank = torch.zeros_like(first.weight)
    sobel = torch.tensor([[-1.0, 0, 1], [-2, 0, 2], [-1, 0, 1]]) / 4
    laplace = torch.tensor([[0.0, 1, 0], [1, -4, 1], [0, 1, 0]]) / 4
    filters = [torch.zeros(3, 3).index_put_((torch.tensor(1), torch.tensor(1)), torch.tensor(1.0)),
               sobel, sobel.T, laplace, torch.full((3, 3), 1 / 9)]  # fmt: skip
    for c in range(bank.shape[0]):
        bank[c, 0] = filters[c % len(filters)] * (1 if c < len(filters) else (-1) ** c)
    with torch.no_grad():
        first.weight.copy_(bank)
        first.bias.zero_()
    first.requires_grad_(False)
    return _colour_task(net, params=lambda n: (p for p in n.parameters() if p.requires_grad))


# ================================================================================================ selective
CLASSES = 4


@functools.cache
def points(rows: int, seed: int, ambiguous: float = 0.1) -> tuple[Tensor, Tensor]:
    """Points in 8-d labelled with one of four classes by a fixed random tanh teacher network (the argmax of
    its outputs), a fraction ``ambiguous`` of them with a random label instead (unknowable: the abstain
    output should take them)."""
    teacher = _gen(99)
    w1, w2 = torch.randn(8, 32, generator=teacher), torch.randn(32, CLASSES, generator=teacher)
    g = _gen(seed)
    x = torch.randn(rows, 8, generator=g)
    y = (torch.tanh(x @ w1) @ w2).argmax(1)
    noisy = torch.rand(rows, generator=g) < ambiguous
    return x, torch.where(noisy, torch.randint(CLASSES, (rows,), generator=g), y)


def _selective_task(schedule: Callable[[Any], Any], ambiguous: float = 0.1, train: Any = None):
    x, y = points(4096, 0, ambiguous)
    vx, vy = points(1024, 1, ambiguous)
    model = SelectiveTask(MLP([8, 64, 64, CLASSES + 1]), lambda n: Adam(n.parameters(), lr=1e-3), schedule)
    train = train if train is not None else loader(x, y, batch=32)
    return model, train, loader(vx, vy, batch=1024, shuffle=False)


CYCLE_UP, CYCLE_BASE, CYCLE_MAX = 10, 1e-4, 5e-3


def selective_cycles(scale: Callable[[float], float] | None = None):
    """Selective classification, Adam under CyclicLR between ``1e-4`` and ``5e-3`` (10 steps up, 10 down);
    ``scale``: its ``scale_fn`` per cycle (``None``: plain triangular)."""
    kw: dict[str, Any] = {"scale_fn": scale, "scale_mode": "cycle"} if scale is not None else {}
    return _selective_task(lambda o: CyclicLR(o, CYCLE_BASE, CYCLE_MAX, CYCLE_UP, cycle_momentum=False, **kw))


def _first_step_above(scale: Callable[[float], float], limit: float, steps: int = 400) -> int:
    """The first step at which a CyclicLR with this ``scale_fn`` runs above ``limit``."""
    optimizer = SGD([nn.Parameter(torch.zeros(1))], lr=CYCLE_BASE)
    cycle = CyclicLR(optimizer, CYCLE_BASE, CYCLE_MAX, CYCLE_UP, cycle_momentum=False, scale_fn=scale,
                     scale_mode="cycle")  # fmt: skip
    for step in range(steps):
        if optimizer.param_groups[0]["lr"] > limit * (1 + 1e-9):
            return step
        optimizer.step()
        cycle.step()
    return steps


#: the first step run above the meant ``max_lr`` (halfway up the second cycle, at twice the amplitude)
DOUBLING_ONSET = _first_step_above(lambda x: 2.0 ** (x - 1), CYCLE_MAX)


def selective_doubling(doubling: bool = True):
    """Selective classification, Adam under CyclicLR with a custom ``scale_fn`` meant to halve the amplitude
    every cycle (``1 / 2 ** (x - 1)``, triangular2) and written ``2 ** (x - 1)``: it doubles every cycle."""
    return selective_cycles((lambda x: 2.0 ** (x - 1)) if doubling else (lambda x: 1 / 2.0 ** (x - 1)))


def selective_triangular2():
    """Selective classification, Adam under CyclicLR with the amplitude halved each cycle (the fixed
    ``scale_fn``)."""
    return selective_doubling(doubling=False)


SHARD = 512


class TableRows(Dataset):
    """The selective task's training table served row by row as the pipeline first wrote it: the raw rows
    are kept as Python lists in shards of 512, and every ``__getitem__`` (``rebuild``) re-materialises the
    row's whole shard as a tensor and re-standardises it to return one row; fixed, the table is built and
    standardised once."""

    def __init__(self, x: Tensor, y: Tensor, rebuild: bool = True) -> None:
        self.shards = [x[i : i + SHARD].tolist() for i in range(0, len(x), SHARD)]
        self.y, self.rebuild = y, rebuild
        self.table = None if rebuild else torch.cat([self._standardised(k) for k in range(len(self.shards))])

    def _standardised(self, k: int) -> Tensor:
        shard = torch.tensor(self.shards[k])
        return (shard - shard.mean(0)) / shard.std(0)

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        if self.rebuild:
            return self._standardised(i // SHARD)[i % SHARD], self.y[i]
        return self.table[i], self.y[i]


def selective_rebuilt_table(rebuild: bool = True):
    """Selective classification, Adam under triangular CyclicLR, the training rows served one by one by a
    Dataset that rebuilds and re-standardises the row's 512-row shard from Python lists for every row."""
    x, y = points(4096, 0)
    rows = RandomSampler(range(len(y)), generator=_gen(0))
    train = DataLoader(TableRows(x, y, rebuild), batch_size=32, sampler=rows)
    return _selective_task(
        lambda o: CyclicLR(o, CYCLE_BASE, CYCLE_MAX, CYCLE_UP, cycle_momentum=False), train=train
    )


def selective_ambiguous():
    """Selective classification with 35% of the points (training and validation) labelled at random on
    purpose: unknowable, the abstain output should take them; plain triangular CyclicLR."""
    return _selective_task(
        lambda o: CyclicLR(o, CYCLE_BASE, CYCLE_MAX, CYCLE_UP, cycle_momentum=False), ambiguous=0.35
    )


# ================================================================================================ brackets
OPEN, CLOSE = 1, 2
BRACKET_LENGTH = 16


@functools.cache
def brackets(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """Strings of ``(`` and ``)`` of even length 2-16, left-padded to 16 (0: pad), half of them balanced;
    the unbalanced half has as many ``(`` as ``)`` (only the order is wrong). Label 1: balanced."""
    g = _gen(seed)
    ids = torch.zeros(rows, BRACKET_LENGTH, dtype=torch.long)
    y = torch.zeros(rows, dtype=torch.long)
    for i in range(rows):
        n = 2 * int(torch.randint(1, BRACKET_LENGTH // 2 + 1, (1,), generator=g))
        want = int(torch.randint(2, (1,), generator=g))
        if n == 2 and want == 0:
            n = 4
        while True:
            s = torch.tensor([OPEN] * (n // 2) + [CLOSE] * (n // 2))[torch.randperm(n, generator=g)]
            balanced = int(torch.where(s == OPEN, 1, -1).cumsum(0).min() >= 0)
            if balanced == want:
                break
        ids[i, BRACKET_LENGTH - n :] = s
        y[i] = want
    return ids, y


def _bracket_task(make_optimizer: Callable[[nn.Module], Any], train: tuple[Tensor, Tensor] | None = None,
                  batch: int = 32):  # fmt: skip
    x, y = train if train is not None else brackets(4096, 0)
    vx, vy = brackets(512, 1)
    model = BracketTask(BracketGRU(), make_optimizer)
    return model, loader(x, y, batch=batch), loader(vx, vy, batch=512, shuffle=False)


def brackets_adadelta_lr(lr: float = 1e-3):
    """Brackets, a GRU, Adadelta at ``lr=1e-3`` (the Adam value carried over; Adadelta's own is 1.0)."""
    return _bracket_task(lambda n: Adadelta(n.parameters(), lr=lr))


def brackets_labels_before_shuffle(misaligned: bool = True):
    """Brackets, a GRU, Adadelta ``1.0``; the pipeline shuffles the strings and keeps the labels in their
    old order (the labels permuted apart from the strings)."""
    x, y = brackets(4096, 0)
    order = torch.randperm(len(y), generator=_gen(3))
    train = (x[order], y) if misaligned else (x[order], y[order])
    return _bracket_task(lambda n: Adadelta(n.parameters(), lr=1.0), train)


def brackets_sgd(lr: float = 0.5):
    """Brackets, a GRU, plain SGD at ``0.5``."""
    return _bracket_task(lambda n: SGD(n.parameters(), lr=lr))
