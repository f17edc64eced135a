"""Sealed gallery ZX1's models (half ``zx1``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _zx1_data as data
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


# --- keypoint detection by heatmaps -------------------------------------------------------------------------
class PinDetector(_Adam):
    """A fully convolutional network to one heatmap logit per keypoint and pixel; the loss is the
    cross-entropy of each keypoint's softmax over the canvas against its (normalised) target heatmap. Served:
    each keypoint's argmax pixel as (row, col)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 24, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(24, 24, 3, padding=2, dilation=2),
            nn.ReLU(),
            nn.Conv2d(24, 24, 3, padding=2, dilation=2),
            nn.ReLU(),
            nn.Conv2d(24, data.KEYPOINTS, 1),
        )

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image)

    def heat_loss(self, logits: torch.Tensor, heat: torch.Tensor) -> torch.Tensor:
        return -(heat.flatten(2) * logits.flatten(2).log_softmax(-1)).sum(-1).mean()

    def loss(self, batch) -> torch.Tensor:
        image, heat = batch
        return self.heat_loss(self(image), heat)

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        flat = self(image).flatten(2).argmax(-1)
        return torch.stack([flat // data.SIDE, flat % data.SIDE], -1).float()


class PinDetectorChannelSoftmax(PinDetector):
    """BUG: the heatmap loss is written ``F.cross_entropy(logits, heat)`` on the (B, K, H, W) tensors:
    cross-entropy takes dim 1, the keypoints, as the classes, so each pixel's softmax runs over the two
    keypoints instead of each keypoint's over the pixels; nothing ties a keypoint's logits across the
    canvas."""

    def heat_loss(self, logits: torch.Tensor, heat: torch.Tensor) -> torch.Tensor:
        return F.cross_entropy(logits, heat)


class PinSoftArgmax(PinDetector):
    """Integral regression: no heatmap target at all; the soft-argmax (the expected (row, col) under each
    keypoint's spatial softmax) is trained by an L1 loss against the keypoints' coordinates, and served."""

    def coords(self, image: torch.Tensor) -> torch.Tensor:
        p = self(image).flatten(2).softmax(-1)
        ys, xs = torch.meshgrid(
            torch.arange(data.SIDE).float(), torch.arange(data.SIDE).float(), indexing="ij"
        )
        return torch.stack([p @ ys.reshape(-1), p @ xs.reshape(-1)], -1)

    def loss(self, batch) -> torch.Tensor:
        image, points = batch
        return F.l1_loss(self.coords(image), points)

    def predict(self, image: torch.Tensor) -> torch.Tensor:
        return self.coords(image)


# --- extractive span question answering ---------------------------------------------------------------------
class SpanReader(_Adam):
    """Token embeddings, a bidirectional GRU and one start and one end logit per position; cross-entropy
    on the start and on the end position. Served: the (start, end) pair, end >= start and at most 5 tokens
    long, with the highest summed logits."""

    longest, lr = 5, 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(data.VOCAB, 32)
        self.rnn = nn.GRU(32, 64, batch_first=True, bidirectional=True)
        self.head = nn.Linear(128, 2)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h, _ = self.rnn(self.embed(tokens))
        start, end = self.head(h).unbind(-1)
        return start, end

    def span_loss(self, start, end, span) -> torch.Tensor:
        return F.cross_entropy(start, span[:, 0]) + F.cross_entropy(end, span[:, 1])

    def loss(self, batch) -> torch.Tensor:
        tokens, span = batch
        return self.span_loss(*self(tokens), span)

    def predict(self, tokens: torch.Tensor) -> torch.Tensor:
        start, end = self(tokens)
        n = tokens.shape[1]
        offsets = torch.arange(n)[None, :] - torch.arange(n)[:, None]
        allowed = (offsets >= 0) & (offsets < self.longest)
        scores = (start[:, :, None] + end[:, None, :]).masked_fill(~allowed, -math.inf)
        best = scores.flatten(1).argmax(-1)
        return torch.stack([best // n, best % n], -1)


class SpanReaderEndFromStart(SpanReader):
    """BUG: the end term of the loss is computed on the start logits (``F.cross_entropy(start, span[:, 1])``,
    a copy-pasted line): the end head is never trained, and the start logits learn a blur of both ends."""

    def span_loss(self, start, end, span) -> torch.Tensor:
        return F.cross_entropy(start, span[:, 0]) + F.cross_entropy(start, span[:, 1])


# --- prototypical few-shot classification -----------------------------------------------------------------
class ProtoNet(_Adam):
    """An MLP embedding; a batch is an episode of ``way`` classes, each ``shot`` support digits then
    ``query`` queries; prototypes are the support's mean embeddings and the logits the negative squared
    distances of the queries to them; cross-entropy on the queries' episode classes. Served: for an episode
    laid out the same way (``shot`` may differ), each query's nearest prototype's index."""

    way, shot, query = 5, 5, 5

    def __init__(self) -> None:
        super().__init__()
        self.embed = mlp(64, 128, 64)

    def logits(self, queries: torch.Tensor, prototypes: torch.Tensor) -> torch.Tensor:
        return -torch.cdist(queries, prototypes).pow(2)

    def episode_logits(self, x: torch.Tensor, shot: int) -> torch.Tensor:
        rows = self.embed(x).view(self.way, -1, self.embed[-1].out_features)
        prototypes = rows[:, :shot].mean(1)
        return self.logits(rows[:, shot:].reshape(-1, rows.shape[-1]), prototypes)

    def loss(self, batch) -> torch.Tensor:
        x, _ = batch
        target = torch.arange(self.way).repeat_interleave(self.query)
        return F.cross_entropy(self.episode_logits(x, self.shot), target)

    def predict(self, x: torch.Tensor, shot: int | None = None) -> torch.Tensor:
        return self.episode_logits(x, shot or self.shot).argmax(-1)


class ProtoNetDistanceAsLogit(ProtoNet):
    """BUG: the squared distances are used as the logits without their minus sign: training pushes each
    query away from its own prototype, and the nearest prototype served is another class's."""

    def logits(self, queries: torch.Tensor, prototypes: torch.Tensor) -> torch.Tensor:
        return torch.cdist(queries, prototypes).pow(2)


class ProtoNetCosine(ProtoNet):
    """Cosine similarity to the prototypes times a learnt temperature (started at 10) as the logits."""

    def __init__(self) -> None:
        super().__init__()
        self.log_scale = nn.Parameter(torch.tensor(math.log(10.0)))

    def logits(self, queries: torch.Tensor, prototypes: torch.Tensor) -> torch.Tensor:
        cosine = F.normalize(queries, dim=-1) @ F.normalize(prototypes, dim=-1).T
        return self.log_scale.exp() * cosine


# --- density estimation with a normalising flow (RealNVP) -------------------------------------------------
class Coupling(nn.Module):
    """An affine coupling layer: the coordinates where ``mask`` is 1 pass unchanged and set the scale
    (tanh-bounded) and shift of the others."""

    def __init__(self, mask: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mask", mask)
        self.net = mlp(2, 64, 64, 4)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        kept = x * self.mask
        s, t = self.net(kept).chunk(2, -1)
        s = torch.tanh(s) * (1 - self.mask)
        t = t * (1 - self.mask)
        return kept + (1 - self.mask) * (x * s.exp() + t), s.sum(-1)


class RealNVP(_Adam):
    """Six affine couplings with alternating masks to a standard normal; the loss is the negative
    log-likelihood (the base density of the image plus the log-determinant). Served: the log-density."""

    masks = [[1.0, 0.0], [0.0, 1.0]] * 3

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Coupling(torch.tensor(mask)) for mask in self.masks)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logdet = torch.zeros(len(x))
        for layer in self.layers:
            x, ld = layer(x)
            logdet = logdet + ld
        return x, logdet

    @staticmethod
    def base(z: torch.Tensor) -> torch.Tensor:
        return -0.5 * z.pow(2).sum(-1) - math.log(2 * math.pi)

    def log_density(self, x: torch.Tensor) -> torch.Tensor:
        z, logdet = self(x)
        return self.base(z) + logdet

    def loss(self, batch) -> torch.Tensor:
        (x,) = batch
        return -self.log_density(x).mean()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.log_density(x)


class RealNVPSameMask(RealNVP):
    """BUG: every coupling gets the same mask (the list was written ``[[1.0, 0.0]] * 6``, the alternation
    forgotten): the first coordinate is never transformed, and its density stays the base normal's."""

    masks = [[1.0, 0.0]] * 6


class RealNVPLogDetSubtracted(RealNVP):
    """BUG: the training loss subtracts the log-determinant (the inverse direction's sign): the flow is
    rewarded for squeezing the data towards the mode, and the density it serves is far too concentrated."""

    def loss(self, batch) -> torch.Tensor:
        (x,) = batch
        z, logdet = self(x)
        return -(self.base(z) - logdet).mean()


class RealNVPServedWithoutLogDet(RealNVP):
    """BUG: ``predict`` returns the base density of the image, ``base(self(x)[0])``, without the couplings'
    log-determinant: the served log-density is not that of the data."""

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.base(self(x)[0])


# --- behaviour cloning on a gridworld ---------------------------------------------------------------------
class Policy(_Adam):
    """The state (agent's and goal's cells) encoded as two one-hot planes, an agent plane and a goal plane,
    and an MLP from them to the logits of the four moves; cross-entropy on the expert's move; Adam with a
    linear warm-up of the learning rate over the first 100 steps. Served: the most likely move's index,
    rolled out in the environment."""

    warmup = 100

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * data.GRID * data.GRID, 128, 128, 4)

    def planes(self, state: torch.Tensor) -> torch.Tensor:
        cells = (state[:, 0::2] * data.GRID + state[:, 1::2]).long()  # (agent, goal) flat indices
        obs = torch.zeros(len(state), 2, data.GRID * data.GRID)
        obs[:, 0].scatter_(1, cells[:, :1], 1.0)
        obs[:, 1].scatter_(1, cells[:, 1:], 1.0)
        return obs.flatten(1)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(self.planes(state))

    def loss(self, batch) -> torch.Tensor:
        state, action = batch
        return F.cross_entropy(self(state), action)

    def predict(self, state: torch.Tensor) -> torch.Tensor:
        return self(state).argmax(-1)

    def warmed(self, optimizer) -> torch.optim.lr_scheduler.LambdaLR:
        return torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / self.warmup))

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": self.warmed(optimizer), "interval": "step"},
        }


class PolicyGoalOnAgentPlane(Policy):
    """BUG: the goal is scattered onto the agent's plane (``obs[:, 0].scatter_(1, goal, 1.0)``, a copied
    line): the goal plane stays empty, and the policy cannot tell where it is from where it is going."""

    def planes(self, state: torch.Tensor) -> torch.Tensor:
        cells = (state[:, 0::2] * data.GRID + state[:, 1::2]).long()
        obs = torch.zeros(len(state), 2, data.GRID * data.GRID)
        obs[:, 0].scatter_(1, cells[:, :1], 1.0)
        obs[:, 0].scatter_(1, cells[:, 1:], 1.0)
        return obs.flatten(1)


class PolicyWarmupPerEpoch(Policy):
    """BUG: ``configure_optimizers`` returns ``[optimizer], [warm_up]``, whose scheduler Lightning steps once
    an epoch (the default interval): the warm-up meant for 100 steps lasts 100 epochs, and the policy trains
    at a few hundredths of its learning rate."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        return [optimizer], [self.warmed(optimizer)]


# --- pairwise skill rating (Bradley-Terry) ------------------------------------------------------------------
class BradleyTerry(_Adam):
    """A skill per player (started at 0) and a linear effect of the match features: a match row is (id of
    the first player, id of the second, features...), and the first player wins with probability
    sigmoid(skill_a - skill_b + effects . features); binary cross-entropy. Served: that probability."""

    lr = 3e-2

    def __init__(self) -> None:
        super().__init__()
        self.skill = nn.Embedding(data.PLAYERS, 1)
        nn.init.zeros_(self.skill.weight)
        self.effects = nn.Linear(2, 1, bias=False)

    def skills(self, x: torch.Tensor) -> torch.Tensor:
        return self.skill(x[:, :2].long())[..., 0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skill = self.skills(x)
        return skill[:, 0] - skill[:, 1] + self.effects(x[:, 2:])[:, 0]

    def loss(self, batch) -> torch.Tensor:
        x, won = batch
        return F.binary_cross_entropy_with_logits(self(x), won)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(x))


class BradleyTerrySummed(BradleyTerry):
    """BUG: the two skills are added (``skill[:, 0] + skill[:, 1]``, a sign lost): the logit is symmetric in
    the players and cannot say which of them is stronger."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skill = self.skills(x)
        return skill[:, 0] + skill[:, 1] + self.effects(x[:, 2:])[:, 0]


class BradleyTerryDoubleSigmoid(BradleyTerry):
    """BUG: the loss is ``binary_cross_entropy_with_logits`` of the probability (the sigmoid applied twice):
    the trained probability can never fall below a half, the skills are driven apart without bound, and the
    served probabilities are far too confident."""

    def loss(self, batch) -> torch.Tensor:
        x, won = batch
        return F.binary_cross_entropy_with_logits(torch.sigmoid(self(x)), won)


class BradleyTerrySkillsNotOptimised(BradleyTerry):
    """BUG: the optimizer is given ``self.effects.parameters()`` (a fine-tuning template's head-only line):
    the skills stay at 0 and only the match features' effects are learnt."""

    def configure_optimizers(self):
        return torch.optim.Adam(self.effects.parameters(), lr=self.lr)
