"""Healthy fine-tuning runs for StabilityGuard's false-alarm tests and benchmark: a tiny randomly initialised
``transformers`` BERT classifier on a synthetic text-classification task, and an MLP on Gaussian blobs or on
separable data with one hard sample (a converged classifier's loss: ~0.01, and 10-20x in that sample's batch).

Example:
    >>> from tests.helpers.finetune_models import blobs, loader
    >>> x, y = next(iter(loader(blobs(n=32), batch_size=8)))
    >>> tuple(x.shape), tuple(y.shape)
    ((8, 16), (8,))
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

VOCAB, SEQ_LEN = 96, 16
CLS, PAD = 1, 0
POSITIVE, NEGATIVE = range(10, 20), range(20, 30)  # "sentiment" tokens of each class
NEUTRAL = range(30, VOCAB)


def text_classification(n: int = 384, seed: int = 0, label_noise: float = 0.1) -> TensorDataset:
    """``n`` sequences of ``SEQ_LEN`` tokens: ``[CLS]``, neutral words and 1-3 words of the label's class;
    ``label_noise`` of the labels flipped (so the loss keeps a floor, as real data does)."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(NEUTRAL.start, NEUTRAL.stop, (n, SEQ_LEN), generator=generator)
    tokens[:, 0] = CLS
    labels = torch.randint(0, 2, (n,), generator=generator)
    for i in range(n):
        count = int(torch.randint(1, 4, (1,), generator=generator))
        where = torch.randperm(SEQ_LEN - 1, generator=generator)[:count] + 1
        words = POSITIVE if labels[i] == 1 else NEGATIVE
        tokens[i, where] = torch.randint(words.start, words.stop, (count,), generator=generator)
    flip = torch.rand(n, generator=generator) < label_noise
    labels = torch.where(flip, 1 - labels, labels)
    return TensorDataset(tokens, torch.ones_like(tokens), labels)


class TinyBertFinetune(pl.LightningModule):
    """``BertForSequenceClassification`` from a tiny config (2 layers, hidden 32), random init, AdamW."""

    def __init__(
        self,
        lr: float = 3e-4,
        weight_decay: float = 0.01,
        hidden: int = 32,
        layers: int = 2,
        dropout: float = 0.1,
    ) -> None:
        super().__init__()
        from transformers import BertConfig, BertForSequenceClassification

        self.lr, self.weight_decay = lr, weight_decay
        config = BertConfig(  # type: ignore[call-arg]
            vocab_size=VOCAB,
            hidden_size=hidden,
            num_hidden_layers=layers,
            num_attention_heads=2,
            intermediate_size=4 * hidden,
            max_position_embeddings=SEQ_LEN,
            num_labels=2,
            hidden_dropout_prob=dropout,
            attention_probs_dropout_prob=dropout,
        )
        self.model = BertForSequenceClassification(config)

    def training_step(self, batch: tuple[Tensor, Tensor, Tensor], batch_idx: int) -> Tensor:
        tokens, mask, labels = batch
        return self.model(input_ids=tokens, attention_mask=mask, labels=labels).loss

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=self.lr, weight_decay=self.weight_decay)


class BlobsMLP(pl.LightningModule):
    """A two-layer MLP (AdamW) for :func:`blobs` or :func:`one_hard_sample`; logs ``val_loss``."""

    def __init__(self, lr: float = 1e-3, in_features: int = 16, classes: int = 4) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(in_features, 64), nn.GELU(), nn.Linear(64, classes))

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.net(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


def blobs(
    n: int = 512, seed: int = 0, in_features: int = 16, classes: int = 4, label_noise: float = 0.1
) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    centers = torch.randn(classes, in_features, generator=generator) * 1.5
    y = torch.randint(0, classes, (n,), generator=generator)
    x = centers[y] + torch.randn(n, in_features, generator=generator)
    flip = torch.rand(n, generator=generator) < label_noise
    y = torch.where(flip, torch.randint(0, classes, (n,), generator=generator), y)
    return TensorDataset(x, y)


def one_hard_sample(n: int = 256, seed: int = 0, in_features: int = 16, classes: int = 4) -> TensorDataset:
    """``n`` points labelled by a random linear teacher (separable), plus 32 copies of the first point, one
    of them with another label: a sample no model fits (its loss stays at ~ln 32 and more)."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, in_features, generator=generator)
    y = (x @ torch.randn(in_features, classes, generator=generator)).argmax(-1)
    x = torch.cat([x, x[:1].repeat(32, 1)])
    y = torch.cat([y, (y[:1] + 1) % classes, y[:1].repeat(31)])
    return TensorDataset(x, y)


def loader(dataset: TensorDataset, batch_size: int = 16, seed: int = 0) -> DataLoader:
    return DataLoader(
        dataset, batch_size=batch_size, shuffle=True, generator=torch.Generator().manual_seed(seed)
    )
