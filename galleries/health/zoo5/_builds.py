"""Builders of zoo 5's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: made in code here (3-D point clouds, ordinal levels, a two-regime regression) or
scikit-learn's digits (the VAE, the weight-shared net, the hypernetwork).
"""

from __future__ import annotations

import math
import time

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adam, Adamax, AdamW, NAdam, RAdam
from torch.optim.lr_scheduler import CyclicLR, LambdaLR, MultiStepLR
from torch.utils.data import DataLoader, Dataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo1._models import warmup_cosine
from galleries.health.zoo5._models import (
    VAE,
    HyperNet,
    MixtureOfExperts,
    OrdinalNet,
    OrdinalTask,
    PointNet,
    SharedDepthNet,
    Task,
    VAETask,
)

loader, _gen = data.loader, data._gen


# ------------------------------------------------------------------------------------------------ data
def point_clouds(rows: int, seed: int = 0, points: int = 32, noise: float = 0.02) -> tuple[Tensor, Tensor]:
    """Clouds ``(N, points, 3)`` sampled on a sphere, a cube's surface, a cylinder or a cone (the label),
    randomly scaled (0.7-1.3) and turned about the vertical axis, plus Gaussian jitter."""
    g = _gen(seed)
    label = torch.randint(0, 4, (rows,), generator=g)
    u = torch.rand(rows, points, 3, generator=g)
    theta = 2 * math.pi * u[..., 0]
    sphere = torch.nn.functional.normalize(torch.randn(rows, points, 3, generator=g), dim=2)
    cube = 2 * u - 1
    face = torch.randint(0, 3, (rows, points, 1), generator=g)
    cube = cube.scatter(2, face, torch.where(u[..., 1:2] < 0.5, -1.0, 1.0))
    cylinder = torch.stack([theta.cos(), theta.sin(), 2 * u[..., 2] - 1], 2)
    r = 1 - u[..., 2]
    cone = torch.stack([r * theta.cos(), r * theta.sin(), 2 * u[..., 2] - 1], 2)
    x = torch.stack([sphere, cube, cylinder, cone])[label, torch.arange(rows)]
    turn = 2 * math.pi * torch.rand(rows, generator=g)
    c, s = turn.cos(), turn.sin()
    x = torch.stack([c[:, None] * x[..., 0] - s[:, None] * x[..., 1],
                     s[:, None] * x[..., 0] + c[:, None] * x[..., 1], x[..., 2]], 2)  # fmt: skip
    x = x * (0.7 + 0.6 * torch.rand(rows, 1, 1, generator=g))
    return x + noise * torch.randn(x.shape, generator=g), label


ORDINAL_CUTS = (-0.8, -0.25, 0.25, 0.8)


def ordinal_data(rows: int, seed: int = 0, noise: float = 0.2) -> tuple[Tensor, Tensor]:
    """Eight standard features; a latent ``x w / sqrt 8 + 0.5 sin(2 x0)`` plus noise, cut into five ordered
    levels (about a fifth each)."""
    w = torch.randn(8, generator=_gen(42))
    g = _gen(seed)
    x = torch.randn(rows, 8, generator=g)
    latent = (
        x @ w / math.sqrt(8) * 0.7 + 0.5 * torch.sin(2 * x[:, 0]) + noise * torch.randn(rows, generator=g)
    )
    return x, torch.bucketize(latent, torch.tensor(ORDINAL_CUTS))


def regimes(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Four features; the target follows one of two laws by the sign of ``x0`` (a task for a gated
    mixture)."""
    g = _gen(seed)
    x = torch.randn(rows, 4, generator=g)
    y = torch.where(x[:, 0] > 0, torch.sin(2 * x[:, 1]) + x[:, 2], x[:, 3] ** 2 - 1 - 0.5 * x[:, 1])
    return x, (y + 0.1 * torch.randn(rows, generator=g)).unsqueeze(1)


def _digits() -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return (*data.digits("train"), *data.digits("val"))


# ------------------------------------------------------------------------------------------------ tasks
def _points(make_optimizer, net: nn.Module | None = None, noise: float = 0.02, schedule=None):
    (x, y), (vx, vy) = point_clouds(2400, 0, noise=noise), point_clouds(400, 1, noise=noise)
    model = Task(net or PointNet(), "ce", make_optimizer, schedule)
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


def _ordinal(make_optimizer, rows: int = 3000, net: OrdinalNet | None = None, batch: int = 32, **kw):
    (x, y), (vx, vy) = ordinal_data(rows, 0), ordinal_data(600, 1)
    model = OrdinalTask(net or OrdinalNet(), make_optimizer, **kw)
    return model, loader(x, y, batch), loader(vx, vy, 600, shuffle=False)


def _moe(make_optimizer, schedule=None, net: nn.Module | None = None, x: Tensor | None = None):
    (tx, y), (vx, vy) = regimes(3000, 0), regimes(600, 1)
    model = Task(net or MixtureOfExperts(), "mse", make_optimizer, schedule)
    shuffle = x is None  # given inputs are read in order
    return model, loader(tx if x is None else x, y, 32, shuffle=shuffle), loader(vx, vy, 600, shuffle=False)


def _vae(make_optimizer, x: Tensor | None = None, batch: int = 32, **kw):
    tx, ty, vx, vy = _digits()
    model = VAETask(VAE(), make_optimizer, **kw)
    shuffle = x is None
    return (
        model,
        loader(tx if x is None else x, ty, batch, shuffle=shuffle),
        loader(vx, vy, 397, shuffle=False),
    )


def _digit_classes(net: nn.Module, make_optimizer, schedule=None):
    tx, ty, vx, vy = _digits()
    return Task(net, "ce", make_optimizer, schedule), loader(tx, ty, 32), loader(vx, vy, 397, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def ordinal_radam(lr: float = 1e-6):
    """Ordinal regression (CORAL head), RAdam at ``1e-6`` (meant ``3e-3``)."""
    return _ordinal(lambda p: RAdam(p, lr=lr))


def ordinal_weight_decay(weight_decay: float = 100.0):
    """Ordinal regression, AdamW ``1e-2`` with weight decay ``100`` on the weight matrices (meant ``0.1``;
    biases and thresholds undecayed, the usual split)."""

    def make(params):
        params = list(params)
        decay = [p for p in params if p.ndim >= 2]
        rest = [p for p in params if p.ndim < 2]
        return AdamW([{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}],
                     lr=1e-2)  # fmt: skip

    return _ordinal(make)


def points_pool_batch(pool_batch: bool = True):
    """PointNet whose max-pool runs over dims ``(0, 1)``, the batch too (meant 1, the points), its one
    feature broadcast to every cloud, Adam ``1e-3``."""
    return _points(lambda p: Adam(p, lr=1e-3), PointNet(pool_batch=pool_batch))


ENCODER_LR_MULT = 1 // 10  # integer division: meant 0.1 (``1 / 10``)


def vae_encoder_lr_mult(mult: float = ENCODER_LR_MULT):
    """A digits VAE, Adam ``1e-3`` with the encoder's group at ``lr * mult``; ``mult = 1 // 10`` is 0."""

    def make(params):
        return Adam([{"params": encoder, "lr": 1e-3 * mult}, {"params": decoder}], lr=1e-3)

    model, train, val = _vae(None)
    encoder, decoder = list(model.net.encoder.parameters()), list(model.net.decoder.parameters())
    model.make_optimizer = make
    return model, train, val


MOE_OUTLIER_ROWS = (15 * 32 + 7, 55 * 32 + 19)  # read in order: batches 15 and 55 of the 94 an epoch


def moe_outliers(scale: float | None = 1000.0):
    """A mixture of experts, Adam ``2e-3``, read in order; two rows of a second sensor logged in mV
    (x1000)."""
    x = regimes(3000, 0)[0].clone()
    if scale is not None:
        for row in MOE_OUTLIER_ROWS:
            x[row] *= scale
    return _moe(lambda p: Adam(p, lr=2e-3), x=x)


def moe_nadam(lr: float = 0.5):
    """A mixture of experts, NAdam at ``0.5`` (meant ``2e-3``), read in order."""
    return _moe(lambda p: NAdam(p, lr=lr), x=regimes(3000, 0)[0])


def points_bias_init(bias: float | None = -2.0):
    """PointNet whose first point layer's biases start at ``-2`` ("a ReLU threshold"), Adam ``1e-3``; clouds
    lie within radius ~1.3."""
    net = PointNet()
    if bias is not None:
        nn.init.constant_(net.point[0].bias, bias)
    return _points(lambda p: Adam(p, lr=1e-3), net)


JUMP_STEP = 100


def points_lr_jump(factor: float = 30.0):
    """PointNet, SGD momentum 0.9 at ``0.02``; at step 100 a fine-tuning stage multiplies the LR by ``30``
    (meant ``0.3``)."""
    return _points(lambda p: SGD(p, lr=0.02, momentum=0.9),
                   schedule=lambda o: LambdaLR(o, lambda s: 1.0 if s < JUMP_STEP else factor))  # fmt: skip


def ordinal_few_rows(rows: int = 64):
    """A wide two-hidden-layer ordinal MLP on ``64`` rows (a debug subset), Adam ``3e-3``, batch 32."""
    return _ordinal(lambda p: Adam(p, lr=3e-3), rows=rows, net=OrdinalNet(width=256, hidden=2))


def moe_momentum(momentum: float = 0.99, lr: float = 0.05):
    """A mixture of experts, SGD at ``0.05`` with momentum ``0.99`` (meant ``0.9``)."""
    return _moe(lambda p: SGD(p, lr=lr, momentum=momentum))


BAD_ROW = 40 * 32 + 5  # read in order: in batch 40 of the 44 an epoch


def vae_bad_image(scale: float | None = 65535.0):
    """A digits VAE, Adam ``1e-3``, read in order; one image was stored as 16-bit counts (0-65535)."""
    x = data.digits("train")[0].clone()
    if scale is not None:
        x[BAD_ROW] *= scale
    return _vae(lambda p: Adam(p, lr=1e-3), x=x)


def shared_sgd(lr: float = 5.0, momentum: float = 0.9):
    """The weight-shared digits net (He-initialised block, 4 applications), SGD momentum 0.9 at ``5.0``
    (meant ``0.05``)."""
    net = SharedDepthNet(depth=4)
    nn.init.kaiming_normal_(net.block.weight, nonlinearity="relu")
    return _digit_classes(net, lambda p: SGD(p, lr=lr, momentum=momentum))


def ordinal_zero_thresholds(zero: bool = True):
    """Ordinal regression with the cumulative-link NLL, its thresholds initialised to zeros (meant sorted),
    Adam ``3e-3``."""
    net = OrdinalNet()
    if zero:
        nn.init.zeros_(net.thresholds)
    return _ordinal(lambda p: Adam(p, lr=3e-3), net=net, loss="cumulative")


def moe_collapse(total: int | None = 30):
    """A mixture of experts, Adam ``3e-3`` under a cosine to 0 sized for 30 steps (meant 30 epochs)."""
    return _moe(lambda p: Adam(p, lr=3e-3),
                None if total is None else lambda o: LambdaLR(o, warmup_cosine(0, total)))  # fmt: skip


def shared_default_init(he: bool = False, lr: float = 0.01):
    """The digits net whose one block (PyTorch's default init) is applied 12 times, SGD ``0.01``, momentum
    0.9 (``he``: the block He-initialised, the fix)."""
    net = SharedDepthNet(depth=12)
    if he:
        nn.init.kaiming_normal_(net.block.weight, nonlinearity="relu")
        nn.init.zeros_(net.block.bias)
    return _digit_classes(net, lambda p: SGD(p, lr=lr, momentum=0.9))


def moe_sigmoid_gates(bias: float | None = 8.0):
    """A mixture of sigmoid-gated experts whose gate biases start at ``8`` ("every expert on at first"),
    Adam ``2e-3``."""
    net = MixtureOfExperts(sigmoid_gates=True)
    if bias is not None:
        nn.init.constant_(net.gate.bias, bias)
    return _moe(lambda p: Adam(p, lr=2e-3), net=net)


def hyper_unscaled(scaled: bool = False):
    """A hypernetwork digits classifier whose generated weights are not rescaled (std ~0.6, He's ~0.18),
    Adam ``1e-3``."""
    return _digit_classes(HyperNet(scaled=scaled), lambda p: Adam(p, lr=1e-3))


class SlowCloudDataset(Dataset):
    """Point clouds re-sampled from the mesh on every read (``cost_s`` per cloud): a loader that never
    caches."""

    def __init__(self, x: Tensor, y: Tensor, cost_s: float) -> None:
        self.x, self.y, self.cost_s = x, y, cost_s

    def __len__(self) -> int:
        return len(self.y)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        time.sleep(self.cost_s)
        return self.x[i], self.y[i]


def points_slow_reads(cost_s: float = 0.002):
    """PointNet, Adam ``1e-3``, batches of 32 clouds each re-sampled from its mesh on read (2 ms a cloud)."""
    model, train, val = _points(lambda p: Adam(p, lr=1e-3))
    x, y = train.dataset.tensors
    return model, DataLoader(SlowCloudDataset(x, y, cost_s), 32, shuffle=True, generator=_gen(0)), val


# ------------------------------------------------------------------------------------------------ healthy
def vae_kl_warmup():
    """A digits VAE, Adam ``1e-3``, the KL weight ramped 0 -> 1 over 150 steps (KL annealing)."""
    return _vae(lambda p: Adam(p, lr=1e-3), kl_weight=lambda s: min(1.0, s / 150))


def points_easy_converged():
    """PointNet on clean clouds (no jitter), Adam ``3e-3``: solved early, then idles."""
    return _points(lambda p: Adam(p, lr=3e-3), noise=0.0)


def ordinal_label_noise(redrawn: float = 0.4):
    """Ordinal regression with 40% of the levels (train and validation) redrawn at random."""
    model, train, val = _ordinal(lambda p: Adam(p, lr=3e-3))
    g = _gen(11)
    for dl in (train, val):
        y = dl.dataset.tensors[1]
        mask = torch.rand(len(y), generator=g) < redrawn
        y[mask] = torch.randint(0, 5, (int(mask.sum()),), generator=g)
    return model, train, val


def ordinal_batch4():
    """Ordinal regression in batches of 4, NAdam ``1e-3``: a noisy loss."""
    return _ordinal(lambda p: NAdam(p, lr=1e-3), batch=4)


CURRICULUM_STEP = 150


def points_curriculum():
    """PointNet read in order, Adam ``3e-3``: 150 batches of clean clouds, then 150 of heavily jittered ones
    (0.3)."""
    (ex, ey), (hx, hy) = point_clouds(4800, 0, noise=0.0), point_clouds(4800, 2, noise=0.3)
    (cx, cy), (vx, vy) = point_clouds(200, 1, noise=0.0), point_clouds(200, 3, noise=0.3)
    model = Task(PointNet(), "ce", lambda p: Adam(p, lr=3e-3))
    train = loader(torch.cat([ex, hx]), torch.cat([ey, hy]), 32, shuffle=False)
    return model, train, loader(torch.cat([cx, vx]), torch.cat([cy, vy]), 400, shuffle=False)


def vae_batch_sum():
    """A digits VAE whose negative ELBO is summed over the batch of 64 (thousands of nats), Adam ``1e-4``."""
    return _vae(lambda p: Adam(p, lr=1e-4), batch=64, batch_sum=True)


def moe_step_decay():
    """A mixture of experts, Adam ``3e-3``, the LR divided by 10 at step 150."""
    return _moe(lambda p: Adam(p, lr=3e-3), lambda o: MultiStepLR(o, [150], 0.1))


def hyper_clipped():
    """The (scaled) hypernetwork digits classifier, Adamax ``2e-3``, gradients clipped to norm ``0.05``."""
    return _digit_classes(HyperNet(), lambda p: Adamax(p, lr=2e-3))


def points_frozen_point_mlp():
    """PointNet whose per-point MLP keeps its random weights (frozen on purpose); the head trains."""
    net = PointNet()
    net.point.requires_grad_(False)
    return _points(lambda p: Adam(p, lr=3e-3), net)


def moe_cyclic():
    """A mixture of experts, Adam under a triangular CyclicLR between ``1e-4`` and ``4e-3``."""
    return _moe(lambda p: Adam(p, lr=4e-3),
                lambda o: CyclicLR(o, 1e-4, 4e-3, step_size_up=40, cycle_momentum=False))  # fmt: skip


def ordinal_offset():
    """Ordinal regression whose loss carries a constant ``log(5!) ~ 4.79`` (a normalising term)."""
    return _ordinal(lambda p: Adam(p, lr=3e-3), offset=math.log(120))


def shared_momentum_099():
    """The He-initialised weight-shared digits net (4 applications), SGD ``2e-3`` with momentum ``0.99``:
    a stable but oscillating loss."""
    return shared_sgd(lr=2e-3, momentum=0.99)


def ordinal_moderate_decay():
    """Ordinal regression, AdamW ``1e-2`` with weight decay ``0.05`` on the weight matrices."""
    return ordinal_weight_decay(0.05)
