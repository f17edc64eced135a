"""Sealed gallery I's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass, or a flag, that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

from functools import cache

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn
from torch.distributions import Categorical

from galleries.preflight.sealed import _i_data as data
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


# --- a contextual bandit trained by REINFORCE ---------------------------------------------------------------
class DigitBandit(_Adam):
    """A softmax policy over 10 arms (an MLP on a digit's pixels) learning from bandit feedback: it samples
    an arm per context and is paid 1 if the arm is the digit's label, 0 otherwise (the label is only the
    simulator's payout, never a target). Loss: REINFORCE, -mean(reward * log pi(arm | x)). Served: the most
    probable arm."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def act(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """An arm per context, sampled from the policy, and its log-probability."""
        policy = Categorical(logits=logits)
        arm = policy.sample()
        return arm, policy.log_prob(arm)

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        arm, log_prob = self.act(self(x))
        reward = (arm == label).float()
        return -(reward * log_prob).mean()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class DigitBanditMultinomial(DigitBandit):
    """BUG: the arm is drawn with ``torch.multinomial(probs, 1)``, shape (B, 1), and scored with
    ``Categorical.log_prob`` of that column: it broadcasts against the batch to (B, B), log pi_j(arm_i), so
    every context is credited with every other context's arms and the policy learns no dependence on x."""

    def act(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        policy = Categorical(logits=logits)
        arm = torch.multinomial(policy.probs, 1)
        return arm.squeeze(1), policy.log_prob(arm)


class DigitBanditGreedy(DigitBandit):
    """BUG: the training step picks the arm with ``argmax`` (the serving rule) instead of sampling it, so the
    policy only ever hears about the arm it already prefers and never explores the others."""

    def act(self, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        arm = logits.argmax(-1)
        return arm, Categorical(logits=logits).log_prob(arm)


class DigitOffPolicy(DigitBandit):
    """The same policy learnt off-policy from logged feedback (pixels, arm, reward, logged propensity):
    inverse propensity scoring, -mean(reward / propensity * log pi(arm | x)); rows weigh up to 68."""

    def weight(self, reward: torch.Tensor, propensity: torch.Tensor) -> torch.Tensor:
        return reward / propensity

    def loss(self, batch) -> torch.Tensor:
        x, arm, reward, propensity = batch
        log_prob = Categorical(logits=self(x)).log_prob(arm)
        return -(self.weight(reward, propensity) * log_prob).mean()


class DigitOffPolicyNoPropensity(DigitOffPolicy):
    """BUG: the logged rewards are used as they are, without dividing by the logging propensity: the policy
    learns from the rows the old policy chose to show, and inherits its taste for the low arms."""

    def weight(self, reward: torch.Tensor, propensity: torch.Tensor) -> torch.Tensor:
        return reward


class DigitActorCritic(DigitBandit):
    """REINFORCE with a learned baseline: a value head predicts the expected payout of the context; the policy
    term weights log pi by the advantage (reward - value, held constant) and the value head regresses the
    reward. Loss: -mean(advantage * log pi) + mean((value - reward)^2), which can go negative."""

    def __init__(self) -> None:
        super().__init__()
        self.value = mlp(64, 32, 1)

    def advantage(self, reward: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return reward - value.detach()

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        arm, log_prob = self.act(self(x))
        reward, value = (arm == label).float(), self.value(x).squeeze(-1)
        return -(self.advantage(reward, value) * log_prob).mean() + F.mse_loss(value, reward)


# --- image inpainting ---------------------------------------------------------------------------------------
class InpaintNet(_Adam):
    """Three 3x3 convolutions from (masked image, mask) to an image; loss: MSE on the hole's pixels only (the
    visible ones are given); served: the input with the hole filled by the output."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(2, 32, 3, padding=1), nn.ReLU(), nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
            nn.Conv2d(32, 1, 3, padding=1),
        )  # fmt: skip

    def forward(self, masked: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([masked, mask], 1))

    def scored(self, mask: torch.Tensor) -> torch.Tensor:
        return mask

    def loss(self, batch) -> torch.Tensor:
        masked, mask, image = batch
        scored = self.scored(mask)
        return (((self(masked, mask) - image) ** 2) * scored).sum() / scored.sum()

    def predict(self, masked: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return masked + mask * self(masked, mask)


class InpaintNetScoresVisible(InpaintNet):
    """BUG: the loss weights the pixels by 1 - mask, reading the mask as 'ones are kept' where the data's
    ones are the hole: the network learns to copy the visible pixels and is never scored on the hole."""

    def scored(self, mask: torch.Tensor) -> torch.Tensor:
        return 1 - mask


# --- FiLM conditioning --------------------------------------------------------------------------------------
class FiLMNet(_Adam):
    """An MLP on the 8 features whose two hidden layers are modulated per row by its task id:
    (1 + gamma_t) * h + beta_t, from a FiLM generator (task embedding, ReLU, linear). ``zero_init``: the
    generator's last layer starts at zero, so every task starts from the identity modulation."""

    def __init__(self, zero_init: bool = False) -> None:
        super().__init__()
        self.first, self.second, self.out = nn.Linear(data.FEATURES, 64), nn.Linear(64, 64), nn.Linear(64, 1)
        self.film = nn.Sequential(nn.Embedding(data.TASKS, 32), nn.ReLU(), nn.Linear(32, 4 * 64))
        if zero_init:
            nn.init.zeros_(self.film[-1].weight)
            nn.init.zeros_(self.film[-1].bias)

    def modulation(self, task: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.film(task).chunk(4, -1)

    def forward(self, x: torch.Tensor, task: torch.Tensor) -> torch.Tensor:
        gamma1, beta1, gamma2, beta2 = self.modulation(task)
        h = F.relu((1 + gamma1) * self.first(x) + beta1)
        h = F.relu((1 + gamma2) * self.second(h) + beta2)
        return self.out(h).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        x, task, y = batch
        return F.mse_loss(self(x, task), y)


class FiLMNetFirstTask(FiLMNet):
    """BUG: written when a sampler gave every batch a single task, the generator reads the first row's id,
    ``film(task[0])``; its (256,) output broadcasts over the batch, and with shuffled batches every row is
    modulated by a random row's task."""

    def modulation(self, task: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.film(task[0]).chunk(4, -1)


# --- a temporal point process: the next inter-event gap -----------------------------------------------------
class GapGRU(_Adam):
    """A GRU reads the log gaps seen so far; a linear head gives the log rate of an exponential law for the
    next gap. Loss: the exponential negative log-likelihood -log rate + rate * gap of gaps 1..32, each given
    the gaps before it (a density's: negative for a short gap under a high rate). Served: the next gap's rate
    after a history."""

    def __init__(self) -> None:
        super().__init__()
        self.gru, self.head = nn.GRU(1, 32, batch_first=True), nn.Linear(32, 1)

    def states(self, gaps: torch.Tensor) -> torch.Tensor:
        """The GRU's state after reading each gap: (streams, gaps, 32)."""
        return self.gru(gaps.log()[..., None])[0]

    def log_rates(self, gaps: torch.Tensor) -> torch.Tensor:
        """The log rate of gaps 1.. given the gaps before each: the state after gap t predicts gap t + 1."""
        return self.head(self.states(gaps)[:, :-1]).squeeze(-1)

    def nll(self, log_rate: torch.Tensor, gap: torch.Tensor) -> torch.Tensor:
        return -log_rate + log_rate.exp() * gap

    def loss(self, batch) -> torch.Tensor:
        (gaps,) = batch
        return self.nll(self.log_rates(gaps), gaps[:, 1:]).mean()

    def predict(self, history: torch.Tensor) -> torch.Tensor:
        """The rate of the gap that follows ``history``."""
        return self.head(self.states(history)[:, -1]).squeeze(-1).exp()


class GapGRUTargetsNotShifted(GapGRU):
    """BUG: the outputs are sliced ``[:, 1:]`` like the targets, so the state that predicts gap t has already
    read gap t: training and validation score a copy of the answer, and served after a history the head
    describes the last gap seen, not the next one."""

    def log_rates(self, gaps: torch.Tensor) -> torch.Tensor:
        return self.head(self.states(gaps)[:, 1:]).squeeze(-1)


class GapGRUNoCompensator(GapGRU):
    """BUG: the likelihood keeps only the intensity at the events, -log rate, and drops the survival
    (compensator) term rate * gap: the loss falls for ever by raising every rate."""

    def nll(self, log_rate: torch.Tensor, gap: torch.Tensor) -> torch.Tensor:
        return -log_rate


# --- deep ensembles -----------------------------------------------------------------------------------------
def _member() -> nn.Sequential:
    return mlp(64, 32, 10)


class DigitEnsemble(_Adam):
    """Five small MLPs trained side by side from their own random inits, each on its own cross-entropy (the
    loss is their sum: 5 ln 10 at init); served: the mean of their probabilities, and their disagreement
    (the variance of the members' probabilities) as the prediction's uncertainty."""

    def __init__(self, members: int = 5) -> None:
        super().__init__()
        self.members = self.build(members)

    def build(self, members: int) -> nn.ModuleList:
        return nn.ModuleList(_member() for _ in range(members))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.stack([member(x) for member in self.members])

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        logits = self(x)
        return sum(F.cross_entropy(member_logits, y) for member_logits in logits)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).softmax(-1).mean(0)

    def disagreement(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).softmax(-1).var(0).sum(-1)


class DigitEnsembleOneMember(DigitEnsemble):
    """BUG: the members are built as ``nn.ModuleList([_member()] * 5)``: five references to one network, so
    the 'ensemble' is a single model counted five times: its members never disagree, and its uncertainty is
    0 on every input."""

    def build(self, members: int) -> nn.ModuleList:
        return nn.ModuleList([_member()] * members)


class StackedEnsemble(_Adam):
    """Five MLPs whose 50 logits a learned linear combiner stacks into one prediction; cross-entropy."""

    def __init__(self, members: int = 5) -> None:
        super().__init__()
        self.members = self.build(members)
        self.combiner = nn.Linear(10 * members, 10)

    def build(self, members: int) -> nn.ModuleList | list[nn.Module]:
        return nn.ModuleList(_member() for _ in range(members))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.combiner(torch.cat([member(x) for member in self.members], -1))

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).softmax(-1)


class StackedEnsemblePlainList(StackedEnsemble):
    """BUG: the members are kept in a plain Python list, so they are not registered: ``self.parameters()``
    (the optimizer's) holds the combiner only, and it stacks five random networks' logits."""

    def build(self, members: int) -> nn.ModuleList | list[nn.Module]:
        return [_member() for _ in range(members)]


# --- Monte-Carlo dropout ------------------------------------------------------------------------------------
class MCDropoutNet(_Adam):
    """An MLP with BatchNorm and dropout 0.3 on digits; served by Monte-Carlo dropout: 20 passes with the
    dropout layers sampling (BatchNorm on its running statistics), probabilities averaged, so two calls to
    ``predict`` differ a little."""

    samples = 20

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3),
            nn.Linear(128, 128), nn.BatchNorm1d(128), nn.ReLU(), nn.Dropout(0.3), nn.Linear(128, 10),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def sampling_mode(self) -> None:
        """Dropout samples; everything else stays in eval mode."""
        self.eval()
        for module in self.modules():
            if isinstance(module, nn.Dropout):
                module.train()

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        self.sampling_mode()
        probabilities = torch.stack([self(x).softmax(-1) for _ in range(self.samples)]).mean(0)
        self.eval()
        return probabilities


class MCDropoutNetTrainMode(MCDropoutNet):
    """BUG: dropout is switched on for sampling with ``self.train()``, which also puts BatchNorm in training
    mode: served requests are normalised by their own small batch's statistics (and every pass moves the
    running statistics), not by those learnt in training."""

    def sampling_mode(self) -> None:
        self.train()


# --- domain adaptation with a gradient reversal layer -------------------------------------------------------
class GradientReversal(torch.autograd.Function):
    """The identity forward; backward, the gradient times -scale."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return -ctx.scale * grad, None


class GradientScale(GradientReversal):
    """The identity forward; backward, the gradient times scale (no minus)."""

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return ctx.scale * grad, None


class DANN(_Adam):
    """Domain-adversarial training: a feature MLP, a label head trained on labelled source rows, and a domain
    head told source from target rows through a gradient reversal layer, whose strength ramps from 0 to 1
    with the run's progress p as 2 / (1 + exp(-10 p)) - 1. Loss: CE(labels) + BCE(domain). Batches:
    (source x, source label, unlabelled target x). Served: the label head on the features."""

    reversal = GradientReversal

    def __init__(self) -> None:
        super().__init__()
        self.features = mlp(data.SIGNAL + data.NUISANCE, 32, 32)
        self.label_head = nn.Sequential(nn.ReLU(), nn.Linear(32, 2))
        self.domain_head = nn.Sequential(nn.ReLU(), nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))
        self.strength = 0.0

    def progress(self) -> float:
        return self.global_step / self.trainer.estimated_stepping_batches

    def on_train_batch_start(self, batch, batch_idx) -> None:
        p = min(1.0, max(0.0, self.progress()))
        self.strength = 2 / (1 + torch.exp(torch.tensor(-10 * p)).item()) - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.label_head(self.features(x))

    def loss(self, batch) -> torch.Tensor:
        source, label, target = batch
        features = self.features(torch.cat([source, target]))
        classify = F.cross_entropy(self.label_head(features[: len(source)]), label)
        domain = torch.cat([torch.zeros(len(source)), torch.ones(len(target))])
        logits = self.domain_head(self.reversal.apply(features, self.strength)).squeeze(-1)
        return classify + F.binary_cross_entropy_with_logits(logits, domain)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).argmax(-1)


class DANNProgressFromMaxSteps(DANN):
    """BUG: the progress is ``global_step / trainer.max_steps``; the run is set by ``max_epochs``, so
    ``max_steps`` is -1, p is clamped to 0 and the reversal strength stays 0: the domain head trains, the
    features never hear from it, and the model is a source-only classifier."""

    def progress(self) -> float:
        return self.global_step / self.trainer.max_steps


class DANNNoMinus(DANN):
    """BUG: the 'reversal' layer's backward returns scale * grad without the minus (copied from a gradient
    scaling layer): the features help the domain head instead of fooling it, and lean on the very sensor
    that differs between the domains."""

    reversal = GradientScale


# --- a monotone head: default risk cannot rise with income --------------------------------------------------
class Monotone1d(nn.Module):
    """A non-decreasing map of each element: sum_k softplus(a_k) tanh(softplus(w_k) (z - b_k)) over 16 knots
    b_k spread on [-2, 2] (the weights kept positive by softplus; ``a`` starts at ``start``)."""

    def __init__(self, knots: int = 16, start: float = 0.0) -> None:
        super().__init__()
        self.a, self.w = nn.Parameter(torch.full((knots,), start)), nn.Parameter(torch.zeros(knots))
        self.b = nn.Parameter(torch.linspace(-2, 2, knots))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        steps = torch.tanh(F.softplus(self.w) * (z[..., None] - self.b))
        return (F.softplus(self.a) * steps).sum(-1)


class MonotoneRisk(_Adam):
    """Default log-odds = m(direction * income) + g(the other 5 attributes), where m is a non-decreasing 1-D
    network (:class:`Monotone1d`) and g an MLP. ``direction`` -1: risk is constrained to fall as income rises.
    Loss: BCE; served: the probability of default."""

    direction = -1.0

    def __init__(self) -> None:
        super().__init__()
        self.income, self.rest = Monotone1d(), mlp(5, 32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.income(self.direction * x[:, 0]) + self.rest(x[:, 1:]).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        x, default = batch
        return F.binary_cross_entropy_with_logits(self(x), default)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self(x))


class MonotoneRiskWrongDirection(MonotoneRisk):
    """BUG: the income constraint is declared increasing (direction +1) where risk falls with income: the
    head can only flatten m to a constant, and the model loses what income says."""

    direction = 1.0


# --- a monotone calibration head on a frozen, pretrained classifier -----------------------------------------
@cache
def pretrained_digit_scorer() -> dict[str, torch.Tensor]:
    """The weights of a digit MLP fitted to the training digits elsewhere (a checkpoint: 1,000 full-batch Adam
    steps, near 100% right and very sure of itself on them), built apart from the global RNG."""
    with torch.random.fork_rng():
        torch.manual_seed(91)
        net = mlp(64, 64, 10)
        optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
        x, y = data.digits("train")
        for _ in range(1000):
            optimizer.zero_grad()
            F.cross_entropy(net(x), y).backward()
            optimizer.step()
    return {name: tensor.detach().clone() for name, tensor in net.state_dict().items()}


class CalibratedScorer(_Adam):
    """The pretrained scorer, frozen, and a monotone calibration head applied to each of its logits, z ->
    softplus(s) z + m(z / 5) with m a :class:`Monotone1d`: it keeps the ranking of the classes (so the
    accuracy) and only learns how sure to be (it starts near the identity). Cross-entropy; served: the
    calibrated probabilities."""

    lr = 3e-2

    def __init__(self) -> None:
        super().__init__()
        self.scorer = mlp(64, 64, 10)
        self.scorer.load_state_dict(pretrained_digit_scorer())
        self.scorer.requires_grad_(False)
        self.slope, self.bumps = nn.Parameter(torch.tensor(0.5413)), Monotone1d(start=-5.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = self.scorer(x)
        return F.softplus(self.slope) * z + self.bumps(z / 5)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x).softmax(-1)
