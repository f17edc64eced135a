"""Sealed gallery ZV's models (half ``zv2``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _zv2_data as data
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


# --- 2-D orientation from point sets (sin/cos regression) ---------------------------------------------------
class PointSetEncoder(nn.Module):
    """A PointNet: a shared MLP on each point (centred on the set's mean), max- and mean-pooled, then an MLP
    to ``out`` values; blind to the points' order."""

    def __init__(self, out: int) -> None:
        super().__init__()
        self.point = mlp(2, 64, 64)
        self.head = mlp(128, 64, out)

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.point(points - points.mean(1, keepdim=True)))
        return self.head(torch.cat([h.max(1).values, h.mean(1)], -1))


class OrientationNet(_Adam):
    """The heading of an arrow from its unordered points, regressed as the pair (cos, sin) with squared error
    (no wrap-around at 0 / 2 pi). Served: the heading in radians, atan2(sin, cos), in [0, 2 pi)."""

    outputs = 2

    def __init__(self) -> None:
        super().__init__()
        self.net = PointSetEncoder(self.outputs)

    def forward(self, points: torch.Tensor) -> torch.Tensor:
        return self.net(points)

    def target(self, heading: torch.Tensor) -> torch.Tensor:
        return torch.stack([heading.cos(), heading.sin()], -1)

    def loss(self, batch) -> torch.Tensor:
        points, heading = batch
        return F.mse_loss(self(points), self.target(heading))

    def heading(self, out: torch.Tensor) -> torch.Tensor:
        return torch.atan2(out[:, 1], out[:, 0]) % (2 * math.pi)

    def predict(self, points: torch.Tensor) -> torch.Tensor:
        return self.heading(self(points))


class OrientationNetRawAngle(OrientationNet):
    """BUG: the heading is regressed directly, in radians, with squared error (one output): 0.1 and 6.2 rad
    are neighbours but 6.1 apart to the loss, and arrows pointing near 0 are served a compromise near pi."""

    outputs = 1

    def loss(self, batch) -> torch.Tensor:
        points, heading = batch
        return F.mse_loss(self(points)[:, 0], heading)

    def heading(self, out: torch.Tensor) -> torch.Tensor:
        return out[:, 0] % (2 * math.pi)


class OrientationNetAtan2Swapped(OrientationNet):
    """BUG: the served heading is ``atan2(cos, sin)`` (the arguments swapped, as if atan2 took x first): it
    answers pi/2 - theta, right only for arrows near 45 and 225 degrees."""

    def heading(self, out: torch.Tensor) -> torch.Tensor:
        return torch.atan2(out[:, 0], out[:, 1]) % (2 * math.pi)


class OrientationNetMirrorInStep(OrientationNet):
    """BUG: the training step mirrors a random half of the batch (y -> -y, a batch augmentation written in
    the step) and keeps their headings: a mirrored arrow at theta looks like one at -theta, and the targets
    of the two halves cancel in sin."""

    def training_step(self, batch, batch_idx):
        points, heading = batch
        flip = torch.rand(len(points), device=points.device) < 0.5
        points = torch.where(flip[:, None, None], points * points.new_tensor([1.0, -1.0]), points)
        loss = self.loss((points, heading))
        self.log("train_loss", loss)
        return loss


class OrientationBins(OrientationNet):
    """The heading as one of 36 bins of 10 degrees, trained with cross-entropy against soft labels: a
    Gaussian (sd 10 degrees) around the true heading, wrapped around the circle. Served: the circular mean of
    the predicted bin distribution. The soft labels' own entropy (about 1.42 nats) is a floor the loss cannot
    go below, declared as its constant offset."""

    outputs = 36
    loss_offset = 1.419

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("centres", (torch.arange(self.outputs) + 0.5) * 2 * math.pi / self.outputs)

    def loss(self, batch) -> torch.Tensor:
        points, heading = batch
        gap = torch.remainder(self.centres - heading[:, None] + math.pi, 2 * math.pi) - math.pi
        soft = torch.softmax(-0.5 * (gap / math.radians(10)) ** 2, -1)
        return F.cross_entropy(self(points), soft)

    def heading(self, out: torch.Tensor) -> torch.Tensor:
        p = out.softmax(-1)
        return torch.atan2((p * self.centres.sin()).sum(-1), (p * self.centres.cos()).sum(-1)) % (2 * math.pi)


# --- particle-jet tagging (sets of constituents, padded, with a padding mask) -------------------------------
class JetTagger(_Adam):
    """Deep Sets: a shared MLP on each constituent, averaged over the jet's real constituents (the padded
    slots masked out), then an MLP to one logit (two-pronged W against QCD); binary cross-entropy. Served:
    the probability of a W."""

    def __init__(self) -> None:
        super().__init__()
        self.part = mlp(3, 64, 64, 64)
        self.head = mlp(64, 64, 1)
        self.register_buffer("shift", torch.tensor([-3.0, 0.0, 0.0]))
        self.register_buffer("scale", torch.tensor([1.5, 0.1, 0.1]))

    def pool(self, h: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        keep = (~padding).float()[..., None]
        return (h * keep).sum(1) / keep.sum(1).clamp(min=1)

    def forward(self, parts: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        scaled = (parts - self.shift) / self.scale  # log pT fraction about -3, angles in units of 0.1
        return self.head(self.pool(torch.relu(self.part(scaled)), padding))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(
            self(batch["parts"], batch["padding"]), batch["label"].float()
        )

    def predict(self, parts: torch.Tensor, padding: torch.Tensor | None = None) -> torch.Tensor:
        """The W probability of each padded jet (``padding`` read off the all-zero slots when not given)."""
        if padding is None:
            padding = (parts == 0).all(-1)
        return torch.sigmoid(self(parts, padding))


class JetTaggerMaskAsKeep(JetTagger):
    """BUG: the collate's ``padding`` mask (True on padded slots) is read as a keep mask: the pooling averages
    the padded zeros and drops every real constituent, so the tagger sees only how many slots were padded."""

    def pool(self, h: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        keep = padding.float()[..., None]
        return (h * keep).sum(1) / keep.sum(1).clamp(min=1)


# --- traffic forecasting on a small road graph --------------------------------------------------------------
class TrafficGNN(_Adam):
    """Two graph layers over the road graph (each sensor mixes its own features with the mean of its upstream
    sensors'), from each sensor's standardised past 12 readings to its next 3; squared error on standardised
    speeds. Served: km/h."""

    lr = 3e-3

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("adjacency", self.graph())
        self.own = nn.ModuleList([nn.Linear(data.PAST, 64), nn.Linear(64, 64)])
        self.near = nn.ModuleList([nn.Linear(data.PAST, 64), nn.Linear(64, 64)])
        self.head = nn.Linear(64, data.AHEAD)

    def graph(self) -> torch.Tensor:
        return data.upstream()

    def forward(self, past: torch.Tensor) -> torch.Tensor:
        h = (past - data.SPEED_MEAN) / data.SPEED_STD
        for own, near in zip(self.own, self.near, strict=True):
            h = torch.relu(own(h) + near(torch.einsum("ij,bjf->bif", self.adjacency, h)))
        return self.head(h)

    def loss(self, batch) -> torch.Tensor:
        past, ahead = batch
        return F.mse_loss(self(past), (ahead - data.SPEED_MEAN) / data.SPEED_STD)

    def predict(self, past: torch.Tensor) -> torch.Tensor:
        return self(past) * data.SPEED_STD + data.SPEED_MEAN


class TrafficGNNDownstream(TrafficGNN):
    """BUG: the adjacency is used transposed (``upstream().T``, as if its rows listed where traffic goes):
    each sensor listens to the sensor after it, which only echoes what passed it already, and never hears
    the disturbance coming from upstream."""

    def graph(self) -> torch.Tensor:
        a = data.upstream().T
        return a / a.sum(-1, keepdim=True).clamp(min=1)


class TrafficGNNWarmupPerEpoch(TrafficGNN):
    """BUG: the linear warm-up over 200 optimiser steps is a LambdaLR left at Lightning's default interval,
    "epoch": it counts epochs, and the learning rate is still under 3% of its peak when training ends."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 200))
        return {"optimizer": optimizer, "lr_scheduler": warmup}


class TrafficGNNResidual(TrafficGNN):
    """The network predicts the change from each sensor's last reading (a residual on the persistence
    forecast), its loss weighted up with the horizon (1, 1.5, 2: far steps are what the operator needs)."""

    def forward(self, past: torch.Tensor) -> torch.Tensor:
        last = (past[..., -1:] - data.SPEED_MEAN) / data.SPEED_STD
        return last + super().forward(past)

    def loss(self, batch) -> torch.Tensor:
        past, ahead = batch
        error = (self(past) - (ahead - data.SPEED_MEAN) / data.SPEED_STD) ** 2
        return (error * error.new_tensor([1.0, 1.5, 2.0])).mean()


class TrafficGNNMissing(TrafficGNN):
    """Readings lost to detector faults come as 0 km/h: the inputs get a 'seen' indicator per reading (lost
    ones set to the mean speed) and lost targets are masked out of the loss. Served: km/h for every sensor
    and step (lost ones too)."""

    def __init__(self) -> None:
        super().__init__()
        self.own[0] = nn.Linear(2 * data.PAST, 64)
        self.near[0] = nn.Linear(2 * data.PAST, 64)

    def forward(self, past: torch.Tensor) -> torch.Tensor:
        seen = (past > 0).float()
        h = torch.cat([seen * (past - data.SPEED_MEAN) / data.SPEED_STD, seen], -1)
        for own, near in zip(self.own, self.near, strict=True):
            h = torch.relu(own(h) + near(torch.einsum("ij,bjf->bif", self.adjacency, h)))
        return self.head(h)

    def loss(self, batch) -> torch.Tensor:
        past, ahead = batch
        seen = (ahead > 0).float()
        error = (self(past) - (ahead - data.SPEED_MEAN) / data.SPEED_STD) ** 2
        return (error * seen).sum() / seen.sum()


# --- language identification from character n-gram counts --------------------------------------------------
class LanguageID(_Adam):
    """An MLP over log(1 + n-gram counts) to the five languages; cross-entropy. Served: the language."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.NGRAMS, 128, data.LANGUAGES, dropout=0.1)

    def forward(self, counts: torch.Tensor) -> torch.Tensor:
        return self.net(torch.log1p(counts))

    def loss(self, batch) -> torch.Tensor:
        counts, language = batch
        return F.cross_entropy(self(counts), language)

    def predict(self, counts: torch.Tensor) -> torch.Tensor:
        return self(counts).argmax(-1)


class LanguageIDWeighted(LanguageID):
    """No balancing sampler: the cross-entropy weights each language by the inverse of its share (given
    once, from the priors), so the rare languages count as much as the common ones."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("weight", 1 / (data.LANGUAGES * data.PRIORS))

    def loss(self, batch) -> torch.Tensor:
        counts, language = batch
        return F.cross_entropy(self(counts), language, weight=self.weight)


class LanguageIDWeightedByCount(LanguageIDWeighted):
    """BUG: the class weights are the languages' shares themselves, not their inverses (a "balancing" written
    the wrong way up): the common language counts ten times the rarest, on top of its numbers."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = data.LANGUAGES * data.PRIORS


# --- edge detection (per-pixel binary, heavy imbalance) -----------------------------------------------------
class EdgeNet(_Adam):
    """A small fully convolutional network to one logit per pixel; binary cross-entropy with the edge pixels
    weighted by the odds of a non-edge (about 4: the imbalance balanced). Served: the pixels whose edge
    probability exceeds one half."""

    pos_weight = (1 - data.EDGE_SHARE) / data.EDGE_SHARE

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 1, 1),
        )

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image)

    def loss(self, batch) -> torch.Tensor:
        image, edge = batch
        weight = image.new_tensor(self.pos_weight)
        return F.binary_cross_entropy_with_logits(self(image), edge, pos_weight=weight)

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        return (torch.sigmoid(self(image)) > 0.5).float()


class EdgeNetWeightInverted(EdgeNet):
    """BUG: the balancing weight is the share of edges over non-edges (about 1/4), not its inverse: the rare
    class is weighted down instead of up, and the served map drops many edge pixels."""

    pos_weight = data.EDGE_SHARE / (1 - data.EDGE_SHARE)


class EdgeNetThresholdAtZero(EdgeNet):
    """BUG: the served map thresholds the sigmoid's probability at 0 (the threshold of a logit): every pixel
    is served as an edge."""

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        return (torch.sigmoid(self(image)) > 0).float()


# --- portfolio weights (a Sharpe-ratio objective) -----------------------------------------------------------
class Portfolio(_Adam):
    """An MLP from a day's features to long-only weights (a softmax over the six assets); the loss is the
    negative Sharpe ratio (mean over std of the portfolio's daily returns) over the batch's days. Served:
    the weights."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * data.ASSETS, 64, data.ASSETS)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.net(features), -1)

    @staticmethod
    def sharpe(earned: torch.Tensor) -> torch.Tensor:
        return earned.mean() / (earned.std() + 1e-6) * math.sqrt(252)

    def loss(self, batch) -> torch.Tensor:
        features, returns = batch
        return -self.sharpe((self(features) * returns).sum(-1))

    def predict(self, features: torch.Tensor) -> torch.Tensor:
        return self(features)


class PortfolioSharpeNotNegated(Portfolio):
    """BUG: the loss returns the Sharpe ratio itself (the sign lost when the metric became a loss): Lightning
    minimises it, and the weights learn to pick the assets expected to do worst."""

    def loss(self, batch) -> torch.Tensor:
        features, returns = batch
        return self.sharpe((self(features) * returns).sum(-1))


class PortfolioLongShort(Portfolio):
    """Market-neutral long-short weights: the outputs demeaned across assets and scaled to unit gross
    exposure (they sum to 0, the loss is still the negative Sharpe ratio, mostly below zero)."""

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        raw = self.net(features)
        raw = raw - raw.mean(-1, keepdim=True)
        return raw / (raw.abs().sum(-1, keepdim=True) + 1e-6)
