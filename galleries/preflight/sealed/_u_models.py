"""Sealed gallery T's models (half ``u``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _u_data as data
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


# --- near-infrared spectroscopy calibration -----------------------------------------------------------------
class NIRNet(_Adam):
    """Standard normal variate (each spectrum centred and scaled over its wavelengths, the chemometrician's
    scatter correction), then an MLP to the analyte's content; squared error. With ``mixup`` (alpha 0.4),
    training spectra are mixed within the batch and so are their contents."""

    mixup = False

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.WAVELENGTHS, 128, 64, 1)

    def snv(self, spectra: torch.Tensor) -> torch.Tensor:
        return (spectra - spectra.mean(1, keepdim=True)) / spectra.std(1, keepdim=True)

    def forward(self, spectra: torch.Tensor) -> torch.Tensor:
        return self.net(self.snv(spectra))

    def loss(self, batch) -> torch.Tensor:
        spectra, content = batch
        return F.mse_loss(self(spectra), content)

    def mixed(self, spectra: torch.Tensor, content: torch.Tensor):
        lam = torch.distributions.Beta(0.4, 0.4).sample((len(spectra), 1))
        other = torch.randperm(len(spectra))
        return lam * spectra + (1 - lam) * spectra[other], lam * content + (1 - lam) * content[other]

    def training_step(self, batch, batch_idx):
        if self.mixup:
            batch = self.mixed(*batch)
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def predict(self, spectra: torch.Tensor) -> torch.Tensor:
        return self(spectra)


class NIRNetMixup(NIRNet):
    """The calibration with mixup of spectra and contents (the healthy twin of the bug below)."""

    mixup = True


class NIRNetMixupTargetKept(NIRNetMixup):
    """BUG: mixup mixes the spectra but returns the first spectrum's content as the target: a spectrum that
    is 40% another sample is labelled with the first sample's content alone."""

    def mixed(self, spectra: torch.Tensor, content: torch.Tensor):
        lam = torch.distributions.Beta(0.4, 0.4).sample((len(spectra), 1))
        other = torch.randperm(len(spectra))
        return lam * spectra + (1 - lam) * spectra[other], content


# --- battery state of charge --------------------------------------------------------------------------------
class SOCNet(_Adam):
    """A GRU over the window's steps (current, voltage, temperature); the last step's state gives the state
    of charge at the end of the window; squared error. The temperature channel carries nothing and is
    ignored by the fit."""

    batch_first = True

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(3, 48, batch_first=self.batch_first)
        self.head = nn.Linear(48, 1)

    def forward(self, window: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(window)
        return self.head(out[:, -1])

    def loss(self, batch) -> torch.Tensor:
        window, soc = batch
        return F.mse_loss(self(window), soc)

    def predict(self, window: torch.Tensor) -> torch.Tensor:
        return self(window)


class SOCNetTimeMajor(SOCNet):
    """BUG: the GRU is built without ``batch_first=True`` while the windows come batch-major: it runs along
    the batch, and ``out[:, -1]`` is each sample's last step seen after the other samples' last steps, not
    the window's history."""

    batch_first = False


# --- jigsaw puzzles -----------------------------------------------------------------------------------------
class JigsawNet(_Adam):
    """An MLP from a puzzle (a digit with its quarters permuted) to the permutation's index among 24;
    cross-entropy. The batches also carry the digit's class, unused. Served: the digit reassembled."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 256, 128, len(data.PERMUTATIONS))

    def forward(self, puzzles: torch.Tensor) -> torch.Tensor:
        return self.net(puzzles.flatten(1))

    def loss(self, batch) -> torch.Tensor:
        puzzles, labels, _digits = batch
        return F.cross_entropy(self(puzzles), labels)

    def reassemble(self, puzzles: torch.Tensor) -> torch.Tensor:
        order = data.PERMUTATIONS[self(puzzles).argmax(-1)]  # position i holds quarter order[i]
        quarters = data.tiles(puzzles)
        back = order.argsort(-1)[:, :, None, None].expand_as(quarters)
        return data.untiles(quarters.gather(1, back))


# --- hourly bike rentals ------------------------------------------------------------------------------------
class BikeNet(_Adam):
    """Embeddings of the hour, weekday and holiday codes with the temperature, an MLP to the log of the
    expected rentals; Poisson negative log-likelihood (its minimum is far below 0 for counts in the tens;
    the holiday flag turns out useless). Served: the expected rentals."""

    def __init__(self) -> None:
        super().__init__()
        self.hour, self.weekday, self.holiday = nn.Embedding(24, 8), nn.Embedding(7, 4), nn.Embedding(2, 2)
        self.net = mlp(8 + 4 + 2 + 1, 64, 64, 1)

    def features(self, codes: torch.Tensor, temp: torch.Tensor) -> torch.Tensor:
        hour, weekday, holiday = self.hour(codes[:, 0]), self.weekday(codes[:, 1]), self.holiday(codes[:, 2])
        return torch.cat([hour, weekday, holiday, temp], 1)

    def forward(self, codes: torch.Tensor, temp: torch.Tensor) -> torch.Tensor:
        return self.net(self.features(codes, temp))  # the log rate

    def loss(self, batch) -> torch.Tensor:
        codes, temp, counts = batch
        return F.poisson_nll_loss(self(codes, temp), counts)

    def predict(self, codes: torch.Tensor, temp: torch.Tensor) -> torch.Tensor:
        return self(codes, temp).exp()


class BikeNetSoftplusRate(BikeNet):
    """BUG: the head answers the rate itself through a softplus, but ``poisson_nll_loss`` keeps its default
    ``log_input=True``: the loss reads the output as a log rate, so the network learns the log of the
    rentals, and the served "rate" is that log."""

    def forward(self, codes: torch.Tensor, temp: torch.Tensor) -> torch.Tensor:
        return F.softplus(self.net(self.features(codes, temp)))

    def predict(self, codes: torch.Tensor, temp: torch.Tensor) -> torch.Tensor:
        return self(codes, temp)


class BikeNetHourFromWeekday(BikeNet):
    """BUG: a copy-paste reads the hour embedding from the weekday column (``codes[:, 1]``, 0..6, valid
    indices of the 24 hours): the hour of day, which drives the rentals, never reaches the model."""

    def features(self, codes: torch.Tensor, temp: torch.Tensor) -> torch.Tensor:
        hour, weekday, holiday = self.hour(codes[:, 1]), self.weekday(codes[:, 1]), self.holiday(codes[:, 2])
        return torch.cat([hour, weekday, holiday, temp], 1)


# --- digit recognition served with test-time augmentation ---------------------------------------------------
class DigitTTA(_Adam):
    """An MLP on 8x8 digits trained with one-pixel shifts; served as the mean of the softmax over test-time
    views (the digit and its one-pixel shifts left and right)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.net(images.flatten(1))

    def loss(self, batch) -> torch.Tensor:
        images, labels = batch
        return F.cross_entropy(self(images), labels)

    def views(self, images: torch.Tensor) -> list[torch.Tensor]:
        return [images, data.shift(images, 1), data.shift(images, -1)]

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return torch.stack([self(v).softmax(-1) for v in self.views(images)]).mean(0).argmax(-1)


class DigitTTAMirrored(DigitTTA):
    """BUG: the test-time views copied from a photo classifier include the horizontal mirror image: a
    mirrored digit is another shape (or no digit), and its vote is averaged in."""

    def views(self, images: torch.Tensor) -> list[torch.Tensor]:
        return [images, images.flip(-1)]


# --- air-quality sensor calibration -------------------------------------------------------------------------
class AirQNet(_Adam):
    """An MLP from (raw reading, humidity, temperature) to the reference PM2.5; squared error; an exponential
    learning-rate decay of 0.7 per epoch."""

    interval = "epoch"

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(3, 64, 64, 1)

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        return self.net(rows)

    def loss(self, batch) -> torch.Tensor:
        rows, reference = batch
        return F.mse_loss(self(rows), reference)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        decay = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=0.7)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": decay, "interval": self.interval}}

    def predict(self, rows: torch.Tensor) -> torch.Tensor:
        return self(rows)


class AirQNetDecayPerStep(AirQNet):
    """BUG: the decay meant per epoch is scheduled with ``"interval": "step"``: 0.7 per batch, so the
    learning rate is below 1% of its start after 13 steps and training stalls in the first epoch."""

    interval = "step"


class AirQPhysics(AirQNet):
    """The raw reading divided by the hygroscopic growth at the row's humidity (kappa 0.4 from the
    literature, a parameter frozen on purpose), then a learned gain and an MLP residual."""

    def __init__(self) -> None:
        super().__init__()
        self.kappa = nn.Parameter(torch.tensor(0.4), requires_grad=False)
        self.gain = nn.Parameter(torch.tensor(1.0))

    def forward(self, rows: torch.Tensor) -> torch.Tensor:
        dry = rows[:, :1] / data.growth(rows[:, 1:2], self.kappa)
        return self.gain * dry + 0.1 * self.net(rows)


# --- valence and arousal regression with a concordance loss -------------------------------------------------
def ccc(pred: torch.Tensor, target: torch.Tensor, dim: int = 0) -> torch.Tensor:
    """Lin's concordance correlation coefficient along ``dim``."""
    mp, mt = pred.mean(dim, keepdim=True), target.mean(dim, keepdim=True)
    cov = ((pred - mp) * (target - mt)).mean(dim)
    return (
        2
        * cov
        / (pred.var(dim, unbiased=False) + target.var(dim, unbiased=False) + (mp - mt).pow(2).sum(dim))
    )


class AffectNet(_Adam):
    """An MLP to (valence, arousal); the loss is 1 - the concordance correlation over the batch, averaged
    over the two (about 1 at initialisation, 0 only for a perfect fit). Served: the two values."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.AFFECT, 64, 64, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def agreement(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ccc(pred, target, dim=0)

    def loss(self, batch) -> torch.Tensor:
        x, target = batch
        return 1 - self.agreement(self(x), target).mean()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)


class AffectNetPearson(AffectNet):
    """BUG: the loss is 1 - Pearson's correlation (the "same" as the concordance to its writer): it ignores
    the predictions' mean and scale, so the served valence and arousal are right only up to an arbitrary
    offset and gain."""

    def agreement(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        p, t = pred - pred.mean(0), target - target.mean(0)
        return (p * t).sum(0) / (p.norm(dim=0) * t.norm(dim=0) + 1e-8)


class AffectNetCCCOverTargets(AffectNet):
    """BUG: the concordance is taken along dim 1 (each row's two values, valence against arousal) instead of
    dim 0 (each target over the batch): the loss rewards rows whose two outputs agree with their two
    targets as a pair, which fixes neither target's level or scale."""

    def agreement(self, pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return ccc(pred, target, dim=1)


class AffectNetEMA(AffectNet):
    """The affect regressor served and validated through an exponential moving average of its weights
    (decay 0.98 per step; the copy takes no gradient and is updated after every optimizer step)."""

    decay = 0.98

    def __init__(self) -> None:
        super().__init__()
        self.ema = copy.deepcopy(self.net).requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x) if self.training else self.ema(x)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        with torch.no_grad():
            for average, weight in zip(self.ema.parameters(), self.net.parameters(), strict=True):
                average.lerp_(weight, 1 - self.decay)


class AffectNetEMAFromLongRecipe(AffectNetEMA):
    """BUG: the decay 0.9999 comes from a recipe of a million steps; over this run's 250 steps the average
    moves 2.5% of the way from its random initial weights, and the served (and validated) model is that
    average."""

    decay = 0.9999
