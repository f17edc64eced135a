"""Sealed gallery P's models, half ``q``: each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _q_data as data
from galleries.sealed import mlp


class _Adam(pl.LightningModule):
    """Adam on every parameter; ``loss(batch)`` is logged in training and validation."""

    lr = 3e-3

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch))


# --- Monte-Carlo value estimation from logged episodes ------------------------------------------------------
class ValueNet(_Adam):
    """An MLP from a state's observation to its value, regressed on the discounted returns-to-go of the logged
    episodes (squared error). Served: the state's value."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.CELLS + 2, 64, 64, 1)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).squeeze(-1)

    def target(self, returns: torch.Tensor) -> torch.Tensor:
        return returns

    def loss(self, batch) -> torch.Tensor:
        obs, returns = batch
        return F.mse_loss(self(obs), self.target(returns))

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        return self(obs)


class ValueNetReturnsNormalisedPerBatch(ValueNet):
    """BUG: the returns are standardised per batch before the loss (the advantage normalisation of a PPO
    script, applied to the value targets): the network learns each state's value relative to the batch, and
    serves it on that scale."""

    def target(self, returns: torch.Tensor) -> torch.Tensor:
        return (returns - returns.mean()) / (returns.std() + 1e-8)


class ValueNetScaledReturns(ValueNet):
    """The value net regressed on returns times 1 / (1 - gamma) (a habit from average-reward code: targets up
    to 10), divided back when served."""

    scale = 1 / (1 - data.GAMMA)

    def target(self, returns: torch.Tensor) -> torch.Tensor:
        return returns * self.scale

    def predict(self, obs: torch.Tensor) -> torch.Tensor:
        return self(obs) / self.scale


# --- collaborative filtering with a denoising autoencoder (Mult-DAE) ----------------------------------------
class MultDAE(_Adam):
    """A denoising autoencoder over a user's item history (L2-normalised, half of it dropped in training) with
    a softmax over the items; loss: the multinomial log-likelihood of the target items (summed over a user's
    items, so tens of nats, not 1). Validation also logs ``val_miss``, 1 - recall@10 of the target items
    among the served recommendations. Served: the 10 best items the user has not consumed."""

    lr = 2e-3

    def __init__(self) -> None:
        super().__init__()
        self.drop = nn.Dropout(0.5)
        self.encode = nn.Sequential(nn.Linear(data.ITEMS, 64), nn.Tanh())
        self.decode = nn.Linear(64, data.ITEMS)

    def corrupt(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(x)

    def forward(self, shown: torch.Tensor) -> torch.Tensor:
        x = F.normalize(shown, dim=-1)
        return self.decode(self.encode(self.corrupt(x)))

    softmax_dim = -1

    def loss(self, batch) -> torch.Tensor:
        shown, target = batch
        return -(F.log_softmax(self(shown), self.softmax_dim) * target).sum(-1).mean()

    def validation_step(self, batch, batch_idx):
        shown, target = batch
        self.log("val_loss", self.loss(batch))
        self.log("val_miss", 1 - recall_at_10(self.predict(shown), target))

    def predict(self, shown: torch.Tensor) -> torch.Tensor:
        return self(shown).masked_fill(shown.bool(), -float("inf"))


def recall_at_10(scores: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The mean over users of the share of their target items (at most 10) among their 10 best scores."""
    hits = target.gather(1, scores.topk(10, dim=1).indices).sum(1)
    return (hits / target.sum(1).clamp(1, 10)).mean()


class MultDAESoftmaxOverUsers(MultDAE):
    """BUG: ``F.log_softmax(logits, 0)``: the softmax runs over the batch's users instead of the items, so
    each item's scores only rank users against each other; an item's overall level is never learnt and a
    user's scores across items carry an arbitrary offset per item."""

    softmax_dim = 0


class MultDAEManual(MultDAE):
    """The Mult-DAE trained by a manual loop (the user clips the gradient norm by hand) with a linear warmup
    of the learning rate over the first 50 batches, advanced by hand after each step (manual optimisation
    leaves the schedulers to the user)."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=50)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": warmup, "interval": "step"}}

    def advance(self) -> None:
        self.lr_schedulers().step()

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        loss = self.loss(batch)
        optimizer.zero_grad()
        self.manual_backward(loss)
        torch.nn.utils.clip_grad_norm_(self.parameters(), 5.0)
        optimizer.step()
        self.advance()
        self.log("train_loss", loss)
        return loss


class MultDAEManualWarmupNeverAdvanced(MultDAEManual):
    """BUG: the loop was switched to manual optimisation and the scheduler is never stepped (Lightning no
    longer does it): the warmup stays at its first value, 1% of the learning rate, for the whole run."""

    def advance(self) -> None:
        pass


class MultDAEFunctionalDropout(MultDAE):
    """BUG: the input corruption is written ``F.dropout(x, 0.5)``, whose ``training`` argument defaults to
    True: half of a served user's history is thrown away on every request too."""

    def corrupt(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(x, 0.5)


# --- extractive summarisation: scoring a document's sentences ----------------------------------------------
class SentenceScorer(_Adam):
    """An MLP scores each sentence from its embedding, the document's mean embedding (over its real
    sentences) and their product; binary cross-entropy on the summary marks of the real sentences. Served:
    the 3 best real sentences."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(3 * data.DIM, 64, 64, 1)

    def context(self, sents: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return (sents.sum(1) / mask.sum(1, keepdim=True))[:, None]

    def forward(self, sents: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        doc = self.context(sents, mask).expand_as(sents)
        return self.net(torch.cat([sents, doc, sents * doc], -1)).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        sents, mask, summary = batch
        losses = F.binary_cross_entropy_with_logits(self(sents, mask), summary, reduction="none")
        return (losses * mask).sum() / mask.sum()

    def predict(self, sents: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = self(sents, mask).masked_fill(~mask.bool(), -float("inf"))
        return torch.zeros_like(mask).scatter_(1, scores.topk(data.SUMMARY, dim=1).indices, 1.0)


class SentenceScorerBatchContext(SentenceScorer):
    """BUG: the document's context is ``sents.mean(0)`` (from the one-document prototype): in a batch that
    averages each sentence slot over the batch's documents, and (12, 16) broadcasts against (batch, 12, 16)
    without a complaint."""

    def context(self, sents: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return sents.mean(0)


class SentenceScorerListwise(SentenceScorer):
    """The sentence scorer trained listwise: a softmax over the document's real sentences (padding at -inf)
    and the mean log-probability of its 3 summary sentences (log 12 or so at the start, and never below
    log 3, the best a 3-way tie can do)."""

    loss_offset = 1.0986  # log 3: three equally likely summary sentences is a perfect answer

    def loss(self, batch) -> torch.Tensor:
        sents, mask, summary = batch
        scores = self(sents, mask).masked_fill(~mask.bool(), -float("inf"))
        log_p = F.log_softmax(scores, -1).masked_fill(~summary.bool(), 0.0)
        return -(log_p.sum(1) / data.SUMMARY).mean()


# --- simulation-based inference of an oscillator's parameters ----------------------------------------------
class OscillatorNet(_Adam):
    """An MLP from a 64-sample recording to the parameters (amplitude, frequency, damping), each scaled to
    [-1, 1] over its prior range; squared error. The learning rate is cut by 5 when the epoch's training loss
    has not improved for 2 epochs (``ReduceLROnPlateau``). Served: the parameters in their units."""

    mode = "min"

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.SAMPLES, 128, 128, 3)

    def encode(self, params: torch.Tensor) -> torch.Tensor:
        low, high = data.PRIOR[:, 0], data.PRIOR[:, 1]
        return 2 * (params - low) / (high - low) - 1

    def decode(self, out: torch.Tensor) -> torch.Tensor:
        low, high = data.PRIOR[:, 0], data.PRIOR[:, 1]
        return low + (out + 1) * (high - low) / 2

    def prepare(self, curve: torch.Tensor) -> torch.Tensor:
        return curve

    def forward(self, curve: torch.Tensor) -> torch.Tensor:
        return self.net(self.prepare(curve))

    def loss(self, batch) -> torch.Tensor:
        curve, params = batch
        return F.mse_loss(self(curve), self.encode(params))

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss, on_step=True, on_epoch=True)
        return loss

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(
            optimizer, mode=self.mode, factor=0.2, patience=1
        )
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": plateau, "monitor": "train_loss_epoch"}}

    def predict(self, curve: torch.Tensor) -> torch.Tensor:
        return self.decode(self(curve))


class OscillatorNetPlateauMax(OscillatorNet):
    """BUG: ``ReduceLROnPlateau(mode="max")`` on a loss: a falling loss never counts as an improvement, so
    the learning rate is cut by 5 every second epoch from the start."""

    mode = "max"


class OscillatorNetPeakNormalised(OscillatorNet):
    """BUG: each recording is divided by its own peak before the MLP (a habit from spectra, where only the
    shape matters): the amplitude, one of the three parameters asked for, is erased from every input."""

    def prepare(self, curve: torch.Tensor) -> torch.Tensor:
        return curve / curve.abs().amax(-1, keepdim=True)


class OscillatorNetLogDamping(OscillatorNet):
    """The oscillator net with the damping learnt as its log (scaled over the log of its prior range) and
    served through exp."""

    def encode(self, params: torch.Tensor) -> torch.Tensor:
        return super().encode(self._log_damping(params))

    def decode(self, out: torch.Tensor) -> torch.Tensor:
        params = super().decode(out)
        low, high = data.PRIOR[2]
        damping = low * torch.exp((params[:, 2] - low) / (high - low) * torch.log(high / low))
        return torch.cat([params[:, :2], damping[:, None]], 1)

    @staticmethod
    def _log_damping(params: torch.Tensor) -> torch.Tensor:
        low, high = data.PRIOR[2]
        scaled = low + (high - low) * torch.log(params[:, 2] / low) / torch.log(high / low)
        return torch.cat([params[:, :2], scaled[:, None]], 1)


# --- node regression on small graphs (mean aggregation over an edge list) ----------------------------------
class NodeRegressor(_Adam):
    """One mean-aggregation (GraphSAGE-like) step over the batched edge list, each stored edge made two
    messages (one each way), then an MLP on each node's own features and its neighbours' mean; squared error.
    Served: every node's value."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * data.FEATURES, 64, 64, 1)

    def messages(self, edges: torch.Tensor) -> torch.Tensor:
        return torch.cat([edges, edges.flip(0)], 1)

    def features(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        src, dst = self.messages(edges)
        total = torch.zeros_like(x).index_add_(0, dst, x[src])
        degree = torch.zeros(len(x)).index_add_(0, dst, torch.ones(len(dst)))
        return torch.cat([x, total / degree.clamp_min(1)[:, None]], -1)

    def forward(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        return self.net(self.features(x, edges)).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        x, edges, y = batch
        return F.mse_loss(self(x, edges), y)

    def predict(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        return self(x, edges)


class NodeRegressorOneWay(NodeRegressor):
    """BUG: the stored edge list (each friendship once, i < j) is used as the message list as it is: a node
    hears only from its lower-numbered neighbours, and node 0 from nobody."""

    def messages(self, edges: torch.Tensor) -> torch.Tensor:
        return edges


class NodeRegressorEMA(NodeRegressor):
    """The node regressor served with an exponential moving average of its MLP's weights (decay .99, updated
    after every optimizer step; the average is a frozen copy, not trained)."""

    decay = 0.99

    def __init__(self) -> None:
        super().__init__()
        self.ema = copy.deepcopy(self.net).requires_grad_(False)

    def configure_optimizers(self):
        return torch.optim.Adam(self.net.parameters(), lr=self.lr)

    @torch.no_grad()
    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        for average, weight in zip(self.ema.parameters(), self.net.parameters(), strict=True):
            average.lerp_(weight, 1 - self.decay)

    def predict(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        return self.ema(self.features(x, edges)).squeeze(-1)


class NodeRegressorEMASlow(NodeRegressorEMA):
    """BUG: the EMA decay .999 is copied from a long image-classification recipe: over 8 epochs (376 steps)
    the average keeps 0.999 ** 376 = 69% of the random initial weights, and that is what is served."""

    decay = 0.999


# --- screening for a rare condition from a lab panel --------------------------------------------------------
class Screener(_Adam):
    """An MLP on the standardised lab panel; binary cross-entropy. Served: the probability of the
    condition."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.LABS, 128, 128, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.binary_cross_entropy_with_logits(self(x), y)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(x))


# --- authorship attribution from word frequencies -----------------------------------------------------------
class AuthorNet(_Adam):
    """An MLP from a snippet's word frequencies (function and topic words alike) to its author;
    cross-entropy. Served: the most likely author."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.STYLE_WORDS + data.TOPIC_WORDS, 64, data.AUTHORS)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, author = batch
        return F.cross_entropy(self(x), author)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)
