"""Models shared by the tuner tests: one whose LR sweep is flat (issue #22's field report), speed options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
from torch import Tensor
from torch.utils.data import DataLoader

from lightning_recipes import OptimizerRecipe
from lightning_recipes.mixins import AdamWRecipe
from lightning_recipes.testing import TinyClassifier
from lightning_recipes.testing.token_tasks import TokenTask, tiny_bert_classifier


def XorTokens(count: int = 512, seed: int = 1) -> TokenTask:
    """Random token sequences after a ``[CLS]`` (id 0); label: (token 1 < 16) XOR (token 2 < 16)."""
    return TokenTask(count, seed, task="xor")


class XorData(pl.LightningDataModule):
    def __init__(self, batch_size: int = 32) -> None:
        super().__init__()
        self.batch_size = batch_size

    def train_dataloader(self) -> DataLoader:
        return DataLoader(XorTokens(), batch_size=self.batch_size, shuffle=False)


class FlatBert(AdamWRecipe, pl.LightningModule):
    """2-layer, width-32 ``BertForSequenceClassification``; ``lr="find"`` sets the recipe's ``lr="find"``."""

    def __init__(self, lr: Any = 1e-3) -> None:
        super().__init__()
        self.recipe = OptimizerRecipe(lr=lr, warmup_steps=2)
        self.model = tiny_bert_classifier()

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self.model(**batch).loss


class AdamWClassifier(AdamWRecipe, TinyClassifier):
    """TinyClassifier with the recipe's AdamW (decay / no-decay groups) and warm-up cosine schedule."""


def no_sleep(*attrs: str) -> Callable[[pl.LightningModule], pl.LightningModule]:
    """A speed option's ``prepare`` that sets the module's ``attrs`` (its sleeps, in seconds) to 0."""

    def prepare(module: pl.LightningModule) -> pl.LightningModule:
        for attr in attrs:
            setattr(module, attr, 0.0)
        return module

    return prepare
