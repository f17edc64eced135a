"""Sealed gallery R's models (half ``r``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

from functools import cache

import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _r_data as data
from galleries.sealed import AdamModule, mlp


# --- visual addition: the sum of two handwritten digits -----------------------------------------------------
class DigitAdder(AdamModule):
    """One shared encoder reads each of the two digits; a head reads both codes and scores the 19 possible
    sums (cross-entropy). Served: the most likely sum."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = mlp(64, 128, 32)
        self.head = mlp(64, 64, data.SUMS)

    def encode(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.encoder(a), self.encoder(b)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self.head(torch.cat(self.encode(a, b), -1))

    def loss(self, batch) -> torch.Tensor:
        a, b, total = batch
        return F.cross_entropy(self(a, b), total)

    def predict(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return self(a, b).argmax(-1)


class DigitAdderFirstTwice(DigitAdder):
    """BUG: a copy-paste slip encodes the first digit twice (``self.encoder(a), self.encoder(a)``): the head
    never sees the second digit."""

    def encode(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.encoder(a), self.encoder(a)


@cache
def _pretrained_encoder_state() -> dict[str, torch.Tensor]:
    """An encoder pretrained elsewhere, as a digit classifier for the digits 0..4 only (from the training
    digits, 300 Adam steps, seeded apart from the global RNG)."""
    with torch.random.fork_rng():
        torch.manual_seed(99)
        encoder, probe = mlp(64, 128, 32), nn.Linear(32, 5)
        x, y = data.digits("train", (64,))
        x, y = x[y < 5], y[y < 5]
        optimizer = torch.optim.Adam([*encoder.parameters(), *probe.parameters()], lr=3e-3)
        for _ in range(300):
            rows = torch.randint(len(y), (64,))
            loss = F.cross_entropy(probe(F.relu(encoder(x[rows]))), y[rows])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return {name: value.detach().clone() for name, value in encoder.state_dict().items()}


class DigitAdderWarmStart(DigitAdder):
    """The adder starting from the pretrained encoder (a classifier of 0..4), frozen for the first epoch so
    the fresh head does not wreck it, then fine-tuned with the rest: the optimizer holds every parameter from
    the start (Adam skips those without gradients)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder.load_state_dict(_pretrained_encoder_state())
        self.encoder.requires_grad_(False)

    def on_train_epoch_start(self) -> None:
        if self.current_epoch == 1:
            self.encoder.requires_grad_(True)


class DigitAdderWarmStartOptimizerTrainableOnly(DigitAdderWarmStart):
    """BUG: the optimizer is built from the parameters that require gradients when it is configured, so it
    never holds the encoder's: unfreezing it after the first epoch gives it gradients that no step applies,
    and the encoder stays a classifier of 0..4."""

    def configure_optimizers(self):
        return torch.optim.Adam([p for p in self.parameters() if p.requires_grad], lr=self.lr)


# --- spectral unmixing: abundances on the simplex -----------------------------------------------------------
class Unmixer(AdamModule):
    """An MLP from a pixel's spectrum to the abundances of the four materials (a softmax over the materials);
    the KL divergence from the true abundances (0 at a perfect answer). Served: the abundances."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.BANDS, 64, 64, data.MATERIALS)

    def log_abundances(self, spectra: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.net(spectra), -1)

    def loss(self, batch) -> torch.Tensor:
        spectra, abundance = batch
        return F.kl_div(self.log_abundances(spectra), abundance, reduction="batchmean")

    def predict(self, spectra: torch.Tensor) -> torch.Tensor:
        return self.log_abundances(spectra).exp()


class UnmixerSoftmaxOverBatch(Unmixer):
    """BUG: the softmax is taken over dim 0 (the rows of the batch) instead of the materials: each material's
    column sums to 1 across the batch, and what a pixel is served depends on the batch it comes in."""

    def log_abundances(self, spectra: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.net(spectra), 0)


class UnmixerKLOnProbabilities(Unmixer):
    """BUG: ``F.kl_div`` is passed the predicted probabilities where it expects log-probabilities: the loss
    is sum(t log t) - sum(t p), minimised by putting all the mass on each pixel's main material."""

    def loss(self, batch) -> torch.Tensor:
        spectra, abundance = batch
        return F.kl_div(self.log_abundances(spectra).exp(), abundance, reduction="batchmean")


class UnmixerSoftCrossEntropy(Unmixer):
    """The unmixer trained by cross-entropy with the abundances as soft targets: the loss keeps the targets'
    entropy (about 1 nat) at a perfect answer; the gradients are those of the KL."""

    def loss(self, batch) -> torch.Tensor:
        spectra, abundance = batch
        return -(abundance * self.log_abundances(spectra)).sum(-1).mean()


# --- discrete-time survival: one hazard per interval --------------------------------------------------------
class HazardNet(AdamModule):
    """An MLP from the covariates to the logit of the hazard in each of the ten intervals (a logistic hazard
    model); binary cross-entropy over the intervals a patient was at risk in: each interval before the
    observed one is survived, and the observed one holds the event if it was seen (a patient censored there
    is not followed through it). Served: the survival curve."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.COVARIATES, 64, 64, data.INTERVALS)

    def targets(self, time: torch.Tensor, seen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The per-interval labels and the at-risk mask."""
        interval = torch.arange(data.INTERVALS)
        label = (interval == time[:, None]).float() * seen[:, None]
        at_risk = (interval < time[:, None]) | ((interval == time[:, None]) & (seen[:, None] > 0))
        return label, at_risk.float()

    def loss(self, batch) -> torch.Tensor:
        x, time, seen = batch
        label, at_risk = self.targets(time, seen)
        bce = F.binary_cross_entropy_with_logits(self.net(x), label, reduction="none")
        return (bce * at_risk).sum() / at_risk.sum()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cumprod(1 - torch.sigmoid(self.net(x)), 1)


class HazardNetCensoredAsEvents(HazardNet):
    """BUG: the labels are built from the time column alone (``interval == time``): every patient who drops
    out is counted as an event in the interval they left in, and hazards come out far too high."""

    def targets(self, time: torch.Tensor, seen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        interval = torch.arange(data.INTERVALS)
        label = (interval == time[:, None]).float()
        return label, (interval <= time[:, None]).float()


class HazardNetNoAtRiskMask(HazardNet):
    """BUG: the at-risk mask is left out (all ones): the intervals after a patient's event or drop-out are
    scored as survived, and hazards come out too low."""

    def targets(self, time: torch.Tensor, seen: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        label, at_risk = super().targets(time, seen)
        return label, torch.ones_like(at_risk)


# --- heartbeat classification from single beats -------------------------------------------------------------
class BeatClassifier(AdamModule):
    """An MLP over the 64 samples of a beat with dropout (p = 0.5) on its hidden layers, three classes.
    Served: each beat's class."""

    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(data.BEAT, 128)
        self.hidden = nn.Linear(128, 64)
        self.out = nn.Linear(64, data.BEAT_CLASSES)

    def dropout(self, h: torch.Tensor) -> torch.Tensor:
        return F.dropout(h, 0.5, self.training)

    def forward(self, beat: torch.Tensor) -> torch.Tensor:
        h = self.dropout(F.relu(self.inp(beat)))
        h = self.dropout(F.relu(self.hidden(h)))
        return self.out(h)

    def loss(self, batch) -> torch.Tensor:
        beat, kind = batch
        return F.cross_entropy(self(beat), kind)

    def predict(self, beat: torch.Tensor) -> torch.Tensor:
        return self(beat).argmax(-1)


# --- weakly labelled sound event detection ------------------------------------------------------------------
class EventDetector(AdamModule):
    """Temporal convolutions over the log-energies give each frame a probability per event class; linear-
    softmax pooling over time (sum p^2 / sum p) gives the clip's; binary cross-entropy against the clip's
    tags. A step decay halves the learning rate every 4 epochs. Served: each frame's active events
    (p > 0.5)."""

    interval = "epoch"

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(data.MELS, 32, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(32, 32, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(32, data.EVENTS, 1),
        )

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": self.interval}}

    def log_mel(self, mel: torch.Tensor) -> torch.Tensor:
        """The network's input: log-compressed energies, (clips, mel bins, frames)."""
        return torch.log(mel + 1e-2).transpose(1, 2)

    def frame_probabilities(self, features: torch.Tensor) -> torch.Tensor:
        """(clips, frames, events)"""
        return torch.sigmoid(self.net(features)).transpose(1, 2)

    def loss(self, batch) -> torch.Tensor:
        mel, tags = batch
        p = self.frame_probabilities(self.log_mel(mel))
        clip = (p**2).sum(1) / p.sum(1).clamp(min=1e-6)
        return F.binary_cross_entropy(clip.clamp(1e-6, 1 - 1e-6), tags)

    def predict(self, mel: torch.Tensor) -> torch.Tensor:
        return (self.frame_probabilities(self.log_mel(mel)) > 0.5).float()


class EventDetectorServedWithoutLog(EventDetector):
    """BUG: the served path feeds the energies straight to the network (only transposed): the log
    compression lives in the training loss alone, so the served detector reads inputs on a scale it never
    saw. Validation goes through the loss and looks fine."""

    def predict(self, mel: torch.Tensor) -> torch.Tensor:
        return (self.frame_probabilities(mel.transpose(1, 2)) > 0.5).float()


class EventDetectorDecayPerBatch(EventDetector):
    """BUG: the step decay meant per epoch is scheduled with ``"interval": "step"``: the learning rate halves
    every 4 batches, and after two epochs it is practically zero."""

    interval = "step"


# --- learning from several annotators -----------------------------------------------------------------------
class CrowdClassifier(AdamModule):
    """An MLP over the digit; cross-entropy against the share of each class among the votes the digit got
    (soft targets: the loss keeps the votes' entropy). Missing votes (-1) are left out. Served: the class."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)

    def vote_counts(self, votes: torch.Tensor) -> torch.Tensor:
        given = (votes != data.MISSING).float()
        return (F.one_hot(votes.clamp(min=0), 10) * given[..., None]).sum(1)

    def loss(self, batch) -> torch.Tensor:
        image, votes = batch
        counts = self.vote_counts(votes)
        share = counts / counts.sum(-1, keepdim=True)
        return -(share * F.log_softmax(self.net(image), -1)).sum(-1).mean()

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image).argmax(-1)


class CrowdClassifierMissingAsZero(CrowdClassifier):
    """BUG: the -1 of a missing vote is clamped to 0 so that ``one_hot`` accepts it, and is then counted: each
    digit gets two extra votes for class 0."""

    def vote_counts(self, votes: torch.Tensor) -> torch.Tensor:
        return F.one_hot(votes.clamp(min=0), 10).sum(1)
