"""Zoo 22's networks and its Lightning task (plain torch and Lightning, self-contained): a small flow CNN for
a pair of frames, an MLP for 4x4 sudoku cells, a hurdle MLP for rainfall (rain or not, and how much), a
multi-head captcha CNN, an MLP pricing surrogate; :class:`Task` trains any of them with a loss, an optimizer
built from the network and an optional per-step schedule."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

Loss = Callable[[Tensor, Tensor], Tensor]


class MLP(nn.Sequential):
    """``Linear`` layers of ``widths`` with ``act`` between them (none after the last)."""

    def __init__(self, widths: list[int], act: type[nn.Module] = nn.ReLU) -> None:
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(widths):
            layers += [nn.Linear(a, b), act()]
        super().__init__(*layers[:-1])


class FlowNet(nn.Module):
    """Global optical flow of a pair of frames ``(N, 2, 16, 16)``: three convolutions (``act`` between them),
    a global average and a linear readout of ``(dx, dy)``."""

    def __init__(self, act: type[nn.Module] = nn.ReLU, width: int = 32) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(2, width, 3, padding=1), act(),
            nn.Conv2d(width, width, 3, stride=2, padding=1), act(),
            nn.Conv2d(width, width, 3, stride=2, padding=1), act(),
        )  # fmt: skip
        self.readout = nn.Linear(width, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.readout(self.features(x).mean((2, 3)))


class SudokuMLP(nn.Module):
    """4x4 sudoku cells: the puzzle one-hot ``(N, 16, 5)`` (digits 1-4, blank) in, logits ``(N, 16, 4)``
    out."""

    def __init__(self, width: int = 256) -> None:
        super().__init__()
        self.net = MLP([80, width, width, 64])

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x.flatten(1)).view(-1, 16, 4)


class HurdleNet(nn.Module):
    """A rainfall hurdle model: a ReLU body over the day's readings and a linear head of three outputs (the
    rain logit, the mean and the log-std of the log amount)."""

    def __init__(self, inputs: int = 6, width: int = 64) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU())
        self.head = nn.Linear(width, 3)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.body(x))


class CaptchaNet(nn.Module):
    """A captcha of ``chars`` digits ``(N, 1, 8, 8 * chars)``: a convolutional trunk and one 10-way linear
    head per character position."""

    def __init__(self, chars: int = 4, width: int = 16) -> None:
        super().__init__()
        self.trunk = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(width, 2 * width, 3, padding=1), nn.ReLU(), nn.Flatten(),
        )  # fmt: skip
        self.heads = nn.ModuleList(nn.Linear(2 * width * 4 * 4 * chars, 10) for _ in range(chars))

    def forward(self, x: Tensor) -> Tensor:
        h = self.trunk(x)
        return torch.stack([head(h) for head in self.heads], 1)  # (N, chars, 10)


# ------------------------------------------------------------------------------------------------ losses
def mse(out: Tensor, y: Tensor) -> Tensor:
    return F.mse_loss(out, y)


def cells_ce(out: Tensor, y: Tensor) -> Tensor:
    """Cross-entropy over the blank cells (``y`` is the digit 0-3 there and ``-100`` at the clues)."""
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1), ignore_index=-100)


def chars_ce(out: Tensor, y: Tensor) -> Tensor:
    """Cross-entropy averaged over the characters of each captcha."""
    return F.cross_entropy(out.reshape(-1, 10), y.reshape(-1))


HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)


def hurdle_nll(out: Tensor, y: Tensor) -> Tensor:
    """A hurdle model's negative log-likelihood per day: ``out`` = (rain logit, mean and log-std of the log
    amount), ``y`` the amount (0 on dry days). Dry days: ``-log(1 - p)``; wet days: ``-log p`` plus the
    log-normal density of the amount. The log is taken of the wet amounts only (dry days read 1)."""
    logit, mu, log_sigma = out.unbind(1)
    amount = y.squeeze(1)
    wet = amount > 0
    occurrence = F.binary_cross_entropy_with_logits(logit, wet.float(), reduction="none")
    log_y = torch.log(torch.where(wet, amount, torch.ones_like(amount)))
    z = (log_y - mu) / log_sigma.exp()
    density = log_y + log_sigma + HALF_LOG_2PI + 0.5 * z.pow(2)
    return (occurrence + torch.where(wet, density, torch.zeros_like(density))).mean()


# ------------------------------------------------------------------------------------------------ task
class Task(pl.LightningModule):
    """Trains ``net`` on ``loss(net(x), y)``: the optimizer is ``make_optimizer(net)``, the schedule (if any)
    ``make_schedule(optimizer)`` stepped every optimizer step; validation logs ``val_loss``.
    ``epoch_lr_divisor``: at every training epoch's end each group's LR is divided by it (a hand-written
    decay hook); ``None``: no hook."""

    def __init__(
        self,
        net: nn.Module,
        loss: Loss,
        make_optimizer: Callable[[nn.Module], torch.optim.Optimizer],
        make_schedule: Callable[[torch.optim.Optimizer], Any] | None = None,
        epoch_lr_divisor: float | None = None,
    ) -> None:
        super().__init__()
        self.net = net
        self.loss = loss
        self.make_optimizer = make_optimizer
        self.make_schedule = make_schedule
        self.epoch_lr_divisor = epoch_lr_divisor

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return self.loss(self.net(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", self.loss(self.net(x), y), batch_size=len(x))

    def on_train_epoch_end(self) -> None:
        if self.epoch_lr_divisor is not None:
            for group in self.trainer.optimizers[0].param_groups:
                group["lr"] /= self.epoch_lr_divisor

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.net)
        if self.make_schedule is None:
            return optimizer
        schedule = {"scheduler": self.make_schedule(optimizer), "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": schedule}
