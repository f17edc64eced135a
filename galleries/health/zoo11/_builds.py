"""Builders of zoo 11's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: made in code here (damped oscillators integrated with RK4, a four-task regression) or
scikit-learn's bundled wine and digits.
"""

from __future__ import annotations

import functools
import math

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adafactor, Adam
from torch.optim.lr_scheduler import ChainedScheduler, ExponentialLR, LinearLR, StepLR
from torch.utils.data import DataLoader, Dataset

from galleries.health.zoo1 import _data as data
from galleries.health.zoo11._models import (
    MLP,
    ContrastiveTask,
    EulerStepper,
    FiLMNet,
    HandDecayTask,
    OffsetTask,
    Task,
)

loader, _gen = data.loader, data._gen


# ------------------------------------------------------------------------------------------------ data
def _rk4(state: Tensor, omega: Tensor, zeta: Tensor, t: float, steps: int) -> Tensor:
    """Integrate ``x'' = -omega^2 x - 2 zeta omega x'`` from ``state = (x, v)`` to time ``t`` (RK4)."""

    def rate(s: Tensor) -> Tensor:
        return torch.stack([s[..., 1], -(omega**2) * s[..., 0] - 2 * zeta * omega * s[..., 1]], -1)

    h = t / steps
    for _ in range(steps):
        k1 = rate(state)
        k2 = rate(state + h / 2 * k1)
        k3 = rate(state + h / 2 * k2)
        k4 = rate(state + h * k3)
        state = state + h / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    return state


def oscillators(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Inputs ``(x0, v0, omega, zeta)`` of damped oscillators (omega in [0.5, 2], zeta in [0, 0.5]), the
    target their state ``(x, v)`` at ``t = 2``."""
    g = _gen(seed)
    state = torch.randn(rows, 2, generator=g)
    omega = 0.5 + 1.5 * torch.rand(rows, generator=g)
    zeta = 0.5 * torch.rand(rows, generator=g)
    x = torch.cat([state, omega[:, None], zeta[:, None]], 1)
    return x, _rk4(state, omega, zeta, 2.0, 200)


def four_tasks(rows: int, seed: int = 0, noise: float = 0.1) -> tuple[Tensor, Tensor]:
    """Six standard features and a task's one-hot code (four tasks); each task is its own smooth law of the
    features, plus Gaussian noise of std ``noise``."""
    w = torch.randn(4, 6, generator=_gen(77))
    g = _gen(seed)
    x = torch.randn(rows, 6, generator=g)
    task = torch.randint(0, 4, (rows,), generator=g)
    s = (x * w[task]).sum(1) / math.sqrt(6)
    laws = torch.stack([torch.sin(2 * s), s**2 - 1, torch.tanh(3 * s), s * x[:, 0]], 1)
    y = laws[torch.arange(rows), task] + noise * torch.randn(rows, generator=g)
    return torch.cat([x, nn.functional.one_hot(task, 4).float()], 1), y.unsqueeze(1)


@functools.cache
def _wine() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_wine

    bunch = load_wine()
    x = torch.tensor(bunch.data, dtype=torch.float32)
    y = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=_gen(5))
    return x[order], y[order]


def wine(val_rows: int = 48) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Scikit-learn's wine (178 rows, 13 features, 3 cultivars), standardised with the training rows'
    statistics: the first ``178 - val_rows`` rows of a fixed shuffle train, the rest validate."""
    x, y = _wine()
    n = len(y) - val_rows
    mu, sd = x[:n].mean(0), x[:n].std(0)
    x = (x - mu) / sd
    return x[:n], y[:n], x[n:], y[n:]


# ------------------------------------------------------------------------------------------------ tasks
def _ode(
    make_optimizer, net: nn.Module | None = None, x: Tensor | None = None, schedule=None, rows: int = 3000
):
    (tx, ty), (vx, vy) = oscillators(rows, 0), oscillators(600, 1)
    model = Task(net or EulerStepper(), "mse", make_optimizer, schedule)
    shuffle = x is None  # given inputs are read in order
    return model, loader(tx if x is None else x, ty, 32, shuffle=shuffle), loader(vx, vy, 600, shuffle=False)


def _film(make_optimizer, schedule=None, x: Tensor | None = None, rows: int = 3000, noise: float = 0.1,
          batch: int = 32, net: nn.Module | None = None, model: Task | None = None):  # fmt: skip
    (tx, ty), (vx, vy) = four_tasks(rows, 0, noise), four_tasks(600, 1, noise)
    model = model or Task(net or FiLMNet(), "mse", make_optimizer, schedule)
    shuffle = x is None
    train = loader(tx if x is None else x, ty, batch, shuffle=shuffle)
    return model, train, loader(vx, vy, 600, shuffle=False)


def _wine_task(model: Task, val_rows: int = 48):
    tx, ty, vx, vy = wine(val_rows)
    return model, loader(tx, ty, 16), loader(vx, vy, 64, shuffle=False)


def _contrastive(make_optimizer, schedule=None, shuffled_apart: bool = False):
    tx, _, vx, _ = (*data.digits("train"), *data.digits("val"))

    def pairs(x: Tensor, seed: int) -> Tensor:
        return x[torch.randperm(len(x), generator=_gen(seed))] if shuffled_apart else x

    model = ContrastiveTask(MLP([64, 128, 32]), make_optimizer, schedule)
    return model, loader(tx, pairs(tx, 3), 64), loader(vx, pairs(vx, 4), 397, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def ode_dampening(dampening: float = 0.99):
    """The Euler-stepped ODE regressor, SGD ``0.05`` with momentum 0.9 and ``dampening=0.99`` (the
    oscillators' damping copied into the optimizer's argument; meant 0): every step is 100x smaller."""
    return _ode(lambda p: SGD(p, lr=0.05, momentum=0.9, dampening=dampening))


def ode_readout_only(readout_only: bool = True):
    """The Euler-stepped ODE regressor, Adam ``3e-3`` built over ``net.readout.parameters()`` only (left from
    a linear-probe experiment); the encoder and the vector field get gradients and are never stepped."""
    model, train, val = _ode(None)
    model.make_optimizer = lambda p: Adam(model.net.readout.parameters() if readout_only else p, lr=3e-3)
    return model, train, val


def contrastive_shuffled_apart(shuffled_apart: bool = True):
    """InfoNCE on digits, Adam ``1e-3``: each pair's second image comes from a separately shuffled copy of
    the images (the pairing index lost), so the positive is an unrelated digit."""
    return _contrastive(lambda p: Adam(p, lr=1e-3), shuffled_apart=shuffled_apart)


NAN_ROW = 40 * 32 + 11  # read in order: in batch 40 of the 94 an epoch


def film_nan_row(nan: bool = True):
    """The FiLM multi-task regressor, Adam ``2e-3``, read in order; one row's third feature is NaN (a missing
    reading never imputed)."""
    x = four_tasks(3000, 0)[0].clone()
    if nan:
        x[NAN_ROW, 2] = math.nan
    return _film(lambda p: Adam(p, lr=2e-3), x=x)


GROWTH = math.exp(0.015)  # meant math.exp(-0.015): a decay's sign flipped


def film_exponential_growth(gamma: float = GROWTH):
    """The FiLM regressor, SGD ``0.02`` momentum 0.9 under ``ChainedScheduler(LinearLR warm-up over 20
    steps, ExponentialLR(gamma))``; ``gamma = exp(0.015)`` (meant ``exp(-0.015)``) grows the LR 1.5% a
    step."""

    def schedule(o):
        return ChainedScheduler([LinearLR(o, 0.1, 1.0, total_iters=20), ExponentialLR(o, gamma)])

    return _film(lambda p: SGD(p, lr=0.02, momentum=0.9), schedule)


def right_decay_factor(lr: float, wd: float) -> float:
    return 1 - lr * wd


def missing_one_minus(lr: float, wd: float) -> float:
    return lr * wd


def wine_hand_decay(factor=missing_one_minus):
    """A wine MLP, Adam ``1e-3`` with decoupled weight decay 0.01 written by hand as ``p *= lr * wd`` (meant
    ``1 - lr * wd``): every step multiplies every weight by 1e-5."""
    model = HandDecayTask(MLP([13, 64, 64, 3]), lambda p: Adam(p, lr=1e-3), 0.01, factor)
    return _wine_task(model)


def wine_split_swapped(swapped: bool = True):
    """A wide wine MLP (two hidden layers of 256), Adam ``3e-3``, batches of 16, its split swapped
    (``train, val = val, train``): it trains on the 48 rows meant to validate and validates on the 130."""
    return _wine_task(Task(MLP([13, 256, 256, 3]), "ce", lambda p: Adam(p, lr=3e-3)), 130 if swapped else 48)


def contrastive_step_decay(step_size: int = 1):
    """InfoNCE on digits, Adam ``1e-3`` under ``StepLR(step_size=1, gamma=0.1)`` stepped every optimizer step
    (meant every epoch, step_size 10): the LR is divided by 10 each step."""
    return _contrastive(lambda p: Adam(p, lr=1e-3), lambda o: StepLR(o, step_size, 0.1))


OSC_OUTLIER_ROWS = (22 * 32 + 3, 71 * 32 + 30)  # read in order: batches 22 and 71 of the 94 an epoch


def ode_outliers(scale: float | None = 1000.0):
    """The Euler-stepped ODE regressor, Adam ``3e-3``, read in order; two oscillators' final state logged in
    millimetres (x1000)."""
    model, train, val = _ode(lambda p: Adam(p, lr=3e-3), x=oscillators(3000, 0)[0])
    if scale is not None:
        y = train.dataset.tensors[1]
        for row in OSC_OUTLIER_ROWS:
            y[row] *= scale
    return model, train, val


class IntegratingDataset(Dataset):
    """Oscillators whose target is integrated (RK4, ``steps`` steps, one row at a time) on every read: a
    dataset that never caches its targets."""

    def __init__(self, x: Tensor, steps: int) -> None:
        self.x, self.steps = x, steps

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        x = self.x[i]
        return x, _rk4(x[:2], x[2], x[3], 2.0, self.steps)


def ode_integrated_on_read(steps: int = 40):
    """The Euler-stepped ODE regressor, Adam ``3e-3``, batches of 16 oscillators each integrated on read
    (RK4, 40 steps in Python)."""
    model, _, val = _ode(lambda p: Adam(p, lr=3e-3))
    x = oscillators(3000, 0)[0]
    return model, DataLoader(IntegratingDataset(x, steps), 16, shuffle=True, generator=_gen(0)), val


# ------------------------------------------------------------------------------------------------ healthy
def film_offset(offset: float = 64.0):
    """The FiLM regressor whose loss carries a constant 64 (a fixed term of its likelihood), Adam ``2e-3``."""
    return _film(None, model=OffsetTask(FiLMNet(), lambda p: Adam(p, lr=2e-3), offset))


def wine_tiny_validation():
    """A wine MLP, Adam ``3e-3`` with label smoothing 0.1, validated on 12 rows (one row's doubt moves the
    loss a lot)."""
    model = Task(MLP([13, 64, 64, 3]), "ce", lambda p: Adam(p, lr=3e-3), label_smoothing=0.1)
    return _wine_task(model, val_rows=12)


def contrastive_long_warmup():
    """InfoNCE on digits, Adam ``2e-3`` under a ``LinearLR`` warm-up from 1% over 120 steps."""
    return _contrastive(lambda p: Adam(p, lr=2e-3), lambda o: LinearLR(o, 0.01, 1.0, total_iters=120))


def ode_frozen_encoder():
    """The Euler-stepped ODE regressor whose random encoder is frozen on purpose (``requires_grad_(False)``),
    Adam ``3e-3``."""
    net = EulerStepper()
    net.encoder.requires_grad_(False)
    return _ode(lambda p: Adam(p, lr=3e-3), net=net)


def ode_slow_sgd():
    """The Euler-stepped ODE regressor, SGD ``0.05`` with momentum 0.9 and dampening 0.5: slow and steady."""
    return _ode(lambda p: SGD(p, lr=0.05, momentum=0.9, dampening=0.5))


def film_noisy_targets():
    """The FiLM regressor on targets with noise of std 1 (most of their variance), Adam ``2e-3``."""
    return _film(lambda p: Adam(p, lr=2e-3), noise=1.0)


def film_adafactor():
    """The FiLM regressor, Adafactor at ``0.05`` (25x the Adam LR of its siblings: aggressive, stable)."""
    return _film(lambda p: Adafactor(p, lr=0.05))


def film_raw_offset_targets(offset: float = 20.0):
    """The FiLM regressor on targets left uncentred (a level of ``20`` plus the laws), Adam ``1e-2``: the
    first steps' gradients are huge while the output climbs to the level, then ordinary."""
    model, train, val = _film(lambda p: Adam(p, lr=1e-2))
    for dl in (train, val):
        dl.dataset.tensors[1].add_(offset)
    return model, train, val


def wine_bias_init(bias: float | None = -3.0):
    """A wine MLP, Adam ``1e-3``, whose first layer's biases start at ``-3`` (a sparse-coding recipe's
    threshold, for inputs in the hundreds; these are standardised)."""
    net = MLP([13, 64, 64, 3])
    if bias is not None:
        nn.init.constant_(net[0].bias, bias)
    return _wine_task(Task(net, "ce", lambda p: Adam(p, lr=1e-3)))
