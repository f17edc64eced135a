"""Zoo 9's networks and tasks (plain torch and Lightning): skip-gram word embeddings with negative sampling,
an LSTM language model (optionally trained through an exponential moving average copy), a mixture density
network, a sparse autoencoder. The trainer is the first zoo's :class:`Task`; the variants here change its loss
or its forward pass."""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from galleries.health.zoo1._models import MLP, Task

__all__ = ["MLP", "MDNTask", "MixtureDensityNet", "SkipGram", "SkipGramTask", "SparseAETask", "Task"]
__all__ += ["EMALanguageTask", "LSTMLanguageModel", "SparseAutoEncoder"]


class SkipGram(nn.Module):
    """Word2vec's skip-gram: an input (centre) and an output (context) embedding table; a pair's score is the
    dot product of the centre's input vector and the context's output vector. Initialised as word2vec does:
    the input table uniform in ``+-0.5 / dim``, the output table at zero (``zero_input``: both at zero)."""

    def __init__(self, vocab: int = 200, dim: int = 32, zero_input: bool = False) -> None:
        super().__init__()
        self.centre, self.context = nn.Embedding(vocab, dim), nn.Embedding(vocab, dim)
        if zero_input:
            nn.init.zeros_(self.centre.weight)
        else:
            nn.init.uniform_(self.centre.weight, -0.5 / dim, 0.5 / dim)
        nn.init.zeros_(self.context.weight)

    def forward(self, centre: Tensor, words: Tensor) -> Tensor:
        """Scores ``(N, W)`` of each centre against ``words`` ``(N, W)``."""
        return (self.centre(centre).unsqueeze(1) * self.context(words)).sum(2)


class SkipGramTask(Task):
    """Skip-gram with balanced negative sampling: a batch holds ``(centre, context)`` pairs; ``negatives``
    words per pair are drawn uniformly at every training step (fixed, from a seeded generator, for the
    validation pairs). The loss: the positive pair's logistic loss plus the mean over its negatives' (so the
    trivial loss, every score at 0, is ``2 ln 2``)."""

    def __init__(
        self, net: SkipGram, make_optimizer: Any, negatives: int = 5, make_schedule: Any = None
    ) -> None:
        super().__init__(net, "skipgram", make_optimizer, make_schedule)
        self.negatives = negatives

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        centre, context = batch[0], batch[1]
        if len(batch) > 2:  # validation: the negatives were drawn once
            negatives = batch[2]
        else:
            vocab = self.net.context.num_embeddings
            negatives = torch.randint(0, vocab, (len(centre), self.negatives), device=centre.device)
        scores = self.net(centre, torch.cat([context.unsqueeze(1), negatives], 1))
        positive = F.softplus(-scores[:, 0])
        negative = F.softplus(scores[:, 1:]).mean(1)
        return (positive + negative).mean(), None


class LSTMLanguageModel(nn.Module):
    """A one-layer LSTM language model: token embeddings, an LSTM, a linear read-out to the vocabulary."""

    def __init__(self, vocab: int = 32, dim: int = 32, width: int = 64) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.lstm = nn.LSTM(dim, width, batch_first=True)
        self.out = nn.Linear(width, vocab)

    def forward(self, tokens: Tensor) -> Tensor:
        h, _ = self.lstm(self.embed(tokens))
        return self.out(h)


class EMALanguageTask(Task):
    """A language model that keeps an exponential moving average of its weights (``decay``; 0: the network
    itself), updated after every step and used for validation; the schedule is stepped every ``interval``.
    ``train_through_ema``: the training step runs the EMA copy (the bug) instead of the network the optimizer
    holds."""

    def __init__(self, net: nn.Module, make_optimizer: Any, decay: float = 0.99,
                 train_through_ema: bool = False, make_schedule: Any = None,
                 interval: str = "step") -> None:  # fmt: skip
        super().__init__(net, "lm", make_optimizer, make_schedule)
        self.ema = copy.deepcopy(net)  # requires_grad left on: nothing says otherwise
        self.decay, self.train_through_ema, self.interval = decay, train_through_ema, interval

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        (tokens,) = batch
        net = self.ema if self.train_through_ema else self.net
        logits = net(tokens[:, :-1])
        return F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:])

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        with torch.no_grad():
            for e, p in zip(self.ema.parameters(), self.net.parameters(), strict=True):
                e.lerp_(p, 1 - self.decay)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        (tokens,) = batch
        logits = self.ema(tokens[:, :-1])
        self.log("val_loss", F.cross_entropy(logits.transpose(1, 2), tokens[:, 1:]), on_epoch=True)

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.net.parameters())
        if self.make_schedule is None:
            return optimizer
        schedule = {"scheduler": self.make_schedule(optimizer), "interval": self.interval}
        return {"optimizer": optimizer, "lr_scheduler": schedule}


class MixtureDensityNet(nn.Module):
    """Bishop's mixture density network: a tanh MLP trunk to the weights, means and log standard deviations of
    ``components`` Gaussians over a scalar target."""

    def __init__(self, components: int = 5, width: int = 64, hidden: int = 2) -> None:
        super().__init__()
        self.trunk = MLP([1] + [width] * hidden, act=nn.Tanh)
        self.act = nn.Tanh()
        self.head = nn.Linear(width, 3 * components)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        logits, mu, log_sigma = self.head(self.act(self.trunk(x))).chunk(3, 1)
        return logits, mu, log_sigma


class MDNTask(Task):
    """The mixture's negative log-likelihood of ``y`` (``(N, 1)``), averaged over the batch."""

    def __init__(self, net: MixtureDensityNet, make_optimizer: Any, make_schedule: Any = None) -> None:
        super().__init__(net, "mdn", make_optimizer, make_schedule)

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, y = batch
        logits, mu, log_sigma = self.net(x)
        z = (y - mu) / log_sigma.exp()
        log_density = -0.5 * z**2 - log_sigma - 0.5 * math.log(2 * math.pi)
        return -torch.logsumexp(logits.log_softmax(1) + log_density, 1).mean(), None


class SparseAutoEncoder(nn.Module):
    """One ReLU code layer of ``codes`` units (an overcomplete dictionary) and a linear decoder."""

    def __init__(self, inputs: int = 64, codes: int = 128) -> None:
        super().__init__()
        self.encoder, self.decoder = nn.Linear(inputs, codes), nn.Linear(codes, inputs)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        code = F.relu(self.encoder(x))
        return self.decoder(code), code


class SparseAETask(Task):
    """Reconstruction MSE (summed over the pixels, averaged over the batch) plus ``l1`` times the codes'
    summed absolute value."""

    def __init__(self, net: SparseAutoEncoder, make_optimizer: Any, l1: float = 1e-3,
                 make_schedule: Any = None) -> None:  # fmt: skip
        super().__init__(net, "sparse", make_optimizer, make_schedule)
        self.l1 = l1

    def loss_of(self, batch: Any, smoothing: float) -> tuple[Tensor, Tensor | None]:
        x, _ = batch
        recon, code = self.net(x)
        return ((recon - x) ** 2).sum(1).mean() + self.l1 * code.abs().sum(1).mean(), None
