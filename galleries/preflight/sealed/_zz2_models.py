"""Sealed gallery ZZ2's models (half ``zz2``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _zz2_data as data
from galleries.sealed import mlp


class _Adam(pl.LightningModule):
    """Adam on every parameter; ``loss(batch)`` is logged in training and validation."""

    lr = 3e-3

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch))


# --- missing-value imputation (masked reconstruction) -------------------------------------------------------
class Imputer(_Adam):
    """An MLP from a row with its missing entries zeroed, and the mask of those entries, to the whole row;
    squared error on the hidden entries only (the observed ones are served as they are). Served: the table
    with its NaNs filled."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * data.COLUMNS, 128, 128, data.COLUMNS)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([hidden, mask], -1))

    def graded(self, mask: torch.Tensor) -> torch.Tensor:
        return mask

    def loss(self, batch) -> torch.Tensor:
        hidden, mask, whole = batch
        weight = self.graded(mask)
        return ((self(hidden, mask) - whole) ** 2 * weight).sum() / weight.sum().clamp(min=1)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        missing = torch.isnan(x)
        hidden = x.nan_to_num(0.0)
        return torch.where(missing, self(hidden, missing.float()), hidden)


class ImputerGradesObserved(Imputer):
    """BUG: the loss's weight is ``1 - mask`` (the mask was taken to mark the observed entries, as in the
    attention-mask convention): the network learns to copy the entries it sees, and nothing trains the ones
    it must fill."""

    def graded(self, mask: torch.Tensor) -> torch.Tensor:
        return 1 - mask


# --- treatment-effect (uplift) estimation: a two-headed T-learner -------------------------------------------
class TLearner(_Adam):
    """A shared trunk and two heads, the outcome without (head 0) and with (head 1) the treatment; each row's
    squared error is taken on the head of the arm it was in. Served: the effect, head 1 - head 0."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = nn.Sequential(mlp(data.FEATURES, 128, 128), nn.ReLU())
        self.heads = nn.Linear(128, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.heads(self.trunk(x))

    def loss(self, batch) -> torch.Tensor:
        x, t, y = batch
        factual = self(x).gather(1, t.long()[:, None])[:, 0]
        return F.mse_loss(factual, y)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        out = self(x)
        return out[:, 1] - out[:, 0]


class TLearnerBothHeadsEveryRow(TLearner):
    """BUG: each head's squared error is taken on every row (``mse(out[:, 0], y) + mse(out[:, 1], y)``),
    not only on the rows of its own arm: both heads learn the mixed outcome and the served effect is about
    0."""

    def loss(self, batch) -> torch.Tensor:
        x, _, y = batch
        out = self(x)
        return F.mse_loss(out[:, 0], y) + F.mse_loss(out[:, 1], y)


class TLearnerServedReversed(TLearner):
    """BUG: the served effect is ``out[:, 0] - out[:, 1]``, control minus treated (the heads were thought
    to be ordered treated first, as in the report's columns): every effect is served with its sign
    flipped."""

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        out = self(x)
        return out[:, 0] - out[:, 1]


class TLearnerArmBalanced(TLearner):
    """Each arm's squared error averaged over its own rows, and the two added (the rare treated rows weigh
    as much as the common untreated ones)."""

    def loss(self, batch) -> torch.Tensor:
        x, t, y = batch
        err = (self(x).gather(1, t.long()[:, None])[:, 0] - y) ** 2
        treated = t.sum().clamp(min=1)
        untreated = (1 - t).sum().clamp(min=1)
        return (err * t).sum() / treated + (err * (1 - t)).sum() / untreated


# --- trajectory prediction ----------------------------------------------------------------------------------
class TrajectoryMLP(_Adam):
    """An MLP from the 8 observed positions, taken relative to the last of them, to the 8 future positions'
    offsets from it; squared error of the served positions. Served: the 8 future positions."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * data.PAST, 128, 128, 2 * data.FUTURE)

    def forward(self, past: torch.Tensor) -> torch.Tensor:
        """The future's offsets from the last observed position."""
        relative = past - past[:, -1:]
        return self.net(relative.flatten(1)).view(-1, data.FUTURE, 2)

    def loss(self, batch) -> torch.Tensor:
        past, future = batch
        return F.mse_loss(self(past), future - past[:, -1:])

    def predict(self, past: torch.Tensor) -> torch.Tensor:
        return past[:, -1:] + self(past)


class TrajectoryMLPServedFromStart(TrajectoryMLP):
    """BUG: ``predict`` adds the offsets to ``past[:, :1]``, the first observed position (the track's
    "origin" of the plotting code), not to the last one they were trained from."""

    def predict(self, past: torch.Tensor) -> torch.Tensor:
        return past[:, :1] + self(past)


# --- image inpainting ---------------------------------------------------------------------------------------
class Inpainter(_Adam):
    """A small CNN from the holed digit and its hole mask (two channels) to the whole digit; squared error
    over the image (or only in the hole, ``hole_only``). Served: the input outside the hole, the network's
    pixels inside it."""

    hole_only = False

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(2, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=2, dilation=2),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 1, 3, padding=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.net(x))

    def loss(self, batch) -> torch.Tensor:
        x, whole = batch
        err = (self(x) - whole) ** 2
        if not self.hole_only:
            return err.mean()
        hole = x[:, 1:]
        return (err * hole).sum() / hole.sum().clamp(min=1)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        holed, hole = x[:, :1], x[:, 1:]
        return holed * (1 - hole) + self(x) * hole


class InpainterHoleLoss(Inpainter):
    """Squared error only inside the hole (the visible pixels are never graded)."""

    hole_only = True


class InpainterCompositeFlipped(Inpainter):
    """BUG: the served composite keeps the network's pixels where the mask is 0 and the input where it is 1
    (the mask read as "valid pixels", as in partial-convolution code): the hole is served as the zeros of
    the input."""

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        holed, hole = x[:, :1], x[:, 1:]
        return self(x) * (1 - hole) + holed * hole


# --- keyword spotting (2-D convolutions over frequency x time) ----------------------------------------------
class KeywordCNN(_Adam):
    """Three 3 x 3 convolutions (with batch norm) over the (frequency, time) spectrogram, maxed over time
    only (the frequency layout is kept) and a linear head over the 7 classes; cross-entropy (with
    ``smoothing``), the learning rate decayed to zero over 6 epochs by a cosine. Served: the class."""

    smoothing = 0.0
    epochs = 6  # the cosine decay's length

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
        )
        self.head = nn.Linear(32 * (data.BINS // 4), data.CLASSES)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        return [optimizer], [torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, self.epochs)]

    def forward(self, spec: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(spec).amax(-1).flatten(1))

    def loss(self, batch) -> torch.Tensor:
        spec, label = batch
        return F.cross_entropy(self(spec), label, label_smoothing=self.smoothing)

    def predict(self, spec: torch.Tensor) -> torch.Tensor:
        return self(spec).argmax(-1)


class KeywordCNNSmoothed(KeywordCNN):
    """Label smoothing 0.2: the cross-entropy cannot fall below the smoothed targets' entropy, declared as
    the loss's constant offset."""

    smoothing = 0.2
    _true, _other = 0.8 + 0.2 / data.CLASSES, 0.2 / data.CLASSES
    loss_offset = -(_true * math.log(_true) + (data.CLASSES - 1) * _other * math.log(_other))


# --- one-step dynamics of a damped pendulum -----------------------------------------------------------------
class PendulumStep(_Adam):
    """An MLP from (sin, cos of the angle, velocity, dt) to a rate; the change of state is dt times it (an
    Euler-like structure, exact as dt -> 0); squared error of the next state. Served: the state after
    dt."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(4, 128, 128, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """The change of (angle, velocity) over the row's dt."""
        angle, velocity, dt = x[:, 0], x[:, 1], x[:, 2]
        features = torch.stack([torch.sin(angle), torch.cos(angle), velocity / 3, dt * 5], 1)
        return dt[:, None] * self.net(features)

    def loss(self, batch) -> torch.Tensor:
        x, after = batch
        return F.mse_loss(x[:, :2] + self(x), after)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :2] + self(x)


class PendulumStepWarmupPerEpoch(PendulumStep):
    """BUG: a linear warm-up over 100 steps (``LambdaLR``) is returned as ``[optimizer], [scheduler]``,
    which Lightning steps once per epoch: after 6 epochs the learning rate is still 6% of its
    target."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 100))
        return [optimizer], [warmup]


class PendulumStepWarmup(PendulumStep):
    """The same warm-up, stepped per batch (``"interval": "step"``)."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 100))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": warmup, "interval": "step"}}


class PendulumStepServedTimesDt(PendulumStep):
    """BUG: ``predict`` multiplies the forward's output by dt once more (``state + dt * self(x)``), the
    forward being taken for the rate it was before the dt factor moved into it."""

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, :2] + x[:, 2:3] * self(x)
