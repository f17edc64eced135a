"""Zoo 14's networks and its one trainer (plain torch and Lightning): tabular MLPs, a GRU forecaster of sine
mixtures, a small convolutional denoiser of 8x8 digits and a character-level LSTM language model.

:class:`Task` trains any of them: ``make_optimizer(parameters)`` builds the optimizer, ``make_schedule
(optimizer)`` an LR schedule stepped every ``interval`` (``"step"`` or ``"epoch"``); it logs ``val_loss`` (the
mean over the validation batches) whenever it validates.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import lightning.pytorch as pl
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MLP", "CharLSTM", "Denoiser", "Forecaster", "Task"]


class MLP(nn.Sequential):
    """``Linear`` layers of ``sizes`` with ``activation`` between them (none after the last)."""

    def __init__(self, sizes: Sequence[int], activation: Callable[[], nn.Module] = nn.ReLU) -> None:
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(sizes):
            layers += [nn.Linear(a, b), activation()]
        super().__init__(*layers[:-1])


class Forecaster(nn.Module):
    """A GRU over a window ``(N, T)`` of one series and a linear head on its last state: the next value."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.gru = nn.GRU(1, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 1)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.gru(x.unsqueeze(-1))
        return self.head(out[:, -1])


class Denoiser(nn.Module):
    """A small convolutional denoiser of ``(N, 64)`` flattened 8x8 images: an encoder of two 3x3 ReLU
    convolutions (``width`` channels) and a decoder of a 3x3 ReLU convolution and a 1x1 readout."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, width, 3, padding=1), nn.ReLU()
        )
        self.decoder = nn.Sequential(nn.Conv2d(width, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, 1, 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.encoder(x.view(-1, 1, 8, 8))).flatten(1)


class CharLSTM(nn.Module):
    """A character-level language model: an embedding, a one-layer LSTM and a linear readout of the next
    character's logits at every position, ``(N, T) -> (N, T, vocab)``."""

    def __init__(self, vocab: int, embed: int = 16, hidden: int = 64, dropout: float = 0.0) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.readout = nn.Linear(hidden, vocab)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.lstm(self.drop(self.embed(x)))
        return self.readout(self.drop(out))


class Task(pl.LightningModule):
    """Trains ``net`` on ``(x, y)`` batches with ``loss`` (``"mse"``, ``"ce"``, or ``"lm"``: cross-entropy at
    every position), ``make_optimizer(net.parameters())`` and, if given, ``make_schedule(optimizer)`` stepped
    every ``interval``; logs ``val_loss`` when it validates."""

    def __init__(
        self,
        net: nn.Module,
        loss: str,
        make_optimizer: Callable[[Any], Any],
        make_schedule: Callable[[Any], Any] | None = None,
        interval: str = "step",
    ) -> None:
        super().__init__()
        self.net, self.loss = net, loss
        self.make_optimizer, self.make_schedule, self.interval = make_optimizer, make_schedule, interval

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        out = self.net(x)
        if self.loss == "ce":
            return F.cross_entropy(out, y)
        if self.loss == "lm":
            return F.cross_entropy(out.flatten(0, 1), y.flatten())
        return F.mse_loss(out, y)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.loss_of(batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss_of(batch), batch_size=len(batch[0]))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.net.parameters())
        if self.make_schedule is None:
            return optimizer
        schedule = {"scheduler": self.make_schedule(optimizer), "interval": self.interval}
        return {"optimizer": optimizer, "lr_scheduler": schedule}
