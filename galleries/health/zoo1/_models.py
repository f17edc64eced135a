"""The sealed zoo's networks and the one LightningModule that trains them (plain torch and Lightning)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.optim import Optimizer

MakeOptimizer = Callable[[Any], Optimizer]
MakeSchedule = Callable[[Optimizer], Any]


class Task(pl.LightningModule):
    """Trains ``net`` with ``loss`` (``"ce"``, ``"mse"``, ``"reconstruct"``: MSE against the input, ``"lm"``:
    next-token cross-entropy, padding masked out), the optimizer and the per-step schedule given. Logs
    ``val_loss`` (and ``val_acc`` for ``"ce"``)."""

    def __init__(
        self,
        net: nn.Module,
        loss: str,
        make_optimizer: MakeOptimizer,
        make_schedule: MakeSchedule | None = None,
        label_smoothing: float = 0.0,
        lm_mean_per_line: bool = False,
    ) -> None:
        super().__init__()
        self.net, self.loss_kind = net, loss
        self.make_optimizer, self.make_schedule = make_optimizer, make_schedule
        self.label_smoothing = label_smoothing
        self.lm_mean_per_line = lm_mean_per_line

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        if self.loss_kind == "lm":
            (tokens,) = batch if isinstance(batch, (list, tuple)) else (batch,)
            logits = self.net(tokens[:, :-1])
            target = tokens[:, 1:]
            mask = (target != 0).float()
            each = F.cross_entropy(logits.transpose(1, 2), target, reduction="none")
            if self.lm_mean_per_line:  # each line's mean token loss, then the mean over lines
                return ((each * mask).sum(1) / mask.sum(1)).mean(), None
            return (each * mask).sum() / mask.sum().clamp_min(1), None
        x, y = batch
        if self.loss_kind == "reconstruct":
            return F.mse_loss(self.net(x), x), None
        out = self.net(x)
        if self.loss_kind == "mse":
            return F.mse_loss(out, y), None
        return F.cross_entropy(out, y, label_smoothing=smoothing), (out.argmax(1) == y).float().mean()

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        loss, _ = self.loss_of(batch, self.label_smoothing)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        loss, acc = self.loss_of(batch, 0.0)
        self.log("val_loss", loss, on_epoch=True, prog_bar=False)
        if acc is not None:
            self.log("val_acc", acc, on_epoch=True)

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer([p for p in self.parameters() if p.requires_grad])
        if self.make_schedule is None:
            return optimizer
        schedule = self.make_schedule(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


def warmup_cosine(warmup: int, total: int, floor: float = 0.0) -> Callable[[int], float]:
    """The LR factor of a linear warmup over ``warmup`` steps, then a cosine to ``floor`` at ``total``."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        t = min(1.0, (step - warmup) / max(1, total - warmup))
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t))

    return factor


# ------------------------------------------------------------------------------------------------ networks
class MLP(nn.Sequential):
    """Linear layers of the given widths with ``act`` (a module class) between them and optional dropout."""

    def __init__(self, widths: list[int], act: type[nn.Module] = nn.ReLU, dropout: float = 0.0) -> None:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(widths)):
            layers.append(nn.Linear(a, b))
            if i < len(widths) - 2:
                layers.append(act())
                if dropout:
                    layers.append(nn.Dropout(dropout))
        super().__init__(*layers)


class DigitsConvNet(nn.Module):
    """Two 3x3 convolutions, a max-pool and a linear head for 8x8 digits."""

    def __init__(self, channels: int = 16, dropout: float = 0.0) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, channels, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(channels, 2 * channels, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(2 * channels * 16, 10)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.dropout(self.features(x)))


class GRUClassifier(nn.Module):
    """Embedding, a one-layer GRU, a linear head on the last hidden state."""

    def __init__(self, vocab: int, classes: int, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.rnn = nn.GRU(16, width, batch_first=True)
        self.head = nn.Linear(width, classes)

    def forward(self, x: Tensor) -> Tensor:
        _, h = self.rnn(self.embed(x))
        return self.head(h[-1])


class IRNN(nn.Module):
    """Le, Jaitly & Hinton (2015): a ReLU RNN, recurrent weights starting at ``scale`` times the identity."""

    def __init__(self, inputs: int, width: int, scale: float) -> None:
        super().__init__()
        self.rnn = nn.RNN(inputs, width, nonlinearity="relu", batch_first=True)
        with torch.no_grad():
            self.rnn.weight_hh_l0.copy_(scale * torch.eye(width))
            self.rnn.bias_hh_l0.zero_()
            self.rnn.bias_ih_l0.zero_()
            self.rnn.weight_ih_l0.normal_(0, 0.001)
        self.head = nn.Linear(width, 1)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


class TinyTransformer(nn.Module):
    """Token and position embeddings, ``layers`` pre-norm encoder blocks; ``causal``: a language model (logits
    per position), else a classifier on the mean over positions."""

    def __init__(
        self, vocab: int, outputs: int, length: int, width: int = 32, layers: int = 2, causal: bool = False
    ) -> None:
        super().__init__()
        self.causal = causal
        self.embed = nn.Embedding(vocab, width)
        self.position = nn.Parameter(0.02 * torch.randn(length, width))
        block = nn.TransformerEncoderLayer(
            width, nhead=4, dim_feedforward=2 * width, dropout=0.0, batch_first=True, norm_first=True
        )
        self.blocks = nn.TransformerEncoder(block, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, outputs)

    def forward(self, x: Tensor) -> Tensor:
        n = x.shape[1]
        h = self.embed(x) + self.position[:n]
        mask = nn.Transformer.generate_square_subsequent_mask(n) if self.causal else None
        h = self.norm(self.blocks(h, mask=mask, is_causal=self.causal))
        return self.head(h if self.causal else h.mean(1))


class AutoEncoder(nn.Sequential):
    """64 -> 32 -> 8 (a linear code) -> 32 -> 64, ELU in the hidden layers, a sigmoid output (digits are in
    [0, 1]; on the always-blank border pixels it rightly saturates towards 0)."""

    def __init__(self) -> None:
        super().__init__(
            nn.Linear(64, 32), nn.ELU(), nn.Linear(32, 8), nn.Linear(8, 32), nn.ELU(),
            nn.Linear(32, 64), nn.Sigmoid(),
        )  # fmt: skip
