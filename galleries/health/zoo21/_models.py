"""Zoo 21's networks and tasks (plain torch and Lightning): a tiny hand-written transformer encoder for
extractive span question answering, a Q-network fitted to bootstrapped targets, a multi-hot basket predictor,
a small colourisation CNN, a selective classifier with an abstain output and a GRU bracket recogniser.

Every task is a :class:`Task`: it trains on ``loss_of(batch)``, logs ``val_loss`` when it validates, and
builds its optimizer from ``make_optimizer(net)`` (so a run can hand the optimizer part of the network) and,
where given, a per-step schedule from ``make_schedule(optimizer)``.
"""

from __future__ import annotations

import copy
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "MLP",
    "BasketTask",
    "BracketGRU",
    "BracketTask",
    "ColourNet",
    "ColourTask",
    "FittedQTask",
    "SelectiveTask",
    "SpanEncoder",
    "SpanTask",
    "Task",
]


class Task(pl.LightningModule):
    """A network, its loss, its optimizer (``make_optimizer(net)``) and an optional per-step schedule."""

    def __init__(
        self,
        net: nn.Module,
        make_optimizer: Callable[[nn.Module], torch.optim.Optimizer],
        make_schedule: Callable[[torch.optim.Optimizer], Any] | None = None,
    ) -> None:
        super().__init__()
        self.net = net
        self.make_optimizer, self.make_schedule = make_optimizer, make_schedule

    def loss_of(self, batch: Any) -> Tensor:
        raise NotImplementedError

    def val_loss_of(self, batch: Any) -> Tensor:
        return self.loss_of(batch)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        return self.loss_of(batch)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.val_loss_of(batch), batch_size=len(batch[0]))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.net)
        if self.make_schedule is None:
            return optimizer
        schedule = {"scheduler": self.make_schedule(optimizer), "interval": "step"}
        return {"optimizer": optimizer, "lr_scheduler": schedule}


class MLP(nn.Sequential):
    """``Linear`` layers of ``sizes`` with ``activation`` between them (none after the last)."""

    def __init__(self, sizes: Sequence[int], activation: type[nn.Module] = nn.ReLU) -> None:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(sizes)):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(activation())
        super().__init__(*layers)


# ------------------------------------------------------------------------------------------ span QA
class SelfAttention(nn.Module):
    """Multi-head self-attention written by hand: ``ignore`` (B, L) is True at the keys no query may see."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, h: Tensor, ignore: Tensor) -> Tensor:
        b, n, d = h.shape
        q, k, v = self.qkv(h).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        scores = q @ k.transpose(-1, -2) / math.sqrt(d // self.heads)
        weights = scores.masked_fill(ignore[:, None, None, :], float("-inf")).softmax(-1)
        return self.out((weights @ v).transpose(1, 2).reshape(b, n, d))


class Block(nn.Module):
    """A pre-norm transformer block: attention and a GELU feed-forward, each on a residual."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.attention = SelfAttention(width, heads)
        self.ff = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, h: Tensor, ignore: Tensor) -> Tensor:
        h = h + self.attention(self.norm1(h), ignore)
        return h + self.ff(self.norm2(h))


class SpanEncoder(nn.Module):
    """A tiny encoder over ``[question, SEP, context, PAD...]`` token ids: token and learned position
    embeddings, ``depth`` blocks, a head giving each position a start and an end logit.

    ``mask_from``: builds the attention's ``ignore`` mask from the ids (True: a key to ignore)."""

    def __init__(
        self,
        vocab: int,
        length: int,
        width: int = 48,
        heads: int = 4,
        depth: int = 2,
        mask_from: Callable[[Tensor], Tensor] | None = None,
    ) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, width), nn.Embedding(length, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(depth))
        self.norm, self.head = nn.LayerNorm(width), nn.Linear(width, 2)
        self.mask_from = mask_from if mask_from is not None else (lambda ids: ids == 0)

    def forward(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        ignore = self.mask_from(ids)
        h = self.tokens(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))
        for block in self.blocks:
            h = block(h, ignore)
        start, end = self.head(self.norm(h)).unbind(-1)
        return start, end


class SpanTask(Task):
    """Extractive QA: the mean of the start and end positions' cross-entropies (nats)."""

    def loss_of(self, batch: Any) -> Tensor:
        ids, spans = batch
        start, end = self.net(ids)
        return (F.cross_entropy(start, spans[:, 0]) + F.cross_entropy(end, spans[:, 1])) / 2


# ------------------------------------------------------------------------------------------ fitted Q
class FittedQTask(Task):
    """Fitted Q-learning from a fixed table of transitions ``(state one-hot, action, reward, next state
    one-hot)``: the squared error of ``Q(s, a)`` against ``r + gamma * max_a' Q_target(s', a')``, the target
    network a copy of the online one refreshed every ``sync`` steps. Validation: the squared error of every
    ``Q(s, a)`` against the true optimal values (a batch ``(one-hot states, Q* table)``)."""

    def __init__(self, net: nn.Module, make_optimizer: Any, gamma: float, sync: int = 10) -> None:
        super().__init__(net, make_optimizer)
        self.gamma, self.sync = gamma, sync
        self._target = [copy.deepcopy(net).requires_grad_(False)]  # a list: not a submodule

    def on_train_batch_start(self, batch: Any, batch_idx: int) -> None:
        if self.global_step % self.sync == 0:
            self._target[0].load_state_dict(self.net.state_dict())

    def loss_of(self, batch: Any) -> Tensor:
        s, a, r, s_next = batch
        q = self.net(s).gather(1, a.unsqueeze(1)).squeeze(1)
        with torch.no_grad():
            target = r + self.gamma * self._target[0](s_next).amax(1)
        return F.mse_loss(q, target)

    def val_loss_of(self, batch: Any) -> Tensor:
        states, q_star = batch
        return F.mse_loss(self.net(states), q_star)


# ------------------------------------------------------------------------------------------ baskets
class BasketTask(Task):
    """Next-basket prediction: the binary cross-entropy of the item logits against the next basket's
    multi-hot vector, averaged over items and baskets."""

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        return F.binary_cross_entropy_with_logits(self.net(x), y)


# ------------------------------------------------------------------------------------------ colour
class ColourNet(nn.Module):
    """A small colourisation CNN: an ``encoder`` of three 3x3 convolutions (the last dilated) and a
    ``decoder`` of a 3x3 convolution over the encoder's features and the grey input, then a 1x1 convolution
    to the three chroma channels; ``activation`` between them."""

    def __init__(self, activation: type[nn.Module] = nn.ReLU, width: int = 16) -> None:
        super().__init__()
        w = width
        self.encoder = nn.Sequential(
            nn.Conv2d(1, w, 3, padding=1), activation(),
            nn.Conv2d(w, w, 3, padding=1), activation(),
            nn.Conv2d(w, w, 3, padding=2, dilation=2), activation(),
        )  # fmt: skip
        self.decoder = nn.Sequential(nn.Conv2d(w + 1, w, 3, padding=1), activation(), nn.Conv2d(w, 3, 1))

    def forward(self, x: Tensor) -> Tensor:
        return self.decoder(torch.cat([self.encoder(x), x], 1))


class ColourTask(Task):
    """Colourisation: the mean squared error of the predicted RGB image against the true one."""

    def loss_of(self, batch: Any) -> Tensor:
        grey, rgb = batch
        return F.mse_loss(self.net(grey), rgb)


# ------------------------------------------------------------------------------------------ selective
class SelectiveTask(Task):
    """Selective classification with an abstain output (the gamblers' loss of Liu et al., 2019): the
    network gives ``classes + 1`` logits, the last one abstains; the loss is
    ``-log(p_y + p_abstain / payoff)`` averaged over the batch."""

    def __init__(self, net: nn.Module, make_optimizer: Any, make_schedule: Any = None, payoff: float = 3.0):
        super().__init__(net, make_optimizer, make_schedule)
        self.payoff = payoff

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        p = self.net(x).softmax(-1)
        return -torch.log(p.gather(1, y.unsqueeze(1)).squeeze(1) + p[:, -1] / self.payoff).mean()


# ------------------------------------------------------------------------------------------ brackets
class BracketGRU(nn.Module):
    """Embeds left-padded bracket strings (0: pad), runs a GRU and classifies its last hidden state."""

    def __init__(self, vocab: int = 5, embed: int = 8, hidden: int = 48) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed, padding_idx=0)
        self.gru = nn.GRU(embed, hidden, batch_first=True)
        self.head = nn.Linear(hidden, 2)

    def forward(self, ids: Tensor) -> Tensor:
        _, h = self.gru(self.embed(ids))
        return self.head(h[-1])


class BracketTask(Task):
    """Balanced or not: the cross-entropy of the two-way logits."""

    def loss_of(self, batch: Any) -> Tensor:
        ids, y = batch
        return F.cross_entropy(self.net(ids), y)
