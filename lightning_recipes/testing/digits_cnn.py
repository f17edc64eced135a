"""``DigitsCNN``: the small CNN for scikit-learn's 8x8 digits that the demo, the notebooks and the tests
train."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from lightning_recipes._validation import check_in_range, check_int, check_non_negative, check_positive

__all__ = ["DigitsCNN"]


class DigitsCNN(pl.LightningModule):
    """A small CNN for 8x8 digits: two conv blocks with BatchNorm, then dropout and a linear head.

    Logs ``train_loss``, ``val_loss`` and ``val_acc``.

    Args:
        num_classes: Output classes.
        width: Channels of the first conv block (the second has twice as many).
        dropout: Dropout before the head.
        lr: Peak learning rate.
        weight_decay: Weight decay.

    Example:
        >>> import torch
        >>> DigitsCNN()(torch.zeros(2, 1, 8, 8)).shape
        torch.Size([2, 10])
    """

    def __init__(
        self,
        num_classes: int = 10,
        width: int = 32,
        dropout: float = 0.2,
        lr: float = 3e-3,
        weight_decay: float = 0.05,
    ) -> None:
        super().__init__()
        check_int("num_classes", num_classes, minimum=1)
        check_int("width", width, minimum=1)
        check_in_range("dropout", dropout, 0.0, 1.0, high_open=True)
        check_positive("lr", lr)
        check_non_negative("weight_decay", weight_decay)
        self.save_hyperparameters()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1, bias=False),
            nn.BatchNorm2d(width),
            nn.ReLU(),
            nn.Conv2d(width, 2 * width, 3, padding=1, bias=False),
            nn.BatchNorm2d(2 * width),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(2 * width * 16, num_classes)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.dropout(self.features(x).flatten(1)))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), sync_dist=True, prog_bar=True)

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(
            self.parameters(), lr=self.hparams["lr"], weight_decay=self.hparams["weight_decay"]
        )
