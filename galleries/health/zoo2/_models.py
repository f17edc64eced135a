"""Zoo 2's networks and its LightningModules (plain torch and Lightning). The shared trainer is the first
zoo's :class:`Task`; the variants here change only its loss."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import MLP, Task

__all__ = ["MLP", "AugmentedTask", "EmbeddingMLP", "ForecastRNN", "NaiveBCETask", "Task", "TwoHeadTask"]


class EmbeddingMLP(nn.Module):
    """Token embeddings averaged over the sequence, then an MLP (``act`` between its layers)."""

    def __init__(self, vocab: int, outputs: int, width: int = 64, act: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, 16)
        self.mlp = MLP([16, width, width, outputs], act=act)

    def forward(self, x: Tensor) -> Tensor:
        return self.mlp(self.embed(x).mean(1))


class ForecastRNN(nn.Module):
    """A one-layer RNN (``nonlinearity``) reading a window of a series, a linear head predicting the next
    value; the recurrent weights start orthogonal times ``gain``."""

    def __init__(self, width: int = 32, gain: float = 1.0, nonlinearity: str = "tanh") -> None:
        super().__init__()
        self.rnn = nn.RNN(1, width, nonlinearity=nonlinearity, batch_first=True)
        with torch.no_grad():
            nn.init.orthogonal_(self.rnn.weight_hh_l0, gain=gain)
        self.head = nn.Linear(width, 1)

    def forward(self, x: Tensor) -> Tensor:
        out, _ = self.rnn(x.unsqueeze(2))
        return self.head(out[:, -1])


class NaiveBCETask(Task):
    """Binary classification with the cross-entropy written out by hand, ``-(y log p + (1-y) log(1-p))`` on
    ``p = sigmoid(logit)`` (``naive=False``: ``binary_cross_entropy_with_logits``, the stable form)."""

    def __init__(self, net: nn.Module, make_optimizer: Any, naive: bool = True) -> None:
        super().__init__(net, "bce", make_optimizer)
        self.naive = naive

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        logit = self.net(x).squeeze(1)
        acc = ((logit > 0).float() == y).float().mean()
        if not self.naive:
            return F.binary_cross_entropy_with_logits(logit, y), acc
        p = torch.sigmoid(logit)
        return -(y * torch.log(p) + (1 - y) * torch.log(1 - p)).mean(), acc


class AugmentedTask(Task):
    """A digits image classifier trained on augmented images: a random shift by up to one pixel and
    Gaussian pixel noise (``noise``); validation sees the clean images."""

    def __init__(self, net: nn.Module, make_optimizer: Any, noise: float = 0.3) -> None:
        super().__init__(net, "ce", make_optimizer)
        self.noise = noise

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        dx, dy = (int(v) for v in torch.randint(-1, 2, (2,)))
        x = torch.roll(x, shifts=(dy, dx), dims=(2, 3)) + self.noise * torch.randn_like(x)
        return F.cross_entropy(self.net(x), y)


class TwoHeadTask(Task):
    """A shared MLP trunk on digits with two heads: the class (cross-entropy) and the image itself
    (``recon_weight`` times the MSE); ``val_loss`` is the sum."""

    def __init__(self, make_optimizer: Any, recon_weight: float = 10.0) -> None:
        super().__init__(nn.Sequential(nn.Linear(64, 64), nn.ReLU()), "two_head", make_optimizer)
        self.classify, self.decode = nn.Linear(64, 10), nn.Linear(64, 64)
        self.recon_weight = recon_weight

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        h = self.net(x)
        logits = self.classify(h)
        loss = F.cross_entropy(logits, y) + self.recon_weight * F.mse_loss(torch.sigmoid(self.decode(h)), x)
        return loss, (logits.argmax(1) == y).float().mean()
