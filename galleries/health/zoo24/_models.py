"""Zoo 24's networks and its one trainer (plain torch and Lightning): a motif-scanning 1-D CNN over one-hot
DNA, tabular MLPs (photometric redshift, insurance pure premium), a move-policy MLP whose illegal moves are
masked out, a residual 1-D CNN that deblurs signals; :class:`Task` trains any of them with a loss of
``(net, batch)``, an optimizer made from the net, an optional schedule and optional extra callbacks."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MLP", "DeblurCNN", "MotifCNN", "Task", "bce", "masked_ce", "mse", "tweedie"]

Loss = Callable[[nn.Module, Any], Tensor]


class MLP(nn.Module):
    """``Linear`` layers of ``widths`` with ``act`` between them: ``body`` (every layer but the last) and
    ``head`` (the last, linear)."""

    def __init__(self, widths: Sequence[int], act: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(widths[:-1]):
            layers += [nn.Linear(a, b), act()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(widths[-2], widths[-1])

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.body(x))


class MotifCNN(nn.Module):
    """A transcription-factor binding-site detector: ``filters`` convolutions of width ``width`` over the
    one-hot sequence ``(N, 4, L)`` (position weight matrices), ReLU, a global max over positions, a linear
    logit."""

    def __init__(self, filters: int = 16, width: int = 9) -> None:
        super().__init__()
        self.body = nn.Conv1d(4, filters, width)
        self.head = nn.Linear(filters, 1)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(torch.relu(self.body(x)).amax(2))


class DeblurCNN(nn.Module):
    """A residual deblurring net for ``(N, 1, L)`` signals: ``x + head(relu(conv(relu(conv(x)))))``, same
    padding throughout."""

    def __init__(self, channels: int = 32, width: int = 9) -> None:
        super().__init__()
        pad = width // 2
        self.body = nn.Sequential(
            nn.Conv1d(1, channels, width, padding=pad), nn.ReLU(),
            nn.Conv1d(channels, channels, width, padding=pad), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Conv1d(channels, 1, width, padding=pad)

    def forward(self, x: Tensor) -> Tensor:
        return x + self.head(self.body(x))


# ------------------------------------------------------------------------------------------------ losses
def mse(net: nn.Module, batch: Any) -> Tensor:
    x, y = batch
    return F.mse_loss(net(x), y)


def bce(net: nn.Module, batch: Any) -> Tensor:
    x, y = batch
    return F.binary_cross_entropy_with_logits(net(x), y)


def masked_ce(net: nn.Module, batch: Any) -> Tensor:
    """Cross-entropy over the legal moves only: the logits of occupied squares are set to ``-inf``."""
    x, legal, move = batch
    return F.cross_entropy(net(x).masked_fill(~legal, float("-inf")), move)


TWEEDIE_POWER = 1.5


def tweedie(net: nn.Module, batch: Any) -> Tensor:
    """The Tweedie (``p = 1.5``, compound Poisson-gamma) negative log-likelihood of claim amounts with a log
    link and the policy's exposure as an offset: ``mu = exposure * exp(f(x))``, written in ``eta = f(x) +
    log(exposure)``."""
    x, exposure, amount = batch
    eta = net(x) + torch.log(exposure)
    p = TWEEDIE_POWER
    return (-amount * torch.exp((1 - p) * eta) / (1 - p) + torch.exp((2 - p) * eta) / (2 - p)).mean()


# ------------------------------------------------------------------------------------------------ trainer
class Task(pl.LightningModule):
    """Trains ``net`` on ``loss(net, batch)``; logs ``val_loss`` when it validates.

    ``make_optimizer(net)`` builds the optimizer (so a run may hand it any subset of the net),
    ``make_schedule(optimizer)`` an optional scheduler stepped every ``interval`` (``"step"`` or
    ``"epoch"``), ``callbacks`` are handed to the Trainer through :meth:`configure_callbacks`.
    """

    def __init__(
        self,
        net: nn.Module,
        loss: Loss,
        make_optimizer: Callable[[nn.Module], torch.optim.Optimizer],
        make_schedule: Callable[[torch.optim.Optimizer], Any] | None = None,
        interval: str = "step",
        callbacks: Sequence[pl.Callback] = (),
    ) -> None:
        super().__init__()
        self.net = net
        self.loss = loss
        self.make_optimizer, self.make_schedule, self.interval = make_optimizer, make_schedule, interval
        self.extra_callbacks = list(callbacks)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.loss(self.net, batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss(self.net, batch))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.net)
        if self.make_schedule is None:
            return optimizer
        schedule = {"scheduler": self.make_schedule(optimizer), "interval": self.interval}
        return {"optimizer": optimizer, "lr_scheduler": schedule}

    def configure_callbacks(self) -> list[pl.Callback]:
        return self.extra_callbacks
