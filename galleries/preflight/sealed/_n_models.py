"""Sealed gallery N's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass that changes the one place the bug lives in). Every model is built from the global RNG;
``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _n_data as data
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


# --- molecular property prediction with missing assay outcomes ----------------------------------------------
class AssayNet(_Adam):
    """An MLP over the fingerprint with one logit per assay; binary cross-entropy on the measured outcomes
    only (most are NaN). Served: each assay's probability of activity."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.BITS, 64, 64, data.ASSAYS, dropout=0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        measured = ~y.isnan()
        return F.binary_cross_entropy_with_logits(self(x)[measured], y[measured])

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(x))


class AssayNetMissingAsInactive(AssayNet):
    """BUG: the NaN outcomes are filled with 0 before the loss (``nan_to_num``), so every assay never run on a
    molecule counts as a measured inactive result."""

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.binary_cross_entropy_with_logits(self(x), y.nan_to_num(0.0))


# --- imputation of multichannel sensor series ---------------------------------------------------------------
class Imputer(_Adam):
    """A residual MLP over the flattened series with the visible mask as a second channel (so a zero reading
    and a missing one differ): it adds its correction to the zero-filled inputs; squared error on the readings
    hidden from it. Served: the series with the unseen
    readings filled in."""

    def __init__(self) -> None:
        super().__init__()
        size = data.LENGTH * data.CHANNELS
        self.net = mlp(2 * size, 256, 256, size)

    def forward(self, inputs: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        out = self.net(torch.cat([inputs, visible], -1).flatten(1))
        return inputs + out.view_as(inputs)

    def scored(self, visible: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        return hidden

    def loss(self, batch) -> torch.Tensor:
        inputs, visible, target, hidden = batch
        mask = self.scored(visible, hidden)
        return (((self(inputs, visible) - target) ** 2) * mask).sum() / mask.sum().clamp_min(1)

    def predict(self, inputs: torch.Tensor, visible: torch.Tensor) -> torch.Tensor:
        return torch.where(visible.bool(), inputs, self(inputs, visible))


class ImputerScoredOnVisible(Imputer):
    """BUG: the loss is masked with the visible mask, not the hidden one: the model is trained to leave the
    readings it sees as they are (a zero correction) and never to fill a gap."""

    def scored(self, visible: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        return visible


class ImputerValidatedOnObserved(Imputer):
    """BUG: ``validation_step`` scores the served series at every observed reading (visible and hidden
    alike), while training scores the hidden ones: three quarters of what validation averages are readings
    the model was given and passes through exactly."""

    def validation_step(self, batch, batch_idx):
        inputs, visible, target, hidden = batch
        observed = visible + hidden
        error = ((self.predict(inputs, visible) - target) ** 2 * observed).sum() / observed.sum()
        self.log("val_loss", error)


class ImputerManual(Imputer):
    """The imputer with manual optimisation (the user clips the gradient norm by hand between backward and
    step)."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def clear(self, optimizer) -> None:
        optimizer.zero_grad()

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        loss = self.loss(batch)
        self.clear(optimizer)
        self.manual_backward(loss)
        torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)
        optimizer.step()
        self.log("train_loss", loss)
        return loss


class ImputerManualNoZeroGrad(ImputerManual):
    """BUG: the manual loop never calls ``zero_grad``: every step's gradient is added to all earlier ones, and
    each update follows the sum of the whole run's gradients."""

    def clear(self, optimizer) -> None:
        pass


# --- bitemporal change detection ----------------------------------------------------------------------------
class ChangeNet(_Adam):
    """A siamese encoder (two 3x3 convolutions, shared) on both images; a head over the two feature maps and
    their absolute difference scores each pixel; binary cross-entropy on the change mask. Served: the mask
    at probability .5."""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()
        )
        self.head = nn.Sequential(nn.Conv2d(48, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 1, 1))

    def features(self, before: torch.Tensor, after: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.encoder(before), self.encoder(after)

    def forward(self, before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
        fb, fa = self.features(before, after)
        return self.head(torch.cat([fb, fa, (fa - fb).abs()], 1))

    def loss(self, batch) -> torch.Tensor:
        before, after, mask = batch
        return F.binary_cross_entropy_with_logits(self(before, after), mask)

    def predict(self, before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
        return self(before, after) > 0


class ChangeNetAfterTwice(ChangeNet):
    """BUG: a copy-paste slip encodes the after image for both branches (``self.encoder(after)`` twice): the
    difference is always zero and the head sees buildings, not new ones."""

    def features(self, before: torch.Tensor, after: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.encoder(after), self.encoder(after)


# --- gesture recognition from hand-landmark sequences -------------------------------------------------------
class GestureGRU(_Adam):
    """A GRU over the frames' landmark coordinates (as the tracker gives them) and a linear head on its last
    output; cross-entropy. Served: the most likely gesture."""

    batch_first = True

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(2 * data.POINTS, 64, batch_first=self.batch_first)
        self.head = nn.Linear(64, data.GESTURES)

    def centre(self, points: torch.Tensor) -> torch.Tensor:
        return points

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(self.centre(points))
        return self.head(out[:, -1])

    def loss(self, batch) -> torch.Tensor:
        points, label = batch
        return F.cross_entropy(self(points), label)

    def predict(self, points: torch.Tensor) -> torch.Tensor:
        return self(points).argmax(-1)


class GestureGRUTimeMajor(GestureGRU):
    """BUG: the GRU is built without ``batch_first=True`` and fed (batch, frames, features): it runs along
    the batch as if it were time, and ``out[:, -1]`` is each sequence's last frame seen after the batch's
    earlier sequences' last frames."""

    batch_first = False


class GestureGRUCentred(GestureGRU):
    """The gesture GRU on landmarks centred on the first frame's wrist (where the hand starts does not
    matter; how it moves does)."""

    def centre(self, points: torch.Tensor) -> torch.Tensor:
        return points - points[:, :1, :2].repeat(1, 1, data.POINTS)


class GestureGRUCentredPerFrame(GestureGRUCentred):
    """BUG: the centring copied from a static hand-pose classifier subtracts each frame's own wrist: the
    hand's shape is kept and its motion removed, so the swipes look alike."""

    def centre(self, points: torch.Tensor) -> torch.Tensor:
        return points - points[:, :, :2].repeat(1, 1, data.POINTS)


# --- energy disaggregation (seq2point) ----------------------------------------------------------------------
class Seq2Point(_Adam):
    """An MLP from a window of mains readings to the heater's power at its midpoint; squared error. The
    learning rate halves every 2 epochs (``StepLR``). Served: the heater's power."""

    interval = "epoch"

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.WINDOW, 128, 64, 1)

    def forward(self, window: torch.Tensor) -> torch.Tensor:
        return self.net(window)

    def loss(self, batch) -> torch.Tensor:
        window, power = batch
        return F.mse_loss(self(window), power)

    def predict(self, window: torch.Tensor) -> torch.Tensor:
        return self(window)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": self.interval}}


class Seq2PointStepLRPerBatch(Seq2Point):
    """BUG: the schedule dict says ``"interval": "step"``: the learning rate halves every 2 batches, not
    every 2 epochs, and is below 1e-6 after 25 batches."""

    interval = "step"


# --- learning with noisy labels: small-loss selection -------------------------------------------------------
class SmallLossNet(_Adam):
    """An MLP on the digits trained on the small-loss part of each batch (co-teaching's selection, one
    network): the fraction forgotten ramps from 0 to the noise rate over the first 5 epochs. Validation
    scores every row. Served: the most likely digit."""

    largest = False

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        losses = F.cross_entropy(self(x), y, reduction="none")
        if not self.training:
            return losses.mean()
        forget = data.NOISE * min(1.0, self.current_epoch / 5)
        keep = max(1, round((1 - forget) * len(losses)))
        return losses.topk(keep, largest=self.largest).values.mean()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class SmallLossNetKeepsLargest(SmallLossNet):
    """BUG: ``losses.topk(keep)`` keeps the largest losses (``largest=True`` is topk's default): the model
    trains on the rows most likely mislabelled and drops the clean ones."""

    largest = True
