"""Builders of the sealed zoo's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof can build the healthy twin (the bug fixed) with the
same code.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.optim import SGD, Adam, AdamW
from torch.optim.lr_scheduler import LambdaLR, OneCycleLR
from torch.utils.data import DataLoader, TensorDataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo1._models import (
    IRNN,
    MLP,
    AutoEncoder,
    DigitsConvNet,
    GRUClassifier,
    Task,
    TinyTransformer,
    warmup_cosine,
)


# ------------------------------------------------------------------------------------------------ problems
def tabular_adam(lr: float = 0.3):
    """A churn-like tabular classifier; the user typed ``lr=3e-1`` for ``3e-4``."""
    x, y = data.tabular_classes(2000, seed=0)
    vx, vy = data.tabular_classes(500, seed=1)
    net = MLP([12, 64, 64, 4])
    model = Task(net, "ce", lambda p: Adam(p, lr=lr))
    return model, data.loader(x, y, 64), data.loader(vx, vy, 250, shuffle=False)


def digits_cnn_sgd(lr: float = 2e-5):
    """A digits CNN with SGD at an Adam-sized learning rate (``2e-5``)."""
    x, y = data.digits("train", images=True)
    vx, vy = data.digits("val", images=True)
    model = Task(DigitsConvNet(), "ce", lambda p: SGD(p, lr=lr, momentum=0.9))
    return model, data.loader(x, y, 32), data.loader(vx, vy, 400, shuffle=False)


MAJORITY_STEPS_PER_EPOCH = 100


def gru_schedule(schedule_steps: int = MAJORITY_STEPS_PER_EPOCH):
    """A GRU counting tokens, Adam with warmup-cosine; the bug: the cosine's length is one epoch
    (``len(train_loader)``) where the run is seven."""
    x, y = data.majority_tokens(2000, seed=0)
    vx, vy = data.majority_tokens(600, seed=1)
    net = GRUClassifier(vocab=6, classes=3)
    model = Task(
        net,
        "ce",
        lambda p: Adam(p, lr=3e-3),
        lambda opt: LambdaLR(opt, warmup_cosine(6, schedule_steps)),
    )
    return model, data.loader(x, y, 20), data.loader(vx, vy, 600, shuffle=False)


def regression_bias_init(bias: float = -1.0):
    """A regression MLP whose hidden biases the user set to ``-1`` "for sparse activations"."""
    x, y = data.tabular_regression(2000, seed=0)
    vx, vy = data.tabular_regression(500, seed=1)
    net = MLP([8, 128, 128, 1])
    with torch.no_grad():
        for layer in (net[0], net[2]):
            layer.bias.fill_(bias)
    model = Task(net, "mse", lambda p: SGD(p, lr=0.01, momentum=0.9))
    return model, data.loader(x, y, 64), data.loader(vx, vy, 500, shuffle=False)


SENSOR_BAD_ROW = 1510  # in batch 30 of 50 rows (the log is kept in time order)


def sensor_log(sentinels: bool = True, sentinel: float = -99.0, bad: int = 4):
    """A regression on a sensor log in time order; a few rows carry ``-99`` (a dropped-out sensor)."""
    x, y = data.sensor_log_with_sentinels(3000, SENSOR_BAD_ROW, bad, sentinel=sentinel)
    if not sentinels:  # the fix: impute the missing readings (the column's mean, 0)
        x[x == sentinel] = 0.0
    vx, vy = data.sensor_log_with_sentinels(600, 10**6, 0)
    net = MLP([10, 64, 64, 1])
    model = Task(net, "mse", lambda p: SGD(p, lr=0.01, momentum=0.9))
    return model, data.loader(x, y, 50, shuffle=False), data.loader(vx, vy, 600, shuffle=False)


def wide_mlp_few_rows(rows: int = 240):
    """A 2x256 MLP on 240 rows of a noisy tabular task, Adam, thirty epochs."""
    x, y = data.tabular_classes(rows, seed=3, noise=1.0)
    vx, vy = data.tabular_classes(1000, seed=4, noise=1.0)
    model = Task(MLP([12, 256, 256, 4]), "ce", lambda p: Adam(p, lr=1e-3))
    return model, data.loader(x, y, 32), data.loader(vx, vy, 1000, shuffle=False)


def irnn_adding(scale: float = 1.0):
    """An IRNN on the adding problem (length 60), SGD with momentum, recurrent weights at the identity as the
    paper says, but without the paper's gradient clipping."""
    x, y = data.adding_problem(2000, 60, seed=0)
    vx, vy = data.adding_problem(400, 60, seed=1)
    model = Task(IRNN(2, 32, scale), "mse", lambda p: SGD(p, lr=0.01, momentum=0.9))
    return model, data.loader(x, y, 32), data.loader(vx, vy, 400, shuffle=False)


def deep_sigmoid(act: type[nn.Module] = nn.Sigmoid):
    """A 12-layer sigmoid MLP on digits (the textbook stack), SGD with momentum."""
    x, y = data.digits("train")
    vx, vy = data.digits("val")
    net = MLP([64] + [32] * 11 + [10], act=act)
    model = Task(net, "ce", lambda p: SGD(p, lr=0.1, momentum=0.9))
    return model, data.loader(x, y, 32), data.loader(vx, vy, 400, shuffle=False)


RAW_SCALES = torch.tensor([1e3, 5e2, 2e2, 1e3, 3e2, 8e2, 1e2, 4e2, 6e2, 2e3, 1e3, 5e2])


def unscaled_tanh(standardise: bool = False):
    """A tanh MLP fed raw features (amounts in the hundreds and thousands), not standardised."""
    x, y = data.tabular_classes(2000, seed=0)
    vx, vy = data.tabular_classes(500, seed=1)
    if not standardise:
        x, vx = x * RAW_SCALES + 3 * RAW_SCALES, vx * RAW_SCALES + 3 * RAW_SCALES
    model = Task(MLP([12, 64, 64, 4], act=nn.Tanh), "ce", lambda p: SGD(p, lr=0.05, momentum=0.9))
    return model, data.loader(x, y, 64), data.loader(vx, vy, 500, shuffle=False)


def shuffled_apart(aligned: bool = False):
    """Digits whose images and labels a custom split shuffled with two independent permutations."""
    x, y = data.digits("train")
    vx, vy = data.digits("val")
    if not aligned:
        g = torch.Generator().manual_seed(5)
        x, vx = x[torch.randperm(len(x), generator=g)], vx[torch.randperm(len(vx), generator=g)]
        y, vy = y[torch.randperm(len(y), generator=g)], vy[torch.randperm(len(vy), generator=g)]
    model = Task(MLP([64, 32, 10]), "ce", lambda p: Adam(p, lr=1e-3))
    return model, data.loader(x, y, 64), data.loader(vx, vy, 400, shuffle=False)


LM_EMPTY_LINE = 16 * 70 + 5  # read in file order: batch 70 of 16 lines


def lm_per_line_mean(empty_line: bool = True):
    """A tiny transformer LM whose loss is each line's mean token loss; the corpus has one empty line."""
    tokens = data.sentences(2400, seed=0)
    if empty_line:
        tokens[LM_EMPTY_LINE] = 0
    val = data.sentences(200, seed=1)
    net = TinyTransformer(len(data.VOCAB), len(data.VOCAB), length=15, causal=True)
    model = Task(net, "lm", lambda p: AdamW(p, lr=2e-3, weight_decay=0.01), lm_mean_per_line=True)
    train = DataLoader(TensorDataset(tokens), batch_size=16, shuffle=False)
    return model, train, DataLoader(TensorDataset(val), batch_size=200)


def slow_cache(miss_s: float = 0.012):
    """A tabular classifier reading rows through a cache: one row in ten misses and reads from storage."""
    x, y = data.tabular_classes(4000, seed=0)
    vx, vy = data.tabular_classes(500, seed=1)
    model = Task(MLP([12, 64, 4]), "ce", lambda p: Adam(p, lr=1e-3))
    train = DataLoader(
        data.SlowCacheDataset(x, y, 10, miss_s), batch_size=32, shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    return model, train, data.loader(vx, vy, 500, shuffle=False)


def transformer_classifier_adamw(lr: float = 0.05):
    """A tiny transformer classifying token counts, AdamW at ``5e-2`` with no warmup."""
    x, y = data.majority_tokens(2000, seed=0)
    vx, vy = data.majority_tokens(600, seed=1)
    net = TinyTransformer(6, 3, length=16)
    model = Task(net, "ce", lambda p: AdamW(p, lr=lr, weight_decay=0.01))
    return model, data.loader(x, y, 50), data.loader(vx, vy, 600, shuffle=False)


# ------------------------------------------------------------------------------------------------ healthy
def large_batch_warmup_cosine():
    """Tabular classes, batch 1024, AdamW with warmup-cosine over 160 steps."""
    x, y = data.tabular_classes(8192, seed=0)
    vx, vy = data.tabular_classes(1000, seed=1)
    model = Task(
        MLP([12, 128, 128, 4]),
        "ce",
        lambda p: AdamW(p, lr=3e-3, weight_decay=0.05),
        lambda opt: LambdaLR(opt, warmup_cosine(16, 160)),
    )
    return model, data.batched_loader(x, y, 1024), data.loader(vx, vy, 1000, shuffle=False)


def heavy_dropout_onecycle():
    """A digits CNN with dropout 0.5 before its head, SGD with momentum under OneCycle."""
    x, y = data.digits("train", images=True)
    vx, vy = data.digits("val", images=True)
    model = Task(
        DigitsConvNet(dropout=0.5),
        "ce",
        lambda p: SGD(p, lr=0.05, momentum=0.9),
        lambda opt: OneCycleLR(opt, max_lr=0.1, total_steps=264),
    )
    return model, data.loader(x, y, 32), data.loader(vx, vy, 400, shuffle=False)


def lm_warmup():
    """A tiny transformer LM on the little sentences, AdamW warmed up to a high peak (``1e-2``), cosine."""
    tokens = data.sentences(2400, seed=0)
    val = data.sentences(200, seed=1)
    net = TinyTransformer(len(data.VOCAB), len(data.VOCAB), length=15, causal=True)
    model = Task(
        net,
        "lm",
        lambda p: AdamW(p, lr=1e-2, weight_decay=0.01),
        lambda opt: LambdaLR(opt, warmup_cosine(20, 160, floor=0.05)),
    )
    train = DataLoader(
        TensorDataset(tokens), batch_size=16, shuffle=True, generator=torch.Generator().manual_seed(0)
    )
    return model, train, DataLoader(TensorDataset(val), batch_size=200)


def label_smoothing():
    """A digits MLP with label smoothing 0.3: its training loss floors far above zero."""
    x, y = data.digits("train")
    vx, vy = data.digits("val")
    model = Task(MLP([64, 128, 10]), "ce", lambda p: Adam(p, lr=2e-3), label_smoothing=0.3)
    return model, data.loader(x, y, 64), data.loader(vx, vy, 400, shuffle=False)


def small_batch_sgd():
    """Regression with batch 4 and plain SGD: every step's loss is noisy."""
    x, y = data.tabular_regression(1200, seed=0, noise=0.3)
    vx, vy = data.tabular_regression(500, seed=1, noise=0.3)
    model = Task(MLP([8, 64, 64, 1]), "mse", lambda p: SGD(p, lr=0.01))
    return model, data.loader(x, y, 4), data.loader(vx, vy, 500, shuffle=False)


def gru_plateau_then_drop():
    """A GRU counting tokens, Adam at a constant ``1e-3``: it sits near the prior for a while, then learns."""
    x, y = data.majority_tokens(2000, seed=0)
    vx, vy = data.majority_tokens(600, seed=1)
    model = Task(GRUClassifier(vocab=6, classes=3), "ce", lambda p: Adam(p, lr=1e-3))
    return model, data.loader(x, y, 50), data.loader(vx, vy, 600, shuffle=False)


def autoencoder_converged():
    """A digits autoencoder, Adam at a constant LR, trained on well past convergence."""
    x, _ = data.digits("train")
    vx, _ = data.digits("val")
    model = Task(AutoEncoder(), "reconstruct", lambda p: Adam(p, lr=3e-3))
    return model, data.loader(x, x, 100), data.loader(vx, vx, 400, shuffle=False)


def _pretrained_backbone() -> nn.Module:
    """An MLP backbone trained (plain loop) on the first 700 training digits (its own corpus)."""
    x, y = data.digits("train")
    x, y = x[:700], y[:700]
    backbone = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
    head = nn.Linear(32, 10)
    optimizer = Adam([*backbone.parameters(), *head.parameters()], lr=3e-3)
    g = torch.Generator().manual_seed(11)
    for _ in range(150):
        index = torch.randint(len(y), (64,), generator=g)
        loss = F.cross_entropy(head(backbone(x[index])), y[index])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return backbone


def frozen_backbone():
    """Fine-tune a new head on the other 700 digits over the frozen pretrained backbone (SGD, cosine)."""
    backbone = _pretrained_backbone()
    backbone.requires_grad_(False)
    net = nn.Sequential(backbone, nn.Linear(32, 10))
    x, y = data.digits("train")
    vx, vy = data.digits("val")
    x, y = x[700:], y[700:]
    model = Task(
        net,
        "ce",
        lambda p: SGD(p, lr=0.02, momentum=0.9),
        lambda opt: torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=200),
    )
    return model, data.loader(x, y, 32), data.loader(vx, vy, 400, shuffle=False)
