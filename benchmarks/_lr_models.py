"""The models of the LR-finder benchmark (``benchmarks/lr_finder.py``): five kinds, each with its data and a
training budget. Every model uses the recipe's AdamW and warmup-cosine schedule, so ``lr`` is the peak LR.

- ``bert_cls``: ``transformers.BertForSequenceClassification`` from a small config (random init), dict
  batches, on a synthetic task (is the first token in the lower half of the vocabulary?) that 3e-3 learns to
  100% in 3 epochs. ``bert_xor``: the same model on the XOR of two tokens' halves, which no LR of the grid
  learns in 10 epochs: the flat sweep of the field report of issue #22.
- ``mlp_regression``: a tabular MLP on scikit-learn's ``load_diabetes`` (ships with sklearn), MSE on
  standardised targets.
- ``mlp_classifier``: an MLP on the flattened 8x8 digits.
- ``digits_cnn``: the library's ``DigitsCNN`` (BatchNorm), width 8.
- ``char_lm``: the library's ``TinyTransformerLM`` on the char corpus (GPT-style, 1 layer, d_model 32).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lightning_recipes.data import CharLMDataModule, DigitsDataModule
from lightning_recipes.mixins import AdamWRecipe
from lightning_recipes.testing import DigitsCNN, TinyTransformerLM
from lightning_recipes.testing.token_tasks import TokenTask, tiny_bert_classifier


class BertClassifier(AdamWRecipe, pl.LightningModule):
    """BERT for sequence classification from a 2-layer, width-32 config; loss from ``.loss``."""

    def __init__(self, lr: float = 1e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.model = tiny_bert_classifier()

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return self.model(**batch).loss

    def validation_step(self, batch: dict[str, Tensor], batch_idx: int) -> None:
        out = self.model(**batch)
        self.log("val_loss", out.loss)
        self.log("val_acc", (out.logits.argmax(-1) == batch["labels"]).float().mean())


class MLP(AdamWRecipe, pl.LightningModule):
    """A two-hidden-layer ReLU MLP; ``task="regression"`` (MSE, one output) or ``"classification"`` (CE)."""

    def __init__(self, in_features: int, out_features: int, task: str, lr: float = 1e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(in_features, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, out_features)
        )

    def _loss(self, batch: tuple[Tensor, Tensor]) -> Tensor:
        x, y = batch
        out = self.net(x)
        if self.hparams["task"] == "regression":
            return F.mse_loss(out.squeeze(-1), y)
        return F.cross_entropy(out, y)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        return self._loss(batch)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        self.log("val_loss", self._loss(batch))


class CNN(AdamWRecipe, DigitsCNN):
    pass


class CharLM(AdamWRecipe, TinyTransformerLM):
    pass


class Loaders(pl.LightningDataModule):
    """A datamodule over two fixed datasets (the training one shuffled with a seeded generator)."""

    def __init__(self, train: Dataset, val: Dataset, batch_size: int) -> None:
        super().__init__()
        self.train, self.val, self.batch_size = train, val, batch_size

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(0)
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True, generator=generator)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val, batch_size=256)


def _diabetes() -> Loaders:
    from sklearn.datasets import load_diabetes

    x, y = load_diabetes(return_X_y=True)
    x = torch.tensor(x, dtype=torch.float32)
    y = torch.tensor(y, dtype=torch.float32)
    order = torch.randperm(len(y), generator=torch.Generator().manual_seed(0))
    x, y = x[order], y[order]
    split = int(0.8 * len(y))
    mean, std = x[:split].mean(0), x[:split].std(0)
    x = (x - mean) / std
    y = (y - y[:split].mean()) / y[:split].std()
    return Loaders(TensorDataset(x[:split], y[:split]), TensorDataset(x[split:], y[split:]), 32)


def _bert_data(task: str = "first") -> Loaders:
    return Loaders(TokenTask(1024, seed=1, task=task), TokenTask(256, seed=2, task=task), 32)


def _char_vocab() -> int:
    return CharLMDataModule(max_chars=1).vocab_size


@dataclass(frozen=True)
class Setup:
    """How to build one benchmark case: the model at a peak LR, its data, and the training budget."""

    make: Callable[[float], pl.LightningModule]
    data: Callable[[], Any]
    epochs: int


SETUPS: dict[str, Setup] = {
    "bert_cls": Setup(lambda lr: BertClassifier(lr=lr), _bert_data, 3),
    "bert_xor": Setup(lambda lr: BertClassifier(lr=lr), lambda: _bert_data("xor"), 10),
    "mlp_regression": Setup(lambda lr: MLP(10, 1, "regression", lr=lr), _diabetes, 20),
    "mlp_classifier": Setup(
        lambda lr: MLP(64, 10, "classification", lr=lr), lambda: DigitsDataModule(flatten=True), 3
    ),
    "digits_cnn": Setup(lambda lr: CNN(lr=lr, width=8), DigitsDataModule, 2),
    "char_lm": Setup(
        lambda lr: CharLM(vocab_size=_char_vocab(), d_model=32, n_heads=2, n_layers=1, lr=lr),
        lambda: CharLMDataModule(seq_len=32, batch_size=32, max_chars=200_000),
        1,
    ),
}
