"""Zoo 11's networks and task variants (plain torch and Lightning): an Euler-stepped neural-ODE regressor, a
FiLM-conditioned multi-task regressor, a contrastive (InfoNCE) digits encoder. The trainer is the first zoo's
:class:`Task`; the variants here change only its loss or add a user's hook."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import MLP, Task

__all__ = ["MLP", "ContrastiveTask", "EulerStepper", "FiLMNet", "HandDecayTask", "OffsetTask", "Task"]


class EulerStepper(nn.Module):
    """A neural-ODE-like regressor: an encoder to a state ``h``, ``steps`` explicit Euler steps
    ``h <- h + dt * f(h)`` of a learnt tanh vector field ``f``, a linear readout."""

    def __init__(self, inputs: int = 4, outputs: int = 2, width: int = 32, steps: int = 8) -> None:
        super().__init__()
        self.encoder = nn.Linear(inputs, width)
        self.field = MLP([width, width, width], act=nn.Tanh)
        self.readout = nn.Linear(width, outputs)
        self.steps, self.dt = steps, 1.0 / steps

    def forward(self, x: Tensor) -> Tensor:
        h = torch.tanh(self.encoder(x))
        for _ in range(self.steps):
            h = h + self.dt * self.field(h)
        return self.readout(h)


class FiLMNet(nn.Module):
    """A multi-task regressor: the last ``tasks`` input columns are a task's one-hot code, which a FiLM
    generator turns into a per-unit scale and shift ``(gamma, beta)`` of the trunk's hidden layer."""

    def __init__(self, features: int = 6, tasks: int = 4, width: int = 64) -> None:
        super().__init__()
        self.features = features
        self.trunk = nn.Linear(features, width)
        self.film = nn.Linear(tasks, 2 * width)
        self.head = MLP([width, width, 1])

    def forward(self, x: Tensor) -> Tensor:
        gamma, beta = self.film(x[:, self.features :]).chunk(2, 1)
        return self.head(F.relu((1 + gamma) * self.trunk(x[:, : self.features]) + beta))


class ContrastiveTask(Task):
    """SimCLR-like contrastive learning on pairs ``(a, b)`` of digits: each is augmented (pixel noise and a
    random mask of a quarter of the pixels), encoded and L2-normalised; the loss is InfoNCE, the
    cross-entropy of ``a``'s similarities to every ``b`` of the batch at ``temperature``, the positive
    being its own pair (``ln batch`` when nothing is learnt). Validation augments with a fixed seed."""

    def __init__(self, net: nn.Module, make_optimizer: Any, make_schedule: Any = None,
                 temperature: float = 0.2) -> None:  # fmt: skip
        super().__init__(net, "infonce", make_optimizer, make_schedule)
        self.temperature = temperature

    @staticmethod
    def augment(x: Tensor, generator: torch.Generator | None = None) -> Tensor:
        noise = torch.randn(x.shape, generator=generator)
        keep = (torch.rand(x.shape, generator=generator) > 0.25).float()
        return (x + 0.1 * noise) * keep

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        a, b = batch
        g = None if self.training else torch.Generator().manual_seed(7)
        za = F.normalize(self.net(self.augment(a, g)), dim=1)
        zb = F.normalize(self.net(self.augment(b, g)), dim=1)
        logits = za @ zb.T / self.temperature
        return F.cross_entropy(logits, torch.arange(len(a))), None


class HandDecayTask(Task):
    """A classifier with decoupled weight decay written by hand before each optimizer step:
    ``p *= factor(lr, wd)`` on every parameter (``1 - lr * wd``, the AdamW rule, when written right)."""

    def __init__(self, net: nn.Module, make_optimizer: Any, weight_decay: float, factor: Any) -> None:
        super().__init__(net, "ce", make_optimizer)
        self.weight_decay, self.factor = weight_decay, factor

    def on_before_optimizer_step(self, optimizer: Any) -> None:
        with torch.no_grad():
            for group in optimizer.param_groups:
                for p in group["params"]:
                    p.mul_(self.factor(group["lr"], self.weight_decay))


class OffsetTask(Task):
    """A regression whose loss carries a constant ``offset`` (a fixed term of a likelihood)."""

    def __init__(self, net: nn.Module, make_optimizer: Any, offset: float) -> None:
        super().__init__(net, "mse", make_optimizer)
        self.offset = offset

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        loss, _ = super().loss_of(batch, smoothing)
        return loss + self.offset, None
