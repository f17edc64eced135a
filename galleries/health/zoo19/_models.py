"""Zoo 19's networks and trainers (plain torch and Lightning): a two-digit adder with a shared digit encoder,
a mixture density network, a dense message-passing network for small graphs, a physics-informed network of
an ODE and a multi-output tabular MLP. Every trainer logs ``val_loss`` when it validates."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = ["MDN", "MLP", "PINN", "DigitAdder", "GraphNet", "MDNTask", "PINNTask", "Task"]

MakeOptimizer = Callable[[nn.Module], torch.optim.Optimizer]
MakeSchedule = Callable[[torch.optim.Optimizer], Any]


class MLP(nn.Sequential):
    """``Linear`` layers of ``sizes`` with ``activation`` between them (none after the last)."""

    def __init__(self, sizes: list[int], activation: type[nn.Module] = nn.ReLU) -> None:
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(itertools.pairwise(sizes)):
            layers.append(nn.Linear(a, b))
            if i < len(sizes) - 2:
                layers.append(activation())
        super().__init__(*layers)


class Task(pl.LightningModule):
    """A supervised trainer: ``loss(net(x), y)`` on ``(x, y)`` batches, logged as ``train_loss`` and
    ``val_loss``. ``make_optimizer(net)`` builds the optimizer (it is handed the network, so it may pick
    parameter groups); ``make_schedule(optimizer)`` an optional scheduler, stepped every ``frequency``
    ``interval`` (``"step"`` or ``"epoch"``), monitoring ``val_loss`` when ``monitor`` (ReduceLROnPlateau)."""

    def __init__(self, net: nn.Module, loss: Callable[[Any, Tensor], Tensor], make_optimizer: MakeOptimizer,
                 make_schedule: MakeSchedule | None = None, interval: str = "step", monitor: bool = False,
                 frequency: int = 1) -> None:  # fmt: skip
        super().__init__()
        self.net = net
        self.loss = loss
        self.make_optimizer, self.make_schedule = make_optimizer, make_schedule
        self.interval, self.monitor, self.frequency = interval, monitor, frequency

    def forward(self, x: Any) -> Any:
        return self.net(x)

    def loss_of(self, batch: Any) -> Tensor:
        x, y = batch
        return self.loss(self.net(x), y)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        loss = self.loss_of(batch)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        self.log("val_loss", self.loss_of(batch))

    def configure_optimizers(self) -> Any:
        optimizer = self.make_optimizer(self.net)
        if self.make_schedule is None:
            return optimizer
        schedule: dict[str, Any] = {
            "scheduler": self.make_schedule(optimizer),
            "interval": self.interval,
            "frequency": self.frequency,
        }
        if self.monitor:
            schedule["monitor"] = "val_loss"
        return {"optimizer": optimizer, "lr_scheduler": schedule}


# ------------------------------------------------------------------------------------------ digit adder
class DigitAdder(nn.Module):
    """Two 8x8 digits side by side (``(N, 128)``) to the logits of their sum (19 classes, 0..18): one digit
    encoder shared by both images, a head on the two codes."""

    def __init__(self, width: int = 128, code: int = 32) -> None:
        super().__init__()
        self.encoder = MLP([64, width, code])
        self.head = MLP([2 * code, width, 19])

    def forward(self, x: Tensor) -> Tensor:
        a, b = x[:, :64], x[:, 64:]
        return self.head(torch.cat([F.relu(self.encoder(a)), F.relu(self.encoder(b))], 1))


# ------------------------------------------------------------------------------------------ mixture density
class MDN(nn.Module):
    """Bishop's mixture density network: a ReLU body and three heads, the logits, means and log standard
    deviations of ``components`` Gaussians of a scalar target given a scalar input."""

    def __init__(self, components: int = 5, width: int = 64, inputs: int = 1) -> None:
        super().__init__()
        self.body = MLP([inputs, width, width])
        self.act = nn.ReLU()
        self.pi, self.mu, self.log_sigma = (nn.Linear(width, components) for _ in range(3))

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        h = self.act(self.body(x))
        return self.pi(h), self.mu(h), self.log_sigma(h)


def mdn_nll(out: tuple[Tensor, Tensor, Tensor], y: Tensor) -> Tensor:
    """The mixture's mean negative log-likelihood of ``y`` ``(N, 1)`` (nats; negative for a sharp fit)."""
    logits, mu, log_sigma = out
    log_normal = -0.5 * ((y - mu) / log_sigma.exp()) ** 2 - log_sigma - 0.5 * math.log(2 * math.pi)
    return -torch.logsumexp(F.log_softmax(logits, 1) + log_normal, 1).mean()


class MDNTask(Task):
    """A :class:`Task` of an :class:`MDN` trained on its negative log-likelihood."""

    def __init__(self, net: MDN, make_optimizer: MakeOptimizer, make_schedule: MakeSchedule | None = None,
                 interval: str = "step") -> None:  # fmt: skip
        super().__init__(net, mdn_nll, make_optimizer, make_schedule, interval)


# ------------------------------------------------------------------------------------------ graphs
class GraphNet(nn.Module):
    """A dense message-passing network for small graphs padded to one size: a batch is ``(adjacency (B, N,
    N), node features (B, N, F), node mask (B, N))``; ``layers`` rounds of ``h <- relu(W [h, mean of the
    neighbours' h])``, a masked mean over the nodes and an MLP readout to one number per graph."""

    def __init__(self, features: int = 8, width: int = 64, layers: int = 2) -> None:
        super().__init__()
        self.encode = nn.Linear(features, width)
        self.messages = nn.ModuleList(nn.Linear(2 * width, width) for _ in range(layers))
        self.readout = MLP([width, width, 1])

    def forward(self, graph: tuple[Tensor, Tensor, Tensor]) -> Tensor:
        adj, x, mask = graph
        m = mask.unsqueeze(-1)
        h = F.relu(self.encode(x)) * m
        degree = adj.sum(-1, keepdim=True).clamp(min=1.0)
        for layer in self.messages:
            h = F.relu(layer(torch.cat([h, adj @ h / degree], -1))) * m
        return self.readout(h.sum(1) / m.sum(1))


# ------------------------------------------------------------------------------------------ physics-informed
class PINN(nn.Module):
    """``u(t)`` on ``[0, horizon]``: a tanh MLP of ``t`` mapped to ``[-1, 1]``, ``depth`` hidden layers."""

    def __init__(self, horizon: float, width: int = 32, depth: int = 2) -> None:
        super().__init__()
        self.horizon = horizon
        self.net = MLP([1] + [width] * depth + [1], nn.Tanh)

    def forward(self, t: Tensor) -> Tensor:
        return self.net(2 * t / self.horizon - 1)


class PINNTask(Task):
    """A physics-informed fit of the logistic ODE ``u' = r u (1 - u)``: the loss is the MSE on a few noisy
    observations ``(t_obs, u_obs)`` plus ``weight`` times the mean squared ODE residual at a batch of
    collocation times (the derivative by autograd). Validation batches ``(t, u_exact)``: the MSE to the exact
    solution over the whole horizon."""

    def __init__(self, net: PINN, observed: tuple[Tensor, Tensor], rate: float, make_optimizer: MakeOptimizer,
                 make_schedule: MakeSchedule | None = None, interval: str = "step", monitor: bool = False,
                 weight: float = 1.0) -> None:  # fmt: skip
        super().__init__(net, F.mse_loss, make_optimizer, make_schedule, interval, monitor)
        self.register_buffer("t_obs", observed[0])
        self.register_buffer("u_obs", observed[1])
        self.rate, self.weight = rate, weight

    def residual(self, t: Tensor) -> Tensor:
        t = t.detach().requires_grad_(True)
        u = self.net(t)
        (du,) = torch.autograd.grad(u.sum(), t, create_graph=True)
        return du - self.rate * u * (1 - u)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        (t,) = batch
        data = F.mse_loss(self.net(self.t_obs), self.u_obs)
        loss = data + self.weight * self.residual(t).pow(2).mean()
        self.log("train_loss", loss)
        return loss
