"""Sealed gallery V's models (half ``v``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _v_data as data
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


# --- traffic-sign recognition -------------------------------------------------------------------------------
class SignNet(_Adam):
    """A small CNN over the RGB crop (channels red, green, blue), six classes; cross-entropy. Served: the
    class of an RGB crop."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 9, data.SIGN_CLASSES),
        )

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image)

    def loss(self, batch) -> torch.Tensor:
        image, label = batch
        return F.cross_entropy(self(image), label)

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        return self(image).argmax(-1)


# --- seismic phase picking ----------------------------------------------------------------------------------
class Picker(_Adam):
    """A fully convolutional network (dilated 1-D convolutions) giving every sample of the trace a logit of
    being the first arrival; binary cross-entropy against a Gaussian (0.05 s) around the onset, as PhaseNet
    labels picks, so the loss never reaches 0. Served: the pick time (s), the most probable sample."""

    sigma = 5.0  # samples

    def __init__(self) -> None:
        super().__init__()
        layers: list[nn.Module] = [nn.Conv1d(1, 24, 7, padding=3), nn.ReLU()]
        for dilation in (2, 4, 8):
            layers += [nn.Conv1d(24, 24, 5, padding=2 * dilation, dilation=dilation), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Conv1d(24, 1, 1))

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        return self.net(wave)[:, 0]

    def centre(self, onset: torch.Tensor) -> torch.Tensor:
        """The onset's sample index (the catalogue gives seconds)."""
        return onset * data.RATE

    def target(self, onset: torch.Tensor, length: int) -> torch.Tensor:
        t = torch.arange(length, device=onset.device).float()
        return torch.exp(-((t - self.centre(onset)[:, None]) ** 2) / (2 * self.sigma**2))

    def loss(self, batch) -> torch.Tensor:
        wave, onset = batch
        logits = self(wave)
        return F.binary_cross_entropy_with_logits(logits, self.target(onset, logits.shape[-1]))

    def predict(self, wave: torch.Tensor) -> torch.Tensor:
        return self(wave).argmax(-1).float() / data.RATE


class PickerOnsetInSeconds(Picker):
    """BUG: the Gaussian is centred on the catalogue's onset as it comes, in seconds (0.6..1.8), as if it
    were a sample index: every target peaks in the first two samples of the trace."""

    def centre(self, onset: torch.Tensor) -> torch.Tensor:
        return onset


class PickerSoftmaxOverTime(Picker):
    """The picker with one softmax over the trace's samples: cross-entropy against the Gaussian normalised
    to a distribution (the pick is one sample of the trace). Its floor is the target's entropy, about
    3.03 nats, declared as ``loss_offset``."""

    loss_offset = 0.5 * math.log(2 * math.pi * math.e * Picker.sigma**2)

    def loss(self, batch) -> torch.Tensor:
        wave, onset = batch
        logits = self(wave)
        target = self.target(onset, logits.shape[-1])
        target = target / target.sum(-1, keepdim=True)
        return -(target * F.log_softmax(logits, -1)).sum(-1).mean()


# --- semantic textual similarity with a bi-encoder ----------------------------------------------------------
class SimilarityNet(_Adam):
    """A bi-encoder: each sentence is the mean of its token embeddings (padding excluded) through an MLP,
    and the pair's similarity the cosine of the two; squared error against the score over 5. Served: 5 x the
    cosine, floored at 0."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.EmbeddingBag(data.VOCAB, 32, mode="mean", padding_idx=0)
        self.proj = mlp(32, 64, 32)

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.proj(self.embed(tokens))

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return F.cosine_similarity(self.encode(a), self.encode(b), dim=-1)

    def target(self, score: torch.Tensor) -> torch.Tensor:
        return score / 5

    def loss(self, batch) -> torch.Tensor:
        a, b, score = batch
        return F.mse_loss(self(a, b), self.target(score))

    def predict(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return 5 * self(a, b).clamp(min=0)


class SimilarityNetRawScores(SimilarityNet):
    """BUG: the cosine is regressed on the raw 0..5 score (the division by 5 forgotten): every pair scored
    above 1 asks for a cosine above 1, so the encoder learns to make all sentences alike."""

    def target(self, score: torch.Tensor) -> torch.Tensor:
        return score


# --- no-reference image quality assessment ------------------------------------------------------------------
class QualityNet(_Adam):
    """An MLP over the 8 x 8 scan; squared error on the opinion score. Served: the predicted score."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 64, 1)

    def scale(self, scan: torch.Tensor) -> torch.Tensor:
        return scan - 0.5  # centred on mid-grey, the scanner's range kept

    def forward(self, scan: torch.Tensor) -> torch.Tensor:
        return self.net(self.scale(scan).flatten(1))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        scan, mos = batch
        return F.mse_loss(self(scan), mos)

    def predict(self, scan: torch.Tensor) -> torch.Tensor:
        return self(scan)


class QualityNetPerImageStandardised(QualityNet):
    """BUG: each scan is standardised on its own (zero mean, unit deviation, as classifiers normalise): the
    contrast, half of what the score depends on, is divided away."""

    def scale(self, scan: torch.Tensor) -> torch.Tensor:
        flat = scan.flatten(1)
        mean, std = flat.mean(1), flat.std(1)
        return (scan - mean[:, None, None, None]) / (std[:, None, None, None] + 1e-6)


class QualityNetBounded(QualityNet):
    """The quality MLP with a bounded head: 1 + 4 x sigmoid, so every answer lies on the 1..5 scale."""

    def forward(self, scan: torch.Tensor) -> torch.Tensor:
        return 1 + 4 * torch.sigmoid(super().forward(scan))


# --- indoor positioning from Wi-Fi fingerprints -------------------------------------------------------------
class Locator(_Adam):
    """An MLP from the 12 scaled signal strengths to the position, trained on positions standardised with
    the floor's extent (centre and half-size buffers); squared error. Served: (x, y) in metres."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(len(data.APS), 128, 128, 2)
        self.register_buffer("centre", torch.tensor(data.FLOOR) / 2)
        self.register_buffer("half_size", torch.tensor(data.FLOOR) / 2)

    def forward(self, rssi: torch.Tensor) -> torch.Tensor:
        return self.net(rssi)

    def loss(self, batch) -> torch.Tensor:
        rssi, xy = batch
        return F.mse_loss(self(rssi), (xy - self.centre) / self.half_size)

    def predict(self, rssi: torch.Tensor) -> torch.Tensor:
        return self(rssi) * self.half_size + self.centre


class LocatorStepDecay(Locator):
    """The locator with a step decay: the rate halves every 4 epochs (``StepLR(step_size=4)``, stepped once
    an epoch)."""

    interval = "epoch"

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": self.interval}}


class LocatorStepDecayPerBatch(LocatorStepDecay):
    """BUG: the schedule dict says ``"interval": "step"``: the rate halves every 4 batches, and after the
    first hundred the network has stopped learning."""

    interval = "step"


# --- gaze estimation from eye crops -------------------------------------------------------------------------
class GazeNet(_Adam):
    """An MLP over the eye crop to (yaw, pitch) in units of 40 degrees; squared error. Served: degrees."""

    unit = 40.0

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.EYE[0] * data.EYE[1], 128, 64, 2)

    def forward(self, eye: torch.Tensor) -> torch.Tensor:
        return self.net(eye.flatten(1))

    def loss(self, batch) -> torch.Tensor:
        eye, gaze = batch
        return F.mse_loss(self(eye), gaze / self.unit)

    def predict(self, eye: torch.Tensor) -> torch.Tensor:
        return self(eye) * self.unit


class GazeNetTanh(GazeNet):
    """The gaze MLP with a tanh head: the angles over 40 degrees lie well inside (-1, 1)."""

    def forward(self, eye: torch.Tensor) -> torch.Tensor:
        return torch.tanh(super().forward(eye))


class GazeNetTanhDegrees(GazeNetTanh):
    """BUG: the tanh head (copied from a model of normalised angles) regressed straight on degrees: the
    output cannot leave (-1, 1) degree, and every gaze is answered as nearly straight ahead."""

    unit = 1.0


class GazeNetManual(GazeNet):
    """The gaze MLP optimised by hand (manual optimisation, as the user's other models that step two
    optimizers are), its gradients clipped to norm 1 before each step."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        loss = self.loss(batch)
        optimizer.zero_grad()
        self.manual_backward(loss)
        self.clip_gradients(optimizer, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
        optimizer.step()
        self.log("train_loss", loss)
        return loss


class GazeNetManualNoZeroGrad(GazeNetManual):
    """BUG: the hand-written step never calls ``zero_grad()``: every backward adds to the gradients of all
    the batches before it, and each step follows the sum of the whole run's gradients."""

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        loss = self.loss(batch)
        self.manual_backward(loss)
        self.clip_gradients(optimizer, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
        optimizer.step()
        self.log("train_loss", loss)
        return loss
