"""Zoo 17's networks and trainers (plain torch and Lightning): a 1-D conv keyword spotter, a small conv net
that restores 8x8 digits (denoising or 2x super-resolution), a small transformer encoder that counts tokens;
a :class:`Task` trained by Lightning's automatic optimisation and a :class:`ManualTask` that steps its own
optimizer (``automatic_optimization=False``)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

MakeOptimizer = Callable[[Any], torch.optim.Optimizer]
MakeSchedule = Callable[[torch.optim.Optimizer], Any] | None


class KeywordNet(nn.Module):
    """A keyword spotter for raw 1-D clips ``(N, L)``: ``layers`` Conv1d layers (kernel 9, the first four
    strided by 2) with ``act`` (ReLU unless told), a global max pool over time and a linear readout of
    ``classes`` logits; conv weights He-initialised (``kaiming_normal_``), biases zero."""

    def __init__(self, classes: int = 5, width: int = 32, layers: int = 4, act: type[nn.Module] = nn.ReLU):
        super().__init__()
        convs: list[nn.Module] = []
        channels = 1
        for i in range(layers):
            convs += [nn.Conv1d(channels, width, 9, stride=2 if i < 4 else 1, padding=4), act()]
            channels = width
        self.features = nn.Sequential(*convs)
        self.readout = nn.Linear(width, classes)
        for m in self.features:
            if isinstance(m, nn.Conv1d):
                nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
                nn.init.zeros_(m.bias)

    def forward(self, x: Tensor) -> Tensor:
        return self.readout(self.features(x.unsqueeze(1)).amax(-1))


class RestoreNet(nn.Module):
    """Restores an 8x8 digit ``(N, 1, 8, 8)``: a 1x1 skip projection of the input to ``width`` channels plus
    two 3x3 conv layers, ReLU, then a 3x3 conv back to one channel; the output is the input plus a predicted
    correction (a residual restorer)."""

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.skip = nn.Conv2d(1, width, 1)
        self.conv1 = nn.Conv2d(1, width, 3, padding=1)
        self.conv2 = nn.Conv2d(width, width, 3, padding=1)
        self.out = nn.Conv2d(width, 1, 3, padding=1)

    def forward(self, x: Tensor) -> Tensor:
        h = F.relu(self.conv1(x))
        h = F.relu(self.conv2(h) + self.skip(x))
        return x + self.out(h)


class CountingTransformer(nn.Module):
    """A small transformer encoder for the token-counting task: token embeddings (no positions: counting is
    order-free), ``layers`` pre-LN encoder layers of width ``d`` and a per-position readout of ``classes``
    count logits."""

    def __init__(self, vocab: int = 6, classes: int = 17, d: int = 32, heads: int = 2, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, heads, 2 * d, dropout=0.0, batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.readout = nn.Linear(d, classes)

    def forward(self, tokens: Tensor) -> Tensor:
        return self.readout(self.norm(self.encoder(self.embed(tokens))))


def loss_fn(kind: str, out: Tensor, y: Tensor) -> Tensor:
    """``ce``: cross-entropy of class logits; ``tokens``: cross-entropy per position of ``(N, T, C)`` logits;
    ``mse``: mean squared error (computed in float32)."""
    if kind == "ce":
        return F.cross_entropy(out.float(), y)
    if kind == "tokens":
        return F.cross_entropy(out.float().flatten(0, 1), y.flatten())
    return F.mse_loss(out.float(), y.float())


class Task(pl.LightningModule):
    """A supervised task: ``net``, its loss (:func:`loss_fn`), ``make_optimizer(parameters)`` and optionally
    ``make_schedule(optimizer)``, stepped every optimizer step; logs ``val_loss`` when it validates."""

    def __init__(
        self, net: nn.Module, loss: str, make_optimizer: MakeOptimizer, make_schedule: MakeSchedule = None
    ):
        super().__init__()
        self.net, self.loss_kind = net, loss
        self.make_optimizer, self.make_schedule = make_optimizer, make_schedule

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        return loss_fn(self.loss_kind, self.net(x), y)

    def optimized_parameters(self) -> Any:
        return self.parameters()

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.loss_of(batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss_of(batch), prog_bar=False)

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.optimized_parameters())
        if self.make_schedule is None:
            return optimizer
        schedule = self.make_schedule(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class ManualTask(Task):
    """A :class:`Task` under manual optimisation: ``training_step`` runs ``manual_backward`` and steps the
    optimizer every ``accumulate`` batches (then clears the gradients), clipping the gradient norm to ``clip``
    when given, and steps the schedule after each optimizer
    step."""

    def __init__(self, *args: Any, accumulate: int = 1, clip: float | None = None, every: int = 1,
                 **kwargs: Any) -> None:  # fmt: skip
        super().__init__(*args, **kwargs)
        self.automatic_optimization = False
        self.accumulate, self.clip, self.every = accumulate, clip, every

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        optimizer = self.optimizers()
        loss = self.loss_of(batch)
        self.manual_backward(loss / self.accumulate)
        if (batch_idx + 1) % self.accumulate == 0:
            if self.clip is not None:
                self.clip_gradients(optimizer, gradient_clip_val=self.clip, gradient_clip_algorithm="norm")
            optimizer.step()
            optimizer.zero_grad()
            schedule = self.lr_schedulers()
            if schedule is not None and self.trainer.global_step % self.every == 0:
                schedule.step()
        return loss.detach()


class EmaTask(Task):
    """A :class:`Task` validated with an exponential moving average (decay ``0.95``) of its network's
    weights, updated after every training batch; its ``configure_optimizers`` hands the optimizer the EMA
    copy's parameters (``self.ema``, which gets no gradients) instead of the network's: the bug."""

    def __init__(self, *args: Any, decay: float = 0.95, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ema = copy.deepcopy(self.net).requires_grad_(False)
        self.decay = decay

    def optimized_parameters(self) -> Any:
        return self.ema.parameters()

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        with torch.no_grad():
            for e, p in zip(self.ema.parameters(), self.net.parameters()):
                e.lerp_(p, 1 - self.decay)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", loss_fn(self.loss_kind, self.ema(x), y))


class EmaTaskFixed(EmaTask):
    """:class:`EmaTask` with the optimizer given the network's parameters."""

    def optimized_parameters(self) -> Any:
        return self.net.parameters()
