"""Zoo 27's networks and trainers (plain torch and Lightning): a window MLP tagging secondary structure, a
pairwise scorer associating detections between two frames, an order-invariant reaction-yield network, a small
grasp CNN and a circular-convolution heat-equation surrogate. :class:`Task` trains any of them with automatic
optimisation, :class:`ManualTask` with manual optimisation (its step order given)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MLP", "AssocScorer", "GraspCNN", "HeatNet", "ManualTask", "Task", "YieldNet"]

MakeOptimizer = Callable[[Any], torch.optim.Optimizer]


class MLP(nn.Sequential):
    """``Linear`` + activation layers of the given widths, a linear last layer (``net[0]``, ``net[2]``, ...
    are the linear layers)."""

    def __init__(self, widths: list[int], act: type[nn.Module] = nn.ReLU, last_act: bool = False) -> None:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2 or last_act:
                layers.append(act())
        super().__init__(*layers)


class AssocScorer(nn.Module):
    """Scores every (frame-1 detection, frame-2 detection) pair: an encoder embeds each detection's
    features, a tanh MLP scores the pair from both embeddings and their difference; ``(B, N, F)`` twice ->
    logits ``(B, N, N)`` (row ``i``: which frame-2 detection is detection ``i``). ``frozen_encoder``: the
    encoder runs under ``torch.no_grad()`` (left in from an inference snippet)."""

    def __init__(self, features: int = 8, embed: int = 16, width: int = 32, frozen_encoder: bool = False):
        super().__init__()
        self.encoder = MLP([features, embed, embed], act=nn.Tanh)
        self.scorer = MLP([3 * embed, width, width, 1], act=nn.Tanh)
        self.frozen_encoder = frozen_encoder

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        if self.frozen_encoder:
            with torch.no_grad():
                ea, eb = self.encoder(a), self.encoder(b)
        else:
            ea, eb = self.encoder(a), self.encoder(b)
        n = a.shape[1]
        ea, eb = ea.unsqueeze(2).expand(-1, -1, n, -1), eb.unsqueeze(1).expand(-1, n, -1, -1)
        return self.scorer(torch.cat([ea, eb, eb - ea], -1)).squeeze(-1)


class YieldNet(nn.Module):
    """An order-invariant reaction-yield network: ``phi`` embeds each reactant's fingerprint, the sum of the
    two embeddings goes through ``rho``; the yield in percent is ``100 * sigmoid(logit)`` (``bounded``) or the
    logit itself (a model of the logit of the yield)."""

    def __init__(self, bits: int = 64, width: int = 64, bounded: bool = True) -> None:
        super().__init__()
        self.phi = MLP([bits, width, width], last_act=True)
        self.rho = MLP([width, width, 1])
        self.bounded = bounded

    def forward(self, a: Tensor, b: Tensor) -> Tensor:
        z = self.rho(self.phi(a) + self.phi(b)).squeeze(-1)
        return 100 * torch.sigmoid(z) if self.bounded else z


class GraspCNN(nn.Sequential):
    """Grasp-success logits from a ``(1, 16, 16)`` depth patch: two ReLU convolutions with pooling and an MLP
    head. ``relu_on_logit``: a ReLU after the last layer too (every layer written ``Linear`` + ReLU)."""

    def __init__(self, width: int = 8, hidden: int = 32, relu_on_logit: bool = False) -> None:
        layers: list[nn.Module] = [
            *(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),
            *(nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),
            *(nn.Flatten(), nn.Linear(2 * width * 16, hidden), nn.ReLU(), nn.Linear(hidden, 1)),
        ]
        if relu_on_logit:
            layers.append(nn.ReLU())
        super().__init__(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return super().forward(x).squeeze(-1)


class HeatNet(nn.Module):
    """A heat-equation surrogate on a periodic grid: circular 1-D convolutions (GELU) and a skip from the
    input, ``(B, grid)`` -> ``(B, grid)``; ``heads=2`` also predicts a per-point log-variance."""

    def __init__(self, width: int = 8, kernel: int = 7, heads: int = 1) -> None:
        super().__init__()
        pad = kernel // 2
        self.body = nn.Sequential(
            nn.Conv1d(1, width, kernel, padding=pad, padding_mode="circular"),
            nn.GELU(),
            nn.Conv1d(width, width, kernel, padding=pad, padding_mode="circular"),
            nn.GELU(),
            nn.Conv1d(width, heads, kernel, padding=pad, padding_mode="circular"),
        )
        self.heads = heads

    def forward(self, u: Tensor) -> Tensor:
        out = self.body(u.unsqueeze(1))
        if self.heads == 1:
            return u + out.squeeze(1)
        return torch.stack([u + out[:, 0], out[:, 1]], 1)


class Task(pl.LightningModule):
    """Trains ``net`` on ``loss(net, batch)`` with ``make_optimizer(parameters)`` and, optionally, the
    scheduler ``make_schedule(optimizer)`` stepped every step (``schedule_config``: more keys of Lightning's
    ``lr_scheduler`` dict); logs ``val_loss`` (``val_loss_fn`` if given, else the same loss, on the
    validation batches) and ``train_loss`` (every step)."""

    def __init__(
        self,
        net: nn.Module,
        loss: Callable[[nn.Module, Any], Tensor],
        make_optimizer: MakeOptimizer,
        make_schedule: Callable[[torch.optim.Optimizer], Any] | None = None,
        schedule_config: dict[str, Any] | None = None,
        val_loss_fn: Callable[[nn.Module, Any], Tensor] | None = None,
    ) -> None:
        super().__init__()
        self.net = net
        self.loss = loss
        self.val_loss_fn = val_loss_fn or loss
        self.make_optimizer = make_optimizer
        self.make_schedule = make_schedule
        self.schedule_config = schedule_config or {}

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        loss = self.loss(self.net, batch)
        self.log("train_loss", loss, batch_size=len(batch[0]))
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.val_loss_fn(self.net, batch), batch_size=len(batch[0]))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.parameters())
        if self.make_schedule is None:
            return optimizer
        config = {"scheduler": self.make_schedule(optimizer), "interval": "step", **self.schedule_config}
        return {"optimizer": optimizer, "lr_scheduler": config}


class ManualTask(Task):
    """Manual optimisation, one optimizer: each batch runs ``order``, a sequence of ``"zero_grad"``,
    ``"backward"`` and ``"step"`` (the usual order ``("zero_grad", "backward", "step")``); a scheduler, if
    any, is stepped after every batch."""

    def __init__(self, *args: Any, order: tuple[str, ...] = ("zero_grad", "backward", "step"), **kw: Any):
        super().__init__(*args, **kw)
        self.automatic_optimization = False
        self.order = order

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        optimizer = self.optimizers()
        loss = self.loss(self.net, batch)
        for action in self.order:
            if action == "zero_grad":
                optimizer.zero_grad()
            elif action == "backward":
                self.manual_backward(loss)
            else:
                optimizer.step()
        schedule = self.lr_schedulers()
        if schedule is not None:
            schedule.step()
        return loss.detach()


def cross_entropy(net: nn.Module, batch: Any) -> Tensor:
    x, y = batch
    return F.cross_entropy(net(x), y)


def mse(net: nn.Module, batch: Any) -> Tensor:
    x, y = batch
    return F.mse_loss(net(x), y)
