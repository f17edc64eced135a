"""Zoo 26's networks and trainer (plain torch and Lightning): a 1-D stereo-matching CNN, a spectrogram-mask
CNN for source separation, a bracket-sequence recurrent classifier over packed sequences, a learned
back-projection for tomography and a masked deep set over irregularly sampled light curves. :class:`Task`
trains any of them with automatic optimisation."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence

__all__ = [
    "MLP",
    "BracketRNN",
    "LightCurveSet",
    "MaskNet",
    "StereoCNN",
    "Task",
    "TomoNet",
]

MakeOptimizer = Callable[[Any], torch.optim.Optimizer]


class MLP(nn.Sequential):
    """``Linear`` + ``act`` layers of the given widths, a linear last layer."""

    def __init__(self, widths: list[int], act: type[nn.Module] = nn.ReLU) -> None:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2:
                layers.append(act())
        super().__init__(*layers)


class StereoCNN(nn.Sequential):
    """Per-pixel disparity from a rectified pair of scanlines ``(B, 2, W)``: dilated 1-D ReLU convolutions
    (a receptive field of 31 pixels) and a 1x1 readout ``(B, W)``."""

    def __init__(self, width: int = 32) -> None:
        super().__init__(nn.Conv1d(2, width, 5, padding=2), nn.ReLU(),
                         nn.Conv1d(width, width, 5, padding=4, dilation=2), nn.ReLU(),
                         nn.Conv1d(width, width, 5, padding=8, dilation=4), nn.ReLU(),
                         nn.Conv1d(width, 1, 1), nn.Flatten())  # fmt: skip


class MaskNet(nn.Module):
    """A time-frequency mask for the first source: an ``encoder`` of 3x3 convolutions over the mixture's
    log-magnitude ``(B, 1, F, T)`` and a 1x1 ``head``; the mask is the head's sigmoid. ``act``: the encoder's
    nonlinearity; ``binarise``: the mask is rounded to 0/1 (an ideal binary mask)."""

    def __init__(self, width: int = 8, act: type[nn.Module] = nn.ReLU, binarise: bool = False) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, width, 3, padding=1), act(),
                                     nn.Conv2d(width, width, 3, padding=1), act(),
                                     nn.Conv2d(width, width, 3, padding=1), act())  # fmt: skip
        self.head = nn.Conv2d(width, 1, 1)
        self.binarise = binarise

    def forward(self, x: Tensor) -> Tensor:
        mask = torch.sigmoid(self.head(self.encoder(x)))
        return torch.round(mask) if self.binarise else mask


class BracketRNN(nn.Module):
    """Balanced-bracket recognition: an embedding of the tokens (0 pads), an LSTM over the packed sequences
    and a linear readout of its state after each word's last real token (one logit)."""

    def __init__(self, vocab: int = 4, hidden: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 8, padding_idx=0)
        self.rnn = nn.LSTM(8, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, tokens: Tensor, lengths: Tensor) -> Tensor:
        embedded = self.embed(tokens)
        packed = pack_padded_sequence(embedded, lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, (h, _) = self.rnn(packed)
        return self.out(h[-1]).squeeze(-1)


class TomoNet(nn.Module):
    """Image from sinogram: a learned linear back-projection ``(angles * bins) -> side^2`` and a residual
    refinement by two 3x3 ReLU convolutions."""

    def __init__(self, sinogram: int, side: int, width: int = 16) -> None:
        super().__init__()
        self.side = side
        self.back = nn.Linear(sinogram, side * side)
        self.refine = nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(),
                                    nn.Conv2d(width, width, 3, padding=1), nn.ReLU(),
                                    nn.Conv2d(width, 1, 3, padding=1))  # fmt: skip

    def forward(self, sinogram: Tensor) -> Tensor:
        image = self.back(sinogram.flatten(1)).view(-1, 1, self.side, self.side)
        return (image + self.refine(image)).squeeze(1)


class LightCurveSet(nn.Module):
    """A masked deep set over a light curve's padded observations ``(B, N, features)``: ``phi`` embeds each
    (with, if ``telescopes``, a learned embedding of the telescope that took it), a masked mean and a masked
    max pool the real ones, ``rho`` classifies the star."""

    def __init__(self, features: int = 3, width: int = 32, classes: int = 3, phi: nn.Module | None = None,
                 telescopes: int = 0) -> None:  # fmt: skip
        super().__init__()
        self.phi = phi if phi is not None else MLP([features, width, width, width])
        self.telescope = nn.Embedding(telescopes, features) if telescopes else None
        if self.telescope is not None:  # the telescopes' offsets start at zero
            nn.init.zeros_(self.telescope.weight)
        self.rho = MLP([2 * width, width, classes])

    def forward(self, x: Tensor, mask: Tensor, scope: Tensor | None = None) -> Tensor:
        if self.telescope is not None and scope is not None:
            x = x + self.telescope(scope)
        h = torch.relu(self.phi(x))
        m = mask.unsqueeze(-1)
        mean = (h * m).sum(1) / m.sum(1).clamp_min(1)
        top = (h * m - 1e4 * (1 - m)).amax(1)
        return self.rho(torch.cat([mean, top], -1))


class Task(pl.LightningModule):
    """Trains ``net`` on ``loss(net, batch)`` with ``make_optimizer(parameters)`` and, optionally, the
    scheduler ``make_schedule(optimizer)`` stepped every step (``schedule_config``: more keys of Lightning's
    ``lr_scheduler`` dict); logs ``val_loss`` (``val_loss_fn``, the same loss unless given, on the validation
    batches)."""

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

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.loss(self.net, batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.val_loss_fn(self.net, batch), batch_size=len(batch[0]))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.parameters())
        if self.make_schedule is None:
            return optimizer
        config = {"scheduler": self.make_schedule(optimizer), "interval": "step", **self.schedule_config}
        return {"optimizer": optimizer, "lr_scheduler": config}


def mse(net: nn.Module, batch: Any) -> Tensor:
    x, y = batch
    return F.mse_loss(net(x).float(), y)
