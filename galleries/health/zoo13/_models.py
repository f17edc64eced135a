"""Zoo 13's networks and task variants (plain torch and Lightning): a MADE autoregressive density model of
binarised digits, a tanh tabular MLP, a deep residual MLP. The trainer is the first zoo's :class:`Task`; the
variant here changes only its loss."""

from __future__ import annotations

import itertools
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import MLP, Task

__all__ = ["MADE", "MLP", "MADETask", "ResidualMLP", "TanhMLP", "Task"]


class MaskedLinear(nn.Linear):
    """A linear layer whose weight is multiplied by a fixed 0/1 mask (a buffer) on every forward."""

    def __init__(self, inputs: int, outputs: int, mask: Tensor) -> None:
        super().__init__(inputs, outputs)
        self.register_buffer("mask", mask)

    def forward(self, x: Tensor) -> Tensor:
        return F.linear(x, self.weight * self.mask, self.bias)


class MADE(nn.Module):
    """Germain et al. (2015): an autoencoder whose masks make output ``d`` depend only on inputs ``< d`` (the
    natural pixel order), so its outputs are the logits of an autoregressive model of ``inputs`` binary
    pixels. ``hidden`` masked ReLU layers of ``width`` units with degrees drawn once from a fixed seed."""

    def __init__(self, inputs: int = 64, width: int = 256, hidden: int = 2) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(7)
        degrees = [torch.arange(1, inputs + 1)]
        for _ in range(hidden):
            degrees.append(torch.randint(1, inputs, (width,), generator=g))
        layers: list[nn.Module] = []
        for a, b in itertools.pairwise(degrees):
            layers += [MaskedLinear(len(a), len(b), (b.unsqueeze(1) >= a.unsqueeze(0)).float()), nn.ReLU()]
        out_mask = (degrees[0].unsqueeze(1) > degrees[-1].unsqueeze(0)).float()
        layers.append(MaskedLinear(len(degrees[-1]), inputs, out_mask))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: Tensor) -> Tensor:
        return self.layers(x)


class MADETask(Task):
    """The MADE's negative log-likelihood of binarised digits in nats per image: the pixel BCE summed over
    the image, averaged over the batch (``bits``: divided by ``ln 2``)."""

    def __init__(self, net: MADE, make_optimizer: Any, make_schedule: Any = None) -> None:
        super().__init__(net, "nll", make_optimizer, make_schedule)

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, _ = batch
        logits = self.net(x)
        return F.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(1).mean(), None


class TanhMLP(nn.Sequential):
    """A tabular classifier: ``Linear`` + tanh layers, a linear head."""

    def __init__(self, inputs: int = 30, width: int = 64, classes: int = 2) -> None:
        super().__init__(nn.Linear(inputs, width), nn.Tanh(), nn.Linear(width, width), nn.Tanh(),
                         nn.Linear(width, classes))  # fmt: skip


class ResidualMLP(nn.Module):
    """A stem, ``blocks`` residual blocks ``h + W2 relu(W1 h)`` and a linear readout (a deep residual MLP
    for smooth scientific targets). ``branch_std``: the std the blocks' weights are drawn with (``None``:
    PyTorch's default init)."""

    def __init__(self, inputs: int = 6, width: int = 64, blocks: int = 8, branch_std: float | None = None):
        super().__init__()
        self.stem, self.readout = nn.Linear(inputs, width), nn.Linear(width, 1)
        self.blocks = nn.ModuleList(MLP([width, width, width]) for _ in range(blocks))
        if branch_std is not None:
            for block in self.blocks:
                for layer in (block[0], block[2]):
                    nn.init.normal_(layer.weight, 0.0, branch_std)

    def forward(self, x: Tensor) -> Tensor:
        h = self.stem(x)
        for block in self.blocks:
            h = h + block(h)
        return self.readout(h)
