"""Zoo 7's networks, task variants and one hand-written optimizer (plain torch and Lightning): a GRU
encoder-decoder, a dilated causal temporal CNN with an auxiliary head, a RealNVP normalising flow, an
attentive tabular network (TabNet-like feature masks) and LARS written by hand. The trainer is the first zoo's
:class:`Task`; the variants here change only its loss."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.optim import Optimizer

from galleries.health.zoo1._models import MLP, Task

__all__ = ["LARS", "MLP", "AttentiveTabular", "FlowTask", "ForecastTask", "RealNVP", "Seq2Seq"]
__all__ += ["TCN", "Seq2SeqTask", "Task"]


# ------------------------------------------------------------------------------------------------ seq2seq
class Seq2Seq(nn.Module):
    """A GRU encoder-decoder (no attention): the encoder's last state starts the decoder, which reads the
    target shifted right (teacher forcing; token ``vocab`` is the start token)."""

    def __init__(self, vocab: int = 10, width: int = 64, embedding: int = 16) -> None:
        super().__init__()
        self.encoder = nn.ModuleDict(
            {"embed": nn.Embedding(vocab, embedding), "rnn": nn.GRU(embedding, width, batch_first=True)}
        )
        self.decoder = nn.ModuleDict(
            {"embed": nn.Embedding(vocab + 1, embedding), "rnn": nn.GRU(embedding, width, batch_first=True)}
        )
        self.head = nn.Linear(width, vocab)
        self.vocab = vocab

    def forward(self, src: Tensor, tgt: Tensor) -> Tensor:
        _, h = self.encoder["rnn"](self.encoder["embed"](src))
        start = tgt.new_full((len(tgt), 1), self.vocab)
        out, _ = self.decoder["rnn"](self.decoder["embed"](torch.cat([start, tgt[:, :-1]], 1)), h)
        return self.head(out)


class Seq2SeqTask(Task):
    """Token cross-entropy of the teacher-forced decoder, averaged over every target token."""

    def __init__(self, net: Seq2Seq, make_optimizer: Any, make_schedule: Any = None) -> None:
        super().__init__(net, "seq2seq", make_optimizer, make_schedule)

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        src, tgt = batch
        logits = self.net(src, tgt)
        loss = F.cross_entropy(logits.transpose(1, 2), tgt, label_smoothing=smoothing)
        return loss, (logits.argmax(2) == tgt).float().mean()


# ------------------------------------------------------------------------------------------------ forecasting
class TCN(nn.Module):
    """Bai et al.: residual blocks of dilated causal 1-d convolutions (kernel 3, dilations 1, 2, 4, 8) over a
    window ``(N, L)``; a linear head on the last step's features gives the next value, an auxiliary head the
    mean of the next eight."""

    def __init__(self, channels: int = 32, dilations: tuple[int, ...] = (1, 2, 4, 8)) -> None:
        super().__init__()
        self.stem = nn.Conv1d(1, channels, 1)
        self.convs = nn.ModuleList(nn.Conv1d(channels, channels, 3, dilation=d) for d in dilations)
        self.head, self.aux = nn.Linear(channels, 1), nn.Linear(channels, 1)

    def forward(self, x: Tensor) -> Tensor:
        h = self.stem(x.unsqueeze(1))
        for conv in self.convs:
            h = h + F.relu(conv(F.pad(h, (2 * conv.dilation[0], 0))))
        last = h[:, :, -1]
        return torch.cat([self.head(last), self.aux(last)], 1)


class ForecastTask(Task):
    """MSE of the next value plus ``aux_weight(step)`` times the MSE of the next eight steps' mean (the
    auxiliary target, weighted 0.5 unless told). ``loss_scale``: the loss multiplied by a constant by hand (a
    mixed-precision-like loss scale). Logs the main MSE as ``val_loss``."""

    def __init__(
        self,
        net: TCN,
        make_optimizer: Any,
        make_schedule: Any = None,
        aux_weight: Callable[[int], float] | None = None,
        loss_scale: float = 1.0,
    ) -> None:
        super().__init__(net, "forecast", make_optimizer, make_schedule)
        self.aux_weight, self.loss_scale = aux_weight or (lambda step: 0.5), loss_scale

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        out = self.net(x)
        main, aux = F.mse_loss(out[:, 0], y[:, 0]), F.mse_loss(out[:, 1], y[:, 1])
        if not self.training:
            return main, None
        return self.loss_scale * (main + self.aux_weight(self.global_step) * aux), None


class LARS(Optimizer):
    """You et al.'s layer-wise adaptive rate scaling, written by hand: each tensor's step is
    ``lr * trust * ||w|| / ||g||`` times its gradient, with momentum (a zero weight steps at ``lr``).
    ``guard``: a tensor whose gradient is exactly zero is left alone (without it ``||g|| = 0`` divides)."""

    def __init__(
        self, params: Any, lr: float, momentum: float = 0.9, trust: float = 0.02, guard: bool = False
    ):
        super().__init__(params, {"lr": lr, "momentum": momentum, "trust": trust})
        self.guard = guard

    @torch.no_grad()
    def step(self, closure: Any = None) -> Any:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                w_norm, g_norm = p.norm(), p.grad.norm()
                if self.guard and g_norm == 0:
                    continue
                ratio = group["trust"] * w_norm / g_norm if w_norm > 0 else torch.ones(())
                buf = self.state[p].setdefault("momentum", torch.zeros_like(p))
                buf.mul_(group["momentum"]).add_(p.grad * ratio, alpha=group["lr"])
                p.sub_(buf)
        return loss


# ------------------------------------------------------------------------------------------------ flow
class Coupling(nn.Module):
    """An affine coupling layer: the masked half conditions a scale (``tanh``-bounded) and shift of the
    other half."""

    def __init__(self, mask: Tensor, width: int = 64) -> None:
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = MLP([2, width, width, 4])

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        s, t = self.net(x * self.mask).chunk(2, 1)
        s = torch.tanh(s) * (1 - self.mask)
        t = t * (1 - self.mask)
        return x * self.mask + (1 - self.mask) * (x * s.exp() + t), s.sum(1)


class RealNVP(nn.Module):
    """Dinh et al.: ``layers`` affine couplings of 2-d points, masks alternating, to a standard normal."""

    def __init__(self, layers: int = 6, width: int = 64) -> None:
        super().__init__()
        masks = [torch.tensor([1.0, 0.0]) if i % 2 == 0 else torch.tensor([0.0, 1.0]) for i in range(layers)]
        self.layers = nn.ModuleList(Coupling(m, width) for m in masks)

    def forward(self, x: Tensor) -> Tensor:
        """The log-density of each point."""
        log_det = x.new_zeros(len(x))
        for layer in self.layers:
            x, ld = layer(x)
            log_det = log_det + ld
        return -0.5 * (x**2).sum(1) - math.log(2 * math.pi) + log_det


class FlowTask(Task):
    """The flow's negative log-likelihood per point (nats)."""

    def __init__(self, net: RealNVP, make_optimizer: Any, make_schedule: Any = None) -> None:
        super().__init__(net, "nll", make_optimizer, make_schedule)

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, _ = batch
        return -self.net(x).mean(), None


# ------------------------------------------------------------------------------------------------ tabular
class AttentiveTabular(nn.Module):
    """A TabNet-like classifier: ``steps`` decision steps, each a softmax feature mask (from the previous
    step's features, with a prior that discounts features already used) over the inputs, a GLU block, a ReLU
    to the decision output; the head reads the sum of the steps' outputs."""

    def __init__(self, inputs: int = 30, classes: int = 2, width: int = 32, steps: int = 3) -> None:
        super().__init__()
        self.first = nn.Linear(inputs, 2 * width)
        self.attend = nn.ModuleList(nn.Linear(width, inputs) for _ in range(steps))
        self.blocks = nn.ModuleList(nn.Linear(inputs, 2 * width) for _ in range(steps))
        self.head = nn.Linear(width, classes)

    def forward(self, x: Tensor) -> Tensor:
        h = F.glu(self.first(x), 1)
        prior, total = torch.ones_like(x), 0
        for attend, block in zip(self.attend, self.blocks):
            mask = (attend(h) + prior.log()).softmax(1)
            prior = prior * (1.5 - mask).clamp_min(1e-3)
            h = F.glu(block(x * mask * x.shape[1]), 1)
            total = total + F.relu(h)
        return self.head(total)
