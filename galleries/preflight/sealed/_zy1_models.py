"""Sealed gallery ZY's models (half ``zy1``): each correct model (a healthy twin) and, next to it, the buggy
variant a user wrote (a subclass that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers and ``loss(batch)`` what it trains on."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _zy1_data as data
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


# --- heteroscedastic regression (mean and log-variance; Gaussian negative log-likelihood) ------------------
class HeteroNet(_Adam):
    """An MLP to a mean and a log-variance of the standardised target; the Gaussian negative log-likelihood
    (without its constant). Served: the mean and the standard deviation in the target's own units."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(1, 64, 64, 2)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(x)
        return out[:, 0], out[:, 1]

    def nll(self, mean: torch.Tensor, log_var: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return 0.5 * (log_var + (z - mean) ** 2 * torch.exp(-log_var)).mean()

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        mean, log_var = self(x)
        return self.nll(mean, log_var, (y - data.Y_MEAN) / data.Y_STD)

    def predict(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_var = self(x)
        return mean * data.Y_STD + data.Y_MEAN, torch.exp(0.5 * log_var) * data.Y_STD


class HeteroNetStdNotRescaled(HeteroNet):
    """BUG: the served mean is mapped back to the target's units but the standard deviation is not (it stays
    in standardised units, 6.5 times too small): every served interval is far too narrow."""

    def predict(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_var = self(x)
        return mean * data.Y_STD + data.Y_MEAN, torch.exp(0.5 * log_var)


class HeteroNetNoLogVariance(HeteroNet):
    """BUG: the ``log_var`` term of the negative log-likelihood was dropped as "a constant" (it is one only
    when the variance is fixed): the loss falls by inflating the variance without bound, and the mean's
    gradient is divided by it."""

    def nll(self, mean: torch.Tensor, log_var: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return 0.5 * ((z - mean) ** 2 * torch.exp(-log_var)).mean()


class HeteroGaussianNLL(HeteroNet):
    """``F.gaussian_nll_loss`` with a softplus variance (floored at 1e-4): the loss goes negative as soon as
    the predicted variances fall below 1/(2 pi e) of the standardised target's, as they should here."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out = self.net(x)
        return out[:, 0], torch.log(F.softplus(out[:, 1]) + 1e-4)

    def nll(self, mean: torch.Tensor, log_var: torch.Tensor, z: torch.Tensor) -> torch.Tensor:
        return F.gaussian_nll_loss(mean, z, log_var.exp())


class HeteroMeanByMSE(HeteroNet):
    """The mean trained by squared error alone and the variance by the negative log-likelihood with the mean
    detached (so that noisy regions do not slow the mean's fit): two losses, one summed figure."""

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        z = (y - data.Y_MEAN) / data.Y_STD
        mean, log_var = self(x)
        return F.mse_loss(mean, z) + self.nll(mean.detach(), log_var, z)


# --- mixture density network (the inverted sinusoid) --------------------------------------------------------
class MDN(_Adam):
    """An MLP (tanh) to the weights, means and scales of a mixture of ``K`` Gaussians over the target; the
    mixture's negative log-likelihood (log-sum-exp over components); Adam with a linear warm-up over its first
    500 steps. Served: the mixture (log-weights, means, scales)."""

    K = 5

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 3 * self.K)
        )

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=500)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": warmup, "interval": "step"}}

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        logits, mean, log_scale = self.net(x).chunk(3, -1)
        return F.log_softmax(logits, -1), mean, log_scale.clamp(min=-6).exp()

    @staticmethod
    def components(mean: torch.Tensor, scale: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Each component's log-density at ``y``, (n, K)."""
        return -0.5 * ((y[:, None] - mean) / scale) ** 2 - scale.log() - 0.5 * math.log(2 * math.pi)

    def mixture_nll(self, log_weight, mean, scale, y) -> torch.Tensor:
        return -torch.logsumexp(log_weight + self.components(mean, scale, y), -1).mean()

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return self.mixture_nll(*self(x), y)

    def predict(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self(x)


class MDNExpectedNLL(MDN):
    """BUG: the loss is the weight-averaged negative log-likelihood of the components, sum_k pi_k (-log N_k),
    instead of -log sum_k pi_k N_k: it is minimised by putting all the weight on one component, and the
    mixture collapses to a single Gaussian between the modes."""

    def mixture_nll(self, log_weight, mean, scale, y) -> torch.Tensor:
        return -(log_weight.exp() * self.components(mean, scale, y)).sum(-1).mean()


class MDNWarmupPerEpoch(MDN):
    """BUG: the warm-up scheduler is returned without ``"interval": "step"`` (Lightning steps it once per
    epoch): its 500 iterations are 500 epochs, and the whole run trains at 1..5% of the learning rate."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(self.parameters(), lr=self.lr)
        warmup = torch.optim.lr_scheduler.LinearLR(optimizer, start_factor=0.01, total_iters=500)
        return [optimizer], [warmup]


class MDNManyComponents(MDN):
    """Eight components for a target with at most three modes: the spare ones get weights near zero (or
    duplicate others); the negative log-likelihood goes well below zero."""

    K = 8


# --- multiple-instance learning (bags of digits; positive if any is a 7) ------------------------------------
class AttentionMIL(_Adam):
    """An instance encoder (MLP), gated-free attention pooling (Ilse et al.) with padded instances masked out
    of the softmax, and a linear head to the bag's logit; binary cross-entropy. Input: ``(bags, mask)``.
    Served: the bag's label (logit above 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(mlp(64, 64, 32), nn.ReLU())
        self.attention = nn.Sequential(nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))
        self.head = nn.Linear(32, 1)

    def weights(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=1)

    def pool(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        a = self.weights(self.attention(h)[..., 0], mask)
        return (a[..., None] * h).sum(1)

    def forward(self, x) -> torch.Tensor:
        bags, mask = x
        return self.head(self.pool(self.encoder(bags), mask))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        x, label = batch
        return F.binary_cross_entropy_with_logits(self(x), label)

    def predict(self, x) -> torch.Tensor:
        return (self(x) > 0).float()


class AttentionMILSoftmaxOverBatch(AttentionMIL):
    """BUG: the attention is normalised with ``softmax(dim=0)``, as in the single-bag code it was copied from
    (scores of shape (instances,)); batched, axis 0 is the bags: each position's weights are shared out among
    the bags of the batch, and a bag's summary depends on its batch-mates (and on the batch size)."""

    def weights(self, scores: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.softmax(scores.masked_fill(~mask, float("-inf")), dim=0)


class MaxMIL(AttentionMIL):
    """Max pooling over the instances, with no mask at all: the bags are padded by repeating their last
    instance, and a repeated instance cannot change a maximum."""

    def pool(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return h.max(1).values


# --- graph-level regression (message passing, sum readout) --------------------------------------------------
class GraphNet(_Adam):
    """Two rounds of message passing (a node's state plus the sum of its neighbours', dense adjacency) over
    one-hot node types, padded nodes zeroed, a sum readout and an MLP head; squared error on the standardised
    count. Input: ``(adjacency, features, mask)``. Served: the number of same-type edges."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(data.TYPES, 32)
        self.own = nn.ModuleList(nn.Linear(32, 32) for _ in range(2))
        self.neighbours = nn.ModuleList(nn.Linear(32, 32, bias=False) for _ in range(2))
        self.head = mlp(32, 64, 1)

    def readout(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return h.sum(1)

    def forward(self, x) -> torch.Tensor:
        adj, feats, mask = x
        keep = mask[..., None]
        h = torch.relu(self.embed(feats)) * keep
        for own, neighbours in zip(self.own, self.neighbours, strict=True):
            h = torch.relu(own(h) + neighbours(adj @ h)) * keep
        return self.head(self.readout(h, mask))[:, 0]

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self(x), (y - data.EDGES_MEAN) / data.EDGES_STD)

    def predict(self, x) -> torch.Tensor:
        return self(x) * data.EDGES_STD + data.EDGES_MEAN


class GraphNetMeanReadout(GraphNet):
    """BUG: the readout averages the real nodes' states (sum over the mask / number of nodes) for a target
    that counts edges: the graph's size is divided out, and the count has to be guessed from densities."""

    def readout(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return h.sum(1) / mask.sum(1, keepdim=True)


class GraphNetMeanOverPadding(GraphNet):
    """The readout is ``h.mean(1)`` over the padded node axis: the padded nodes are zero, so it is the sum
    over the real nodes divided by the fixed 12, a constant scale (a sum readout, correctly)."""

    def readout(self, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return h.mean(1)


# --- physics-informed fitting (logistic growth; autograd residual on collocation points) --------------------
class PINN(_Adam):
    """An MLP (tanh) from the scaled time tau = t / 8 to u; the squared error on the observations plus the
    squared ODE residual du/dt - r u (1 - u) at the collocation points, du/dt = (du/dtau) / 8 by autograd.
    Served: u at the (unscaled) times asked for. (Adam at 1e-2: at 3e-3 this fit stalls on a flat curve.)"""

    lr = 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, tau: torch.Tensor) -> torch.Tensor:
        return self.net(tau)

    def du_dtau(self, u: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        return torch.autograd.grad(u, tau, torch.ones_like(u), create_graph=True)[0]

    def du_dt(self, u: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        return self.du_dtau(u, tau) / data.HORIZON

    def residual(self, tau: torch.Tensor) -> torch.Tensor:
        tau = tau.requires_grad_(True)
        u = self(tau)
        return self.du_dt(u, tau) - data.RATE * u * (1 - u)

    def loss(self, batch) -> torch.Tensor:
        # the residual needs autograd, in validation (run under inference mode) too
        with torch.inference_mode(False), torch.enable_grad():
            tau, u, col = (t.clone() for t in batch)
            return F.mse_loss(self(tau), u) + self.residual(col).pow(2).mean()

    def predict(self, t: torch.Tensor) -> torch.Tensor:
        return self(t / data.HORIZON)


class PINNDerivativeInScaledTime(PINN):
    """BUG: the residual uses du/dtau as du/dt (the chain rule's 1/8 for the input scaling forgotten): the
    physics term asks for growth eight times slower than the data show, and the fit bends away from the
    plateau."""

    def du_dt(self, u: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        return self.du_dtau(u, tau)


class PINNDerivativeNotDifferentiated(PINN):
    """BUG: the derivative is taken with ``retain_graph=True`` instead of ``create_graph=True`` (the fix
    found for "backward through the graph a second time"): du/dt is a constant to the optimiser, and the
    residual only pushes u(1 - u) towards a stale value instead of shaping the curve's slope."""

    def du_dtau(self, u: torch.Tensor, tau: torch.Tensor) -> torch.Tensor:
        return torch.autograd.grad(u, tau, torch.ones_like(u), retain_graph=True)[0]


class PINNHardInitialCondition(PINN):
    """The initial condition built in: u(tau) = 0.05 + tau * MLP(tau), so u(0) = 0.05 whatever the weights
    (no initial-condition term in the loss; the observations and the residual do the rest)."""

    def forward(self, tau: torch.Tensor) -> torch.Tensor:
        return data.U0 + tau * self.net(tau)


# --- character-level language identification ----------------------------------------------------------------
class NgramLangID(_Adam):
    """An MLP over the bag of character unigrams and bigrams (frequencies); cross-entropy over the four
    languages. Trained on precomputed n-gram rows; served: the language of strings given as character ids."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.GRAMS, 64, data.LANGS)

    def forward(self, grams: torch.Tensor) -> torch.Tensor:
        return self.net(grams)

    def loss(self, batch) -> torch.Tensor:
        grams, lang = batch
        return F.cross_entropy(self(grams), lang)

    def predict(self, ids: torch.Tensor) -> torch.Tensor:
        return self(data.ngrams(ids)).argmax(-1)
