"""The field gallery's models: one LightningModule shell and the small networks users write (functional
activations, gated/highway stacks, recurrent classifiers, sigmoid CNNs, log-feature nets)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.optim import Optimizer

MakeOptimizer = Callable[[Iterable[nn.Parameter]], Optimizer]
MakeScheduler = Callable[[Optimizer], Any]


class FieldModule(pl.LightningModule):
    """A classifier shell: ``net`` maps a batch's inputs to logits; cross-entropy; ``val_loss`` logged per
    epoch.

    ``scheduler`` (optional) is stepped every optimizer step (``interval="step"``) or every epoch.

    Example:
        >>> module = FieldModule(FReluMLP(4, 8, 3), lambda p: torch.optim.SGD(p, lr=0.1))
        >>> module(torch.zeros(2, 4)).shape
        torch.Size([2, 3])
    """

    def __init__(
        self,
        net: nn.Module,
        optimizer: MakeOptimizer,
        scheduler: MakeScheduler | None = None,
        interval: str = "step",
    ) -> None:
        super().__init__()
        self.net = net
        self.make_optimizer = optimizer
        self.make_scheduler = scheduler
        self.interval = interval

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.net(x), y), on_epoch=True, batch_size=len(y))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.parameters())
        if self.make_scheduler is None:
            return optimizer
        scheduler = self.make_scheduler(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": self.interval}}


class FReluMLP(nn.Module):
    """An MLP whose nonlinearity is ``F.relu`` (no activation module), with optional dropout."""

    def __init__(self, d_in: int, width: int, n_classes: int, depth: int = 2, dropout: float = 0.0) -> None:
        super().__init__()
        dims = [d_in] + [width] * depth
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.head = nn.Linear(width, n_classes)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.hidden:
            x = F.dropout(F.relu(layer(x)), self.dropout, self.training)
        return self.head(x)


class GeluMLP(nn.Module):
    """An MLP with ``F.gelu`` between its layers."""

    def __init__(self, d_in: int, width: int, n_classes: int, depth: int = 2) -> None:
        super().__init__()
        dims = [d_in] + [width] * depth
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.head = nn.Linear(width, n_classes)

    def forward(self, x: Tensor) -> Tensor:
        for layer in self.hidden:
            x = F.gelu(layer(x))
        return self.head(x)


class Highway(nn.Module):
    """A highway network: ``x <- g * silu(H x) + (1 - g) * x`` with ``g = sigmoid(G x)``, no normalisation."""

    def __init__(
        self,
        d_in: int,
        width: int,
        n_classes: int,
        depth: int = 4,
        gate_bias: float = -1.0,
        dropout: float = 0.0,
    ) -> None:
        super().__init__()
        self.stem = nn.Linear(d_in, width)
        self.transforms = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.gates = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        for gate in self.gates:
            nn.init.constant_(gate.bias, gate_bias)
        self.head = nn.Linear(width, n_classes)
        self.dropout = dropout

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        for transform, gate in zip(self.transforms, self.gates):
            g = torch.sigmoid(gate(x))
            x = g * F.silu(transform(x)) + (1 - g) * x
            x = F.dropout(x, self.dropout, self.training)
        return self.head(x)


class GatedStack(nn.Module):
    """A deep stack of gated units, no carry path, no normalisation: ``x <- sigmoid(G x) * tanh(H x)``."""

    def __init__(self, d_in: int, width: int, n_classes: int, depth: int = 16) -> None:
        super().__init__()
        self.stem = nn.Linear(d_in, width)
        self.transforms = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.gates = nn.ModuleList(nn.Linear(width, width) for _ in range(depth))
        self.head = nn.Linear(width, n_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        for transform, gate in zip(self.transforms, self.gates):
            x = torch.sigmoid(gate(x)) * torch.tanh(transform(x))
        return self.head(x)


class SeqNet(nn.Module):
    """A recurrent classifier: ``nn.GRU`` / ``nn.LSTM`` / ``nn.RNN`` over ``(batch, time, features)``, then a
    linear head on the last hidden state."""

    def __init__(self, kind: str, d_in: int, hidden: int, n_classes: int, **rnn_kwargs: Any) -> None:
        super().__init__()
        cls = {"gru": nn.GRU, "lstm": nn.LSTM, "rnn": nn.RNN}[kind]
        self.rnn = cls(d_in, hidden, batch_first=True, **rnn_kwargs)
        self.head = nn.Linear(hidden, n_classes)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


class SigmoidCNN(nn.Module):
    """``depth`` 3x3 convolutions each followed by ``nn.Sigmoid``, 2x2 average pooling (one cell per
    quadrant), a linear head."""

    def __init__(self, channels: int, n_classes: int, depth: int = 2, init_std: float | None = None) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        c_in = 1
        for _ in range(depth):
            conv = nn.Conv2d(c_in, channels, 3, padding=1)
            if init_std is not None:
                nn.init.normal_(conv.weight, std=init_std)
            layers += [conv, nn.Sigmoid()]
            c_in = channels
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(4 * channels, n_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(F.adaptive_avg_pool2d(self.features(x), 2).flatten(1))


class FReluCNN(nn.Module):
    """Two 3x3 convolutions with ``F.relu``, global average pooling, a linear head."""

    def __init__(self, channels: int, n_classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, channels, 3, padding=1)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.head = nn.Linear(channels, n_classes)

    def forward(self, x: Tensor) -> Tensor:
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        return self.head(x.mean(dim=(2, 3)))


class LogFeatureNet(nn.Module):
    """Takes the log of positive raw features (counts, durations), then a ``F.gelu`` MLP."""

    def __init__(self, d_in: int, width: int, n_classes: int) -> None:
        super().__init__()
        self.hidden = nn.Linear(d_in, width)
        self.head = nn.Linear(width, n_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(F.gelu(self.hidden(torch.log(x))))


def kill_units(layer: nn.Linear | nn.Conv2d, fraction: float, bias: float = -20.0) -> None:
    """Give the first ``fraction`` of ``layer``'s output units a large negative bias: behind a ReLU they never
    fire (the bias of a unit that never fires gets no gradient, so they stay dead)."""
    n = (
        round(layer.out_channels * fraction)
        if isinstance(layer, nn.Conv2d)
        else round(layer.out_features * fraction)
    )
    with torch.no_grad():
        assert layer.bias is not None
        layer.bias[:n] = bias
