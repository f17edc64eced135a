"""Sealed gallery L's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass, or a flag, that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _l_data as data
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


# --- click-through rate: a factorisation machine ------------------------------------------------------------
class ClickFM(_Adam):
    """A factorisation machine over the 4 categorical fields: one table of every field's values (each field
    offset to its own rows) gives a weight and an 8-d factor per value; the logit is a bias, the weights and
    the pairwise factor products (the square-of-sums trick). BCE on the training log, where 3 in 4
    non-clicks were dropped; served: the click probability, with the logit shifted by log(.25) to undo the
    downsampling."""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offsets", data.field_offsets())
        self.weight = nn.Embedding(sum(data.FIELDS), 1)
        self.factor = nn.Embedding(sum(data.FIELDS), 8)
        nn.init.normal_(self.weight.weight, std=0.01)
        nn.init.normal_(self.factor.weight, std=0.1)
        self.bias = nn.Parameter(torch.zeros(()))

    def rows(self, codes: torch.Tensor) -> torch.Tensor:
        return codes + self.offsets

    def forward(self, codes: torch.Tensor) -> torch.Tensor:
        rows = self.rows(codes)
        v = self.factor(rows)
        pairs = 0.5 * (v.sum(1) ** 2 - (v**2).sum(1)).sum(-1)
        return self.bias + self.weight(rows).sum((1, 2)) + pairs

    def loss(self, batch) -> torch.Tensor:
        codes, click = batch
        return F.binary_cross_entropy_with_logits(self(codes), click)

    def served_logit(self, codes: torch.Tensor) -> torch.Tensor:
        return self(codes) + math.log(data.KEEP_NEGATIVES)

    def predict(self, codes: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.served_logit(codes))


class ClickFMSharedRows(ClickFM):
    """BUG: the field codes index the table as they come, without the field offsets: site 3, ad 3, device 3
    and hour bucket 3 share one weight and one factor, and the model cannot tell the fields' values apart."""

    def rows(self, codes: torch.Tensor) -> torch.Tensor:
        return codes


class ClickFMUncorrected(ClickFM):
    """BUG: trained on the downsampled log, served without the log(.25) correction: every served click
    probability is about four times too high for rare clicks (the bids built on it overpay)."""

    def served_logit(self, codes: torch.Tensor) -> torch.Tensor:
        return self(codes)


# --- uplift: a two-headed outcome model (TARNet) ------------------------------------------------------------
class UpliftNet(_Adam):
    """A shared MLP body and two outcome heads (column 0: control, column 1: treated); each row's loss is the
    squared error of the head of the treatment it got (its factual outcome). Served: the uplift, the treated
    head minus the control head."""

    def __init__(self) -> None:
        super().__init__()
        self.body = mlp(data.COVARIATES, 64, 64)
        self.heads = nn.Sequential(nn.ReLU(), nn.Linear(64, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.heads(self.body(x))

    def factual(self, x: torch.Tensor, treated: torch.Tensor) -> torch.Tensor:
        return self(x).gather(1, treated[:, None]).squeeze(1)

    def loss(self, batch) -> torch.Tensor:
        x, treated, _, y = batch
        return ((self.factual(x, treated) - y) ** 2).mean()

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        control, treated = self(x).unbind(-1)
        return treated - control


class UpliftNetBroadcast(UpliftNet):
    """BUG: the factual prediction is kept as a column, (n, 1), and the hand-written squared error against y,
    (n,), broadcasts to (n, n): every head is fitted to every row's outcome, both heads learn the batch mean,
    and the served uplift is about 0 everywhere."""

    def factual(self, x: torch.Tensor, treated: torch.Tensor) -> torch.Tensor:
        return self(x).gather(1, treated[:, None])


class UpliftNetHeadsReversed(UpliftNet):
    """BUG: ``predict`` unpacks the heads as (treated, control), the order of the team's report, while
    training fitted column 0 to the control rows: every served uplift has the wrong sign."""

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        treated, control = self(x).unbind(-1)
        return treated - control


class UpliftNetWeighted(UpliftNet):
    """The same model with inverse-propensity weights from the logged policy (1/e for treated rows, 1/(1-e)
    for control rows, normalised to mean 1 in the batch): the heads are fitted as if treatment were
    randomised."""

    def loss(self, batch) -> torch.Tensor:
        x, treated, propensity, y = batch
        weight = torch.where(treated == 1, 1 / propensity, 1 / (1 - propensity))
        return (weight / weight.mean() * (self.factual(x, treated) - y) ** 2).mean()


# --- trajectory forecasting ---------------------------------------------------------------------------------
class TrackForecaster(_Adam):
    """An MLP from the 8 observed positions (relative to the last one) to the 12 future per-step
    displacements; MSE on the displacements. Served: future positions in the world, the last observed
    position plus the running sum of the predicted displacements."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(2 * data.OBSERVED, 128, 128, 2 * data.FUTURE)

    def forward(self, history: torch.Tensor) -> torch.Tensor:
        return self.net(history.flatten(1)).view(len(history), data.FUTURE, 2)

    def loss(self, batch) -> torch.Tensor:
        history, steps = batch
        return F.mse_loss(self(history), steps)

    def to_world(self, last: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        return last + steps.cumsum(1)

    def positions(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """A batch's predicted and true future positions, relative to the last observed one."""
        history, steps = batch
        return self(history).cumsum(1), steps.cumsum(1)

    @torch.no_grad()
    def predict(self, history: torch.Tensor) -> torch.Tensor:
        last = history[:, -1:]
        return self.to_world(last, self(history - last))


class TrackForecasterWindowCentred(TrackForecaster):
    """BUG (with its data, ``window_centred_tracks``): the dataset centred every 20-step window on its mean
    position, future included, and the model maps the centred history to the centred future positions. At
    serving only the history exists, so ``predict`` centres it on the history's own mean: the hint of where
    the person goes, which training and validation read off the centre, is gone."""

    def loss(self, batch) -> torch.Tensor:
        history, future = batch
        return F.mse_loss(self(history), future)

    def positions(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        history, future = batch
        return self(history), future

    @torch.no_grad()
    def predict(self, history: torch.Tensor) -> torch.Tensor:
        centre = history.mean(1, keepdim=True)
        return centre + self(history - centre)


class TrackForecasterNoCumsum(TrackForecaster):
    """BUG: served positions are the last observed position plus each step's displacement on its own (the
    running sum forgotten): every served track stays within a step of where the person was last seen."""

    def to_world(self, last: torch.Tensor, steps: torch.Tensor) -> torch.Tensor:
        return last + steps


# --- positive-unlabelled learning (non-negative PU risk) ----------------------------------------------------
def sigmoid_loss(score: torch.Tensor, sign: float) -> torch.Tensor:
    return torch.sigmoid(-sign * score)


class PUClassifier(_Adam):
    """An MLP scorer trained by the non-negative PU risk (Kiryo et al., 2017) with the sigmoid loss and the
    class prior ``prior``: pi * R_p(+) + max(0, R_u(-) - pi * R_p(-)). Batches are (rows, labelled flag);
    served: positive when the score is above 0."""

    def __init__(self, prior: float = data.PRIOR) -> None:
        super().__init__()
        self.prior = prior
        self.net = mlp(data.PU_FEATURES, 64, 64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def risks(self, batch) -> tuple[torch.Tensor, torch.Tensor]:
        """(the positive risk, the estimated negative risk) of a batch."""
        x, labelled = batch
        score = self(x)
        p, u = labelled, 1 - labelled
        positive = (p * sigmoid_loss(score, 1)).sum() / p.sum().clamp_min(1)
        positive_as_negative = (p * sigmoid_loss(score, -1)).sum() / p.sum().clamp_min(1)
        unlabelled_as_negative = (u * sigmoid_loss(score, -1)).sum() / u.sum().clamp_min(1)
        return self.prior * positive, unlabelled_as_negative - self.prior * positive_as_negative

    def loss(self, batch) -> torch.Tensor:
        positive, negative = self.risks(batch)
        return positive + negative.clamp_min(0)

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return (self(x) > 0).long()


class PUClassifierLabelledPrior(PUClassifier):
    """BUG: the class prior is taken as the labelled share of the training rows (about .12), the one number at
    hand, not the share of positives (.4): the risk counts most hidden positives as negatives, and the
    classifier calls far too few rows positive."""

    def __init__(self) -> None:
        _, labelled = data.pu_training(4000, 1)
        super().__init__(prior=labelled.mean().item())


class PUClassifierAscent(PUClassifier):
    """nnPU as published, with manual optimisation: when a batch's estimated negative risk falls below -beta
    (the flexible model is overfitting it), the step is gradient ascent on that risk alone, scaled by gamma;
    otherwise descent on the whole risk. The learning rate warms up linearly from 1% over the first 100
    steps; in manual optimisation the loop steps the scheduler itself."""

    beta, gamma = 0.0, 1.0

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        warm_up = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=100)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": warm_up, "interval": "step"}}

    def step_schedule(self) -> None:
        self.lr_schedulers().step()

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        positive, negative = self.risks(batch)
        optimizer.zero_grad()
        if negative < -self.beta:
            self.manual_backward(-self.gamma * negative)
        else:
            self.manual_backward(positive + negative)
        optimizer.step()
        self.step_schedule()
        loss = positive + negative.clamp_min(0)
        self.log("train_loss", loss)
        return loss.detach()


class PUClassifierAscentUnstepped(PUClassifierAscent):
    """BUG: the warm-up is declared with ``"interval": "step"`` and left to Lightning, which does not step
    schedulers under manual optimisation: the learning rate stays at 1% of its value for the whole run."""

    def step_schedule(self) -> None:
        pass


# --- denoising diffusion (DDPM) on 2-D points ---------------------------------------------------------------
class Denoiser(_Adam):
    """A DDPM noise predictor: an MLP over the noisy point and a sinusoidal embedding of the step. Each
    training row gets a fresh step and fresh noise, x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) eps, and the
    loss is the MSE to eps (about 1 at init, and not 0 at best). Served: ``predict_noise``, what the sampler
    calls at every step."""

    def __init__(self) -> None:
        super().__init__()
        alphas, alpha_bar = data.noise_schedule()
        self.register_buffer("alphas", alphas)
        self.register_buffer("alpha_bar", alpha_bar)
        self.net = mlp(2 + 16, 128, 128, 128, 2)

    def embed(self, t: torch.Tensor) -> torch.Tensor:
        freqs = torch.exp(torch.linspace(0, math.log(100), 8))
        angle = t[:, None].float() / data.STEPS_T * freqs
        return torch.cat([angle.sin(), angle.cos()], -1)

    def forward(self, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([x_t, self.embed(t)], -1))

    def signal_level(self, t: torch.Tensor) -> torch.Tensor:
        """How much of x_0 is left at step t (abar_t)."""
        return self.alpha_bar[t][:, None]

    def target(self, x0: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return noise

    def loss(self, batch) -> torch.Tensor:
        (x0,) = batch
        t = torch.randint(data.STEPS_T, (len(x0),))
        noise = torch.randn_like(x0)
        level = self.signal_level(t)
        x_t = level.sqrt() * x0 + (1 - level).sqrt() * noise
        return F.mse_loss(self(x_t, t), self.target(x0, noise))

    @torch.no_grad()
    def predict_noise(self, x_t: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        return self(x_t, t)


class DenoiserPerStepAlpha(Denoiser):
    """BUG: the forward process mixes with the per-step alpha_t, not its cumulative product abar_t: training
    never sees more than a little noise, and the sampler's early, noisy steps get noise estimates from a model
    that has never seen such inputs."""

    def signal_level(self, t: torch.Tensor) -> torch.Tensor:
        return self.alphas[t][:, None]


class DenoiserCleanTarget(Denoiser):
    """BUG: the loss regresses the clean point x_0 (the target of the recipe the training code came from),
    while the sampler reads the output as the noise eps: what is served is the model's guess of x_0, handed
    over as noise."""

    def target(self, x0: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
        return x0


# --- DNA: does a sequence bind the factor? ------------------------------------------------------------------
class MotifCNN(_Adam):
    """A 1-D convolution (24 filters of width 9) over the one-hot bases, max pooling along the sequence and a
    linear head; cross-entropy over bind / not bind. Served: the predicted class."""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(4, 24, 9)
        self.head = nn.Sequential(nn.ReLU(), nn.Linear(24, 2))

    def forward(self, one_hot: torch.Tensor) -> torch.Tensor:
        return self.head(F.relu(self.conv(one_hot)).amax(-1))

    def loss(self, batch) -> torch.Tensor:
        one_hot, binds = batch
        return F.cross_entropy(self(one_hot), binds)

    @torch.no_grad()
    def predict(self, one_hot: torch.Tensor) -> torch.Tensor:
        return self(one_hot).argmax(-1)


# --- learned dynamics: a one-step pendulum model, served by rollout -----------------------------------------
class PendulumStep(_Adam):
    """An MLP from the state (scaled by the states' spread) to the change over one step (scaled by the
    changes' spread); MSE in those units. Served: ``rollout``, the model's own predictions fed back for
    ``steps`` steps from a start state."""

    def __init__(self) -> None:
        super().__init__()
        state_scale, change_scale = data.state_scales()
        self.register_buffer("state_scale", state_scale)
        self.register_buffer("change_scale", change_scale)
        self.net = mlp(2, 128, 128, 2)

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        return self.net(state / self.state_scale)

    def loss(self, batch) -> torch.Tensor:
        state, following = batch
        return F.mse_loss(self(state), (following - state) / self.change_scale)

    def change(self, state: torch.Tensor) -> torch.Tensor:
        return self(state) * self.change_scale

    @torch.no_grad()
    def rollout(self, start: torch.Tensor, steps: int) -> torch.Tensor:
        states = [start]
        for _ in range(steps - 1):
            states.append(states[-1] + self.change(states[-1]))
        return torch.stack(states, 1)


class PendulumStepWrongScale(PendulumStep):
    """BUG: the rollout turns the model's output back into a change with the states' spread, not the changes'
    (the two normalisers sit side by side): every served step is several times too long."""

    def change(self, state: torch.Tensor) -> torch.Tensor:
        return self(state) * self.state_scale


# --- graph-level classification of small padded graphs ------------------------------------------------------
class GraphClassifier(_Adam):
    """Node types embedded, two rounds of message passing (each node adds its bonded neighbours' sum), a mean
    over the real nodes (the padding masked out) and a small head; cross-entropy. Served: the class."""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(data.ATOM_TYPES, 32)
        self.rounds = nn.ModuleList([nn.Linear(32, 32), nn.Linear(32, 32)])
        self.head = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 2))

    def pool(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        weight = mask.float()[..., None]
        return (h * weight).sum(1) / weight.sum(1)

    def message(self, h: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return h + adj @ h

    def forward(self, nodes: torch.Tensor, adj: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = F.relu(self.embed(nodes))
        for layer in self.rounds:
            h = F.relu(layer(self.message(h, adj)))
        return self.head(self.pool(h, mask))

    def loss(self, batch) -> torch.Tensor:
        nodes, adj, mask, label = batch
        return F.cross_entropy(self(nodes, adj, mask), label)

    @torch.no_grad()
    def predict(self, nodes: torch.Tensor, adj: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self(nodes, adj, mask).argmax(-1)


class GraphClassifierNoSelfLoop(GraphClassifier):
    """BUG: each round aggregates the neighbours only, ``adj @ h``, without the node's own state (the self
    loop of A + I was dropped when the adjacency went dense): after the first round a node no longer knows
    its own type."""

    def message(self, h: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return adj @ h
