"""Builders of zoo 18's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data (``_data.py``): a heteroscedastic regression table, a stochastic-block-model graph, bags of
scikit-learn's 8x8 digits, a generated text, the digits themselves.
"""

from __future__ import annotations

import torch
from torch.optim import SGD, Adagrad, Adamax, NAdam, RAdam
from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts, CyclicLR, OneCycleLR, PolynomialLR

from galleries.health.zoo18 import _data as data
from galleries.health.zoo18._models import (
    AttentionMIL,
    BagTask,
    CharGRU,
    CharLMTask,
    ClassifyTask,
    DotProductEmbedding,
    GaussianNLLTask,
    LinkTask,
    MeanVarianceNet,
    PatchTransformer,
)


# ------------------------------------------------------------------------------------------------ tasks
def _hetero_task(make_optimizer, schedule=None, net=None, x=None, shuffle: bool = True):
    """4,096 training rows in batches of 64 (64 steps an epoch), 512 validation rows in one batch."""
    tx, ty = data.heteroscedastic(4096, 0)
    vx, vy = data.heteroscedastic(512, 1)
    model = GaussianNLLTask(net if net is not None else MeanVarianceNet(), make_optimizer, schedule)
    train = data.loader(tx if x is None else x, ty, batch=64, shuffle=shuffle)
    return model, train, data.loader(vx, vy, batch=512, shuffle=False)


def _link_task(make_optimizer, batch: int = 128, **kw):
    """~1,900 training edges in batches of 128 (15 steps an epoch) and as many negatives; validated on the
    ~330 held-out edges and as many fixed random pairs."""
    train_edges, _ = data.sbm_edges()
    model = LinkTask(DotProductEmbedding(data.NODES), make_optimizer, **kw)
    pairs, labels = data.link_validation()
    val = data.loader(pairs, labels, batch=len(labels), shuffle=False)
    return model, data.loader(train_edges, batch=batch), val


def _bag_task(make_optimizer, schedule=None, labels=None):
    """640 training bags in batches of 32 (20 steps an epoch), 256 validation bags in one batch."""
    x, y = data.bags("train", 640, 1)
    vx, vy = data.bags("val", 256, 2)
    if labels is not None:
        y = labels(y)
    model = BagTask(AttentionMIL(), make_optimizer, schedule)
    return model, data.loader(x, y, batch=32), data.loader(vx, vy, batch=256, shuffle=False)


def _char_task(make_optimizer, schedule=None, net=None, task=CharLMTask):
    """~1,700 training windows of 48 characters in batches of 32 (53 steps an epoch), 96 validation
    windows in one batch."""
    x, y = data.windows("train")
    vx, vy = data.windows("val")
    model = task(net if net is not None else CharGRU(len(data.alphabet())), make_optimizer, schedule)
    return model, data.loader(x, y, batch=32), data.loader(vx[:96], vy[:96], batch=96, shuffle=False)


def _patch_task(make_optimizer, net=None, val_images: int = 397, train=None):
    """1,400 training digits in batches of 64 (22 steps an epoch), 397 validation digits in one batch."""
    x, y = data.digits("train")
    vx, vy = data.digits("val")
    model = ClassifyTask(net if net is not None else PatchTransformer(), make_optimizer)
    train_loader = train if train is not None else data.loader(x, y, batch=64)
    return model, train_loader, data.loader(vx[:val_images], vy[:val_images], batch=397, shuffle=False)


# ------------------------------------------------------------------------------------------------ hetero
GAP_BATCH = 45
GAP_ROW = GAP_BATCH * 64 + 23  # read in recording order: in batch 45 of the 64 an epoch


def hetero_sensor_gap(gap: bool = True):
    """Heteroscedastic regression read in recording order, NAdam ``2e-3``; one sensor dropout was stored
    as NaN in the table (meant: the row dropped), so one input is NaN."""
    x, _ = data.heteroscedastic(4096, 0)
    x = x.clone()
    if gap:
        x[GAP_ROW, 1] = float("nan")
    return _hetero_task(lambda p: NAdam(p, lr=2e-3), x=x, shuffle=False)


def hetero_sgd(lr: float = 0.3):
    """Heteroscedastic regression, SGD with Nesterov momentum 0.9 at ``0.3`` (meant ``0.03``)."""
    return _hetero_task(lambda p: SGD(p, lr=lr, momentum=0.9, nesterov=True))


def hetero_radam(lr: float = 1.0):
    """Heteroscedastic regression, RAdam at ``1.0`` (meant ``1e-3``: the ``lr=1.0`` of an Adadelta config
    kept when the optimizer was swapped)."""
    return _hetero_task(lambda p: RAdam(p, lr=lr))


def hetero_negative_bias(bias: float | None = -1.0):
    """Heteroscedastic regression, NAdam ``2e-3``, every hidden bias initialised to ``-1`` (an init helper
    meant for sparse codes; ``None``: PyTorch's default)."""
    net = MeanVarianceNet()
    if bias is not None:
        for layer in net.body:
            if isinstance(layer, torch.nn.Linear):
                torch.nn.init.constant_(layer.bias, bias)
    return _hetero_task(lambda p: NAdam(p, lr=2e-3), net=net)


# ------------------------------------------------------------------------------------------------ link
def _reordered_positives(edges):
    """The bug: ``edges[randperm]`` reorders the positive edges (meant: permute the destinations only)."""
    return edges[torch.randperm(len(edges))]


def link_negatives(buggy: bool = True):
    """Link prediction, Adagrad ``0.1`` with weight decay ``3e-4``; the negatives are ``edges[randperm]``:
    the batch's positive edges reordered, so every pair is labelled both 1 and 0."""
    kw = {"negatives": _reordered_positives} if buggy else {}
    return _link_task(lambda p: Adagrad(p, lr=0.1, weight_decay=3e-4), **kw)


def link_adagrad(lr: float = 1e-4):
    """Link prediction, Adagrad at ``1e-4`` (meant ``1e-1``) with weight decay ``3e-4``."""
    return _link_task(lambda p: Adagrad(p, lr=lr, weight_decay=3e-4))


def link_no_decay(weight_decay: float = 0.0):
    """Link prediction, Adagrad ``0.2``; the config's ``weight_decay`` read as ``0`` (meant ``3e-4``)."""
    return _link_task(lambda p: Adagrad(p, lr=0.2, weight_decay=weight_decay))


# ------------------------------------------------------------------------------------------------ char GRU
CYCLE_UP = 250


def char_cyclic(max_lr: float = 3.0):
    """The character GRU, RAdam under CyclicLR(base_lr=1e-3, max_lr=3.0, triangular, 250 steps up) (meant
    max_lr ``3e-2``: the exponent's digit lost)."""
    return _char_task(
        lambda p: RAdam(p, lr=1e-3),
        lambda o: CyclicLR(
            o, base_lr=1e-3, max_lr=max_lr, step_size_up=CYCLE_UP, mode="triangular", cycle_momentum=False
        ),
    )


def char_head_only(head_only: bool = True):
    """The character GRU, Adamax ``3e-3`` built over ``model.net.head.parameters()`` (a linear-probe
    script's line kept; meant every parameter): the embedding and the GRU get gradients, never updates."""

    class Probe(CharLMTask):
        def optimizer_parameters(self):
            return self.net.head.parameters() if head_only else self.parameters()

    return _char_task(lambda p: Adamax(p, lr=3e-3), task=Probe)


# ------------------------------------------------------------------------------------------------ MIL
POLY_ITERS = 30


def mil_polynomial(total_iters: int = POLY_ITERS):
    """Bags of digits, NAdam ``3e-3`` under PolynomialLR(total_iters=30) meant in epochs (20 steps each,
    so 600 steps) but stepped every step: the LR falls linearly to exactly 0 at step 30 and stays there."""
    return _bag_task(
        lambda p: NAdam(p, lr=3e-3), lambda o: PolynomialLR(o, total_iters=total_iters, power=1.0)
    )


# ------------------------------------------------------------------------------------------------ patches
def patch_batch_first(omitted: bool = True):
    """The patch transformer, NAdam ``2e-3``; its encoder layers built without ``batch_first=True`` though
    fed ``(batch, tokens, dim)``, so attention mixes the batch's images at each position and the class
    token never sees its own image's patches."""
    return _patch_task(lambda p: NAdam(p, lr=2e-3), net=PatchTransformer(batch_first=not omitted))


def patch_archive_per_item(per_item: bool = True):
    """The patch transformer, NAdam ``2e-3``, its training digits (batches of 32) read through
    :class:`ArchiveDigits`, whose ``__getitem__`` decompresses the whole ``.npz`` archive for every image
    (meant: once)."""
    x, y = data.digits("train")
    train = data.loader_of(data.ArchiveDigits(x, y, per_item), batch=32)
    return _patch_task(lambda p: NAdam(p, lr=2e-3), train=train)


# ------------------------------------------------------------------------------------------------ healthy
ONECYCLE_PEAK = 90  # 30% of 300 steps


def hetero_onecycle_warmup():
    """Heteroscedastic regression, Adamax under OneCycleLR(max_lr=2e-2, div_factor=1000, pct_start=0.3):
    the LR starts at ``2e-5``, climbs 1000x over 90 steps, then anneals to ``2e-9``."""
    return _hetero_task(
        lambda p: Adamax(p, lr=2e-2),
        lambda o: OneCycleLR(o, max_lr=2e-2, total_steps=300, pct_start=0.3, div_factor=1e3),
    )


def hetero_warm_restarts():
    """Heteroscedastic regression, NAdam ``3e-3`` under CosineAnnealingWarmRestarts(T_0=50, T_mult=2): the
    LR anneals to ~0 and jumps back to ``3e-3`` at steps 50 and 150."""
    return _hetero_task(
        lambda p: NAdam(p, lr=3e-3), lambda o: CosineAnnealingWarmRestarts(o, T_0=50, T_mult=2)
    )


BIG_BATCH = 950


def link_big_batches():
    """Link prediction in two batches of ~950 positive edges (and as many negatives) an epoch, Adagrad
    ``0.1`` with weight decay ``3e-4``."""
    return _link_task(lambda p: Adagrad(p, lr=0.1, weight_decay=3e-4), batch=BIG_BATCH)


def link_sgd_slow():
    """Link prediction, SGD with Nesterov momentum 0.9 at ``2.0`` and weight decay ``1e-4``: the small
    initial embeddings make a slow start, then steady progress."""
    return _link_task(lambda p: SGD(p, lr=2.0, momentum=0.9, nesterov=True, weight_decay=1e-4))


def mil_flipped_labels(flipped: float = 0.2):
    """Bags of digits with 20% of the training bag labels flipped (weak labels from a noisy source; the
    validation labels are exact), NAdam ``3e-3``: the training loss floors near ``H(0.2) ~ 0.5``."""

    def flip(y):
        return torch.where(torch.rand(len(y), generator=data.gen(31)) < flipped, 1 - y, y)

    return _bag_task(lambda p: NAdam(p, lr=3e-3), labels=flip)


def mil_polynomial_over_run():
    """Bags of digits, NAdam ``3e-3`` under PolynomialLR(total_iters=300, power=2): the LR decays to 0 by
    the last step, as meant."""
    return _bag_task(lambda p: NAdam(p, lr=3e-3), lambda o: PolynomialLR(o, total_iters=300, power=2.0))


def char_cyclic_sane():
    """The character GRU, RAdam under CyclicLR(base_lr=1e-3, max_lr=3e-2, triangular, 250 steps up)."""
    return char_cyclic(3e-2)


def char_frozen_one_hot():
    """The character GRU with its embedding replaced by fixed one-hot codes (an identity matrix, frozen on
    purpose: the GRU reads the characters themselves), NAdam ``3e-3``."""
    vocab = len(data.alphabet())
    net = CharGRU(vocab, vocab)
    with torch.no_grad():
        net.embedding.weight.copy_(torch.eye(vocab))
    net.embedding.requires_grad_(False)
    return _char_task(lambda p: NAdam(p, lr=3e-3), net=net)


def patch_tiny_validation():
    """The patch transformer, NAdam ``2e-3``, validated on 24 digits only."""
    return _patch_task(lambda p: NAdam(p, lr=2e-3), val_images=24)


def patch_sgd_nesterov():
    """The patch transformer, SGD with Nesterov momentum 0.9 at ``0.05``, no schedule."""
    return _patch_task(lambda p: SGD(p, lr=0.05, momentum=0.9, nesterov=True))
