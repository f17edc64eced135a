"""Zoo 15's trainer and networks (plain torch and Lightning): a digits CNN with BatchNorm, a GRU sequence
classifier, a wine autoencoder, a Poisson count regressor with an exposure offset, a heteroscedastic
regressor (mean and variance heads) and an embedding-bag text classifier. Written for this zoo alone: no other
zoo's code."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

MakeOptimizer = Callable[[nn.Module], torch.optim.Optimizer]
MakeSchedule = Callable[[torch.optim.Optimizer], Any]


# ------------------------------------------------------------------------------------------------ losses
def cross_entropy(out: Tensor, y: Tensor) -> Tensor:
    return F.cross_entropy(out, y)


def mse(out: Tensor, y: Tensor) -> Tensor:
    return F.mse_loss(out, y)


def poisson_nll(log_rate: Tensor, y: Tensor) -> Tensor:
    """The Poisson negative log-likelihood of counts ``y`` under the log link (without the ``log y!`` term,
    PyTorch's default: negative for counts above ~1)."""
    return F.poisson_nll_loss(log_rate, y, log_input=True)


def gaussian_nll(out: Tensor, y: Tensor) -> Tensor:
    """The Gaussian negative log-likelihood of ``y`` under a mean ``out[:, 0]`` and a variance
    ``softplus(out[:, 1]) + 1e-4`` (a heteroscedastic regression)."""
    return F.gaussian_nll_loss(out[:, :1], y, F.softplus(out[:, 1:]) + 1e-4)


LOSSES: dict[str, Callable[[Tensor, Tensor], Tensor]] = {
    "ce": cross_entropy,
    "mse": mse,
    "poisson": poisson_nll,
    "gaussian": gaussian_nll,
}


# ------------------------------------------------------------------------------------------------ trainer
class Task(pl.LightningModule):
    """Trains ``net`` on ``(x, y)`` batches with one of :data:`LOSSES`; logs ``train_loss`` every step and
    ``val_loss`` (the mean over the validation set) at every validation.

    ``make_optimizer(net)`` builds the optimizer (so a run may choose the parameters); ``make_schedule(opt)``
    an LR scheduler stepped every ``interval`` (``"step"`` or ``"epoch"``), ``monitor`` the metric a
    ``ReduceLROnPlateau`` reads.
    """

    def __init__(
        self,
        net: nn.Module,
        loss: str,
        make_optimizer: MakeOptimizer,
        make_schedule: MakeSchedule | None = None,
        interval: str = "step",
        monitor: str | None = None,
    ) -> None:
        super().__init__()
        self.net = net
        self.loss_name = loss
        self.make_optimizer = make_optimizer
        self.make_schedule = make_schedule
        self.interval = interval
        self.monitor = monitor

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        return LOSSES[self.loss_name](self.net(x), y)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        loss = self.loss_of(batch)
        self.log("train_loss", loss, on_step=True, on_epoch=False, batch_size=len(batch[1]))
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss_of(batch), on_step=False, on_epoch=True, batch_size=len(batch[1]))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.net)
        if self.make_schedule is None:
            return optimizer
        schedule: dict[str, Any] = {"scheduler": self.make_schedule(optimizer), "interval": self.interval}
        if self.monitor is not None:
            schedule["monitor"] = self.monitor
        return {"optimizer": optimizer, "lr_scheduler": schedule}


# ------------------------------------------------------------------------------------------------ networks
class DigitsCNN(nn.Module):
    """8x8 digits: two 3x3 conv + BatchNorm + ReLU blocks, a 2x2 max-pool, a linear head (10 classes)."""

    def __init__(self, channels: tuple[int, int] = (8, 16)) -> None:
        super().__init__()
        a, b = channels
        self.features = nn.Sequential(
            nn.Conv2d(1, a, 3, padding=1), nn.BatchNorm2d(a), nn.ReLU(),
            nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU(),
            nn.MaxPool2d(2),
        )  # fmt: skip
        self.head = nn.Linear(b * 16, 10)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x).flatten(1))


class SequenceGRU(nn.Module):
    """A one-layer GRU over ``(N, T, inputs)`` sequences; its last hidden state feeds a linear head."""

    def __init__(self, inputs: int = 2, hidden: int = 64, classes: int = 4) -> None:
        super().__init__()
        self.gru = nn.GRU(inputs, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: Tensor) -> Tensor:
        _, h = self.gru(x)
        return self.head(h[-1])


def mlp(widths: list[int], last_relu: bool = False) -> nn.Sequential:
    """``Linear`` layers of ``widths`` with ReLU between them (and after the last with ``last_relu``)."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(widths)):
        layers.append(nn.Linear(a, b))
        if i < len(widths) - 2 or last_relu:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class WineAutoencoder(nn.Module):
    """13 standardised wine features -> 32 -> 32 -> 3 (the code) -> 32 -> 32 -> 13, ReLU between."""

    def __init__(self, width: int = 32, code: int = 3) -> None:
        super().__init__()
        self.encoder = mlp([13, width, width, code])
        self.decoder = mlp([code, width, width, 13])

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.encoder(x))


class PoissonRegressor(nn.Module):
    """The log rate of a count: an MLP of the features ``x[:, :-1]`` plus the offset ``x[:, -1]`` (the log
    exposure) with coefficient 1 (a Poisson GLM's offset, the log link)."""

    def __init__(self, features: int = 6, width: int = 32) -> None:
        super().__init__()
        self.body = mlp([features, width, width, 1])

    def forward(self, x: Tensor) -> Tensor:
        return self.body(x[:, :-1]) + x[:, -1:]


class HeteroRegressor(nn.Module):
    """A shared ReLU trunk and a linear head of two outputs: the mean and the raw variance (see
    :func:`gaussian_nll`)."""

    def __init__(self, inputs: int = 2, width: int = 64) -> None:
        super().__init__()
        self.trunk = mlp([inputs, width, width], last_relu=True)
        self.head = nn.Linear(width, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.trunk(x))


class BagClassifier(nn.Module):
    """Token documents ``(N, L)`` (id 0: padding) -> the mean of their tokens' embeddings (an ``EmbeddingBag``
    in ``sum`` mode weighted by ``mask / length``) -> a linear head."""

    def __init__(self, vocabulary: int, dim: int = 32, classes: int = 4) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(vocabulary, dim, mode="sum")
        self.head = nn.Linear(dim, classes)

    def forward(self, ids: Tensor) -> Tensor:
        mask = (ids != 0).float()
        weights = mask / mask.sum(1, keepdim=True).clamp(min=1.0)
        return self.head(self.bag(ids, per_sample_weights=weights))
