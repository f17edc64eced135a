"""Sealed gallery R's models (half ``s``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _s_data as data
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


# --- chord recognition from chroma frames -------------------------------------------------------------------
class ChordNet(_Adam):
    """An MLP from a 12-bin chroma frame to 24 chords (12 major, 12 minor). Served: the chord."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.PITCHES, 128, 128, data.CHORDS)

    def forward(self, frame: torch.Tensor) -> torch.Tensor:
        return self.net(frame)

    def loss(self, batch) -> torch.Tensor:
        frame, chord = batch
        return F.cross_entropy(self(frame), chord)

    def predict(self, frame: torch.Tensor) -> torch.Tensor:
        return self(frame).argmax(-1)


# --- crop-type classification from satellite time series ----------------------------------------------------
class CropNet(_Adam):
    """A GRU over a field's monthly band values (batch, months, bands), its last state read by a linear head
    over the crops. Served: the crop."""

    batch_first = True

    def __init__(self, bands: int = data.BANDS) -> None:
        super().__init__()
        self.gru = nn.GRU(bands, 48, batch_first=self.batch_first)
        self.head = nn.Linear(48, data.CROPS)

    def forward(self, series: torch.Tensor) -> torch.Tensor:
        states, _ = self.gru(series)
        return self.head(states[:, -1])

    def loss(self, batch) -> torch.Tensor:
        series, crop = batch
        return F.cross_entropy(self(series), crop)

    def predict(self, series: torch.Tensor) -> torch.Tensor:
        return self(series).argmax(-1)


class CropNetNotBatchFirst(CropNet):
    """BUG: the GRU is built without ``batch_first=True`` (its default is False) while the batches are
    (batch, months, bands): it runs along the batch, treating the 12 months as 12 parallel sequences, and
    ``states[:, -1]`` is December's state after reading the December of every earlier field in the batch."""

    batch_first = False


class CloudyCropNet(CropNet):
    """The crop GRU reading five channels: the four bands (0 where a month was cloudy) and the month's
    seen flag."""

    def __init__(self) -> None:
        super().__init__(bands=data.BANDS + 1)


# --- heartbeat classification -------------------------------------------------------------------------------
class BeatNet(_Adam):
    """An MLP (with dropout) over a heartbeat's 64 samples and its two RR intervals, to three beat classes.
    Served: the class."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.BEAT + 2, 128, 64, data.BEAT_CLASSES, dropout=0.1)

    def forward(self, beat: torch.Tensor) -> torch.Tensor:
        return self.net(beat)

    def loss(self, batch) -> torch.Tensor:
        beat, label = batch
        return F.cross_entropy(self(beat), label)

    def predict(self, beat: torch.Tensor) -> torch.Tensor:
        return self(beat).argmax(-1)


class BeatNetNLLOnLogits(BeatNet):
    """BUG: the head was meant to end in ``log_softmax`` (the loss is ``nll_loss``, copied from a tutorial
    whose network returned log-probabilities), but returns raw scores: the loss is minus the true class's
    score, which falls without bound as that score grows, and nothing pushes the other classes' scores
    down."""

    def loss(self, batch) -> torch.Tensor:
        beat, label = batch
        return F.nll_loss(self(beat), label)


class ManualBeatNet(BeatNet):
    """The heartbeat MLP by manual optimisation: each step's gradients are clipped to norm 1 before Adam
    steps."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def zero_grads(self, optimizer) -> None:
        optimizer.zero_grad()

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        self.zero_grads(optimizer)
        loss = self.loss(batch)
        self.manual_backward(loss)
        self.clip_gradients(optimizer, gradient_clip_val=1.0, gradient_clip_algorithm="norm")
        optimizer.step()
        self.log("train_loss", loss)
        return loss


class ManualBeatNetNeverZeroed(ManualBeatNet):
    """BUG: the manual loop never calls ``optimizer.zero_grad()`` (automatic optimisation did it): every
    step's gradient is added to all the earlier ones, so Adam steps along the sum of the whole run's
    gradients, long after they stopped pointing downhill."""

    def zero_grads(self, optimizer) -> None:
        pass


# --- learning from a crowd of annotators --------------------------------------------------------------------
class CrowdNet(_Adam):
    """An MLP on the digits trained on soft labels: the share of each class among an item's crowd votes
    (-1 pads ignored), so the loss keeps the votes' entropy as a floor. Served: the digit."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, votes = batch
        return F.cross_entropy(self(x), data.soft_labels(votes))

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


# --- discrete-time survival (logistic hazard) ---------------------------------------------------------------
class HazardNet(_Adam):
    """An MLP from a customer's covariates to the logit of the churn hazard in each of 12 months, trained by
    binary cross-entropy over the months the customer was at risk: 0 for each month they stayed, 1 for the
    month they churned (a censored customer's last month is a month stayed). Served: the survival curve."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.COVARIATES, 64, data.HORIZON)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def targets(self, month: torch.Tensor, event: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Per month: churned (1) or stayed (0), and whether the customer was followed in it."""
        months = torch.arange(data.HORIZON)
        at_risk = (months <= month[:, None]).float()
        churned = ((months == month[:, None]) & (event[:, None] == 1)).float()
        return churned, at_risk

    def loss(self, batch) -> torch.Tensor:
        x, month, event = batch
        churned, at_risk = self.targets(month, event)
        cells = F.binary_cross_entropy_with_logits(self(x), churned, reduction="none")
        return (cells * at_risk).sum() / at_risk.sum()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(1 - torch.sigmoid(self(x)), 1)


class HazardNetCensoredAsChurn(HazardNet):
    """BUG: the target marks the last observed month of every record as a churn, ignoring the event flag:
    customers who were only censored (joined recently, or stayed all year) are taught to have left."""

    def targets(self, month: torch.Tensor, event: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        months = torch.arange(data.HORIZON)
        at_risk = (months <= month[:, None]).float()
        churned = (months == month[:, None]).float()
        return churned, at_risk


class HazardNetNoRiskSet(HazardNet):
    """BUG: the at-risk mask is all ones: the months after a record ends (after a churn, or after the data
    stop) are scored as months stayed, so late hazards are learned from customers who were never seen
    then."""

    def targets(self, month: torch.Tensor, event: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        churned, at_risk = super().targets(month, event)
        return churned, torch.ones_like(at_risk)


# --- polyphonic sound event detection -----------------------------------------------------------------------
class EventDetector(_Adam):
    """1-D convolutions over time (the mel bands as channels) to a logit per event class and frame; binary
    cross-entropy per class (events overlap). Served: each event's activity (probability over 0.5) per
    frame."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(data.MELS, 64, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(64, 64, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(64, data.EVENTS, 1),
        )

    def forward(self, spectra: torch.Tensor) -> torch.Tensor:
        return self.net(spectra)

    def loss(self, batch) -> torch.Tensor:
        spectra, labels = batch
        return F.binary_cross_entropy_with_logits(self(spectra), labels)

    def activity(self, logits: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(logits)

    def predict(self, spectra: torch.Tensor) -> torch.Tensor:
        return self.activity(self(spectra)) > 0.5


class EventDetectorSoftmax(EventDetector):
    """BUG: the loss is ``cross_entropy`` over the event classes (it accepts the multi-hot frame labels as
    if they were probabilities): the classes compete for each frame, two overlapping events can each get
    at most half of it, and a silent frame (all zeros) costs nothing whatever is predicted."""

    def loss(self, batch) -> torch.Tensor:
        spectra, labels = batch
        return F.cross_entropy(self(spectra), labels)

    def activity(self, logits: torch.Tensor) -> torch.Tensor:
        return logits.softmax(1)


class EventDetectorEMA(EventDetector):
    """The event detector served (and validated) through an exponential moving average of its weights,
    updated after every optimizer step with decay 0.999 and the usual warm-up, ``min(0.999, (1 + n) / (10 +
    n))`` after n updates, so a short run's average follows its weights; the averaged copy takes no
    gradient."""

    decay, warmup = 0.999, True

    def __init__(self) -> None:
        super().__init__()
        self.ema = copy.deepcopy(self.net).requires_grad_(False)
        self.updates = 0

    def forward(self, spectra: torch.Tensor) -> torch.Tensor:
        return self.net(spectra) if self.training else self.ema(spectra)

    @torch.no_grad()
    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        self.updates += 1
        decay = min(self.decay, (1 + self.updates) / (10 + self.updates)) if self.warmup else self.decay
        for averaged, live in zip(self.ema.parameters(), self.net.parameters(), strict=True):
            averaged.lerp_(live, 1 - decay)


class EventDetectorEMANoWarmup(EventDetectorEMA):
    """BUG: the average's decay is the fixed 0.999 of a long-run recipe, without the warm-up: after this
    run's 150 updates the served weights are still 86% those of the untrained network."""

    warmup = False


# --- learning from label proportions ------------------------------------------------------------------------
class ProportionNet(_Adam):
    """An MLP classifying each digit of a bag; the bag's predicted proportions are the mean of its digits'
    class probabilities, scored by cross-entropy against the bag's known proportions (no digit has a
    label). Served: each digit's class."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        members, shares = batch
        proportions = self(members).softmax(-1).mean(1)
        return -(shares * torch.log(proportions + 1e-8)).sum(-1).mean()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class ProportionNetStepDecay(ProportionNet):
    """The proportion network with a step decay: the learning rate is divided by 10 after 6 epochs (a
    ``StepLR`` scheduled per epoch)."""

    interval = "epoch"

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=6, gamma=0.1)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": self.interval}}


class ProportionNetDecayedPerStep(ProportionNetStepDecay):
    """BUG: the schedule dict says ``"interval": "step"`` (copied from a warm-up recipe) while ``step_size``
    counts epochs: the rate is divided by 10 every 6 batches, and after the first 30 batches of a 250-batch
    run it is too small to move the weights."""

    interval = "step"
