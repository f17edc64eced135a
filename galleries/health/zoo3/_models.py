"""Zoo 3's networks and task variants (plain torch and Lightning). The shared trainer is the first zoo's
:class:`Task`; the variants here change only its loss."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import MLP, Task

__all__ = ["MLP", "BagClassifier", "LSTMClassifier", "PatchViT", "ResidualMLP", "SignalConv1d", "Task"]
__all__ += ["GaussianNLLTask", "PoissonTask", "SiameseTask"]


class SignalConv1d(nn.Sequential):
    """Two 1-D convolutions (ReLU), a global average pool and a linear head: a waveform classifier."""

    def __init__(self, classes: int = 3, channels: int = 16) -> None:
        super().__init__(
            nn.Conv1d(1, channels, 7, padding=3), nn.ReLU(), nn.Conv1d(channels, 2 * channels, 5, padding=2),
            nn.ReLU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Linear(2 * channels, classes),
        )  # fmt: skip


class LSTMClassifier(nn.Module):
    """Embedding, a one-layer LSTM, a linear head on the last hidden state."""

    def __init__(self, vocab: int, classes: int, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.rnn = nn.LSTM(16, width, batch_first=True)
        self.head = nn.Linear(width, classes)

    def forward(self, x: Tensor) -> Tensor:
        _, (h, _) = self.rnn(self.embed(x))
        return self.head(h[-1])


class BagClassifier(nn.Module):
    """An ``EmbeddingBag`` (weighted mean of token vectors, tf-idf weights) and an MLP head; the input is
    ``(tokens, weights)`` stacked as floats ``(N, 2, L)``."""

    def __init__(self, vocab: int, classes: int = 2, width: int = 32) -> None:
        super().__init__()
        self.bag = nn.EmbeddingBag(vocab, 16, mode="sum")
        self.head = MLP([16, width, classes])

    def forward(self, x: Tensor) -> Tensor:
        tokens, weights = x[:, 0].long(), x[:, 1]
        return self.head(self.bag(tokens, per_sample_weights=weights / tokens.shape[1]))


class ResidualMLP(nn.Module):
    """``blocks`` residual blocks ``h + W2 relu(W1 norm(h))``; ``norm``: LayerNorm (else identity); the
    blocks' weights are scaled by ``gain`` after the default init."""

    def __init__(self, inputs: int, outputs: int, width: int = 32, blocks: int = 4, norm: bool = True,
                 gain: float = 1.0) -> None:  # fmt: skip
        super().__init__()
        self.stem, self.head = nn.Linear(inputs, width), nn.Linear(width, outputs)
        self.norms = nn.ModuleList(nn.LayerNorm(width) if norm else nn.Identity() for _ in range(blocks))
        self.blocks = nn.ModuleList(MLP([width, width, width]) for _ in range(blocks))
        with torch.no_grad():
            for block in self.blocks:
                for p in block.parameters():
                    p.mul_(gain)

    def forward(self, x: Tensor) -> Tensor:
        h = self.stem(x)
        for norm, block in zip(self.norms, self.blocks, strict=True):
            h = h + block(norm(h))
        return self.head(h)


class PatchViT(nn.Module):
    """A ViT-like digits model: 2x2 patches of the 8x8 image embedded, positions added, one pre-norm encoder
    block, the mean over patches to a linear head."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.embed = nn.Linear(4, width)
        self.position = nn.Parameter(0.02 * torch.randn(16, width))
        self.block = nn.TransformerEncoderLayer(width, 4, 2 * width, 0.0, batch_first=True, norm_first=True)
        self.head = nn.Linear(width, 10)

    def forward(self, x: Tensor) -> Tensor:
        patches = x.view(-1, 4, 2, 4, 2).permute(0, 1, 3, 2, 4).reshape(-1, 16, 4)
        return self.head(self.block(self.embed(patches) + self.position).mean(1))


class PoissonTask(Task):
    """Count regression: the net predicts a log-rate; Poisson NLL with ``reduction``; ``per_event``: the
    summed NLL divided by the batch's event count (a hand-written "per event" normalisation)."""

    def __init__(self, net: nn.Module, make_optimizer: Any, reduction: str = "mean", per_event: bool = False,
                 make_schedule: Any = None) -> None:  # fmt: skip
        super().__init__(net, "poisson", make_optimizer, make_schedule)
        self.reduction, self.per_event = reduction, per_event

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        log_rate = self.net(x).squeeze(1)
        if self.per_event:
            return F.poisson_nll_loss(log_rate, y, reduction="sum") / y.sum(), None
        return F.poisson_nll_loss(log_rate, y, reduction=self.reduction), None


class GaussianNLLTask(Task):
    """Heteroscedastic regression: the net predicts a mean and a variance (softplus); Gaussian NLL (it goes
    below zero where the noise is small)."""

    def __init__(self, net: nn.Module, make_optimizer: Any) -> None:
        super().__init__(net, "gaussian_nll", make_optimizer)

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        mu, raw = self.net(x).unbind(1)
        return F.gaussian_nll_loss(mu, y.squeeze(1), F.softplus(raw) + 1e-4, full=False), None


class SiameseTask(Task):
    """A siamese pair model: one encoder embeds both digits of a pair (``x``: ``(N, 2, 64)``, ``y``: 1 for
    the same class); contrastive loss ``y d^2 + (1 - y) relu(margin - d)^2`` on the distance ``d``."""

    def __init__(self, net: nn.Module, make_optimizer: Any, margin: float = 2.0) -> None:
        super().__init__(net, "contrastive", make_optimizer)
        self.margin = margin

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        d = (self.net(x[:, 0]) - self.net(x[:, 1])).norm(dim=1)
        loss = y * d**2 + (1 - y) * F.relu(self.margin - d) ** 2
        return loss.mean(), ((d < self.margin / 2).float() == y).float().mean()
