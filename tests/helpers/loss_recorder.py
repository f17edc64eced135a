"""A callback that records every training batch's loss (a host read per batch: tests only)."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl


class LossRecorder(pl.Callback):
    """``losses``: the ``"loss"`` of each training batch's outputs, in order."""

    def __init__(self) -> None:
        self.losses: list[float] = []

    def on_train_batch_end(self, trainer: pl.Trainer, module: Any, outputs: Any, *args: Any) -> None:
        self.losses.append(float(outputs["loss"]))
