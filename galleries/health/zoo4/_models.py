"""Zoo 4's networks and task variants (plain torch and Lightning). The shared trainer is the first zoo's
:class:`Task`; the variants here change only its loss."""

from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import MLP, Task

__all__ = ["GCN", "MLP", "DeepSets", "MultiLabelTask", "QuantileTask", "Recommender", "SepConvNet", "Task"]
__all__ += ["SumMSETask", "TinyUNet"]


class Recommender(nn.Module):
    """Matrix factorisation: ``u . v + b_u + b_i + mean`` on ``(user, item)`` pairs (``x``: ``(N, 2)`` long);
    ``rounded``: the prediction snapped to the rating grid in the forward pass ("to match the stars")."""

    def __init__(self, users: int, items: int, mean: float, rank: int = 8, rounded: bool = False) -> None:
        super().__init__()
        self.user, self.item = nn.Embedding(users, rank), nn.Embedding(items, rank)
        self.user_bias, self.item_bias = nn.Embedding(users, 1), nn.Embedding(items, 1)
        self.mean, self.rounded = nn.Parameter(torch.tensor(mean)), rounded
        with torch.no_grad():
            for table in (self.user, self.item):
                table.weight.normal_(0.0, 0.1)
            for table in (self.user_bias, self.item_bias):
                table.weight.zero_()

    def forward(self, x: Tensor) -> Tensor:
        u, i = x[:, 0], x[:, 1]
        out = (self.user(u) * self.item(i)).sum(1, keepdim=True) + self.user_bias(u) + self.item_bias(i)
        out = out + self.mean
        return out.round() if self.rounded else out


class DeepSets(nn.Module):
    """Zaheer et al.: ``rho(pool_i phi(x_i))`` over sets ``(N, S, D)``; ``pool``: ``"mean"`` or ``"sum"``;
    ``act``: the nonlinearity of both MLPs."""

    def __init__(self, inputs: int, outputs: int, width: int = 64, pool: str = "mean",
                 act: type[nn.Module] = nn.ReLU) -> None:  # fmt: skip
        super().__init__()
        self.phi = nn.Sequential(MLP([inputs, width, width], act=act), act())
        self.rho = MLP([width, width, outputs], act=act)
        self.pool = pool

    def forward(self, x: Tensor) -> Tensor:
        h = self.phi(x)
        return self.rho(h.sum(1) if self.pool == "sum" else h.mean(1))


class SepConvNet(nn.Module):
    """A digits classifier of depthwise-separable blocks (3x3 depthwise, 1x1 pointwise, GroupNorm, ReLU), a
    global average pool and a linear head."""

    def __init__(self, channels: int = 32) -> None:
        super().__init__()

        def block(a: int, b: int, stride: int) -> list[nn.Module]:
            return [
                nn.Conv2d(a, a, 3, stride, 1, groups=a),
                nn.Conv2d(a, b, 1),
                nn.GroupNorm(4, b),
                nn.ReLU(),
            ]

        self.stem = nn.Sequential(nn.Conv2d(1, channels, 3, padding=1), nn.GroupNorm(4, channels), nn.ReLU())
        self.blocks = nn.Sequential(*block(channels, channels, 1), *block(channels, 2 * channels, 2))
        self.head = nn.Linear(2 * channels, 10)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.blocks(self.stem(x)).mean((2, 3)))


class TinyUNet(nn.Module):
    """An image-to-image denoiser for 8x8 digits: a conv, a stride-2 conv down, a transposed conv up, the
    skip concatenated, a 1x1 conv out."""

    def __init__(self, channels: int = 16) -> None:
        super().__init__()
        self.inc = nn.Sequential(nn.Conv2d(1, channels, 3, padding=1), nn.ReLU())
        self.down = nn.Sequential(nn.Conv2d(channels, 2 * channels, 3, 2, 1), nn.ReLU())
        self.up = nn.ConvTranspose2d(2 * channels, channels, 2, 2)
        self.out = nn.Sequential(nn.Conv2d(2 * channels, channels, 3, padding=1), nn.ReLU(),
                                 nn.Conv2d(channels, 1, 1))  # fmt: skip

    def forward(self, x: Tensor) -> Tensor:
        skip = self.inc(x)
        return self.out(torch.cat([skip, self.up(self.down(skip))], 1))


class GCN(nn.Module):
    """Kipf & Welling's graph network for node classification over a fixed graph: the node features and the
    propagation matrix are buffers, ``x`` holds node indices; ``layers`` propagations ``relu(P h W)``.
    ``normalise``: ``P = D^-1/2 (A + I) D^-1/2``, else the raw ``A + I``. ``frozen``: the propagation layers
    keep their random weights (only the head trains)."""

    def __init__(self, features: Tensor, adjacency: Tensor, classes: int, width: int = 32, layers: int = 3,
                 normalise: bool = True, frozen: bool = False) -> None:  # fmt: skip
        super().__init__()
        a = adjacency + torch.eye(len(adjacency))
        if normalise:
            d = a.sum(1).rsqrt()
            a = d[:, None] * a * d[None, :]
        self.register_buffer("features", features)
        self.register_buffer("propagation", a)
        widths = [features.shape[1]] + [width] * layers
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(widths))
        self.layers.requires_grad_(not frozen)
        self.head = nn.Linear(width, classes)

    def forward(self, nodes: Tensor) -> Tensor:
        h = self.features
        for layer in self.layers:
            h = F.relu(self.propagation @ layer(h))
        return self.head(h[nodes])


class MultiLabelTask(Task):
    """Multi-label classification with ``BCEWithLogits``; ``batch_pos_weight``: each label's positives
    re-weighted by the batch's ``negatives / positives`` (a hand-written class balance)."""

    def __init__(self, net: nn.Module, make_optimizer: Any, batch_pos_weight: bool = False,
                 make_schedule: Any = None) -> None:  # fmt: skip
        super().__init__(net, "bce", make_optimizer, make_schedule)
        self.batch_pos_weight = batch_pos_weight

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        logits = self.net(x)
        weight = (1 - y).sum(0) / y.sum(0) if self.batch_pos_weight and self.training else None
        loss = F.binary_cross_entropy_with_logits(logits, y, pos_weight=weight)
        return loss, ((logits > 0).float() == y).float().mean()


class QuantileTask(Task):
    """Quantile regression: the pinball loss of level ``tau`` (plus a constant ``offset``, as a loss that
    carries a fixed normalising term)."""

    def __init__(self, net: nn.Module, make_optimizer: Any, tau: float = 0.9, make_schedule: Any = None,
                 offset: float = 0.0) -> None:  # fmt: skip
        super().__init__(net, "pinball", make_optimizer, make_schedule)
        self.tau, self.offset = tau, offset

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        error = y - self.net(x)
        return torch.maximum(self.tau * error, (self.tau - 1) * error).mean() + self.offset, None


class SumMSETask(Task):
    """Regression with the squared error summed over the batch (``reduction="sum"``): a large loss scale."""

    def __init__(self, net: nn.Module, make_optimizer: Any) -> None:
        super().__init__(net, "mse_sum", make_optimizer)

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        return F.mse_loss(self.net(x), y, reduction="sum"), None
