"""Zoo 25's networks and trainers (plain torch and Lightning): a point-set orientation MLP, a masked deep
set for jets, a graph-convolution forecaster of road speeds, an n-gram classifier, a small edge-detection CNN
and a portfolio network trained on a Sharpe-ratio loss. :class:`Task` trains any of them with automatic
optimisation, :class:`TwoOptimizerTask` with manual optimisation and two optimizers."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "MLP",
    "EdgeCNN",
    "JetDeepSet",
    "PortfolioNet",
    "RoadGCN",
    "Task",
    "TwoOptimizerTask",
    "sharpe_loss",
]

MakeOptimizer = Callable[[Any], torch.optim.Optimizer]


class MLP(nn.Sequential):
    """``Linear`` + ReLU layers of the given widths, a linear last layer (``net[0]``, ``net[2]``, ... are the
    linear layers)."""

    def __init__(self, widths: list[int]) -> None:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2:
                layers.append(nn.ReLU())
        super().__init__(*layers)


class JetDeepSet(nn.Module):
    """A deep set over a jet's padded constituents: ``phi`` embeds each constituent, a masked mean pools the
    real ones, ``rho`` classifies the jet. ``detach_pooled``: the pooled embedding is cut from the graph (a
    ``.detach()`` left in from caching the embeddings), so ``phi`` never gets a gradient."""

    def __init__(self, features: int = 4, width: int = 32, classes: int = 2, detach_pooled: bool = False):
        super().__init__()
        self.phi = MLP([features, width, width, width])
        self.rho = nn.Linear(width, classes)
        self.detach_pooled = detach_pooled

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        h = torch.relu(self.phi(x)) * mask.unsqueeze(-1)
        pooled = h.sum(1) / mask.sum(1, keepdim=True).clamp_min(1)
        if self.detach_pooled:
            pooled = pooled.detach()
        return self.rho(pooled)


class RoadGCN(nn.Module):
    """Two graph convolutions ``relu(A X W)`` over the road graph's normalised adjacency ``A`` (a buffer) and
    a per-sensor linear readout: ``(B, sensors, lags)`` -> ``(B, sensors)``, the next reading of each."""

    def __init__(self, adjacency: Tensor, lags: int = 12, width: int = 32) -> None:
        super().__init__()
        self.register_buffer("adjacency", adjacency)
        self.body = nn.ModuleList([nn.Linear(lags, width), nn.Linear(width, width)])
        self.head = nn.Linear(width + lags, 1)

    def forward(self, x: Tensor) -> Tensor:
        h = x
        for layer in self.body:
            h = torch.relu(self.adjacency @ layer(h))
        return self.head(torch.cat([h, x], -1)).squeeze(-1)


class EdgeCNN(nn.Sequential):
    """Per-pixel edge logits: three 3x3 ReLU convolutions and a 1x1 readout."""

    def __init__(self, width: int = 16) -> None:
        super().__init__(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, width, 3, padding=1),
                         nn.ReLU(), nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                         nn.Conv2d(width, 1, 1))  # fmt: skip


class PortfolioNet(nn.Module):
    """Long-only portfolio weights from the assets' recent returns: an MLP's logits, a softmax over assets."""

    def __init__(self, assets: int = 8, lags: int = 10, width: int = 64) -> None:
        super().__init__()
        self.net = MLP([assets * lags, width, width, assets])

    def forward(self, x: Tensor) -> Tensor:
        return torch.softmax(self.net(x.flatten(1)), -1)


def sharpe_loss(weights: Tensor, returns: Tensor, risk_free: Tensor | float = 0.0) -> Tensor:
    """Minus the annualised Sharpe ratio of the portfolio ``weights`` held over the batch's days: the mean
    excess return over its standard deviation (no epsilon: the portfolio is never riskless), times
    ``sqrt(252)``."""
    excess = (weights * returns).sum(-1) - risk_free
    return -(excess.mean() / excess.std()) * 252**0.5


class Task(pl.LightningModule):
    """Trains ``net`` on ``loss(net, batch)`` with ``make_optimizer(parameters)`` and, optionally, the
    scheduler ``make_schedule(optimizer)`` stepped every step (``schedule_config``: more keys of Lightning's
    ``lr_scheduler`` dict, e.g. ``interval`` or ``frequency``); logs ``val_loss`` (the same loss, on the
    validation batches)."""

    def __init__(
        self,
        net: nn.Module,
        loss: Callable[[nn.Module, Any], Tensor],
        make_optimizer: MakeOptimizer,
        make_schedule: Callable[[torch.optim.Optimizer], Any] | None = None,
        schedule_config: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.net = net
        self.loss = loss
        self.make_optimizer = make_optimizer
        self.make_schedule = make_schedule
        self.schedule_config = schedule_config or {}

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.loss(self.net, batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss(self.net, batch), batch_size=len(batch[0]))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.parameters())
        if self.make_schedule is None:
            return optimizer
        config = {"scheduler": self.make_schedule(optimizer), "interval": "step", **self.schedule_config}
        return {"optimizer": optimizer, "lr_scheduler": config}


class TwoOptimizerTask(Task):
    """Manual optimisation with two optimizers: ``make_optimizer(net)`` returns ``(body, head)`` optimizers;
    each batch is one backward and one step of each (two optimizer steps a batch)."""

    def __init__(self, net: nn.Module, loss: Callable[[nn.Module, Any], Tensor], make_optimizer: Any) -> None:
        super().__init__(net, loss, make_optimizer)
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        body, head = self.optimizers()
        loss = self.loss(self.net, batch)
        body.zero_grad()
        head.zero_grad()
        self.manual_backward(loss)
        body.step()
        head.step()
        return loss.detach()

    def configure_optimizers(self) -> Any:
        return list(self.make_optimizer(self.net))


def cross_entropy(net: nn.Module, batch: Any) -> Tensor:
    x, y = batch
    return F.cross_entropy(net(x), y)


def mse(net: nn.Module, batch: Any) -> Tensor:
    x, y = batch
    return F.mse_loss(net(x), y)
