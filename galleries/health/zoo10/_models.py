"""Zoo 10's networks and task variants (plain torch and Lightning): a contrastive (InfoNCE) encoder of
digits, a neural-ODE-like Euler stepper of a pendulum's flow map, an MLP-Mixer on 2x2 patches of digits. The
trainer is the first zoo's :class:`Task`; the variants here change its loss (or, for a two-stage fine-tune,
when a part is unfrozen)."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import MLP, Task

__all__ = ["MLP", "ContrastiveTask", "Encoder", "EulerStepper", "GaussianNLLTask", "Mixer", "Task"]


class Encoder(nn.Module):
    """An MLP (``act``: ReLU) from 64 pixels to a ``dim``-d embedding, with a linear projection head (as
    SimCLR)."""

    def __init__(self, width: int = 128, dim: int = 32, act: type[nn.Module] = nn.ReLU) -> None:
        super().__init__()
        self.body = MLP([64, width, width], act=act)
        self.act = act()
        self.projector = nn.Linear(width, dim)

    def forward(self, x: Tensor) -> Tensor:
        return self.projector(self.act(self.body(x)))


def views(x: Tensor, generator: torch.Generator | None = None) -> Tensor:
    """One random view of each digit: 20% of the pixels dropped, Gaussian noise 0.1 added."""
    keep = (torch.rand(x.shape, generator=generator) > 0.2).float()
    return x * keep + 0.1 * torch.randn(x.shape, generator=generator)


class ContrastiveTask(Task):
    """InfoNCE between two random views of each digit of a batch (symmetric cross-entropy over the batch's
    cosine similarities divided by ``temperature``). ``multiply``: the similarities are multiplied by the
    temperature instead of divided (the bug). Validation views come from a fixed generator."""

    def __init__(self, net: Encoder, make_optimizer: Any, make_schedule: Any = None, temperature: float = 0.1,
                 multiply: bool = False) -> None:  # fmt: skip
        super().__init__(net, "infonce", make_optimizer, make_schedule)
        self.temperature, self.multiply = temperature, multiply

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, _ = batch
        g = None if self.training else torch.Generator().manual_seed(7)
        a = F.normalize(self.net(views(x, g)), dim=1)
        b = F.normalize(self.net(views(x, g)), dim=1)
        sim = a @ b.T
        logits = sim * self.temperature if self.multiply else sim / self.temperature
        target = torch.arange(len(x))
        return 0.5 * (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)), None


class EulerStepper(nn.Module):
    """A neural-ODE-like flow map: ``steps`` explicit Euler steps ``x <- x + dt * f(x)`` of a learnt tanh
    vector field ``f`` over the horizon ``horizon`` (``dt = horizon / steps``; ``scale_dt=False``: the
    ``dt`` left out, the bug)."""

    def __init__(self, steps: int = 5, horizon: float = 3.0, width: int = 64, scale_dt: bool = True) -> None:
        super().__init__()
        self.field = MLP([2, width, width, 2], act=nn.Tanh)
        self.steps, self.dt = steps, (horizon / steps if scale_dt else 1.0)

    def forward(self, x: Tensor) -> Tensor:
        for _ in range(self.steps):
            x = x + self.dt * self.field(x)
        return x


class GaussianNLLTask(Task):
    """The full Gaussian negative log-likelihood of the targets under the prediction with a fixed
    measurement variance ``var`` (its constant ``0.5 log(2 pi var)`` included)."""

    def __init__(self, net: nn.Module, make_optimizer: Any, var: float = 4.0) -> None:
        super().__init__(net, "nll", make_optimizer)
        self.var = var

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        var = torch.full_like(y, self.var)
        return F.gaussian_nll_loss(self.net(x), y, var, full=True), None


class MixerBlock(nn.Module):
    """Token mixing (an MLP across the patches) then channel mixing (an MLP across the features), each
    pre-LayerNorm and residual, GELU inside."""

    def __init__(self, tokens: int, width: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.tokens = MLP([tokens, 2 * tokens, tokens], act=nn.GELU)
        self.channels = MLP([width, 2 * width, width], act=nn.GELU)

    def forward(self, h: Tensor) -> Tensor:
        h = h + self.tokens(self.norm1(h).transpose(1, 2)).transpose(1, 2)
        return h + self.channels(self.norm2(h))


class Mixer(nn.Module):
    """Tolstikhin et al.'s MLP-Mixer for 8x8 digits: 16 patches of 2x2 pixels, a linear patch embedding,
    ``depth`` mixer blocks, a LayerNorm, the mean over the patches and a linear head."""

    def __init__(self, width: int = 32, depth: int = 2, classes: int = 10) -> None:
        super().__init__()
        self.embed = nn.Linear(4, width)
        self.body = nn.Sequential(*(MixerBlock(16, width) for _ in range(depth)))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, classes)

    def forward(self, x: Tensor) -> Tensor:
        patches = x.view(-1, 4, 2, 4, 2).permute(0, 1, 3, 2, 4).reshape(-1, 16, 4)
        return self.head(self.norm(self.body(self.embed(patches))).mean(1))


class UnfreezeTask(Task):
    """A two-stage fine-tune: ``frozen`` (a submodule) starts with ``requires_grad=False`` and is unfrozen at
    step ``at``. ``widen``: its parameters are then added to the optimizer too (the fix); without it they get
    gradients from ``at`` on but the optimizer, built before, never steps them."""

    def __init__(self, net: nn.Module, frozen: nn.Module, make_optimizer: Any, at: int, widen: bool) -> None:
        super().__init__(net, "ce", make_optimizer)
        self.frozen, self.at, self.widen = frozen, at, widen
        frozen.requires_grad_(False)

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self.global_step == self.at:
            self.frozen.requires_grad_(True)
            if self.widen:
                self.optimizers().optimizer.add_param_group({"params": list(self.frozen.parameters())})
