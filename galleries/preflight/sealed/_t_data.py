"""Sealed gallery T's data (half ``t``): small seeded synthetic sets: scenes of surfaces under a coloured
illuminant (colour constancy), end-effector positions of a two-link arm (inverse kinematics), battery
drive-cycle windows of current and voltage (state of charge), league matches between teams of hidden
strength, radio bursts of four modulations and low-cost air-quality sensor readings against a reference.
Every builder is deterministic (its own generator); random augmentation at read time draws from the global
RNG."""

from __future__ import annotations

import math

import torch

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["Rows", "loaders"]


# --- colour constancy: surfaces under a coloured illuminant -------------------------------------------------
PIXELS = 32


def scenes(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` scenes of 32 surfaces (reflectances in 0.05..1 per channel, some scenes dominated by one hue)
    lit by an illuminant along a warm-to-cool locus with a random tint, with sensor noise; and the
    illuminant's colour as a unit RGB vector."""
    g = _gen(seed)
    t = torch.rand(n, 1, generator=g)
    illum = torch.cat([1.0 - 0.6 * t, 0.8 + 0.0 * t, 0.4 + 0.6 * t], 1)
    illum = illum * (1 + 0.15 * torch.randn(n, 3, generator=g)).clamp_min(0.3)
    illum = illum / illum.norm(dim=1, keepdim=True)
    bias = 0.3 * torch.rand(n, 1, 3, generator=g)
    surfaces = (0.05 + 0.95 * torch.rand(n, PIXELS, 3, generator=g) * (1 - bias)).clamp(0.05, 1)
    pixels = surfaces * illum[:, None] * (0.5 + torch.rand(n, 1, 1, generator=g))
    pixels = pixels + 0.01 * torch.randn(n, PIXELS, 3, generator=g)
    return pixels.clamp_min(1e-3), illum


def brightness(pixels: torch.Tensor, illum: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation that keeps the illuminant's colour: the whole scene x0.5..2."""
    return pixels * 2 ** (2 * torch.rand(()) - 1), illum


def colour_cast(pixels: torch.Tensor, illum: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: a random per-channel gain (x0.6..1.4, a 'colour jitter' from a classifier's recipe) on the
    scene, with the illuminant label left as it was: the cast changes the light the scene was taken under."""
    pixels, illum = brightness(pixels, illum)
    return pixels * (0.6 + 0.8 * torch.rand(3)), illum


# --- inverse kinematics of a planar two-link arm ------------------------------------------------------------
LINKS = (1.0, 0.8)


def forward_kinematics(angles: torch.Tensor) -> torch.Tensor:
    """The end effector's (x, y) for joint angles (shoulder, elbow) in radians."""
    a, b = angles[:, 0], angles[:, 1]
    x = LINKS[0] * torch.cos(a) + LINKS[1] * torch.cos(a + b)
    y = LINKS[0] * torch.sin(a) + LINKS[1] * torch.sin(a + b)
    return torch.stack([x, y], 1)


def arm_poses(n: int, seed: int, cos_first: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` reachable positions of the arm (shoulder anywhere on the circle, elbow bent one way only,
    0.3..2.6 rad, so each position has one solution), their joint angles as (sin, cos) per joint, flattened
    to 4 (or, with ``cos_first``, the BUG, as (cos, sin)), and the angles."""
    g = _gen(seed)
    angles = torch.stack(
        [(2 * torch.rand(n, generator=g) - 1) * math.pi, 0.3 + 2.3 * torch.rand(n, generator=g)], 1
    )
    pairs = (torch.cos(angles), torch.sin(angles)) if cos_first else (torch.sin(angles), torch.cos(angles))
    target = torch.stack(pairs, 2).flatten(1)  # (n, 4): joint 0's pair, then joint 1's
    return forward_kinematics(angles), target, angles


# --- battery state of charge from drive-cycle windows -------------------------------------------------------
STEPS, PER_AMP_SECOND, RESISTANCE = 40, 0.002, 0.08  # charge drawn per A and second (of 1)


def ocv(soc: torch.Tensor) -> torch.Tensor:
    """The open-circuit voltage of a lithium-ion cell at a state of charge in 0..1."""
    return 3.3 + 0.7 * soc + 0.15 * torch.tanh(10 * (soc - 0.1)) - 0.1 * torch.exp(-20 * soc)


def drive_windows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` windows of 40 one-second steps of (current in A, positive discharging; terminal voltage), the
    current piecewise constant in drive-cycle segments, the voltage noisy (a cheap sensor); and the state of
    charge at the window's last step (n, 1)."""
    g = _gen(seed)
    start = 0.3 + 0.65 * torch.rand(n, 1, generator=g)
    level = 4 * torch.rand(n, 4, generator=g) - 1  # four segments of 10 steps: -1..3 A
    current = level.repeat_interleave(STEPS // 4, 1) + 0.1 * torch.randn(n, STEPS, generator=g)
    soc = start - PER_AMP_SECOND * current.cumsum(1)
    volts = ocv(soc) - RESISTANCE * current + 0.04 * torch.randn(n, STEPS, generator=g)
    return torch.stack([current, volts - 3.7], 2), soc[:, -1:]


# --- league matches between teams of hidden strength --------------------------------------------------------
TEAMS, HOME = 20, 0.45


def strengths() -> torch.Tensor:
    """The 20 teams' attacking strengths (fixed for the league)."""
    return 0.5 * torch.randn(TEAMS, generator=_gen(71))


def expected_difference(teams: torch.Tensor) -> torch.Tensor:
    """The expected goal difference (home minus away) of matches ``teams`` (n, 2: home, away)."""
    s = strengths()
    home = torch.exp(0.2 + HOME / 2 + s[teams[:, 0]] - s[teams[:, 1]])
    away = torch.exp(0.2 - HOME / 2 + s[teams[:, 1]] - s[teams[:, 0]])
    return home - away


def matches(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` matches between random pairs of teams (home first), the venue (+1: the first team is at home)
    and the observed goal difference (Poisson goals; n, 1)."""
    g = _gen(seed)
    home = torch.randint(TEAMS, (n,), generator=g)
    away = (home + torch.randint(1, TEAMS, (n,), generator=g)) % TEAMS
    teams = torch.stack([home, away], 1)
    s = strengths()
    goals_home = torch.poisson(torch.exp(0.2 + HOME / 2 + s[home] - s[away]), generator=g)
    goals_away = torch.poisson(torch.exp(0.2 - HOME / 2 + s[away] - s[home]), generator=g)
    return teams, torch.ones(n, 1), (goals_home - goals_away)[:, None]


def swap_sides(teams: torch.Tensor, venue: torch.Tensor, diff: torch.Tensor):
    """Augmentation: half the time the match is read from the away side (teams swapped, venue -1, the goal
    difference negated)."""
    if torch.rand(()) < 0.5:
        return teams.flip(0), -venue, -diff
    return teams, venue, diff


def swap_teams_only(teams: torch.Tensor, venue: torch.Tensor, diff: torch.Tensor):
    """The BUG: half the time the two team ids are swapped, but the venue and the goal difference are kept as
    the home side's: the first team is now the away team, labelled as if it had played at home and won by
    the home team's margin."""
    if torch.rand(()) < 0.5:
        return teams.flip(0), venue, diff
    return teams, venue, diff


# --- radio modulation recognition (coherent receiver) -------------------------------------------------------
SYMBOLS, SPS, MODULATIONS = 16, 4, 4  # BPSK, QPSK, 8PSK, 16QAM


def _constellation(kind: int) -> torch.Tensor:
    if kind < 3:
        m = 2 ** (kind + 1)
        phase = 2 * math.pi * torch.arange(m) / m + (math.pi / 4 if m == 4 else 0.0)
        return torch.stack([torch.cos(phase), torch.sin(phase)], 1)
    grid = torch.tensor([-3.0, -1.0, 1.0, 3.0])
    points = torch.cartesian_prod(grid, grid)
    return points / points.pow(2).sum(1).mean().sqrt()


def bursts(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` bursts of 16 symbols at 4 samples per symbol, as (I, Q) channels (n, 2, 64): unit power, a small
    residual carrier phase (+-0.15 rad), noise at 12..20 dB SNR; and the modulation."""
    g = _gen(seed)
    kind = torch.randint(MODULATIONS, (n,), generator=g)
    iq = torch.zeros(n, SYMBOLS, 2)
    for k in range(MODULATIONS):
        points = _constellation(k)
        rows = (kind == k).nonzero()[:, 0]
        iq[rows] = points[torch.randint(len(points), (len(rows), SYMBOLS), generator=g)]
    phase = 0.3 * (torch.rand(n, 1, generator=g) - 0.5)
    c, s = torch.cos(phase), torch.sin(phase)
    iq = torch.stack([iq[..., 0] * c - iq[..., 1] * s, iq[..., 0] * s + iq[..., 1] * c], 1)
    iq = iq.repeat_interleave(SPS, 2)
    snr = 10 ** ((12 + 8 * torch.rand(n, 1, 1, generator=g)) / 10)
    return iq + torch.randn(n, 2, SYMBOLS * SPS, generator=g) / (2 * snr).sqrt(), kind


# --- low-cost air-quality sensor calibration against a reference --------------------------------------------
def sensor_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` hourly readings of a low-cost NO2 sensor: (raw signal, temperature in C, relative humidity in
    %), standardised with fixed constants; and the reference station's concentration in ppb (log-normal,
    about 3..40), (n, 1). The raw signal drifts with temperature and humidity."""
    g = _gen(seed)
    ppb = torch.exp(math.log(10) + 0.7 * torch.randn(n, generator=g))
    temp = 5 + 25 * torch.rand(n, generator=g)
    hum = 30 + 60 * torch.rand(n, generator=g)
    raw = ppb * (1 + 0.03 * (temp - 17)) * (1 - 0.006 * (hum - 60)) + 2 + 0.01 * (hum - 60) ** 2 / 10
    raw = raw * (1 + 0.03 * torch.randn(n, generator=g))
    x = torch.stack([(raw - 12) / 10, (temp - 17) / 7, (hum - 60) / 17], 1)
    return x, ppb[:, None]
