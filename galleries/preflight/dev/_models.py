"""LightningModules of the development gallery, each small (well under 0.5M parameters) and built from the
global RNG. A planted bug that lives in the model is a constructor flag (``fixed=True`` builds the healthy
twin), so that the buggy model and its twin share everything else.

Every module has ``loss(batch)`` (what ``training_step`` returns) and ``predict(batch)`` (what the proofs
score on clean held-out data).

Example:
    >>> import torch
    >>> model = DigitsCNN()
    >>> model.predict((torch.zeros(3, 1, 8, 8), torch.zeros(3, dtype=torch.long))).shape
    torch.Size([3])
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence

from galleries.preflight.stage import _data_stage_models as stage_models
from galleries.preflight.stage._data_stage_models import _Net

from . import _data as data_

# ---------------------------------------------------------------- classifiers


class DigitsCNN(stage_models.DigitsCNN):
    """The stage gallery's digits CNN (``fixed`` is unused: no bug in the model)."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()


# ---------------------------------------------------------------- keypoint regression


class BlobLocator(_Net):
    """A small CNN regressing a blob's centre ``(x, y)`` in [-1, 1] from a 1x16x16 image (~40k parameters);
    ``predict`` is the x coordinate."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 64),
            nn.ReLU(),
            nn.Linear(64, 2),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0])[:, 0]


# ---------------------------------------------------------------- distillation


class DistilledStudent(_Net):
    """A 64 -> 32 -> 10 student distilled from a frozen logistic-regression teacher (``requires_grad=False``):
    ``0.7 * T^2 * KL(teacher_T || student_T) + 0.3 * CE(student, y)`` at temperature ``T = 4`` (Hinton et
    al.). Its loss at init is far from ``ln 10``: the KL term starts large and is scaled by 16."""

    temperature = 4.0
    alpha = 0.7

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.student = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
        self.teacher = nn.Linear(64, 10)
        weight, bias = data_.teacher_weights()
        with torch.no_grad():
            self.teacher.weight.copy_(weight)
            self.teacher.bias.copy_(bias)
        self.teacher.requires_grad_(False)

    def forward(self, x: Tensor) -> Tensor:
        return self.student(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        logits = self(x)
        with torch.no_grad():
            soft = F.softmax(self.teacher(x) / self.temperature, -1)
        kl = F.kl_div(F.log_softmax(logits / self.temperature, -1), soft, reduction="batchmean")
        return self.alpha * self.temperature**2 * kl + (1 - self.alpha) * F.cross_entropy(logits, y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]).argmax(-1)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.student.parameters(), lr=self.lr)


# ---------------------------------------------------------------- seq2seq


class ReverseSeq2Seq(_Net):
    """A GRU encoder-decoder (teacher forcing) for ``{"src", "tgt"}`` batches. ``forward`` packs the source
    with lengths counted from its non-pad tokens (``pack_padded_sequence``), as the PyTorch tutorials do: a
    source of only padding has length 0 and packing raises ``RuntimeError`` (by design, not a bug)."""

    def __init__(self, fixed: bool = False, hidden: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(data_.SEQ_VOCAB, 32, padding_idx=data_.PAD)
        self.encoder = nn.GRU(32, hidden, batch_first=True)
        self.decoder = nn.GRU(32, hidden, batch_first=True)
        self.out = nn.Linear(hidden, data_.SEQ_VOCAB)

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        lengths = (src != data_.PAD).sum(1)
        packed = pack_padded_sequence(self.embed(src), lengths.cpu(), batch_first=True, enforce_sorted=False)
        _, state = self.encoder(packed)
        bos = torch.full_like(tgt[:, :1], data_.BOS)
        decoded, _ = self.decoder(self.embed(torch.cat([bos, tgt[:, :-1]], 1)), state)
        return self.out(decoded)

    def loss(self, batch: Any) -> Tensor:
        logits = self(batch["src"], batch["tgt"])
        return F.cross_entropy(logits.flatten(0, 1), batch["tgt"].flatten(), ignore_index=data_.PAD)

    def predict(self, batch: Any) -> Tensor:
        return self(batch["src"], batch["tgt"]).argmax(-1)


# ---------------------------------------------------------------- quantile regression


class QuantileMLP(_Net):
    """6 -> 64 -> 64 -> 3 MLP predicting the 0.1, 0.5 and 0.9 quantiles, trained with the pinball loss."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 3))
        self.register_buffer("quantiles", torch.tensor(data_.QUANTILES))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        error = y[:, None] - self(x)
        return torch.maximum(self.quantiles * error, (self.quantiles - 1) * error).mean()

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0])


# ---------------------------------------------------------------- contrastive pairs (siamese)


class SiameseDigits(_Net):
    """A shared 64 -> 64 -> 16 encoder (unit-norm embeddings) trained with the contrastive (margin) loss on
    ``(first, second, same)`` pairs; ``predict``: same when the distance is under half the margin."""

    margin = 1.0

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(self.encoder(x), dim=-1)

    def distance(self, batch: Any) -> Tensor:
        first, second, _ = batch
        return (self(first) - self(second)).norm(dim=-1)

    def loss(self, batch: Any) -> Tensor:
        d, same = self.distance(batch), batch[2].float()
        return (same * d**2 + (1 - same) * F.relu(self.margin - d) ** 2).mean()

    def predict(self, batch: Any) -> Tensor:
        return (self.distance(batch) < self.margin / 2).long()


# ---------------------------------------------------------------- denoising autoencoder


class DenoisingAE(_Net):
    """64 -> 128 -> 32 -> 128 -> 64 autoencoder trained to map a noisy digit to its clean version (MSE)."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32), nn.ReLU(), nn.Linear(32, 128), nn.ReLU(),
            nn.Linear(128, 64),
        )  # fmt: skip

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        noisy, clean = batch
        return F.mse_loss(self(noisy), clean)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0])


# ---------------------------------------------------------------- multi-task


class DigitAndParity(_Net):
    """A shared trunk and two heads (digit, parity) on ``{"image", "digit", "parity"}`` batches; the loss is
    the task losses weighted by ``weights``. The bug: the weights dict misspells ``"parity"`` (``"pairty"``),
    so ``weights.get`` gives the parity loss weight 0 and its head never trains."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        self.digit_head = nn.Linear(64, 10)
        self.parity_head = nn.Linear(64, 2)
        self.weights = {"digit": 1.0, "parity" if fixed else "pairty": 1.0}

    def forward(self, image: Tensor) -> dict[str, Tensor]:
        h = self.trunk(image)
        return {"digit": self.digit_head(h), "parity": self.parity_head(h)}

    def loss(self, batch: Any) -> Tensor:
        out = self(batch["image"])
        losses = {name: F.cross_entropy(out[name], batch[name]) for name in ("digit", "parity")}
        return sum((self.weights.get(name, 0.0) * value for name, value in losses.items()), torch.zeros(()))

    def predict(self, batch: Any) -> Tensor:
        return self(batch["image"])["parity"].argmax(-1)


# ---------------------------------------------------------------- token tagging


class BiGRUTagger(_Net):
    """Embedding + bidirectional GRU + linear tag head on ``{"tokens", "tags"}`` (tags -100 on padding,
    ignored by the cross-entropy)."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(data_.TAG_VOCAB, 32, padding_idx=0)
        self.gru = nn.GRU(32, 32, batch_first=True, bidirectional=True)
        self.head = nn.Linear(64, 3)

    def forward(self, tokens: Tensor) -> Tensor:
        h, _ = self.gru(self.embed(tokens))
        return self.head(h)

    def loss(self, batch: Any) -> Tensor:
        logits = self(batch["tokens"])
        return F.cross_entropy(logits.flatten(0, 1), batch["tags"].flatten(), ignore_index=data_.IGNORE)

    def predict(self, batch: Any) -> Tensor:
        return self(batch["tokens"]).argmax(-1)


# ---------------------------------------------------------------- segmentation


class TinyFCN(_Net):
    """Three convolutions (16 channels, 3x3) to one logit per pixel; BCE against the 0/1 mask."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 1, 1),
        )  # fmt: skip

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        image, mask = batch
        return F.binary_cross_entropy_with_logits(self(image), mask)

    def predict(self, batch: Any) -> Tensor:
        return (self(batch[0]) > 0).float()


# ---------------------------------------------------------------- regressors on (x, y)


class WindowForecaster(_Net):
    """16 past values -> 64 -> 64 -> the next value (MSE)."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(data_.WINDOW, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).squeeze(-1)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0])


class CalendarForecaster(_Net):
    """Past 16 days of sales plus the one-hot weekday of the day to forecast -> its sales (MSE)."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(data_.WINDOW + 7, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, past: Tensor, weekday: Tensor) -> Tensor:
        return self.net(torch.cat([past, weekday], -1)).squeeze(-1)

    def loss(self, batch: Any) -> Tensor:
        return F.mse_loss(self(batch["past"], batch["weekday"]), batch["sales"])

    def predict(self, batch: Any) -> Tensor:
        return self(batch["past"], batch["weekday"])


class BatchStandardise(nn.Module):
    """Standardise each feature with the statistics of the batch it came in (in training AND at eval)."""

    def forward(self, x: Tensor) -> Tensor:
        return (x - x.mean(0)) / (x.std(0) + 1e-5)


class SensorClassifier(_Net):
    """Standardise the raw readings, then 12 -> 64 -> 2. The bug: the standardisation is
    :class:`BatchStandardise` (batch statistics at eval too, so a sample's output depends on its batch).
    ``fixed``: ``BatchNorm1d(affine=False)``, which uses its running statistics at eval."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        norm = nn.BatchNorm1d(data_.SENSORS, affine=False) if fixed else BatchStandardise()
        self.net = nn.Sequential(norm, nn.Linear(data_.SENSORS, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]).argmax(-1)


class NormalisedSensorClassifier(_Net):
    """Normalise the raw readings with the training mean/std (buffers), then 12 -> 64 -> 2. The bug:
    ``validation_step`` calls the network on the raw readings (it forgot ``normalise``), so validation
    reports a different model from the one trained. ``fixed``: it normalises too."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.fixed = fixed
        mean, std = data_.sensor_stats()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.net = nn.Sequential(nn.Linear(data_.SENSORS, 64), nn.ReLU(), nn.Linear(64, 2))

    def normalise(self, x: Tensor) -> Tensor:
        return (x - self.mean) / self.std

    def forward(self, x: Tensor) -> Tensor:
        return self.net(self.normalise(x))

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def validation_logits(self, x: Tensor) -> Tensor:
        """What ``validation_step`` scores."""
        return self(x) if self.fixed else self.net(x)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self.validation_logits(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(-1) == y).float().mean())

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]).argmax(-1)


class PatientMLP(_Net):
    """32 -> 128 -> 2 classifier of a patient's diagnosis from one scan."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(data_.PROFILE, 128), nn.ReLU(), nn.Linear(128, 2))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]).argmax(-1)


class StepLRDigitsMLP(_Net):
    """64 -> 64 -> 10 on digits with ``StepLR(step_size=1, gamma=0.7)`` declared per EPOCH. The bug:
    ``training_step`` also steps the scheduler (kept as ``self.scheduler`` by ``configure_optimizers``) on
    every batch, copied from a hand-written loop: the learning rate decays 16 times per epoch and training
    stalls in the first one. ``fixed``: no manual step."""

    lr = 3e-3

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.fixed = fixed
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        loss = super().training_step(batch, batch_idx)
        if not self.fixed:
            self.scheduler.step()
        return loss

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        self.scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": self.scheduler, "interval": "epoch"}}

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0]).argmax(-1)


class ManualCosineDigitsMLP(StepLRDigitsMLP):
    """Manual optimisation (``automatic_optimization = False``): ``training_step`` zeroes, backpropagates,
    steps the optimizer and steps a per-step cosine schedule (``CosineAnnealingLR(T_max=400)``) through
    ``self.optimizers()`` / ``self.lr_schedulers()``, as Lightning's manual-optimisation guide does. Healthy:
    in manual optimisation Lightning steps nothing itself."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__(fixed=True)
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        optimizer = self.optimizers()
        scheduler = self.lr_schedulers()
        loss = self.loss(batch)
        optimizer.zero_grad()  # type: ignore[union-attr]
        self.manual_backward(loss)
        optimizer.step()  # type: ignore[union-attr]
        scheduler.step()  # type: ignore[union-attr]
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=400)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class ReZeroRegressor(_Net):
    """``head(h + gate * block(h))`` with ``h = proj(x)`` and a ReZero gate starting at 0. The bug: the gate
    is a plain tensor (``torch.zeros(1, requires_grad=True)``), not an ``nn.Parameter``: it is not in
    ``parameters()``, never stepped, stays 0, and the block never gets a gradient: the model is linear.
    ``fixed``: ``nn.Parameter``."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.proj = nn.Linear(8, 64)
        self.block = nn.Sequential(nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64))
        self.head = nn.Linear(64, 1)
        self.gate = nn.Parameter(torch.zeros(1)) if fixed else torch.zeros(1, requires_grad=True)

    def forward(self, x: Tensor) -> Tensor:
        h = self.proj(x)
        return self.head(h + self.gate.to(h.device) * self.block(h)).squeeze(-1)

    def loss(self, batch: Any) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def predict(self, batch: Any) -> Tensor:
        return self(batch[0])


class CodeMatcher(_Net):
    """Does the claimed code (0-9) name the digit shown? Image features (64 -> 64) and code features
    (an embedding, 64) are concatenated and classified. The bug: ``torch.cat([image, image])`` (a typo for
    ``[image, code]``): the code never reaches the output. ``fixed``: the code is used."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.fixed = fixed
        self.image = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        self.code = nn.Embedding(10, 64)
        self.head = nn.Sequential(nn.Linear(128, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, image: Tensor, code: Tensor) -> Tensor:
        image_features, code_features = self.image(image), self.code(code)
        both = torch.cat([image_features, code_features if self.fixed else image_features], -1)
        return self.head(both)

    def loss(self, batch: Any) -> Tensor:
        return F.cross_entropy(self(batch["image"], batch["code"]), batch["match"])

    def predict(self, batch: Any) -> Tensor:
        return self(batch["image"], batch["code"]).argmax(-1)


class StoreSales(_Net):
    """A store embedding (30 x 8) and 2 numeric features -> 32 -> sales (MSE)."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.store = nn.Embedding(len(data_.STORES), 8)
        self.net = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, store: Tensor, features: Tensor) -> Tensor:
        return self.net(torch.cat([self.store(store), features], -1)).squeeze(-1)

    def loss(self, batch: Any) -> Tensor:
        return F.mse_loss(self(batch["store"], batch["features"]), batch["sales"])

    def predict(self, batch: Any) -> Tensor:
        return self(batch["store"], batch["features"])


# ---------------------------------------------------------------- masked LM, VAE, contrastive views


class MaskedLM(_Net):
    """Embedding + bidirectional GRU + vocabulary head; cross-entropy on the masked positions only."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.embed = nn.Embedding(data_.MLM_VOCAB, 32)
        self.gru = nn.GRU(32, 48, batch_first=True, bidirectional=True)
        self.head = nn.Linear(96, data_.MLM_VOCAB)

    def forward(self, input_ids: Tensor) -> Tensor:
        h, _ = self.gru(self.embed(input_ids))
        return self.head(h)

    def loss(self, batch: Any) -> Tensor:
        logits = self(batch["input_ids"])
        return F.cross_entropy(logits.flatten(0, 1), batch["labels"].flatten(), ignore_index=data_.IGNORE)

    def predict(self, batch: Any) -> Tensor:
        return self(batch["input_ids"]).argmax(-1)


class DigitsVAE(_Net):
    """A VAE on 64-pixel digits (latent 8): Bernoulli reconstruction (BCE with logits, summed over pixels)
    plus the KL to N(0, I), averaged over the batch. Batches are ``(x,)``: the target is the input."""

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
        self.decoder = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        mu, logvar = self.encoder(x).chunk(2, -1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.decoder(z), mu, logvar

    def loss(self, batch: Any) -> Tensor:
        (x,) = batch
        logits, mu, logvar = self(x)
        reconstruction = F.binary_cross_entropy_with_logits(logits, x, reduction="sum") / len(x)
        kl = -0.5 * (1 + logvar - mu**2 - logvar.exp()).sum() / len(x)
        return reconstruction + kl


class SimCLRDigits(_Net):
    """A small CNN encoder and projection; symmetric InfoNCE (temperature 0.2) over two views, the other
    samples of the batch as negatives (the loss of a sample depends on its batch; the forward does not)."""

    temperature = 0.2

    def __init__(self, fixed: bool = False) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16 * 16, 64),
            nn.ReLU(), nn.Linear(64, 32),
        )  # fmt: skip

    def forward(self, x: Tensor) -> Tensor:
        return F.normalize(self.encoder(x), dim=-1)

    def loss(self, batch: Any) -> Tensor:
        a, b = (self(view) for view in batch)
        logits = a @ b.T / self.temperature
        target = torch.arange(len(a), device=a.device)
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2
