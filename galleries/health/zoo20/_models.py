"""Zoo 20's networks and tasks (plain torch and Lightning): a RealNVP-style flow of affine couplings
trained by negative log-likelihood, a prototypical network scored on few-shot episodes, a gridworld
behaviour-cloning policy, a domain-adversarial (DANN) classifier with a gradient-reversal domain head, a
heatmap keypoint CNN and a tabular MLP with a categorical embedding.

Every task trains with ``make_optimizer(module)`` (the module, so a builder can pick its parameter groups)
and an optional ``make_schedule(optimizer)`` stepped every optimizer step (or every epoch with
``interval="epoch"``); every task logs ``val_loss`` when it validates.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "DANN",
    "MLP",
    "BehaviourCloning",
    "CouplingFlow",
    "FlowTask",
    "HeatmapCNN",
    "KeypointTask",
    "ProtoNet",
    "ProtoTask",
    "TabularNet",
    "TabularTask",
    "Task",
]

MakeOptimizer = Callable[[nn.Module], torch.optim.Optimizer]
MakeSchedule = Callable[[torch.optim.Optimizer], Any] | None


class MLP(nn.Sequential):
    """``Linear`` layers of ``widths`` with ``activation`` between them (none after the last)."""

    def __init__(self, widths: list[int], activation: type[nn.Module] = nn.ReLU) -> None:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2:
                layers.append(activation())
        super().__init__(*layers)


class Task(pl.LightningModule):
    """A Lightning task: ``loss_of(batch)`` is its loss, trained and validated (``val_loss``) as is."""

    def __init__(self, net: nn.Module, make_optimizer: MakeOptimizer, make_schedule: MakeSchedule = None,
                 interval: str = "step") -> None:  # fmt: skip
        super().__init__()
        self.net = net
        self.make_optimizer, self.make_schedule, self.interval = make_optimizer, make_schedule, interval

    def loss_of(self, batch: Any) -> Tensor:
        raise NotImplementedError

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.loss_of(batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss_of(batch), batch_size=len(batch[-1]))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self)
        if self.make_schedule is None:
            return optimizer
        schedule = self.make_schedule(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": self.interval}}


# ------------------------------------------------------------------------------------------------ flow
class AffineCoupling(nn.Module):
    """``y = x`` on the masked coordinates, ``y = x * exp(s) + t`` on the others, with ``s, t`` computed
    from the masked ones (``s`` bounded by ``scale * tanh``); returns ``(y, log|det J|)``."""

    def __init__(self, mask: Tensor, width: int = 64, scale: float = 2.0) -> None:
        super().__init__()
        dim = len(mask)
        self.register_buffer("mask", mask)
        self.net = MLP([dim, width, width, 2 * dim])
        self.scale = scale
        nn.init.zeros_(self.net[-1].weight)
        nn.init.zeros_(self.net[-1].bias)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        s, t = self.net(x * self.mask).chunk(2, dim=1)
        s = self.scale * torch.tanh(s) * (1 - self.mask)
        t = t * (1 - self.mask)
        return x * torch.exp(s) + t, s.sum(1)


class CouplingFlow(nn.Module):
    """A RealNVP-style flow of ``couplings`` affine couplings with alternating masks onto a standard normal:
    ``forward(x)`` returns the log-density of every row in nats."""

    def __init__(self, dim: int = 2, couplings: int = 6, width: int = 64) -> None:
        super().__init__()
        masks = [(torch.arange(dim) + i) % 2 for i in range(couplings)]
        self.couplings = nn.ModuleList(AffineCoupling(m.float(), width) for m in masks)

    def forward(self, x: Tensor) -> Tensor:
        logdet = torch.zeros(len(x), dtype=x.dtype)
        for coupling in self.couplings:
            x, ld = coupling(x)
            logdet = logdet + ld
        base = -0.5 * (x.pow(2) + math.log(2 * math.pi)).sum(1)
        return base + logdet


class FlowTask(Task):
    """The flow's negative log-likelihood in nats per row, averaged over the batch."""

    def loss_of(self, batch: Any) -> Tensor:
        (x,) = batch
        return -self.net(x).mean()


# ------------------------------------------------------------------------------------------------ few-shot
class ProtoNet(nn.Sequential):
    """A small CNN embedding of 8x8 images (two conv-ReLU-pool stages, 256 features)."""

    def __init__(self, width: int = 32) -> None:
        super().__init__(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        )  # fmt: skip


class ProtoTask(Task):
    """Prototypical networks (Snell et al., 2017): an episode ``(support, query, query labels)`` with
    ``support`` of shape ``(ways, shots, ...)``; each class's prototype is its support embeddings' mean, a
    query's logits are minus its squared distances to the prototypes; the loss is their cross-entropy."""

    def loss_of(self, batch: Any) -> Tensor:
        support, query, labels = batch
        ways, shots = support.shape[:2]
        prototypes = self.net(support.flatten(0, 1)).view(ways, shots, -1).mean(1)
        logits = -torch.cdist(self.net(query), prototypes).pow(2)
        return F.cross_entropy(logits, labels)


# ------------------------------------------------------------------------------------------------ gridworld
class BehaviourCloning(Task):
    """A policy trained on an expert's (state, action) pairs: the cross-entropy of the expert's action."""

    def loss_of(self, batch: Any) -> Tensor:
        states, actions = batch
        return F.cross_entropy(self.net(states), actions)


# ------------------------------------------------------------------------------------------------ DANN
class _ReverseGradient(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, x: Tensor, weight: float) -> Tensor:
        ctx.weight = weight
        return x.view_as(x)

    @staticmethod
    def backward(ctx: Any, grad: Tensor) -> tuple[Tensor, None]:
        return -ctx.weight * grad, None


class DANN(Task):
    """Domain-adversarial training (Ganin & Lempitsky, 2015): a feature extractor ``net`` shared by a label
    head (trained on labelled source rows) and a domain head behind a gradient-reversal layer (trained to
    tell source from unlabelled target rows, its gradient reversed into the features, weight
    ``reversal``). A training batch is ``(source x, source y, target x)``; validation is the label
    cross-entropy on labelled target rows ``(x, y)``."""

    def __init__(self, net: nn.Module, features: int, classes: int, make_optimizer: MakeOptimizer,
                 reversal: float = 0.3, make_schedule: MakeSchedule = None) -> None:  # fmt: skip
        super().__init__(net, make_optimizer, make_schedule)
        self.label_head = nn.Linear(features, classes)
        self.domain_head = MLP([features, 32, 1])
        self.reversal = reversal

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        xs, ys, xt = batch
        fs, ft = self.net(xs), self.net(xt)
        label_loss = F.cross_entropy(self.label_head(fs), ys)
        domains = torch.cat([torch.zeros(len(xs)), torch.ones(len(xt))])
        reversed_features = _ReverseGradient.apply(torch.cat([fs, ft]), self.reversal)
        domain_logits = self.domain_head(reversed_features).squeeze(1)
        domain_loss = F.binary_cross_entropy_with_logits(domain_logits, domains)
        return label_loss + domain_loss

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        return F.cross_entropy(self.label_head(self.net(x)), y)


# ------------------------------------------------------------------------------------------------ keypoints
class HeatmapCNN(nn.Sequential):
    """A fully convolutional heatmap regressor at the input's resolution: ``depth`` 3x3 conv-ReLU layers
    (dilations 1, 2, 4, 1, ... for a receptive field over the whole 16x16 image) and a 1x1 conv head."""

    def __init__(self, width: int = 16, depth: int = 4) -> None:
        layers: list[nn.Module] = []
        channels = 1
        for i in range(depth):
            dilation = (1, 2, 4, 1)[i % 4]
            layers += [nn.Conv2d(channels, width, 3, padding=dilation, dilation=dilation), nn.ReLU()]
            channels = width
        layers.append(nn.Conv2d(width, 1, 1))
        super().__init__(*layers)


class KeypointTask(Task):
    """Heatmap regression: the mean squared error between the predicted and the target heatmaps (a
    Gaussian bump at the keypoint), times ``scale``."""

    def __init__(self, net: nn.Module, make_optimizer: MakeOptimizer, make_schedule: MakeSchedule = None,
                 scale: float = 1.0) -> None:  # fmt: skip
        super().__init__(net, make_optimizer, make_schedule)
        self.scale = scale

    def loss_of(self, batch: Any) -> Tensor:
        images, heatmaps = batch
        return self.scale * F.mse_loss(self.net(images), heatmaps)


# ------------------------------------------------------------------------------------------------ tabular
class TabularNet(nn.Module):
    """Numeric columns and one categorical column (an embedding), concatenated into an MLP."""

    def __init__(self, numeric: int, categories: int, widths: list[int], classes: int,
                 embedding: int = 4) -> None:  # fmt: skip
        super().__init__()
        self.embed = nn.Embedding(categories, embedding)
        self.body = MLP([numeric + embedding, *widths, classes])

    def forward(self, numeric: Tensor, category: Tensor) -> Tensor:
        return self.body(torch.cat([numeric, self.embed(category)], dim=1))


class TabularTask(Task):
    """Tabular classification: a batch ``(numeric, category, label)``, the cross-entropy of the label."""

    def loss_of(self, batch: Any) -> Tensor:
        numeric, category, label = batch
        return F.cross_entropy(self.net(numeric, category), label)
