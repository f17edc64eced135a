"""Sealed gallery G's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass, or a flag, that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import copy
import itertools
import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils import parametrizations

from galleries.preflight.sealed import _g_data as data
from galleries.sealed import mlp


class _Adam(pl.LightningModule):
    """Adam on every parameter; ``loss(batch)`` is logged in training and validation; ``predict`` is
    ``forward``."""

    lr = 3e-3

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)

    def training_step(self, batch, batch_idx):
        loss = self.loss(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.loss(batch))

    def predict(self, *inputs: torch.Tensor):
        return self(*inputs)


class _Classifier(_Adam):
    """``net`` on ``x`` against class indices with cross-entropy."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch[:2]
        return F.cross_entropy(self(x), y)


# --- extractive span prediction -----------------------------------------------------------------------------
class SpanNet(_Adam):
    """Token and question embeddings, three width-5 convolutions over positions, start and end logits per
    token; the question slot and padding are masked out. Loss: CE(start) + CE(end) (2 ln 19 at init)."""

    def __init__(self) -> None:
        super().__init__()
        self.tokens, self.question = nn.Embedding(data.SPAN_VOCAB, 24), nn.Embedding(data.SPAN_TYPES + 1, 24)
        self.convs = nn.Sequential(
            nn.Conv1d(48, 64, 5, padding=2), nn.ReLU(), nn.Conv1d(64, 64, 5, padding=2), nn.ReLU(),
            nn.Conv1d(64, 2, 5, padding=2),
        )  # fmt: skip

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.cat([self.tokens(tokens), self.question(tokens[:, :1]).expand(-1, data.SPAN_LEN, -1)], -1)
        logits = self.convs(h.transpose(1, 2))
        masked = (tokens == 0) | (torch.arange(data.SPAN_LEN) == 0)
        return logits.masked_fill(masked[:, None], float("-inf")).unbind(1)

    def loss(self, batch) -> torch.Tensor:
        tokens, start, end = batch
        start_logits, end_logits = self(tokens)
        return F.cross_entropy(start_logits, start) + F.cross_entropy(end_logits, end)

    def predict(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The answer's first and last (inclusive) positions."""
        start_logits, end_logits = self(tokens)
        return start_logits.argmax(-1), end_logits.argmax(-1)


# --- skip-gram with negative sampling -----------------------------------------------------------------------
class SkipGram(_Adam):
    """Word and context tables (16 dimensions); loss: -log s(u.v) - sum log s(-u.n) over 5 negatives."""

    lr, negative_sign = 1e-2, -1.0

    def __init__(self) -> None:
        super().__init__()
        self.words, self.contexts = nn.Embedding(data.WORDS, 16), nn.Embedding(data.WORDS, 16)
        for table in (self.words, self.contexts):
            nn.init.normal_(table.weight, std=0.1)

    def forward(self, words: torch.Tensor) -> torch.Tensor:
        return self.words(words)

    def loss(self, batch) -> torch.Tensor:
        centre, context, negatives = batch
        u = self(centre)
        positive = (u * self.contexts(context)).sum(-1)
        negative = (u[:, None] * self.contexts(negatives)).sum(-1)
        return -(F.logsigmoid(positive).mean() + F.logsigmoid(self.negative_sign * negative).sum(1).mean())


class SkipGramNegativesAsPositives(SkipGram):
    """BUG: the negatives' term is written log s(+u.n), like the positive's, so every pair of words is pulled
    together and the embedding carries no topic."""

    negative_sign = 1.0


# --- matrix factorisation for ratings -----------------------------------------------------------------------
class RatingsMF(_Adam):
    """Global mean (a parameter starting at 0) + user and item biases + a rank-8 dot product; MSE."""

    lr = 2e-2

    def __init__(self) -> None:
        super().__init__()
        self.users, self.items = nn.Embedding(data.USERS, 8), nn.Embedding(data.ITEMS, 8)
        self.user_bias, self.item_bias = nn.Embedding(data.USERS, 1), nn.Embedding(data.ITEMS, 1)
        self.mean = nn.Parameter(torch.zeros(()))
        for table in (self.user_bias, self.item_bias):
            nn.init.zeros_(table.weight)
        self.init_factors()

    def init_factors(self) -> None:
        for table in (self.users, self.items):
            nn.init.normal_(table.weight, std=0.1)

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        bias = self.mean + self.user_bias(user).squeeze(-1) + self.item_bias(item).squeeze(-1)
        return bias + (self.users(user) * self.items(item)).sum(-1)

    def loss(self, batch) -> torch.Tensor:
        user, item, rating = batch
        return F.mse_loss(self(user, item), rating)


class RatingsMFZeroFactors(RatingsMF):
    """BUG: the factor tables are initialised to zeros like the biases: the dot product's gradient for each
    factor is the other (zero) factor, so only the biases ever learn."""

    def init_factors(self) -> None:
        for table in (self.users, self.items):
            nn.init.zeros_(table.weight)


# --- prototypical few-shot episodes -------------------------------------------------------------------------
class ProtoNet(_Adam):
    """An MLP embedding; a query's logits are minus its squared distances to the class means of the support
    (labels relative to the episode)."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = mlp(64, 128, 32)

    def forward(self, support: torch.Tensor, query: torch.Tensor) -> torch.Tensor:
        prototypes = self.embed(support).mean(-2)  # (episodes, ways, dim)
        return -(torch.cdist(self.embed(query), prototypes) ** 2)

    def loss(self, batch) -> torch.Tensor:
        support, query, label = batch
        return F.cross_entropy(self(support, query).flatten(0, 1), label.flatten())


# --- a physics-informed loss: u' = -1.5 u, u(0) = 1 ---------------------------------------------------------
class DecayPINN(_Adam):
    """u(x) = net((x - 1) / 0.577) (inputs standardised for the tanh MLP); loss: the mean squared residual
    u' + 1.5 u at the batch's points (u' by autograd through the standardisation) + the boundary error."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - 1) / 0.577)

    def derivative(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = x.clone().requires_grad_()
        u = self(x)
        return u, torch.autograd.grad(u.sum(), x, create_graph=True)[0]

    def penalty(self, residual: torch.Tensor) -> torch.Tensor:
        return (residual**2).mean()

    def loss(self, batch) -> torch.Tensor:
        with torch.inference_mode(False), torch.enable_grad():
            u, du = self.derivative(batch[0])
            boundary = (self(torch.zeros(1, 1)) - 1) ** 2
            return self.penalty(du + data.DECAY * u) + boundary.squeeze()


class DecayPINNStandardisedDerivative(DecayPINN):
    """BUG: u' is taken with respect to the standardised input z = (x - 1) / 0.577, not x; du/dz is
    0.577 du/dx, so the network solves u' = -2.6 u."""

    def derivative(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        z = ((x - 1) / 0.577).clone().requires_grad_()
        u = self.net(z)
        return u, torch.autograd.grad(u.sum(), z, create_graph=True)[0]


class DecayPINNMeanResidual(DecayPINN):
    """BUG: the penalty squares the batch's mean residual instead of averaging squared residuals, so errors of
    opposite signs cancel and many wrong curves have zero loss."""

    def penalty(self, residual: torch.Tensor) -> torch.Tensor:
        return residual.mean() ** 2


# --- offline Q-learning on a fixed replay buffer ------------------------------------------------------------
class ChainQ(_Adam):
    """Q(s, .) by an MLP on one-hot states; TD targets r + 0.9 (1 - done) max Q_target(s') from a target
    network (frozen, synced every 10 steps)."""

    sync_every = 10

    def __init__(self) -> None:
        super().__init__()
        self.online, self.target = mlp(data.STATES, 64, 2), mlp(data.STATES, 64, 2)
        self.target.requires_grad_(False)
        self.sync()

    def sync(self) -> None:
        self.target.load_state_dict(self.online.state_dict())

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.online(F.one_hot(state, data.STATES).float())

    def continues(self, done: torch.Tensor) -> torch.Tensor:
        return 1 - done

    def loss(self, batch) -> torch.Tensor:
        state, action, reward, following, done = batch
        q = self(state).gather(1, action[:, None]).squeeze(1)
        with torch.no_grad():
            ahead = self.target(F.one_hot(following, data.STATES).float()).amax(-1)
            target = reward + data.GAMMA * self.continues(done) * ahead
        return F.smooth_l1_loss(q, target)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        if self.global_step % self.sync_every == 0:
            self.sync()


class ChainQSyncKeysMismatch(ChainQ):
    """BUG: the sync loads the whole module's state dict into the target with ``strict=False``; its keys
    (``online.0.weight``) match none of the target's (``0.weight``), so nothing is copied and the TD targets
    bootstrap from the random initial network forever."""

    def sync(self) -> None:
        self.target.load_state_dict(self.state_dict(), strict=False)


class ChainQDoneInverted(ChainQ):
    """BUG: the bootstrap is multiplied by ``done`` instead of ``1 - done``: only terminal transitions look
    ahead, so every other Q-value is the immediate reward and the greedy policy grabs the 0.1."""

    def continues(self, done: torch.Tensor) -> torch.Tensor:
        return done


# --- adversarial (FGSM) training ----------------------------------------------------------------------------
class FGSMNet(_Classifier):
    """An MLP on digits trained on half clean, half FGSM-perturbed inputs (eps 0.15, in the direction that
    raises the loss)."""

    eps, direction = 0.15, 1.0

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 128, 10)

    def perturbed(self, x: torch.Tensor, y: torch.Tensor, direction: float) -> torch.Tensor:
        with torch.inference_mode(False), torch.enable_grad():
            x = x.clone().requires_grad_()
            (grad,) = torch.autograd.grad(F.cross_entropy(self(x), y.clone()), x)
        return (x + direction * self.eps * grad.sign()).clamp(0, 1).detach()

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        adversarial = self.perturbed(x, y, self.direction)
        return 0.5 * (F.cross_entropy(self(x), y) + F.cross_entropy(self(adversarial), y))


class FGSMNetDescends(FGSMNet):
    """BUG: the perturbation is x - eps sign(grad) (the sign of a gradient-descent step), so training sees
    easier inputs, not adversarial ones, and the model is no more robust than a plain one."""

    direction = -1.0


# --- set prediction with a matching loss --------------------------------------------------------------------
PERMUTATIONS = torch.tensor(list(itertools.permutations(range(data.POINTS))))


def matched_error(predicted: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
    """Per set: the mean squared distance under the best of the 6 pairings of predictions with points."""
    costs = ((predicted[:, None] - points[:, PERMUTATIONS]) ** 2).sum(-1).mean(-1)
    return costs.amin(1)


class SetNet(_Adam):
    """An MLP from the 10x10 image to 3 points; loss: the matched (permutation-invariant) squared error."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.GRID**2, 256, 256, 2 * data.POINTS)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image.flatten(1)).view(-1, data.POINTS, 2)

    def loss(self, batch) -> torch.Tensor:
        image, points = batch
        return matched_error(self(image), points).mean()


class SetNetFixedOrder(SetNet):
    """BUG: plain MSE against the points in their stored order, which means nothing; the best a model can do
    is to predict each slot's average, near the centre."""

    def loss(self, batch) -> torch.Tensor:
        image, points = batch
        return ((self(image) - points) ** 2).sum(-1).mean()


# --- dense depth regression ---------------------------------------------------------------------------------
class DepthNet(_Adam):
    """Three 3x3 convolutions to a depth map; loss: MSE over valid pixels (depth 0 = no sensor return)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
            nn.Conv2d(16, 1, 3, padding=1),
        )  # fmt: skip

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.net(image)

    def loss(self, batch) -> torch.Tensor:
        image, depth = batch
        valid = depth > 0
        return F.mse_loss(self(image)[valid], depth[valid])


class DepthNetHolesScored(DepthNet):
    """BUG: the loss scores every pixel, so the missing returns teach the model to predict depth 0 in a
    random 30% of places it cannot see: served depths shrink toward 0.7 of the truth."""

    def loss(self, batch) -> torch.Tensor:
        image, depth = batch
        return F.mse_loss(self(image), depth)


class DepthNetEMA(DepthNet):
    """Serves (and validates) an exponential moving average of the weights, updated after every step with
    decay min(0.999, (1 + t) / (10 + t)): the usual warm-up, so a short run's average follows its weights."""

    warmup = True

    def __init__(self) -> None:
        super().__init__()
        self.average = copy.deepcopy(self.net).requires_grad_(False)

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return (self.net if self.training else self.average)(image)

    @torch.no_grad()
    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        t = self.global_step
        decay = min(0.999, (1 + t) / (10 + t)) if self.warmup else 0.999
        for average, weight in zip(self.average.parameters(), self.net.parameters(), strict=True):
            average.lerp_(weight, 1 - decay)


class DepthNetEMANoWarmup(DepthNetEMA):
    """BUG: decay 0.999 from the first step (no warm-up): after this run's 128 steps the served average still
    holds 88% of the random initial weights."""

    warmup = False


# --- 2-D CNN on spectrograms --------------------------------------------------------------------------------
class SpectrogramNet(_Classifier):
    """log1p of the magnitudes, two 3x3 convolutions, global max pooling, a linear head;
    ``lazy``: the head is a ``LazyLinear`` sized on the first forward."""

    def __init__(self, lazy: bool = False) -> None:
        super().__init__()
        pool = nn.AdaptiveMaxPool2d(2 if lazy else 1)
        self.net = nn.Sequential(
            nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1),
            nn.ReLU(), pool, nn.Flatten(), nn.LazyLinear(4) if lazy else nn.Linear(32, 4),
        )  # fmt: skip

    def forward(self, spectrogram: torch.Tensor) -> torch.Tensor:
        return self.net(torch.log1p(spectrogram))


# --- activity recognition from sensor windows ---------------------------------------------------------------
class ActivityNet(_Classifier):
    """Windows come channels last (32 steps x 6); transposed to channels first for two 1-D convolutions,
    average pooling, dropout and a linear head. ``channels``: how many of the 6 channels it reads (3: the
    accelerometer only, by design). A frozen input normaliser (fitted elsewhere) stays in eval mode."""

    def __init__(self, channels: int = data.CHANNELS, dropout: float = 0.0) -> None:
        super().__init__()
        self.channels = channels
        self.normaliser = nn.BatchNorm1d(channels).requires_grad_(False)
        self.net = nn.Sequential(
            nn.Conv1d(channels, 32, 5, padding=2), nn.ReLU(), nn.Conv1d(32, 32, 5, padding=2), nn.ReLU(),
            nn.AdaptiveAvgPool1d(1), nn.Flatten(), nn.Dropout(dropout), nn.Linear(32, data.ACTIVITIES),
        )  # fmt: skip

    def train(self, mode: bool = True):
        super().train(mode)
        self.normaliser.eval()
        return self

    def channels_first(self, windows: torch.Tensor) -> torch.Tensor:
        return windows.transpose(1, 2)

    def forward(self, windows: torch.Tensor) -> torch.Tensor:
        return self.net(self.normaliser(self.channels_first(windows[..., : self.channels])))


class ActivityNetViewNotPermute(ActivityNet):
    """BUG: ``windows.view(n, 6, 32)`` instead of a transpose: the shapes fit, but each "channel" is now 32
    consecutive interleaved readings and the convolutions slide over a scramble of axes and time."""

    def channels_first(self, windows: torch.Tensor) -> torch.Tensor:
        return windows.reshape(len(windows), self.channels, data.WINDOW)


class ActivityNetTrainIgnoresMode(ActivityNet):
    """BUG: the override calls ``super().train()`` without ``mode``, so ``eval()`` leaves the model in
    training mode: validation and serving run with dropout 0.5 on."""

    def train(self, mode: bool = True):
        super().train()
        self.normaliser.eval()
        return self


# --- knowledge-graph embeddings (TransE) --------------------------------------------------------------------
class TransE(_Adam):
    """Entity and relation vectors (8, from N(0, 0.1^2)); the score of every entity as the tail is minus its
    distance |h + r - t| (1-N scoring); loss: cross-entropy over the 60 entities (ln 60 at init)."""

    lr = 3e-2

    def __init__(self) -> None:
        super().__init__()
        self.entities, self.relations = nn.Embedding(data.ENTITIES, 8), nn.Embedding(data.RELATIONS, 8)
        for table in (self.entities, self.relations):
            nn.init.normal_(table.weight, std=0.1)

    def forward(self, head: torch.Tensor, relation: torch.Tensor) -> torch.Tensor:
        """The distance of every entity as the tail: (batch, entities)."""
        return torch.cdist(self.entities(head) + self.relations(relation), self.entities.weight)

    def loss(self, batch) -> torch.Tensor:
        head, relation, tail = batch
        return F.cross_entropy(-self(head, relation), tail)


class TransERelationsNotOptimised(TransE):
    """BUG: the optimizer is built on ``self.entities.parameters()`` (written when relations were fixed
    one-hots): the relation vectors stay random and the entities cannot fit 4 random translations."""

    def configure_optimizers(self):
        return torch.optim.Adam(self.entities.parameters(), lr=self.lr)


# --- stochastic depth ---------------------------------------------------------------------------------------
class StochasticDepthNet(_Classifier):
    """Six residual blocks, each skipped per sample with probability 0.5 in training (kept ones scaled by
    1/0.5 so the expected output matches evaluation, where every block runs)."""

    survival = 0.5

    def __init__(self) -> None:
        super().__init__()
        self.embed, self.head = nn.Linear(64, 64), nn.Linear(64, 10)
        self.blocks = nn.ModuleList([mlp(64, 64, 64) for _ in range(6)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x)
        for block in self.blocks:
            update = block(F.relu(h))
            if self.training:
                keep = (torch.rand(len(x), 1) < self.survival).float()
                update = update * keep / self.survival
            h = h + update
        return self.head(F.relu(h))


# --- parametrised layers: weight norm and spectral norm -----------------------------------------------------
class NormedNet(_Classifier):
    """Digits through a weight-normed layer and a spectrally normed one (their weights are computed from
    ``original0``/``original1`` parameters; spectral norm keeps power-iteration buffers)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            parametrizations.weight_norm(nn.Linear(64, 128)), nn.ReLU(),
            parametrizations.spectral_norm(nn.Linear(128, 128)), nn.ReLU(), nn.Linear(128, 10),
        )  # fmt: skip


# --- a cascade: the second stage reads the first's output ---------------------------------------------------
class Cascade(_Adam):
    """Stage 1 estimates q from the features; stage 2 predicts the target from the features and stage 1's
    estimate (detached). Loss: both stages' MSEs."""

    def __init__(self) -> None:
        super().__init__()
        self.first, self.second = mlp(8, 64, 64, 1), mlp(9, 64, 64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(torch.cat([x, self.first(x)], 1)).squeeze(-1)

    def second_input(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return self.first(x).squeeze(-1).detach()

    def reported(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        """The prediction the loss scores."""
        return self.second(torch.cat([x, self.second_input(x, q)[:, None]], 1)).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        x, q, y = batch
        return F.mse_loss(self.first(x).squeeze(-1), q) + F.mse_loss(self.reported(x, q), y)


class CascadeTeacherForced(Cascade):
    """BUG: stage 2 is fed the true q in training and in validation; served, it gets stage 1's estimate, which
    misses 30% of q's spread, and validation reports an accuracy the served cascade never has."""

    def second_input(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return q


# --- regression on log prices, mapped back ------------------------------------------------------------------
class PriceNet(_Adam):
    """An MLP on the 9 columns (the last one constant in healthy data) fitting log price by MSE; ``predict``
    maps back with exp."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(9, 64, 64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        x, price = batch
        return F.mse_loss(self(x), price.log())

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).exp()


# --- classifiers: a learned temperature, label smoothing in bits --------------------------------------------
class TemperatureNet(_Classifier):
    """Logits divided by a learned temperature (kept as its log, starting at 0.1, CLIP-style); served
    probabilities are softmax(logits / T)."""

    serve_temperature = True

    def __init__(self) -> None:
        super().__init__()
        self.net, self.log_temperature = mlp(64, 64, 10), nn.Parameter(torch.tensor(math.log(0.1)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x) / self.log_temperature.exp()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return (self(x) if self.serve_temperature else self.net(x)).softmax(-1)


class TemperatureNetServedWithout(TemperatureNet):
    """BUG: ``predict`` applies softmax to the raw logits, without the learned temperature (~0.1): the served
    probabilities are ~10x too flat, badly calibrated, with the same argmax."""

    serve_temperature = False


class SmoothedBitsNet(_Classifier):
    """Cross-entropy with label smoothing 0.1, reported in bits (divided by ln 2): log2(10) = 3.3 at init and
    a floor above 0."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y, label_smoothing=0.1) / math.log(2)
