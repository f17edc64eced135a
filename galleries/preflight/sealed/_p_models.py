"""Sealed gallery P's models (half ``p``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import copy
from functools import cache

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _p_data as data
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


# --- pitch estimation (CREPE-like: a distribution over pitch bins) ------------------------------------------
class PitchNet(_Adam):
    """An MLP over the log magnitude spectrum of the Hann-windowed frame, one sigmoid per pitch bin (50 cents
    apart); binary cross-entropy against a Gaussian blur (50 cents) of the true pitch over the bins, so the
    loss never reaches 0. Served: the pitch in cents above 100 Hz, a weighted mean of the bins around the
    peak."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.FRAME // 2 + 1, 256, 128, data.BINS)
        self.register_buffer("window", torch.hann_window(data.FRAME))
        self.register_buffer("centres", torch.arange(data.BINS).float() * data.BIN_CENTS)

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        spectrum = torch.fft.rfft(wave * self.window).abs()
        return self.net(torch.log(spectrum + 1e-3))

    def target(self, f0: torch.Tensor) -> torch.Tensor:
        distance = data.cents(f0)[:, None] - self.centres
        return torch.exp(-(distance**2) / (2 * data.SIGMA_CENTS**2))

    def loss(self, batch) -> torch.Tensor:
        wave, f0 = batch
        return F.binary_cross_entropy_with_logits(self(wave), self.target(f0))

    def predict(self, wave: torch.Tensor) -> torch.Tensor:
        activation = torch.sigmoid(self(wave))
        near = (activation.argmax(-1, keepdim=True) + torch.arange(-2, 3)).clamp(0, data.BINS - 1)
        weight = activation.gather(1, near)
        return (weight * self.centres[near]).sum(1) / weight.sum(1)


class PitchNetBlurPrecedence(PitchNet):
    """BUG: the Gaussian is written ``exp(-d**2 / 2 * sigma**2)``: it divides by 2 and multiplies by
    sigma squared, so the blur is 0.02 cents wide and every target bin is (almost exactly) 0."""

    def target(self, f0: torch.Tensor) -> torch.Tensor:
        distance = data.cents(f0)[:, None] - self.centres
        return torch.exp(-(distance**2) / 2 * data.SIGMA_CENTS**2)


class PitchNetWarmup(PitchNet):
    """The pitch network with a linear learning-rate warm-up over its first 100 optimizer steps (a
    ``LambdaLR`` stepped every batch), then a constant rate."""

    interval = "step"

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 100))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": warmup, "interval": self.interval}}


class PitchNetWarmupPerEpoch(PitchNetWarmup):
    """BUG: the warm-up's schedule dict says ``"interval": "epoch"`` (Lightning's default, as when the
    scheduler is returned bare): it advances once per epoch, so after 6 epochs the rate is still 6% of its
    peak."""

    interval = "epoch"


# --- sleep staging: temporal convolutions over consecutive 30-second epochs ---------------------------------
@cache
def _training_stages() -> torch.Tensor:
    return data.nights(20, 1)[1]


class SleepStager(_Adam):
    """Per-epoch features encoded by an MLP, then dilated 1-D convolutions across the batch, which holds
    consecutive epochs of the recordings (the loader does not shuffle): each epoch is read with 14
    neighbours on either side, as a sleep scorer reads it; class-weighted cross-entropy (weights from the
    training hypnograms, inverse frequency: N1 is rare). Served: the stage of every epoch of a night."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = mlp(data.FEATURES, 32, 32)
        self.context = nn.Sequential(
            nn.Conv1d(32, 32, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(32, 32, 5, padding=4, dilation=2),
            nn.ReLU(),
            nn.Conv1d(32, 32, 5, padding=8, dilation=4),
            nn.ReLU(),
        )
        self.head = nn.Linear(32, data.STAGES)
        self.register_buffer("weights", self.class_weights(_training_stages()))

    def class_weights(self, stages: torch.Tensor) -> torch.Tensor:
        return data.stage_weights(stages)

    def forward(self, epochs: torch.Tensor) -> torch.Tensor:
        h = self.encoder(epochs).T[None]  # (1, channels, epochs in order)
        return self.head(self.context(h)[0].T)

    def loss(self, batch) -> torch.Tensor:
        epochs, stages = batch
        return F.cross_entropy(self(epochs), stages, weight=self.weights)

    def predict(self, night: torch.Tensor) -> torch.Tensor:
        return self(night).argmax(-1)


class SleepStagerFrequencyWeights(SleepStager):
    """BUG: the class weights are the stages' frequencies (``counts / counts.sum()``), not their inverse: the
    common stage N2 weighs most and the rare N1 least, so N1 is rarely scored."""

    def class_weights(self, stages: torch.Tensor) -> torch.Tensor:
        counts = torch.bincount(stages, minlength=data.STAGES).float()
        return counts / counts.sum()


# --- remaining useful life from sensor windows --------------------------------------------------------------
class RULNet(_Adam):
    """An MLP over a flattened window of 30 cycles x 6 sensors; squared error on the capped remaining life
    over 125 (constant 1 for young engines, which show no wear). Served: the remaining life in cycles."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.WINDOW * data.SENSORS, 128, 64, 1)

    def scale(self, window: torch.Tensor) -> torch.Tensor:
        return window  # the sensors are calibrated to a common scale upstream

    def forward(self, window: torch.Tensor) -> torch.Tensor:
        return self.net(self.scale(window).flatten(1))

    def loss(self, batch) -> torch.Tensor:
        window, rul = batch
        return F.mse_loss(self(window), rul)

    def predict(self, window: torch.Tensor) -> torch.Tensor:
        return self(window)[:, 0].clamp(0, 1) * data.RUL_CAP


class RULNetWindowStandardised(RULNet):
    """BUG: each window is standardised per sensor (instance normalisation from forecasting code): the level
    of wear, which is what tells the remaining life, is removed, and a linear rise looks the same at every
    age."""

    def scale(self, window: torch.Tensor) -> torch.Tensor:
        return (window - window.mean(1, keepdim=True)) / (window.std(1, keepdim=True) + 1e-6)


# --- temporal action segmentation (MS-TCN-like single stage) ------------------------------------------------
class Segmenter(_Adam):
    """Dilated residual temporal convolutions over per-frame features; cross-entropy on the annotated frames
    (-100 ignored) plus 0.15 x the truncated smoothing loss of MS-TCN (squared differences of neighbouring
    frames' log-probabilities, clamped at 16). Served: each frame's action."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Conv1d(data.DIM, 32, 1)
        self.layers = nn.ModuleList(nn.Conv1d(32, 32, 3, padding=d, dilation=d) for d in (1, 2, 4, 8))
        self.out = nn.Conv1d(32, data.ACTIONS, 1)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        h = self.inp(features.transpose(1, 2))
        for layer in self.layers:
            h = h + F.relu(layer(h))
        return self.out(h)

    def loss(self, batch) -> torch.Tensor:
        features, labels = batch
        logits = self(features)
        log_p = F.log_softmax(logits, 1)
        smooth = ((log_p[:, :, 1:] - log_p.detach()[:, :, :-1]) ** 2).clamp(max=16).mean()
        return F.cross_entropy(logits, labels, ignore_index=-100) + 0.15 * smooth

    def predict(self, features: torch.Tensor) -> torch.Tensor:
        return self(features).argmax(1)


# --- colourisation: chrominance from luminance --------------------------------------------------------------
class Colouriser(_Adam):
    """A small dilated CNN with batch norm from luminance to the (a, b) chrominance; squared error. Served:
    the predicted chrominance."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, padding=2, dilation=2),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, padding=2, dilation=2),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.Conv2d(32, 2, 1),
        )

    def forward(self, lum: torch.Tensor) -> torch.Tensor:
        return self.net(lum)

    def loss(self, batch) -> torch.Tensor:
        lum, ab = batch
        return F.mse_loss(self(lum), ab)

    def predict(self, lum: torch.Tensor) -> torch.Tensor:
        return self(lum)


class ColouriserEMA(Colouriser):
    """The colouriser with an exponential moving average of its weights and buffers (decay .95, updated after
    every batch): training runs the live network, evaluation and serving the average."""

    decay = 0.95

    def __init__(self) -> None:
        super().__init__()
        self.ema = copy.deepcopy(self.net).requires_grad_(False)

    def configure_optimizers(self):
        return torch.optim.Adam(self.net.parameters(), lr=self.lr)

    def averaged(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return list(zip(self.ema.state_dict().values(), self.net.state_dict().values(), strict=True))

    @torch.no_grad()
    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        for average, live in self.averaged():
            if average.is_floating_point():
                average.lerp_(live, 1 - self.decay)
            else:
                average.copy_(live)

    def forward(self, lum: torch.Tensor) -> torch.Tensor:
        return self.net(lum) if self.training else self.ema(lum)


class ColouriserEMAParametersOnly(ColouriserEMA):
    """BUG: the average runs over ``parameters()`` only: the batch-norm running statistics of the averaged
    network are never updated from their initial 0 and 1, and the served network normalises with them."""

    def averaged(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        return list(zip(self.ema.parameters(), self.net.parameters(), strict=True))


# --- image orientation: how many quarter turns a scan was rotated by ----------------------------------------
class OrientationNet(_Adam):
    """An MLP over the 8 x 8 scan, four classes (quarter turns counter-clockwise); batches carry the digit's
    own class too, which the task does not use. Served: the number of turns, undone by :meth:`upright`."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 4)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image.flatten(1))

    def loss(self, batch) -> torch.Tensor:
        image, turns, _digit = batch
        return F.cross_entropy(self(image), turns)

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        return self(image).argmax(-1)

    def upright(self, image: torch.Tensor) -> torch.Tensor:
        """The served correction: each scan turned back by the predicted number of turns."""
        return torch.stack([data.turn(x, -k) for x, k in zip(image, self.predict(image), strict=True)])


class OrientationNetRandomFeatures(OrientationNet):
    """The orientation MLP with its hidden layer frozen on purpose at its random initialisation (a random-
    feature model: only the head trains; the frozen layer is still in the optimizer, which skips it)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 512, 4)
        self.net[0].requires_grad_(False)
