"""Sealed gallery E's models: each correct model (a healthy twin) and, next to it, the buggy variant a user
wrote (a subclass, or a flag, that changes the one place the bug lives in). Every model is built from the
global RNG; ``predict`` is what a served model answers."""

from __future__ import annotations

import copy
import math

import torch
import torch.nn.functional as F
from torch import nn

from galleries.preflight.sealed import _e_data as data
from galleries.sealed import AdamModule as _Adam
from galleries.sealed import mlp


class _Regressor(_Adam):
    """``net`` on the inputs against a float target with the mean squared error; ``predict`` = ``forward``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self(x)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)


# --- message passing over directed graphs -------------------------------------------------------------------
class GraphNet(_Adam):
    """One message-passing layer: a node's state is its own features plus the sum of its in-neighbours'
    messages (``adj[j, i]`` for j -> i), then a per-node head."""

    def __init__(self) -> None:
        super().__init__()
        self.own, self.message, self.head = nn.Linear(4, 32), nn.Linear(4, 32), mlp(32, 32, 1)

    def aggregate(self, adj: torch.Tensor, messages: torch.Tensor) -> torch.Tensor:
        return adj.transpose(-1, -2) @ messages

    def forward(self, x: torch.Tensor, adj: torch.Tensor) -> torch.Tensor:
        return self.head(F.relu(self.own(x) + self.aggregate(adj, self.message(x)))).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        x, adj, y = batch
        return F.mse_loss(self(x, adj), y)


class GraphNetOutEdges(GraphNet):
    """BUG: ``adj @ messages`` sums over the node's out-neighbours (the graph library's row convention is
    source -> target), so each node hears the nodes it sends to, not the ones that send to it."""

    def aggregate(self, adj: torch.Tensor, messages: torch.Tensor) -> torch.Tensor:
        return adj @ messages


# --- learning to rank ---------------------------------------------------------------------------------------
class ListRanker(_Adam):
    """A per-document scorer trained with ListNet: cross-entropy between the softmax of the grades and the
    softmax of the scores over each list (its value at init is not ln 10)."""

    def __init__(self, features: int = data.FEATURES, per_query: bool = False) -> None:
        super().__init__()
        self.features, self.per_query = features, per_query
        self.net = mlp(features, 64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.per_query:  # features standardised within each list (a query's own scale)
            x = (x - x.mean(-2, keepdim=True)) / (x.std(-2, keepdim=True) + 1e-5)
        return self.net(x).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        x, grade = batch
        return -(F.softmax(grade, -1) * F.log_softmax(self(x), -1)).sum(-1).mean()


# --- keypoints ----------------------------------------------------------------------------------------------
class EyeLocator(_Regressor):
    """An MLP from the 144 pixels to the two eyes' coordinates."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(data.SIDE * data.SIDE, 128, 4)


class EyeLocatorEMA(EyeLocator):
    """Serves an exponential moving average of the weights (decay 0.98 per optimizer step), kept in a frozen
    copy that the optimizer does not see."""

    decay = 0.98

    def __init__(self) -> None:
        super().__init__()
        self.ema = copy.deepcopy(self.net).requires_grad_(False)

    def configure_optimizers(self):
        return torch.optim.Adam(self.net.parameters(), lr=self.lr)

    @torch.no_grad()
    def update_ema(self) -> None:
        for averaged, live in zip(self.ema.parameters(), self.net.parameters(), strict=True):
            averaged.lerp_(live, 1 - self.decay)

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        self.update_ema()

    def predict(self, x: torch.Tensor) -> torch.Tensor:
        return self.ema(x)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.mse_loss(self.predict(x), y))


class EyeLocatorEMAPerEpoch(EyeLocatorEMA):
    """BUG: the average is updated in ``on_train_epoch_end`` with the per-step decay, so after 6 updates the
    served weights are still ~89% their random start."""

    def on_train_batch_end(self, outputs, batch, batch_idx) -> None:
        pass

    def on_train_epoch_end(self) -> None:
        self.update_ema()


# --- super-resolution ---------------------------------------------------------------------------------------
class SuperResolver(_Regressor):
    """An MLP encoder (64 -> 128 -> 128) and a linear head to the 64 high-resolution pixels."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(mlp(64, 128, 128), nn.ReLU())
        self.head = nn.Linear(128, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.encoder(x))


class StagedSuperResolver(SuperResolver):
    """The encoder is frozen for the first epoch (the head warms up) and unfrozen from the second; the
    optimizer holds every parameter (a frozen one has no gradient, so Adam skips it)."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder.requires_grad_(False)

    def on_train_epoch_start(self) -> None:
        if self.current_epoch == 1:
            self.encoder.requires_grad_(True)


class StagedSuperResolverTrainableOnly(StagedSuperResolver):
    """BUG: the optimizer is built over the parameters that are trainable when it is built, so the encoder,
    unfrozen at epoch 1, gets gradients but is never stepped."""

    def configure_optimizers(self):
        return torch.optim.Adam([p for p in self.parameters() if p.requires_grad], lr=self.lr)


# --- masked-patch reconstruction ----------------------------------------------------------------------------
class PatchFiller(_Adam):
    """Hides the masked pixels (fill -1, no pixel's value) and reconstructs the whole image; the loss and
    the validation figure are the squared error on the hidden pixels."""

    fill = -1.0

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 256, 64)

    def forward(self, image: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return self.net(image * (1 - mask) + self.fill * mask)

    def hidden_error(self, batch) -> torch.Tensor:
        image, mask = batch
        return (((self(image, mask) - image) ** 2) * mask).sum() / mask.sum()

    def loss(self, batch) -> torch.Tensor:
        return self.hidden_error(batch)

    def val_figure(self, batch) -> torch.Tensor:
        return self.hidden_error(batch)

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self.val_figure(batch))


class PatchFillerVisibleLoss(PatchFiller):
    """BUG: the loss weights the visible pixels (``1 - mask``, from a mask convention of 1 = keep), so the
    model learns to copy what it sees and never to fill a hole."""

    def loss(self, batch) -> torch.Tensor:
        image, mask = batch
        return (((self(image, mask) - image) ** 2) * (1 - mask)).sum() / (1 - mask).sum()


class PatchFillerWholeImageValidation(PatchFiller):
    """BUG: validation pastes the visible pixels back (as served) and reports the squared error over all 64
    pixels, 40 of them exact, so the figure overstates how well the holes are filled."""

    def val_figure(self, batch) -> torch.Tensor:
        image, mask = batch
        return F.mse_loss(image * (1 - mask) + self(image, mask) * mask, image)


# --- variable-length sequences -----------------------------------------------------------------------------
class PackedSequenceRegressor(_Adam):
    """A GRU over the packed sequences (``pack_padded_sequence`` with their lengths, padding on the right);
    its last state goes through a head."""

    def __init__(self) -> None:
        super().__init__()
        self.gru, self.head = nn.GRU(1, 32, batch_first=True), mlp(32, 32, 1)

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
        return self.head(self.gru(packed)[1][-1]).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        x, lengths, y = batch
        return F.mse_loss(self(x, lengths), y)


# --- mixup --------------------------------------------------------------------------------------------------
class MixupDigitNet(_Adam):
    """Digits with mixup in training (uniform mixing weight; the loss mixes the two labels' cross-entropies)
    and plain cross-entropy in validation."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(64, 128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def partners(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The partner of each row for the inputs and for the labels."""
        order = torch.randperm(n, device=self.device)
        return order, order

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def training_step(self, batch, batch_idx):
        x, y = batch
        lam = torch.rand((), device=x.device)
        inputs, labels = self.partners(len(x))
        out = self(lam * x + (1 - lam) * x[inputs])
        loss = lam * F.cross_entropy(out, y) + (1 - lam) * F.cross_entropy(out, y[labels])
        self.log("train_loss", loss)
        return loss


class MixupDigitNetTwoPermutations(MixupDigitNet):
    """BUG: the labels are mixed with a second ``randperm``, so the partner's label belongs to another image
    than the one blended into the input."""

    def partners(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.randperm(n, device=self.device), torch.randperm(n, device=self.device)


# --- mixture density network --------------------------------------------------------------------------------
class MixtureDensityNet(_Adam):
    """Three Gaussian components with weights, means and scales from x; the loss is the negative
    log-likelihood of the mixture (it goes below zero on this data)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(1, 64, 64, 9)

    def components(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log weights, log densities of y) per component."""
        logits, mean, log_scale = self.net(x).chunk(3, -1)
        return F.log_softmax(logits, -1), mean, log_scale.clamp(-6, 3)

    def nll(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        log_w, mean, log_scale = self.components(x)
        log_density = torch.distributions.Normal(mean, log_scale.exp()).log_prob(y[:, None])
        return -torch.logsumexp(log_w + log_density, -1)

    def loss(self, batch) -> torch.Tensor:
        return self.nll(*batch).mean()


class MixtureDensityNetJensen(MixtureDensityNet):
    """BUG: the loss is the weighted sum of the components' log-likelihoods (log of a product, a lower
    bound), so the weights go to one component, which spreads over both branches."""

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        log_w, mean, log_scale = self.components(x)
        log_density = torch.distributions.Normal(mean, log_scale.exp()).log_prob(y[:, None])
        return -(log_w.exp() * log_density).sum(-1).mean()


# --- normalizing flow ---------------------------------------------------------------------------------------
class Coupling(nn.Module):
    """An affine coupling layer: the coordinates where ``mask`` is 0 are scaled and shifted by functions
    of those where it is 1."""

    def __init__(self, mask: list[float]) -> None:
        super().__init__()
        self.register_buffer("mask", torch.tensor(mask))
        self.net = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 4))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scale, shift = self.net(x * self.mask).chunk(2, -1)
        scale, shift = torch.tanh(scale) * (1 - self.mask), shift * (1 - self.mask)
        return x * self.mask + (1 - self.mask) * (x * scale.exp() + shift), scale.sum(-1)


class Flow(_Adam):
    """Six affine couplings, alternating which coordinate they transform; the loss is the negative
    log-likelihood (change of variables: the base density plus the log-determinant)."""

    log_det_sign = 1.0

    def __init__(self, alternate: bool = True) -> None:
        super().__init__()
        masks = [[1.0, 0.0], [0.0, 1.0]] if alternate else [[1.0, 0.0]]
        self.layers = nn.ModuleList(Coupling(masks[i % len(masks)]) for i in range(6))

    def parts(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(log base density of the image z, log |det dz/dx|)."""
        log_det = torch.zeros(len(x), device=x.device)
        for layer in self.layers:
            x, step = layer(x)
            log_det = log_det + step
        return -0.5 * (x**2).sum(-1) - math.log(2 * math.pi), log_det

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        base, log_det = self.parts(x)
        return base + log_det

    def loss(self, batch) -> torch.Tensor:
        base, log_det = self.parts(batch[0])
        return -(base + self.log_det_sign * log_det).mean()


class FlowInBitsWithOffset(Flow):
    """The loss in bits per dimension plus the 8-bit dequantisation constant (8 bits) of the image-flow
    template it came from: a large constant offset, correct gradients."""

    loss_offset = 8.0

    def loss(self, batch) -> torch.Tensor:
        return super().loss(batch) / (2 * math.log(2)) + self.loss_offset


class FlowTwoOptimizersManual(Flow):
    """Manual optimisation with two optimizers (the even and the odd couplings, each at its own rate),
    both zeroed, back-propagated once and stepped every batch."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def configure_optimizers(self):
        even = [p for layer in self.layers[0::2] for p in layer.parameters()]
        odd = [p for layer in self.layers[1::2] for p in layer.parameters()]
        return torch.optim.Adam(even, lr=self.lr), torch.optim.Adam(odd, lr=2 * self.lr)

    def training_step(self, batch, batch_idx):
        optimizers = self.optimizers()
        for optimizer in optimizers:
            optimizer.zero_grad()
        loss = self.loss(batch)
        self.manual_backward(loss)
        for optimizer in optimizers:
            optimizer.step()
        self.log("train_loss", loss)
        return loss


class FlowLogDetSubtracted(Flow):
    """BUG: the log-determinant is subtracted (the inverse direction's formula), so the loss rewards
    squeezing every sample to the origin and the density learnt is wrong."""

    log_det_sign = -1.0


# --- one-class scoring --------------------------------------------------------------------------------------
class OneClassNet(_Adam):
    """Deep one-class scoring: maps digits near a fixed centre (the mean output at the first batch), with no
    bias anywhere so the trivial map to the centre is out of reach; the anomaly score is the squared
    distance to the centre."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 64, bias=False), nn.ReLU(), nn.Linear(64, 16, bias=False))
        self.centre = nn.Parameter(torch.zeros(16), requires_grad=False)
        self.register_buffer("centred", torch.tensor(False))

    def score(self, x: torch.Tensor) -> torch.Tensor:
        return ((self.net(x) - self.centre) ** 2).sum(-1)

    def loss(self, batch) -> torch.Tensor:
        if not self.centred:
            with torch.no_grad():
                self.centre.copy_(self.net(batch[0]).mean(0))
                self.centred.fill_(True)
        return self.score(batch[0]).mean()


# --- multiple-instance learning -----------------------------------------------------------------------------
class BagClassifier(_Adam):
    """Scores every instance of a bag; the bag's logit is the highest instance score (or, with
    ``attention``, an attention-weighted mean of them); binary cross-entropy on the bag label."""

    def __init__(self, attention: bool = False) -> None:
        super().__init__()
        self.instance = mlp(64, 64, 1)
        self.attention = mlp(64, 32, 1) if attention else None

    def forward(self, bags: torch.Tensor) -> torch.Tensor:
        scores = self.instance(bags).squeeze(-1)
        if self.attention is None:
            return scores.amax(-1)
        return (F.softmax(self.attention(bags).squeeze(-1), -1) * scores).sum(-1)

    def loss(self, batch) -> torch.Tensor:
        bags, label = batch
        return F.binary_cross_entropy_with_logits(self(bags), label)


# --- behaviour cloning --------------------------------------------------------------------------------------
class Cloner(_Regressor):
    """State (position, goal) -> action: an MLP body and a linear head, mean squared error on the action."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(mlp(4, 64, 64), nn.ReLU())
        self.head = nn.Linear(64, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.body(x))


class ClonerHeadResetEachEpoch(Cloner):
    """BUG: the head's custom initialisation lives in ``on_train_epoch_start`` (meant for ``on_fit_start``),
    so every epoch throws the trained head away and the served head has had one epoch."""

    def on_train_epoch_start(self) -> None:
        nn.init.zeros_(self.head.bias)
        nn.init.normal_(self.head.weight, std=0.01)


# --- energy and forces --------------------------------------------------------------------------------------
class PairPotential(_Adam):
    """A learnt pair potential summed over the 6 atom pairs; forces are minus its gradient with respect to
    the positions (``create_graph`` so the force error trains the potential). Loss: energy MSE + force MSE."""

    force_sign, create_graph, lr = -1.0, True, 1e-2

    def __init__(self) -> None:
        super().__init__()
        self.phi = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1))

    def energy(self, pos: torch.Tensor) -> torch.Tensor:
        return self.phi(data.distances(pos)[..., None]).squeeze(-1).sum(-1)

    def predict(self, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        with torch.inference_mode(False), torch.enable_grad():
            pos = pos.clone().requires_grad_()
            energy = self.energy(pos)
            (grad,) = torch.autograd.grad(
                energy.sum(), pos, create_graph=self.create_graph, retain_graph=True
            )
        return energy, self.force_sign * grad

    def loss(self, batch) -> torch.Tensor:
        pos, energy, forces = batch
        predicted_energy, predicted_forces = self.predict(pos)
        return F.mse_loss(predicted_energy, energy) + F.mse_loss(predicted_forces, forces)


class PairPotentialDetachedForces(PairPotential):
    """BUG: ``autograd.grad`` without ``create_graph=True``: the predicted forces are constants to the
    optimizer, so the force term of the loss trains nothing and only the energy is fitted."""

    create_graph = False


class PairPotentialForceSign(PairPotential):
    """BUG: forces are taken as ``+dE/dx`` (the gradient, not minus it), so the energy and force terms pull
    the potential opposite ways."""

    force_sign = 1.0


# --- tabular rows with missing values -----------------------------------------------------------------------
class MissingAwareRegressor(_Adam):
    """An MLP on the filled features and their missing marks (batches are dicts; ``row_id`` is unused)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = mlp(10, 64, 1)

    def forward(self, features: torch.Tensor, missing: torch.Tensor) -> torch.Tensor:
        return self.net(torch.cat([features, missing], -1)).squeeze(-1)

    def loss(self, batch) -> torch.Tensor:
        return F.mse_loss(self(batch["features"], batch["missing"]), batch["target"])
