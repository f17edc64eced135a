"""Sealed gallery ZW1's models (half ``zw1``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _zw1_data as data
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


# --- optical flow: one displacement per pair of frames ------------------------------------------------------
class FlowNet(_Adam):
    """A small CNN over the two frames stacked as channels (FlowNet-Simple in miniature) to the displacement
    (dx, dy) in pixels; squared error. Served: the displacement."""

    in_channels = 2

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(self.in_channels, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 64),
            nn.ReLU(),
            nn.Linear(64, 2),
        )

    def prepare(self, frames: torch.Tensor) -> torch.Tensor:
        return frames

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.net(self.prepare(frames))

    def loss(self, batch) -> torch.Tensor:
        frames, shift = batch
        return F.mse_loss(self(frames), shift)

    def predict(self, frames: torch.Tensor) -> torch.Tensor:
        return self(frames)


class FlowNetGreyscale(FlowNet):
    """BUG: a ``to_grey`` step copied from the RGB video pipeline averages dimension 1, which here holds the
    two frames, not colours: the network sees their average, which is the same for a motion and its
    opposite, and cannot tell which way the texture moved."""

    in_channels = 1

    def prepare(self, frames: torch.Tensor) -> torch.Tensor:
        return frames.mean(1, keepdim=True)


class FlowNetCharbonnier(FlowNet):
    """The Charbonnier (smooth L1-like) penalty on the displacement error, sqrt(e^2 + 0.01) - 0.1, as optical
    flow papers train with; it is 0 at a perfect fit."""

    def loss(self, batch) -> torch.Tensor:
        frames, shift = batch
        return ((self(frames) - shift).pow(2) + 0.01).sqrt().mean() - 0.1


# --- 4 x 4 mini-sudoku: a digit per cell --------------------------------------------------------------------
class SudokuNet(_Adam):
    """An MLP over the one-hot puzzle (blank or digit 1..4 per cell) to four logits per cell; cross-entropy
    over every cell (the givens are copied, the blanks solved). Served: the digit (class + 1) per cell."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.CELLS * 5, 256, 256, data.CELLS * data.DIGITS)

    def forward(self, puzzle: torch.Tensor) -> torch.Tensor:
        onehot = F.one_hot(puzzle, 5).float().flatten(1)
        return self.net(onehot).view(-1, data.CELLS, data.DIGITS)

    def cell_weights(self, puzzle: torch.Tensor) -> torch.Tensor:
        return torch.ones(puzzle.shape)

    def loss(self, batch) -> torch.Tensor:
        puzzle, target = batch
        per_cell = F.cross_entropy(self(puzzle).transpose(1, 2), target, reduction="none")
        weights = self.cell_weights(puzzle).to(per_cell)
        return (per_cell * weights).sum() / weights.sum().clamp(min=1)

    def predict(self, puzzle: torch.Tensor) -> torch.Tensor:
        return self(puzzle).argmax(-1) + 1


class SudokuNetBlanksOnly(SudokuNet):
    """The loss is masked to the blank cells: the givens, which the served grid copies anyway, are not
    scored."""

    def cell_weights(self, puzzle: torch.Tensor) -> torch.Tensor:
        return (puzzle == 0).float()


class SudokuNetGivensOnly(SudokuNet):
    """BUG: the mask is written ``puzzle != 0`` (the given cells) where it meant the blanks: the network is
    trained to copy the givens and is never scored on a cell it has to solve."""

    def cell_weights(self, puzzle: torch.Tensor) -> torch.Tensor:
        return (puzzle != 0).float()


class SudokuNetConstraint(SudokuNet):
    """Cross-entropy plus a penalty on the grid's constraints: in every row, column and box the four cells'
    probabilities of each digit must sum to 1 (a true solution pays nothing)."""

    def loss(self, batch) -> torch.Tensor:
        puzzle, _ = batch
        probs = self(puzzle).softmax(-1)
        groups = torch.tensor(data.GROUPS)
        sums = probs[:, groups].sum(2)  # (batch, 12 groups, 4 digits)
        return super().loss(batch) + (sums - 1).pow(2).mean()


# --- zero-inflated rainfall (a hurdle model) ----------------------------------------------------------------
class Hurdle(_Adam):
    """An MLP to two outputs: the logit of rain (binary cross-entropy on wet vs dry) and the amount on a wet
    day (softplus; squared error on the wet days only, in units of 5 mm). Served: the expected rainfall,
    P(rain) x amount."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.FEATURES, 64, 64, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(x)
        return out[:, 0], F.softplus(out[:, 1]) * data.AMOUNT_SCALE

    def rain_loss(self, logit: torch.Tensor, wet: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(logit, wet)

    def amount_loss(self, amount: torch.Tensor, rain: torch.Tensor, wet: torch.Tensor) -> torch.Tensor:
        squared = ((amount - rain) / data.AMOUNT_SCALE).pow(2)
        return (squared * wet).sum() / wet.sum().clamp(min=1)

    def loss(self, batch) -> torch.Tensor:
        x, rain = batch
        wet = (rain > 0).float()
        logit, amount = self(x)
        return self.rain_loss(logit, wet) + self.amount_loss(amount, rain, wet)

    def chance(self, logit: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(logit)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        logit, amount = self(x)
        return self.chance(logit) * amount


class HurdleDoubleSigmoid(Hurdle):
    """BUG: the rain term squashes the logit with a sigmoid and then hands it to
    ``binary_cross_entropy_with_logits``, which squashes it again: the loss sees probabilities in (0.5,
    0.73) only, and the served chance of rain (one sigmoid) is driven to 0 or 1."""

    def rain_loss(self, logit: torch.Tensor, wet: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(torch.sigmoid(logit), wet)


class HurdleAmountOnAllDays(Hurdle):
    """BUG: the amount's squared error is averaged over every day, dry days (amount 0) included: the amount
    head learns the unconditional mean P(rain) x amount, and the served P(rain) x amount counts the chance
    of rain twice."""

    def amount_loss(self, amount: torch.Tensor, rain: torch.Tensor, wet: torch.Tensor) -> torch.Tensor:
        return ((amount - rain) / data.AMOUNT_SCALE).pow(2).mean()


class HurdlePriorCorrected(Hurdle):
    """Trained on wet and dry days drawn equally often (a balanced sampler) on purpose, and served with the
    logit shifted back by the log of the training set's dry-to-wet odds (the classic prior correction)."""

    def __init__(self, dry_to_wet_odds: float) -> None:
        super().__init__()
        self.shift = math.log(dry_to_wet_odds)

    def chance(self, logit: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(logit - self.shift)


class HurdleLogNormal(Hurdle):
    """A log-normal likelihood for the wet days' amounts (a mean and a log-scale of log-rainfall; the loss
    is a negative log-likelihood and goes below zero); served P(rain) x exp(mu + s^2 / 2), the log-normal's
    mean."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.FEATURES, 64, 64, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(x)
        return out[:, 0], out[:, 1:]

    def loss(self, batch) -> torch.Tensor:
        x, rain = batch
        wet = (rain > 0).float()
        logit, params = self(x)
        mu, log_s = params.unbind(-1)
        z = (torch.log(rain.clamp(min=1e-3)) - mu) / log_s.exp()
        nll = (0.5 * z.pow(2) + log_s) * wet
        return self.rain_loss(logit, wet) + nll.sum() / wet.sum().clamp(min=1)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        logit, params = self(x)
        mu, log_s = params.unbind(-1)
        return self.chance(logit) * torch.exp(mu + (2 * log_s).exp() / 2)


# --- captchas: four character heads over one image ----------------------------------------------------------
class CaptchaBody(nn.Module):
    """Convolutional features of the captcha, a shared hidden layer, and the per-position ``heads``."""

    def __init__(self, heads: nn.ModuleList) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(64 * (data.GLYPH // 4) * (data.WIDTH // 4), 128),
            nn.ReLU(),
        )
        self.heads = heads

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        h = self.features(image)
        return torch.stack([head(h) for head in self.heads], 1)  # (batch, 4 positions, 11 classes)


class CaptchaNet(_Adam):
    """A small CNN over the captcha, a shared hidden layer and one linear head per character position (11
    classes: a digit or "none"); cross-entropy summed over the positions. Served: the four characters."""

    def __init__(self) -> None:
        super().__init__()
        self.body = CaptchaBody(self.make_heads())

    def make_heads(self) -> nn.ModuleList:
        return nn.ModuleList([nn.Linear(128, data.NONE + 1) for _ in range(data.SLOTS)])

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.body(image)

    def char_loss(self, logits: torch.Tensor, chars: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.transpose(1, 2), chars) * data.SLOTS

    def loss(self, batch) -> torch.Tensor:
        image, chars = batch
        return self.char_loss(self(image), chars)

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        return self(image).argmax(-1)


class CaptchaNetSharedHeads(CaptchaNet):
    """BUG: the heads are built as ``nn.ModuleList([nn.Linear(128, 11)] * 4)``: the list repeats one layer,
    so all four positions share one head and read the same answer."""

    def make_heads(self) -> nn.ModuleList:
        return nn.ModuleList([nn.Linear(128, data.NONE + 1)] * data.SLOTS)


class CaptchaNetIgnoresNone(CaptchaNet):
    """BUG: the loss passes ``ignore_index=10`` to skip the "padding" of 3-digit captchas: the "none" class is
    never a target, so the fourth head always answers a digit and every 3-digit captcha is read with an
    extra character."""

    def char_loss(self, logits: torch.Tensor, chars: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.transpose(1, 2), chars, ignore_index=data.NONE) * data.SLOTS


class CaptchaNetSmoothed(CaptchaNet):
    """Label smoothing (0.1) on every head, so the loss cannot reach zero: its floor, the smoothed target's
    entropy, is declared as the loss's constant offset."""

    loss_offset = data.SLOTS * (
        -(0.9 + 0.1 / 11) * math.log(0.9 + 0.1 / 11) - 10 * (0.1 / 11) * math.log(0.1 / 11)
    )

    def char_loss(self, logits: torch.Tensor, chars: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.transpose(1, 2), chars, label_smoothing=0.1) * data.SLOTS


class CaptchaNetEMA(CaptchaNet):
    """Serves an exponential moving average of the weights (decay 0.95, kept in buffers), updated after
    every optimiser step; the optimiser and the loss see the live weights only."""

    decay = 0.95

    def __init__(self) -> None:
        super().__init__()
        self.names = [name for name, _ in self.body.named_parameters()]
        for name, live in self.body.named_parameters():
            self.register_buffer("ema_" + name.replace(".", "_"), live.detach().clone())

    def averaged(self) -> dict[str, torch.Tensor]:
        return {name: getattr(self, "ema_" + name.replace(".", "_")) for name in self.names}

    @torch.no_grad()
    def update_average(self) -> None:
        live = dict(self.body.named_parameters())
        for name, average in self.averaged().items():
            average.lerp_(live[name], 1 - self.decay)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        self.update_average()

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        return torch.func.functional_call(self.body, self.averaged(), (image,)).argmax(-1)


class CaptchaNetEMAPerEpoch(CaptchaNetEMA):
    """BUG: the average is updated in ``on_train_epoch_end``, once an epoch, with the decay meant per step:
    after 8 epochs the served weights are still two-thirds the random initial ones."""

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        pass

    def on_train_epoch_end(self) -> None:
        self.update_average()


# --- option pricing surrogate (Black-Scholes calls) ---------------------------------------------------------
def option_features(x: torch.Tensor) -> torch.Tensor:
    """Standardised log-moneyness, volatility, years and rate."""
    spot, strike, vol, years, rate = x.unbind(-1)
    return torch.stack(
        [torch.log(spot / strike) / 0.23, (vol - 0.3) / 0.115, (years - 1.05) / 0.55, (rate - 0.04) / 0.023],
        -1,
    )


class OptionNet(_Adam):
    """An MLP (SiLU) from the standardised features to the price per unit of strike (softplus: a call is
    worth more than nothing); squared error on C / K. Served: the price, K x the output."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU())
        self.head = nn.Linear(64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.softplus(self.head(self.body(option_features(x))))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        x, price = batch
        return F.mse_loss(self(x), price / x[:, 1])

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x) * x[:, 1]


class OptionNetHeadOnly(OptionNet):
    """BUG: ``configure_optimizers`` hands Adam ``self.head.parameters()`` (a line kept from a fine-tuning
    recipe whose body was pretrained): the randomly initialised body is never trained, only the last layer
    is fitted over its random features."""

    def configure_optimizers(self):
        return torch.optim.Adam(self.head.parameters(), lr=self.lr)


class OptionNetRandomFeatures(OptionNet):
    """Frozen random Fourier features on purpose (256 cosines of random projections, buffers, not
    parameters), and Adam on the linear head over them only."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("projection", 1.2 * torch.randn(4, 256))
        self.register_buffer("phase", 2 * math.pi * torch.rand(256))
        self.body = nn.Identity()
        self.head = nn.Linear(256, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        features = torch.cos(option_features(x) @ self.projection + self.phase) / 4
        return F.softplus(self.head(features))[:, 0]

    def configure_optimizers(self):
        return torch.optim.Adam(self.head.parameters(), lr=self.lr)


class OptionNetMonotone(OptionNet):
    """Squared error plus a penalty on a falling price in spot (a call's delta is never negative), measured
    by a finite difference: the price at 1% more spot must not be lower."""

    def slope(self, x: torch.Tensor) -> torch.Tensor:
        """The finite-difference delta, d(C / K) / d(S / K)."""
        up = x.clone()
        up[:, 0] = x[:, 0] * 1.01
        return (self(up) - self(x)) / (0.01 * x[:, 0] / x[:, 1])

    def penalty(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(-self.slope(x)).mean()

    def loss(self, batch) -> torch.Tensor:
        x, _ = batch
        return super().loss(batch) + 0.1 * self.penalty(x)


class OptionNetMonotoneSignFlipped(OptionNetMonotone):
    """BUG: the monotonicity penalty is written ``relu(slope)`` where it meant ``relu(-slope)``: it charges
    every rise of the price with spot, and flattens the served curve against the data."""

    def penalty(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.slope(x)).mean()
