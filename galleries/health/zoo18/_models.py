"""Zoo 18's networks and its trainer (plain torch and Lightning): a heteroscedastic regressor (a mean and a
log-variance head), node embeddings scored by a dot product for link prediction, an attention-pooling
multiple-instance classifier of bags of digit images, a character-level GRU language model and a small
patch transformer of 8x8 digits. :class:`Task` trains any of them with the loss the task names."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

MakeOptimizer = Callable[[Any], torch.optim.Optimizer]
MakeSchedule = Callable[[torch.optim.Optimizer], Any] | None


def mlp(sizes: list[int]) -> nn.Sequential:
    """``Linear`` + ReLU layers of ``sizes``, the last one linear."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(itertools.pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class Task(pl.LightningModule):
    """Trains ``net`` with ``loss_of(batch)`` (a subclass's), the optimizer ``make_optimizer(parameters)``
    and, if given, the schedule ``make_schedule(optimizer)`` stepped every optimizer step; logs
    ``val_loss`` (the same loss on the validation batches) when it validates."""

    def __init__(self, net: nn.Module, make_optimizer: MakeOptimizer, make_schedule: MakeSchedule = None):
        super().__init__()
        self.net = net
        self.make_optimizer = make_optimizer
        self.make_schedule = make_schedule

    def loss_of(self, batch: Any) -> Tensor:
        raise NotImplementedError

    def val_loss_of(self, batch: Any) -> Tensor:
        return self.loss_of(batch)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.loss_of(batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.val_loss_of(batch), on_epoch=True, batch_size=len(batch[0]))

    def optimizer_parameters(self) -> Any:
        return self.parameters()

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.optimizer_parameters())
        if self.make_schedule is None:
            return optimizer
        schedule = self.make_schedule(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


# ------------------------------------------------------------------------------------ heteroscedastic
class MeanVarianceNet(nn.Module):
    """A ReLU body and two heads: the mean and the log-variance (Kendall & Gal, 2017)."""

    def __init__(self, inputs: int = 4, width: int = 64) -> None:
        super().__init__()
        self.body = mlp([inputs, width, width])
        self.act = nn.ReLU()
        self.mean = nn.Linear(width, 1)
        self.log_var = nn.Linear(width, 1)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        h = self.act(self.body(x))
        return self.mean(h), self.log_var(h)


LOG_2PI = math.log(2 * math.pi)


class GaussianNLLTask(Task):
    """The Gaussian negative log-likelihood of the target under the predicted mean and log-variance, in
    nats per row: ``0.5 (log var + (y - mean)^2 / var + log 2 pi)``."""

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        mean, log_var = self.net(x)
        return 0.5 * (log_var + (y - mean).pow(2) * torch.exp(-log_var) + LOG_2PI).mean()


# ------------------------------------------------------------------------------------ link prediction
class DotProductEmbedding(nn.Module):
    """One ``dim``-vector per node, drawn ``normal(0, std)``; an edge's logit is the dot product of its
    nodes' vectors plus a learned offset."""

    def __init__(self, nodes: int, dim: int = 32, std: float = 0.1) -> None:
        super().__init__()
        self.embedding = nn.Embedding(nodes, dim)
        nn.init.normal_(self.embedding.weight, 0.0, std)
        self.offset = nn.Parameter(torch.zeros(()))

    def forward(self, edges: Tensor) -> Tensor:
        e = self.embedding(edges)
        return (e[:, 0] * e[:, 1]).sum(-1) + self.offset


def permute_destinations(edges: Tensor) -> Tensor:
    """Negative samples: each positive edge's destination replaced by another edge's (a random permutation
    of the destination column)."""
    return torch.stack([edges[:, 0], edges[torch.randperm(len(edges)), 1]], 1)


class LinkTask(Task):
    """Link prediction with negative sampling: the BCE of the positive edges of a batch (label 1) and as
    many negatives drawn by ``negatives(edges)`` (label 0); validated on held-out edges and fixed negatives
    (``(edges, labels)`` batches)."""

    def __init__(self, net: nn.Module, make_optimizer: MakeOptimizer, make_schedule: MakeSchedule = None,
                 negatives: Callable[[Tensor], Tensor] = permute_destinations) -> None:  # fmt: skip
        super().__init__(net, make_optimizer, make_schedule)
        self.negatives = negatives

    def loss_of(self, batch: Any) -> Tensor:
        (edges,) = batch
        pairs = torch.cat([edges, self.negatives(edges)])
        labels = torch.cat([torch.ones(len(edges)), torch.zeros(len(edges))])
        return F.binary_cross_entropy_with_logits(self.net(pairs), labels)

    def val_loss_of(self, batch: Any) -> Tensor:
        pairs, labels = batch
        return F.binary_cross_entropy_with_logits(self.net(pairs), labels)


# ------------------------------------------------------------------------------------ multiple instances
class AttentionMIL(nn.Module):
    """Ilse et al. (2018): a ReLU instance encoder, attention weights over a bag's instances
    (``softmax(w^T tanh(V h))``), the attention-weighted mean embedding and a linear bag classifier (one
    logit: the bag holds a positive instance)."""

    def __init__(self, inputs: int = 64, width: int = 64, embed: int = 32, attend: int = 16) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(inputs, width), nn.ReLU(), nn.Linear(width, embed), nn.ReLU())
        self.attention = nn.Sequential(nn.Linear(embed, attend), nn.Tanh(), nn.Linear(attend, 1))
        self.classifier = nn.Linear(embed, 1)

    def forward(self, bags: Tensor) -> Tensor:
        h = self.encoder(bags)  # (B, K, embed)
        a = torch.softmax(self.attention(h), dim=1)  # (B, K, 1)
        return self.classifier((a * h).sum(1)).squeeze(-1)


class BagTask(Task):
    """The BCE of a bag's logit against its label (1: it holds a positive instance)."""

    def loss_of(self, batch: Any) -> Tensor:
        bags, labels = batch
        return F.binary_cross_entropy_with_logits(self.net(bags), labels)


# ------------------------------------------------------------------------------------ char GRU
class CharGRU(nn.Module):
    """A character embedding, a one-layer GRU and a linear readout of the next character's logits."""

    def __init__(self, vocab: int, embed: int = 32, hidden: int = 64) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, embed)
        self.gru = nn.GRU(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, chars: Tensor) -> Tensor:
        h, _ = self.gru(self.embedding(chars))
        return self.head(h)


class CharLMTask(Task):
    """Next-character cross-entropy (nats per character) over ``(inputs, targets)`` windows."""

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        logits = self.net(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


# ------------------------------------------------------------------------------------ patch transformer
class PatchTransformer(nn.Module):
    """An 8x8 digit cut into four 4x4 patches (``patch``), each projected to ``dim``, a learned class token
    and position embeddings, ``layers`` pre-norm transformer encoder layers and a linear readout of the class
    token. It is fed ``(batch, tokens, dim)``: ``batch_first=False`` makes its attention mix the batch's
    images instead of an image's tokens."""

    def __init__(self, dim: int = 32, layers: int = 2, heads: int = 4, classes: int = 10, patch: int = 4,
                 batch_first: bool = True) -> None:  # fmt: skip
        super().__init__()
        self.patch = patch
        tokens = (8 // patch) ** 2
        self.project = nn.Linear(patch * patch, dim)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.position = nn.Parameter(0.02 * torch.randn(1, tokens + 1, dim))
        layer = nn.TransformerEncoderLayer(
            dim, heads, 2 * dim, dropout=0.0, batch_first=batch_first, norm_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def patches(self, images: Tensor) -> Tensor:
        """``(B, 64)`` pixels to ``(B, (8 / patch)^2, patch^2)`` patches (row-major)."""
        p = self.patch
        x = images.reshape(-1, 8 // p, p, 8 // p, p).permute(0, 1, 3, 2, 4)
        return x.reshape(len(images), -1, p * p)

    def forward(self, images: Tensor) -> Tensor:
        tokens = self.project(self.patches(images))
        tokens = torch.cat([self.cls.expand(len(tokens), -1, -1), tokens], 1) + self.position
        return self.head(self.norm(self.encoder(tokens)[:, 0]))


class ClassifyTask(Task):
    """Cross-entropy of class logits."""

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        return F.cross_entropy(self.net(x), y)
