"""Builders of zoo 22's runs: each returns ``(model, train_loader, val_loader or None)``.

Problem runs take the knob that holds the bug, so a proof builds the healthy twin (the bug fixed) with the
same code. Data, all made in code from fixed seeds (scikit-learn's bundled 8x8 digits for the captchas):
pairs of frames of a smooth random texture translated by a sub-pixel flow, 4x4 sudoku puzzles from the 288
grids, daily rainfall at a station (dry days and log-normal amounts), captchas of four digits, and
Black-Scholes call prices.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.optim import SGD, Adagrad, Adam, AdamW, RAdam
from torch.optim.lr_scheduler import CosineAnnealingWarmRestarts, LambdaLR, OneCycleLR, PolynomialLR
from torch.utils.data import DataLoader, Dataset, TensorDataset

from galleries.health.zoo22._models import (
    MLP,
    CaptchaNet,
    FlowNet,
    HurdleNet,
    SudokuMLP,
    Task,
    cells_ce,
    chars_ce,
    hurdle_nll,
    mse,
)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def loader(x: Tensor, y: Tensor, batch: int, shuffle: bool = True) -> DataLoader:
    return DataLoader(TensorDataset(x, y), batch_size=batch, shuffle=shuffle)


# ------------------------------------------------------------------------------------------------ flow
FLOW_SCALE = 2.0 / math.sqrt(3.0)  # the std of a flow component drawn uniform in [-2, 2] pixels


@functools.cache
def _flow(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` pairs of 16x16 frames: a smooth random texture (white noise blurred, unit std) and the same
    texture translated by a flow ``(dx, dy)`` uniform in [-2, 2] pixels (bilinear), both cropped to the
    centre; the target is the flow divided by its std."""
    g = _gen(seed)
    noise = torch.randn(rows, 1, 28, 28, generator=g)
    k = torch.exp(-0.5 * (torch.arange(-3, 4.0) / 1.2) ** 2)
    k = (k[:, None] * k[None, :]) / (k.sum() ** 2)
    tex = F.conv2d(noise, k[None, None], padding=3)
    tex = (tex - tex.mean((2, 3), keepdim=True)) / tex.std((2, 3), keepdim=True)
    flow = torch.rand(rows, 2, generator=g) * 4 - 2
    theta = torch.zeros(rows, 2, 3)
    theta[:, 0, 0] = theta[:, 1, 1] = 1.0
    theta[:, :, 2] = -flow * 2 / 28  # sample the texture at x - flow: the content moves by +flow
    grid = F.affine_grid(theta, list(tex.shape), align_corners=False)
    moved = F.grid_sample(tex, grid, mode="bilinear", padding_mode="border", align_corners=False)
    frames = torch.cat([tex, moved], 1)[:, :, 6:22, 6:22]
    return frames, flow / FLOW_SCALE


def flow_data(pixel_units: bool = False) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """3200 training and 400 validation pairs; ``pixel_units``: the frames as the camera stores them,
    ``128 + 48 * texture`` clipped to [0, 255], as the pipeline gives them before normalisation."""
    (x, y), (vx, vy) = _flow(3200, 0), _flow(400, 1)
    if pixel_units:
        x, vx = (128 + 48 * x).clamp(0, 255), (128 + 48 * vx).clamp(0, 255)
    return (x, y), (vx, vy)


def _flow_task(make_optimizer, net: nn.Module | None = None, schedule=None, pixel_units: bool = False,
               epoch_lr_divisor: float | None = None):  # fmt: skip
    (x, y), (vx, vy) = flow_data(pixel_units)
    model = Task(net if net is not None else FlowNet(), mse, make_optimizer, schedule, epoch_lr_divisor)
    return model, loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


# ------------------------------------------------------------------------------------------------ sudoku
@functools.cache
def sudoku_grids() -> Tensor:
    """All 288 solved 4x4 sudoku grids ``(288, 16)``, digits 0-3, in a fixed shuffled order."""
    grids: list[list[int]] = []

    def fill(cells: list[int]) -> None:
        i = len(cells)
        if i == 16:
            grids.append(cells)
            return
        r, c = divmod(i, 4)
        for d in range(4):
            box = [cells[j] for j in range(i) if (j // 4) // 2 == r // 2 and (j % 4) // 2 == c // 2]
            if d in cells[r * 4 : i] or d in cells[c:i:4] or d in box:
                continue
            fill([*cells, d])

    fill([])
    t = torch.tensor(grids)
    return t[torch.randperm(len(t), generator=_gen(22))]


@functools.cache
def _puzzles(rows: int, seed: int, val: bool) -> tuple[Tensor, Tensor]:
    """``rows`` puzzles from the first 240 grids (``val``: the other 48): 6 to 10 cells blanked. Inputs
    one-hot ``(rows, 16, 5)`` (channel 4: blank), targets the digit at blank cells and -100 at clues."""
    g = _gen(seed)
    grids = sudoku_grids()[240:] if val else sudoku_grids()[:240]
    solution = grids[torch.randint(len(grids), (rows,), generator=g)]
    blanks = torch.randint(6, 11, (rows, 1), generator=g)
    blank = torch.rand(rows, 16, generator=g).argsort(1).argsort(1) < blanks
    x = F.one_hot(torch.where(blank, 4, solution), 5).float()
    return x, torch.where(blank, solution, -100)


def sudoku_data() -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    return _puzzles(4000, 0, False), _puzzles(500, 1, True)


def _sudoku_task(make_optimizer, net: nn.Module | None = None, schedule=None, rows: int | None = None,
                 batch: int = 32):  # fmt: skip
    (x, y), (vx, vy) = sudoku_data()
    if rows is not None:
        x, y = x[:rows], y[:rows]
    model = Task(net if net is not None else SudokuMLP(), cells_ce, make_optimizer, schedule)
    return model, loader(x, y, batch), loader(vx, vy, 500, shuffle=False)


# ------------------------------------------------------------------------------------------------ rainfall
@functools.cache
def _rainfall(days: int, seed: int) -> tuple[Tensor, Tensor]:
    """``days`` of standardised weather readings ``(days, 6)`` (humidity, pressure anomaly, temperature,
    wind, cloud cover, a seasonal term) and the day's rain in mm ``(days, 1)``: ~40% wet days, log-normal
    amounts whose log-mean depends on the readings."""
    g = _gen(seed)
    x = torch.randn(days, 6, generator=g)
    logit = 1.6 * x[:, 0] - 1.2 * x[:, 1] + 0.9 * x[:, 4] + 0.6 * torch.sin(2 * x[:, 5]) - 0.5
    wet = torch.rand(days, generator=g) < torch.sigmoid(logit)
    log_amount = 1.2 + 0.7 * x[:, 0] + 0.5 * x[:, 3] - 0.4 * x[:, 1] + 0.5 * torch.randn(days, generator=g)
    return x, torch.where(wet, log_amount.exp(), torch.zeros(days)).unsqueeze(1)


def rainfall_data() -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """6400 training days (200 batches of 32) and 800 validation days."""
    (x, y), (vx, vy) = _rainfall(6400, 0), _rainfall(800, 1)
    return (x.clone(), y.clone()), (vx, vy)


def _rain_task(make_optimizer, net: nn.Module | None = None, x: Tensor | None = None, shuffle: bool = True,
               val_days: int = 800, train: DataLoader | None = None, schedule=None):  # fmt: skip
    (tx, ty), (vx, vy) = rainfall_data()
    model = Task(net if net is not None else HurdleNet(), hurdle_nll, make_optimizer, schedule)
    if train is None:
        train = loader(tx if x is None else x, ty, 32, shuffle=shuffle)
    return model, train, loader(vx[:val_days], vy[:val_days], 800, shuffle=False)


# ------------------------------------------------------------------------------------------------ captcha
@functools.cache
def _digits() -> tuple[Tensor, Tensor]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return torch.tensor(bunch.images, dtype=torch.float32), torch.tensor(bunch.target)


@functools.cache
def _captchas(rows: int, seed: int, val: bool) -> tuple[Tensor, Tensor]:
    """``rows`` captchas of four digits side by side ``(rows, 1, 8, 32)`` as stored: uint8 grey levels
    (digit ink 0-16 scaled by 13, plus clutter noise, at most 250); labels ``(rows, 4)``. Training captchas
    draw from the first 1400 digit images, validation ones from the rest."""
    images, labels = _digits()
    pool = torch.arange(1400, len(labels)) if val else torch.arange(1400)
    g = _gen(seed)
    pick = pool[torch.randint(len(pool), (rows, 4), generator=g)]
    ink = images[pick].permute(0, 2, 1, 3).reshape(rows, 1, 8, 32) * 13
    noisy = ink + 20 * torch.rand(rows, 1, 8, 32, generator=g)
    return noisy.clamp(0, 250).to(torch.uint8), labels[pick]


def captcha_data(noisy_labels: float = 0.0) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    (x, y), (vx, vy) = _captchas(3000, 0, False), _captchas(400, 1, True)
    if noisy_labels:
        g = _gen(31)
        swap = torch.rand(y.shape, generator=g) < noisy_labels
        y = torch.where(swap, torch.randint(10, y.shape, generator=g), y)
    return (x, y), (vx, vy)


def to_unit(images: Tensor) -> Tensor:
    """The stored uint8 grey levels as floats in [0, 1] (the fixed pipeline step)."""
    return images.float() / 255


def floor_to_unit(images: Tensor) -> Tensor:
    """The pipeline step as written: ``images // 255`` on the uint8 tensor (floor division), then floats."""
    return (images // 255).float()


def _captcha_task(make_optimizer, net: nn.Module | None = None, scale=to_unit, noisy_labels: float = 0.0):
    (x, y), (vx, vy) = captcha_data(noisy_labels)
    model = Task(net if net is not None else CaptchaNet(), chars_ce, make_optimizer)
    return model, loader(scale(x), y, 32), loader(scale(vx), vy, 400, shuffle=False)


# ------------------------------------------------------------------------------------------------ pricing
def black_scholes_call(spot: Tensor, strike: Tensor, years: Tensor, rate: Tensor, vol: Tensor) -> Tensor:
    normal = torch.distributions.Normal(0.0, 1.0)
    d1 = (torch.log(spot / strike) + (rate + 0.5 * vol**2) * years) / (vol * years.sqrt())
    d2 = d1 - vol * years.sqrt()
    return spot * normal.cdf(d1) - strike * torch.exp(-rate * years) * normal.cdf(d2)


@functools.cache
def _options(rows: int, seed: int) -> tuple[Tensor, Tensor]:
    """``rows`` European calls on a strike of 100: log-moneyness in [-0.4, 0.4], 0.05 to 2 years, rates 0 to
    5%, volatilities 10% to 50% ``(rows, 4)`` raw, and their Black-Scholes prices in dollars ``(rows, 1)``."""
    g = _gen(seed)
    u = torch.rand(rows, 4, generator=g)
    params = torch.stack([0.8 * u[:, 0] - 0.4, 0.05 + 1.95 * u[:, 1], 0.05 * u[:, 2], 0.1 + 0.4 * u[:, 3]], 1)
    spot = 100 * params[:, 0].exp()
    price = black_scholes_call(spot, torch.full_like(spot, 100.0), params[:, 1], params[:, 2], params[:, 3])
    return params, price.unsqueeze(1)


OPTION_MEAN = torch.tensor([0.0, 1.025, 0.025, 0.3])
OPTION_STD = torch.tensor([0.8, 1.95, 0.05, 0.4]) / math.sqrt(12)


def option_data(dollars: bool = False) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """3200 training and 400 validation options: the inputs standardised (their known uniform ranges); the
    price standardised with the training prices' statistics, or in ``dollars``."""
    (x, y), (vx, vy) = _options(3200, 0), _options(400, 1)
    x, vx = (x - OPTION_MEAN) / OPTION_STD, (vx - OPTION_MEAN) / OPTION_STD
    if not dollars:
        mu, sd = y.mean(), y.std()
        y, vy = (y - mu) / sd, (vy - mu) / sd
    return (x, y), (vx, vy)


def _option_task(make_optimizer, net: nn.Module | None = None, schedule=None, dollars: bool = False,
                 train: DataLoader | None = None):  # fmt: skip
    (x, y), (vx, vy) = option_data(dollars)
    model = Task(net if net is not None else MLP([4, 64, 64, 1]), mse, make_optimizer, schedule)
    return model, train if train is not None else loader(x, y, 32), loader(vx, vy, 400, shuffle=False)


# ------------------------------------------------------------------------------------------------ problems
def captcha_floor_division(scale=floor_to_unit):
    """Captchas, RAdam ``2e-3``; the uint8 images are scaled with ``images // 255`` (floor division, meant
    ``/ 255``): every grey level is below 255, so every input pixel is exactly 0."""
    return _captcha_task(lambda net: RAdam(net.parameters(), lr=2e-3), scale=scale)


def sudoku_adagrad(lr: float = 1e-5):
    """Mini-sudoku, Adagrad at ``1e-5`` (the fine-tuning LR of another config; meant ``3e-2``)."""
    return _sudoku_task(lambda net: Adagrad(net.parameters(), lr=lr))


def option_deep(act: str = "sigmoid"):
    """The pricing surrogate as a ten-hidden-layer width-32 MLP with sigmoid activations and their
    recommended (Xavier) init (the fix: ReLU with He init), SGD with Nesterov momentum 0.9 at ``0.01``."""
    net = MLP([4, *[32] * 10, 1], nn.Sigmoid if act == "sigmoid" else nn.ReLU)
    for layer in net:
        if isinstance(layer, nn.Linear):
            if act == "sigmoid":
                nn.init.xavier_normal_(layer.weight)
            else:
                nn.init.kaiming_normal_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)
    return _option_task(lambda n: SGD(n.parameters(), lr=0.01, momentum=0.9, nesterov=True), net)


OUTAGE_BATCH = 150  # the barometer outage: days of batch 150 (read in date order, 32 days a batch)


def rain_barometer_outage(outage: bool = True):
    """Rainfall read in date order, AdamW ``1e-3``; a barometer outage left five days of the pressure column
    as NaN (the export's missing value) in batch 150, never filled."""
    (x, _), _ = rainfall_data()
    if outage:
        start = OUTAGE_BATCH * 32 + 11
        x[start : start + 5, 1] = float("nan")
    return _rain_task(lambda net: AdamW(net.parameters(), lr=1e-3), x=x, shuffle=False)


def option_nesterov(lr: float = 1.5):
    """The pricing surrogate, SGD with Nesterov momentum 0.9 at ``1.5`` (meant ``0.015``)."""
    return _option_task(lambda n: SGD(n.parameters(), lr=lr, momentum=0.9, nesterov=True))


def sudoku_debug_subset(rows: int | None = 400):
    """Mini-sudoku with the training puzzles cut to the first ``400`` (a debug slice left in), a width-512
    MLP, AdamW ``3e-3``, batches of 100 (four steps an epoch)."""
    return _sudoku_task(lambda net: AdamW(net.parameters(), lr=3e-3), SudokuMLP(512), rows=rows, batch=100)


def flow_epoch_decay(divisor: float = 0.1):
    """Optical flow, SGD with Nesterov momentum 0.9 at ``0.02`` and a hand-written decay hook that divides the
    LR by ``divisor`` at every epoch end (100 steps), given ``0.1`` (a gamma, as for StepLR: meant ``10``)."""
    return _flow_task(
        lambda net: SGD(net.parameters(), lr=0.02, momentum=0.9, nesterov=True), epoch_lr_divisor=divisor
    )


WARMUP = 50
OPTION_LR = 3e-3


def option_warmup_returns_lr(after: float = OPTION_LR):
    """The pricing surrogate, AdamW ``3e-3`` under a LambdaLR warm-up over 50 steps whose lambda returns the
    LR itself after the warm-up (``3e-3``) where LambdaLR wants a factor (``1.0``)."""

    def factor(step: int) -> float:
        return (step + 1) / WARMUP if step < WARMUP else after

    return _option_task(lambda n: AdamW(n.parameters(), lr=OPTION_LR), schedule=lambda o: LambdaLR(o, factor))


def captcha_heads_only(trunk: bool = False):
    """Captchas, RAdam ``2e-3`` over the heads' parameters only (a fine-tuning recipe's optimizer kept,
    though this trunk is new and random); ``trunk``: over every parameter."""
    return _captcha_task(lambda net: RAdam((net if trunk else net.heads).parameters(), lr=2e-3))


def flow_raw_tanh(pixel_units: bool = True):
    """Optical flow with tanh convolutions on the frames in pixel units (0-255: the normalisation step
    dropped), Adam ``1e-3``."""
    return _flow_task(lambda net: Adam(net.parameters(), lr=1e-3), FlowNet(nn.Tanh), pixel_units=pixel_units)


PRIOR_BIAS = -math.log((1 - 0.01) / 0.01)  # a rare-event prior, p = 0.01


def rain_prior_on_body(body: bool = True):
    """Rainfall, Adam ``1e-3``; the rare-event prior bias ``-log(99)`` meant for the rain logit is applied
    with ``net.body.apply`` (meant: the head's logit), so every hidden ReLU starts at a bias of -4.6."""
    net = HurdleNet()

    def prior(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.constant_(module.bias, PRIOR_BIAS)

    if body:
        net.body.apply(prior)
    else:
        with torch.no_grad():
            net.head.bias[0] = PRIOR_BIAS
    return _rain_task(lambda n: Adam(n.parameters(), lr=1e-3), net)


class MonteCarloOptions(Dataset):
    """The pricing surrogate's training options, each label priced on every read by Monte Carlo (``paths``
    terminal prices of a geometric Brownian motion, discounted) in ``__getitem__``, in dollars then
    standardised like the closed-form labels."""

    def __init__(self, paths: int = 40000) -> None:
        self.params, price = _options(3200, 0)
        self.x = (self.params - OPTION_MEAN) / OPTION_STD
        self.mu, self.sd = float(price.mean()), float(price.std())
        self.paths = paths

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        m, years, rate, vol = self.params[i].tolist()
        z = torch.randn(self.paths)
        terminal = 100 * math.exp(m) * torch.exp((rate - 0.5 * vol**2) * years + vol * math.sqrt(years) * z)
        price = math.exp(-rate * years) * float((terminal - 100).clamp(min=0).mean())
        return self.x[i], torch.tensor([(price - self.mu) / self.sd])


def option_monte_carlo(paths: int = 40000):
    """The pricing surrogate, Adam ``1e-3``, its labels priced by Monte Carlo in ``__getitem__`` (40000 paths
    per option on every read, the loader in the main process) instead of once up front (``paths=0``: the
    closed-form prices, the fix)."""
    train = DataLoader(MonteCarloOptions(paths), batch_size=32, shuffle=True) if paths else None
    return _option_task(lambda n: Adam(n.parameters(), lr=1e-3), train=train)


def rain_station_files(hundredths: bool = True):
    """Rainfall read as 200 station-month files of 32 days in date order, Adam ``1e-3``; one station in 20
    (files 7, 27, 47, ...) logs rain in hundredths of a mm, read as mm (amounts 100x too large)."""
    (x, y), _ = rainfall_data()
    files = [(x[i : i + 32], y[i : i + 32] * (100 if hundredths and i // 32 % 20 == 7 else 1))
             for i in range(0, len(x), 32)]  # fmt: skip
    return _rain_task(lambda n: Adam(n.parameters(), lr=1e-3), train=DataLoader(files, batch_size=None))


# ------------------------------------------------------------------------------------------------ healthy
def flow_warm_restarts():
    """Optical flow, AdamW ``2e-3`` under CosineAnnealingWarmRestarts(T_0=75): the LR falls to ~0 and jumps
    back to its top every 75 steps."""
    return _flow_task(
        lambda net: AdamW(net.parameters(), lr=2e-3, weight_decay=1e-2),
        schedule=lambda o: CosineAnnealingWarmRestarts(o, T_0=75),
    )


ONECYCLE_STEPS = 100


def sudoku_onecycle():
    """Mini-sudoku, AdamW under OneCycleLR(max_lr=1e-2) over 100 optimizer steps, with the Trainer
    accumulating 4 batches of 32 per step (effective batch 128)."""
    return _sudoku_task(
        lambda net: AdamW(net.parameters(), lr=1e-2),
        schedule=lambda o: OneCycleLR(o, max_lr=1e-2, total_steps=ONECYCLE_STEPS),
    )


def option_dollars():
    """The pricing surrogate on prices in dollars (0 to ~45, variance ~100), the readout's bias started at the
    training mean, Adam ``3e-3``, the Trainer clipping gradients at norm 5."""
    net = MLP([4, 64, 64, 1])
    (_, y), _ = option_data(dollars=True)
    nn.init.constant_(net[-1].bias, float(y.mean()))
    return _option_task(lambda n: Adam(n.parameters(), lr=3e-3), net, dollars=True)


def captcha_noisy_labels():
    """Captchas with 30% of the training characters relabelled at random (a weak auto-labeller, kept on
    purpose; the validation labels are clean), RAdam ``2e-3``."""
    return _captcha_task(lambda net: RAdam(net.parameters(), lr=2e-3), noisy_labels=0.3)


LONG_WARMUP = 100


def option_long_warmup():
    """The pricing surrogate, AdamW ``3e-3`` under a LambdaLR warm-up from 1% over 100 steps (a correct
    factor: 1.0 after it)."""
    return _option_task(
        lambda n: AdamW(n.parameters(), lr=OPTION_LR),
        schedule=lambda o: LambdaLR(o, lambda s: min(1.0, 0.01 + s / LONG_WARMUP)),
    )


TINY_VAL = 16


def rain_tiny_val():
    """Rainfall, RAdam ``2e-3``, validated on its first 16 days only."""
    return _rain_task(lambda n: RAdam(n.parameters(), lr=2e-3), val_days=TINY_VAL)


def sudoku_adagrad_steady():
    """Mini-sudoku, Adagrad at ``3e-2``: its step sizes shrink as squared gradients pile up, slow but
    steady."""
    return sudoku_adagrad(3e-2)


def flow_polynomial_to_zero():
    """Optical flow, SGD with Nesterov momentum 0.9 at ``0.02`` under PolynomialLR(total_iters=300, power=2):
    the LR reaches 0 at the run's last step, as planned."""
    return _flow_task(
        lambda net: SGD(net.parameters(), lr=0.02, momentum=0.9, nesterov=True),
        schedule=lambda o: PolynomialLR(o, total_iters=300, power=2.0),
    )


def rain_clipped():
    """Rainfall, SGD with Nesterov momentum 0.9 at ``0.05``, the Trainer clipping every step's gradient to
    norm 0.5."""
    return _rain_task(lambda n: SGD(n.parameters(), lr=0.05, momentum=0.9, nesterov=True))
