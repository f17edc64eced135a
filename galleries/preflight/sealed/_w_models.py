"""Sealed gallery V's models (half ``w``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _w_data as data
from galleries.sealed import AdamModule, mlp


# --- seismic phase picking ----------------------------------------------------------------------------------
class Picker(AdamModule):
    """A 1-D CNN over the trace, then a dense head over the whole feature map: one logit per sample;
    cross-entropy against the onset's index. Served: the most likely onset sample."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(1, 16, 7, padding=3),
            nn.ReLU(),
            nn.Conv1d(16, 16, 7, padding=3),
            nn.ReLU(),
            nn.Conv1d(16, 4, 7, padding=3),
            nn.ReLU(),
        )
        self.head = nn.Linear(4 * data.TRACE, data.TRACE)

    def forward(self, wave: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(wave[:, None]).flatten(1))

    def loss(self, batch) -> torch.Tensor:
        wave, onset = batch
        return F.cross_entropy(self(wave), onset)

    def predict(self, wave: torch.Tensor) -> torch.Tensor:
        return self(wave).argmax(-1)


class PickerSoftOnset(Picker):
    """The picker trained against a Gaussian (sigma 2 samples) over the samples around the onset, as
    PhaseNet-style pickers label: the loss never reaches 0 (its floor is the target's entropy)."""

    sigma = 2.0

    def loss(self, batch) -> torch.Tensor:
        wave, onset = batch
        t = torch.arange(data.TRACE, device=wave.device)
        target = torch.softmax(-((t - onset[:, None]) ** 2) / (2 * self.sigma**2), -1)
        return F.cross_entropy(self(wave), target)


# --- hospital length of stay --------------------------------------------------------------------------------
class StayNet(AdamModule):
    """An MLP over the admission table and a 4-wide embedding of the ward code; squared error on the log
    length of stay. Served: the log length of stay."""

    def __init__(self) -> None:
        super().__init__()
        self.ward = nn.Embedding(data.WARDS, 4)
        self.net = mlp(data.STAY_COLUMNS + 4, 64, 64, 1)

    def forward(self, table: torch.Tensor, ward: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([table, self.ward(ward)], 1))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        table, ward, log_stay = batch
        return F.mse_loss(self(table, ward), log_stay)

    def predict(self, table: torch.Tensor, ward: torch.Tensor) -> torch.Tensor:
        return self(table, ward)


# --- solubility from fingerprints ---------------------------------------------------------------------------
class SolubilityNet(AdamModule):
    """An MLP over the fingerprint (dropout 0.3); squared error on the log solubility."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.BITS, 128, 128, 1, dropout=0.3)

    def forward(self, bits: torch.Tensor) -> torch.Tensor:
        return self.net(bits)[:, 0]

    def loss(self, batch) -> torch.Tensor:
        bits, log_s = batch
        return F.mse_loss(self(bits), log_s)

    def predict(self, bits: torch.Tensor) -> torch.Tensor:
        return self(bits)


class SolubilityNetOneCycle(SolubilityNet):
    """The solubility network trained by SGD with Nesterov momentum under a one-cycle schedule (peak 0.05,
    stepped every batch, over the run's optimizer steps as the trainer counts them)."""

    def total_steps(self) -> int:
        return int(self.trainer.estimated_stepping_batches)

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.05, momentum=0.9, nesterov=True)
        cycle = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.05, total_steps=self.total_steps())
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": cycle, "interval": "step"}}


# --- flow cytometry: the share of blasts in a sample (a deep set) -------------------------------------------
class BlastShare(AdamModule):
    """A deep set: an MLP per cell, the mean over the sample's real cells (padding masked out), an MLP on
    the pooled vector; squared error on the share of blasts. Served: that share."""

    def __init__(self) -> None:
        super().__init__()
        self.cell = mlp(data.MARKERS, 32, 32)
        self.out = mlp(32, 32, 1)

    def pool(self, h: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        real = (torch.arange(h.shape[1], device=h.device) < count[:, None]).float()[..., None]
        return (h * real).sum(1) / count[:, None]

    def forward(self, cells: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        return self.out(self.pool(torch.relu(self.cell(cells)), count))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        cells, count, share = batch
        return F.mse_loss(self(cells, count), share)

    def predict(self, cells: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        return self(cells, count)


class BlastShareMeanOverPadding(BlastShare):
    """BUG: the pooling is ``h.mean(1)``: the padded slots count as cells, and a small sample's share is
    diluted by the zeros' embedding."""

    def pool(self, h: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        return h.mean(1)


class BlastShareLogit(BlastShare):
    """The deep set answering a logit: binary cross-entropy with logits against the share as a soft target
    (the loss never reaches 0: its floor is the shares' mean entropy). Served: the sigmoid of the logit."""

    def loss(self, batch) -> torch.Tensor:
        cells, count, share = batch
        return F.binary_cross_entropy_with_logits(self(cells, count), share)

    def predict(self, cells: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(cells, count))


class BlastShareSigmoidTwice(BlastShareLogit):
    """BUG: the network ends in a sigmoid (so it answers a share), and the loss is still
    ``binary_cross_entropy_with_logits``, which applies a second sigmoid: the loss is met when the served
    share equals the target's logit, which is negative for any share below one half, so small shares are
    served as almost 0 and the rest squeezed."""

    def forward(self, cells: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(super().forward(cells, count))

    def predict(self, cells: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
        return self(cells, count)


# --- image quality assessment -------------------------------------------------------------------------------
class QualityNet(AdamModule):
    """A small CNN over the distorted image; squared error on the mean opinion score. Served: the score.
    Adam with a plateau schedule on the epoch's training loss (halves the rate after 2 flat epochs)."""

    monitor, interval = "train_loss_epoch", "epoch"

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 16, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(2),
            nn.Flatten(),
            nn.Linear(64, 32),
            nn.ReLU(),
            nn.Linear(32, 1),
        )

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=2)
        scheduler = {"scheduler": plateau, "monitor": self.monitor, "interval": self.interval}
        return {"optimizer": optimizer, "lr_scheduler": scheduler}

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image)[:, 0]

    def loss(self, batch) -> torch.Tensor:
        image, score = batch
        return F.mse_loss(self(image), score)

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        return self(image)


class QualityNetPlateauPerStep(QualityNet):
    """BUG: the plateau schedule watches the per-batch training loss and is stepped every batch: a noisy
    batch loss rarely improves three batches running, and the rate is halved again and again until
    training stops."""

    monitor, interval = "train_loss_step", "step"


# --- protein stability change of point mutations ------------------------------------------------------------
class StabilityNet(AdamModule):
    """A shared 8-wide residue embedding for the wild type and the mutant, then an MLP over both embeddings
    and the environment; squared error on ddG. Served: ddG."""

    def __init__(self) -> None:
        super().__init__()
        self.residue = nn.Linear(data.RESIDUES, 8, bias=False)
        self.net = mlp(16 + data.ENV, 128, 128, 1)

    def columns(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r = data.RESIDUES
        return x[:, :r], x[:, r : 2 * r], x[:, 2 * r :]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wild, mutant, env = self.columns(x)
        return self.net(torch.cat([self.residue(wild), self.residue(mutant), env], 1))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        x, ddg = batch
        return F.mse_loss(self(x), ddg)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)


class StabilityNetWildTwice(StabilityNet):
    """BUG: the mutant's columns are sliced as ``x[:, :r]`` (copied from the wild type's line): the network
    reads the wild type twice and never sees which residue it mutates to."""

    def columns(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        r = data.RESIDUES
        return x[:, :r], x[:, :r], x[:, 2 * r :]


class AntisymmetricStabilityNet(StabilityNet):
    """ddG as ``g(wild, mutant) - g(mutant, wild)``: antisymmetric by construction, so every output is
    exactly 0 at initialisation (and a mutation to itself would score 0)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) - super().forward(data.swap(x))
