"""Sealed gallery ZV1's models (half ``zv1``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _zv1_data as data
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


# --- DNA binding-site detection (a 1-D CNN over one-hot windows) --------------------------------------------
class BindingCNN(_Adam):
    """A 1-D CNN over the one-hot window (read as (length, 4) rows, turned channels-first for Conv1d): one
    layer of 32 motif detectors of width 9, the strongest match of each anywhere in the window, a small head
    to one logit; binary cross-entropy. Served: bound (1) or not (0)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 32, 9, padding=4)
        self.head = mlp(32, 16, 1)

    def channels_first(self, x: torch.Tensor) -> torch.Tensor:
        return x.transpose(1, 2)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.conv(self.channels_first(x))).amax(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.binary_cross_entropy_with_logits(self(x), label)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return (self(x) > 0).long()


class BindingCNNViewed(BindingCNN):
    """BUG: the (batch, length, 4) windows are made channels-first with ``x.view(batch, 4, length)`` instead
    of a transpose: each "base channel" is a quarter of the window with its four one-hot columns
    interleaved along the length, and a width-9 filter sees about two bases of the 8-base site."""

    def channels_first(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(len(x), 4, -1)


class BindingCNNBothStrands(BindingCNN):
    """Strand-symmetric on purpose: each detector's strongest match over the window and over its reverse
    complement (the factor binds either strand), so the model reads every window twice."""

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return torch.maximum(super().features(x), super().features(data.reverse_complement(x)))


# --- photometric redshift from five magnitudes --------------------------------------------------------------
def colours(mags: torch.Tensor) -> torch.Tensor:
    """The four neighbouring-band colours (u-g, g-r, r-i, i-z) and the r magnitude, roughly standardised."""
    return torch.cat([mags[:, :-1] - mags[:, 1:], (mags[:, 2:3] - 20.0) / 1.5], -1)


class PhotoZ(_Adam):
    """A plain regression: an MLP from colours to log(1 + z), squared error. Served: expm1 of it."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(5, 64, 64, 1)

    def forward(self, mags: torch.Tensor) -> torch.Tensor:
        return self.net(colours(mags))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        mags, z, _ = batch
        return F.mse_loss(self(mags), torch.log1p(z))

    def predict(self, mags: torch.Tensor) -> torch.Tensor:
        return torch.expm1(self(mags))


class PhotoZServedExp(PhotoZ):
    """BUG: trained on log(1 + z), served with ``torch.exp`` (the inverse of a plain log, from the
    log-redshift version of the model): every served redshift is 1 + z."""

    def predict(self, mags: torch.Tensor) -> torch.Tensor:
        return torch.exp(self(mags))


class PhotoZGaussian(_Adam):
    """An MLP from colours to a Gaussian over log(1 + z): a mean and a log standard deviation per galaxy
    (heteroscedastic: faint galaxies get wider), trained by the Gaussian negative log-likelihood, which
    falls below zero as the fit sharpens. Served: the redshift (expm1 of the mean) and its 1-sigma
    interval."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(5, 64, 64, 2)

    def forward(self, mags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_sigma = self.net(colours(mags)).unbind(-1)
        return mean, log_sigma

    def nll(self, target, mean, log_sigma) -> torch.Tensor:
        return (log_sigma + 0.5 * ((target - mean) * torch.exp(-log_sigma)) ** 2).mean()

    def loss(self, batch) -> torch.Tensor:
        mags, z, _ = batch
        return self.nll(torch.log1p(z), *self(mags))

    def predict(self, mags: torch.Tensor) -> torch.Tensor:
        return torch.expm1(self(mags)[0])

    def predict_interval(self, mags: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_sigma = self(mags)
        return torch.expm1(mean - log_sigma.exp()), torch.expm1(mean + log_sigma.exp())


class PhotoZSigmaAsVariance(PhotoZGaussian):
    """BUG: the squared residual is divided by sigma instead of sigma squared (the head's output read as a
    variance in one term, a standard deviation in the other): the fit drives sigma to half the squared
    residual, and the served intervals are far too narrow."""

    def nll(self, target, mean, log_sigma) -> torch.Tensor:
        return (log_sigma + 0.5 * (target - mean) ** 2 * torch.exp(-log_sigma)).mean()


# --- tic-tac-toe move prediction (the expert's move under a legal-move mask) --------------------------------
class MovePicker(_Adam):
    """An MLP from the board (own stones, the opponent's) to a logit per cell; taken cells are masked out
    (a large negative logit) before the softmax in training and before the argmax in serving; cross-entropy
    with the expert's move. Served: a cell."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(18, 128, 128, 9)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        legal = (x[:, :9] + x[:, 9:]) == 0
        return self.net(x).masked_fill(~legal, -1e4)

    def loss(self, batch) -> torch.Tensor:
        x, move, _ = batch
        return F.cross_entropy(self(x), move)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class MovePickerUnmaskedServing(MovePicker):
    """BUG: ``predict`` takes the argmax of the network's raw logits: the mask is applied in ``forward``'s
    training path only (written into the loss helper), so taken cells, whose logits no loss ever shaped,
    are served."""

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).argmax(-1)


class MovePickerAllBestMoves(MovePicker):
    """Soft targets on purpose: the probability spread evenly over every best move (the expert is
    indifferent between them), not the one recorded move."""

    def loss(self, batch) -> torch.Tensor:
        x, _, best = batch
        return F.cross_entropy(self(x), best / best.sum(-1, keepdim=True))


# --- insurance pure premium (Tweedie on exposure; frequency x severity) -------------------------------------
class PurePremium(_Adam):
    """An MLP to the log pure premium (the expected claim amount per policy year); the expected amount of a
    row is the premium times its exposure (the log exposure as an offset), scored by the Tweedie (p = 1.5)
    negative log-likelihood, which goes below zero; the learning rate cut tenfold when the epoch's training
    loss stops falling. Served: the yearly pure premium."""

    lr, power, mode = 1e-3, 1.5, "min"

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.FEATURES, 32, 32, 1)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode=self.mode, factor=0.1, patience=0
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": plateau, "monitor": "train_loss"}}

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[:, 0]

    def tweedie(self, amount: torch.Tensor, log_mean: torch.Tensor) -> torch.Tensor:
        p = self.power
        return (
            -amount * torch.exp((1 - p) * log_mean) / (1 - p) + torch.exp((2 - p) * log_mean) / (2 - p)
        ).mean()

    def loss(self, batch) -> torch.Tensor:
        x, exposure, _, amount = batch
        return self.tweedie(amount, self(x) + exposure.log())

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).exp()


class PurePremiumPlateauMax(PurePremium):
    """BUG: ReduceLROnPlateau is set up with ``mode="max"`` (copied from a scheduler that watched an
    accuracy): every epoch whose training loss falls counts as no improvement, and the learning rate is cut
    tenfold after each one from the second on."""

    mode = "max"


class PurePremiumClaimsOnly(PurePremium):
    """BUG: ``training_step`` drops the rows without a claim (``batch[amount > 0]``, from the claim-severity
    model's step it was copied from): the premium is fitted to the policies that claimed, and the served
    premiums are several times the true ones."""

    def training_step(self, batch, batch_idx):
        claimed = batch[3] > 0
        loss = self.loss([part[claimed] for part in batch])
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss


class PurePremiumLogTarget(PurePremium):
    """BUG: the premium is fitted by squared error on log1p(amount / exposure) and served with expm1 (the
    log-target recipe of a claim-severity model): on rows mostly without claims, the mean of the log is far
    below the log of the mean, and the served premiums are a fraction of the true ones."""

    def loss(self, batch) -> torch.Tensor:
        x, exposure, _, amount = batch
        return F.mse_loss(self(x), torch.log1p(amount / exposure))

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return torch.expm1(self(x))


class FrequencySeverity(_Adam):
    """Two heads on purpose: a Poisson frequency (claims per year, times the exposure) fitted on every policy,
    and a gamma mean severity fitted only on the policies that had a claim (each weighted by its claim
    count). Served: frequency x severity, the yearly pure premium."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.FEATURES, 32, 32, 2)

    def loss(self, batch) -> torch.Tensor:
        x, exposure, count, amount = batch
        log_frequency, log_severity = self.net(x).unbind(-1)
        log_rate = log_frequency + exposure.log()
        poisson = (log_rate.exp() - count * log_rate).mean()
        claimed = count > 0
        mean_claim = amount[claimed] / count[claimed]
        gamma = count[claimed] * (mean_claim * torch.exp(-log_severity[claimed]) + log_severity[claimed])
        return poisson + gamma.sum() / len(x)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).sum(-1).exp()


# --- 1-D deblurring of a known motion blur -----------------------------------------------------------------
class Deblurrer(_Adam):
    """A dilated 1-D CNN that adds a correction to the observed signal (residual learning); squared error
    against the clean signal; Adam after a linear warm-up over the first 100 steps. Served: through an
    exponential moving average of the weights (decay 0.97 per step)."""

    ema_decay, warmup = 0.97, 100

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, 32, 9, padding=4),
            nn.ReLU(),
            nn.Conv1d(32, 32, 9, padding=8, dilation=2),
            nn.ReLU(),
            nn.Conv1d(32, 1, 9, padding=4),
        )
        self.ema_net = copy.deepcopy(self.net).requires_grad_(False)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=self.warmup)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": warmup, "interval": "step"}}

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        with torch.no_grad():
            for average, live in zip(self.ema_net.parameters(), self.net.parameters(), strict=True):
                average.lerp_(live, 1 - self.ema_decay)

    def restore(self, observed: torch.Tensor, net: nn.Module) -> torch.Tensor:
        return observed + net(observed)

    def forward(self, observed: torch.Tensor) -> torch.Tensor:
        return self.restore(observed, self.net)

    def loss(self, batch) -> torch.Tensor:
        observed, clean = batch
        return F.mse_loss(self(observed), clean)

    def predict(self, observed: torch.Tensor) -> torch.Tensor:
        return self.restore(observed, self.ema_net)


class DeblurrerSlowAverage(Deblurrer):
    """BUG: the moving average's decay is 0.999 per step, copied from a recipe that trains for 100,000 steps:
    over this run's few hundred steps the served weights keep most of the random initialisation."""

    ema_decay = 0.999


class DeblurrerWarmupPerEpoch(Deblurrer):
    """BUG: the 100-step warm-up is returned as ``([optimizer], [warmup])``, whose interval defaults to
    "epoch": the learning rate climbs by 1% of its peak per epoch and stays at a few hundredths of it
    throughout."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.net.parameters(), lr=self.lr)
        return [optimizer], [torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=100)]


class DeblurrerSpectralLoss(Deblurrer):
    """The squared error taken in the frequency domain on purpose (the rfft of the restored signal against
    the clean one's, per bin), a loss on a different scale from the samples'."""

    def loss(self, batch) -> torch.Tensor:
        observed, clean = batch
        return (torch.fft.rfft(self(observed)) - torch.fft.rfft(clean)).abs().pow(2).mean()


class WienerDeblurrer(Deblurrer):
    """A fixed Wiener deconvolution with the known kernel first (frozen on purpose: buffers, no parameters),
    then the CNN's correction of what it leaves (ringing, edges, noise)."""

    pad, regulariser = 16, 0.02

    def __init__(self) -> None:
        super().__init__()
        n = data.SIGNAL + 2 * self.pad
        kernel = torch.fft.rfft(data.KERNEL, n=n)
        self.register_buffer("inverse", kernel.conj() / (kernel.abs() ** 2 + self.regulariser))

    def wiener(self, observed: torch.Tensor) -> torch.Tensor:
        n = data.SIGNAL + 2 * self.pad
        padded = F.pad(observed, (self.pad, self.pad), mode="replicate")
        restored = torch.fft.irfft(torch.fft.rfft(padded, n=n) * self.inverse, n=n)
        return restored[..., self.pad : self.pad + data.SIGNAL]

    def restore(self, observed: torch.Tensor, net: nn.Module) -> torch.Tensor:
        first = self.wiener(observed)
        return first + net(first)
