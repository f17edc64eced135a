"""Builders of zoo 4's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: made in code here (ratings, sets, quantile targets, a community graph) or scikit-learn's
digits (multi-label attributes, denoising, classification).
"""

from __future__ import annotations

import time

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adagrad, Adam
from torch.optim.lr_scheduler import CyclicLR, LambdaLR, MultiStepLR
from torch.utils.data import DataLoader, TensorDataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo1._models import warmup_cosine
from galleries.health.zoo4._models import (
    GCN,
    MLP,
    DeepSets,
    MultiLabelTask,
    QuantileTask,
    Recommender,
    SepConvNet,
    SumMSETask,
    Task,
    TinyUNet,
)

loader, _gen = data.loader, data._gen


# ------------------------------------------------------------------------------------------------ data
USERS, ITEMS = 300, 150


def ratings(rows: int, seed: int = 0, noise: float = 0.5) -> tuple[Tensor, Tensor]:
    """``(user, item)`` pairs and 1-5 star ratings from a fixed rank-3 taste model plus biases and noise."""
    t = _gen(42)
    u, v = torch.randn(USERS, 3, generator=t), torch.randn(ITEMS, 3, generator=t)
    bu, bi = 0.5 * torch.randn(USERS, generator=t), 0.5 * torch.randn(ITEMS, generator=t)
    g = _gen(seed)
    pairs = torch.stack(
        [torch.randint(0, USERS, (rows,), generator=g), torch.randint(0, ITEMS, (rows,), generator=g)], 1
    )
    score = 3.2 + 0.5 * (u[pairs[:, 0]] * v[pairs[:, 1]]).sum(1) + bu[pairs[:, 0]] + bi[pairs[:, 1]]
    stars = (score + noise * torch.randn(rows, generator=g)).round().clamp(1, 5)
    return pairs, stars.unsqueeze(1)


DIGIT_LABELS = ((0, 2, 4, 6, 8), (5, 6, 7, 8, 9), (0, 6, 8, 9), (2, 3, 5, 7))  # even, >= 5, a loop, prime
NO_LOOP = (1, 2, 3, 4, 5, 7)


def attributes(y: Tensor) -> Tensor:
    """Multi-label targets of digit classes: even, at least 5, drawn with a loop, prime."""
    return torch.stack([torch.isin(y, torch.tensor(c)) for c in DIGIT_LABELS], 1).float()


def sets(rows: int, seed: int = 0, size: int = 10, spread: float = 0.3) -> tuple[Tensor, Tensor]:
    """Sets ``(N, size, 2)`` of points around a latent centre ``mu``; target ``sin(2 mu0) + 0.5 mu1^2``."""
    g = _gen(seed)
    mu = torch.randn(rows, 1, 2, generator=g)
    x = mu + spread * torch.randn(rows, size, 2, generator=g)
    return x, (torch.sin(2 * mu[:, 0, 0]) + 0.5 * mu[:, 0, 1] ** 2).unsqueeze(1)


def quantile_data(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """``sin(2 x0) + 0.5 x1`` plus noise whose scale grows with ``x2`` (the 0.9 quantile moves with it)."""
    g = _gen(seed)
    x = torch.randn(rows, 4, generator=g)
    scale = 0.1 + 0.6 * torch.sigmoid(2 * x[:, 2])
    y = torch.sin(2 * x[:, 0]) + 0.5 * x[:, 1] + scale * torch.randn(rows, generator=g).abs()
    return x, y.unsqueeze(1)


def community_graph(nodes: int = 600, signal: float = 0.4, p_in: float = 0.08, p_out: float = 0.01):
    """A four-community random graph (symmetric 0/1 adjacency, ~15 neighbours a node), 16 node features
    carrying a weak community signal, the community labels."""
    g = _gen(3)
    label = torch.randint(0, 4, (nodes,), generator=g)
    same = label[:, None] == label[None, :]
    edges = (torch.rand(nodes, nodes, generator=g) < torch.where(same, p_in, p_out)).float().triu(1)
    features = torch.randn(nodes, 16, generator=g)
    features[:, :4] += signal * nn.functional.one_hot(label, 4)
    return features, edges + edges.T, label


def _digits(images: bool = False):
    return (*data.digits("train", images), *data.digits("val", images))


# ------------------------------------------------------------------------------------------------ tasks
def _recommender(make_optimizer, rounded: bool = False, task: type = Task):
    (x, y), (vx, vy) = ratings(8000, 0), ratings(1500, 1)
    net = Recommender(USERS, ITEMS, float(y.mean()), rounded=rounded)
    model = Task(net, "mse", make_optimizer) if task is Task else task(net, make_optimizer)
    return model, loader(x, y, 64), loader(vx, vy, 1500, shuffle=False)


def _multilabel(make_optimizer, rows: int | None = None, net: nn.Module | None = None, schedule=None, **kw):
    x, y, vx, vy = _digits()
    rows = rows or len(y)
    model = MultiLabelTask(net or MLP([64, 128, 128, 4]), make_optimizer, make_schedule=schedule, **kw)
    return model, loader(x[:rows], attributes(y[:rows]), 32), loader(vx, attributes(vy), 400, shuffle=False)


def _sets(net: nn.Module, make_optimizer, size: int = 10, batch: int = 32, task: type = Task):
    (x, y), (vx, vy) = sets(3000, 0, size), sets(600, 1, size)
    model = Task(net, "mse", make_optimizer) if task is Task else task(net, make_optimizer)
    return model, loader(x, y, batch), loader(vx, vy, 600, shuffle=False)


def _quantile(net: nn.Module | None = None, make_optimizer=lambda p: Adam(p, lr=3e-3), schedule=None,
              batch: int = 32):  # fmt: skip
    (x, y), (vx, vy) = quantile_data(3000, 0), quantile_data(600, 1)
    model = QuantileTask(net or MLP([4, 64, 64, 1]), make_optimizer, make_schedule=schedule)
    return model, loader(x, y, batch), loader(vx, vy, 600, shuffle=False)


def _unet(make_optimizer, schedule=None, outlier_scale: float | None = None):
    x, _, vx, _ = _digits(images=True)
    x = x.clone()  # the cached digits stay untouched
    noisy = x + 0.3 * torch.randn(x.shape, generator=_gen(1))
    vnoisy = vx + 0.3 * torch.randn(vx.shape, generator=_gen(2))
    if outlier_scale is not None:  # a second source's images, stored as 0-255 and never rescaled
        for row in UNET_OUTLIER_ROWS:
            noisy[row], x[row] = noisy[row] * outlier_scale, x[row] * outlier_scale
    model = Task(TinyUNet(), "mse", make_optimizer, schedule)
    return model, loader(noisy, x, 32, shuffle=False), loader(vnoisy, vx, 400, shuffle=False)


def _sepconv(make_optimizer, schedule=None):
    x, y, vx, vy = _digits(images=True)
    model = Task(SepConvNet(), "ce", make_optimizer, schedule)
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


def _gcn(normalise: bool = True, frozen: bool = False, lr: float = 1e-2, **graph):
    features, adjacency, label = community_graph(**graph)
    net = GCN(features, adjacency, 4, normalise=normalise, frozen=frozen)
    model = Task(net, "ce", lambda p: Adam(p, lr=lr))
    nodes = torch.arange(len(label))
    return model, loader(nodes[:450], label[:450], 32), loader(nodes[450:], label[450:], 150, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def recommender_adagrad(lr: float = 1e-5):
    """Matrix factorisation, Adagrad at ``1e-5`` (meant ``0.1``)."""
    return _recommender(lambda p: Adagrad(p, lr=lr))


def recommender_rounded(rounded: bool = True):
    """Matrix factorisation whose forward pass rounds the prediction to whole stars (zero gradient)."""
    return _recommender(lambda p: Adagrad(p, lr=0.1), rounded=rounded)


def sets_reshaped(transpose: bool = False):
    """Deep sets on points stored element-major ``(size, N, 2)`` and reshaped (not transposed) to
    ``(N, size, 2)``: each "set" holds one point from each of ten other sets."""
    model, train, val = _sets(DeepSets(2, 1), lambda p: Adam(p, lr=2e-3))
    for dl in (train, val):
        x = dl.dataset.tensors[0]
        stored = x.transpose(0, 1).contiguous()  # how the points sit on disk
        dl.dataset.tensors = (
            stored.transpose(0, 1) if transpose else stored.reshape(x.shape),
            dl.dataset.tensors[1],
        )
    return model, train, val


UNET_OUTLIER_ROWS = (10 * 32 + 3, 30 * 32 + 20)  # read in order: batches 10 and 30 of the 44 an epoch


def unet_unscaled_images(scale: float | None = 255.0):
    """The digits denoiser, Adam ``2e-3``; two images of a second source kept their 0-255 range."""
    return _unet(lambda p: Adam(p, lr=2e-3), outlier_scale=scale)


def unet_sgd(lr: float = 2.0):
    """The digits denoiser, SGD with momentum at ``2.0`` (meant ``0.05``)."""
    return _unet(lambda p: SGD(p, lr=lr, momentum=0.9))


def unet_adam(lr: float = 0.1):
    """The digits denoiser, Adam at ``0.1`` (meant ``2e-3``)."""
    return _unet(lambda p: Adam(p, lr=lr))


def multilabel_sign_init(negative: bool = True):
    """A multi-label digits MLP whose first layer was made non-positive at init (``-w.abs()``, a sign typo
    in a non-negative init) on non-negative pixels, Adam ``1e-3``."""
    model, train, val = _multilabel(lambda p: Adam(p, lr=1e-3))
    if negative:
        with torch.no_grad():
            model.net[0].weight.abs_().neg_()
    return model, train, val


JUMP_STEP = 100


def multilabel_lr_jump(factor: float = 100.0):
    """The multi-label digits MLP, Adam ``1e-3``; at step 100 a second phase sets the LR ``100x`` higher
    (the SGD recipe's ``0.1``)."""
    return _multilabel(
        lambda p: Adam(p, lr=1e-3), schedule=lambda o: LambdaLR(o, lambda s: 1.0 if s < JUMP_STEP else factor)
    )


def multilabel_few_rows(rows: int = 48):
    """A wide multi-label digits MLP trained on ``48`` images (a debug subset), Adam ``3e-3``, batch 32."""
    return _multilabel(lambda p: Adam(p, lr=3e-3), rows=rows, net=MLP([64, 256, 256, 4]))


def sepconv_lr_growth(gamma: float = 1.02):
    """The separable-conv digits net, SGD with Nesterov at ``0.02``, a per-step LR factor ``1.03 ** step``
    (meant ``0.997``)."""
    return _sepconv(
        lambda p: SGD(p, lr=0.05, momentum=0.9, nesterov=True), lambda o: LambdaLR(o, lambda s: gamma**s)
    )


BAD_BATCH = 100  # the batch (16 rows, read in order) without a digit drawn with a loop


def multilabel_pos_weight(per_batch: bool = True):
    """The multi-label digits MLP (train images twice, the copy noisy: 175 batches of 16, read in order), the
    positives re-weighted per batch by ``negatives / positives``; batch 100 holds no digit with a loop."""
    x, y, vx, vy = _digits()
    x, y = torch.cat([x, x + 0.1 * torch.randn(x.shape, generator=_gen(4))]), torch.cat([y, y])
    no_loop = [i for i in range(len(y)) if int(y[i]) in NO_LOOP and i // 16 != BAD_BATCH]
    bad = range(BAD_BATCH * 16, BAD_BATCH * 16 + 16)
    swap = torch.tensor(no_loop[:16])
    x[list(bad)], x[swap] = x[swap].clone(), x[list(bad)].clone()
    y[list(bad)], y[swap] = y[swap].clone(), y[list(bad)].clone()
    model = MultiLabelTask(MLP([64, 128, 128, 4]), lambda p: Adam(p, lr=1e-3), batch_pos_weight=per_batch)
    return model, loader(x, attributes(y), 16, shuffle=False), loader(vx, attributes(vy), 400, shuffle=False)


def recommender_sgd(lr: float = 300.0):
    """Matrix factorisation, plain SGD at ``300`` (meant ``10``: the mean-reduced loss gives each
    embedding row a tiny gradient, and the LR was scaled up ~30x too far)."""
    return _recommender(lambda p: SGD(p, lr=lr))


def quantile_decay(decay_steps: float | None = 1.0):
    """Quantile (0.9) regression, Adam ``3e-3`` under ``0.95 ** (step / decay_steps)`` with
    ``decay_steps=1`` (meant 1000)."""
    return _quantile(
        schedule=None if decay_steps is None else lambda o: LambdaLR(o, lambda s: 0.95 ** (s / decay_steps))
    )


def sets_sum_tanh(pool: str = "sum"):
    """Deep sets with tanh MLPs over sets of 100 points, pooled by a sum (meant the mean), Adam ``1e-3``."""
    return _sets(DeepSets(2, 1, pool=pool, act=nn.Tanh), lambda p: Adam(p, lr=1e-3), size=100)


def quantile_deep_scaled(scale: float | None = 0.1):
    """Quantile regression with a 9-layer ReLU MLP whose every layer was scaled by ``0.1`` after He init
    (Fixup's down-scaling applied to every layer, not one per branch), SGD ``0.05`` with momentum
    (``None``: He init alone)."""
    net = MLP([4] + [64] * 8 + [1])
    with torch.no_grad():
        for layer in [m for m in net if isinstance(m, nn.Linear)]:
            layer.bias.zero_()
            nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            layer.weight.mul_(1.0 if scale is None else scale)
    return _quantile(net, lambda p: SGD(p, lr=0.05, momentum=0.9))


def gcn_raw_adjacency(normalise: bool = False):
    """A three-layer graph network on the raw ``A + I`` (meant ``D^-1/2 (A + I) D^-1/2``), Adam ``1e-2``."""
    return _gcn(normalise)


def _load_vocabulary(worker: int) -> None:
    time.sleep(0.5)  # each worker re-reads a large vocabulary file when it starts


def sets_worker_startup(persistent: bool = False):
    """Deep sets, a loader of 8 batches an epoch with two workers that start over every epoch
    (``persistent_workers=False``) and spend 0.5 s each loading a vocabulary."""
    model, train, val = _sets(DeepSets(2, 1), lambda p: Adam(p, lr=2e-3), batch=32)
    x, y = train.dataset.tensors
    train = DataLoader(TensorDataset(x[:256], y[:256]), 32, shuffle=True, num_workers=2,
                       persistent_workers=persistent, worker_init_fn=_load_vocabulary)  # fmt: skip
    return model, train, val


# ------------------------------------------------------------------------------------------------ healthy
def sepconv_long_warmup():
    """The separable-conv digits net, SGD Nesterov ``0.1`` with a 150-step linear warm-up, then cosine."""
    return _sepconv(
        lambda p: SGD(p, lr=0.1, momentum=0.9, nesterov=True), lambda o: LambdaLR(o, warmup_cosine(150, 300))
    )


def gcn_converged():
    """A graph network on a graph with a strong community signal: solved in ~60 steps, then idles."""
    return _gcn(signal=2.0)


def multilabel_label_noise(flip: float = 0.3):
    """The multi-label digits MLP with 30% of the attribute bits (train and validation) flipped."""
    model, train, val = _multilabel(lambda p: Adam(p, lr=1e-3))
    g = _gen(11)
    for dl in (train, val):
        y = dl.dataset.tensors[1]
        flipped = torch.rand(y.shape, generator=g) < flip
        y[flipped] = 1 - y[flipped]
    return model, train, val


def quantile_batch4():
    """Quantile regression in batches of 4, Adam ``3e-3``: a noisy loss."""
    return _quantile(batch=4)


CURRICULUM_STEP = 150


def sets_curriculum():
    """Deep sets read in order: 150 batches of tight sets (spread 0.1), then 150 of loose ones (spread 1.5,
    the centre harder to estimate); validation on both."""
    (ex, ey), (hx, hy) = sets(CURRICULUM_STEP * 16, 0, spread=0.1), sets(CURRICULUM_STEP * 16, 2, spread=1.5)
    (cx, cy), (vx, vy) = sets(300, 1, spread=0.1), sets(300, 3, spread=1.5)
    model = Task(DeepSets(2, 1), "mse", lambda p: Adam(p, lr=2e-3))
    train = loader(torch.cat([ex, hx]), torch.cat([ey, hy]), 16, shuffle=False)
    return model, train, loader(torch.cat([cx, vx]), torch.cat([cy, vy]), 600, shuffle=False)


def recommender_sum_loss():
    """Matrix factorisation with the squared error summed over the batch of 64, Adam ``1e-2``."""
    return _recommender(lambda p: Adam(p, lr=1e-2), task=SumMSETask)


def unet_step_decay():
    """The digits denoiser, Adam ``2e-3``, the LR divided by 10 at step 150."""
    return _unet(lambda p: Adam(p, lr=2e-3), lambda o: MultiStepLR(o, [150], 0.1))


def multilabel_clipped():
    """The multi-label digits MLP, Adam ``1e-3``, gradients clipped to norm ``0.01`` (every step clips)."""
    return _multilabel(lambda p: Adam(p, lr=1e-3))


def gcn_frozen_propagation():
    """A graph network on clear communities whose three propagation layers keep their random weights: only
    the head trains."""
    return _gcn(frozen=True, lr=3e-2, signal=2.0)


def quantile_cyclic():
    """Quantile regression, Adam under a triangular CyclicLR between ``1e-4`` and ``3e-3`` (50 steps up)."""
    return _quantile(schedule=lambda o: CyclicLR(o, 1e-4, 3e-3, step_size_up=50, cycle_momentum=False))


def sets_offset_loss():
    """Deep sets under a median (pinball 0.5) loss plus a constant 25 (a fixed normalising term)."""
    model, train, val = _sets(DeepSets(2, 1), lambda p: Adam(p, lr=2e-3))
    return QuantileTask(model.net, model.make_optimizer, tau=0.5, offset=25.0), train, val


def recommender_adagrad_slow():
    """Matrix factorisation, Adagrad ``0.02``: slow but steady."""
    return _recommender(lambda p: Adagrad(p, lr=0.02))
