"""scikit-learn's handwritten digits as a LightningDataModule."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes._validation import check_bool, check_in_range, check_int

__all__ = ["DigitsDataModule"]


class DigitsDataModule(pl.LightningDataModule):
    """scikit-learn's 1,797 8x8 digit images (the ``data`` extra) as ``[B, 1, 8, 8]`` floats in ``[0, 1]``
    (``flatten``: ``[B, 64]``), with a stratified ``val_fraction`` split seeded by ``seed``.

    Example:
        >>> dm = DigitsDataModule(batch_size=32)
        >>> dm.setup("fit")
        >>> x, y = next(iter(dm.train_dataloader()))
        >>> tuple(x.shape), len(dm.train_set), len(dm.val_set), dm.num_classes
        ((32, 1, 8, 8), 1438, 359, 10)
    """

    num_classes = 10

    def __init__(
        self,
        batch_size: int = 64,
        val_fraction: float = 0.2,
        seed: int = 0,
        num_workers: int = 0,
        flatten: bool = False,
    ) -> None:
        super().__init__()
        check_int("batch_size", batch_size, minimum=1)
        check_in_range("val_fraction", val_fraction, 0.0, 1.0, low_open=True, high_open=True)
        check_int("seed", seed)
        check_int("num_workers", num_workers, minimum=0)
        check_bool("flatten", flatten)
        self.save_hyperparameters()
        self.batch_size = batch_size
        self.val_fraction = val_fraction
        self.seed = seed
        self.num_workers = num_workers
        self.flatten = flatten
        self.train_set: TensorDataset | None = None
        self.val_set: TensorDataset | None = None

    def setup(self, stage: str | None = None) -> None:
        if self.train_set is not None:
            return
        try:
            from sklearn.datasets import load_digits
        except ImportError as err:  # pragma: no cover - exercised only without the extra
            raise ImportError(
                "DigitsDataModule needs scikit-learn: pip install 'lightning-recipes[data]'"
            ) from err
        digits = load_digits()
        images = torch.tensor(digits.images, dtype=torch.float32) / 16.0
        images = images.reshape(-1, 64) if self.flatten else images.unsqueeze(1)
        labels = torch.tensor(digits.target, dtype=torch.long)
        generator = torch.Generator().manual_seed(self.seed)
        val_index = []
        for label in range(self.num_classes):
            members = torch.nonzero(labels == label).flatten()
            members = members[torch.randperm(len(members), generator=generator)]
            val_index.append(members[: round(len(members) * self.val_fraction)])
        is_val = torch.zeros(len(labels), dtype=torch.bool)
        is_val[torch.cat(val_index)] = True
        self.train_set = TensorDataset(images[~is_val], labels[~is_val])
        self.val_set = TensorDataset(images[is_val], labels[is_val])

    def train_dataloader(self) -> DataLoader:
        assert self.train_set is not None, "call setup() first"
        generator = torch.Generator().manual_seed(self.seed)
        return DataLoader(
            self.train_set,
            batch_size=self.batch_size,
            shuffle=True,
            generator=generator,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def val_dataloader(self) -> DataLoader:
        assert self.val_set is not None, "call setup() first"
        return DataLoader(self.val_set, batch_size=256, num_workers=self.num_workers)
