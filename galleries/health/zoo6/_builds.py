"""Builders of zoo 6's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data, made in code here: token sequences to reverse, windows of a noisy multi-sine series to
forecast, points of two interleaved half-moons (a 2-D density).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.optim import ASGD, SGD, Adadelta, Adagrad, Adam, RMSprop
from torch.optim.lr_scheduler import LambdaLR, PolynomialLR
from torch.utils.data import DataLoader, Dataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo1._models import warmup_cosine
from galleries.health.zoo6._models import (
    FlowTask,
    RealNVP,
    ScaledTask,
    Seq2Seq,
    Seq2SeqTask,
    Task,
    TemporalConvNet,
)

loader, _gen = data.loader, data._gen

VOCAB, LENGTH, WINDOW = 8, 5, 32


# ------------------------------------------------------------------------------------------------ data
def reversal(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Sources of ``LENGTH`` uniform tokens ``1..VOCAB``; targets the source reversed, as classes
    ``0..VOCAB-1``."""
    source = torch.randint(1, VOCAB + 1, (rows, LENGTH), generator=_gen(seed))
    return source, source.flip(1) - 1


def series(length: int, seed: int = 0, noise: float = 0.1) -> Tensor:
    """A series of three sines with random periods (8-40 steps) and phases, plus Gaussian noise."""
    g = _gen(seed)
    t = torch.arange(length, dtype=torch.float32)
    periods = 8 + 32 * torch.rand(3, generator=g)
    phases = 2 * math.pi * torch.rand(3, generator=g)
    clean = torch.sin(2 * math.pi * t[:, None] / periods + phases).sum(1) / math.sqrt(1.5)
    return clean + noise * torch.randn(length, generator=g)


def windows(rows: int, seed: int = 0, noise: float = 0.1) -> tuple[Tensor, Tensor]:
    """``rows`` windows ``(N, 1, WINDOW)`` of independent series and the value that follows each
    ``(N, 1)``."""
    x = torch.stack([series(WINDOW + 1, seed * 100_000 + i, noise) for i in range(rows)])
    return x[:, None, :WINDOW], x[:, WINDOW:]


def moons(rows: int, seed: int = 0, noise: float = 0.08) -> Tensor:
    """Two interleaved half-moons (a 2-D density), centred near the origin, plus Gaussian noise."""
    g = _gen(seed)
    theta = math.pi * torch.rand(rows, generator=g)
    upper = torch.rand(rows, generator=g) < 0.5
    x = torch.where(upper, theta.cos(), 1 - theta.cos())
    y = torch.where(upper, theta.sin(), 0.5 - theta.sin())
    points = torch.stack([x - 0.5, y - 0.25], 1) * 1.5
    return points + noise * torch.randn(rows, 2, generator=g)


# ------------------------------------------------------------------------------------------------ tasks
def _seq2seq(make_optimizer, net: Seq2Seq | None = None, schedule=None):
    (x, y), (vx, vy) = reversal(4000, 0), reversal(500, 1)
    model = Seq2SeqTask(net or Seq2Seq(VOCAB), make_optimizer, schedule)
    return model, loader(x, y, 64), loader(vx, vy, 500, shuffle=False)


def _tcn(make_optimizer, net: TemporalConvNet | None = None, x: Tensor | None = None, schedule=None,
         noise: float = 0.1, scale: float | None = None):  # fmt: skip
    (tx, y), (vx, vy) = windows(3000, 0, noise), windows(500, 1, noise)
    net = net or TemporalConvNet()
    if scale is None:
        model = Task(net, "mse", make_optimizer, schedule)
    else:
        model = ScaledTask(net, "mse", make_optimizer, scale, make_schedule=schedule)
    shuffle = x is None  # given inputs are read in order
    return model, loader(tx if x is None else x, y, 32, shuffle=shuffle), loader(vx, vy, 500, shuffle=False)


def _flow(make_optimizer, rows: int = 3000, net: RealNVP | None = None, batch: int = 64, scale: float = 1.0,
          val_rows: int = 500):  # fmt: skip
    x, vx = moons(rows, 0) * scale, moons(val_rows, 1) * scale
    model = FlowTask(net or RealNVP(), make_optimizer)
    return (
        model,
        loader(x, torch.zeros(rows), batch),
        loader(vx, torch.zeros(val_rows), val_rows, shuffle=False),
    )


# ------------------------------------------------------------------------------------------------ problems
def seq2seq_rmsprop(lr: float = 3e-7):
    """Sequence reversal with a GRU encoder-decoder, RMSprop at ``3e-7`` (meant ``3e-3``)."""
    return _seq2seq(lambda p: RMSprop(p, lr=lr))


def seq2seq_zero_start(zero_start: bool = True):
    """Sequence reversal, RMSprop ``3e-3``; the decoder starts from zeros, not from the encoder's state (a
    ``torch.zeros_like(h)`` left in from debugging), so it never sees the source."""
    return _seq2seq(lambda p: RMSprop(p, lr=3e-3), Seq2Seq(VOCAB, zero_start=zero_start))


EMBED = 128


def seq2seq_embed_scaled(scale: float = math.sqrt(EMBED)):
    """Sequence reversal with 128-wide embeddings multiplied by ``sqrt(128)`` (a transformer's habit, copied
    into a GRU whose gates see them raw), RMSprop ``3e-3``."""
    return _seq2seq(lambda p: RMSprop(p, lr=3e-3), Seq2Seq(VOCAB, embed=EMBED, embed_scale=scale))


NAN_ROW = 60 * 32 + 11  # read in order: in batch 60 of the 94 an epoch


def tcn_nan_reading(nan: bool = True):
    """A TCN forecaster, Adam ``1e-3``, windows read in order; one reading of one window is NaN (a sensor
    drop-out left in the export)."""
    x = windows(3000, 0)[0].clone()
    if nan:
        x[NAN_ROW, 0, 17] = math.nan
    return _tcn(lambda p: Adam(p, lr=1e-3), x=x)


def tcn_loss_scaled(scale: float = 1024.0, lr: float = 0.01):
    """A TCN forecaster, SGD ``0.01`` with Nesterov momentum 0.9; the training loss is multiplied by
    ``1024`` by hand (a float16 loss scale) and the gradients are never divided back."""
    return _tcn(lambda p: SGD(p, lr=lr, momentum=0.9, nesterov=True), scale=scale)


def tcn_adadelta(lr: float = 1e-3):
    """A TCN forecaster, Adadelta at ``1e-3`` (an Adam-sized LR; Adadelta's own is ``1.0``)."""
    return _tcn(lambda p: Adadelta(p, lr=lr))


def seq2seq_head_only(head_only: bool = True):
    """Sequence reversal, RMSprop ``3e-3`` over the output head alone: the optimizer was built for a
    linear-probe phase and the callback meant to add the body's group after it was left out of the Trainer;
    the embedding, the encoder and the decoder get gradients and never move."""
    net = Seq2Seq(VOCAB)
    model, train, val = _seq2seq(None, net)
    model.make_optimizer = lambda p: RMSprop(net.head.parameters() if head_only else p, lr=3e-3)
    return model, train, val


def tcn_normal_init(std: float | None = 1.0):
    """A TCN forecaster whose convolutions are initialised with ``nn.init.normal_`` (std ``1``; meant He's,
    ~0.14), Adam ``1e-3``."""
    net = TemporalConvNet()
    if std is not None:
        for conv in net.convs:
            torch.nn.init.normal_(conv.weight, 0.0, std)
    return _tcn(lambda p: Adam(p, lr=1e-3), net=net)


POLY_TOTAL = 40


def seq2seq_poly_collapse(total: int | None = POLY_TOTAL):
    """Sequence reversal, RMSprop ``3e-3`` under a linear decay to 0 over ``40`` (meant 40 epochs, stepped
    every batch)."""

    def schedule(o):
        return LambdaLR(o, lambda s: 1.0) if total is None else PolynomialLR(o, total_iters=total, power=1.0)

    return _seq2seq(lambda p: RMSprop(p, lr=3e-3), schedule=schedule)


class RecomputingWindows(Dataset):
    """Windows cut from a long series that ``__getitem__`` regenerates in full (``length`` points) on every
    read: a loader that never caches its source."""

    def __init__(self, rows: int, length: int) -> None:
        self.rows, self.length = rows, length
        self.y = windows(rows, 0)[1]

    def __len__(self) -> int:
        return self.rows

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        whole = series(self.length, i)
        return whole[None, :WINDOW], whole[WINDOW : WINDOW + 1]


def tcn_recompute(length: int = 50_000):
    """A TCN forecaster, Adam ``1e-3``, whose dataset regenerates the whole source series on each read."""
    model, _, val = _tcn(lambda p: Adam(p, lr=1e-3))
    return model, DataLoader(RecomputingWindows(3000, length), 32, shuffle=True, generator=_gen(0)), val


def flow_few_points(rows: int = 32, width: int = 128, lr: float = 1e-3):
    """A wide RealNVP (width 128) fitted to ``32`` points (a debug subset left in), Adam ``1e-3``, one batch
    (full-batch training)."""
    return _flow(lambda p: Adam(p, lr=lr), rows=rows, net=RealNVP(width=width), batch=32)


FLOW_OUTLIER_ROWS = (11 * 64 + 5, 33 * 64 + 30)  # read in order: batches 11 and 33 of the 47 an epoch


def flow_outliers(scale: float | None = 1000.0):
    """RealNVP, Adam ``1e-3``, points read in order; two points were logged in millimetres (x1000)."""
    x = moons(3000, 0)
    if scale is not None:
        for row in FLOW_OUTLIER_ROWS:
            x[row] *= scale
    model, _, val = _flow(lambda p: Adam(p, lr=1e-3))
    return model, loader(x, torch.zeros(3000), 64, shuffle=False), val


# ------------------------------------------------------------------------------------------------ healthy
def tcn_adam_loss_scaled():
    """A TCN forecaster, Adam ``1e-3``, its training loss multiplied by ``1024`` by hand (Adam does not
    care: its step is invariant to the gradient's scale)."""
    return _tcn(lambda p: Adam(p, lr=1e-3), scale=1024.0)


def flow_small_units(scale: float = 0.1):
    """RealNVP, Adam ``1e-3``, on half-moons measured in units 10x larger (coordinates ~0.1): a negative
    NLL."""
    return _flow(lambda p: Adam(p, lr=1e-3), scale=scale)


def seq2seq_long_warmup(warmup: int = 150):
    """Sequence reversal, Adam ``3e-3`` under a linear warm-up over ``150`` steps, then a cosine."""
    return _seq2seq(lambda p: Adam(p, lr=3e-3), schedule=lambda o: LambdaLR(o, warmup_cosine(warmup, 600)))


def tcn_noisy_series(noise: float = 0.7):
    """A TCN forecaster, Adam ``1e-3``, on series with noise std ``0.7``: a high floor (0.49)."""
    return _tcn(lambda p: Adam(p, lr=1e-3), noise=noise)


def flow_tiny_validation(rows: int = 16):
    """RealNVP, Adam ``1e-3``, validated on ``16`` points: a jittering validation loss."""
    return _flow(lambda p: Adam(p, lr=1e-3), val_rows=rows)


def seq2seq_frozen_embeddings():
    """Sequence reversal, RMSprop ``3e-3``, the token embeddings kept random on purpose (frozen)."""
    net = Seq2Seq(VOCAB)
    net.embed.requires_grad_(False)
    return _seq2seq(lambda p: RMSprop(p, lr=3e-3), net)


def tcn_asgd_aggressive(lr: float = 0.02):
    """A TCN forecaster, averaged SGD at ``0.02`` (no momentum): large steps (2.5x more diverges), stable."""
    return _tcn(lambda p: ASGD(p, lr=lr))


def flow_adagrad_slow(lr: float = 0.01):
    """RealNVP, Adagrad at ``0.01``: slow, steady."""
    return _flow(lambda p: Adagrad(p, lr=lr))
