"""Where a tool that trains a copy of the model (preflight, ``find_lr``, ``speed_tune``) gets its data: the
same places ``trainer.fit`` looks, in the same order."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities.model_helpers import is_overridden

__all__ = ["FitData", "resolve_fit_data"]


@dataclass(frozen=True)
class FitData:
    """The loaders :func:`resolve_fit_data` found; ``num_classes`` when the datamodule declares it (>= 2)."""

    train: Any
    val: Any = None
    num_classes: int | None = None


def resolve_fit_data(
    caller: str,
    model: pl.LightningModule,
    datamodule: pl.LightningDataModule | None = None,
    train_dataloaders: Any = None,
    val_dataloaders: Any = None,
) -> FitData:
    """The training (and validation) loaders as ``trainer.fit`` would find them.

    The datamodule's ``prepare_data()`` and ``setup("fit")`` run first, then its loaders; loaders passed in
    win; without a datamodule the model's own ``train_dataloader()`` / ``val_dataloader()`` are used.

    Args:
        caller: The tool's name, for the error message (``"find_lr"``).
        model: The LightningModule.
        datamodule: Its loaders (after ``setup("fit")``), when given.
        train_dataloaders: The training loader; wins over the datamodule's and the model's.
        val_dataloaders: The validation loader; wins over the datamodule's and the model's.

    Raises:
        ValueError: When no training data is found (naming the three ways to give it).

    Example:
        >>> from lightning_recipes.data import DigitsDataModule
        >>> from lightning_recipes.testing import TinyClassifier
        >>> data = resolve_fit_data("find_lr", TinyClassifier(), DigitsDataModule(batch_size=32))
        >>> len(next(iter(data.train))[0]), data.num_classes
        (32, 10)
    """
    num_classes = None
    if datamodule is not None:
        datamodule.prepare_data()
        datamodule.setup("fit")
        if train_dataloaders is None:
            train_dataloaders = datamodule.train_dataloader()
        if val_dataloaders is None and is_overridden("val_dataloader", datamodule):
            val_dataloaders = datamodule.val_dataloader()
        declared = getattr(datamodule, "num_classes", None)
        num_classes = declared if isinstance(declared, int) and declared >= 2 else None
    if train_dataloaders is None and is_overridden("train_dataloader", model):
        train_dataloaders = model.train_dataloader()
        if val_dataloaders is None and is_overridden("val_dataloader", model):
            val_dataloaders = model.val_dataloader()
    if train_dataloaders is None:
        raise ValueError(
            f"`{caller}` needs training data: pass `datamodule=` or `train_dataloaders=`, or define "
            "`train_dataloader()` on the model (got none of these)."
        )
    return FitData(train_dataloaders, val_dataloaders, num_classes)
