"""Which loaders a trial run reads: where ``trainer.fit`` would find them (:func:`resolve_fit_data`), the
first of a collection, ``fit``'s combination, the Trainer's."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import CombinedLoader
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch import Tensor
from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

__all__ = [
    "FitData",
    "describe_loader",
    "drawn_uniformly",
    "first_loader",
    "fit_combined_loader",
    "fit_dataloaders",
    "is_shuffled",
    "loader_batch_size",
    "loader_length",
    "resolve_fit_data",
]


def first_loader(loaders: Any) -> Any:
    """Lightning accepts collections of loaders; a trial run that reads one reads the first.

    Example:
        >>> first_loader({"a": [1], "b": [2]}), first_loader([]), first_loader(None)
        ([1], None, None)
    """
    flattened = getattr(loaders, "flattened", None)  # CombinedLoader
    if isinstance(flattened, list) and flattened:
        return flattened[0]
    if isinstance(loaders, Mapping):
        return next(iter(loaders.values()), None)
    if isinstance(loaders, Sequence) and not isinstance(loaders, (str, Tensor)):
        return loaders[0] if loaders else None
    return loaders


def fit_combined_loader(loaders: Any) -> CombinedLoader:
    """A fresh ``CombinedLoader`` iterating ``loaders`` as ``fit`` does (a shallow copy of one, any other
    collection in ``"max_size_cycle"``); ``ValueError`` for ``mode="sequential"``, as ``fit``."""
    if isinstance(loaders, CombinedLoader):
        combined = copy.copy(loaders)
        combined._iterator = None  # the copy's own; `iter` makes it
    else:
        combined = CombinedLoader(loaders, "max_size_cycle")
    if getattr(combined, "_mode", None) == "sequential":
        raise ValueError(
            '`trainer.fit` does not support `CombinedLoader(mode="sequential")` for training, so neither '
            'does a sweep of its steps; use "max_size_cycle" (the default), "max_size" or "min_size".'
        )
    return combined


def fit_dataloaders(trainer: pl.Trainer, pl_module: pl.LightningModule) -> tuple[Any, Any]:
    """The loaders ``fit`` uses, read at ``on_train_start`` (with any sampler the Trainer injected); one the
    Trainer did not load comes from the datamodule's or the module's hook."""
    train, val = trainer.train_dataloader, trainer.val_dataloaders
    if train is None or val is None:
        datamodule = getattr(trainer, "datamodule", None)
        for owner in (datamodule, pl_module):
            if owner is None:
                continue
            if train is None and is_overridden("train_dataloader", owner):
                train = owner.train_dataloader()
            if val is None and is_overridden("val_dataloader", owner):
                val = owner.val_dataloader()
    return train, val


def is_shuffled(loader: Any) -> bool | None:
    """Whether a loader shuffles: ``True``/``False``, or ``None`` when it cannot tell (iterable datasets).

    Example:
        >>> from torch.utils.data import DataLoader
        >>> is_shuffled(DataLoader(range(4), shuffle=True)), is_shuffled(DataLoader(range(4)))
        (True, False)
        >>> is_shuffled([]) is None
        True
    """
    sampler = loader.sampler if isinstance(loader, DataLoader) else None
    if isinstance(sampler, (RandomSampler, WeightedRandomSampler, SubsetRandomSampler, SequentialSampler)):
        return not isinstance(sampler, SequentialSampler)
    shuffle = getattr(sampler, "shuffle", None)  # DistributedSampler and friends
    return bool(shuffle) if shuffle is not None else None


def drawn_uniformly(loader: Any, seed: int = 0) -> DataLoader | None:
    """A loader over ``loader``'s dataset with its batch size and collate function, drawing uniformly (as a
    validation set is drawn), when ``loader``'s sampler picks by a rule of its own (weights, a curriculum);
    ``None`` for a shuffling, sequential or distributed sampler, an iterable dataset or no batch size.

    Example:
        >>> from torch.utils.data import TensorDataset, WeightedRandomSampler
        >>> data = TensorDataset(torch.arange(8.0))
        >>> weighted = DataLoader(data, batch_size=4, sampler=WeightedRandomSampler([1.0] * 8, 8))
        >>> type(drawn_uniformly(weighted).sampler).__name__, drawn_uniformly(DataLoader(data, shuffle=True))
        ('RandomSampler', None)
    """
    if not isinstance(loader, DataLoader) or isinstance(loader.dataset, IterableDataset):
        return None
    if (
        isinstance(loader.sampler, (RandomSampler, SequentialSampler, DistributedSampler))
        or not loader.batch_size
    ):
        return None
    generator = torch.Generator().manual_seed(seed)
    sampler = RandomSampler(loader.dataset, generator=generator)  # type: ignore[arg-type]
    return DataLoader(
        loader.dataset, batch_size=loader.batch_size, sampler=sampler, collate_fn=loader.collate_fn
    )


def loader_batch_size(loader: Any) -> int | None:
    """The samples per batch of one loader: its ``batch_size``, else its batch sampler's (``None``: neither).

    Example:
        >>> from torch.utils.data import DataLoader
        >>> loader_batch_size(DataLoader(range(10), batch_size=4)), loader_batch_size(range(3))
        (4, None)
    """
    size = getattr(loader, "batch_size", None)
    if size is None:
        size = getattr(getattr(loader, "batch_sampler", None), "batch_size", None)
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def loader_length(loader: Any) -> int | None:
    """``len(loader)`` (of a loader, a dataset or a sampler), or ``None`` when it has none (a generator).

    Example:
        >>> from torch.utils.data import DataLoader
        >>> loader_length(DataLoader(range(10), batch_size=4)), loader_length(iter([])) is None
        (3, True)
    """
    try:
        return len(loader)
    except Exception:  # TypeError: no __len__; an IterableDataset's loader may raise others
        return None


def describe_loader(loader: Any) -> str:
    """What decides a loader's number of batches, in words (``len(dataset)``, ``batch_size``, ...).

    Example:
        >>> from torch.utils.data import DataLoader
        >>> parts = describe_loader(DataLoader(list(range(20)), batch_size=32, drop_last=True)).split(", ")
        >>> parts[:3], parts[-1]
        (['len(dataset)=20', 'batch_size=32', 'drop_last=True'], '0 batch(es) per epoch')
    """
    if not isinstance(loader, DataLoader):
        return f"a {type(loader).__name__}, {_count(loader_length(loader), 'batch(es)')} per epoch"
    parts = [f"len(dataset)={_count(loader_length(loader.dataset), '')}".rstrip()]
    parts.append(f"batch_size={loader.batch_size}")
    parts.append(f"drop_last={loader.drop_last}")
    sampler = loader.sampler
    parts.append(f"{type(sampler).__name__} with {_count(loader_length(sampler), 'indices')}")
    if loader.batch_size is None and loader.batch_sampler is not None:
        parts[1] = f"batch_sampler={type(loader.batch_sampler).__name__}"
    parts.append(f"{_count(loader_length(loader), 'batch(es)')} per epoch")
    return ", ".join(parts)


def _count(value: int | None, unit: str) -> str:
    return f"{'unknown' if value is None else value} {unit}".rstrip()


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
    """The loaders as ``trainer.fit`` would find them: those given, else the ``datamodule``'s (after
    ``prepare_data()`` and ``setup("fit")``), else the model's; ``ValueError`` naming ``caller`` without any.

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
