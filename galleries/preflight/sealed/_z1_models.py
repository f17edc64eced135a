"""Sealed gallery Z's models (half ``z1``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _z1_data as data
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


# --- learning to sort: each element's rank ------------------------------------------------------------------
class Ranker(_Adam):
    """An MLP over a list and its soft pairwise comparisons to, for each element, logits over the 8 ranks; the
    cross-entropy of every element's rank. Served: each element's rank (argmax over the ranks)."""

    outputs = data.LENGTH * data.LENGTH  # 8 rank logits for each of the 8 elements

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.LENGTH + data.LENGTH**2, 256, 256, self.outputs)

    @staticmethod
    def features(x: torch.Tensor) -> torch.Tensor:
        """The list and its soft pairwise comparisons, tanh(30 (x_i - x_j))."""
        comparisons = torch.tanh(30 * (x[:, :, None] - x[:, None, :]))
        return torch.cat([x, comparisons.flatten(1)], -1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(self.features(x)).view(-1, data.LENGTH, data.LENGTH)

    def loss(self, batch) -> torch.Tensor:
        x, rank = batch
        return F.cross_entropy(self(x).reshape(-1, data.LENGTH), rank.reshape(-1))

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class RankerClassesOnElements(Ranker):
    """BUG: the (batch, element, rank) logits go to ``F.cross_entropy`` as they are: it takes dimension 1,
    the elements, for the classes and the ranks for positions, so each element's rank is learned along the
    element axis; the served argmax over the last dimension answers, for element i, the index of the element
    of rank i (the inverse permutation)."""

    def loss(self, batch) -> torch.Tensor:
        x, rank = batch
        return F.cross_entropy(self(x), rank)


class RankRegressor(Ranker):
    """Ranks as numbers: one output per element, the rank divided by 7, with an L1 loss; served rounded
    back to a rank."""

    outputs = data.LENGTH

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(self.features(x))

    def loss(self, batch) -> torch.Tensor:
        x, rank = batch
        return F.l1_loss(self(x), rank / (data.LENGTH - 1))

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return (self(x) * (data.LENGTH - 1)).round().clamp(0, data.LENGTH - 1).long()


# --- multi-digit addition: a GRU decoder over digit tokens --------------------------------------------------
class Adder(_Adam):
    """A GRU reading, at each place (least significant first), both operands' digits and the previous digit
    of the sum (teacher forcing: the targets shifted right behind a start token) to that place's digit of the
    sum. Served: the sum, decoded greedily place by place."""

    def __init__(self) -> None:
        super().__init__()
        self.operand = nn.Embedding(10, 16)
        self.previous = nn.Embedding(11, 16)
        self.gru = nn.GRU(48, 96, batch_first=True)
        self.head = nn.Linear(96, 10)

    def order(self, places: torch.Tensor) -> torch.Tensor:
        """The order the places are read and written in (the tokens come least significant first)."""
        return places

    def decoder_inputs(self, digit: torch.Tensor) -> torch.Tensor:
        start = torch.full_like(digit[:, :1], data.START)
        return torch.cat([start, digit[:, :-1]], 1)

    def step_inputs(self, x: torch.Tensor, previous: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.operand(x[..., 0]), self.operand(x[..., 1]), self.previous(previous)], -1)

    def loss(self, batch) -> torch.Tensor:
        x, digit = (self.order(t) for t in batch)
        out, _ = self.gru(self.step_inputs(x, self.decoder_inputs(digit)))
        return F.cross_entropy(self.head(out).transpose(1, 2), digit)

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        x = self.order(x)
        previous = torch.full((len(x), 1), data.START)
        hidden, digits = None, []
        for place in range(x.shape[1]):
            out, hidden = self.gru(self.step_inputs(x[:, place : place + 1], previous), hidden)
            previous = self.head(out).argmax(-1)
            digits.append(previous)
        return data.from_digits(self.order(torch.cat(digits, 1)))


class AdderUnshifted(Adder):
    """BUG: the decoder is fed the target digits themselves, not shifted behind the start token: at each
    place it reads the answer it is asked for and learns to copy it; served greedily, it copies its own
    previous guess."""

    def decoder_inputs(self, digit: torch.Tensor) -> torch.Tensor:
        return digit


class AdderWrittenOrder(Adder):
    """BUG: the places are read and written most significant first ("as the numbers are written"): the
    left-to-right GRU must write each digit before it has read the places below it, whose carry it needs."""

    def order(self, places: torch.Tensor) -> torch.Tensor:
        return places.flip(1)


class AdderTagger(_Adam):
    """A bidirectional GRU tagger reading the places most significant first, as written: each place's digit
    of the sum from both operands' digits, its backward half carrying the carries up from the low places.
    Served: the sum."""

    def __init__(self) -> None:
        super().__init__()
        self.operand = nn.Embedding(10, 16)
        self.gru = nn.GRU(32, 64, batch_first=True, bidirectional=True)
        self.head = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        written = x.flip(1)
        out, _ = self.gru(torch.cat([self.operand(written[..., 0]), self.operand(written[..., 1])], -1))
        return self.head(out).flip(1)  # back to least significant first

    def loss(self, batch) -> torch.Tensor:
        x, digit = batch
        return F.cross_entropy(self(x).transpose(1, 2), digit, label_smoothing=0.1)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return data.from_digits(self(x).argmax(-1))


# --- image registration: the shift and turn between two digit images ---------------------------------------
class Registration(_Adam):
    """A CNN over the pair (two channels) to the shift (x, y) and the turn, each scaled to [-1, 1]; squared
    error. Served: the three scaled parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(2, 16, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 64),
            nn.ReLU(),
            nn.Linear(64, 3),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, target = batch
        return F.mse_loss(self(x), target)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)


# --- rotation-prediction pretext with an online linear probe ------------------------------------------------
class RotationPretext(_Adam):
    """A CNN trunk and a small head trained to tell which of four quarter turns each digit was given (every
    digit of the batch in all four); a linear probe (behind a parameter-free batch norm, as in MAE's probes)
    on the trunk's detached features of the upright digits learns the classes alongside (labels -1 are
    unlabelled and skipped). Served: the probe's class."""

    probe_width = 32 * 4 * 4

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2, padding=1),
            nn.ReLU(),
            nn.Flatten(),
        )
        self.rotation_head = mlp(32 * 4 * 4, 64, 4)
        self.probe = nn.Sequential(
            nn.BatchNorm1d(self.probe_width, affine=False), nn.Linear(self.probe_width, 10)
        )

    def probe_inputs(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x).detach()

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        turned = torch.cat([x.rot90(k, (-2, -1)) for k in range(4)])
        turn = torch.arange(4).repeat_interleave(len(x))
        pretext = F.cross_entropy(self.rotation_head(self.encoder(turned)), turn)
        labelled = (label >= 0).sum().clamp(min=1)
        probe = F.cross_entropy(self.probe(self.probe_inputs(x)), label, ignore_index=-1, reduction="sum")
        return pretext + probe / labelled

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.probe(self.probe_inputs(x)).argmax(-1)


class RotationPretextProbeNotOptimised(RotationPretext):
    """BUG: the optimizer is built on the encoder's and the rotation head's parameters (listed by hand, to
    leave the probe "frozen" like the encoder's output), so the probe is never trained and serves its
    random initial weights."""

    def configure_optimizers(self):
        parameters = [*self.encoder.parameters(), *self.rotation_head.parameters()]
        return torch.optim.Adam(parameters, lr=self.lr)


class RotationPretextProbeOnTurnLogits(RotationPretext):
    """BUG: the probe reads the rotation head's four logits (the pretext model's output, as a "frozen
    pretrained model" is usually called) instead of the trunk's 512 features."""

    probe_width = 4

    def probe_inputs(self, x: torch.Tensor) -> torch.Tensor:
        return self.rotation_head(self.encoder(x)).detach()


# --- credit-default scoring ---------------------------------------------------------------------------------
class CreditScorer(_Adam):
    """An MLP over an application's 9 features to the default logit; binary cross-entropy with the defaults
    weighted 12 times (about the non-default to default ratio in training). Served: the score (a logit, to
    rank applicants by)."""

    pos_weight = 12.0

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.FEATURES, 64, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)[:, 0]

    def loss(self, batch) -> torch.Tensor:
        x, default = batch
        weight = torch.tensor(self.pos_weight)
        return F.binary_cross_entropy_with_logits(self(x), default, pos_weight=weight)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)


class CreditScorerPlain(CreditScorer):
    """Plain binary cross-entropy (the classes are balanced by the sampler instead)."""

    pos_weight = 1.0


class CreditScorerFocal(CreditScorer):
    """The focal loss (gamma 2, alpha 0.75 on the defaults): easy rows count for little, so the loss is
    small from the start and falls slowly."""

    def loss(self, batch) -> torch.Tensor:
        x, default = batch
        logit = self(x)
        ce = F.binary_cross_entropy_with_logits(logit, default, reduction="none")
        p_true = torch.exp(-ce)
        alpha = 0.75 * default + 0.25 * (1 - default)
        return (alpha * (1 - p_true) ** 2 * ce).mean()


# --- heteroscedastic volatility forecasting -----------------------------------------------------------------
class VolatilityNet(_Adam):
    """An MLP over the last 20 returns (and their sizes) to the next return's mean and standard deviation
    (softplus); the Gaussian negative log-likelihood. Served: the next return's variance."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * data.WINDOW, 64, 64, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(torch.cat([x, x.abs()], -1) / 2)
        return out[:, 0], F.softplus(out[:, 1]) + 1e-3

    def nll(self, mean, std, y) -> torch.Tensor:
        return F.gaussian_nll_loss(mean, y, std**2)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        mean, std = self(x)
        return self.nll(mean, std, y)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)[1] ** 2


class VolatilityNetStdAsVariance(VolatilityNet):
    """BUG: the standard deviation is passed to ``gaussian_nll_loss`` as its ``var``: the head learns the
    variance, and the served square of it is the variance squared."""

    def nll(self, mean, std, y) -> torch.Tensor:
        return F.gaussian_nll_loss(mean, y, std)


class VolatilityNetRawUnits(_Adam):
    """Returns as raw fractions (a 2% move is 0.02): the model scales them to percent inside and predicts
    the log-variance in raw units; the full Gaussian negative log-likelihood, which is negative for such
    small variances."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * data.WINDOW, 64, 64, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        percent = 100 * x
        out = self.net(torch.cat([percent, percent.abs()], -1) / 2)
        return out[:, 0] / 100, out[:, 1] - 2 * math.log(100)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        mean, log_var = self(x)
        return F.gaussian_nll_loss(mean, y, log_var.exp(), full=True)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)[1].exp() * 100**2  # in percent squared
