"""Healthy and deliberately broken models and data for the preflight tests (module level: spawn pickles
them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.testing import TinyClassifier, random_classification_loader

IN, C = 16, 4


def loader(
    n: int = 256, batch_size: int = 32, *, shuffle: bool = True, seed: int = 0, classes: int = C
) -> DataLoader:
    """Learnable classification data (a linear teacher), shuffled with its own generator."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, IN, generator=g)
    y = (x @ torch.randn(IN, classes, generator=g)).argmax(-1)
    generator = torch.Generator().manual_seed(seed) if shuffle else None
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle, generator=generator)


class UninspectableLoader:
    """An iterable of prepared batches that is not a ``DataLoader``: nothing tells whether it shuffles."""

    def __init__(self, batches: list) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator:
        return iter(self.batches)


def loader_from(x: Tensor, y: Tensor, batch_size: int = 32, shuffle: bool = True) -> DataLoader:
    generator = torch.Generator().manual_seed(0) if shuffle else None
    return DataLoader(TensorDataset(x, y), batch_size=batch_size, shuffle=shuffle, generator=generator)


class MLP(pl.LightningModule):
    """A healthy MLP with PyTorch's default init (not zero-initialised), cross-entropy, AdamW."""

    def __init__(
        self, classes: int = C, label_smoothing: float = 0.0, lr: float = 1e-2, in_features: int = IN
    ):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(in_features, 64), nn.ReLU(), nn.Linear(64, classes))
        self.label_smoothing = label_smoothing
        self.lr = lr

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss(self, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y, label_smoothing=self.label_smoothing)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        loss = self.loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


class AdamModule(pl.LightningModule):
    """A LightningModule trained by Adam at lr 1e-2 (the tests' modules subclass it)."""

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


class SGDModule(pl.LightningModule):
    """A LightningModule trained by SGD at lr 0.1."""

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class Regressor(AdamModule):
    """A healthy regression MLP with MSE; batches are ``{"x": ..., "y": ...}`` dicts."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).squeeze(-1)

    def training_step(self, batch: dict[str, Tensor], batch_idx: int) -> Tensor:
        return F.mse_loss(self(batch["x"]), batch["y"])


class _DictDataset(torch.utils.data.Dataset):
    def __init__(self, x: Tensor, y: Tensor) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        return {"x": self.x[i], "y": self.y[i]}


def regression_loader(n: int = 256, batch_size: int = 32) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, IN, generator=g)
    y = torch.sin(x[:, 0]) + 0.5 * x[:, 1] * x[:, 2]
    return DataLoader(_DictDataset(x, y), batch_size=batch_size, shuffle=True, generator=g)


# ------------------------------------------------------------------ broken models


class BadInit(MLP):
    """The output layer initialised 30x too large: confidently wrong at init."""

    def __init__(self) -> None:
        super().__init__()
        with torch.no_grad():
            self.net[-1].weight.mul_(30.0)


class SumReduction(MLP):
    """Cross-entropy summed over the batch instead of averaged."""

    def loss(self, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y, reduction="sum")


class SelfTargetLoss(MLP):
    """A loss against the model's own predictions: far below ln C at init."""

    def loss(self, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits * 20, logits.argmax(-1))


class BatchMixing(MLP):
    """A reshape that mixes samples: ``h.t().reshape(B, H)`` instead of ``h``."""

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.net[0](x))
        h = h.t().reshape(h.shape[0], h.shape[1])
        return self.net[2](h)


class MixingLM(pl.LightningModule):
    """A token model whose reshape swaps batch and sequence: ``x.transpose(0, 1).reshape(B, S, D)``."""

    def __init__(self, vocab: int = 16, width: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.embed(tokens)
        b, s, d = h.shape
        return self.head(h.transpose(0, 1).reshape(b, s, d))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        tokens, target = batch
        return F.cross_entropy(self(tokens).flatten(0, 1), target.flatten())

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


class DetachedBranch(MLP):
    """A side branch whose output is detached, so its weights never learn."""

    def __init__(self) -> None:
        super().__init__()
        self.branch = nn.Linear(IN, 64)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.net[0](x)) + self.branch(x).detach()
        return self.net[2](h)


class FrozenLayer(MLP):
    """The first layer left frozen (``requires_grad=False``)."""

    def __init__(self) -> None:
        super().__init__()
        self.net[0].requires_grad_(False)


class ClampedLoss(TinyClassifier):
    """The loss clamped instead of the gradient clipped: above the cap no gradient flows."""

    def loss(self, logits: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(logits, target).clamp(max=1.0)


class MissingFromOptimizer(MLP):
    """configure_optimizers forgets the first layer."""

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.net[2].parameters(), lr=self.lr)


class NonFiniteGrad(MLP):
    """A ``sqrt`` at 0 in the loss: the forward is finite, the gradient is not."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Parameter(torch.zeros(1))

    def loss(self, logits: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(logits, y) + self.gate.sqrt().sum()


class ManualOptimization(MLP):
    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch: Any, batch_idx: int) -> None:
        optimizer = self.optimizers()
        loss = self.loss(self(batch[0]), batch[1])
        optimizer.zero_grad()
        self.manual_backward(loss)
        optimizer.step()


# ------------------------------------------------------------------ broken data


def shuffled_labels_loader() -> DataLoader:
    base = loader(n=512, shuffle=False)
    x, y = base.dataset.tensors
    return loader_from(x, y[torch.randperm(len(y), generator=torch.Generator().manual_seed(1))])


def nan_loader() -> DataLoader:
    x, y = loader(shuffle=False).dataset.tensors
    x = x.clone()
    x[3, 5] = float("nan")
    return loader_from(x, y)


def out_of_range_loader() -> DataLoader:
    x, y = loader(shuffle=False).dataset.tensors
    y = y.clone()
    y[::7] = C  # one past the last class
    return loader_from(x, y)


def sorted_unshuffled_loader() -> DataLoader:
    x, y = loader(shuffle=False).dataset.tensors
    order = torch.argsort(y, stable=True)
    return loader_from(x[order], y[order], shuffle=False)


def constant_input_loader() -> DataLoader:
    x, y = loader(shuffle=False).dataset.tensors
    return loader_from(torch.zeros_like(x), y)


def unnormalised_loader() -> DataLoader:
    x, y = loader(shuffle=False).dataset.tensors
    return loader_from(x * 100 + 128, y)


class RankOneNaN(MLP):
    """Healthy on rank 0; rank 1's training data holds a NaN (to test that decisions are collective)."""

    def train_dataloader(self) -> DataLoader:
        x, y = loader(shuffle=False).dataset.tensors
        if self.trainer.global_rank == 1:
            x = x.clone()
            x[0, 0] = float("nan")
        return loader_from(x, y)


__all__ = [
    "BadInit",
    "BatchMixing",
    "ClampedLoss",
    "DetachedBranch",
    "FrozenLayer",
    "ManualOptimization",
    "MissingFromOptimizer",
    "MixingLM",
    "NonFiniteGrad",
    "Regressor",
    "SelfTargetLoss",
    "SumReduction",
    "random_classification_loader",
]
