"""Sealed gallery T's data (half ``u``): small seeded synthetic sets (near-infrared spectra of mixtures, one
or three scans per sample, battery cells under load, hourly bike rentals, a low-cost air-quality sensor
beside a reference monitor, affect features with valence and arousal) and scikit-learn's digits (cut into
jigsaw tiles, or whole). Every builder is deterministic (its own generator); random augmentation at read
time draws from the global RNG."""

from __future__ import annotations

import itertools

import torch

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- near-infrared spectroscopy: the content of one analyte from a mixture's spectrum -----------------------
WAVELENGTHS = 100
_CENTRES, _WIDTHS = torch.tensor([30.0, 42.0, 70.0]), torch.tensor([7.0, 9.0, 12.0])


def spectra(n: int, seed: int, scans: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` samples' absorbance spectra over 100 wavelengths (``scans`` consecutive rows per sample, the
    cuvette repacked for each scan: ``n * scans`` rows) of a mixture of three components (overlapping
    Gaussian bands, contents 0..1 each) seen through a random multiplicative scatter (x0.5..1.5), a baseline
    offset and tilt and noise; and the content of component 0 (``(n * scans, 1)``)."""
    g = _gen(seed)
    wl = torch.arange(WAVELENGTHS).float()
    bands = torch.exp(-((wl - _CENTRES[:, None]) ** 2) / (2 * _WIDTHS[:, None] ** 2))  # (3, W)
    content = torch.rand(n, 3, generator=g).repeat_interleave(scans, 0)
    n = n * scans
    scatter = 0.5 + torch.rand(n, 1, generator=g)
    offset = 0.3 * torch.randn(n, 1, generator=g)
    tilt = 0.2 * torch.randn(n, 1, generator=g) * (wl / WAVELENGTHS)
    x = scatter * (0.4 + content @ bands) + offset + tilt + 0.01 * torch.randn(n, WAVELENGTHS, generator=g)
    return x, content[:, :1]


def small_shift(spectrum: torch.Tensor, content: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation that keeps the bands where they are: a shift of at most one wavelength (the instrument's
    calibration drift), a gain of x0.9..1.1 and a little noise."""
    shift = int(torch.randint(-1, 2, ()))
    gain = 0.9 + 0.2 * torch.rand(())
    return gain * spectrum.roll(shift) + 0.005 * torch.randn(WAVELENGTHS), content


def wide_shift(spectrum: torch.Tensor, content: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the shift augmentation of time series, up to 15 wavelengths either way, with the content
    kept: component 0's band (at 30) is moved onto component 1's (at 42) and back."""
    shift = int(torch.randint(-15, 16, ()))
    gain = 0.9 + 0.2 * torch.rand(())
    return gain * spectrum.roll(shift) + 0.005 * torch.randn(WAVELENGTHS), content


# --- battery state of charge from a window of current, voltage and temperature ------------------------------
STEPS, REST = 30, 5


def ocv(soc: torch.Tensor) -> torch.Tensor:
    """The open-circuit voltage of the cell at a state of charge (monotone, 3.0..4.2 V)."""
    return 3.0 + 0.9 * soc + 0.3 * soc**2 - 0.2 * (1 - soc) ** 4


def cell_windows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` windows of 30 steps ``(current A, 5 x (voltage V - 3.6), temperature C / 10 - 2.5)``: 5 steps
    at rest (the voltage is the open-circuit voltage of the start), then a random discharge profile; the
    terminal voltage sags by the cell's own resistance (0.02..0.2 ohm) times the current. The target is the
    state of charge at the last step (``(n, 1)``); the temperature is ambient noise that plays no part."""
    g = _gen(seed)
    soc0 = 0.3 + 0.7 * torch.rand(n, 1, generator=g)
    level = torch.rand(n, 1, generator=g) * 3
    current = (level + torch.randn(n, STEPS, generator=g)).clamp(min=0)
    current[:, :REST] = 0
    soc = soc0 - 0.004 * current.cumsum(1)
    resistance = 0.02 + 0.18 * torch.rand(n, 1, generator=g)
    voltage = ocv(soc) - resistance * current + 0.005 * torch.randn(n, STEPS, generator=g)
    temperature = 0.5 * torch.randn(n, 1, generator=g) + 0.05 * torch.randn(n, STEPS, generator=g)
    window = torch.stack([current, 5 * (voltage - 3.6), temperature], -1)
    return window, soc[:, -1:]


# --- jigsaw puzzles: the four 4x4 quarters of an 8x8 digit in one of 24 orders ------------------------------
PERMUTATIONS = torch.tensor(list(itertools.permutations(range(4))))  # (24, 4)


def tiles(images: torch.Tensor) -> torch.Tensor:
    """``(n, 8, 8)`` images as ``(n, 4, 4, 4)`` quarters, row-major (top left, top right, bottom left,
    bottom right)."""
    return images.unflatten(1, (2, 4)).unflatten(3, (2, 4)).permute(0, 1, 3, 2, 4).flatten(1, 2)


def untiles(quarters: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`tiles`."""
    return quarters.unflatten(1, (2, 2)).permute(0, 1, 3, 2, 4).flatten(1, 2).flatten(2, 3)


def shuffled(image: torch.Tensor, label: int) -> torch.Tensor:
    """The digit with its quarters gathered in the order of permutation ``label``: position ``i`` holds
    quarter ``PERMUTATIONS[label][i]``."""
    return untiles(tiles(image[None])[:, PERMUTATIONS[label]])[0]


def scattered(image: torch.Tensor, label: int) -> torch.Tensor:
    """The BUG: the quarters scattered by permutation ``label`` (quarter ``i`` put at position
    ``PERMUTATIONS[label][i]``): the inverse permutation of what the label names, for 14 of the 24."""
    out = torch.empty_like(tiles(image[None]))
    out[:, PERMUTATIONS[label]] = tiles(image[None])
    return untiles(out)[0]


def random_puzzle(arrange=shuffled):
    """A read-time transform: a random permutation of the digit's quarters, labelled with its index (the
    digit's class comes along unused)."""

    def transform(image: torch.Tensor, digit: torch.Tensor):
        label = int(torch.randint(len(PERMUTATIONS), ()))
        return arrange(image, label), torch.tensor(label), digit

    return transform


def all_puzzles(part: str, arrange=shuffled) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Every digit of ``part`` in all 24 orders of its quarters: the puzzles, their labels, the digits."""
    x, y = digits(part, (8, 8))
    labels = torch.arange(len(PERMUTATIONS)).repeat_interleave(len(x))
    puzzles = torch.stack([arrange(image, int(k)) for image, k in zip(x.repeat(24, 1, 1), labels)])
    return puzzles, labels, y.repeat(24)


# --- digits shifted sideways -------------------------------------------------------------------------------
def shift(images: torch.Tensor, dx: int) -> torch.Tensor:
    """Images moved ``dx`` pixels right (left if negative), the uncovered column blank."""
    out = torch.zeros_like(images)
    if dx > 0:
        out[..., dx:] = images[..., :-dx]
    elif dx < 0:
        out[..., :dx] = images[..., -dx:]
    else:
        out = images.clone()
    return out


def random_shift(image: torch.Tensor, label: torch.Tensor):
    """Training augmentation: a random shift of -1, 0 or 1 pixel sideways."""
    return shift(image, int(torch.randint(-1, 2, ()))), label


# --- hourly bike rentals: Poisson counts from calendar codes and weather ------------------------------------
def _hour_profile() -> torch.Tensor:
    hours = torch.arange(24).float()
    commute = 1.6 * torch.exp(-((hours - 8) ** 2) / 2) + 1.8 * torch.exp(-((hours - 17.5) ** 2) / 3)
    leisure = 1.4 * torch.exp(-((hours - 14) ** 2) / 12)
    night = -1.5 * torch.exp(-((hours - 3) ** 2) / 6)
    return torch.stack([leisure + night, commute + night + 0.3])  # (weekend, workday) x hour


def rentals(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` hours: integer codes ``(hour, weekday, holiday)``, the temperature (standardised, ``(n, 1)``),
    the rentals counted that hour (``(n, 1)``, Poisson) and their true expected number. Workdays have
    commuting peaks; weekends a midday hump; warm hours are busier; the holiday flag is noise."""
    g = _gen(seed)
    hour = torch.randint(24, (n,), generator=g)
    weekday = torch.randint(7, (n,), generator=g)
    holiday = (torch.rand(n, generator=g) < 0.05).long()
    temp = torch.randn(n, 1, generator=g)
    workday = (weekday < 5).long()
    rate = torch.exp(2.5 + _hour_profile()[workday, hour][:, None] + 0.4 * temp)
    counts = torch.poisson(rate, generator=g)
    return torch.stack([hour, weekday, holiday], 1), temp, counts, rate


# --- a low-cost particulate sensor calibrated against a reference monitor -----------------------------------
def growth(humidity: torch.Tensor, kappa: float = 0.4) -> torch.Tensor:
    """The hygroscopic growth of the particles' optical size at relative humidity 0..0.95 (kappa-Koehler)."""
    return 1 + kappa * humidity / (1 - humidity)


def air_quality(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` hourly rows ``(raw reading / 50, relative humidity, temperature / 20)`` and the reference
    PM2.5 / 50 (``(n, 1)``): the raw reading is the reference swollen by humidity, with a temperature drift
    and noise."""
    g = _gen(seed)
    reference = -20 * torch.log(torch.rand(n, 1, generator=g) * torch.rand(n, 1, generator=g))  # Gamma(2, 20)
    humidity = 0.95 * torch.rand(n, 1, generator=g) ** 0.7
    temperature = 5 + 25 * torch.rand(n, 1, generator=g)
    raw = reference * growth(humidity) * (1 + 0.01 * (temperature - 20))
    raw = raw * (1 + 0.05 * torch.randn(n, 1, generator=g))
    return torch.cat([raw / 50, humidity, temperature / 20], 1), reference / 50


# --- valence and arousal from affect features ---------------------------------------------------------------
AFFECT = 16


def affect(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` rows of 16 features (prosody and face descriptors) and ``(valence, arousal)``: valence in
    -1..1 centred at 0.2, arousal around 0.5 with a smaller spread, both non-linear in the features, plus
    annotation noise."""
    g = _gen(seed)
    w = torch.randn(AFFECT, 2, generator=_gen(71)) / AFFECT**0.5
    x = torch.randn(n, AFFECT, generator=g)
    h = x @ w
    valence = 0.2 + 0.7 * torch.tanh(h[:, :1] + 0.3 * x[:, 2:3] * x[:, 3:4])
    arousal = 0.5 + 0.25 * torch.tanh(h[:, 1:] ** 2 - 0.5)
    noise = 0.05 * torch.randn(n, 2, generator=g)
    return x, torch.cat([valence, arousal], 1) + noise
