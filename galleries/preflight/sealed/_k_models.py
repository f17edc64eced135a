"""Sealed gallery K's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass, or a flag, that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import copy
import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _k_data as data
from galleries.sealed import mlp


class _Adam(pl.LightningModule):
    """Adam on every parameter; ``loss(batch)`` is logged in training and validation; ``predict`` is
    ``forward``."""

    lr = 3e-3

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch))

    def predict(self, *inputs: torch.Tensor):
        return self(*inputs)


# --- optical-flow-like regression ---------------------------------------------------------------------------
class FlowNet(_Adam):
    """A small CNN on the stacked frame pair (2 channels, 16x16) regressing the motion (u, v) in pixels;
    loss: MSE."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(2, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 16, 64),
            nn.ReLU(), nn.Linear(64, 2),
        )  # fmt: skip

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.net(frames)

    def loss(self, batch) -> torch.Tensor:
        frames, flow = batch
        return F.mse_loss(self(frames), flow)


class FlowNetEPE(FlowNet):
    """The same network trained on the average end-point error, the flow benchmarks' own figure:
    mean ||predicted - true||, a distance (not squared; about 1.6 px at init)."""

    def loss(self, batch) -> torch.Tensor:
        frames, flow = batch
        return (self(frames) - flow).pow(2).sum(-1).add(1e-8).sqrt().mean()


# --- weather-like grids -------------------------------------------------------------------------------------
class GridNet(_Adam):
    """Next-frame prediction on the periodic grid: the two past frames of both fields, standardised per
    channel with the training statistics, go through three circular 3x3 convolutions that output the
    standardised next frame; loss: MSE over the observed cells (the gaps, NaN, are left out). Served: the next
    frame in physical units. ``tendency``: the network predicts the change from the last frame instead, its
    output layer zero at init (it starts as persistence)."""

    def __init__(self, tendency: bool = False) -> None:
        super().__init__()
        mean, std = self.statistics()
        self.register_buffer("mean", mean.view(1, 2, 1, 1))
        self.register_buffer("std", std.view(1, 2, 1, 1))
        self.tendency = tendency
        self.net = nn.Sequential(
            nn.Conv2d(4, 48, 3, padding=1, padding_mode="circular"), nn.ReLU(),
            nn.Conv2d(48, 48, 3, padding=1, padding_mode="circular"), nn.ReLU(),
            nn.Conv2d(48, 2, 3, padding=1, padding_mode="circular"),
        )  # fmt: skip
        if tendency:
            nn.init.zeros_(self.net[-1].weight)
            nn.init.zeros_(self.net[-1].bias)

    def statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        return data.weather_stats()

    def standardise_past(self, past: torch.Tensor) -> torch.Tensor:
        """Past frames (n, time, channel, 12, 12): each channel by its own statistics."""
        return (past - self.mean[:, None]) / self.std[:, None]

    def forward(self, past: torch.Tensor) -> torch.Tensor:
        """Past frames (n, 2, 2, 12, 12) in physical units -> the standardised next frame (n, 2, 12, 12)."""
        scaled = self.standardise_past(past)
        out = self.net(scaled.flatten(1, 2))
        return scaled[:, -1] + out if self.tendency else out

    def loss(self, batch) -> torch.Tensor:
        past, future = batch
        target = (future - self.mean) / self.std
        observed = ~target.isnan()
        return F.mse_loss(self(past)[observed], target[observed])

    def predict(self, past: torch.Tensor) -> torch.Tensor:
        return self(past) * self.std + self.mean


class GridNetGlobalStats(GridNet):
    """BUG: the statistics are one mean and spread over the whole training tensor, as for images: both
    fields are standardised by the pooled mean (about 650) and spread (about 360), so the temperature and
    pressure patterns are squeezed into a few hundredths of a unit the network hardly resolves."""

    def statistics(self) -> tuple[torch.Tensor, torch.Tensor]:
        return data.weather_stats_global()


class GridNetStatsOnTimeAxis(GridNet):
    """BUG: the past frames are standardised with the statistics shaped for a (channel, height, width) frame,
    ``mean.view(2, 1, 1, 1)``: against the (time, channel, height, width) history it broadcasts along time,
    so the older frame gets the temperature statistics in both channels and the newer one the pressure's."""

    def standardise_past(self, past: torch.Tensor) -> torch.Tensor:
        return (past - self.mean.view(2, 1, 1, 1)) / self.std.view(2, 1, 1, 1)


# --- retrieval with mined hard negatives --------------------------------------------------------------------
class DualEncoder(_Adam):
    """A query tower and a document tower (MLPs to 32-d, L2-normalised); loss: softmax cross-entropy of each
    query's cosine similarities / temperature 0.05 over its positive, the batch's other positives and every
    row's 4 mined hard negatives. Served: document embeddings for the corpus, ranked by similarity."""

    temperature = 0.05

    def __init__(self) -> None:
        super().__init__()
        self.query_tower, self.doc_tower = mlp(data.RAW, 128, 32), mlp(data.RAW, 128, 32)

    def embed_queries(self, query: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.query_tower(query), dim=-1)

    def embed_documents(self, documents: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.doc_tower(documents), dim=-1)

    def logits(self, similarity: torch.Tensor) -> torch.Tensor:
        return similarity / self.temperature

    def loss(self, batch) -> torch.Tensor:
        query, positive, negatives = batch
        candidates = torch.cat([positive, negatives.flatten(0, 1)])
        similarity = self.embed_queries(query) @ self.embed_documents(candidates).T
        return F.cross_entropy(self.logits(similarity), torch.arange(len(query)))

    def forward(self, query: torch.Tensor, documents: torch.Tensor) -> torch.Tensor:
        return self.embed_queries(query) @ self.embed_documents(documents).T


class DualEncoderTemperatureTimes(DualEncoder):
    """BUG: the temperature multiplies the similarities (``sim * 0.05``) instead of dividing them: every
    logit lies within +-0.05, the softmax is flat, and the hard negatives weigh no more than the easy ones."""

    def logits(self, similarity: torch.Tensor) -> torch.Tensor:
        return similarity * self.temperature


class FrozenIndexEncoder(DualEncoder):
    """Only the query tower learns: the document tower is a fixed random network (the corpus was indexed once
    with it, and re-indexing is not an option), frozen on purpose, so the queries learn to land near their
    documents' fixed embeddings."""

    def __init__(self) -> None:
        super().__init__()
        self.doc_tower.requires_grad_(False)

    def configure_optimizers(self):
        return torch.optim.Adam(self.query_tower.parameters(), lr=self.lr)


# --- contrastive audio-text ---------------------------------------------------------------------------------
class AudioText(_Adam):
    """A CLAP-like pair of encoders: audio -> log magnitude spectrum -> MLP, caption -> mean of its word
    embeddings -> MLP, both to 32-d and L2-normalised; a learned logit scale (from 1 / 0.07, at most 100);
    loss: the symmetric cross-entropy of the batch's audio-caption similarities. Served: zero-shot, the class
    whose prompt is most similar to the clip."""

    def __init__(self) -> None:
        super().__init__()
        self.audio = mlp(data.SAMPLES // 2 + 1, 128, 32)
        self.words = nn.Embedding(len(data.VOCAB), 32, padding_idx=0)
        self.text = mlp(32, 64, 32)
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def embed_audio(self, audio: torch.Tensor) -> torch.Tensor:
        spectrum = torch.fft.rfft(audio).abs().log1p()
        return F.normalize(self.audio(spectrum), dim=-1)

    def embed_text(self, tokens: torch.Tensor) -> torch.Tensor:
        return F.normalize(self.text(self.words(tokens).mean(1)), dim=-1)

    def loss(self, batch) -> torch.Tensor:
        audio, caption = batch
        scale = self.logit_scale.clamp(max=math.log(100)).exp()
        logits = scale * self.embed_audio(audio) @ self.embed_text(caption).T
        labels = torch.arange(len(audio))
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2

    def predict(self, audio: torch.Tensor) -> torch.Tensor:
        return (self.embed_audio(audio) @ self.embed_text(data.class_prompts()).T).argmax(-1)


class AudioTextStepDecay(AudioText):
    """BUG: an exponential learning-rate decay of 0.9 written per epoch is registered with
    ``"interval": "step"``: it decays every batch, and after a few dozen steps the rate is near zero."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        decay = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": "step"}}


class AudioTextEpochDecay(AudioText):
    """The same per-epoch decay of 0.9, stepped once an epoch (Lightning's default interval)."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        return [optimizer], [torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.9)]


# --- digit classifiers: active learning and a mean teacher --------------------------------------------------
class DigitNet(_Adam):
    """An MLP on the 64 pixels; cross-entropy (rows labelled -1, unlabelled, are ignored); served: the
    class."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y, ignore_index=data.UNLABELLED)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


def _noisy(x: torch.Tensor) -> torch.Tensor:
    """A random view: Gaussian noise (0.1) and a random 10% of the pixels dropped."""
    return (x + 0.1 * torch.randn_like(x)) * (torch.rand_like(x) > 0.1)


class MeanTeacher(_Adam):
    """A student MLP and its teacher, an exponential moving average (decay 0.95) of the student's weights
    after every optimizer step, kept out of the optimizer on purpose. Loss: cross-entropy on the labelled rows
    (-1: unlabelled, ignored) plus the MSE between the student's and the teacher's probabilities on two noisy
    views of every row. Served: the teacher."""

    decay = 0.95

    def __init__(self) -> None:
        super().__init__()
        self.student = mlp(64, 128, 10)
        self.teacher = copy.deepcopy(self.student).requires_grad_(False)

    def configure_optimizers(self):
        return torch.optim.Adam(self.student.parameters(), lr=self.lr)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        logits = self.student(_noisy(x))
        with torch.no_grad():
            target = self.teacher(_noisy(x)).softmax(-1)
        labelled = y != data.UNLABELLED
        supervised = F.cross_entropy(logits[labelled], y[labelled]) if labelled.any() else logits.sum() * 0
        return supervised + 2.0 * F.mse_loss(logits.softmax(-1), target)

    @torch.no_grad()
    def update_teacher(self) -> None:
        for teacher, student in zip(self.teacher.parameters(), self.student.parameters(), strict=True):
            teacher.lerp_(student, 1 - self.decay)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        self.update_teacher()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.teacher(x)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class MeanTeacherEpochUpdate(MeanTeacher):
    """BUG: the teacher's average is updated in ``on_train_epoch_end`` (once an epoch) with the decay meant
    for every step: after a few epochs the served teacher is still mostly its random initialisation."""

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        pass

    def on_train_epoch_end(self) -> None:
        self.update_teacher()
