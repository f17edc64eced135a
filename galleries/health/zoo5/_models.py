"""Zoo 5's networks and task variants (plain torch and Lightning): a PointNet, a VAE, a mixture of experts,
an ordinal-regression head, a weight-shared deep net, a hypernetwork. The trainer is the first zoo's
:class:`Task`; the variants here change only its loss."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import MLP, Task

__all__ = ["MLP", "VAE", "HyperNet", "MixtureOfExperts", "OrdinalNet", "OrdinalTask", "PointNet", "Task"]
__all__ += ["SharedDepthNet", "VAETask"]


class PointNet(nn.Module):
    """Qi et al.: a per-point MLP on ``(N, P, 3)`` clouds, a max over the points, a classifier head.
    ``pool_batch``: the max runs over dims ``(0, 1)`` (the batch too) and the one feature is broadcast back to
    every cloud."""

    def __init__(self, classes: int = 4, width: int = 64, pool_batch: bool = False) -> None:
        super().__init__()
        self.point = nn.Sequential(nn.Linear(3, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.head = MLP([width, width, classes])
        self.pool_batch = pool_batch

    def forward(self, x: Tensor) -> Tensor:
        h = self.point(x)
        return self.head(h.amax((0, 1)).expand(len(x), -1) if self.pool_batch else h.amax(1))


class VAE(nn.Module):
    """A variational autoencoder of 64-pixel digits: an MLP encoder to ``(mu, logvar)`` of ``latent`` units, a
    reparameterised sample (the mean in eval), an MLP decoder to pixel logits."""

    def __init__(self, latent: int = 8, width: int = 128) -> None:
        super().__init__()
        self.encoder = MLP([64, width, 2 * latent])
        self.decoder = MLP([latent, width, 64])

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        mu, logvar = self.encoder(x).chunk(2, 1)
        z = mu + (0.5 * logvar).exp() * torch.randn_like(mu) if self.training else mu
        return self.decoder(z), mu, logvar


class VAETask(Task):
    """The VAE's negative ELBO: pixel BCE summed over the image plus ``kl_weight(step)`` times the KL,
    averaged over the batch (``batch_sum``: summed)."""

    def __init__(self, net: VAE, make_optimizer: Any, make_schedule: Any = None, kl_weight: Any = None,
                 batch_sum: bool = False) -> None:  # fmt: skip
        super().__init__(net, "elbo", make_optimizer, make_schedule)
        self.kl_weight, self.batch_sum = kl_weight, batch_sum

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, _ = batch
        logits, mu, logvar = self.net(x)
        recon = F.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(1)
        kl = 0.5 * (mu**2 + logvar.exp() - 1 - logvar).sum(1)
        beta = 1.0 if self.kl_weight is None or not self.training else self.kl_weight(self.global_step)
        each = recon + beta * kl
        return (each.sum() if self.batch_sum else each.mean()), None


class MixtureOfExperts(nn.Module):
    """A gate over ``experts`` small MLPs: ``sum_i g_i(x) e_i(x)``; ``sigmoid_gates``: independent sigmoid
    gates (normalised by their sum) instead of a softmax."""

    def __init__(
        self, inputs: int = 4, experts: int = 4, width: int = 32, sigmoid_gates: bool = False
    ) -> None:
        super().__init__()
        self.gate = nn.Linear(inputs, experts)
        self.experts = nn.ModuleList(MLP([inputs, width, 1]) for _ in range(experts))
        self.sigmoid_gates = sigmoid_gates

    def forward(self, x: Tensor) -> Tensor:
        logits = self.gate(x)
        if self.sigmoid_gates:
            g = torch.sigmoid(logits)
            g = g / g.sum(1, keepdim=True)
        else:
            g = logits.softmax(1)
        return (g.unsqueeze(2) * torch.stack([e(x) for e in self.experts], 1)).sum(1)


class OrdinalNet(nn.Module):
    """An MLP to one score ``f`` and ``levels - 1`` learnt thresholds ``b`` (sorted at init)."""

    def __init__(self, inputs: int = 8, levels: int = 5, width: int = 64, hidden: int = 1) -> None:
        super().__init__()
        self.body = MLP([inputs] + [width] * hidden + [1])
        self.thresholds = nn.Parameter(torch.linspace(-1.5, 1.5, levels - 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.body(x)


class OrdinalTask(Task):
    """Ordinal regression. ``"coral"``: BCE of ``f - b_k`` against ``y > k``, averaged over the thresholds;
    ``"cumulative"``: the cumulative-link NLL ``-log(sigmoid(b_y - f) - sigmoid(b_{y-1} - f))``. ``offset``:
    a constant added (a fixed normalising term)."""

    def __init__(self, net: OrdinalNet, make_optimizer: Any, loss: str = "coral", make_schedule: Any = None,
                 offset: float = 0.0) -> None:  # fmt: skip
        super().__init__(net, loss, make_optimizer, make_schedule)
        self.offset = offset

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        f, b = self.net(x), self.net.thresholds
        if self.loss_kind == "coral":
            above = (y.unsqueeze(1) > torch.arange(len(b))).float()
            return F.binary_cross_entropy_with_logits(f - b, above) + self.offset, None
        edges = torch.cat([b.new_full((1,), -math.inf), b, b.new_full((1,), math.inf)])
        cdf = torch.sigmoid(edges - f)  # (N, levels + 1)
        p = cdf.gather(1, (y + 1).unsqueeze(1)) - cdf.gather(1, y.unsqueeze(1))
        return -p.log().mean() + self.offset, None


class SharedDepthNet(nn.Module):
    """A digits classifier whose one hidden block (``Linear`` + ReLU, optional pre-LayerNorm and residual) is
    applied ``depth`` times (weights shared across depth, as ALBERT or a universal transformer)."""

    def __init__(self, depth: int = 12, width: int = 64, norm: bool = False, residual: bool = False) -> None:
        super().__init__()
        self.stem, self.block, self.head = nn.Linear(64, width), nn.Linear(width, width), nn.Linear(width, 10)
        self.norm = nn.LayerNorm(width) if norm else nn.Identity()
        self.depth, self.residual = depth, residual

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.stem(x))
        for _ in range(self.depth):
            out = F.relu(self.block(self.norm(h)))
            h = h + out if self.residual else out
        return self.head(h)


class HyperNet(nn.Module):
    """A digits classifier whose ``layers`` hidden ``width x width`` weights are generated by a linear
    hypernetwork from learnt layer embeddings; ``scaled``: the generated weights (std ~0.6 at init) times
    ``sqrt(6 / width)``, to He's std."""

    def __init__(self, layers: int = 6, width: int = 64, embedding: int = 8, scaled: bool = True) -> None:
        super().__init__()
        self.stem, self.head = nn.Linear(64, width), nn.Linear(width, 10)
        self.embeddings = nn.Parameter(torch.randn(layers, embedding))
        self.hyper = nn.Linear(embedding, width * width)
        self.width, self.scale = width, (math.sqrt(6 / width) if scaled else 1.0)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.stem(x))
        weights = self.hyper(self.embeddings).view(-1, self.width, self.width) * self.scale
        for w in weights:
            h = F.relu(h @ w)
        return self.head(h)
