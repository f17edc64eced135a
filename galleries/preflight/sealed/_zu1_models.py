"""Sealed gallery ZU1's models (half ``zu1``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from galleries.preflight.sealed import _zu1_data as data
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


# --- stereo disparity from a pair of scanlines (a correlation cost volume, soft argmin) ---------------------
class StereoNet(_Adam):
    """A shared 1-D CNN describes each pixel of both lines; the cost volume correlates each left pixel with
    the right pixel d to its left (d = 0..7); a small CNN refines the costs, and the served disparity is
    their soft argmin (the expected d under a softmax over d). Smooth L1 on the observable pixels only."""

    def __init__(self) -> None:
        super().__init__()
        self.describe = nn.Sequential(
            nn.Conv1d(1, 16, 5, padding=2), nn.ReLU(), nn.Conv1d(16, 16, 5, padding=2)
        )
        self.refine = nn.Sequential(
            nn.Conv1d(data.MAX_DISPARITY, 32, 5, padding=2),
            nn.ReLU(),
            nn.Conv1d(32, data.MAX_DISPARITY, 5, padding=2),
        )
        self.register_buffer("disparities", torch.arange(data.MAX_DISPARITY).float())

    def shift(self, features: torch.Tensor, d: int) -> torch.Tensor:
        """The right features moved d pixels right: position x holds the right pixel x - d."""
        return F.pad(features, (d, 0))[..., : features.shape[-1]]

    def scale(self, pair: torch.Tensor) -> torch.Tensor:
        return pair

    def forward(self, pair: torch.Tensor) -> torch.Tensor:
        pair = self.scale(pair)
        left, right = (self.describe(pair[:, i : i + 1]) for i in (0, 1))
        cost = torch.stack(
            [(left * self.shift(right, d)).mean(1) for d in range(data.MAX_DISPARITY)], 1
        )  # (batch, disparity, width)
        logits = cost + self.refine(cost)
        return (logits.softmax(1) * self.disparities[:, None]).sum(1)

    def pixel_loss(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The smooth L1 of every pixel, and which ones count (the observable ones)."""
        return F.smooth_l1_loss(self(batch["pair"]), batch["disparity"], reduction="none"), batch["valid"]

    def loss(self, batch) -> torch.Tensor:
        per_pixel, counted = self.pixel_loss(batch)
        return per_pixel[counted].mean()

    def predict(self, pair: torch.Tensor) -> torch.Tensor:
        return self(pair)


class StereoNetShiftedLeft(StereoNet):
    """BUG: the right features are moved d pixels left (position x holds the right pixel x + d), the way a
    right-to-left matcher would: every left pixel is compared with the wrong side, where its match never
    lies."""

    def shift(self, features: torch.Tensor, d: int) -> torch.Tensor:
        return F.pad(features, (0, d))[..., d:]


class StereoNetOccludedOnly(StereoNet):
    """BUG: the loss keeps the pixels where the mask is False (``per_pixel[~valid]``, the mask read as "is
    occluded"): the model is fitted on the few pixels whose match left the line, whose disparity only
    their position betrays."""

    def loss(self, batch) -> torch.Tensor:
        per_pixel, counted = self.pixel_loss(batch)
        return per_pixel[~counted].mean()


class StereoNetRaw(StereoNet):
    """Raw grey levels on purpose: the pair arrives as the camera records it (around 128, spread 32) and is
    standardised inside the model, so serving takes the camera's values."""

    def scale(self, pair: torch.Tensor) -> torch.Tensor:
        return (pair - 128) / 32


# --- source separation by spectrogram masking ---------------------------------------------------------------
class Separator(_Adam):
    """A 2-D CNN over the log-compressed mixture magnitude predicts a mask in [0, 1] per time-frequency bin;
    the voice is the mask times the mixture; squared error against the voice's magnitude. Served: the
    voice's magnitude."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU()
        )
        self.head = nn.Conv2d(16, 1, 3, padding=1)

    def features(self, mixture: torch.Tensor) -> torch.Tensor:
        return self.encoder(torch.log1p(mixture)[:, None])

    def mask(self, mixture: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.head(self.features(mixture))[:, 0])

    def forward(self, mixture: torch.Tensor) -> torch.Tensor:
        return self.mask(mixture) * mixture

    def loss(self, batch) -> torch.Tensor:
        mixture, voice, _ = batch
        return F.mse_loss(self(mixture), voice)

    def predict(self, mixture: torch.Tensor) -> torch.Tensor:
        return self(mixture)


class SeparatorEncoderDetached(Separator):
    """BUG: the encoder's features are detached before the mask head (``.detach()`` left from a recipe that
    trained a head on a frozen pretrained encoder): the encoder stays at its random initialisation and only
    the last convolution learns."""

    def features(self, mixture: torch.Tensor) -> torch.Tensor:
        return super().features(mixture).detach()


class SeparatorStepLRPerStep(Separator):
    """BUG: StepLR(step_size=30, gamma=0.1), a recipe's cut tenfold every 30 epochs, is registered with
    ``"interval": "step"``: the learning rate is cut tenfold every 30 batches and is negligible after the
    first hundred."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        cut = torch.optim.lr_scheduler.StepLR(optimizer, step_size=30, gamma=0.1)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": cut, "interval": "step"}}


class TwoMaskSeparator(Separator):
    """Two masks on purpose: the head predicts a logit per source and bin, a softmax across the two sources
    makes the masks sum to one, and the loss is the sum of both sources' squared errors. Served: the voice's
    magnitude."""

    source_axis = 1

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Conv2d(16, 2, 3, padding=1)

    def masks(self, mixture: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(mixture)).softmax(self.source_axis)

    def forward(self, mixture: torch.Tensor) -> torch.Tensor:
        return self.masks(mixture) * mixture[:, None]  # (batch, source, frequency, time)

    def loss(self, batch) -> torch.Tensor:
        mixture, voice, noise = batch
        estimate = self(mixture)
        return F.mse_loss(estimate[:, 0], voice) + F.mse_loss(estimate[:, 1], noise)

    def predict(self, mixture: torch.Tensor) -> torch.Tensor:
        return self(mixture)[:, 0]


class TwoMaskSeparatorSoftmaxOverTime(TwoMaskSeparator):
    """BUG: the softmax that should share each bin between the sources runs over the last axis, time
    (``softmax(-1)``): each source's mask sums to one along each frequency row, so most bins get a few
    percent of the mixture whatever they hold."""

    source_axis = -1


# --- Dyck-word recognition (an LSTM over padded bracket words) ----------------------------------------------
class DyckLSTM(_Adam):
    """An embedding and a one-layer LSTM read each word packed to its length (``pack_padded_sequence``); the
    final hidden state gives one logit; binary cross-entropy. Served: balanced (1) or not (0)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(3, 8, padding_idx=0)
        self.lstm = nn.LSTM(8, 48, batch_first=True)
        self.head = nn.Linear(48, 1)

    def summary(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(
            self.embed(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        _, (hidden, _) = self.lstm(packed)
        return hidden[-1]

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.head(self.summary(tokens, lengths))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(self(batch["tokens"], batch["length"]), batch["label"])

    def predict(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return (self(tokens, lengths) > 0).float()


class DyckLSTMLastPaddedStep(DyckLSTM):
    """BUG: the summary is the last time step of the unpacked output (``pad_packed_sequence(...)[0][:, -1]``):
    only the batch's longest words end there; every shorter word's summary is the zero padding, and the
    head sees nothing of it."""

    def summary(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = pack_padded_sequence(
            self.embed(tokens), lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        out, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True)
        return out[:, -1]


class DyckLSTMGatherLast(DyckLSTM):
    """Unpacked on purpose: the LSTM runs over the right-padded words, padding and all, and the summary is
    gathered at each word's own last token (position length - 1), before any padding is read."""

    def summary(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(tokens))
        return out[torch.arange(len(tokens)), lengths - 1]


# --- tomographic reconstruction (sinogram in, image out) ---------------------------------------------------
SINOGRAM_SCALE = 10.0  # a fixed scale for the line integrals (0..~30 over the training phantoms)


class TomoNet(_Adam):
    """An MLP from the flattened sinogram (divided by a fixed scale, that of the training set's line
    integrals) to the 16x16 image; squared error per pixel. Served: the image."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.ANGLES * data.SIZE, 384, 384, data.SIZE * data.SIZE)

    def scale(self, sinogram: torch.Tensor) -> torch.Tensor:
        return sinogram / SINOGRAM_SCALE

    def forward(self, sinogram: torch.Tensor) -> torch.Tensor:
        return self.net(self.scale(sinogram).flatten(1)).view(-1, data.SIZE, data.SIZE)

    def loss(self, batch) -> torch.Tensor:
        sinogram, image = batch
        return F.mse_loss(self(sinogram), image)

    def predict(self, sinogram: torch.Tensor) -> torch.Tensor:
        return self(sinogram)


class TomoNetPerScanMax(TomoNet):
    """BUG: each sinogram is divided by its own maximum (a per-sample normalisation): the reconstruction
    keeps the phantom's shape but loses its overall density, which only the scale carried."""

    def scale(self, sinogram: torch.Tensor) -> torch.Tensor:
        return sinogram / sinogram.amax((-2, -1), keepdim=True)


class TomoNetChannelAxis(TomoNet):
    """BUG: the image comes out as (batch, 1, 16, 16) (a channel axis for a CNN head that was later dropped)
    against targets of (batch, 16, 16): ``mse_loss`` broadcasts to (batch, batch, 16, 16), scoring every
    reconstruction against every image of the batch, and the model learns the batch's mean phantom."""

    def forward(self, sinogram: torch.Tensor) -> torch.Tensor:
        return self.net(self.scale(sinogram).flatten(1)).view(-1, 1, data.SIZE, data.SIZE)

    def predict(self, sinogram: torch.Tensor) -> torch.Tensor:
        return self(sinogram)[:, 0]


class TomoNetDataConsistency(TomoNet):
    """Two losses on purpose: the image's squared error plus a data-consistency term, the squared error of
    the reconstruction's own sinogram (the frozen projector, a buffer) against the measured one."""

    weight = 0.05

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("projector", data.projector().clone())

    def loss(self, batch) -> torch.Tensor:
        sinogram, image = batch
        estimate = self(sinogram)
        reprojected = (estimate.flatten(1) @ self.projector).view_as(sinogram)
        return F.mse_loss(estimate, image) + self.weight * F.mse_loss(reprojected, sinogram)


# --- variable-star classification from irregularly sampled light curves -------------------------------------
class StarNet(_Adam):
    """Deep Sets over the observations: each real row becomes (its magnitude less the star's mean magnitude,
    the log gap in days since the previous night, the change of magnitude since then), an MLP embeds it,
    and a masked mean and a masked max over the real rows feed the classifier; cross-entropy over the four
    kinds. Served: a kind."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = mlp(3, 64, 64)
        self.classify = mlp(128, 64, data.KINDS)

    def mean_magnitude(self, mags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (mags * mask).sum(1, keepdim=True) / mask.sum(1, keepdim=True)

    def rows(self, curve: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        times, mags = curve.unbind(-1)
        centred = mags - self.mean_magnitude(mags, mask)
        gap = torch.log1p(F.pad(times.diff(dim=1), (1, 0)).clamp(min=0))
        change = F.pad(mags.diff(dim=1), (1, 0))
        return torch.stack([centred, gap, change], -1)

    def forward(self, curve: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.embed(self.rows(curve, mask))
        keep = mask[..., None]
        mean = (h * keep).sum(1) / keep.sum(1)
        top = h.masked_fill(~keep, -1e4).amax(1)
        return self.classify(torch.cat([mean, top], -1))

    def loss(self, batch) -> torch.Tensor:
        return F.cross_entropy(self(batch["curve"], batch["mask"]), batch["kind"])

    def predict(self, curve: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self(curve, mask).argmax(-1)


class StarNetMeanWithPadding(StarNet):
    """BUG: the star's mean magnitude is ``mags.mean(1)`` over the padded row, zeros included: it lands
    several magnitudes short of the true mean by an amount that depends on how often the star was seen, and
    every centred magnitude carries that offset."""

    def mean_magnitude(self, mags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return mags.mean(1, keepdim=True)


class StarNetFocal(StarNet):
    """A focal loss on purpose (gamma 2: confident, right answers down-weighted), which starts well below
    ln 4."""

    gamma = 2.0

    def loss(self, batch) -> torch.Tensor:
        log_p = self(batch["curve"], batch["mask"]).log_softmax(-1).gather(1, batch["kind"][:, None])[:, 0]
        return (-((1 - log_p.exp()) ** self.gamma) * log_p).mean()


class StarNetAccumulated(StarNet):
    """Manual optimisation on purpose: the gradients of two batches are summed (each loss halved) before one
    Adam step, and cleared after it."""

    every = 2

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        loss = self.loss(batch)
        self.manual_backward(loss / self.every)
        if (batch_idx + 1) % self.every == 0:
            optimizer.step()
            self.clear(optimizer)
        self.log("train_loss", loss)
        return loss

    def clear(self, optimizer) -> None:
        optimizer.zero_grad()


class StarNetAccumulatedClearedPerEpoch(StarNetAccumulated):
    """BUG: the manual loop clears the gradients once per epoch (``zero_grad`` in ``on_train_epoch_start``)
    instead of after each step: within an epoch every step follows the sum of all the gradients since the
    epoch began."""

    def clear(self, optimizer) -> None:
        pass

    def on_train_epoch_start(self) -> None:
        self.optimizers().zero_grad()
