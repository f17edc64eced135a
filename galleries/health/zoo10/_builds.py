"""Builders of zoo 10's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: scikit-learn's digits (the contrastive encoder, the Mixer) or made in code here (a damped
pendulum's states and where they are three seconds later).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adam, AdamW
from torch.optim.lr_scheduler import ChainedScheduler, ConstantLR, CosineAnnealingWarmRestarts, StepLR
from torch.utils.data import DataLoader, Dataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo10._models import (
    ContrastiveTask,
    Encoder,
    EulerStepper,
    GaussianNLLTask,
    Mixer,
    Task,
    UnfreezeTask,
)

loader, _gen = data.loader, data._gen


# ------------------------------------------------------------------------------------------------ data
def _pendulum_field(s: Tensor) -> Tensor:
    theta, omega = s.unbind(1)
    return torch.stack([omega, -torch.sin(theta) - 0.2 * omega], 1)


def pendulum(rows: int, seed: int = 0, horizon: float = 3.0) -> tuple[Tensor, Tensor]:
    """Damped pendulum states ``(theta, omega)`` (angles in radians) and the states ``horizon`` seconds later
    (RK4, 120 steps)."""
    g = _gen(seed)
    x = torch.stack([4 * torch.rand(rows, generator=g) - 2, 3 * torch.rand(rows, generator=g) - 1.5], 1)
    return x, _integrate(x, horizon)


def _integrate(s: Tensor, horizon: float = 3.0, steps: int = 120) -> Tensor:
    h = horizon / steps
    for _ in range(steps):
        k1 = _pendulum_field(s)
        k2 = _pendulum_field(s + h / 2 * k1)
        k3 = _pendulum_field(s + h / 2 * k2)
        k4 = _pendulum_field(s + h * k3)
        s = s + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return s


def _digits(images: bool = False) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    return (*data.digits("train", images), *data.digits("val", images))


# ------------------------------------------------------------------------------------------------ tasks
def _contrastive(make_optimizer, net: Encoder | None = None, **kw):
    tx, ty, vx, vy = _digits()
    model = ContrastiveTask(net or Encoder(), make_optimizer, **kw)
    return model, loader(tx, ty, 64), loader(vx, vy, 397, shuffle=False)


def _pendulum(make_optimizer, x: Tensor | None = None, y: Tensor | None = None, net=None, val_rows: int = 500,
              loss: str = "mse", shuffle: bool = True, schedule=None):  # fmt: skip
    (tx, ty), (vx, vy) = pendulum(2000, 0), pendulum(val_rows, 1)
    tx, ty = (tx if x is None else x), (ty if y is None else y)
    net = net or EulerStepper()
    model = (
        GaussianNLLTask(net, make_optimizer) if loss == "nll" else Task(net, "mse", make_optimizer, schedule)
    )
    return model, loader(tx, ty, 32, shuffle=shuffle), loader(vx, vy, val_rows, shuffle=False)


def _mixer(make_optimizer, schedule=None, rows: int = 1400, batch: int = 32, labels: Tensor | None = None):
    tx, ty, vx, vy = _digits(images=True)
    model = Task(Mixer(), "ce", make_optimizer, schedule)
    ty = ty if labels is None else labels
    return model, loader(tx[:rows], ty[:rows], batch), loader(vx, vy, 397, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def contrastive_temperature(multiply: bool = True):
    """InfoNCE on digits, Adam ``1e-3``, the cosine similarities multiplied by the temperature 0.1 (meant
    divided by it)."""
    return _contrastive(lambda p: Adam(p, lr=1e-3), multiply=multiply)


def contrastive_dampening(dampening: float = 0.999):
    """InfoNCE on digits, SGD ``0.1`` with momentum 0.9 and ``dampening=0.999`` (set like Adam's beta2; meant
    0): after the first step each gradient enters the momentum at a thousandth, an effective step 100x too
    small."""
    return _contrastive(lambda p: SGD(p, lr=0.1, momentum=0.9, dampening=dampening))


def pendulum_targets_shuffled(shuffled: bool = True):
    """The pendulum's flow map, Adam ``3e-3``; the targets alone were shuffled "to mix the data" (a
    ``randperm`` applied to ``y`` only), so no state is paired with its own future."""
    y = pendulum(2000, 0)[1]
    if shuffled:
        y = y[torch.randperm(len(y), generator=_gen(5))]
    return _pendulum(lambda p: Adam(p, lr=3e-3), y=y)


INF_ROW = 55 * 32 + 11  # read in order: in batch 55 of the 63 an epoch


def pendulum_inf_target(bad: bool = True):
    """The pendulum's flow map, Adam ``3e-3``, read in order; one target row holds ``inf`` (a failed
    simulation marked ``float("inf")`` by the script that wrote the table)."""
    y = pendulum(2000, 0)[1].clone()
    if bad:
        y[INF_ROW, 1] = math.inf
    return _pendulum(lambda p: Adam(p, lr=3e-3), y=y, shuffle=False)


DEGREE_ROWS = (12 * 32 + 3, 47 * 32 + 20)  # read in order: batches 12 and 47 of the 63 an epoch


def pendulum_degrees(bad: bool = True):
    """The pendulum's flow map, Adam ``3e-3``, read in order; two rows (state and target) were entered in
    degrees, not radians (x57)."""
    x, y = (t.clone() for t in pendulum(2000, 0))
    if bad:
        for row in DEGREE_ROWS:
            x[row] *= 180 / math.pi
            y[row] *= 180 / math.pi
    return _pendulum(lambda p: Adam(p, lr=3e-3), x=x, y=y, shuffle=False)


def pendulum_adamw_lr(lr: float = 0.3):
    """The pendulum's flow map, AdamW at ``0.3`` (meant ``3e-3``), read in order."""
    return _pendulum(lambda p: AdamW(p, lr=lr, weight_decay=0.01), shuffle=False)


def contrastive_tanh_init(std: float | None = 1.0):
    """InfoNCE on digits with a tanh encoder, Adam ``1e-3``; its body's layers initialised from ``N(0, 1)``
    (``std=None``: PyTorch's default, the fix)."""
    net = Encoder(act=nn.Tanh)
    if std is not None:
        for layer in net.body:
            if isinstance(layer, nn.Linear):
                nn.init.normal_(layer.weight, std=std)
    return _contrastive(lambda p: Adam(p, lr=1e-3), net=net)


def pendulum_field_init(std: float | None = 1.0):
    """The pendulum's flow map, Adam ``3e-3``; every layer of the tanh vector field initialised from
    ``N(0, 1)`` (``std=None``: PyTorch's default, the fix)."""
    net = EulerStepper()
    if std is not None:
        for layer in net.field:
            if isinstance(layer, nn.Linear):
                nn.init.normal_(layer.weight, std=std)
    return _pendulum(lambda p: Adam(p, lr=3e-3), net=net)


def pendulum_sgd(lr: float = 0.1):
    """The pendulum's flow map, SGD at ``0.1`` with momentum 0.9 and dampening 0.5 (meant ``0.01``)."""
    return _pendulum(lambda p: SGD(p, lr=lr, momentum=0.9, dampening=0.5))


class SimulatedPendulum(Dataset):
    """Pendulum states whose targets are integrated on every read (RK4, 24 steps, one state at a time): a
    dataset that simulates instead of caching."""

    def __init__(self, x: Tensor) -> None:
        self.x = x

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        return self.x[i], _integrate(self.x[i : i + 1], steps=24)[0]


def pendulum_simulated_on_read(cached: bool = False):
    """The pendulum's flow map, Adam ``3e-3``; the dataset integrates each state's future on every read (no
    cache, no workers; ``cached``: the table computed once, the fix)."""
    model, train, _ = _pendulum(lambda p: Adam(p, lr=3e-3))
    if cached:
        return model, train, None
    x = train.dataset.tensors[0]
    return model, DataLoader(SimulatedPendulum(x), 32, shuffle=True, generator=_gen(0)), None


UNFREEZE_STEP = 100


def mixer_unfreeze(widen: bool = False):
    """A Mixer fine-tune: the mixer blocks frozen for 100 steps, then ``requires_grad_(True)``; Adam
    ``3e-3`` built at the start over the trainable parameters, never given the blocks (``widen``: the fix)."""
    tx, ty, vx, vy = _digits(images=True)
    net = Mixer()
    model = UnfreezeTask(net, net.body, lambda p: Adam(p, lr=3e-3), UNFREEZE_STEP, widen)
    return model, loader(tx, ty, 32), loader(vx, vy, 397, shuffle=False)


def mixer_step_decay(per_step: bool = True):
    """A Mixer, Adam ``3e-3`` under ``StepLR(step_size=10, gamma=0.1)`` meant per epoch (44 steps) and
    stepped every batch."""
    if not per_step:
        return _mixer(lambda p: Adam(p, lr=3e-3), lambda o: StepLR(o, 440, 0.1))
    return _mixer(lambda p: Adam(p, lr=3e-3), lambda o: StepLR(o, 10, 0.1))


def mixer_few_rows(rows: int = 32):
    """A Mixer on ``32`` digits (a debug subset left in), Adam ``3e-3``, batch 32."""
    return _mixer(lambda p: Adam(p, lr=3e-3), rows=rows)


# ------------------------------------------------------------------------------------------------ healthy
def mixer_label_noise(redrawn: float = 0.3):
    """A Mixer, Adam ``3e-3``, 30% of the training labels redrawn at random."""
    y = data.digits("train")[1].clone()
    g = _gen(11)
    mask = torch.rand(len(y), generator=g) < redrawn
    y[mask] = torch.randint(0, 10, (int(mask.sum()),), generator=g)
    return _mixer(lambda p: Adam(p, lr=3e-3), labels=y)


HOLD_STEPS = 120


def mixer_long_hold():
    """A Mixer, Adam ``3e-3`` held at 1% for 120 steps (``ConstantLR`` chained with a gentle
    ``StepLR``)."""

    def schedule(o):
        return ChainedScheduler([ConstantLR(o, 0.01, HOLD_STEPS), StepLR(o, 100, 0.7)])

    return _mixer(lambda p: Adam(p, lr=3e-3), schedule)


def pendulum_restarts():
    """The pendulum's flow map, Adam ``3e-3`` under cosine annealing with warm restarts every 60 steps."""
    return _pendulum(lambda p: Adam(p, lr=3e-3), schedule=lambda o: CosineAnnealingWarmRestarts(o, 60))


def contrastive_sgd():
    """InfoNCE on digits, SGD ``0.1`` with momentum 0.9 (no dampening): large first gradients, then it
    learns."""
    return contrastive_dampening(0.0)


def contrastive_fixed_projector():
    """InfoNCE on digits, Adam ``1e-3``, the projection head a fixed random projection on purpose."""
    net = Encoder()
    net.projector.requires_grad_(False)
    return _contrastive(lambda p: Adam(p, lr=1e-3), net=net)


def pendulum_gaussian_nll():
    """The pendulum's flow map, Adam ``3e-3``, the full Gaussian NLL with a fixed variance 4 (a constant
    ``0.5 log(8 pi) ~ 1.61`` in the loss)."""
    return _pendulum(lambda p: Adam(p, lr=3e-3), loss="nll")


def pendulum_tiny_val():
    """The pendulum's flow map, Adam ``3e-3``, validated on 8 states."""
    return _pendulum(lambda p: Adam(p, lr=3e-3), val_rows=8)


def mixer_adam_1e2():
    """A Mixer, Adam at ``1e-2`` (3x the usual): aggressive and stable."""
    return _mixer(lambda p: Adam(p, lr=1e-2))


def contrastive_slow():
    """InfoNCE on digits, Adam ``1e-4``: slow and steady."""
    return _contrastive(lambda p: Adam(p, lr=1e-4))
