"""Models and data of the init_loss / overfit / healthy galleries (module level: spawn pickles them).

Every model is small (a few thousand parameters) and every data set is generated from a fixed seed, so a
whole preflight on one of them takes about a second on one CPU thread.
"""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lightning_recipes.testing import TinyTransformerLM, random_token_loader

IN = 16


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _loader(*tensors: Tensor, batch_size: int = 32, seed: int = 0) -> DataLoader:
    return DataLoader(
        TensorDataset(*tensors), batch_size=batch_size, shuffle=True, generator=_generator(seed)
    )


def _split(x: Tensor, *rest: Tensor, batch_size: int = 32) -> dict[str, Any]:
    """``train_dataloaders`` on the first 3/4, ``val_dataloaders`` on the rest."""
    cut = 3 * len(x) // 4
    train = _loader(x[:cut], *(r[:cut] for r in rest), batch_size=batch_size)
    val = _loader(x[cut:], *(r[cut:] for r in rest), batch_size=batch_size, seed=1)
    return {"train_dataloaders": train, "val_dataloaders": val}


# ------------------------------------------------------------------ data


def classification_data(classes: int = 4, n: int = 512, seed: int = 0) -> dict[str, Any]:
    """A linear teacher's classes: learnable, roughly balanced."""
    g = _generator(seed)
    x = torch.randn(n, IN, generator=g)
    y = (x @ torch.randn(IN, classes, generator=g)).argmax(-1)
    return _split(x, y)


def binary_data(positive_rate: float = 0.5, n: int = 512, seed: int = 0) -> dict[str, Any]:
    """Float 0/1 labels of a linear teacher, thresholded so that ``positive_rate`` of them are 1."""
    g = _generator(seed)
    x = torch.randn(n, IN, generator=g)
    score = x @ torch.randn(IN, generator=g)
    y = (score > torch.quantile(score, 1 - positive_rate)).float()
    return _split(x, y)


def multilabel_data(labels: int = 5, n: int = 512, seed: int = 0) -> dict[str, Any]:
    """``[B, K]`` float 0/1 targets: each label is its own linear teacher's sign."""
    g = _generator(seed)
    x = torch.randn(n, IN, generator=g)
    y = (x @ torch.randn(IN, labels, generator=g) > 0).float()
    return _split(x, y)


def segmentation_data(classes: int = 3, n: int = 256, size: int = 8, seed: int = 0) -> dict[str, Any]:
    """Images ``[B, 1, H, W]`` and per-pixel labels ``[B, H, W]``: a pixel's class is its intensity band."""
    g = _generator(seed)
    x = torch.rand(n, 1, size, size, generator=g)
    y = (x[:, 0] * classes).long().clamp(max=classes - 1)
    return _split((x - 0.5) * 3.0, y)


def image_data(classes: int = 4, n: int = 512, size: int = 8, seed: int = 0) -> dict[str, Any]:
    """Images ``[B, 1, H, W]`` whose class is the quadrant holding a bright blob."""
    g = _generator(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    x = 0.3 * torch.randn(n, 1, size, size, generator=g)
    half = size // 2
    for c in range(classes):
        r, col = (c // 2) * half, (c % 2) * half
        x[y == c, :, r : r + half, col : col + half] += 1.5
    return _split(x, y)


class _DictDataset(Dataset):
    def __init__(self, features: Tensor, mask: Tensor, label: Tensor) -> None:
        self.features, self.mask, self.label = features, mask, label

    def __len__(self) -> int:
        return len(self.label)

    def __getitem__(self, i: int) -> dict[str, Tensor]:
        return {"features": self.features[i], "mask": self.mask[i], "label": self.label[i]}


def dict_data(classes: int = 4, n: int = 512, seed: int = 0) -> dict[str, Any]:
    """Dict batches ``{"features", "mask", "label"}``: the mask (0/1 floats) hides some features."""
    g = _generator(seed)
    x = torch.randn(n, IN, generator=g)
    mask = (torch.rand(n, IN, generator=g) > 0.2).float()
    y = ((x * mask) @ torch.randn(IN, classes, generator=g)).argmax(-1)
    cut = 3 * n // 4
    return {
        "train_dataloaders": DataLoader(
            _DictDataset(x[:cut], mask[:cut], y[:cut]), batch_size=32, shuffle=True, generator=_generator(0)
        ),
        "val_dataloaders": DataLoader(_DictDataset(x[cut:], mask[cut:], y[cut:]), batch_size=32),
    }


def token_data(vocab: int = 16, seq_len: int = 12, n: int = 256, seed: int = 0) -> dict[str, Any]:
    """Next-token prediction on the recurrence ``t[i+1] = (3 t[i] + 1) mod V`` from random starts."""
    g = _generator(seed)
    start = torch.randint(0, vocab, (n, 1), generator=g)
    steps = torch.arange(seq_len + 1)
    seq = torch.zeros(n, seq_len + 1, dtype=torch.long)
    seq[:, 0] = start[:, 0]
    for i in steps[1:]:
        seq[:, i] = (3 * seq[:, i - 1] + 1) % vocab
    return _split(seq[:, :-1], seq[:, 1:])


def reconstruction_data(n: int = 512, features: int = 64, seed: int = 0) -> dict[str, Any]:
    """Lightning's autoencoder example's batch shape: ``(x, label)``; the loss only reads ``x``."""
    g = _generator(seed)
    codes = torch.randn(n, 3, generator=g)
    x = torch.tanh(codes @ torch.randn(3, features, generator=g))
    y = torch.randint(0, 10, (n,), generator=g)
    return _split(x, y)


# ------------------------------------------------------------------ shared base


class _Base(pl.LightningModule):
    """Cross-entropy classifier on ``(x, y)`` batches with AdamW; subclasses replace parts."""

    lr = 1e-2

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(output, target)

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return self.loss(self(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", self.loss(self(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW([p for p in self.parameters() if p.requires_grad], lr=self.lr)


class MLPClassifier(_Base):
    """A plain MLP classifier (PyTorch's default init)."""

    def __init__(self, classes: int = 4, hidden: int = 64, lr: float = 1e-2, dropout: float = 0.0) -> None:
        super().__init__()
        self.lr = lr
        self.net = nn.Sequential(
            nn.Linear(IN, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, classes)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


# ------------------------------------------------------------------ healthy models of new shapes


class BinaryBCE(_Base):
    """One logit per sample, ``binary_cross_entropy_with_logits`` against float 0/1 labels."""

    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN, hidden), nn.ReLU(), nn.Linear(hidden, 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).squeeze(-1)

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.binary_cross_entropy_with_logits(output, target)


class PriorBiasBCE(BinaryBCE):
    """The output bias set to ``logit(positive_rate)`` and a small last layer: at init the model predicts
    the label prior (recommended for imbalanced data: Karpathy's "init well")."""

    def __init__(self, positive_rate: float = 0.1) -> None:
        super().__init__()
        with torch.no_grad():
            self.net[-1].weight.mul_(0.01)
            self.net[-1].bias.fill_(math.log(positive_rate / (1 - positive_rate)))


class PriorBiasClassifier(MLPClassifier):
    """Softmax classifier whose output bias is ``log(prior)`` (and a small last layer)."""

    def __init__(self, prior: tuple[float, ...] = (0.7, 0.2, 0.1)) -> None:
        super().__init__(classes=len(prior))
        with torch.no_grad():
            self.net[-1].weight.mul_(0.01)
            self.net[-1].bias.copy_(torch.tensor(prior).log())


def imbalanced_data(
    prior: tuple[float, ...] = (0.7, 0.2, 0.1), n: int = 768, seed: int = 0
) -> dict[str, Any]:
    """Classes drawn with the given prior; each class has its own mean input (learnable)."""
    g = _generator(seed)
    y = torch.multinomial(torch.tensor(prior), n, replacement=True, generator=g)
    means = 1.5 * torch.randn(len(prior), IN, generator=g)
    x = means[y] + torch.randn(n, IN, generator=g)
    return _split(x, y)


class MultiLabel(BinaryBCE):
    """``[B, K]`` logits for ``K`` independent labels (multi-label), BCE with logits."""

    def __init__(self, labels: int = 5, hidden: int = 32) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(IN, hidden), nn.ReLU(), nn.Linear(hidden, labels))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class TinySegmenter(_Base):
    """Per-pixel classification: logits ``[B, C, H, W]``, labels ``[B, H, W]``, cross-entropy."""

    def __init__(self, classes: int = 3, width: int = 8) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, width, 3, padding=1), nn.ReLU(), nn.Conv2d(width, classes, 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class NormCNN(_Base):
    """A small CNN with GroupNorm and LayerNorm (no BatchNorm), global pooling, a linear head."""

    def __init__(self, classes: int = 4, width: int = 8) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, width, 3, padding=1), nn.GroupNorm(2, width), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=1), nn.GroupNorm(2, width), nn.ReLU(),
            nn.AdaptiveAvgPool2d(2), nn.Flatten(),
        )  # fmt: skip
        self.head = nn.Sequential(nn.LayerNorm(4 * width), nn.Linear(4 * width, classes))
        with torch.no_grad():
            self.head[-1].weight.mul_(0.1)  # a small head: LayerNorm'd features would give ~1.3 x ln C

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x))


class TiedLM(_Base):
    """A causal convolution LM whose output head shares the embedding matrix (weight tying)."""

    def __init__(self, vocab: int = 16, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        nn.init.normal_(self.embed.weight, std=0.02)  # GPT-2's init; N(0, 1) would make tied logits huge
        self.mix = nn.Conv1d(width, width, kernel_size=2)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied

    def forward(self, tokens: Tensor) -> Tensor:
        h = self.embed(tokens).transpose(1, 2)  # [B, D, S]
        h = torch.relu(self.mix(F.pad(h, (1, 0)))).transpose(1, 2)  # left pad: causal
        return self.head(h)

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(output.flatten(0, 1), target.flatten())


class LoRAClassifier(_Base):
    """A frozen "pretrained" base plus a LoRA adapter ``B @ A`` with ``B`` zero-initialised: at step 0 ``A``
    gets an exactly-zero gradient. The optimizer holds only the trainable parameters (adapter and head)."""

    def __init__(self, classes: int = 4, hidden: int = 64, rank: int = 4) -> None:
        super().__init__()
        self.base = nn.Linear(IN, hidden)
        self.base.requires_grad_(False)
        self.lora_a = nn.Parameter(torch.randn(rank, IN) / math.sqrt(IN))
        self.lora_b = nn.Parameter(torch.zeros(hidden, rank))
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: Tensor) -> Tensor:
        h = self.base(x) + x @ self.lora_a.t() @ self.lora_b.t()
        return self.head(torch.relu(h))


class DictBatchClassifier(MLPClassifier):
    """Dict batches ``{"features", "mask", "label"}``; the loss reads the mask too."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        return self.loss(self(batch["features"] * batch["mask"]), batch["label"])

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss(self(batch["features"] * batch["mask"]), batch["label"]))


class DictStepClassifier(MLPClassifier):
    """``training_step`` returns a dict: ``{"loss": ..., "logits": ...}``."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        logits = self(x)
        return {"loss": self.loss(logits, y), "logits": logits.detach()}


class HeavyDropout(MLPClassifier):
    """Dropout ``p = 0.5`` before the head."""

    def __init__(self) -> None:
        super().__init__(hidden=128, dropout=0.5)


class LitAutoEncoder(pl.LightningModule):
    """The shape of Lightning's autoencoder example: ``(x, label)`` batches, ``mse_loss(decoder(encoder(x)),
    x)``; the label is never used."""

    def __init__(self, features: int = 64) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(features, 32), nn.ReLU(), nn.Linear(32, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 32), nn.ReLU(), nn.Linear(32, features))

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(self.encoder(x))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, _ = batch
        return F.mse_loss(self(x), x)

    def configure_optimizers(self) -> Any:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


class SGDClassifier(MLPClassifier):
    """The MLP trained with SGD + momentum (healthy at ``lr=0.1``)."""

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


class SGDTiedLM(TiedLM):
    """The tied LM trained with SGD + momentum (healthy at ``lr=0.5``)."""

    def __init__(self, lr: float = 0.5) -> None:
        super().__init__()
        self.lr = lr

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.lr, momentum=0.9)


# ------------------------------------------------------------------ planted bugs


class SoftmaxThenCE(MLPClassifier):
    """Probabilities fed to a logits loss: ``cross_entropy(softmax(logits), y)``."""

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).softmax(-1)


class SoftmaxThenCELM(TiedLM):
    """A token model whose head output goes through ``softmax`` before ``cross_entropy``."""

    def forward(self, tokens: Tensor) -> Tensor:
        return super().forward(tokens).softmax(-1)


class DoubleSigmoid(BinaryBCE):
    """``sigmoid`` in ``forward`` and ``binary_cross_entropy_with_logits`` in the loss (sigmoid twice)."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.sigmoid(super().forward(x))


class DoubleSigmoidMultiLabel(MultiLabel):
    """Multi-label model with a sigmoid before ``BCEWithLogitsLoss``."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.sigmoid(super().forward(x))

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return nn.BCEWithLogitsLoss()(output, target)


class ClampedLogits(MLPClassifier):
    """Logits clamped to ``[-1, 1]`` ("for stability"): over 10 classes the loss cannot fall below 0.77."""

    def __init__(self) -> None:
        super().__init__(classes=10)

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).clamp(-1.0, 1.0)


class TanhSquashedSegmenter(TinySegmenter):
    """Per-pixel logits of 10 classes squashed by ``tanh``: bounded in ``[-1, 1]``, floor 0.77."""

    def __init__(self) -> None:
        super().__init__(classes=10)

    def forward(self, x: Tensor) -> Tensor:
        return torch.tanh(super().forward(x))


class BadInitBCE(BinaryBCE):
    """The output layer initialised 50x too large: confidently wrong at init."""

    def __init__(self) -> None:
        super().__init__()
        with torch.no_grad():
            self.net[-1].weight.mul_(50.0)
            self.net[-1].bias.fill_(5.0)


class WrongPriorBias(PriorBiasBCE):
    """The prior bias with the wrong sign: predicts 90 % positives on data with 10 % positives."""

    def __init__(self) -> None:
        super().__init__(positive_rate=0.9)


class BadInitSegmenter(TinySegmenter):
    """A segmentation head initialised 40x too large."""

    def __init__(self) -> None:
        super().__init__()
        with torch.no_grad():
            self.net[-1].weight.mul_(40.0)


class SummedSegmenter(TinySegmenter):
    """Per-pixel cross-entropy summed instead of averaged."""

    def loss(self, output: Tensor, target: Tensor) -> Tensor:
        return F.cross_entropy(output, target, reduction="sum")


class SoftmaxTransformerLM(TinyTransformerLM):
    """A transformer LM whose ``forward`` returns ``softmax(logits)``, then ``cross_entropy`` on them."""

    def __init__(self) -> None:
        super().__init__(vocab_size=32, d_model=32, n_heads=2, n_layers=1)

    def forward(self, tokens: Tensor) -> Tensor:
        return super().forward(tokens).softmax(-1)


def transformer_lm(lr: float = 3e-3) -> TinyTransformerLM:
    return TinyTransformerLM(vocab_size=32, d_model=32, n_heads=2, n_layers=1, lr=lr)


def transformer_token_data() -> dict[str, Any]:
    return {"train_dataloaders": random_token_loader(vocab_size=32, seq_len=16, shuffle=True)}
