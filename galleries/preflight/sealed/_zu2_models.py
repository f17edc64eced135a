"""Sealed gallery ZU2's models (half ``zu2``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _zu2_data as data
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


# --- protein secondary structure (a 3-state tag per residue) ------------------------------------------------
class SecondaryStructure(_Adam):
    """Residues embedded, dropout, a bidirectional GRU along the chain (batch-first), a 3-state head per
    residue; cross-entropy over the real residues (the padding's label is the ignore index). Served: a state
    per residue."""

    batch_first = True

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(data.AMINO, 32)
        self.gru = nn.GRU(32, 32, batch_first=self.batch_first, bidirectional=True)
        self.head = nn.Linear(64, data.STATES)

    def dropout(self, h: torch.Tensor) -> torch.Tensor:
        return F.dropout(h, 0.5, self.training)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, _ = self.gru(self.dropout(torch.relu(self.embed(x))))
        return self.head(h)

    def loss(self, batch) -> torch.Tensor:
        x, states = batch
        return F.cross_entropy(self(x).transpose(1, 2), states)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class SecondaryStructureTimeFirst(SecondaryStructure):
    """BUG: the GRU is built without ``batch_first=True`` while the batches are (chains, residues, features):
    it runs along the batch, from one chain to the next, and each residue sees the residues at the same
    position in the other chains instead of its neighbours."""

    batch_first = False


class SecondaryStructureDropoutAlways(SecondaryStructure):
    """BUG: the dropout is ``F.dropout(h, 0.5)``, whose ``training`` argument defaults to True: it keeps
    dropping features when the model is served in eval mode."""

    def dropout(self, h: torch.Tensor) -> torch.Tensor:
        return F.dropout(h, 0.5)


class SecondaryStructurePerChain(SecondaryStructure):
    """Each chain weighs the same on purpose: the loss is the mean over chains of each chain's mean
    cross-entropy over its real residues (a padding mask, not the ignore index)."""

    def loss(self, batch) -> torch.Tensor:
        x, states = batch
        real = states >= 0
        per_residue = F.cross_entropy(self(x).transpose(1, 2), states.clamp(min=0), reduction="none")
        return ((per_residue * real).sum(1) / real.sum(1)).mean()


class SecondaryStructureComposition(SecondaryStructure):
    """Two losses summed on purpose: the per-residue cross-entropy and the squared error of each chain's
    predicted helix content (the mean helix probability over its real residues) against the true one."""

    def loss(self, batch) -> torch.Tensor:
        x, states = batch
        logits = self(x)
        real = (states >= 0).float()
        helix = (logits.softmax(-1)[..., 0] * real).sum(1) / real.sum(1)
        true_helix = ((states == 0).float() * real).sum(1) / real.sum(1)
        return F.cross_entropy(logits.transpose(1, 2), states) + 4 * F.mse_loss(helix, true_helix)


# --- data association between two frames (a class per row: a next-frame column or "vanished") ---------------
class Associator(_Adam):
    """A pair scorer: for each row (frame t) and column (frame t + 1) an MLP of the column's offset from
    where the row's object is expected (its position plus its last displacement) and of their appearance
    difference; padded columns masked out; a learned "vanished" score appended as the last class;
    cross-entropy per row over the columns. Served: the column (or 9, vanished) of each row."""

    def __init__(self) -> None:
        super().__init__()
        self.pair = mlp(7, 64, 64, 1)
        self.vanish = nn.Parameter(torch.zeros(()))

    def velocity(self, here: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
        return here - before

    def pair_scores(self, batch) -> torch.Tensor:
        rows, cols, valid = batch["rows"], batch["cols"], batch["valid"]
        here, before, look = rows[..., :2], rows[..., 2:4], rows[..., 4:]
        expected = here + self.velocity(here, before)
        offset = cols[:, None, :, :2] - expected[:, :, None]
        differs = (cols[:, None, :, 2:] - look[:, :, None]) ** 2
        features = torch.cat([offset, offset.pow(2).sum(-1, keepdim=True), differs], -1)
        return self.pair(features)[..., 0].masked_fill(~valid[:, None], -1e4)

    def scores(self, batch) -> torch.Tensor:
        pair = self.pair_scores(batch)
        return torch.cat([pair, self.vanish.expand(*pair.shape[:2], 1)], -1)

    def loss(self, batch) -> torch.Tensor:
        return F.cross_entropy(self.scores(batch).transpose(1, 2), batch["match"])

    def predict(self, batch) -> torch.Tensor:
        return self.scores(batch).argmax(-1)


class AssociatorSoftmaxOverRows(Associator):
    """BUG: the log-softmax is taken over dim 1 of the (batch, rows, columns) scores, the rows, before the
    matched column is picked: each column is normalised over the objects instead of each object over the
    columns, the "vanished" score (the same for every row) gets no gradient, no clutter column is ever
    scored against a true match, and the served argmax over columns compares scores that were never put on
    one scale."""

    def loss(self, batch) -> torch.Tensor:
        log_p = self.scores(batch).log_softmax(1)
        return -log_p.gather(2, batch["match"][..., None]).mean()


class AssociatorVelocityBackwards(Associator):
    """BUG: the object's last displacement is taken as previous minus current position: each object is
    expected one step behind where it was, twice its speed away from where it goes."""

    def velocity(self, here: torch.Tensor, before: torch.Tensor) -> torch.Tensor:
        return before - here


class AssociatorTwoWay(Associator):
    """Two cross-entropies summed on purpose: each row over the columns and "vanished", and each real column
    of the next frame over the rows and "new" (a clutter detection), the padded columns ignored."""

    def __init__(self) -> None:
        super().__init__()
        self.new = nn.Parameter(torch.zeros(()))

    def loss(self, batch) -> torch.Tensor:
        match, valid = batch["match"], batch["valid"]
        pair = self.pair_scores(batch)
        rows_loss = F.cross_entropy(self.scores(batch).transpose(1, 2), match)
        owner = torch.full((len(match), data.COLUMNS + 1), data.OBJECTS)
        owner.scatter_(1, match, torch.arange(data.OBJECTS).expand_as(match))
        owner = owner[:, : data.COLUMNS].masked_fill(~valid, -100)
        by_column = torch.cat([pair.transpose(1, 2), self.new.expand(len(match), data.COLUMNS, 1)], -1)
        return rows_loss + F.cross_entropy(by_column.transpose(1, 2), owner)


# --- reaction yield from two reactants' fingerprints (order-invariant, 0..100%) -----------------------------
class YieldNet(_Adam):
    """Each reactant encoded by one shared MLP, the pair read through the sum and the product of the two
    codes (symmetric: the pair's order cannot matter), a head to a logit; binary cross-entropy against the
    yield as a fraction (a soft target: the loss never reaches 0). Served: 100 x sigmoid, in percent."""

    def __init__(self) -> None:
        super().__init__()
        self.encode = mlp(data.BITS, 64, 64)
        self.head = mlp(128, 64, 1)

    def pair(self, fp_a: torch.Tensor, fp_b: torch.Tensor) -> torch.Tensor:
        code_a, code_b = self.encode(fp_a), self.encode(fp_b)
        return torch.cat([code_a + code_b, code_a * code_b], -1)

    def forward(self, fp_a: torch.Tensor, fp_b: torch.Tensor) -> torch.Tensor:
        return self.head(self.pair(fp_a, fp_b))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        fp_a, fp_b, y = batch
        return F.binary_cross_entropy_with_logits(self(fp_a, fp_b), y / 100)

    def predict(self, fp_a: torch.Tensor, fp_b: torch.Tensor) -> torch.Tensor:
        return 100 * torch.sigmoid(self(fp_a, fp_b))


class YieldNetConcat(YieldNet):
    """The pair encoded as one vector, the two fingerprints concatenated (the order matters to the model)."""

    def __init__(self) -> None:
        super().__init__()
        self.encode = mlp(2 * data.BITS, 128, 128)

    def pair(self, fp_a: torch.Tensor, fp_b: torch.Tensor) -> torch.Tensor:
        return self.encode(torch.cat([fp_a, fp_b], -1))


class YieldNetArgumentsSwapped(YieldNet):
    """BUG: ``binary_cross_entropy_with_logits(y / 100, logits)``, the arguments swapped: the yield is read as
    the logit and the model's output as the target, a loss linear in the output that falls without end as
    every output grows."""

    def loss(self, batch) -> torch.Tensor:
        fp_a, fp_b, y = batch
        return F.binary_cross_entropy_with_logits(y / 100, self(fp_a, fp_b))


class YieldNetPercentMSE(YieldNet):
    """Squared error in percentage points on purpose (losses in the hundreds at the start), the served
    100 x sigmoid itself trained."""

    def loss(self, batch) -> torch.Tensor:
        fp_a, fp_b, y = batch
        return F.mse_loss(self.predict(fp_a, fp_b), y)


# --- grasp success from a depth patch and a grasp angle (rare positives) ------------------------------------
class GraspNet(_Adam):
    """A small CNN over the height map, the jaw direction as (cos 2a, sin 2a) (a grasp at a and at a + pi
    is the same), an MLP to a logit; binary cross-entropy. Served: the probability the grasp holds."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
        )
        self.head = mlp(32 * 16, 64, 1)

    def forward(self, depth: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
        jaw = torch.stack([torch.cos(2 * angle), torch.sin(2 * angle)], -1)
        planes = jaw[:, :, None, None].expand(-1, -1, *depth.shape[-2:])
        return self.head(self.conv(torch.cat([depth, planes], 1)))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        depth, angle, held = batch
        return F.binary_cross_entropy_with_logits(self(depth, angle), held)

    def predict(self, depth: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(depth, angle))


class GraspNetPosWeight(GraspNet):
    """No sampler on purpose: the rare held grasps weighted by the class ratio in the loss (pos_weight
    8.6)."""

    def loss(self, batch) -> torch.Tensor:
        depth, angle, held = batch
        return F.binary_cross_entropy_with_logits(self(depth, angle), held, pos_weight=torch.tensor(8.6))


class GraspNetManual(GraspNet):
    """Manual optimisation on purpose: two optimisers (the convolutions at a third of the head's learning
    rate), both zeroed, one backward pass, both stepped, written out."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def configure_optimizers(self):
        return [
            torch.optim.Adam(self.head.parameters(), lr=self.lr),
            torch.optim.Adam(self.conv.parameters(), lr=self.lr / 3),
        ]

    def step(self, head_optimizer, conv_optimizer) -> None:
        head_optimizer.step()
        conv_optimizer.step()

    def training_step(self, batch, batch_idx):
        head_optimizer, conv_optimizer = self.optimizers()
        loss = self.loss(batch)
        head_optimizer.zero_grad()
        conv_optimizer.zero_grad()
        self.manual_backward(loss)
        self.step(head_optimizer, conv_optimizer)
        self.log("train_loss", loss)
        return loss


class GraspNetManualHeadOnly(GraspNetManual):
    """BUG: the manual step zeroes both optimisers but steps only the head's: the convolutions keep their
    random initialisation, and the head learns on random features."""

    def step(self, head_optimizer, conv_optimizer) -> None:
        head_optimizer.step()


# --- a surrogate for the periodic 1-D heat equation ---------------------------------------------------------
class HeatCNN(_Adam):
    """A residual 1-D CNN with circular padding (the domain is periodic); squared error against the solution
    at T; the learning rate cut to 0.3x every 4 epochs. Served: the solution at T."""

    padding_mode = "circular"

    def __init__(self) -> None:
        super().__init__()
        pad = {"padding": 4, "padding_mode": self.padding_mode}
        self.net = nn.Sequential(
            nn.Conv1d(1, 32, 9, **pad),
            nn.GELU(),
            nn.Conv1d(32, 32, 9, **pad),
            nn.GELU(),
            nn.Conv1d(32, 1, 9, **pad),
        )

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.3)]

    def forward(self, u0: torch.Tensor) -> torch.Tensor:
        return u0 + self.net(u0)

    def loss(self, batch) -> torch.Tensor:
        u0, u = batch
        return F.mse_loss(self(u0), u)

    def predict(self, u0: torch.Tensor) -> torch.Tensor:
        return self(u0)


class HeatCNNZeroPadding(HeatCNN):
    """BUG: the convolutions pad with zeros (Conv1d's default), not circularly: near both ends of the grid the
    model sees a cold wall instead of the other end of the ring."""

    padding_mode = "zeros"


class HeatCNNStepLRPerStep(HeatCNN):
    """BUG: the StepLR meant per epoch (0.3x every 4 epochs) is returned with ``"interval": "step"``: the
    learning rate is cut every 4 batches and is negligible within the first epoch."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        step = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.3)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": step, "interval": "step"}}


class HeatCNNScaled(HeatCNN):
    """Each initial condition standardised inside the model on purpose (its own mean and standard deviation)
    and the output put back on its scale: the heat equation is linear and keeps the mean, so this is exact."""

    def forward(self, u0: torch.Tensor) -> torch.Tensor:
        mean, scale = u0.mean(-1, keepdim=True), u0.std(-1, keepdim=True) + 1e-3
        z = (u0 - mean) / scale
        return mean + scale * (z + self.net(z))


class HeatCNNConservation(HeatCNN):
    """Two losses summed on purpose: the squared error and a penalty on any change of the mean temperature
    (the periodic heat equation conserves it)."""

    def loss(self, batch) -> torch.Tensor:
        u0, u = batch
        out = self(u0)
        return F.mse_loss(out, u) + 10 * (out.mean(-1) - u0.mean(-1)).pow(2).mean()


class HeatSpectral(_Adam):
    """A learned complex multiplier per Fourier mode (starting at 1: the identity) and a pointwise 1x1 mixing
    of the result with the input; complex parameters, FFTs in the forward pass."""

    def __init__(self) -> None:
        super().__init__()
        self.multiplier = nn.Parameter(torch.zeros(data.GRID // 2 + 1, 2))
        self.mix = nn.Conv1d(2, 1, 1)

    def forward(self, u0: torch.Tensor) -> torch.Tensor:
        factor = 1 + torch.view_as_complex(self.multiplier)
        spectral = torch.fft.irfft(torch.fft.rfft(u0) * factor, n=data.GRID)
        return spectral + self.mix(torch.cat([spectral, u0], 1))

    def loss(self, batch) -> torch.Tensor:
        u0, u = batch
        return F.mse_loss(self(u0), u)

    def predict(self, u0: torch.Tensor) -> torch.Tensor:
        return self(u0)
