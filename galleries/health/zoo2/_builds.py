"""Builders of zoo 2's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: the first zoo's generators (made in code, or scikit-learn's digits) and :func:`series`.
"""

from __future__ import annotations

import math
import time

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adam, AdamW
from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts, LambdaLR
from torch.utils.data import DataLoader, TensorDataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo1._models import DigitsConvNet, warmup_cosine
from galleries.health.zoo2._models import (
    MLP,
    AugmentedTask,
    EmbeddingMLP,
    ForecastRNN,
    NaiveBCETask,
    Task,
    TwoHeadTask,
)

loader = data.loader


def series(rows: int, window: int = 40, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Windows of a noisy sum of two sines (random phase and period); target: the next value."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(window + 1, dtype=torch.float32)
    period = 8 + 16 * torch.rand(rows, 1, generator=g)
    phase = 2 * math.pi * torch.rand(rows, 1, generator=g)
    wave = torch.sin(2 * math.pi * t / period + phase) + 0.5 * torch.sin(4 * math.pi * t / period)
    wave = wave + 0.05 * torch.randn(rows, window + 1, generator=g)
    return wave[:, :-1], wave[:, -1:]


def _digits(images: bool = False, rows: int | None = None):
    x, y = data.digits("train", images=images)
    vx, vy = data.digits("val", images=images)
    return x[:rows], y[:rows], vx, vy


def _regression(rows: int = 2000, noise: float = 0.1):
    x, y = data.tabular_regression(rows, seed=0, noise=noise)
    vx, vy = data.tabular_regression(500, seed=1, noise=noise)
    return x, y, vx, vy


def _tokens(rows: int = 2000):
    x, y = data.majority_tokens(rows, seed=0)
    vx, vy = data.majority_tokens(600, seed=1)
    return x, y, vx, vy


# ------------------------------------------------------------------------------------------------ problems
def conv_bias_init(bias: float = -3.0):
    """A digits CNN whose convolution biases the user set to ``-3`` "so only strong edges fire"."""
    x, y, vx, vy = _digits(images=True)
    net = DigitsConvNet()
    with torch.no_grad():
        for conv in (net.features[0], net.features[2]):
            conv.bias.fill_(bias)
    model = Task(net, "ce", lambda p: Adam(p, lr=1e-3))
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


LISTING_BAD_ROW = 40 * 32 + 7  # rows in listing-date order: batch 40 of 32
LISTING_BAD_ROWS = 3


def listings_sentinel(sentinel: float | None = 299.0):
    """House-price-like regression over listings in date order; three rows' missing floor area was exported
    as ``299`` (``sentinel=None``: imputed with the column's mean, 0)."""
    x, y, vx, vy = _regression(3000)
    if sentinel is not None:
        x[LISTING_BAD_ROW : LISTING_BAD_ROW + LISTING_BAD_ROWS, 2] = sentinel
    model = Task(MLP([8, 64, 64, 1]), "mse", lambda p: SGD(p, lr=0.01, momentum=0.9))
    return model, loader(x, y, 32, shuffle=False), loader(vx, vy, 500, shuffle=False)


def embedding_sgd(lr: float = 1.0):
    """An embedding + MLP token classifier, SGD with momentum at ``1.0`` (copied from a linear model's
    recipe)."""
    x, y, vx, vy = _tokens()
    model = Task(EmbeddingMLP(6, 3), "ce", lambda p: SGD(p, lr=lr, momentum=0.9))
    return model, loader(x, y, 32), loader(vx, vy, 600, shuffle=False)


INF_ROW = 60 * 50 + 11  # rows read in order: batch 60 of 50


def ratio_feature_inf(guard: bool = False):
    """Tabular classes with a ratio feature ``a / b`` computed without a guard: two rows have ``b = 0`` and
    carry ``inf`` (``guard``: those ratios set to 0)."""
    x, y = data.tabular_classes(4000, seed=0)
    vx, vy = data.tabular_classes(500, seed=1)
    x[INF_ROW, 5], x[INF_ROW + 20, 5] = (0.0, 0.0) if guard else (math.inf, -math.inf)
    model = Task(MLP([12, 64, 64, 4]), "ce", lambda p: Adam(p, lr=1e-3))
    return model, loader(x, y, 50, shuffle=False), loader(vx, vy, 500, shuffle=False)


def naive_bce(naive: bool = True, lr: float = 0.05):
    """Is this digit a zero? A 64-64-1 MLP, Adam at ``5e-2``, the cross-entropy written out by hand."""
    x, y, vx, vy = _digits()
    model = NaiveBCETask(MLP([64, 64, 1]), lambda p: Adam(p, lr=lr), naive=naive)
    return model, loader(x, (y == 0).float(), 32), loader(vx, (vy == 0).float(), 400, shuffle=False)


def adam_eps_zero(eps: float = 0.0):
    """A token classifier, Adam with ``eps=0`` ("exact Adam"): a parameter whose first gradient is exactly
    zero gets ``0 / 0``."""
    x, y, vx, vy = _tokens()
    x = x + 6 * (torch.arange(16) % 4)  # position-tagged tokens: a vocabulary of 24
    vx = vx + 6 * (torch.arange(16) % 4)
    model = Task(EmbeddingMLP(40, 3), "ce", lambda p: Adam(p, lr=1e-3, eps=eps))
    return model, loader(x, y, 32), loader(vx, vy, 600, shuffle=False)


def few_digits_mlp(rows: int = 30):
    """A 2x256 digits MLP trained on the first 30 training images only (a debug subset left in), Adam at
    ``1e-2``, a hundred epochs."""
    x, y, vx, vy = _digits(rows=rows)
    model = Task(MLP([64, 256, 256, 10]), "ce", lambda p: Adam(p, lr=1e-2))
    return model, loader(x, y, 10), loader(vx, vy, 400, shuffle=False)


def warmup_too_far(peak: float = 0.3):
    """Regression MLP, SGD with momentum warmed up linearly over 300 steps to ``0.3`` (meant ``0.03``)."""
    x, y, vx, vy = _regression()
    model = Task(
        MLP([8, 64, 1], act=nn.Tanh),
        "mse",
        lambda p: SGD(p, lr=peak, momentum=0.9),
        lambda opt: LambdaLR(opt, lambda step: (step + 1) / 300),
    )
    return model, loader(x, y, 100), loader(vx, vy, 500, shuffle=False)


def embedding_lr_typo(lr: float = 1e-7):
    """An embedding + MLP token classifier, Adam at ``1e-7`` (typed for ``1e-3``)."""
    x, y, vx, vy = _tokens()
    model = Task(EmbeddingMLP(6, 3), "ce", lambda p: Adam(p, lr=lr))
    return model, loader(x, y, 32), loader(vx, vy, 600, shuffle=False)


def regression_join_bug(aligned: bool = False):
    """A regression whose targets were joined on a row id the feature export renumbered: every row gets some
    other row's target (train and validation alike)."""
    x, y, vx, vy = _regression()
    if not aligned:
        g = torch.Generator().manual_seed(3)
        y, vy = y[torch.randperm(len(y), generator=g)], vy[torch.randperm(len(vy), generator=g)]
    model = Task(MLP([8, 64, 64, 1]), "mse", lambda p: Adam(p, lr=1e-3))
    return model, loader(x, y, 64), loader(vx, vy, 500, shuffle=False)


def conv_adam_far_too_high(lr: float = 0.5):
    """A digits CNN with Adam at ``0.5``."""
    x, y, vx, vy = _digits(images=True)
    model = Task(DigitsConvNet(), "ce", lambda p: Adam(p, lr=lr))
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


UNIT_ERROR_ROWS = (117, 403, 911, 1500)  # targets exported in the wrong unit (rows read in order)


def unit_error_targets(scale: float = 300.0):
    """A regression MLP, Adam; four targets were exported in the wrong unit (x300)."""
    x, y, vx, vy = _regression()
    y[list(UNIT_ERROR_ROWS)] *= scale
    model = Task(MLP([8, 64, 64, 1]), "mse", lambda p: Adam(p, lr=1e-3))
    return model, loader(x, y, 50, shuffle=False), loader(vx, vy, 500, shuffle=False)


def digits_tanh_sgd(lr: float = 0.5):
    """A digits tanh MLP, SGD with momentum at ``0.5`` (meant ``0.05``): the loss jumps on ordinary
    batches."""
    x, y, vx, vy = _digits()
    model = Task(MLP([64, 128, 10], act=nn.Tanh), "ce", lambda p: SGD(p, lr=lr, momentum=0.9))
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


def forecast_rnn(gain: float = 1.45, nonlinearity: str = "relu", lr: float = 0.01, window: int = 40):
    """A ReLU RNN forecasting a series, recurrent weights orthogonal x ``1.45`` "to remember longer", SGD."""
    x, y = series(2000, window, seed=0)
    vx, vy = series(400, window, seed=1)
    net = ForecastRNN(gain=gain, nonlinearity=nonlinearity)
    model = Task(net, "mse", lambda p: SGD(p, lr=lr, momentum=0.9))
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


def slow_collate(latency_s: float = 0.03):
    """A token classifier whose ``collate_fn`` re-fetches the vocabulary from remote storage for every batch
    (``latency_s`` each, in the main process)."""
    x, y, vx, vy = _tokens()

    def collate(rows: list[tuple[Tensor, Tensor]]) -> tuple[Tensor, Tensor]:
        time.sleep(latency_s)  # the round trip to the storage holding the vocabulary
        return torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows])

    train = DataLoader(
        TensorDataset(x, y), batch_size=32, shuffle=True, collate_fn=collate,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    model = Task(EmbeddingMLP(6, 3), "ce", lambda p: Adam(p, lr=1e-3))
    return model, train, loader(vx, vy, 600, shuffle=False)


# ------------------------------------------------------------------------------------------------ healthy
def digits_batch2_adam(lr: float = 3e-3):
    """A digits MLP, batch 2, Adam at ``3e-3``: every step's loss jumps."""
    x, y, vx, vy = _digits()
    model = Task(MLP([64, 64, 10]), "ce", lambda p: Adam(p, lr=lr))
    return model, loader(x, y, 2), loader(vx, vy, 400, shuffle=False)


def augmented_cnn():
    """A digits CNN trained on shifted, noisy images (validation on clean ones), AdamW."""
    x, y, vx, vy = _digits(images=True)
    model = AugmentedTask(DigitsConvNet(), lambda p: AdamW(p, lr=3e-3, weight_decay=0.01))
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


def warm_restarts():
    """Tabular classes, SGD with momentum under cosine with warm restarts every 60 steps."""
    x, y = data.tabular_classes(3000, seed=0)
    vx, vy = data.tabular_classes(500, seed=1)
    model = Task(
        MLP([12, 64, 64, 4]),
        "ce",
        lambda p: SGD(p, lr=0.2, momentum=0.9),
        lambda opt: CosineAnnealingWarmRestarts(opt, T_0=60),
    )
    return model, loader(x, y, 64), loader(vx, vy, 500, shuffle=False)


def separable_idles():
    """Digits zero-vs-rest-like easy task (0 vs 1) with an MLP, Adam: solved early, then it idles."""
    x, y, vx, vy = _digits()
    keep, vkeep = y < 2, vy < 2
    model = Task(MLP([64, 32, 2]), "ce", lambda p: Adam(p, lr=3e-3))
    return model, loader(x[keep], y[keep], 32), loader(vx[vkeep], vy[vkeep], 400, shuffle=False)


def xor_plateau(scale: float = 0.3, lr: float = 1e-2):
    """Two noisy XOR bits among eight noise features, a 3-layer tanh MLP with small init, Adam: it sits at
    ln 2 for a while, then finds the XOR."""
    g = torch.Generator().manual_seed(0)

    def make(rows: int):
        x = torch.randn(rows, 10, generator=g)
        return x, ((x[:, 0] > 0) ^ (x[:, 1] > 0)).long()

    (x, y), (vx, vy) = make(2000), make(500)
    net = MLP([10, 32, 32, 2], act=nn.Tanh)
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(scale)
    model = Task(net, "ce", lambda p: Adam(p, lr=lr))
    return model, loader(x, y, 50), loader(vx, vy, 500, shuffle=False)


def noisy_targets():
    """A regression whose targets carry unit-variance noise: the loss floors at ~1, and that is right."""
    x, y, vx, vy = _regression(noise=1.0)
    model = Task(MLP([8, 64, 64, 1]), "mse", lambda p: Adam(p, lr=2e-3))
    return model, loader(x, y, 64), loader(vx, vy, 500, shuffle=False)


def bf16_mixed():
    """A digits MLP under ``bf16-mixed`` autocast (the trainer's precision), Adam."""
    x, y, vx, vy = _digits()
    model = Task(MLP([64, 128, 10]), "ce", lambda p: Adam(p, lr=2e-3))
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


def two_heads():
    """A digits trunk with a class head and a reconstruction head, the losses summed, Adam."""
    x, y, vx, vy = _digits()
    model = TwoHeadTask(lambda p: Adam(p, lr=2e-3))
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


def accumulated_dropout():
    """Token classifier with dropout 0.3, batch 8 with gradients accumulated over 4 batches, AdamW with
    warmup-cosine."""
    x, y, vx, vy = _tokens()
    net = EmbeddingMLP(6, 3)
    net.mlp = MLP([16, 64, 64, 3], dropout=0.3)
    model = Task(
        net,
        "ce",
        lambda p: AdamW(p, lr=5e-3, weight_decay=0.01),
        lambda opt: LambdaLR(opt, warmup_cosine(20, 250, floor=0.1)),
    )
    return model, loader(x, y, 8), loader(vx, vy, 600, shuffle=False)
