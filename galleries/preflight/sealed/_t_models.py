"""Sealed gallery T's models (half ``t``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _t_data as data
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


# --- colour constancy: the illuminant's colour from a scene -------------------------------------------------
class IlluminantNet(_Adam):
    """An MLP over the scene's log pixel values, each scene's mean log brightness removed (so the overall
    exposure does not matter), sorted per channel (the surfaces' order means nothing); the loss is the
    angular error (1 - cosine) between the predicted and the true illuminant, which ignores the prediction's
    length. Served: the illuminant as a unit RGB vector."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.PIXELS * 3, 128, 64, 3)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        return self.net(self.normalise(pixels.log()).sort(1).values.flatten(1))

    def normalise(self, logs: torch.Tensor) -> torch.Tensor:
        return logs - logs.mean((1, 2), keepdim=True)

    def angular(self, predicted: torch.Tensor, illum: torch.Tensor) -> torch.Tensor:
        return 1 - F.cosine_similarity(predicted, illum, dim=1).mean()

    def loss(self, batch) -> torch.Tensor:
        pixels, illum = batch
        return self.angular(self(pixels), illum)

    def predict(self, pixels: torch.Tensor) -> torch.Tensor:
        return F.normalize(self(pixels), dim=1)


class IlluminantNetCosineOverBatch(IlluminantNet):
    """BUG: the cosine is taken over ``dim=0`` (the batch) instead of the channels: each channel's predictions
    are only made to correlate with that channel's truth across the batch, at any scale, so the predicted
    colours' balance between channels is never learned."""

    def angular(self, predicted: torch.Tensor, illum: torch.Tensor) -> torch.Tensor:
        return 1 - F.cosine_similarity(predicted, illum, dim=0).mean()


class IlluminantNetPerChannelNorm(IlluminantNet):
    """BUG: each scene is normalised per channel (its mean log value removed channel by channel, as images
    are standardised per channel elsewhere): that mean is where the illuminant's colour lives, so every scene
    reaches the network already 'white balanced' and the light's colour is gone from the input."""

    def normalise(self, logs: torch.Tensor) -> torch.Tensor:
        return logs - logs.mean(1, keepdim=True)


# --- inverse kinematics of a two-link arm -------------------------------------------------------------------
class ArmIK(_Adam):
    """An MLP from the end effector's (x, y) to each joint's angle as a (sin, cos) pair (no wrap-around at
    +-pi); squared error on the pairs. Served: the angles, atan2(sin, cos)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2, 128, 128, 4)

    def forward(self, position: torch.Tensor) -> torch.Tensor:
        return self.net(position)

    def loss(self, batch) -> torch.Tensor:
        position, pairs, _ = batch
        return F.mse_loss(self(position), pairs)

    def predict(self, position: torch.Tensor) -> torch.Tensor:
        pairs = self(position).view(-1, 2, 2)
        return torch.atan2(pairs[..., 0], pairs[..., 1])


class ArmIKManual(ArmIK):
    """The arm model trained by manual optimisation (a user's loop, to clip and log by hand), with the
    learning rate decayed by 0.7 an epoch; in manual optimisation the loop steps the scheduler itself."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        return [optimizer], [torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.7)]

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        loss = self.loss(batch)
        optimizer.zero_grad()
        self.manual_backward(loss)
        torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)
        optimizer.step()
        self.after_step()
        self.log("train_loss", loss)
        return loss

    def after_step(self) -> None:
        pass

    def on_train_epoch_end(self) -> None:
        self.lr_schedulers().step()


class ArmIKManualSchedulerPerBatch(ArmIKManual):
    """BUG: the scheduler is stepped in ``training_step`` (after every optimizer step) as well as at the
    epoch's end: the 0.7 decay meant per epoch is applied per batch, and within a few dozen batches the rate
    is nothing."""

    def after_step(self) -> None:
        self.lr_schedulers().step()


# --- battery state of charge from current and voltage windows -----------------------------------------------
class SoCNet(_Adam):
    """A GRU over the window's steps (batch, steps, 2), batch first; the last step's output through a
    linear head; squared error on the state of charge. Served: the state of charge at the window's end."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = self.recurrent()
        self.head = nn.Linear(32, 1)

    def recurrent(self) -> nn.GRU:
        return nn.GRU(2, 32, batch_first=True)

    def forward(self, window: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(window)
        return self.head(out[:, -1])

    def loss(self, batch) -> torch.Tensor:
        window, soc = batch
        return F.mse_loss(self(window), soc)

    def predict(self, window: torch.Tensor) -> torch.Tensor:
        return self(window)


class SoCNetTimeFirst(SoCNet):
    """BUG: the GRU is built without ``batch_first=True`` while the loader yields (batch, steps, 2): it runs
    across the batch at each step, and ``out[:, -1]`` is, for each window, a state fed with the last step of
    that window and of the windows before it in the batch."""

    def recurrent(self) -> nn.GRU:
        return nn.GRU(2, 32)


class SoCNetCoulomb(SoCNet):
    """The state-of-charge GRU with a third input that holds no weights: the charge drawn since the window
    began (the current's running sum, a fixed physical feature)."""

    def recurrent(self) -> nn.GRU:
        return nn.GRU(3, 32, batch_first=True)

    def forward(self, window: torch.Tensor) -> torch.Tensor:
        drawn = data.PER_AMP_SECOND * window[..., :1].cumsum(1) * 10
        out, _ = self.gru(torch.cat([window, drawn], 2))
        return self.head(out[:, -1])


class SoCNetDropout(SoCNet):
    """The state-of-charge GRU with dropout (0.3) on the last step's output, active in training only."""

    def forward(self, window: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(window)
        return self.head(self.drop(out[:, -1]))

    def drop(self, h: torch.Tensor) -> torch.Tensor:
        return F.dropout(h, 0.3, training=self.training)


class SoCNetDropoutAlwaysOn(SoCNetDropout):
    """BUG: the functional dropout is called without ``training=self.training`` (its default is True): it
    stays on in eval mode, and every served state of charge is read through a random mask."""

    def drop(self, h: torch.Tensor) -> torch.Tensor:
        return F.dropout(h, 0.3)


# --- league match outcomes ----------------------------------------------------------------------------------
class MatchNet(_Adam):
    """Team embeddings (shared by both sides) and the venue through an MLP to the goal difference of the
    first team minus the second; squared error. Served: the expected goal difference of a home team against
    an away team."""

    def __init__(self) -> None:
        super().__init__()
        self.team = nn.Embedding(data.TEAMS, 8)
        self.net = mlp(17, 64, 1)

    def forward(self, teams: torch.Tensor, venue: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([self.team(teams).flatten(1), venue], 1))

    def loss(self, batch) -> torch.Tensor:
        teams, venue, diff = batch
        return F.mse_loss(self(teams, venue), diff)

    def predict(self, teams: torch.Tensor) -> torch.Tensor:
        return self(teams, torch.ones(len(teams), 1))[:, 0]


class MatchNetScaled(MatchNet):
    """The match model trained on the goal difference standardised with the training set's mean and spread
    (the targets it learns have mean 0 and spread 1); served scaled back."""

    def __init__(self) -> None:
        super().__init__()
        _, _, diff = data.matches(3000, 1)
        self.register_buffer("mean", diff.mean())
        self.register_buffer("std", diff.std())

    def loss(self, batch) -> torch.Tensor:
        teams, venue, diff = batch
        return F.mse_loss(self(teams, venue), (diff - self.mean) / self.std)

    def predict(self, teams: torch.Tensor) -> torch.Tensor:
        return self.unscale(self(teams, torch.ones(len(teams), 1))[:, 0])

    def unscale(self, out: torch.Tensor) -> torch.Tensor:
        return out * self.std + self.mean


class MatchNetScaledNoMean(MatchNetScaled):
    """BUG: the served prediction is scaled back by the spread but the mean is not added back: the home
    advantage, which the mean carries, is lost from every forecast."""

    def unscale(self, out: torch.Tensor) -> torch.Tensor:
        return out * self.std


# --- radio modulation recognition ---------------------------------------------------------------------------
class ModulationNet(_Adam):
    """A 1-D CNN over the (I, Q) channels: a convolution one symbol wide (stride 4), two more, a mean over
    time (bursts are stationary), a linear head; cross-entropy. Served: the modulation."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv1d(2, 64, data.SPS, stride=data.SPS),
            nn.ReLU(),
            nn.Conv1d(64, 64, 1),
            nn.ReLU(),
            nn.Conv1d(64, 64, 3, padding=1),
            nn.ReLU(),
        )
        self.head = nn.Linear(64, data.MODULATIONS)

    def forward(self, iq: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(iq).mean(2))

    def loss(self, batch) -> torch.Tensor:
        iq, kind = batch
        return F.cross_entropy(self(iq), kind)

    def predict(self, iq: torch.Tensor) -> torch.Tensor:
        return self(iq).argmax(1)


class ModulationNetNllOnLogits(ModulationNet):
    """BUG: the loss is ``F.nll_loss`` on the raw logits (the model has no log-softmax): it only pushes the
    true class's logit up, without bound and without pushing the others down, and the loss falls below 0."""

    def loss(self, batch) -> torch.Tensor:
        iq, kind = batch
        return F.nll_loss(self(iq), kind)


# --- low-cost air-quality sensor calibration ----------------------------------------------------------------
class Calibrator(_Adam):
    """An MLP from (raw signal, temperature, humidity) to log(1 + ppb); squared error in that log space.
    Served: the concentration in ppb, expm1 of the output. The learning rate halves every 5 epochs."""

    interval = "epoch"

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(3, 64, 64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, ppb = batch
        return F.mse_loss(self(x), torch.log1p(ppb))

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.invert(self(x)[:, 0])

    def invert(self, out: torch.Tensor) -> torch.Tensor:
        return torch.expm1(out)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=5, gamma=0.5)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": self.interval}}


class CalibratorExpServed(Calibrator):
    """BUG: the served model inverts log1p with ``exp`` instead of ``expm1``: every concentration comes out
    1 ppb too high (a quarter of the readings are under 6 ppb)."""

    def invert(self, out: torch.Tensor) -> torch.Tensor:
        return torch.exp(out)


class CalibratorDecayPerStep(Calibrator):
    """BUG: the step decay meant per epoch is scheduled with ``"interval": "step"``: the rate halves every 5
    batches, and after two epochs it is a millionth of its start, long before the fit has converged."""

    interval = "step"
