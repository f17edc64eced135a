"""Sealed gallery X's models (half ``x``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _x_data as data
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


# --- image denoising (DnCNN-like residual learning) ---------------------------------------------------------
class Denoiser(_Adam):
    """A small CNN that estimates the noise of an image; the served image is the noisy one minus that
    estimate (residual learning), and the loss is the squared error of the served image against the clean
    one."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 1, 3, padding=1),
        )

    def forward(self, noisy: torch.Tensor) -> torch.Tensor:
        return noisy - self.net(noisy)

    def loss(self, batch) -> torch.Tensor:
        noisy, clean = batch
        return F.mse_loss(self(noisy), clean)

    def predict(self, noisy: torch.Tensor) -> torch.Tensor:
        return self(noisy)


class DenoiserTrainedOnClean(Denoiser):
    """BUG: the loss compares the network's raw output with the clean image (as for a direct denoiser),
    while ``forward`` serves it as the noise to subtract: the network learns the clean image, and the served
    image is the noise, negated, plus a faint copy of the digit."""

    def loss(self, batch) -> torch.Tensor:
        noisy, clean = batch
        return F.mse_loss(self.net(noisy), clean)


class DenoiserNoise2Noise(Denoiser):
    """Noise2Noise: trained against a second, independent noisy copy of the image (never the clean one); the
    loss cannot fall below the target noise's variance (0.09), which is declared as its constant offset."""

    loss_offset = data.SIGMA**2


# --- bearing fault diagnosis from vibration windows ---------------------------------------------------------
class BearingCNN(_Adam):
    """A 1-D CNN with batch norm over the raw vibration window, averaged over time, four classes; a step
    decay of the learning rate (x0.5 every 2 epochs). Served: the fault class."""

    interval = "epoch"

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, 7, padding=3),
            nn.BatchNorm1d(16),
            nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(16, 32, 7, padding=3),
            nn.BatchNorm1d(32),
            nn.ReLU(),
            nn.MaxPool1d(2),
            nn.Conv1d(32, 32, 7, padding=3),
            nn.BatchNorm1d(32),
            nn.ReLU(),
        )
        self.head = nn.Linear(32, data.FAULTS)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": self.interval}}

    def pool(self, h: torch.Tensor) -> torch.Tensor:
        return h.mean(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.features(x)))

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.cross_entropy(self(x), label)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class BearingCNNDecayPerStep(BearingCNN):
    """BUG: the step decay's dict says ``"interval": "step"``: its ``step_size=2`` counts batches, not
    epochs, and after 20 batches the learning rate is a thousandth of its start."""

    interval = "step"


class BearingCNNLastStep(BearingCNN):
    """BUG: the features are read at the last time step (``h[..., -1]``, as in the sequence template this
    head came from) instead of averaged over time: the head sees only the last ~40 samples of the window,
    one or two impacts at most."""

    def pool(self, h: torch.Tensor) -> torch.Tensor:
        return h[..., -1]


class BearingEnvelope(_Adam):
    """Fixed features on purpose: the log magnitude spectrum of the rectified window (the envelope spectrum
    bearing analysts read), which is blind to the phase of the impacts; an MLP on it. Trained with random
    circular shifts."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.LENGTH // 2 + 1, 128, data.FAULTS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        envelope = x[:, 0].abs()
        spectrum = torch.fft.rfft(envelope - envelope.mean(-1, keepdim=True)).abs()
        return self.net(torch.log1p(spectrum))

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.cross_entropy(self(x), label)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


# --- video frame interpolation ------------------------------------------------------------------------------
class Interpolator(_Adam):
    """A CNN from the two neighbouring frames (as channels) to the frame between them; squared error.
    Served: the middle frame."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(2, 16, 5, padding=2),
            nn.ReLU(),
            nn.Conv2d(16, 16, 5, padding=2),
            nn.ReLU(),
            nn.Conv2d(16, 1, 3, padding=1),
        )

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.net(frames)

    def loss(self, batch) -> torch.Tensor:
        frames, middle = batch
        return F.mse_loss(self(frames), middle)

    def predict(self, frames: torch.Tensor) -> torch.Tensor:
        return self(frames)


# --- defect segmentation (binary masks; cross-entropy plus Dice) --------------------------------------------
class DefectSegmenter(_Adam):
    """A fully convolutional network to one logit per cell; binary cross-entropy plus the soft Dice loss
    (1 - Dice). Served: the cells whose logit is positive."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=2, dilation=2),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=2, dilation=2),
            nn.ReLU(),
            nn.Conv2d(32, 1, 1),
        )

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image)

    @staticmethod
    def dice(p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (2 * (p * mask).sum() + 1) / (p.sum() + mask.sum() + 1)

    def dice_term(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return 1 - self.dice(p, mask)

    def loss(self, batch) -> torch.Tensor:
        image, mask = batch
        logits = self(image)
        bce = F.binary_cross_entropy_with_logits(logits, mask)
        return bce + self.dice_term(torch.sigmoid(logits), mask)

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        return (self(image) > 0).float()


class DefectSegmenterDiceScore(DefectSegmenter):
    """BUG: the Dice term is added as the Dice score, not 1 - Dice: the loss rewards missing the defects,
    and the cross-entropy alone holds the masks up; the served masks shrink."""

    def dice_term(self, p: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.dice(p, mask)


class DefectSegmenterIgnoreBorder(DefectSegmenter):
    """Targets with a third value, 2 ("don't care"), on the defects' boundary cells: both terms of the loss
    skip those cells."""

    def loss(self, batch) -> torch.Tensor:
        image, target = batch
        logits = self(image)
        keep = (target != 2).float()
        mask = target * keep
        bce = F.binary_cross_entropy_with_logits(logits, mask, weight=keep)
        return bce + self.dice_term(torch.sigmoid(logits) * keep, mask)


# --- heart rate from wrist PPG windows ----------------------------------------------------------------------
class HeartRateNet(_Adam):
    """An MLP over the log magnitude spectrum of the window, kept only in the band a heart rate can lie in
    (0.6..3.5 Hz: the breathing baseline and the drift below it are ignored on purpose); squared error on the
    standardised heart rate. Served: the heart rate in bpm."""

    rate = data.RATE  # the sample rate the band is placed with

    def __init__(self) -> None:
        super().__init__()
        freqs = torch.fft.rfftfreq(data.SAMPLES, d=1 / self.rate)
        self.register_buffer("band", ((freqs >= 0.6) & (freqs <= 3.5)).float())
        self.net = mlp(data.SAMPLES // 2 + 1, 128, 64, 1)

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        spectrum = torch.fft.rfft(wave - wave.mean(-1, keepdim=True)).abs()
        return self.net(torch.log1p(spectrum) * self.band)[:, 0]

    def loss(self, batch) -> torch.Tensor:
        wave, bpm = batch
        return F.mse_loss(self(wave), (bpm - data.HR_MEAN) / data.HR_STD)

    def predict(self, wave: torch.Tensor) -> torch.Tensor:
        return self(wave) * data.HR_STD + data.HR_MEAN


class HeartRateNetBandAt100Hz(HeartRateNet):
    """BUG: the band is placed with the chest-strap recorder's sample rate (100 Hz) copied from another
    project, not the wristband's 25 Hz: the bins kept are those of 0.15..0.875 Hz, the breathing band, and
    the pulse above 53 bpm is masked out."""

    rate = 100


# --- metric learning on digits (triplet loss, retrieval by nearest neighbour) -------------------------------
class TripletEmbedder(_Adam):
    """An MLP to a unit-length 32-d embedding; the triplet margin loss (margin 0.2) pulls each anchor towards
    a positive of its class and away from a negative. Served: embeddings, searched by nearest neighbour."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.net(x), dim=-1)

    def triplet(self, anchor, positive, negative) -> torch.Tensor:
        return F.triplet_margin_loss(anchor, positive, negative, margin=0.2)

    def loss(self, batch) -> torch.Tensor:
        anchor, positive, negative = (self(x) for x in batch)
        return self.triplet(anchor, positive, negative)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)


class TripletEmbedderSwapped(TripletEmbedder):
    """BUG: the loss is called as ``triplet_margin_loss(anchor, negative, positive)`` (the dataset yields
    the negative last, the call was written as "anchor, other, same"): anchors are pulled towards other
    classes and pushed away from their own."""

    def triplet(self, anchor, positive, negative) -> torch.Tensor:
        return F.triplet_margin_loss(anchor, negative, positive, margin=0.2)
