"""Models and loaders of the loop-stage gallery, part 1: data, optimisation (automatic, manual), LR schedule.

Every buggy model is a subclass of its healthy twin that overrides the one method a user got wrong, so the
twins differ only by the bug. Data: sklearn's digits (8x8 images, 10 classes, no download), pixels in [0, 1].
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

N_TRAIN = 1200
BATCH = 32
EPOCHS = 6  # the run each case plans: 6 epochs of 38 batches, 228 steps
STEPS_PER_EPOCH = math.ceil(N_TRAIN / BATCH)


@lru_cache(maxsize=1)
def _digits() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = load_digits(return_X_y=True)
    images = torch.tensor(x, dtype=torch.float32) / 16.0
    labels = torch.tensor(y, dtype=torch.long)
    perm = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    return images[perm], labels[perm]


def digits_split(image: bool = False) -> tuple[TensorDataset, TensorDataset]:
    """Train (1200) and held-out (597) digits; ``image=True`` gives ``(N, 1, 8, 8)``, else ``(N, 64)``."""
    x, y = _digits()
    if image:
        x = x.view(-1, 1, 8, 8)
    return TensorDataset(x[:N_TRAIN], y[:N_TRAIN]), TensorDataset(x[N_TRAIN:], y[N_TRAIN:])


def digits_data(image: bool = False, epochs: int | None = EPOCHS) -> dict[str, Any]:
    """Preflight keywords: shuffled train loader (batch 32), val loader, 10 classes and the planned epochs."""
    train, val = digits_split(image)
    out: dict[str, Any] = {
        "train_dataloaders": DataLoader(
            train, batch_size=BATCH, shuffle=True, generator=torch.Generator().manual_seed(0)
        ),
        "val_dataloaders": DataLoader(val, batch_size=128),
        "num_classes": 10,
    }
    if epochs is not None:
        out["max_epochs"] = epochs
    return out


def digits_image_data() -> dict[str, Any]:
    return digits_data(image=True)


def mlp(hidden: int = 64, inputs: int = 64, classes: int = 10) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(inputs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(), nn.Linear(hidden, classes)
    )


class DigitsClassifier(pl.LightningModule):
    """Plain MLP classifier (automatic optimisation, Adam); logs ``train_loss``, ``val_loss``, ``val_acc``."""

    def __init__(self, lr: float = 1e-3) -> None:
        super().__init__()
        self.lr = lr
        self.net = mlp()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_logits(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self.validation_logits(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(-1) == y).float().mean())

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=self.lr)


# --------------------------------------------------------------------------------------------- optimisation
class AccumulatingManual(DigitsClassifier):
    """Manual optimisation with gradient accumulation over 2 micro-batches, done right."""

    def __init__(self) -> None:
        super().__init__(lr=2e-3)
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        opt = self.optimizers()
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.manual_backward(loss / 2)
        if (batch_idx + 1) % 2 == 0:
            opt.step()
            opt.zero_grad()
        self.log("train_loss", loss)
        return loss.detach()


class AccumulatingManualNeverZeroes(AccumulatingManual):
    """BUG: the accumulation steps every 2 micro-batches but never clears the gradients, so each step uses the
    sum of every gradient since the start of training."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        opt = self.optimizers()
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.manual_backward(loss / 2)
        if (batch_idx + 1) % 2 == 0:
            opt.step()
        self.log("train_loss", loss)
        return loss.detach()


class ManualSGD(DigitsClassifier):
    """Manual optimisation, one step per batch: zero_grad, backward, step (as Lightning's docs show)."""

    def __init__(self) -> None:
        super().__init__(lr=1e-3)
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        opt = self.optimizers()
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        opt.zero_grad()
        self.manual_backward(loss)
        opt.step()
        self.log("train_loss", loss)
        return loss.detach()


class ManualStepBeforeBackward(ManualSGD):
    """BUG: ``opt.step()`` runs before ``self.manual_backward(loss)``; the gradients it would use were cleared
    just before, so no parameter ever moves (the loss is computed and logged every step)."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        opt = self.optimizers()
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        opt.zero_grad()
        opt.step()
        self.manual_backward(loss)
        self.log("train_loss", loss)
        return loss.detach()


class ManualZeroGradAfterBackward(ManualSGD):
    """BUG: ``opt.zero_grad()`` sits between ``self.manual_backward(loss)`` and ``opt.step()`` (moved
    there "to free memory early"): every step sees cleared gradients and no parameter moves."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        opt = self.optimizers()
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.manual_backward(loss)
        opt.zero_grad()
        opt.step()
        self.log("train_loss", loss)
        return loss.detach()


class ClassifierWithDecoder(pl.LightningModule):
    """Manual optimisation with two optimizers: encoder + classifier trained on the class loss, a decoder
    trained on reconstructing the input from the (detached) code, each with its own optimizer and LR."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False
        self.encoder = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.classifier = nn.Linear(32, 10)
        self.decoder = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.encoder(x))

    def losses(self, batch: Any) -> tuple[torch.Tensor, torch.Tensor]:
        x, y = batch
        code = self.encoder(x)
        return F.cross_entropy(self.classifier(code), y), code.detach()

    def reconstruction_loss(self, batch: Any, code: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(self.decoder(code), batch[0])

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        opt_model, opt_dec = self.optimizers()
        cls_loss, code = self.losses(batch)
        opt_model.zero_grad()
        self.manual_backward(cls_loss)
        opt_model.step()
        rec_loss = self.reconstruction_loss(batch, code)
        opt_dec.zero_grad()
        self.manual_backward(rec_loss)
        opt_dec.step()
        self.log_dict({"train_loss": cls_loss, "rec_loss": rec_loss})
        return cls_loss.detach()

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(-1) == y).float().mean())

    def configure_optimizers(self) -> Any:
        model_params = list(self.encoder.parameters()) + list(self.classifier.parameters())
        return torch.optim.Adam(model_params, lr=1e-3), torch.optim.Adam(self.decoder.parameters(), lr=3e-3)


class ClassifierWithDecoderStepsWrongOptimizer(ClassifierWithDecoder):
    """BUG (copy-paste): after the class loss's backward the code steps the decoder's optimizer instead of the
    model's; encoder and classifier never update, while the reconstruction loss falls as expected."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        opt_model, opt_dec = self.optimizers()
        cls_loss, code = self.losses(batch)
        opt_model.zero_grad()
        self.manual_backward(cls_loss)
        opt_dec.step()
        rec_loss = self.reconstruction_loss(batch, code)
        opt_dec.zero_grad()
        self.manual_backward(rec_loss)
        opt_dec.step()
        self.log_dict({"train_loss": cls_loss, "rec_loss": rec_loss})
        return cls_loss.detach()


class BottleneckClassifier(DigitsClassifier):
    """An 8-d embedding (``stem``), an MLP body and a head; param groups give the head a larger LR."""

    def __init__(self) -> None:
        super().__init__(lr=3e-3)
        self.net = nn.Identity()
        self.stem = nn.Linear(64, 8)
        self.body = nn.Sequential(nn.ReLU(), nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(self.stem(x)))

    def configure_optimizers(self) -> Any:
        groups = [
            {"params": list(self.stem.parameters()) + list(self.body.parameters())},
            {"params": self.head.parameters(), "lr": 2 * self.lr},
        ]
        return torch.optim.Adam(groups, lr=self.lr)


class BottleneckParamGroupsMissStem(BottleneckClassifier):
    """BUG: the param groups list ``body`` and ``head`` only; the 8-d ``stem`` embedding (added later) is in
    no optimizer, so it stays a random projection while it still receives gradients."""

    def configure_optimizers(self) -> Any:
        groups = [
            {"params": self.body.parameters()},
            {"params": self.head.parameters(), "lr": 2 * self.lr},
        ]
        return torch.optim.Adam(groups, lr=self.lr)


# ------------------------------------------------------------------------------------------------- schedule
class ScheduledSGD(DigitsClassifier):
    """SGD with momentum and a per-epoch StepLR (halve every 2 epochs)."""

    def __init__(self) -> None:
        super().__init__(lr=0.1)

    def sgd(self) -> torch.optim.SGD:
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)

    def configure_optimizers(self) -> Any:
        opt = self.sgd()
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "epoch"}}


class StepLRRegisteredPerStep(ScheduledSGD):
    """BUG: the per-epoch StepLR is registered with ``"interval": "step"``; the LR halves every 2 batches and
    is ~1e-7 of its start by the end of the first epoch."""

    def configure_optimizers(self) -> Any:
        opt = self.sgd()
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


WARMUP_STEPS = 60


def _linear_warmup(step: int) -> float:
    return min(1.0, (step + 1) / WARMUP_STEPS)


class WarmupPerStep(ScheduledSGD):
    """Linear warmup over 60 optimizer steps, then a constant LR; stepped every batch."""

    def configure_optimizers(self) -> Any:
        opt = self.sgd()
        sched = torch.optim.lr_scheduler.LambdaLR(opt, _linear_warmup)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class WarmupRegisteredPerEpoch(ScheduledSGD):
    """BUG: the per-step warmup is returned as a bare scheduler (Lightning's default interval is ``"epoch"``):
    over the 6-epoch run the LR never exceeds 6/60 of its peak."""

    def configure_optimizers(self) -> Any:
        opt = self.sgd()
        return [opt], [torch.optim.lr_scheduler.LambdaLR(opt, _linear_warmup)]


def _warmup_without_end(step: int) -> float:
    return (step + 1) / WARMUP_STEPS  # the min(1.0, ...) was forgotten


class WarmupWithoutEnd(ScheduledSGD):
    """BUG: the linear warmup has no end: the LR keeps growing, to ~4x its intended peak by the run's end."""

    def configure_optimizers(self) -> Any:
        opt = self.sgd()
        sched = torch.optim.lr_scheduler.LambdaLR(opt, _warmup_without_end)
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class OneCycleSGD(ScheduledSGD):
    """OneCycleLR over the planned run (steps per epoch = batches per epoch), stepped every batch."""

    steps_per_epoch = STEPS_PER_EPOCH

    def configure_optimizers(self) -> Any:
        opt = self.sgd()
        sched = torch.optim.lr_scheduler.OneCycleLR(
            opt, max_lr=self.lr, epochs=EPOCHS, steps_per_epoch=self.steps_per_epoch
        )
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


class OneCycleStepsPerEpochIsDatasetSize(OneCycleSGD):
    """BUG: ``steps_per_epoch`` is the dataset's length (samples), not the loader's (batches): the cycle is
    32x longer than the run, which ends early in the warmup at a few % of ``max_lr``."""

    steps_per_epoch = N_TRAIN
