"""Zoo 6's networks and task variants (plain torch and Lightning): a GRU encoder-decoder, a temporal
convolutional network (dilated causal convolutions), a RealNVP normalising flow. The trainer is the first
zoo's :class:`Task`; the variants here change only its loss."""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import MLP, Task

__all__ = ["FlowTask", "RealNVP", "ScaledTask", "Seq2Seq", "Seq2SeqTask", "Task", "TemporalConvNet"]


class Seq2Seq(nn.Module):
    """A GRU encoder reads the source tokens; a GRU decoder, started from the encoder's last state (or from
    zeros, ``zero_start``: the state left unused), reads the target shifted right behind a start token 0 and
    predicts each target token (teacher forcing). ``embed_scale``: the embeddings are multiplied by it (as a
    transformer multiplies by ``sqrt(d_model)``)."""

    def __init__(
        self, vocab: int, width: int = 64, embed: int = 16, zero_start: bool = False, embed_scale: float = 1.0
    ) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab + 1, embed)
        self.encoder = nn.GRU(embed, width, batch_first=True)
        self.decoder = nn.GRU(embed, width, batch_first=True)
        self.head = nn.Linear(width, vocab)
        self.zero_start, self.embed_scale = zero_start, embed_scale

    def embedded(self, tokens: Tensor) -> Tensor:
        return self.embed(tokens) * self.embed_scale

    def forward(self, source: Tensor, target: Tensor) -> Tensor:
        _, h = self.encoder(self.embedded(source))
        if self.zero_start:
            h = torch.zeros_like(h)
        shifted = torch.cat([target.new_zeros(len(target), 1), target[:, :-1] + 1], 1)
        out, _ = self.decoder(self.embedded(shifted), h)
        return self.head(out)  # (N, L, vocab): logits of target tokens 0..vocab-1


class Seq2SeqTask(Task):
    """Token cross-entropy of a :class:`Seq2Seq` (sources are tokens 1..vocab, targets 0..vocab-1)."""

    def __init__(self, net: Seq2Seq, make_optimizer: Any, make_schedule: Any = None) -> None:
        super().__init__(net, "seq2seq", make_optimizer, make_schedule)

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        source, target = batch
        logits = self.net(source, target)
        loss = F.cross_entropy(logits.transpose(1, 2), target)
        return loss, (logits.argmax(2) == target).float().mean()


class TemporalConvNet(nn.Module):
    """Bai et al.: residual blocks of dilated causal 1-D convolutions (kernel 3, dilations 1, 2, 4, ...) with
    ReLU, on windows ``(N, 1, T)``; a linear head on the last time step forecasts the next value."""

    def __init__(self, channels: int = 32, levels: int = 4) -> None:
        super().__init__()
        self.stem = nn.Conv1d(1, channels, 1)
        self.convs = nn.ModuleList(nn.Conv1d(channels, channels, 3, dilation=2**i) for i in range(levels))
        self.head = nn.Linear(channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        h = self.stem(x)
        for conv in self.convs:
            pad = 2 * conv.dilation[0]
            h = h + F.relu(conv(F.pad(h, (pad, 0))))  # causal: pad on the left only
        return self.head(h[:, :, -1])


class ScaledTask(Task):
    """A :class:`Task` whose training step returns the loss times ``scale`` (a loss scaled by hand, as a
    float16 loss scaler does, with the gradients never divided back)."""

    def __init__(self, net: nn.Module, loss: str, make_optimizer: Any, scale: float, **kw: Any) -> None:
        super().__init__(net, loss, make_optimizer, **kw)
        self.scale = scale

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return super().training_step(batch, batch_idx) * self.scale


class Coupling(nn.Module):
    """An affine coupling: the unmasked coordinates scaled by ``exp(s)`` and shifted by ``t``, both from the
    masked ones; ``s`` bounded by ``tanh``."""

    def __init__(self, mask: Tensor, width: int) -> None:
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = MLP([len(mask), width, width, 2 * len(mask)])

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        s, t = self.net(x * self.mask).chunk(2, 1)
        s = torch.tanh(s) * (1 - self.mask)
        t = t * (1 - self.mask)
        return x * self.mask + (1 - self.mask) * (x * s.exp() + t), s.sum(1)


class RealNVP(nn.Module):
    """Dinh et al.: ``couplings`` affine couplings with alternating masks over ``dims`` coordinates and a
    standard normal base; ``log_prob(x)`` by the change of variables."""

    def __init__(self, dims: int = 2, couplings: int = 6, width: int = 64) -> None:
        super().__init__()
        masks = [torch.arange(dims) % 2 == i % 2 for i in range(couplings)]
        self.couplings = nn.ModuleList(Coupling(m.float(), width) for m in masks)

    def log_prob(self, x: Tensor) -> Tensor:
        logdet = x.new_zeros(len(x))
        for coupling in self.couplings:
            x, ld = coupling(x)
            logdet = logdet + ld
        return -0.5 * (x**2).sum(1) - 0.5 * x.shape[1] * math.log(2 * math.pi) + logdet


class FlowTask(Task):
    """Density estimation: the mean negative log-likelihood of a :class:`RealNVP`."""

    def __init__(self, net: RealNVP, make_optimizer: Any, make_schedule: Any = None) -> None:
        super().__init__(net, "nll", make_optimizer, make_schedule)

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, _ = batch
        return -self.net.log_prob(x).mean(), None
