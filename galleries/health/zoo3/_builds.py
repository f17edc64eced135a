"""Builders of zoo 3's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: made in code here (waveforms, counts, heteroscedastic targets, tf-idf documents, digit
pairs) or the first zoo's generators (scikit-learn's digits, token sequences).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adam, AdamW
from torch.optim.lr_scheduler import CyclicLR, LambdaLR, MultiStepLR, StepLR
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler, TensorDataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo1._models import warmup_cosine
from galleries.health.zoo3._models import (
    MLP,
    BagClassifier,
    GaussianNLLTask,
    LSTMClassifier,
    PatchViT,
    PoissonTask,
    ResidualMLP,
    SiameseTask,
    SignalConv1d,
    Task,
)

loader, _gen = data.loader, data._gen


# ------------------------------------------------------------------------------------------------ data
def signals(rows: int, seed: int = 0, noise: float = 0.3, length: int = 64) -> tuple[Tensor, Tensor]:
    """Noisy waveforms ``(N, 1, length)``: class 0 a sine, 1 a square wave, 2 a sawtooth (random period
    and phase)."""
    g = _gen(seed)
    y = torch.randint(0, 3, (rows,), generator=g)
    period = 8 + 16 * torch.rand(rows, 1, generator=g)
    phase = torch.rand(rows, 1, generator=g)
    t = (torch.arange(length) / period + phase) % 1.0
    waves = torch.stack([torch.sin(2 * math.pi * t), torch.sign(t - 0.5), 2 * t - 1])
    x = waves[y, torch.arange(rows)] + noise * torch.randn(rows, length, generator=g)
    return x.unsqueeze(1), y


def counts(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Event counts: Poisson with log-rate ``0.6 x0 - 0.4 x1 + 0.3 tanh(x2 x3) + 0.5`` of six features."""
    g = _gen(seed)
    x = torch.randn(rows, 6, generator=g)
    rate = torch.exp(0.6 * x[:, 0] - 0.4 * x[:, 1] + 0.3 * torch.tanh(x[:, 2] * x[:, 3]) + 0.5)
    return x, torch.poisson(rate, generator=g)


def hetero(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """A regression whose noise grows with ``x2``: ``sin(2 x0) + 0.5 x1 + (0.05 + 0.5 sigmoid(2 x2)) e``."""
    g = _gen(seed)
    x = torch.randn(rows, 4, generator=g)
    std = 0.05 + 0.5 * torch.sigmoid(2 * x[:, 2])
    y = torch.sin(2 * x[:, 0]) + 0.5 * x[:, 1] + std * torch.randn(rows, generator=g)
    return x, y.unsqueeze(1)


VOCAB = 50


def documents(rows: int, seed: int = 0, length: int = 20) -> tuple[Tensor, Tensor]:
    """Bag-of-tokens documents as ``(N, 2, length)`` floats (token ids, their idf weights); the label: is
    the sum of the tokens' fixed polarities positive."""
    g = _gen(seed)
    tokens = torch.randint(0, VOCAB, (rows, length), generator=g)
    polarity = torch.randn(VOCAB, generator=_gen(77))
    df = torch.stack([(tokens == t).any(1).float().mean() for t in range(VOCAB)])
    idf = torch.log(1 / df.clamp_min(1e-3))
    return torch.stack([tokens.float(), idf[tokens]], 1), (polarity[tokens].sum(1) > 0).long()


def digit_pairs(split: str, rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Pairs of digits ``(N, 2, 64)`` and 1.0 where both show the same digit (half the pairs)."""
    x, y = data.digits(split)
    g = _gen(seed)
    a = torch.randint(0, len(y), (rows,), generator=g)
    b = torch.randint(0, len(y), (rows,), generator=g)
    same = torch.rand(rows, generator=g) < 0.5
    for i in same.nonzero().flatten().tolist():  # a partner of the same class
        options = (y == y[a[i]]).nonzero().flatten()
        b[i] = options[int(torch.randint(0, len(options), (1,), generator=g))]
    return torch.stack([x[a], x[b]], 1), (y[a] == y[b]).float()


def _signals(noise: float = 0.3, rows: int = 3000):
    return (*signals(rows, 0, noise), *signals(600, 1, noise))


def _tokens(rows: int = 2000):
    return (*data.majority_tokens(rows, seed=0), *data.majority_tokens(600, seed=1))


def _conv(lr: float, optimizer: type = Adam, schedule=None, **kw):
    x, y, vx, vy = _signals()
    model = Task(SignalConv1d(), "ce", lambda p: optimizer(p, lr=lr, **kw), schedule)
    return model, loader(x, y, 32), loader(vx, vy, 600, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def conv_lr_typo(lr: float = 1e-6):
    """A waveform 1-D CNN, Adam at ``1e-6`` (meant ``1e-3``)."""
    return _conv(lr)


def conv_frozen(frozen: bool = True):
    """A waveform 1-D CNN whose ``requires_grad`` was switched off for every parameter but the head's bias
    (a "freeze the backbone" loop that matched too much)."""
    model, train, val = _conv(1e-3)
    if frozen:
        for name, p in model.net.named_parameters():
            p.requires_grad_(name == "6.bias")
    return model, train, val


def counts_shuffled(aligned: bool = False):
    """Poisson count regression whose targets were re-sorted apart from their features (train and
    validation)."""
    (x, y), (vx, vy) = counts(3000, 0), counts(600, 1)
    if not aligned:
        g = _gen(5)
        y, vy = y[torch.randperm(len(y), generator=g)], vy[torch.randperm(len(vy), generator=g)]
    model = PoissonTask(MLP([6, 64, 64, 1]), lambda p: Adam(p, lr=2e-3))
    return model, loader(x, y, 32), loader(vx, vy, 600, shuffle=False)


def lstm_few_rows(rows: int = 32):
    """An LSTM token classifier (width 128) trained on ``32`` sequences (a debug subset left in), Adam
    ``1e-2``, validated each epoch (every 2 steps)."""
    x, y, vx, vy = _tokens(rows)
    vx, vy = vx[:200], vy[:200]
    model = Task(LSTMClassifier(6, 3, width=128), "ce", lambda p: Adam(p, lr=1e-2))
    return model, loader(x, y, 16), loader(vx, vy, 600, shuffle=False)


JUMP_STEP = 100


def residual_lr_jump(factor: float = 20.0):
    """A residual LayerNorm MLP regression, plain SGD at ``0.01`` whose hand-written schedule
    multiplies the LR by ``20`` at step 100 (meant to divide)."""
    x, y = data.tabular_regression(3000, seed=0)
    vx, vy = data.tabular_regression(500, seed=1)
    model = Task(
        ResidualMLP(8, 1),
        "mse",
        lambda p: SGD(p, lr=0.01),
        lambda opt: LambdaLR(opt, lambda step: 1.0 if step < JUMP_STEP else factor),
    )
    return model, loader(x, y, 32), loader(vx, vy, 500, shuffle=False)


def _siamese(encoder: nn.Module, lr: float, rows: int = 4000):
    x, y = digit_pairs("train", rows, 0)
    vx, vy = digit_pairs("val", 600, 1)
    model = SiameseTask(encoder, lambda p: SGD(p, lr=lr, momentum=0.9))
    return model, loader(x, y, 32), loader(vx, vy, 600, shuffle=False)


def siamese_unit_init(std: float | None = 1.0):
    """A siamese digit-pair encoder (tanh MLP 64-128-128-16) whose hidden layers were initialised with
    ``nn.init.normal_`` (std 1, for inputs of width 64 and 128); SGD ``0.01``."""
    encoder = MLP([64, 128, 128, 16], act=nn.Tanh)
    if std is not None:
        with torch.no_grad():
            for layer in (encoder[0], encoder[2]):
                layer.weight.normal_(0.0, std)
    return _siamese(encoder, 0.01)


def siamese_lr(lr: float = 2.0):
    """The same siamese encoder, default init, SGD with momentum at ``2.0`` (meant ``0.02``)."""
    return _siamese(MLP([64, 128, 128, 16], act=nn.Tanh), lr)


OUTLIER_DOCS = (21 * 32 + 5, 40 * 32 + 17)  # rows read in order: batches 21 and 40 of 32
OUTLIER_WEIGHT = 5000.0


def tfidf_outliers(weight: float | None = OUTLIER_WEIGHT, frozen: bool = False):
    """A tf-idf ``EmbeddingBag`` document classifier, Adam; two documents hold a token missing from the idf
    snapshot, whose weight fell back to a sentinel ``5000`` (``None``: its real idf)."""
    (x, y), (vx, vy) = documents(62 * 32, 0), documents(600, 1)
    if weight is not None:
        for row in OUTLIER_DOCS:
            x[row, 1, 3] = weight
    net = BagClassifier(VOCAB)
    net.bag.weight.requires_grad_(not frozen)
    model = Task(net, "ce", lambda p: Adam(p, lr=3e-3))
    return model, loader(x, y, 32, shuffle=False), loader(vx, vy, 600, shuffle=False)


def hetero_sgd(lr: float = 0.8):
    """A heteroscedastic regression MLP, plain SGD at ``0.8`` (meant ``0.05``)."""
    return hetero_mse(None, lr, SGD)


QUIET_BATCH = 100  # the batch (16 rows, read in order) from a day without events


def counts_per_event(per_event: bool = True):
    """Poisson count regression, Adam, the loss hand-normalised "per event" (summed NLL / the batch's event
    count); one batch (step 100) comes from a quiet day with no events: ``x / 0``."""
    (x, y), (vx, vy) = counts(3000, 0), counts(600, 1)
    y[QUIET_BATCH * 16 : QUIET_BATCH * 16 + 16] = 0.0
    model = PoissonTask(MLP([6, 64, 64, 1]), lambda p: Adam(p, lr=2e-3), per_event=per_event)
    return model, loader(x, y, 16, shuffle=False), loader(vx, vy, 600, shuffle=False)


def deep_tanh(std: float | None = 0.02):
    """A 10-layer tanh MLP (width 64) on tabular classes, weights drawn with ``normal_(0, 0.02)`` (a
    transformer recipe's init), SGD ``0.05`` (``None``: Xavier with tanh gain)."""
    x, y = data.tabular_classes(3000, seed=0)
    vx, vy = data.tabular_classes(500, seed=1)
    net = MLP([12] + [64] * 9 + [4], act=nn.Tanh)
    with torch.no_grad():
        for layer in [m for m in net if isinstance(m, nn.Linear)]:
            layer.bias.zero_()
            if std is None:
                nn.init.xavier_normal_(layer.weight, gain=5 / 3)
            else:
                layer.weight.normal_(0.0, std)
    model = Task(net, "ce", lambda p: SGD(p, lr=0.05, momentum=0.9))
    return model, loader(x, y, 32), loader(vx, vy, 500, shuffle=False)


def residual_no_norm(gain: float = 3.0, norm: bool = False):
    """A 10-block residual MLP regression without normalisation, block weights x ``3`` after init, Adam."""
    x, y = data.tabular_regression(3000, seed=0)
    vx, vy = data.tabular_regression(500, seed=1)
    model = Task(ResidualMLP(8, 1, blocks=10, norm=norm, gain=gain), "mse", lambda p: Adam(p, lr=1e-3))
    return model, loader(x, y, 32), loader(vx, vy, 500, shuffle=False)


class IndexRereadingSampler(BatchSampler):
    """A batch sampler that re-reads the dataset's length index from storage (``latency_s``) for every
    batch, in the main process."""

    def __init__(self, rows: int, batch_size: int, latency_s: float) -> None:
        super().__init__(SequentialSampler(range(rows)), batch_size, drop_last=False)
        self.latency_s = latency_s

    def __iter__(self) -> Iterator[list[int]]:
        for batch in super().__iter__():
            time.sleep(self.latency_s)  # the round trip for the index
            yield batch


def conv_sampler_stall(latency_s: float = 0.06):
    """A waveform 1-D CNN whose batch sampler re-reads the length index from storage for every batch."""
    x, y, vx, vy = _signals()
    model = Task(SignalConv1d(), "ce", lambda p: Adam(p, lr=1e-3))
    train = DataLoader(TensorDataset(x, y), batch_sampler=IndexRereadingSampler(len(y), 32, latency_s))
    return model, train, loader(vx, vy, 600, shuffle=False)


def hetero_mse(schedule=None, lr: float = 3e-3, optimizer: type = Adam):
    """A heteroscedastic regression MLP trained with MSE (``schedule``: per step)."""
    x, y = hetero(3000, 0)
    vx, vy = hetero(600, 1)
    model = Task(MLP([4, 64, 64, 1]), "mse", lambda p: optimizer(p, lr=lr), schedule)
    return model, loader(x, y, 32), loader(vx, vy, 600, shuffle=False)


def hetero_steplr(step_size: int | None = 20):
    """A heteroscedastic regression MLP, Adam ``3e-3`` under ``StepLR(step_size=20, gamma=0.1)`` registered
    with ``interval="step"`` (the step size was meant in epochs): the LR is ~0 by step 100."""
    return hetero_mse(None if step_size is None else lambda opt: StepLR(opt, step_size, gamma=0.1))


def hetero_cyclic(max_lr: float = 2.0):
    """A heteroscedastic regression MLP, SGD under a triangular ``CyclicLR`` from ``0.001`` up to ``2.0``
    over 300 steps (max read off an LR-range test's wrong axis; meant ``0.05``)."""
    return hetero_mse(
        lambda opt: CyclicLR(opt, 0.001, max_lr, step_size_up=300, cycle_momentum=False), 0.001, SGD
    )


# ------------------------------------------------------------------------------------------------ healthy
def conv_long_warmup():
    """A waveform 1-D CNN, AdamW ``3e-3`` with a 150-step linear warm-up, then cosine to 300."""
    return _conv(3e-3, AdamW, lambda opt: LambdaLR(opt, warmup_cosine(150, 300)), weight_decay=0.01)


def conv_clipped():
    """A waveform 1-D CNN, Adam ``2e-3``, gradients clipped to norm ``0.02`` (every step clips)."""
    return _conv(2e-3)


def counts_sum():
    """Poisson count regression with ``reduction="sum"`` (a loss in the hundreds), Adam ``1e-3``."""
    (x, y), (vx, vy) = counts(3000, 0), counts(600, 1)
    model = PoissonTask(MLP([6, 64, 64, 1]), lambda p: Adam(p, lr=1e-3), reduction="sum")
    return model, loader(x, y, 64), loader(vx, vy, 600, shuffle=False)


def lstm_label_noise(flip: float = 0.4):
    """An LSTM token classifier where 40% of the labels (train and validation) are redrawn at random."""
    x, y, vx, vy = _tokens()
    g = _gen(11)
    for labels in (y, vy):
        flipped = torch.rand(len(labels), generator=g) < flip
        labels[flipped] = torch.randint(0, 3, (int(flipped.sum()),), generator=g)
    model = Task(LSTMClassifier(6, 3), "ce", lambda p: Adam(p, lr=3e-3))
    return model, loader(x, y, 32), loader(vx, vy, 600, shuffle=False)


def batchnorm_batch4():
    """Tabular classes, an MLP with BatchNorm after each hidden layer, batch 4, Adam ``1e-3``."""
    x, y = data.tabular_classes(2000, seed=0)
    vx, vy = data.tabular_classes(500, seed=1)
    net = nn.Sequential(
        nn.Linear(12, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(),
        nn.Linear(64, 4),
    )  # fmt: skip
    model = Task(net, "ce", lambda p: Adam(p, lr=1e-3))
    return model, loader(x, y, 4), loader(vx, vy, 500, shuffle=False)


CURRICULUM_STEP = 150


def conv_curriculum():
    """A waveform 1-D CNN, one epoch read in order: 150 batches of clean waveforms (noise 0.1), then 150 of
    hard ones (noise 0.8); validation on both, half and half."""
    (ex, ey), (hx, hy) = signals(CURRICULUM_STEP * 16, 0, 0.1), signals(CURRICULUM_STEP * 16, 2, 0.8)
    (cx, cy), (vx, vy) = signals(300, 1, 0.1), signals(300, 3, 0.8)
    vx, vy = torch.cat([cx, vx]), torch.cat([cy, vy])
    model = Task(SignalConv1d(), "ce", lambda p: Adam(p, lr=2e-3))
    train = loader(torch.cat([ex, hx]), torch.cat([ey, hy]), 16, shuffle=False)
    return model, train, loader(vx, vy, 600, shuffle=False)


def hetero_gaussian_nll():
    """Heteroscedastic regression with a mean and a log-variance head, Gaussian NLL (it goes negative)."""
    x, y = hetero(3000, 0)
    vx, vy = hetero(600, 1)
    model = GaussianNLLTask(MLP([4, 64, 64, 2]), lambda p: Adam(p, lr=2e-3))
    return model, loader(x, y, 32), loader(vx, vy, 600, shuffle=False)


def vit_step_decay():
    """A ViT-like patch model on digits, Adam ``3e-3``, the LR divided by 10 at step 150."""
    x, y = data.digits("train")
    vx, vy = data.digits("val")
    model = Task(PatchViT(), "ce", lambda p: Adam(p, lr=3e-3), lambda opt: MultiStepLR(opt, [150], 0.1))
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


def tfidf_frozen_embeddings():
    """The tf-idf document classifier with its embedding table frozen (only the MLP head trains)."""
    return tfidf_outliers(weight=None, frozen=True)


def residual_converged():
    """A residual LayerNorm MLP fitting a noiseless linear target, Adam ``3e-3``: converged in ~80 steps,
    then idles near its floor."""
    g = _gen(0)
    w = torch.randn(8, 1, generator=g)
    x, vx = torch.randn(2000, 8, generator=g), torch.randn(500, 8, generator=g)
    model = Task(ResidualMLP(8, 1), "mse", lambda p: Adam(p, lr=3e-3))
    return model, loader(x, x @ w, 32), loader(vx, vx @ w, 500, shuffle=False)
