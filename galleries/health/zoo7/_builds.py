"""Builders of zoo 7's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: made in code here (token sequences to reverse, windows of a noisy multi-sine series,
two moons) or a table from scikit-learn's ``make_classification``.
"""

from __future__ import annotations

import functools
import math
import time

import torch
from torch import Tensor
from torch.optim import Adadelta, Adam, RMSprop
from torch.optim.lr_scheduler import LambdaLR, PolynomialLR
from torch.utils.data import DataLoader, Dataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo7._models import (
    LARS,
    TCN,
    AttentiveTabular,
    FlowTask,
    ForecastTask,
    RealNVP,
    Seq2Seq,
    Seq2SeqTask,
    Task,
)

loader, _gen = data.loader, data._gen
VOCAB, LENGTH = 10, 6


# ------------------------------------------------------------------------------------------------ data
def reversal(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Sequences of ``LENGTH`` tokens drawn uniformly from ``VOCAB``; the target is the sequence reversed."""
    src = torch.randint(0, VOCAB, (rows, LENGTH), generator=_gen(seed))
    return src, src.flip(1)


WINDOW = 48


def series_windows(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Windows of ``WINDOW`` steps of a noisy sum of three sines (random frequencies, phases, amplitudes);
    targets: the next value and the mean of the next eight."""
    g = _gen(seed)
    t = torch.arange(WINDOW + 8, dtype=torch.float32)
    freq = 0.05 + 0.4 * torch.rand(rows, 3, 1, generator=g)
    phase = 2 * math.pi * torch.rand(rows, 3, 1, generator=g)
    amp = 0.3 + 0.7 * torch.rand(rows, 3, 1, generator=g)
    s = (amp * torch.sin(freq * t + phase)).sum(1) + 0.05 * torch.randn(rows, WINDOW + 8, generator=g)
    return s[:, :WINDOW], torch.stack([s[:, WINDOW], s[:, WINDOW:].mean(1)], 1)


def moons(rows: int, seed: int = 0, unit: float = 1.0) -> tuple[Tensor, Tensor]:
    """Scikit-learn's two moons (noise 0.05), centred and scaled to about unit spread, times ``unit``."""
    from sklearn.datasets import make_moons

    x, y = make_moons(rows, noise=0.05, random_state=seed)
    x = (torch.tensor(x, dtype=torch.float32) - torch.tensor([0.5, 0.25])) / torch.tensor([0.87, 0.5])
    return x * unit, torch.tensor(y)


@functools.cache
def _table() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import make_classification

    x, y = make_classification(5000, n_features=30, n_informative=12, n_redundant=6, n_classes=3,
                               flip_y=0.02, random_state=3)  # fmt: skip
    return torch.tensor(x, dtype=torch.float32), torch.tensor(y)


def table(split: str) -> tuple[Tensor, Tensor]:
    """Scikit-learn's ``make_classification``: 30 features (12 informative, 6 redundant), three classes;
    ``"train"`` the first 4000 rows, ``"val"`` the other 1000."""
    x, y = _table()
    return (x[:4000].clone(), y[:4000].clone()) if split == "train" else (x[4000:].clone(), y[4000:].clone())


# ------------------------------------------------------------------------------------------------ tasks
def _seq2seq(make_optimizer, net: Seq2Seq | None = None, schedule=None, targets: Tensor | None = None):
    (x, y), (vx, vy) = reversal(4000, 0), reversal(500, 1)
    model = Seq2SeqTask(net or Seq2Seq(), make_optimizer, schedule)
    return model, loader(x, y if targets is None else targets, 32), loader(vx, vy, 500, shuffle=False)


def _forecast(make_optimizer, x: Tensor | None = None, y: Tensor | None = None, **kw):
    (tx, ty), (vx, vy) = series_windows(3200, 0), series_windows(500, 1)
    model = ForecastTask(TCN(), make_optimizer, **kw)
    shuffle = x is None and y is None  # given windows are read in order (the series' order)
    train = loader(tx if x is None else x, ty if y is None else y, 32, shuffle=shuffle)
    return model, train, loader(vx, vy, 500, shuffle=False)


def _flow(make_optimizer, schedule=None, unit: float = 1.0, rows: int = 4000):
    (x, y), (vx, vy) = moons(rows, 0, unit), moons(1000, 1, unit)
    return (
        FlowTask(RealNVP(), make_optimizer, schedule),
        loader(x, y, 64),
        loader(vx, vy, 1000, shuffle=False),
    )


def _tabular(make_optimizer, rows: int = 4000, val_rows: int = 1000, width: int = 32, redrawn: float = 0.0):
    (x, y), (vx, vy) = table("train"), table("val")
    if redrawn:
        g = _gen(11)
        for t in (y, vy):
            mask = torch.rand(len(t), generator=g) < redrawn
            t[mask] = torch.randint(0, 3, (int(mask.sum()),), generator=g)
    model = Task(AttentiveTabular(inputs=30, classes=3, width=width), "ce", make_optimizer)
    return model, loader(x[:rows], y[:rows], 32), loader(vx[:val_rows], vy[:val_rows], 1000, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def seq2seq_rmsprop(lr: float = 1e-7):
    """Sequence reversal, a GRU encoder-decoder, RMSprop at ``1e-7`` (meant ``1e-3``: an exponent typo)."""
    return _seq2seq(lambda p: RMSprop(p, lr=lr))


def seq2seq_targets_apart(apart: bool = True):
    """Sequence reversal, RMSprop ``1e-3``; the targets were reversed from the sources *after* the sources
    were shuffled for the split (``src = src[perm]`` came first), so no target belongs to its source."""
    x, y = reversal(4000, 0)
    perm = torch.randperm(len(x), generator=_gen(5))
    return _seq2seq(lambda p: RMSprop(p, lr=1e-3), targets=x[perm].flip(1) if apart else y)


def seq2seq_encoder_left_out(left_out: bool = True):
    """Sequence reversal, RMSprop ``1e-3`` over parameter groups for the decoder and the head; the encoder's
    group was left out of the list (it gets gradients and is never stepped)."""

    def make(params):
        groups = [{"params": model.net.decoder.parameters()}, {"params": model.net.head.parameters()}]
        if not left_out:
            groups.append({"params": model.net.encoder.parameters()})
        return RMSprop(groups, lr=1e-3)

    model, train, val = _seq2seq(make)
    return model, train, val


GAP_ROW = 37 * 32 + 11  # read in order: in batch 37 of the 100 an epoch


def forecast_sensor_gap(gap: bool = True):
    """The TCN forecaster, Adam ``1e-3``, windows read in order; one window holds a sensor gap stored as NaN
    (the cleaning step ran on the other file)."""
    x = series_windows(3200, 0)[0].clone()
    if gap:
        x[GAP_ROW, 20:26] = math.nan
    return _forecast(lambda p: Adam(p, lr=1e-3), x=x)


AUX_OFF_STEP = 120


def forecast_lars_aux_off(guard: bool = False):
    """The TCN forecaster with LARS written by hand (lr ``0.5``, trust 0.02, momentum 0.9); the auxiliary
    head's weight is annealed 0.5 -> 0 by step 120, so from there its gradient is exactly zero and the
    unguarded ``||w|| / ||g||`` divides by zero."""
    return _forecast(lambda p: LARS(p, lr=0.5, guard=guard),
                     aux_weight=lambda s: 0.5 * max(0.0, 1 - s / AUX_OFF_STEP))  # fmt: skip


GLITCH_ROWS = (20 * 32 + 3, 70 * 32 + 17)  # read in order: batches 20 and 70 of the 100 an epoch


def forecast_glitches(scale: float | None = 300.0):
    """The TCN forecaster, Adam ``1e-3``, read in order; two windows came from a logger that wrote raw ADC
    counts (x300), inputs and targets alike."""
    x, y = (t.clone() for t in series_windows(3200, 0))
    if scale is not None:
        for row in GLITCH_ROWS:
            x[row] *= scale
            y[row] *= scale
    return _forecast(lambda p: Adam(p, lr=1e-3), x=x, y=y)


def forecast_rmsprop(lr: float = 0.01):
    """The TCN forecaster, RMSprop at ``0.01`` (meant ``1e-3``), read in order."""
    x, y = series_windows(3200, 0)
    return _forecast(lambda p: RMSprop(p, lr=lr), x=x, y=y)


def flow_adam(lr: float = 0.2):
    """A RealNVP flow on two moons, Adam at ``0.2`` (meant ``1e-3``)."""
    return _flow(lambda p: Adam(p, lr=lr))


POLY_STEPS = 40


def flow_poly_decay(total: int | None = POLY_STEPS):
    """The flow, Adam ``3e-3`` under a quadratic PolynomialLR with ``total_iters=40`` meant as epochs but
    stepped every batch: the LR is 0 from step 40."""
    schedule = None if total is None else lambda o: PolynomialLR(o, total_iters=total, power=2.0)
    return _flow(lambda p: Adam(p, lr=3e-3), schedule)


def tabular_few_rows(rows: int = 160):
    """The attentive tabular net (width 128) on ``160`` rows of the table (a debug subset), Adam ``3e-3``."""
    return _tabular(lambda p: Adam(p, lr=3e-3), rows=rows, width=128)


# ------------------------------------------------------------------------------------------------ healthy
def flow_small_units():
    """The flow on two moons measured in hundredths (x0.01): a log-density in the high single digits, so a
    negative loss around -6, Adam ``1e-3``."""
    return _flow(lambda p: Adam(p, lr=1e-3), unit=0.01)


def tabular_tiny_val():
    """The attentive tabular net, Adam ``1e-3``, validated on 16 rows: a jittery validation loss."""
    return _tabular(lambda p: Adam(p, lr=1e-3), val_rows=16)


def tabular_label_noise(redrawn: float = 0.5):
    """The attentive tabular net, Adam ``1e-3``, 50% of the labels (train and validation) redrawn at random:
    a high floor."""
    return _tabular(lambda p: Adam(p, lr=1e-3), redrawn=redrawn)


WARMUP = 150


def seq2seq_long_warmup():
    """Sequence reversal, RMSprop ``2e-3`` after a linear warm-up from 0 over 150 steps."""
    return _seq2seq(
        lambda p: RMSprop(p, lr=2e-3), schedule=lambda o: LambdaLR(o, lambda s: min(1.0, (s + 1) / WARMUP))
    )


def seq2seq_frozen_source_embedding():
    """Sequence reversal, RMSprop ``1e-3``; the encoder's embedding keeps its random vectors on purpose
    (``requires_grad_(False)``: random codes for the tokens)."""
    net = Seq2Seq()
    net.encoder["embed"].requires_grad_(False)
    return _seq2seq(lambda p: RMSprop(p, lr=1e-3), net=net)


def forecast_adadelta():
    """The TCN forecaster with Adadelta at ``0.1`` (a tenth of its default): small self-scaled steps."""
    return _forecast(lambda p: Adadelta(p, lr=0.1))


LOSS_SCALE = 4096.0


def forecast_loss_scaled_adam():
    """The TCN forecaster whose loss is multiplied by 4096 by hand (a mixed-precision-like loss scale, never
    unscaled) under Adam ``1e-3``, which is invariant to the scale: huge gradients, harmless."""
    return _forecast(lambda p: Adam(p, lr=1e-3), loss_scale=LOSS_SCALE)


def seq2seq_embedding_std(std: float | None = 30.0):
    """Sequence reversal, RMSprop ``1e-3``; both embeddings initialised ``N(0, 30^2)`` (a transformer
    recipe's ``sqrt(d_model)`` scale misread as the init's std, for ``d_model = 900``)."""
    net = Seq2Seq()
    if std is not None:
        for part in (net.encoder, net.decoder):
            torch.nn.init.normal_(part["embed"].weight, 0.0, std)
    return _seq2seq(lambda p: RMSprop(p, lr=1e-3), net=net)


def seq2seq_rmsprop_high(lr: float = 0.03):
    """Sequence reversal, RMSprop at ``0.03`` (meant ``1e-3``: a value copied from a CNN recipe)."""
    return seq2seq_rmsprop(lr)


class SlowTokenising(Dataset):
    """Token sequences kept as text and tokenised on every read by a slow pure-Python tokenizer
    (``cost_s`` per sequence, no cache, no workers)."""

    def __init__(self, x: Tensor, y: Tensor, cost_s: float) -> None:
        self.text = [" ".join(str(int(t)) for t in row) for row in x]
        self.y, self.cost_s = y, cost_s

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        time.sleep(self.cost_s)
        return torch.tensor([int(t) for t in self.text[i].split()]), self.y[i]


def seq2seq_slow_tokenising(cost_s: float = 0.003):
    """Sequence reversal, RMSprop ``1e-3``; every source is re-tokenised from its text on each read (3 ms a
    sequence, 32 a batch, in the main process)."""
    model, train, val = _seq2seq(lambda p: RMSprop(p, lr=1e-3))
    x, y = train.dataset.tensors
    return model, DataLoader(SlowTokenising(x, y, cost_s), 32, shuffle=True, generator=_gen(0)), val
