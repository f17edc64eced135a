"""Sealed gallery N, second half (``o``): its models. Each correct model (a healthy twin) and, next to it,
the buggy variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built
from the global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _o_data as data
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


# --- time difference of arrival -----------------------------------------------------------------------------
class DelayNet(_Adam):
    """A 1-D convolution across both channels wide enough to see a click and its echo, a 1x1 convolution,
    max pooling over time and a linear head over the 13 delays; cross-entropy. Served: the delay in
    samples."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(2, 32, 17, padding=8), nn.ReLU(), nn.Conv1d(32, 32, 1), nn.ReLU(),
            nn.AdaptiveMaxPool1d(1), nn.Flatten(), nn.Linear(32, data.DELAYS),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.cross_entropy(self(x), label)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1) - data.MAX_DELAY


# --- two-digit strips ---------------------------------------------------------------------------------------
class StripReader(_Adam):
    """Two 3x3 convolutions, 2x2 max pooling, the feature map flattened (so position is kept) and one
    10-way head per digit position; the cross-entropy of both digits. Served: (left, right)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.MaxPool2d(2),
        )  # fmt: skip
        self.head = self.make_head()

    def make_head(self) -> nn.Module:
        return nn.Sequential(nn.Flatten(), nn.Linear(32 * 4 * 8, 64), nn.ReLU(), nn.Linear(64, 20))

    def forward(self, strip: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(strip)).view(-1, 2, 10)

    def loss(self, batch) -> torch.Tensor:
        strip, label = batch
        return F.cross_entropy(self(strip).flatten(0, 1), label.flatten())

    def predict(self, strip: torch.Tensor) -> torch.Tensor:
        return self(strip).argmax(-1)


class StripReaderPooled(StripReader):
    """The BUG: the head reads globally average-pooled features (the classifier recipe), so the two
    position heads see the same vector and cannot tell which digit is on the left."""

    def make_head(self) -> nn.Module:
        return nn.Sequential(
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 20)
        )


# --- learning with noisy labels: forward loss correction ----------------------------------------------------
class ForwardCorrected(_Adam):
    """An MLP over the 10 clean classes trained through the known noise process: the likelihood of the
    annotated label is ``softmax(logits) @ T`` (``T[clean, noisy]``). Served: the clean class. Its loss
    stays high (the noise is not learnable), around 0.67 nats at best."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)
        self.register_buffer("noise", self.transition())

    def transition(self) -> torch.Tensor:
        return data.flip_matrix()

    def loss(self, batch) -> torch.Tensor:
        x, noisy = batch
        return F.nll_loss(torch.log(self.net(x).softmax(-1) @ self.noise + 1e-7), noisy)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).argmax(-1)


class ForwardCorrectedTransposed(ForwardCorrected):
    """The BUG: the transition matrix is read as ``T[noisy, clean]`` (transposed), so the correction models
    labels moving to the previous class instead of the next one."""

    def transition(self) -> torch.Tensor:
        return data.flip_matrix().T


# --- multi-task bioassays -----------------------------------------------------------------------------------
class AssayNet(_Adam):
    """An MLP from 128 fingerprint bits to 8 assay logits; binary cross-entropy over the assays that were run
    (NaN targets are left out). Served: the probability of activity in each assay."""

    def __init__(self, hidden: int = 128) -> None:
        super().__init__()
        self.net = mlp(data.BITS, hidden, data.ASSAYS)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        run = ~y.isnan()
        return F.binary_cross_entropy_with_logits(self.net(x)[run], y[run])

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).sigmoid()


class WideAssayNet(AssayNet):
    """The same, 512 hidden units wide."""

    def __init__(self) -> None:
        super().__init__(hidden=512)


# --- long-tailed classification with logit adjustment -------------------------------------------------------
class LogitAdjusted(_Adam):
    """An MLP over 10 digits trained with the logit-adjusted cross-entropy (``logits + log prior`` in the
    loss) and served on the raw logits, so the served classifier is balanced; step decay every 8 epochs."""

    sign = 1.0
    interval = "epoch"

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)
        self.register_buffer("log_prior", data.class_prior().log())

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        decay = torch.optim.lr_scheduler.StepLR(optimizer, step_size=8, gamma=0.3)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": self.interval}}

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.cross_entropy(self.net(x) + self.sign * self.log_prior, label)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).argmax(-1)


class LogitAdjustedSignFlipped(LogitAdjusted):
    """The BUG: the prior is subtracted in the loss (the post-hoc correction's sign used in the loss), so the
    served raw logits favour the head classes even more than plain cross-entropy would."""

    sign = -1.0


class LogitAdjustedDecayPerStep(LogitAdjusted):
    """The BUG: the scheduler dict says ``"interval": "step"``, so the decay meant for every 8 epochs comes
    every 8 batches and the learning rate is gone within the first few epochs."""

    interval = "step"


# --- imputation of sensor series ----------------------------------------------------------------------------
class Imputer(_Adam):
    """An MLP reading the series with its hidden values zeroed and the mask; the MSE on the hidden steps
    only (the observed ones are served as they are). Served: the observed values, gaps filled."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * data.STEPS, 128, 128, data.STEPS)

    def forward(self, x: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x * observed, observed], -1))

    def scored(self, observed: torch.Tensor) -> torch.Tensor:
        return 1 - observed

    def loss(self, batch) -> torch.Tensor:
        x, observed = batch
        weight = self.scored(observed)
        return (((self(x, observed) - x) ** 2) * weight).sum() / weight.sum()

    def predict(self, x: torch.Tensor, observed: torch.Tensor) -> torch.Tensor:
        return observed * x + (1 - observed) * self(x, observed)


class ImputerScoredOnObserved(Imputer):
    """The BUG: the loss is weighted by the mask itself (1 = observed), so the model learns to copy what it
    is given and is never asked about a gap."""

    def scored(self, observed: torch.Tensor) -> torch.Tensor:
        return observed


class ImputerAccumulated(Imputer):
    """The same, by manual optimisation: the gradients of 4 batches summed (each loss divided by 4), one
    optimizer step, the gradients cleared and the warm-up schedule (2% of the rate rising to 100% over 20
    optimizer steps) advanced by hand, as manual optimisation requires."""

    every = 4

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        warm_up = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.02, total_iters=20)
        return [optimizer], [warm_up]

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        loss = self.loss(batch)
        self.manual_backward(loss / self.every)
        if (batch_idx + 1) % self.every == 0:
            optimizer.step()
            optimizer.zero_grad()
            self.advance_schedule()
        self.log("train_loss", loss)
        return loss

    def advance_schedule(self) -> None:
        self.lr_schedulers().step()


class ImputerScheduleNeverStepped(ImputerAccumulated):
    """The BUG: the loop was rewritten for manual optimisation and the scheduler is still only returned from
    ``configure_optimizers``, which Lightning does not step in manual mode: the warm-up never leaves 2%."""

    def advance_schedule(self) -> None:
        pass


# --- insurance claim frequency ------------------------------------------------------------------------------
class ClaimRate(_Adam):
    """An MLP from the risk features to the log of the yearly claim rate; Poisson NLL of the claim count
    with the log exposure as an offset (the model never sees the exposure). Served: the yearly rate."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.RISK_FEATURES, 32, 1)

    def log_rate(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def log_mean(self, x: torch.Tensor, exposure: torch.Tensor) -> torch.Tensor:
        return self.log_rate(x) + exposure.log()

    def loss(self, batch) -> torch.Tensor:
        x, exposure, claims = batch
        return F.poisson_nll_loss(self.log_mean(x, exposure), claims, log_input=True)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_rate(x).exp()


class ClaimRateNoOffset(ClaimRate):
    """The BUG: the offset is left out, so the model fits claims per policy rather than per year of cover,
    and the served yearly rate is the rate times the portfolio's average exposure."""

    def log_mean(self, x: torch.Tensor, exposure: torch.Tensor) -> torch.Tensor:
        return self.log_rate(x)
