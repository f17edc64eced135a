"""Zoo 8's networks and tasks (plain torch and Lightning): an attention-based multiple-instance learner
(Ilse et al. 2018) on bags of digits and a mixture density network (Bishop 1994). The trainer is the first
zoo's :class:`Task`; the variants here change its loss and how a schedule is stepped."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import MLP, Task

__all__ = ["MDN", "MLP", "MDNTask", "MILNet", "MILTask", "Task"]


class MILNet(nn.Module):
    """Attention-based multiple-instance learning: an instance encoder on each ``(B, I, 64)`` bag's images, a
    softmax attention over the instances (``w^T tanh(V h)``), the attention-weighted mean, one bag logit.
    ``act``: the encoder's activation (a module class)."""

    def __init__(self, width: int = 64, embed: int = 32, attend: int = 32, act: type[nn.Module] = nn.ReLU):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, width), act(), nn.Linear(width, embed), act())
        self.attention = nn.Sequential(nn.Linear(embed, attend), nn.Tanh(), nn.Linear(attend, 1))
        self.classifier = nn.Linear(embed, 1)

    def forward(self, bags: Tensor) -> Tensor:
        h = self.encoder(bags)  # (B, I, embed)
        a = self.attention(h).softmax(1)  # (B, I, 1)
        return self.classifier((a * h).sum(1)).squeeze(1)


class MILTask(Task):
    """A bag classifier: BCE of the bag logit against the bag label (float)."""

    def __init__(self, net: nn.Module, make_optimizer: Any, make_schedule: Any = None, **kw: Any) -> None:
        super().__init__(net, "bce", make_optimizer, make_schedule)
        self.schedule_settings = kw
        self.summed = False  # training's BCE summed over the bags of a batch (else averaged)

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        bags, y = batch
        logits = self.net(bags)
        reduction = "sum" if self.summed and self.training else "mean"
        loss = F.binary_cross_entropy_with_logits(logits, y, reduction=reduction)
        return loss, ((logits > 0).float() == y).float().mean()

    def configure_optimizers(self) -> Any:
        config = super().configure_optimizers()
        if isinstance(config, dict):
            config["lr_scheduler"].update(self.schedule_settings)
        return config


class MDN(nn.Module):
    """A mixture density network: a ReLU MLP on ``x`` to ``components`` mixture logits, means and scales
    ``softplus(s) + 1e-3`` of a Gaussian mixture over ``y``."""

    def __init__(self, inputs: int = 1, components: int = 5, width: int = 64) -> None:
        super().__init__()
        self.body = MLP([inputs, width, width])
        self.act = nn.ReLU()
        self.head = nn.Linear(width, 3 * components)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        logits, mu, s = self.head(self.act(self.body(x))).chunk(3, 1)
        return logits.log_softmax(1), mu, F.softplus(s) + 1e-3


def mixture_nll(log_pi: Tensor, mu: Tensor, sigma: Tensor, y: Tensor) -> Tensor:
    """The mean negative log-likelihood of ``y`` (N, 1) under each row's Gaussian mixture."""
    log_prob = -0.5 * ((y - mu) / sigma) ** 2 - sigma.log() - 0.5 * math.log(2 * math.pi)
    return -torch.logsumexp(log_pi + log_prob, 1).mean()


class MDNTask(Task):
    """The MDN's negative log-likelihood (may be negative: a density, not a probability); logs ``train_loss``
    per step (for a schedule that monitors it). ``schedule_settings``: more of the Lightning scheduler
    config (e.g. ``monitor``)."""

    def __init__(self, net: MDN, make_optimizer: Any, make_schedule: Any = None, **kw: Any) -> None:
        super().__init__(net, "mdn", make_optimizer, make_schedule)
        self.schedule_settings = kw

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        return mixture_nll(*self.net(x), y), None

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        loss, _ = self.loss_of(batch, 0.0)
        self.log("train_loss", loss, on_step=True, on_epoch=False)
        return loss

    def configure_optimizers(self) -> Any:
        config = super().configure_optimizers()
        if isinstance(config, dict):
            config["lr_scheduler"].update(self.schedule_settings)
        return config
