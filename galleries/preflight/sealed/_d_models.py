"""Sealed gallery D's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass, or a flag, that changes the one place the bug lives in). Every model is built from the
global RNG."""

from __future__ import annotations

from functools import cache

import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _d_data as data
from galleries.sealed import AdamModule as _Adam
from galleries.sealed import mlp


class _Regressor(_Adam):
    """``net(x)`` against a float target with the mean squared error; ``predict`` = ``forward``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)


# --- counting dots ------------------------------------------------------------------------------------------
class DotCounter(_Regressor):
    """Per-pixel conv features summed over the image (a count is a sum), then a linear head."""

    lr = 1e-2

    def __init__(self, frozen_encoder: bool = False) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 8, 1), nn.ReLU())
        self.head = nn.Linear(8, 1)
        self.encoder.requires_grad_(not frozen_encoder)

    def pool(self, features: torch.Tensor) -> torch.Tensor:
        return features.sum(dim=(-2, -1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.pool(self.encoder(x))).squeeze(-1)


class DotCounterMaxPool(DotCounter):
    """BUG: global max pooling (copied from a classifier): the brightest dot's features, whatever the number
    of dots, so the count cannot be read."""

    def pool(self, features: torch.Tensor) -> torch.Tensor:
        return features.amax(dim=(-2, -1))


class PoissonDotCounter(DotCounter):
    """The count as a Poisson rate: the head gives its log; Poisson negative log-likelihood."""

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).exp()

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.poisson_nll_loss(self(x), y, log_input=True)


class DotCounterMLP(_Regressor):
    """A wide MLP on the 100 pixels (it memorises a small training set)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Flatten(), mlp(data.SIDE * data.SIDE, 256, 1))


# --- sequence-to-one regression -----------------------------------------------------------------------------
class SequenceRegressor(_Regressor):
    """A GRU over the 20 steps; its output at the last step goes through a (dropout) head."""

    def __init__(self, dropout: float = 0.0) -> None:
        super().__init__()
        self.gru = nn.GRU(2, 32, batch_first=True)
        self.head = mlp(32, 32, 1, dropout=dropout)

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def summary(self, outputs: torch.Tensor) -> torch.Tensor:
        return outputs[:, -1]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.gru(self.prepare(x))
        return self.head(self.summary(outputs)).squeeze(-1)


class OneCycleSequenceRegressor(SequenceRegressor):
    """One-cycle learning rate (up to 1e-2 and down over the run), stepped after every batch."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        steps = int(self.trainer.estimated_stepping_batches)
        cycle = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": cycle, "interval": "step"}}


class OneCycleSequenceRegressorPerEpoch(OneCycleSequenceRegressor):
    """BUG: the schedulers are returned as ``[optimizer], [cycle]``, so Lightning steps the per-batch cycle
    once per epoch: the rate stays near its starting 4e-4 (max / 25) for the whole run."""

    def configure_optimizers(self):
        config = super().configure_optimizers()
        return [config["optimizer"]], [config["lr_scheduler"]["scheduler"]]


class SequenceRegressorFirstStep(SequenceRegressor):
    """BUG: ``outputs[:, 0]`` (a ``[0]`` from a seq-first habit): the GRU's output after the first step
    only, so the prediction reads one step of the twenty."""

    def summary(self, outputs: torch.Tensor) -> torch.Tensor:
        return outputs[:, 0]


class SequenceRegressorPerSequenceScaled(SequenceRegressor):
    """BUG: each sequence is standardised over its own steps, channel by channel, which erases the level the
    target is made of (and the ramp's size)."""

    def prepare(self, x: torch.Tensor) -> torch.Tensor:
        return (x - x.mean(1, keepdim=True)) / (x.std(1, keepdim=True) + 1e-5)


# --- ordinal regression -------------------------------------------------------------------------------------
class OrdinalNet(_Adam):
    """Cumulative logits: output k is P(level > k); the loss is binary cross-entropy over the 4 thresholds
    and the predicted level is the number of thresholds passed."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(6, 32, data.LEVELS - 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return (self(x) > 0).sum(-1)

    def cumulative(self, y: torch.Tensor) -> torch.Tensor:
        return (y[:, None] > torch.arange(data.LEVELS - 1, device=y.device)).float()

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.binary_cross_entropy_with_logits(self(x), self.cumulative(y))


class OrdinalNetEncodedFromZero(OrdinalNet):
    """BUG: the cumulative targets are ``y >= k`` for k = 0..3 (meant for k = 1..4): the first column is
    always 1, so every decoded level is one too high (and levels 3 and 4 merge)."""

    def cumulative(self, y: torch.Tensor) -> torch.Tensor:
        return (y[:, None] >= torch.arange(data.LEVELS - 1, device=y.device)).float()


# --- censored survival times --------------------------------------------------------------------------------
class SurvivalNet(_Adam):
    """Predicts the log event time; a censored Gaussian likelihood (sigma 0.5): seen events by their density,
    censored rows by the probability that the event comes later."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(4, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)

    predict = forward

    def loss(self, batch) -> torch.Tensor:
        x, log_time, event = batch
        z = (log_time - self(x)) / 0.5
        return torch.where(event > 0, 0.5 * z**2, -torch.special.log_ndtr(-z)).mean()


class SurvivalNetCensoredAsEvents(SurvivalNet):
    """BUG: plain MSE on the observed time: a censored row's time (a lower bound) is taken as the event
    time, so predicted times are biased short."""

    def loss(self, batch) -> torch.Tensor:
        x, log_time, _ = batch
        return F.mse_loss(self(x), log_time)


# --- multi-output regression with per-output scaling --------------------------------------------------------
class ThreeScaleRegressor(_Adam):
    """Targets standardised per output with the training statistics; ``predict`` maps back to units."""

    def __init__(self, standardise: bool = True) -> None:
        super().__init__()
        self.net = mlp(5, 64, 64, 3)
        mean, std = data.target_stats() if standardise else (torch.zeros(3), torch.ones(3))
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x) * self.std + self.mean

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self(x), (y - self.mean) / self.std)


class ThreeScaleRegressorReversedUnscale(ThreeScaleRegressor):
    """BUG: ``predict`` undoes the scaling with the statistics in reverse column order (the scaler was saved
    from a frame whose columns were listed the other way round): the loss in scaled units looks right."""

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x) * self.std.flip(0) + self.mean.flip(0)


# --- mixture of experts -------------------------------------------------------------------------------------
class MixtureOfExperts(_Adam):
    """Four linear experts mixed by a softmax gate over the experts (started at zero: even mixing)."""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.gate = nn.Linear(2, 4)
        nn.init.zeros_(self.gate.weight)
        nn.init.zeros_(self.gate.bias)
        self.experts = self.make_experts()

    def make_experts(self) -> nn.ModuleList:
        return nn.ModuleList(nn.Linear(2, 1) for _ in range(4))

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate(x).softmax(dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs = torch.cat([expert(x) for expert in self.experts], dim=-1)
        return (self.weights(x) * outputs).sum(-1)

    predict = forward

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)


class MixtureOfExpertsGateOverBatch(MixtureOfExperts):
    """BUG: ``softmax(dim=0)``: the gate normalises over the batch instead of the experts, so a sample's
    weights depend on its batch-mates and on the batch size (32 in training, 500 when served)."""

    def weights(self, x: torch.Tensor) -> torch.Tensor:
        return self.gate(x).softmax(dim=0)


class MixtureOfExpertsOneExpert(MixtureOfExperts):
    """BUG: ``nn.ModuleList([nn.Linear(2, 1)] * 4)``: four references to one expert, so the mixture is a
    single linear model whatever the gate does."""

    def make_experts(self) -> nn.ModuleList:
        return nn.ModuleList([nn.Linear(2, 1)] * 4)


class TwoOptimizerMixture(MixtureOfExperts):
    """Manual optimisation with two optimizers: Adam for the experts, SGD with momentum for the gate."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def configure_optimizers(self):
        return (
            torch.optim.Adam(self.experts.parameters(), lr=self.lr),
            torch.optim.SGD(self.gate.parameters(), lr=0.1, momentum=0.9),
        )

    def step(self, experts, gate) -> None:
        experts.step()
        gate.step()

    def training_step(self, batch, batch_idx):
        experts, gate = self.optimizers()
        experts.zero_grad()
        gate.zero_grad()
        loss = self.loss(batch)
        self.manual_backward(loss)
        self.step(experts, gate)
        self.log("train_loss", loss)
        return loss


class TwoOptimizerMixtureGateNeverStepped(TwoOptimizerMixture):
    """BUG: only the experts' optimizer is stepped (the gate's ``step()`` was lost in a refactor); the gate
    keeps its initial zeros and mixes the experts evenly everywhere: one linear model."""

    def step(self, experts, gate) -> None:
        experts.step()


# --- variational autoencoder on digits ----------------------------------------------------------------------
class DigitVAE(_Adam):
    """64-32-(4+4) encoder, 4-32-64 decoder with a sigmoid; the ELBO per sample (Bernoulli pixels summed,
    KL summed over the latent), averaged over the batch."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = mlp(64, 32, 8)
        self.decoder = nn.Sequential(mlp(4, 32, 64), nn.Sigmoid())

    def encode(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mu, log_var = self.encoder(x).chunk(2, dim=-1)
        return mu, log_var

    def reconstruct(self, x: torch.Tensor) -> torch.Tensor:
        """The decoded posterior mean (how the model is used)."""
        return self.decoder(self.encode(x)[0])

    def terms(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        mu, log_var = self.encode(x)
        z = mu + (0.5 * log_var).exp() * torch.randn_like(mu)
        kl = 0.5 * (mu**2 + log_var.exp() - 1 - log_var)
        return self.decoder(z), kl, mu

    def loss(self, batch) -> torch.Tensor:
        x = batch[0]
        recon, kl, _ = self.terms(x)
        return F.binary_cross_entropy(recon, x, reduction="none").sum(1).mean() + kl.sum(1).mean()


class DigitVAEMeanRecon(DigitVAE):
    """BUG: the reconstruction term is averaged over pixels while the KL is summed over the whole batch: the
    KL weighs ~2,000x too much and the posterior collapses to the prior (every digit decodes to the mean)."""

    def loss(self, batch) -> torch.Tensor:
        x = batch[0]
        recon, kl, _ = self.terms(x)
        return F.binary_cross_entropy(recon, x) + kl.sum()


class DigitVAEDecoderNotOptimised(DigitVAE):
    """BUG: the optimizer is built from ``self.encoder.parameters()`` (left from an encoder-only warm-up),
    so the decoder keeps its random weights."""

    def configure_optimizers(self):
        return torch.optim.Adam(self.encoder.parameters(), lr=self.lr)


# --- forecasting with a lookback window ---------------------------------------------------------------------
class Forecaster(_Regressor):
    """An MLP from the scaled 24-step lookback to the scaled 4 next steps."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.LOOKBACK, 64, data.HORIZON)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


# --- knowledge distillation --------------------------------------------------------------------------------
@cache
def digit_teacher() -> dict[str, torch.Tensor]:
    """A 64-128-10 teacher trained on the training digits (its state dict)."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        teacher = mlp(64, 128, 10)
        x, y = data.digits("train")
        optimizer = torch.optim.Adam(teacher.parameters(), lr=1e-2)
        for _ in range(150):
            optimizer.zero_grad()
            F.cross_entropy(teacher(x), y).backward()
            optimizer.step()
    return {name: value.detach().clone() for name, value in teacher.state_dict().items()}


class DistilledStudent(_Adam):
    """A 64-32-10 student taught by a frozen pretrained teacher: T^2-scaled KL at T = 3 plus cross-entropy on
    the labels. The student alone is served."""

    def __init__(self) -> None:
        super().__init__()
        self.teacher, self.student = mlp(64, 128, 10), mlp(64, 32, 10)
        self.teacher.load_state_dict(digit_teacher())
        self.frozen().requires_grad_(False)

    def frozen(self) -> nn.Module:
        return self.teacher

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.student(x)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        student, teacher = self.student(x), self.teacher(x)
        soft, targets = F.log_softmax(student / 3, -1), F.log_softmax(teacher / 3, -1)
        kl = F.kl_div(soft, targets, reduction="batchmean", log_target=True)
        return 9 * kl + F.cross_entropy(student, y)


class DistilledStudentFrozen(DistilledStudent):
    """BUG: ``requires_grad_(False)`` lands on the student (a name mix-up): the teacher is what trains, moving
    towards the random student, while the served student never changes."""

    def frozen(self) -> nn.Module:
        return self.student


# --- text classification with a bag of embeddings -----------------------------------------------------------
class BagOfWords(_Adam):
    """Summed word embeddings (the padding id's embedding is zero and untrained), then an MLP."""

    def __init__(self, pad: int = data.WORDS) -> None:
        super().__init__()
        self.embed = nn.Embedding(max(pad + 1, data.WORDS), 16, padding_idx=pad)
        self.head = mlp(16, 32, 3)

    def forward(self, docs: torch.Tensor) -> torch.Tensor:
        return self.head(self.embed(docs).sum(1))

    def loss(self, batch) -> torch.Tensor:
        docs, labels = batch
        return F.cross_entropy(self(docs), labels)


# --- digits: semi-supervised and hierarchical labels --------------------------------------------------------
class PseudoLabelNet(_Adam):
    """Cross-entropy on the labelled digits (label -1 = unknown, ignored) plus, for the unknown ones, on the
    model's own confident predictions (probability > 0.9, detached)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        confidence, guess = logits.detach().softmax(-1).max(-1)
        pseudo = torch.where((y < 0) & (confidence > 0.9), guess, y)
        return F.cross_entropy(logits, pseudo, ignore_index=-1)


class HierarchicalNet(_Adam):
    """A shared trunk with a fine head (the digit) and a coarse head (digit >= 5); the sum of both
    cross-entropies."""

    def __init__(self) -> None:
        super().__init__()
        self.trunk = mlp(64, 64, 64)
        self.fine, self.coarse = nn.Linear(64, 10), nn.Linear(64, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = F.relu(self.trunk(x))
        return self.fine(h), self.coarse(h)

    def coarse_logits(self, fine: torch.Tensor, coarse: torch.Tensor) -> torch.Tensor:
        return coarse

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        fine, coarse = self(x)
        return F.cross_entropy(fine, y) + F.cross_entropy(self.coarse_logits(fine, coarse), (y >= 5).long())


class HierarchicalNetCoarseFromFine(HierarchicalNet):
    """BUG: the coarse loss is computed on ``fine[:, :2]`` (a copy-paste of the fine line): the coarse head
    never gets a gradient and stays random, and two fine logits are pulled towards the coarse labels."""

    def coarse_logits(self, fine: torch.Tensor, coarse: torch.Tensor) -> torch.Tensor:
        return fine[:, :2]


class SiameseNet(_Adam):
    """A shared 64-64-16 embedding; the contrastive loss (same pairs pulled together, different pairs pushed
    beyond a margin of 1); a pair is called the same when its distance is below 0.5."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = mlp(64, 64, 16)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (self.embed(a) - self.embed(b)).norm(dim=-1)

    def loss(self, batch) -> torch.Tensor:
        a, b, same = batch
        distance = self(a, b)
        return (same * distance**2 + (1 - same) * F.relu(1 - distance) ** 2).mean()
