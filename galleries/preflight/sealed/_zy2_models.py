"""Sealed gallery ZY2's models (half ``zy2``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _zy2_data as data
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


# --- link prediction (a two-layer graph encoder, dot-product scores, sampled negatives) ---------------------
class LinkGNN(_Adam):
    """A two-layer graph encoder (GraphSAGE-like: each layer reads a node's vector and the mean of its
    neighbours' over the training edges only) from the 16 node features to a 32-d code; a pair's score is the
    dot product of its two codes (a logit); binary cross-entropy against edge (1) or sampled non-edge (0).
    Served: the pairs' scores (ranked)."""

    doubled = False  # which split's training edges the message passing runs over

    def __init__(self) -> None:
        super().__init__()
        features, _ = data.graph()
        self.register_buffer("x", features)
        self.register_buffer("adjacency", data.train_adjacency(data.edge_split(self.doubled)["train"]))
        self.layer1 = nn.Linear(2 * data.FEATURES, 64)
        self.layer2 = nn.Linear(2 * 64, 32)

    def codes(self) -> torch.Tensor:
        h = torch.relu(self.layer1(torch.cat([self.x, self.adjacency @ self.x], 1)))
        return self.layer2(torch.cat([h, self.adjacency @ h], 1))

    def score(self, z: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        return (z[pairs[:, 0]] * z[pairs[:, 1]]).sum(-1) / 4

    def forward(self, pairs: torch.Tensor) -> torch.Tensor:
        return self.score(self.codes(), pairs)

    def loss(self, batch) -> torch.Tensor:
        pairs, label = batch
        return F.binary_cross_entropy_with_logits(self(pairs), label)

    def predict(self, pairs: torch.Tensor) -> torch.Tensor:
        return self(pairs)


class LinkGNNSourceTwice(LinkGNN):
    """BUG: the score reads the source's code twice (``z[pairs[:, 0]] * z[pairs[:, 0]]``, a copy-paste slip):
    a pair's score is the squared norm of one node's code, which can only learn how often that node has
    edges, not whom it links to."""

    def score(self, z: torch.Tensor, pairs: torch.Tensor) -> torch.Tensor:
        return (z[pairs[:, 0]] * z[pairs[:, 0]]).sum(-1) / 4


class LinkGNNDoubledSplit(LinkGNN):
    """The correct model over the split made after listing each edge both ways (the bug is in the split)."""

    doubled = True


class LinkGNNSampledInStep(LinkGNN):
    """The loader yields training edges only; ``training_step`` adds one negative per edge, a node pair drawn
    uniformly over all nodes (validation keeps its fixed pairs)."""

    def negatives(self, pairs: torch.Tensor) -> torch.Tensor:
        return torch.randint(data.NODES, pairs.shape, device=pairs.device)

    def labels(self, label: torch.Tensor) -> torch.Tensor:
        return torch.cat([label, torch.zeros_like(label)])

    def training_step(self, batch, batch_idx):
        pairs, label = batch
        pairs = torch.cat([pairs, self.negatives(pairs)])
        loss = self.loss((pairs, self.labels(label)))
        self.log("train_loss", loss)
        return loss


class LinkGNNInBatchNegatives(LinkGNNSampledInStep):
    """In-batch negatives: ``training_step`` pairs the batch's sources with its destinations shuffled
    (popular nodes are drawn as negatives as often as they appear in edges); the rare shuffled pair that is
    a true edge is kept as a negative (label noise on purpose)."""

    def negatives(self, pairs: torch.Tensor) -> torch.Tensor:
        return torch.stack([pairs[:, 0], pairs[torch.randperm(len(pairs), device=pairs.device), 1]], 1)


class LinkGNNLabelsSwappedInStep(LinkGNNSampledInStep):
    """BUG: ``training_step`` concatenates the pairs as [edges, negatives] but the labels as
    ``torch.cat([zeros, label])`` (negatives first): every edge is taught as a non-edge and every sampled
    non-edge as an edge, and the served scores rank non-edges above edges."""

    def labels(self, label: torch.Tensor) -> torch.Tensor:
        return torch.cat([torch.zeros_like(label), label])


# --- arithmetic on images: the sum of two digits ------------------------------------------------------------
class DigitSum(_Adam):
    """A shared encoder of each 8 x 8 digit (an MLP to 64 features), the two codes concatenated, and a head
    to 19 classes (sums 0..18); cross-entropy. Served: the sum."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(mlp(64, 128, 64), nn.ReLU())
        self.head = mlp(128, 128, self.outputs)

    outputs = data.SUMS

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        codes = self.encoder(images)  # (batch, 2, 64)
        return self.head(codes.flatten(1))

    def loss(self, batch) -> torch.Tensor:
        images, total = batch
        return F.cross_entropy(self(images), total)

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return self(images).argmax(-1)


class DigitSumHeadOnlyOptimised(DigitSum):
    """BUG: ``configure_optimizers`` hands Adam ``self.head.parameters()`` only (copied from a fine-tuning
    recipe whose encoder was pretrained and frozen): this encoder is never trained and stays at its random
    initialisation."""

    def configure_optimizers(self):
        return torch.optim.Adam(self.head.parameters(), lr=self.lr)


class DigitSumDeepSets(DigitSum):
    """Order-blind on purpose (Deep Sets): the two codes are summed, not concatenated (the sum of two digits
    does not depend on their order), trained on pairs presented in a random order."""

    def __init__(self) -> None:
        super().__init__()
        self.head = mlp(64, 128, data.SUMS)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(images).sum(1))


class DigitSumRegression(DigitSum):
    """The sum as a regression target on purpose: one output, squared error on the standardised sum
    ((sum - 9) / 4). Served: the output scaled back, rounded and clipped to 0..18."""

    outputs = 1

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return super().forward(images)[:, 0]

    def loss(self, batch) -> torch.Tensor:
        images, total = batch
        return F.mse_loss(self(images), (total - data.SUM_MEAN) / data.SUM_STD)

    def unscale(self, out: torch.Tensor) -> torch.Tensor:
        return out * data.SUM_STD + data.SUM_MEAN

    def predict(self, images: torch.Tensor) -> torch.Tensor:
        return self.unscale(self(images)).round().clamp(0, data.SUMS - 1)


class DigitSumRegressionUnscaledWithoutStd(DigitSumRegression):
    """BUG: ``predict`` adds the mean back but forgets to multiply by the standard deviation
    (``out + 9``): every served sum is pulled towards 9 by a factor of four."""

    def unscale(self, out: torch.Tensor) -> torch.Tensor:
        return out + data.SUM_MEAN


# --- sequence sorting: each number's rank, per-position classification -------------------------------------
class RankTransformer(_Adam):
    """Each number embedded by a small MLP plus a learned position embedding, two self-attention layers over
    the set, and per position 8 logits (its rank); cross-entropy over every position. Adam with a linear
    warm-up over the first 30 optimiser steps (interval "step"). Served: the ranks."""

    warmup_interval = "step"
    causal = False
    label_smoothing = 0.0
    positional = True

    def __init__(self) -> None:
        super().__init__()
        self.embed = mlp(1, 32, 32)
        if self.positional:
            self.position = nn.Parameter(torch.zeros(data.SET_SIZE, 32))
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(32, data.SET_SIZE)

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(self.inputs(x)[..., None])
        if self.positional:
            h = h + self.position
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1]) if self.causal else None
        return self.head(self.encoder(h, mask=mask, is_causal=self.causal))  # (batch, position, rank)

    def per_position_loss(self, logits: torch.Tensor, rank: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits.transpose(1, 2), rank, label_smoothing=self.label_smoothing)

    def loss(self, batch) -> torch.Tensor:
        x, rank = batch
        return self.per_position_loss(self(x), rank)

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        warmup = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda i: min(1.0, (i + 1) / 30))
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": warmup, "interval": self.warmup_interval},
        }

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class RankTransformerCausal(RankTransformer):
    """BUG: the encoder is called with a causal mask (``is_causal=True`` and a square subsequent mask, from
    a language-model template): each number attends only to those before it and cannot know how many of the
    later ones are smaller."""

    causal = True


class RankTransformerLossNotTransposed(RankTransformer):
    """BUG: ``F.cross_entropy(logits, rank)`` on (batch, position, rank) logits without moving the class
    axis to dim 1: with 8 positions and 8 ranks the shapes pass, the loss reads the positions as classes, and
    the network learns, for each rank, which position holds it (the inverse permutation), which the served
    argmax then reads as ranks."""

    def per_position_loss(self, logits: torch.Tensor, rank: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, rank)


class RankTransformerWarmupPerEpoch(RankTransformer):
    """BUG: the warm-up's scheduler dict omits ``"interval": "step"``: Lightning steps it once an epoch, the
    30-step warm-up lasts 30 epochs, and a short run trains at 3% to 20% of the learning rate."""

    warmup_interval = "epoch"


class RankTransformerRescaledSmoothed(RankTransformer):
    """No positional encoding on purpose (a number's rank does not depend on where it sits: the model is
    permutation-equivariant), each set rescaled to [0, 1] by its own minimum and maximum (ranks are unchanged
    by any increasing map), and label smoothing 0.1 (the loss cannot reach 0)."""

    label_smoothing = 0.1
    positional = False

    def inputs(self, x: torch.Tensor) -> torch.Tensor:
        low, high = x.min(-1, keepdim=True).values, x.max(-1, keepdim=True).values
        return (x - low) / (high - low + 1e-6)


# --- frame-sequence classification: the direction a digit moves ---------------------------------------------
class MotionGRU(_Adam):
    """A per-frame encoder (an MLP over the 144 pixels to 48 features), a GRU over the 4 frames
    (``batch_first=True``), its last output to 4 directions; cross-entropy. Served: the direction."""

    batch_first = True

    def __init__(self) -> None:
        super().__init__()
        self.frame = nn.Sequential(mlp(data.CANVAS**2, 96, 48), nn.ReLU())
        self.gru = nn.GRU(48, 48, batch_first=self.batch_first)
        self.head = nn.Linear(48, data.DIRECTIONS)

    def forward(self, clips: torch.Tensor) -> torch.Tensor:
        out, _ = self.gru(self.frame(clips))  # clips: (batch, frames, pixels)
        return self.head(out[:, -1])

    def loss(self, batch) -> torch.Tensor:
        clips, direction = batch
        return F.cross_entropy(self(clips), direction)

    def predict(self, clips: torch.Tensor) -> torch.Tensor:
        return self(clips).argmax(-1)


class MotionGRUTimeMajor(MotionGRU):
    """BUG: the GRU is built with the default ``batch_first=False`` while the clips are (batch, frames,
    features): it runs along the batch, each frame index is a "sequence", and ``out[:, -1]`` (the right
    shape) is the last frame of each clip mixed with the clips before it in the batch."""

    batch_first = False


# --- monotone regression: price rises with floor area -------------------------------------------------------
class _PositiveLinear(nn.Module):
    """A linear layer whose weights are the softplus of free parameters (all positive)."""

    def __init__(self, fan_in: int, fan_out: int) -> None:
        super().__init__()
        self.raw = nn.Parameter(torch.randn(fan_out, fan_in) * 0.5 - 1.0)
        self.bias = nn.Parameter(torch.zeros(fan_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, F.softplus(self.raw), self.bias)


class MonotonePrice(_Adam):
    """The log price as a sum of a path that rises with the floor area (positive weights and increasing
    activations: tanh) and an unconstrained MLP of the other inputs; squared error on the log price.
    Served: the price (exp of the output)."""

    monotone_column = 0

    def __init__(self) -> None:
        super().__init__()
        self.rising = nn.Sequential(_PositiveLinear(1, 16), nn.Tanh(), _PositiveLinear(16, 1))
        self.rest = mlp(3, 32, 1)
        self.offset = nn.Parameter(torch.tensor(4.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = self.monotone_column
        others = torch.cat([x[:, :c], x[:, c + 1 :]], 1)
        return (self.rising(x[:, c : c + 1]) + self.rest(others))[:, 0] + self.offset

    def loss(self, batch) -> torch.Tensor:
        x, price = batch
        return F.mse_loss(self(x), price.log())

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).exp()


class MonotonePriceWrongColumn(MonotonePrice):
    """BUG: the constrained path reads column 1 (``monotone_column = 1``, counted as if the dropped id column
    were still first): the season, whose effect goes up and down, is forced to be monotone, and the area
    goes to the free path."""

    monotone_column = 1


class MonotonePriceServedInLogs(MonotonePrice):
    """BUG: ``predict`` returns the network's output, the log price, without ``exp``: the served prices are
    the logs of the prices."""

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)


class MonotonePricePenalty(_Adam):
    """Monotone by a penalty on purpose: one MLP of all four inputs; the loss adds 100x the mean squared
    amount by which the output falls when the area grows by 0.05 (a finite difference, so the loss needs no
    autograd); squared error on the log price. Served: the price."""

    sign = 1.0  # the direction the penalty enforces
    weight = 100.0

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(4, 64, 64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[:, 0] + 4.0

    def loss(self, batch) -> torch.Tensor:
        x, price = batch
        nudged = x.clone()
        nudged[:, 0] += 0.05
        rise = self.sign * (self(nudged) - self(x))
        return F.mse_loss(self(x), price.log()) + self.weight * F.relu(-rise).pow(2).mean()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).exp()


class MonotonePricePenaltyFlipped(MonotonePricePenalty):
    """BUG: the penalty is written ``relu(rise)`` for ``relu(-rise)`` (``sign = -1``): it punishes the price
    for rising with the area, and the network is pushed to make it fall."""

    sign = -1.0


# --- churn classification (time-ordered split) --------------------------------------------------------------
class ChurnNet(_Adam):
    """An MLP over the 7 standardised features to one logit; binary cross-entropy with the positives weighted
    by the negatives-to-positives ratio of the training rows (3: churners are ~25%). Served: churn (logit >
    0)."""

    def __init__(self, pos_weight: float = 3.0) -> None:
        super().__init__()
        self.net = mlp(data.CHURN_FEATURES, 32, 32, 1)
        self.register_buffer("pos_weight", torch.tensor(pos_weight))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[:, 0]

    def loss(self, batch) -> torch.Tensor:
        x, churned = batch[:2]
        return F.binary_cross_entropy_with_logits(self(x), churned, pos_weight=self.pos_weight)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return (self(x) > 0).float()


class ChurnNetPosWeightInverted(ChurnNet):
    """BUG: ``pos_weight`` is computed as positives / negatives (1/3) instead of negatives / positives (3):
    the churners, already the minority, are down-weighted three times more, and the served model rarely
    flags one."""

    def __init__(self) -> None:
        super().__init__(pos_weight=1 / 3)


class ChurnNetRecencyWeighted(ChurnNet):
    """Recent rows weigh more on purpose (the behaviour drifts): each row's loss is weighted by
    exp((t - 1) / 0.3), renormalised over the batch; the loader yields (features, churned, timestamp)."""

    def loss(self, batch) -> torch.Tensor:
        x, churned, t = batch
        weight = torch.exp((t - 1.0) / 0.3)
        each = F.binary_cross_entropy_with_logits(
            self(x), churned, pos_weight=self.pos_weight, reduction="none"
        )
        return (weight * each).sum() / weight.sum()
