"""Zoo 23's networks and its Lightning task (plain torch and Lightning): a board evaluator, a chord
classifier, a neural vector field integrated over irregular gaps, a two-view fusion network with a
missing-view mask and a maze CNN. One :class:`Task` trains them all; :class:`FlowTask` changes its loss,
:class:`ManualFusionTask` its optimisation (``automatic_optimization = False``)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MLP", "BoardNet", "FlowTask", "FusionNet", "ManualFusionTask", "MazeCNN", "Task", "VectorField"]

MakeOptimizer = Callable[[nn.Module], torch.optim.Optimizer]
MakeSchedule = Callable[[torch.optim.Optimizer], Any]


class MLP(nn.Sequential):
    """``Linear`` layers of the given ``sizes`` with ``act`` (a module class) between them, a linear last
    layer: ``MLP([12, 64, 48])`` is ``Linear(12, 64), ReLU(), Linear(64, 48)``."""

    def __init__(self, sizes: list[int], act: type[nn.Module] = nn.ReLU) -> None:
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b), act()]
        super().__init__(*layers[:-1])


class BoardNet(nn.Module):
    """A board evaluator: the 12 piece planes of an 8x8 board flattened (768 inputs), two ReLU layers and a
    scalar value."""

    def __init__(self, width: int = 128) -> None:
        super().__init__()
        self.body = MLP([768, width, width // 2, 1])

    def forward(self, x: Tensor) -> Tensor:
        return self.body(x.flatten(1))


class VectorField(nn.Module):
    """A learned autonomous vector field ``f(x)`` of a ``dim``-d state, integrated over each sample's own gap
    ``dt`` with ``substeps`` classical Runge-Kutta steps; returns the predicted change ``x(t + dt) -
    x(t)``."""

    def __init__(self, dim: int = 2, width: int = 64, substeps: int = 2) -> None:
        super().__init__()
        self.f = MLP([dim, width, width, dim], act=nn.Tanh)
        self.substeps = substeps

    def forward(self, x: Tensor, dt: Tensor) -> Tensor:
        h = (dt / self.substeps).unsqueeze(1)
        y = x
        for _ in range(self.substeps):
            k1 = self.f(y)
            k2 = self.f(y + h / 2 * k1)
            k3 = self.f(y + h / 2 * k2)
            k4 = self.f(y + h * k3)
            y = y + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
        return y - x


class FusionNet(nn.Module):
    """Two sensor views, each through its own encoder; the embeddings of the views present (``mask``, ``(N,
    2)`` of 0/1) are averaged and a head classifies the average. ``act``: the hidden units' activation."""

    def __init__(self, a_dim: int = 16, b_dim: int = 12, width: int = 64, emb: int = 32, classes: int = 8,
                 act: type[nn.Module] = nn.ReLU) -> None:  # fmt: skip
        super().__init__()
        self.enc_a = MLP([a_dim, width, emb], act)
        self.enc_b = MLP([b_dim, width, emb], act)
        self.head = MLP([emb, width, classes], act)

    def forward(self, xa: Tensor, xb: Tensor, mask: Tensor) -> Tensor:
        ea, eb = self.enc_a(xa), self.enc_b(xb)
        fused = (mask[:, :1] * ea + mask[:, 1:] * eb) / mask.sum(1, keepdim=True).clamp_min(1.0)
        return self.head(fused)


class MazeCNN(nn.Module):
    """A maze reader: walls, start and goal planes of an 8x8 grid through ``depth`` 3x3 ReLU convolutions of
    ``width`` channels, then a two-layer readout of the path length."""

    def __init__(self, width: int = 32, depth: int = 4) -> None:
        super().__init__()
        convs: list[nn.Module] = []
        for i in range(depth):
            convs += [nn.Conv2d(3 if i == 0 else width, width, 3, padding=1), nn.ReLU()]
        self.convs = nn.Sequential(*convs)
        self.readout = nn.Sequential(nn.Flatten(), nn.Linear(width * 64, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.readout(self.convs(x))


class Task(pl.LightningModule):
    """Trains ``net`` on batches ``(*inputs, target)`` with ``loss`` ``"mse"`` or ``"ce"``; logs ``val_loss``.

    ``make_optimizer(net)`` builds the optimizer; ``make_schedule(optimizer)`` (optional) an LR scheduler
    stepped every step, or a Lightning scheduler dict (e.g. a ``ReduceLROnPlateau`` on ``val_loss``)."""

    def __init__(self, net: nn.Module, loss: str, make_optimizer: MakeOptimizer,
                 make_schedule: MakeSchedule | None = None) -> None:  # fmt: skip
        super().__init__()
        self.net, self.loss, self.make_optimizer, self.make_schedule = (
            net,
            loss,
            make_optimizer,
            make_schedule,
        )

    def forward(self, *inputs: Tensor) -> Tensor:
        return self.net(*inputs)

    def loss_of(self, batch: Any) -> Tensor:
        *inputs, target = batch
        out = self(*inputs)
        if self.loss == "ce":
            return F.cross_entropy(out.float(), target)
        return F.mse_loss(out.float(), target)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.loss_of(batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss_of(batch))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.net)
        if self.make_schedule is None:
            return optimizer
        schedule = self.make_schedule(optimizer)
        if not isinstance(schedule, dict):
            schedule = {"scheduler": schedule, "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": schedule}


class FlowTask(Task):
    """The vector field's loss on batches ``(x, dt, x_next)``: the squared error of the predicted change
    divided by the gap (an error in velocity units, so short and long gaps weigh alike)."""

    def __init__(self, net: VectorField, make_optimizer: MakeOptimizer,
                 make_schedule: MakeSchedule | None = None) -> None:  # fmt: skip
        super().__init__(net, "mse", make_optimizer, make_schedule)

    def loss_of(self, batch: Any) -> Tensor:
        x, dt, x_next = batch
        error = (self(x, dt) - (x_next - x)) / dt.unsqueeze(1)
        return error.pow(2).mean()


class ManualFusionTask(Task):
    """The fusion network trained with manual optimisation (``automatic_optimization = False``): zero the
    gradients, ``manual_backward``, step; ``steps_schedule``: also step the LR scheduler after each step (with
    manual optimisation Lightning steps none itself)."""

    def __init__(self, net: FusionNet, make_optimizer: MakeOptimizer, make_schedule: MakeSchedule,
                 steps_schedule: bool) -> None:  # fmt: skip
        super().__init__(net, "ce", make_optimizer, make_schedule)
        self.automatic_optimization = False
        self.steps_schedule = steps_schedule

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        optimizer = self.optimizers()
        optimizer.zero_grad()
        loss = self.loss_of(batch)
        self.manual_backward(loss)
        optimizer.step()
        if self.steps_schedule:
            self.lr_schedulers().step()
        return loss.detach()
