"""LightningModules of the development gallery, each small (well under 0.5M parameters) and built from the
global RNG. A planted bug that lives in the model is a constructor flag (``fixed=True`` builds the healthy
twin), so that the buggy model and its twin share everything else.

Every module has ``loss(batch)`` (what ``training_step`` returns) and ``predict(batch)`` (what the proofs
score on clean held-out data).

Example:
    >>> import torch
    >>> model = DigitsCNN()
    >>> model.predict((torch.zeros(3, 1, 8, 8), torch.zeros(3, dtype=torch.long))).shape
    torch.Size([3])
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence

from . import _data as data_


class _Net(pl.LightningModule):
    """Adam at ``lr``; ``training_step`` and ``validation_step`` both return/log ``loss(batch)``."""

    lr = 3e-3

    def loss(self, batch: Any) -> Tensor:
        raise NotImplementedError

    def predict(self, batch: Any) -> Tensor:
        raise NotImplementedError

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss(batch))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


# ---------------------------------------------------------------- classifiers


class DigitsCNN(_Net):
    """Two 3x3 convolutions and a linear head on 1x8x8 digit images (~10k parameters)."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 10),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]).argmax(-1)


# ---------------------------------------------------------------- keypoint regression


class BlobLocator(_Net):
    """A small CNN regressing a blob's centre ``(x, y)`` in [-1, 1] from a 1x16x16 image (~40k parameters);
    ``predict`` is the x coordinate."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 64),
            nn.ReLU(),
            nn.Linear(64, 2),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0])[:, 0]


# ---------------------------------------------------------------- distillation


class DistilledStudent(_Net):
    """A 64 -> 32 -> 10 student distilled from a frozen logistic-regression teacher (``requires_grad=False``):
    ``0.7 * T^2 * KL(teacher_T || student_T) + 0.3 * CE(student, y)`` at temperature ``T = 4`` (Hinton et
    al.). Its loss at init is far from ``ln 10``: the KL term starts large and is scaled by 16."""

    temperature = 4.0
    alpha = 0.7

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.student = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        self.teacher = nn.Linear(64, 10)
        weight, bias = data_.teacher_weights()
        with torch.no_grad():
            self.teacher.weight.copy_(weight)
            self.teacher.bias.copy_(bias)
        self.teacher.requires_grad_(False)

    def forward(self, x: Tensor) -> Tensor:
        return self.student(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        logits = self(x)
        with torch.no_grad():
            soft = F.softmax(self.teacher(x) / self.temperature, -1)
        kl = F.kl_div(F.log_softmax(logits / self.temperature, -1), soft, reduction="batchmean")
        return self.alpha * self.temperature**2 * kl + (1 - self.alpha) * F.cross_entropy(logits, y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]).argmax(-1)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.student.parameters(), lr=self.lr)


# ---------------------------------------------------------------- seq2seq


class ReverseSeq2Seq(_Net):
    """A GRU encoder-decoder (teacher forcing) for ``{"src", "tgt"}`` batches. ``forward`` packs the source
    with lengths counted from its non-pad tokens (``pack_padded_sequence``), as the PyTorch tutorials do: a
    source of only padding has length 0 and packing raises ``RuntimeError`` (by design, not a bug)."""

    def __init__(self, fixed: bool = False, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(data_.SEQ_VOCAB, 32, padding_idx=data_.PAD)
        self.encoder = nn.GRU(32, hidden, batch_first=True)
        self.decoder = nn.GRU(32, hidden, batch_first=True)
        self.out = nn.Linear(hidden, data_.SEQ_VOCAB)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        lengths = (src != data_.PAD).sum(1)
        packed = pack_padded_sequence(self.embed(src), lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, state = self.encoder(packed)
        bos = torch.full_like(tgt[:, :1], data_.BOS)
        decoded, _ = self.decoder(self.embed(torch.cat([bos, tgt[:, :-1]], 1)), state)
        return self.out(decoded)

    def loss(self, batch: Any) -> Tensor:
        logits = self(batch["src"], batch["tgt"])
        return F.cross_entropy(logits.flatten(0, 1), batch["tgt"].flatten(), ignore_index=data_.PAD)

    def predict(self, batch: Any) -> Tensor:
        return self(batch["src"], batch["tgt"]).argmax(-1)


# ---------------------------------------------------------------- quantile regression


class QuantileMLP(_Net):
    """6 -> 64 -> 64 -> 3 MLP predicting the 0.1, 0.5 and 0.9 quantiles, trained with the pinball loss."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))
        self.register_buffer("quantiles", torch.tensor(data_.QUANTILES))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        error = y[:, None] - self(x)
        return torch.maximum(self.quantiles * error, (self.quantiles - 1) * error).mean()

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0])
