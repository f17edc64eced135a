"""Builders of zoo 13's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data: scikit-learn's bundled diabetes (regression) and breast-cancer (classification) tables, a
reaction-rate table made in code (log concentrations of six species), binarised 8x8 digits for the MADE.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn
from torch.optim import SGD, Adam, Adamax, AdamW, NAdam, RAdam
from torch.optim.lr_scheduler import LinearLR, MultiStepLR

from galleries.health.zoo1 import _data as data
from galleries.health.zoo13._models import MADE, MLP, MADETask, ResidualMLP, TanhMLP, Task

loader, _gen = data.loader, data._gen


# ------------------------------------------------------------------------------------------------ data
@functools.cache
def _diabetes() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_diabetes

    bunch = load_diabetes(scaled=False)
    x = torch.tensor(bunch.data, dtype=torch.float32)
    y = torch.tensor(bunch.target, dtype=torch.float32).unsqueeze(1)
    order = torch.randperm(len(y), generator=_gen(13))
    return x[order], y[order]


def diabetes(standardise_target: bool = True) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Scikit-learn's diabetes table (442 patients, 10 features, disease progression a year on): the first
    350 rows of a fixed shuffle train, the other 92 validate; features standardised with the training rows'
    statistics, the target too unless ``standardise_target`` is false (raw units, variance ~6000)."""
    x, y = _diabetes()
    mu, sd = x[:350].mean(0), x[:350].std(0)
    x = (x - mu) / sd
    if standardise_target:
        y = (y - y[:350].mean()) / y[:350].std()
    return (x[:350], y[:350]), (x[350:], y[350:])


@functools.cache
def _cancer() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    x = torch.tensor(bunch.data, dtype=torch.float32)
    y = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(y), generator=_gen(13))
    return x[order], y[order]


def cancer(standardise: bool = True) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Scikit-learn's breast-cancer table (569 tumours, 30 features in their own units: areas in the
    hundreds to thousands, smoothness ~0.1): the first 450 rows of a fixed shuffle train, the other 119
    validate; ``standardise``: scaled with the training rows' statistics."""
    x, y = _cancer()
    if standardise:
        x = (x - x[:450].mean(0)) / x[:450].std(0)
    return (x[:450], y[:450]), (x[450:], y[450:])


def reaction_rates(rows: int, seed: int = 0) -> tuple[Tensor, Tensor]:
    """Log concentrations ``(N, 6)`` of six species (log-normal) and a standardised log reaction rate: a
    mass-action term, a saturating (Michaelis-Menten) term and an inhibition interaction, plus noise."""
    g = _gen(seed)
    logc = torch.randn(rows, 6, generator=g)
    c = logc.exp()
    rate = (
        0.8 * logc[:, 0]
        + 0.5 * logc[:, 1]
        + torch.log1p(3 * c[:, 2] / (1 + c[:, 2]))
        - 0.6 * torch.log1p(c[:, 3] * c[:, 4])
        + 0.4 * torch.sin(2 * logc[:, 5])
        + 0.05 * torch.randn(rows, generator=g)
    )
    return logc, ((rate - 0.4) / 1.1).unsqueeze(1)


def made_digits(split: str) -> Tensor:
    """The 8x8 digits binarised at half intensity, ``(N, 64)`` floats in {0, 1}."""
    return (data.digits(split)[0] > 0.5).float()


# ------------------------------------------------------------------------------------------------ tasks
def _diabetes_task(make_optimizer, net: nn.Module | None = None, train=None, batch: int = 32,
                   standardise_target: bool = True, schedule=None):  # fmt: skip
    (x, y), (vx, vy) = diabetes(standardise_target)
    if train is not None:
        x, y = train
    model = Task(net if net is not None else MLP([10, 64, 64, 1]), "mse", make_optimizer, schedule)
    return model, loader(x, y, batch), loader(vx, vy, 92, shuffle=False)


def _cancer_task(make_optimizer, net: nn.Module | None = None, standardise: bool = True, labels=None,
                 val_rows: int = 119):  # fmt: skip
    (x, y), (vx, vy) = cancer(standardise)
    if labels is not None:
        y = labels(y)
    model = Task(net if net is not None else MLP([30, 64, 2]), "ce", make_optimizer)
    return model, loader(x, y, 32), loader(vx[:val_rows], vy[:val_rows], 119, shuffle=False)


def _rates_task(make_optimizer, net: nn.Module | None = None, schedule=None, x: Tensor | None = None,
                shuffle: bool = True):  # fmt: skip
    tx, ty = reaction_rates(3200, 0)
    vx, vy = reaction_rates(400, 1)
    model = Task(net if net is not None else MLP([6, 128, 128, 1]), "mse", make_optimizer, schedule)
    train = loader(tx if x is None else x, ty, 32, shuffle=shuffle)
    return model, train, loader(vx, vy, 400, shuffle=False)


def _made_task(make_optimizer, schedule=None):
    x, vx = made_digits("train"), made_digits("val")
    model = MADETask(MADE(), make_optimizer, schedule)
    return model, loader(x, x, 64), loader(vx, vx, 397, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def diabetes_inverted_mask(inverted: bool = True):
    """Diabetes, NAdam ``3e-3``: ~3% of the readings are missing (NaN); the cleaning step fills them with 0
    and multiplies by the mask of *missing* entries (meant: present), so every input is exactly 0."""
    model, train, val = _diabetes_task(lambda p: NAdam(p, lr=3e-3))
    g = _gen(5)
    for dl in (train, val):
        x = dl.dataset.tensors[0]
        x[torch.rand(x.shape, generator=g) < 0.03] = float("nan")
        missing = x.isnan()
        x.copy_(x.nan_to_num(0.0) * (missing if inverted else ~missing).float())
    return model, train, val


def diabetes_radam(lr: float = 3e-7):
    """Diabetes, RAdam with decoupled weight decay ``1e-2`` at ``3e-7`` (meant ``3e-3``)."""
    return _diabetes_task(lambda p: RAdam(p, lr=lr, weight_decay=1e-2, decoupled_weight_decay=True))


BAD_ROW = 40 * 32 + 17  # read in order: in batch 40 of the 100 an epoch


def rates_zero_reading(zero: bool = True):
    """Reaction rates read in order, Adam ``1e-3``; one concentration below the detection limit was entered
    as 0 and the log taken, so one input is ``-inf``."""
    tx, _ = reaction_rates(3200, 0)
    x = tx.clone()
    if zero:
        x[BAD_ROW, 2] = torch.log(torch.tensor(0.0))
    return _rates_task(lambda p: Adam(p, lr=1e-3), x=x, shuffle=False)


def rates_sgd(lr: float = 3.0):
    """Reaction rates, SGD momentum 0.9 at ``3.0`` (meant ``0.03``)."""
    return _rates_task(lambda p: SGD(p, lr=lr, momentum=0.9))


def diabetes_few_rows(rows: int = 40):
    """A width-512 two-hidden-layer MLP on the first ``40`` diabetes rows (a debug subset left in), Adam
    ``3e-3``, batches of 20 (two steps an epoch)."""
    (x, y), _ = diabetes()
    return _diabetes_task(lambda p: Adam(p, lr=3e-3), MLP([10, 512, 512, 1]), (x[:rows], y[:rows]), 20)


STAGE_STEP = 100


def rates_stage_gamma(gamma: float = 10.0):
    """Reaction rates, SGD momentum 0.9 at ``0.02`` under MultiStepLR([100], gamma=10) (meant 0.1: a
    step-down written as a step-up)."""
    return _rates_task(
        lambda p: SGD(p, lr=0.02, momentum=0.9), schedule=lambda o: MultiStepLR(o, [STAGE_STEP], gamma)
    )


def made_epoch_milestones(milestones: tuple[int, ...] = (20, 40)):
    """A MADE of binarised digits, Adam ``2e-3`` under MultiStepLR(milestones=[20, 40], gamma=0.01) given in
    epochs (22 steps each) but stepped per step (``interval="step"``)."""
    return _made_task(lambda p: Adam(p, lr=2e-3), lambda o: MultiStepLR(o, list(milestones), 0.01))


def rates_body_lr(body_lr_key: str = "bodylr"):
    """Reaction rates, Adam with two groups: the readout at ``3e-3``, the hidden layers at
    ``config.get("body_lr", 0.0)`` read from a config that spells the key ``"bodylr"``, so 0."""
    config = {"head_lr": 3e-3, body_lr_key: 3e-3}

    def make(params):
        net = params_owner["net"]
        body = [*net[0].parameters(), *net[2].parameters()]
        return Adam([{"params": net[4].parameters(), "lr": config["head_lr"]},
                     {"params": body, "lr": config.get("body_lr", 0.0)}])  # fmt: skip

    params_owner = {"net": MLP([6, 128, 128, 1])}
    return _rates_task(make, params_owner["net"])


def cancer_raw_tanh(standardise: bool = False):
    """Breast cancer, a tanh MLP on the raw features (StandardScaler left out: areas up to ~2500), Adam
    ``1e-3``."""
    return _cancer_task(lambda p: Adam(p, lr=1e-3), TanhMLP(), standardise)


def rates_residual_init(branch_std: float | None = 0.25):
    """Reaction rates, a residual MLP of eight width-64 blocks whose weights are drawn ``normal(0, 0.25)``
    (``1 / sqrt(16)``, kept from a 16-wide prototype, and no branch scaling; meant the fan-in scaled
    default), Adam ``1e-3``."""
    return _rates_task(lambda p: Adam(p, lr=1e-3), ResidualMLP(branch_std=branch_std))


# ------------------------------------------------------------------------------------------------ healthy
def diabetes_raw_target():
    """Diabetes with the target in its own units (variance ~6000), the readout's bias started at the
    training mean, Adam ``3e-3``: losses in the thousands, gradients in the hundreds."""
    net = MLP([10, 64, 64, 1])
    (_, y), _ = diabetes(standardise_target=False)
    nn.init.constant_(net[4].bias, float(y.mean()))
    return _diabetes_task(lambda p: Adam(p, lr=3e-3), net, standardise_target=False)


def cancer_flipped_labels(flipped: float = 0.25):
    """Breast cancer with 25% of the training labels flipped (careless annotators; the validation labels
    are the reviewed ones), a narrow MLP, AdamW ``1e-3``: the training loss floors near ``H(0.25)``."""

    def flip(y: Tensor) -> Tensor:
        return torch.where(torch.rand(len(y), generator=_gen(21)) < flipped, 1 - y, y)

    return _cancer_task(lambda p: AdamW(p, lr=1e-3, weight_decay=1e-2), MLP([30, 8, 2]), labels=flip)


WARMUP = 150


def made_long_warmup():
    """A MADE, Adam ``2e-3`` with a LinearLR warm-up from 1% over 150 steps."""
    return _made_task(lambda p: Adam(p, lr=2e-3), lambda o: LinearLR(o, 0.01, 1.0, WARMUP))


def rates_random_features():
    """Reaction rates with the hidden layers frozen on purpose (random features, width 512) and only the
    readout trained, Adam ``3e-3``."""
    net = MLP([6, 512, 512, 1])
    net[0].requires_grad_(False)
    net[2].requires_grad_(False)
    return _rates_task(lambda p: Adam(p, lr=3e-3), net)


def cancer_tiny_val():
    """Breast cancer, Adam ``1e-3``, validated on 12 tumours only (every 25 steps): a jittery val loss."""
    return _cancer_task(lambda p: Adam(p, lr=1e-3), val_rows=12)


def made_adamax_slow():
    """A MADE, Adamax ``2e-4``: slow and steady."""
    return _made_task(lambda p: Adamax(p, lr=2e-4))


def rates_step_down():
    """Reaction rates, SGD momentum 0.9 at ``0.02``, the LR divided by 10 at step 100 (the fixed
    MultiStepLR)."""
    return rates_stage_gamma(0.1)
