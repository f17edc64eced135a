"""Sealed gallery ZW's models (half ``zw2``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _zw2_data as data
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


# --- board evaluation (material balance from piece planes) --------------------------------------------------
class BoardNet(_Adam):
    """An MLP over the 12 flattened piece planes to the evaluation in pawns (white's side); squared error.
    Served: the evaluation."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(12 * 64, 128, 1)

    def value(self, planes: torch.Tensor) -> torch.Tensor:
        return self.net(planes.flatten(1))[:, 0]

    def forward(self, planes: torch.Tensor) -> torch.Tensor:
        return self.value(planes)

    def loss(self, batch) -> torch.Tensor:
        planes, value = batch
        return F.mse_loss(self(planes), value)

    def predict(self, planes: torch.Tensor) -> torch.Tensor:
        return self(planes)


class BoardNetTanhHead(BoardNet):
    """BUG: the value head ends in ``tanh`` (the AlphaZero value head this was copied from predicts a result
    in [-1, 1]), while the targets are evaluations in pawns: every position a pawn or more ahead is served
    as just under 1."""

    def value(self, planes: torch.Tensor) -> torch.Tensor:
        return torch.tanh(super().value(planes))


class BoardNetPlateauMax(BoardNet):
    """BUG: ReduceLROnPlateau is built with ``mode="max"`` (copied from a set-up that monitored an accuracy)
    and pointed at the training loss: every epoch in which the loss falls counts as no improvement, and the
    learning rate is cut tenfold after each one."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="max", factor=0.1, patience=0)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": plateau, "monitor": "train_loss"}}


class BoardNetAntisymmetric(BoardNet):
    """Colour-flip antisymmetric by construction: the evaluation is g(position) - g(the position with the
    colours exchanged), so a position and its mirror always get opposite values."""

    def forward(self, planes: torch.Tensor) -> torch.Tensor:
        flipped = torch.cat([planes[:, 6:], planes[:, :6]], 1).flip(-2)
        return (self.value(planes) - self.value(flipped)) / 2


# --- chord recognition from 12-bin chroma (24 classes: quality * 12 + root) ---------------------------------
class ChordNet(_Adam):
    """An MLP from the chroma vector to the 24 chords; cross-entropy. Served: the chord."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(12, 64, 64, data.CHORDS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.cross_entropy(self(x), label)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class ChordCircular(ChordNet):
    """Transposition-equivariant by construction: a circular correlation over the 12 bins (each position
    sees the whole octave from itself upwards) and a 1 x 1 layer to two logits per position (major and
    minor with that root), flattened quality-major: rotating the chroma rotates the roots' logits."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, 32, 12), nn.ReLU(), nn.Conv1d(32, 32, 1), nn.ReLU(), nn.Conv1d(32, 2, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        ring = torch.cat([x, x[:, :11]], -1)[:, None]  # bins r..r+11 at position r
        return self.net(ring).flatten(1)


# --- learned dynamics on irregularly sampled trajectories ---------------------------------------------------
class ODENet(_Adam):
    """A learned autonomous vector field (an MLP of the state), integrated over each sample's own gap by one
    Runge-Kutta step; the squared error of the predicted next state. Served: a rollout from the first
    state over the given gaps."""

    def __init__(self) -> None:
        super().__init__()
        self.field = nn.Sequential(
            nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 2)
        )

    def gap(self, dt: torch.Tensor) -> torch.Tensor:
        return dt

    def forward(self, x: torch.Tensor, dt: torch.Tensor) -> torch.Tensor:
        return data.rk4(self.field, x, self.gap(dt))

    def loss(self, batch) -> torch.Tensor:
        x, dt, nxt = batch
        return F.mse_loss(self(x, dt), nxt)

    def predict(self, x0: torch.Tensor, gaps: torch.Tensor) -> torch.Tensor:
        states, x = [], x0
        for j in range(gaps.shape[1]):
            x = self(x, gaps[:, j])
            states.append(x)
        return torch.stack(states, 1)


class ODENetMeanGap(ODENet):
    """BUG: every row is integrated over the batch's mean gap (``h = dt.mean()``, written to get past a
    broadcasting error between the (B,) gaps and the (B, 2) states): the samples' own gaps are never used,
    and the field learns the average move of a quarter-second."""

    def gap(self, dt: torch.Tensor) -> torch.Tensor:
        return dt.mean().expand_as(dt)


class ODENetResidualAgainstState(ODENet):
    """BUG: the loss is written on the residual, but the predicted change (prediction - x) is scored against
    the next state itself rather than the true change (next - x): the field learns to jump by a whole state,
    and served rollouts run away."""

    def loss(self, batch) -> torch.Tensor:
        x, dt, nxt = batch
        return F.mse_loss(self(x, dt) - x, nxt)


class ODENetRollout(ODENet):
    """Trained on rollouts: from the first state of a window, its three later states are predicted by
    feeding the model its own predictions over the window's gaps (teacher forcing off), and all are
    scored."""

    def loss(self, batch) -> torch.Tensor:
        x0, gaps, later = batch
        return F.mse_loss(self.predict(x0, gaps), later)


# --- multi-view fusion (view A and view B, either missing, a presence mask) ---------------------------------
class FusionNet(_Adam):
    """An encoder per view, the masked mean of the present views' embeddings, and a classifier of the
    object's kind; cross-entropy. Served: the kind."""

    def __init__(self) -> None:
        super().__init__()
        self.encode_a = mlp(data.VIEW, 64, 32)
        self.encode_b = mlp(data.VIEW, 64, 32)
        self.head = mlp(32, 64, data.OBJECTS)

    def fuse(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        total = self.encode_a(a) * mask[:, :1] + self.encode_b(b) * mask[:, 1:]
        return total / mask.sum(-1, keepdim=True)

    def forward(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.head(self.fuse(a, b, mask))

    def loss(self, batch) -> torch.Tensor:
        a, b, mask, label = batch
        return F.cross_entropy(self(a, b, mask), label)

    def predict(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self(a, b, mask).argmax(-1)


class FusionNetBatchCount(FusionNet):
    """BUG: the masked mean divides by ``mask.sum()`` with no ``dim``: the count of present views in the
    whole batch, not the row's. In training batches of 64 the head learns embeddings some 60 to 90 times too
    small;
    served on another number of rows, the fused embedding has another scale."""

    def fuse(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        total = self.encode_a(a) * mask[:, :1] + self.encode_b(b) * mask[:, 1:]
        return total / mask.sum()


class FusionNetMaskColumnsSwapped(FusionNet):
    """BUG: the mask's columns are read as (view B present, view A present), the order of the sensor log
    the model was first written for, while this dataset writes (view A, view B): an object seen by one
    sensor alone has that view masked out and the other, zero-filled one read in its place."""

    def fuse(self, a: torch.Tensor, b: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return super().fuse(a, b, mask.flip(-1))


# --- shortest-path length on grid mazes ---------------------------------------------------------------------
class MazeNet(_Adam):
    """A CNN (with batch norm) over the (free, start, goal) planes and two fixed coordinate planes; its
    features read at the start cell, at the goal cell and averaged over the grid, and an MLP to the number
    of moves; squared error; Adam with a linear warm-up over the first 100 optimisation steps. Served: the
    path length."""

    warmup = 100

    def __init__(self) -> None:
        super().__init__()
        side = torch.linspace(-1, 1, data.SIDE)
        self.register_buffer("coords", torch.stack(torch.meshgrid(side, side, indexing="ij"))[None])
        layers: list[nn.Module] = []
        for width in (5, 32, 32, 32):
            layers += [nn.Conv2d(width, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU()]
        self.features = nn.Sequential(*layers)
        self.head = mlp(96, 64, 1)

    def score(self, planes: torch.Tensor) -> torch.Tensor:
        """The head's output, (B, 1)."""
        h = self.features(torch.cat([planes, self.coords.expand(len(planes), -1, -1, -1)], 1))
        start, goal = ((h * planes[:, i, None]).sum((-1, -2)) for i in (1, 2))
        return self.head(torch.cat([start, goal, h.mean((-1, -2))], -1))

    def forward(self, planes: torch.Tensor) -> torch.Tensor:
        return self.score(planes)[:, 0]

    def loss(self, batch) -> torch.Tensor:
        planes, length = batch
        return F.mse_loss(self(planes), length)

    def predict(self, planes: torch.Tensor) -> torch.Tensor:
        return self(planes)

    def warm_up(self, optimizer):
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / self.warmup))

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": self.warm_up(optimizer), "interval": "step"},
        }


class MazeNetBroadcastLoss(MazeNet):
    """BUG: the loss subtracts the (B,) path lengths from the head's (B, 1) output, ``(score - length)
    .pow(2).mean()``: broadcasting makes a (B, B) table, every prediction is scored against every length in
    the batch, and the net learns the batch mean."""

    def loss(self, batch) -> torch.Tensor:
        planes, length = batch
        return (self.score(planes) - length).pow(2).mean()


class MazeNetWarmupPerEpoch(MazeNet):
    """BUG: the warm-up scheduler written in optimisation steps is returned bare (``[optimizer],
    [scheduler]``), so Lightning steps it once per epoch: after six epochs the learning rate is still 6% of
    its target."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        return [optimizer], [self.warm_up(optimizer)]


class MazeNetPoisson(MazeNet):
    """The path length read as a count: the head gives its log-rate, trained with the Poisson negative
    log-likelihood (which stays far from 0, and below it), served as exp(log-rate)."""

    def loss(self, batch) -> torch.Tensor:
        planes, length = batch
        return F.poisson_nll_loss(self(planes), length, log_input=True)

    def predict(self, planes: torch.Tensor) -> torch.Tensor:
        return self(planes).exp()
