"""Builders of zoo 8's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: bags of scikit-learn's digits (a bag is positive when it holds a 7) and an inverse problem
made in code (``x = y + 0.3 sin(2 pi y) + noise``: given ``x``, ``y`` has up to three branches).
"""

from __future__ import annotations

import math
import time

import torch
from torch import Tensor, nn
from torch.optim import Adam, AdamW
from torch.optim.lr_scheduler import LambdaLR, LinearLR, OneCycleLR, ReduceLROnPlateau
from torch.utils.data import DataLoader, Dataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo8._models import MDN, MDNTask, MILNet, MILTask

loader, _gen = data.loader, data._gen
BAG = 8  # images a bag
FLT_MAX = float(torch.finfo(torch.float32).max)


# ------------------------------------------------------------------------------------------------ data
def bags(split: str, count: int, seed: int) -> tuple[Tensor, Tensor]:
    """``count`` bags ``(count, 8, 64)`` of digits drawn from ``split``; the label: the bag holds a 7
    (about 57% of bags)."""
    x, y = data.digits(split)
    idx = torch.randint(0, len(y), (count, BAG), generator=_gen(seed))
    return x[idx], (y[idx] == 7).any(1).float()


def inverse_sine(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """``y ~ U(0, 1)``, ``x = y + 0.3 sin(2 pi y) + U(-0.1, 0.1)``; the task: the density of ``y`` given ``x``
    (multi-modal in the middle)."""
    g = _gen(seed)
    y = torch.rand(rows, 1, generator=g)
    x = y + 0.3 * torch.sin(2 * math.pi * y) + 0.2 * (torch.rand(rows, 1, generator=g) - 0.5)
    return x, y


# ------------------------------------------------------------------------------------------------ tasks
def _mil(make_optimizer, count: int = 2000, net: nn.Module | None = None, schedule=None, batch: int = 16,
         val_count: int = 400, y: Tensor | None = None, **kw):  # fmt: skip
    (x, ty), (vx, vy) = bags("train", count, 0), bags("val", val_count, 1)
    model = MILTask(net or MILNet(), make_optimizer, schedule, **kw)
    return model, loader(x, ty if y is None else y, batch), loader(vx, vy, val_count, shuffle=False)


def _mdn(make_optimizer, schedule=None, net: MDN | None = None, x: Tensor | None = None,
         y: Tensor | None = None, batch: int = 32, **kw):  # fmt: skip
    (tx, ty), (vx, vy) = inverse_sine(3000, 0), inverse_sine(600, 1)
    model = MDNTask(net or MDN(), make_optimizer, schedule, **kw)
    in_order = x is not None or y is not None  # a file read in order
    train = loader(tx if x is None else x, ty if y is None else y, batch, shuffle=not in_order)
    return model, train, loader(vx, vy, 600, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def mil_labels_apart(apart: bool = True):
    """Bags of digits, Adam ``1e-3``; the bag labels were put through a second, separate shuffle (two
    ``randperm`` calls, meant one), so no label belongs to its bag."""
    _, y = bags("train", 2000, 0)
    return _mil(lambda p: Adam(p, lr=1e-3), y=y[torch.randperm(len(y), generator=_gen(7))] if apart else y)


def mil_amsgrad(lr: float = 2e-7):
    """Bags of digits, Adam with AMSGrad at ``2e-7`` (meant ``2e-3``: the exponent's typo)."""
    return _mil(lambda p: Adam(p, lr=lr, amsgrad=True))


def mil_unfreeze(steps_per_epoch: int | None = None):
    """Bags of digits, AdamW ``2e-3``: the encoder's group is held at LR 0 for a one-epoch head warm-up, its
    unfreezing step computed as ``1 * len(dataset)`` (2000 bags) instead of ``len(loader)`` (125 batches),
    so it never unfreezes in 300 steps."""
    model, train, val = _mil(None)
    unfreeze = steps_per_epoch if steps_per_epoch is not None else len(train.dataset)
    net = model.net

    def make(params):
        head = [*net.attention.parameters(), *net.classifier.parameters()]
        return AdamW([{"params": head}, {"params": list(net.encoder.parameters())}], lr=2e-3)

    model.make_optimizer = make
    model.make_schedule = lambda o: LambdaLR(o, [lambda s: 1.0, lambda s: float(s >= unfreeze)])
    return model, train, val


UNFREEZE_MEANT = 125  # one epoch: len(loader) of 2000 bags in batches of 16


def mil_few_bags(count: int = 24):
    """A wide encoder (256 units) on 24 bags (a debug subset left in), Adam ``3e-3``, batch 8."""
    return _mil(lambda p: Adam(p, lr=3e-3), count=count, batch=8, net=MILNet(width=256, embed=64))


def mil_tanh_init(std: float | None = 3.0):
    """Bags of digits, a tanh encoder whose linear weights are initialised ``normal_(std=3)`` (a gain of 3
    meant to multiply ``1/sqrt(fan_in)``, passed as the std itself), Adam ``1e-3``."""
    net = MILNet(act=nn.Tanh)
    if std is not None:
        for layer in (net.encoder[0], net.encoder[2]):
            nn.init.normal_(layer.weight, std=std)
    return _mil(lambda p: Adam(p, lr=1e-3), net=net)


class SlowBags(Dataset):
    """Bags whose images are decoded again on every read (``cost_s`` a bag): a loader that never caches."""

    def __init__(self, x: Tensor, y: Tensor, cost_s: float) -> None:
        self.x, self.y, self.cost_s = x, y, cost_s

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        time.sleep(self.cost_s)
        return self.x[i], self.y[i]


def mil_slow_reads(cost_s: float = 0.003):
    """Bags of digits, Adam ``1e-3``, each bag's 8 images decoded again on every read (3 ms a bag, 16 a
    batch, no cache, no workers)."""
    model, train, val = _mil(lambda p: Adam(p, lr=1e-3))
    x, y = train.dataset.tensors
    return model, DataLoader(SlowBags(x, y, cost_s), 16, shuffle=True, generator=_gen(0)), val


def mdn_onecycle(max_lr: float = 0.3):
    """The MDN, Adam under a OneCycleLR to ``max_lr = 0.3`` at step 90 (meant ``3e-3``)."""
    return _mdn(lambda p: Adam(p, lr=max_lr), lambda o: OneCycleLR(o, max_lr=max_lr, total_steps=300))


SENTINEL_ROW = 60 * 32 + 3  # read in order: in batch 60 of the 94 an epoch


def mdn_sentinel(value: float | None = FLT_MAX):
    """The MDN, Adam with AMSGrad ``2e-3``, read in order; one target holds the export's "missing" marker
    ``FLT_MAX`` (3.4e38) instead of a value."""
    y = inverse_sine(3000, 0)[1].clone()
    if value is not None:
        y[SENTINEL_ROW] = value
    return _mdn(lambda p: Adam(p, lr=2e-3, amsgrad=True), y=y)


def mdn_nan_reading(nan: bool = True):
    """The MDN, Adam with AMSGrad ``2e-3``, read in order; one input ``x`` is NaN (a failed reading the
    export wrote as NaN), in the same batch 60."""
    x = inverse_sine(3000, 0)[0].clone()
    if nan:
        x[SENTINEL_ROW] = math.nan
    return _mdn(lambda p: Adam(p, lr=2e-3, amsgrad=True), x=x)


PERCENT_ROWS = (20 * 32 + 11, 70 * 32 + 4)  # read in order: batches 20 and 70 of the 94 an epoch


def mdn_percent(scale: float | None = 1000.0):
    """The MDN, AdamW ``2e-3`` (decay 1e-4), read in order; two rows' target ``y`` logged in per-mille
    (x1000) where the rest are fractions."""
    y = inverse_sine(3000, 0)[1].clone()
    if scale is not None:
        for row in PERCENT_ROWS:
            y[row] *= scale
    return _mdn(lambda p: AdamW(p, lr=2e-3, weight_decay=1e-4), y=y)


def mdn_plateau(per_step: bool = True):
    """The MDN, Adam ``3e-3`` under ReduceLROnPlateau (factor 0.1, patience 0) stepped every batch on the
    noisy training loss (meant every epoch on ``val_loss``)."""
    step = {"interval": "step", "monitor": "train_loss"}
    settings = step if per_step else {"interval": "epoch", "monitor": "val_loss"}
    return _mdn(lambda p: Adam(p, lr=3e-3), lambda o: ReduceLROnPlateau(o, factor=0.1, patience=0),
                **settings)  # fmt: skip


# ------------------------------------------------------------------------------------------------ healthy
def mdn_negative_nll():
    """The MDN, Adam with AMSGrad ``3e-3``: a density's NLL that falls through zero and stays negative."""
    return _mdn(lambda p: Adam(p, lr=3e-3, amsgrad=True))


def mil_summed_bce():
    """Bags of digits, the BCE summed over the 16 bags of a batch (16x the mean), Adam ``1e-3``."""
    model, train, val = _mil(lambda p: Adam(p, lr=1e-3))
    model.summed = True
    return model, train, val


def mil_noisy_labels(flipped: float = 0.3):
    """Bags of digits, 30% of the bag labels (train and validation) flipped: a high floor."""
    model, train, val = _mil(lambda p: Adam(p, lr=1e-3))
    g = _gen(11)
    for dl in (train, val):
        y = dl.dataset.tensors[1]
        mask = torch.rand(len(y), generator=g) < flipped
        y[mask] = 1 - y[mask]
    return model, train, val


def mil_tiny_validation():
    """Bags of digits, Adam ``1e-3``, validated on 12 bags: a validation loss that jitters."""
    return _mil(lambda p: Adam(p, lr=1e-3), val_count=12)


def mdn_onecycle_in_range():
    """The MDN, Adam under a OneCycleLR to ``1e-2``: an aggressive but stable peak."""
    return mdn_onecycle(1e-2)


def mdn_sharp_start(scale_bias: float = -5.0):
    """The MDN with its scale outputs' biases started at ``-5`` (sigma ~8e-3: "sharp components from the
    start"), Adam ``3e-3``: a huge first gradient, then ordinary training."""
    net = MDN()
    with torch.no_grad():
        net.head.bias[2 * 5 :] = scale_bias
    return _mdn(lambda p: Adam(p, lr=3e-3), net=net)


WARMUP = 150


def mil_long_warmup():
    """Bags of digits, AdamW ``3e-3`` (decay 0.01) after a linear warm-up from 1% over 150 steps: the loss
    sits at the prior's level for a long time, then falls."""
    return _mil(lambda p: AdamW(p, lr=3e-3, weight_decay=0.01),
                schedule=lambda o: LinearLR(o, start_factor=0.01, total_iters=WARMUP))  # fmt: skip
