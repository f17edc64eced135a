"""A model whose LR sweep is flat (issue #22's field report): BERT for sequence classification from a small
config, random init, on a task it cannot start to learn within a 100-step sweep (the XOR of two tokens'
halves: it sits at chance, loss ln 2, for hundreds of steps at every LR). Module level: the CLI imports it."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from lightning_recipes import OptimizerRecipe
from lightning_recipes.mixins import AdamWRecipe

VOCAB, SEQ = 32, 16


class XorTokens(Dataset):
    """Random token sequences after a ``[CLS]`` (id 0); label: (token 1 < 16) XOR (token 2 < 16)."""

    def __init__(self, count: int = 512, seed: int = 1) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(1, VOCAB, (count, SEQ), generator=generator)
        self.ids[:, 0] = 0
        low = self.ids < VOCAB // 2
        self.labels = (low[:, 1] ^ low[:, 2]).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        return {"input_ids": self.ids[index], "labels": self.labels[index]}


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
        from transformers import BertConfig, BertForSequenceClassification

        self.recipe = OptimizerRecipe(lr=lr, warmup_steps=2)
        config = BertConfig(
            vocab_size=VOCAB,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=2,
            intermediate_size=64,
            max_position_embeddings=SEQ,
            num_labels=2,
        )
        self.model = BertForSequenceClassification(config)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self.model(**batch).loss
