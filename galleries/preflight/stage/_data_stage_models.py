"""LightningModules of the data-stage gallery: small MLPs, a CNN, a GRU and a tiny transformer, each with an
optional planted bug (a constructor flag) so that the buggy model and its healthy twin share everything else.

Every module has ``loss(batch)`` (what ``training_step`` returns) and ``predict(batch)`` (what the twin tests
score on held-out data: class ids, multi-hot predictions or regression values).

Example:
    >>> import torch
    >>> model = DigitsMLP()
    >>> model.predict((torch.zeros(3, 64), torch.zeros(3, dtype=torch.long))).shape
    torch.Size([3])
"""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence

from . import _data_stage_data as data_


class _Net(pl.LightningModule):
    """Adam, a ``loss(batch)`` for training and validation."""

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


# ---------------------------------------------------------------- classifiers on (x, y) batches


class DigitsMLP(_Net):
    """64 -> 64 -> 10 MLP; ``ignore_index`` of its cross-entropy (the bug: 0, a real class)."""

    def __init__(self, in_features: int = 64, classes: int = 10, hidden: int = 64, ignore_index: int = -100):
        super().__init__()
        self.ignore_index = ignore_index
        self.net = nn.Sequential(nn.Linear(in_features, hidden), nn.ReLU(), nn.Linear(hidden, classes))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y, ignore_index=self.ignore_index)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]).argmax(-1)


class NllOnLogitsMLP(DigitsMLP):
    """The bug: ``F.nll_loss`` on raw logits (no ``log_softmax``), i.e. ``-logit[y]``: falls without bound."""

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.nll_loss(self(x), y)


class SubjectMLP(DigitsMLP):
    """32 -> 128 -> 2 MLP for the repeat-measurement subjects."""

    def __init__(self) -> None:
        super().__init__(in_features=32, classes=2, hidden=128)


class BatchStatsMLP(DigitsMLP):
    """Standardises its inputs first. The bug: with the CURRENT batch's mean and std, in training and in
    eval (a hand-written normaliser without running statistics). Fixed: ``nn.BatchNorm1d`` (running stats
    in eval)."""

    def __init__(self, batch_stats: bool = True) -> None:
        super().__init__()
        self.batch_stats = batch_stats
        self.norm = nn.BatchNorm1d(64, affine=False)

    def forward(self, x: Tensor) -> Tensor:
        if self.batch_stats:
            x = (x - x.mean(0)) / (x.std(0, unbiased=False) + 1e-5)
        else:
            x = self.norm(x)
        return self.net(x)


class PriorBiasMLP(DigitsMLP):
    """Healthy: the output bias starts at the log class prior of imbalanced training data."""

    def __init__(self) -> None:
        super().__init__()
        counts = torch.bincount(data_.imbalanced_digits()[1], minlength=10).float()
        with torch.no_grad():
            self.net[-1].bias.copy_((counts / counts.sum()).log())


class MixupMLP(DigitsMLP):
    """Healthy: mixup (Beta(0.4, 0.4)) with soft targets in training; plain cross-entropy in validation."""

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        lam = float(torch.distributions.Beta(0.4, 0.4).sample())
        perm = torch.randperm(len(y))
        soft = F.one_hot(y, 10).float()
        logits = self(lam * x + (1 - lam) * x[perm])
        loss = F.cross_entropy(logits, lam * soft + (1 - lam) * soft[perm])
        self.log("train_loss", loss)
        return loss


class DigitsCNN(_Net):
    """Two 3x3 convolutions and a linear head on 1x8x8 digits (about 10k parameters)."""

    def __init__(self) -> None:
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


class PositionTransformer(_Net):
    """Embedding + learned positions + one transformer encoder layer + mean pool, on ``(B, T)`` tokens.

    The bug (``positions_over_batch``): the positional table is indexed as if the input were sequence-first,
    ``h + pos[: h.size(0)]`` on a batch-first tensor, so each batch SLOT gets a learned offset and the tokens
    get no position at all."""

    def __init__(self, positions_over_batch: bool = True, dim: int = 32, max_len: int = 64) -> None:
        super().__init__()
        self.positions_over_batch = positions_over_batch
        self.embed = nn.Embedding(data_.VOCAB, dim)
        self.pos = nn.Parameter(0.1 * torch.randn(max_len, dim))
        self.encoder = nn.TransformerEncoderLayer(dim, 2, 64, dropout=0.0, batch_first=True)
        self.head = nn.Linear(dim, 8)

    def forward(self, x: Tensor) -> Tensor:
        h = self.embed(x)
        if self.positions_over_batch:
            h = h + self.pos[: h.size(0)].unsqueeze(1)
        else:
            h = h + self.pos[: h.size(1)].unsqueeze(0)
        return self.head(self.encoder(h).mean(1))

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]).argmax(-1)


class LastStepGRU(_Net):
    """``forward(x, lengths)``: embedding + GRU over right-padded tokens, the head reads one time step.

    ``packed`` (the healthy look-alike) packs the sequences (``pack_padded_sequence``) and reads the final
    hidden state; otherwise it reads the step at ``lengths - 1``, or with ``read_padding`` the last PADDED
    step ``out[:, -1]``. (Measured: a GRU learns to carry its state through the pads, so ``read_padding``
    costs nothing here; it is not a gallery bug.)"""

    def __init__(self, read_padding: bool = False, packed: bool = True, dim: int = 32) -> None:
        super().__init__()
        self.read_padding, self.packed = read_padding, packed
        self.embed = nn.Embedding(data_.VOCAB, dim, padding_idx=0)
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, 4)

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        h = self.embed(x)
        if self.packed:
            packed = pack_padded_sequence(h, lengths.cpu(), batch_first=True, enforce_sorted=False)
            return self.head(self.gru(packed)[1][-1])
        out = self.gru(h)[0]
        step = out[:, -1] if self.read_padding else out[torch.arange(len(x)), lengths - 1]
        return self.head(step)

    def loss(self, batch: Any) -> Tensor:
        x, lengths, y = batch
        return F.cross_entropy(self(x, lengths), y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0], batch[1]).argmax(-1)


class FrameMeanClassifier(_Net):
    """``forward(x, lengths)``: averages the frames of a zero-padded recording, then a 4 -> 32 -> 4 MLP.

    The bug (``read_padding``): ``x.mean(1)`` averages the padding frames too, so the loudness it sees is
    scaled by ``length / 24``. Fixed: ``x.sum(1) / lengths``."""

    lr = 1e-2

    def __init__(self, read_padding: bool = True) -> None:
        super().__init__()
        self.read_padding = read_padding
        self.net = nn.Sequential(nn.Linear(data_.FEATURES, 32), nn.ReLU(), nn.Linear(32, len(data_.LEVELS)))

    def forward(self, x: Tensor, lengths: Tensor) -> Tensor:
        pooled = x.mean(1) if self.read_padding else x.sum(1) / lengths[:, None]
        return self.net(pooled)

    def loss(self, batch: Any) -> Tensor:
        x, lengths, y = batch
        return F.cross_entropy(self(x, lengths), y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0], batch[1]).argmax(-1)


class MaskedMeanClassifier(_Net):
    """Healthy: dict batches; embedding, a per-token MLP, a mean over the tokens ``attention_mask`` keeps."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(data_.VOCAB, dim)
        self.token = nn.Sequential(nn.Linear(dim, dim), nn.ReLU())
        self.head = nn.Linear(dim, 2)

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        h = self.token(self.embed(input_ids))
        mask = attention_mask.unsqueeze(-1).float()
        return self.head((h * mask).sum(1) / mask.sum(1).clamp_min(1.0))

    def loss(self, batch: Any) -> Tensor:
        return F.cross_entropy(self(batch["input_ids"], batch["attention_mask"]), batch["labels"])

    def predict(self, batch: Any) -> Tensor:
        return self(batch["input_ids"], batch["attention_mask"]).argmax(-1)


class GRULM(_Net):
    """Healthy: a GRU language model on right-padded sequences, ``ignore_index=0`` (the pad id)."""

    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(data_.VOCAB, dim, padding_idx=0)
        self.gru = nn.GRU(dim, dim, batch_first=True)
        self.head = nn.Linear(dim, data_.VOCAB)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.gru(self.embed(x))[0])

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x).flatten(0, 1), y.flatten(), ignore_index=0)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]).argmax(-1)


# ---------------------------------------------------------------- regression and multi-label


class Regressor(_Net):
    """8 -> 64 -> 64 -> 1 MLP, MSE. ``target_scale``: the fix divides the targets by it in the loss and
    multiplies the predictions back (the bug: 1.0 on targets in raw units, x1000)."""

    def __init__(self, target_scale: float = 1.0) -> None:
        super().__init__()
        self.target_scale = target_scale
        self.net = nn.Sequential(
            nn.Linear(data_.REG_DIM, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y / self.target_scale)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]) * self.target_scale


class RatingRegressor(Regressor):
    """The bug (``sigmoid_head``): a ``sigmoid`` on the output, as if ratings were probabilities, for targets
    on a 0..5 scale: no prediction can pass 1, so the MSE has a floor far above 0. Fixed: a linear output."""

    def __init__(self, sigmoid_head: bool = True) -> None:
        super().__init__()
        self.sigmoid_head = sigmoid_head

    def forward(self, x: Tensor) -> Tensor:
        out = self.net(x)
        return torch.sigmoid(out) if self.sigmoid_head else out


class GaussianRegressor(_Net):
    """Predicts a mean and a precision (``softplus``); loss = Gaussian NLL ``0.5 r^2 prec - 0.5 log prec``.

    The bug (``flipped``): ``+ 0.5 log prec``: shrinking the precision lowers the loss without bound and the
    mean's gradient (``r * prec``) vanishes."""

    def __init__(self, flipped: bool = True) -> None:
        super().__init__()
        self.sign = 1.0 if flipped else -1.0
        self.net = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        out = self(x)
        mean, prec = out[:, :1], F.softplus(out[:, 1:]) + 1e-6
        return (0.5 * (y - mean) ** 2 * prec + self.sign * 0.5 * prec.log()).mean() + 0.5 * math.log(
            2 * math.pi
        )

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0])[:, :1]


class MultiLabelMLP(_Net):
    """Healthy: 16 -> 64 -> 6 logits, ``BCEWithLogitsLoss`` on multi-hot targets."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, data_.LABELS))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.binary_cross_entropy_with_logits(self(x), y)

    def predict(self, batch: Any) -> Tensor:
        return (self(batch[0]) > 0).float()
