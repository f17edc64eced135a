"""Sealed gallery M's data: small seeded synthetic sets (2-D points for a diffusion model, observational rows
with a treatment for uplift, click logs over categorical fields, sine functions seen at a few points, agent
tracks through a junction, students' attempts at exercises and sensor readings of a heading). Every builder
is deterministic (its own generator); random augmentation at read time draws from the global RNG."""

from __future__ import annotations

import math

import torch

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import gen as _gen
from galleries.sealed import loaders

__all__ = ["Rows", "loaders"]


# --- denoising diffusion on 2-D points ----------------------------------------------------------------------
STEPS = 100
BETAS = torch.linspace(1e-4, 0.1, STEPS)
ALPHA_BAR = torch.cumprod(1 - BETAS, 0)
RING_ANGLES = torch.arange(8) * math.pi / 4
RING_CENTRES = 2 * torch.stack([RING_ANGLES.cos(), RING_ANGLES.sin()], 1)


def ring_points(n: int, seed: int) -> tuple[torch.Tensor]:
    """``n`` points of a ring of 8 tight Gaussian clusters of radius 2 (the data a diffusion model learns)."""
    g = _gen(seed)
    centre = RING_CENTRES[torch.randint(8, (n,), generator=g)]
    return (centre + 0.15 * torch.randn(n, 2, generator=g),)


# --- uplift: the effect of a treatment from observational rows ----------------------------------------------
COVARIATES = 6


def uplift_truth(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The untreated outcome and the treatment effect of covariates ``x``."""
    control = x[:, 1] + 0.5 * x[:, 2] ** 2 - 0.5 * x[:, 3]
    effect = 1.0 + x[:, 0] - torch.tanh(2 * x[:, 4])
    return control, effect


def uplift_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` customers: covariates, whether they were treated (more likely for high ``x[0]``) and the observed
    outcome (the untreated outcome plus the effect if treated, plus noise)."""
    g = _gen(seed)
    x = torch.randn(n, COVARIATES, generator=g)
    treated = (torch.rand(n, generator=g) < torch.sigmoid(x[:, 0])).float()
    control, effect = uplift_truth(x)
    return x, treated, control + treated * effect + 0.3 * torch.randn(n, generator=g)


def outcome_scale() -> tuple[float, float]:
    """The mean and standard deviation of the training outcomes (a scaler fitted on the training rows)."""
    outcome = uplift_rows(2000, 1)[2]
    return outcome.mean().item(), outcome.std().item()


# --- click-through rate over categorical fields -------------------------------------------------------------
FIELDS = (40, 30, 8)  # users, ads, hour buckets: each field's codes start at 0
FM_DIM = 8
KEEP_NEGATIVES = 0.2


def _click_model() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = _gen(81)
    users, ads = torch.randn(FIELDS[0], 4, generator=g), torch.randn(FIELDS[1], 4, generator=g)
    hours = 0.5 * torch.randn(FIELDS[2], generator=g)
    return users, ads, hours


def clicks(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` impressions (user, ad, hour codes) and whether each was clicked (about 1 in 8): a user's taste
    for an ad (the dot product of their hidden factors) and the hour decide it."""
    g = _gen(seed)
    codes = torch.stack([torch.randint(size, (n,), generator=g) for size in FIELDS], 1)
    users, ads, hours = _click_model()
    logit = -2.6 + (users[codes[:, 0]] * ads[codes[:, 1]]).sum(1) + hours[codes[:, 2]]
    return codes, (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()


def downsampled_clicks(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The click log with every click kept and a fifth of the non-clicks (a fixed draw): a balanced log."""
    codes, clicked = clicks(n, seed)
    keep = (clicked == 1) | (torch.rand(n, generator=_gen(seed + 50)) < KEEP_NEGATIVES)
    return codes[keep], clicked[keep]


# --- neural processes: sine functions seen at a few context points ------------------------------------------
MAX_CONTEXT, TARGETS = 8, 20


def sine_tasks(n: int, seed: int) -> tuple[torch.Tensor, ...]:
    """``n`` functions ``a sin(x + p)``: 3..8 context points (padded with zeros to 8) and their count, and 20
    target points on [-pi, pi], with a little observation noise."""
    g = _gen(seed)
    amplitude = 0.5 + 1.5 * torch.rand(n, 1, generator=g)
    phase = math.pi * torch.rand(n, 1, generator=g)
    count = torch.randint(3, MAX_CONTEXT + 1, (n,), generator=g)
    context_x = (2 * torch.rand(n, MAX_CONTEXT, generator=g) - 1) * math.pi
    target_x = (2 * torch.rand(n, TARGETS, generator=g) - 1) * math.pi
    context_y = amplitude * torch.sin(context_x + phase) + 0.05 * torch.randn(n, MAX_CONTEXT, generator=g)
    target_y = amplitude * torch.sin(target_x + phase)
    padded = torch.arange(MAX_CONTEXT) >= count[:, None]
    context_x[padded], context_y[padded] = 0.0, 0.0
    return context_x, context_y, count, target_x, target_y


# --- trajectory forecasting at a junction -------------------------------------------------------------------
PAST, FUTURE, MODES = 8, 12, 3
TURN = 0.15  # radians per step: left, straight or right


def tracks(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` agents: 8 observed positions and 12 future ones, relative to the last observed position, in the
    map's frame (any heading). Each agent then turns left, goes straight or turns right, which its past tells
    only in part: 9 in 10 of the slowest third turn left, of the middle third go straight and of the fastest
    third turn right; the rest pick any of the three."""
    g = _gen(seed)
    heading = 2 * math.pi * torch.rand(n, 1, generator=g)
    speed = 0.5 + torch.rand(n, 1, generator=g)
    usual = (3 * (speed - 0.5)).long().clamp(max=MODES - 1)
    mode = torch.where(torch.rand(n, 1, generator=g) < 0.85, usual, torch.randint(MODES, (n, 1), generator=g))
    turn = TURN * (1 - mode).float()
    back = torch.arange(-PAST + 1, 1).float()
    past = speed[..., None] * back[None, :, None] * torch.stack([heading.cos(), heading.sin()], -1)
    future_heading = heading + turn * torch.arange(1, FUTURE + 1)
    step = speed[..., None] * torch.stack([future_heading.cos(), future_heading.sin()], -1)
    past = past + 0.03 * torch.randn(n, PAST, 2, generator=g)
    return past, step.cumsum(1)


def rotate(points: torch.Tensor, angle: torch.Tensor) -> torch.Tensor:
    cos, sin = angle.cos(), angle.sin()
    return points @ torch.stack([torch.stack([cos, sin]), torch.stack([-sin, cos])])


def rotate_scene(past: torch.Tensor, future: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Augmentation: the whole scene turned by a random angle (a fresh draw per read)."""
    angle = 2 * math.pi * torch.rand(())
    return rotate(past, angle), rotate(future, angle)


def rotate_past_only(past: torch.Tensor, future: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The BUG: the observed track is turned by a random angle, the future is left in the map's frame."""
    angle = 2 * math.pi * torch.rand(())
    return rotate(past, angle), future


# --- heading from sensor readings ---------------------------------------------------------------------------
SENSORS = 12


def headings(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` readings of 12 sensors (a fixed nonlinear mix of the heading's first two harmonics, with noise)
    and the heading in radians, in [0, 2 pi)."""
    g = _gen(seed)
    heading = 2 * math.pi * torch.rand(n, generator=g)
    harmonics = torch.stack([heading.cos(), heading.sin(), (2 * heading).cos(), (2 * heading).sin()], 1)
    mix = torch.randn(4, SENSORS, generator=_gen(91))
    return torch.tanh(harmonics @ mix) + 0.05 * torch.randn(n, SENSORS, generator=g), heading


# --- knowledge tracing: students answering exercises of 8 skills --------------------------------------------
SKILLS, ATTEMPTS = 8, 30


def attempts(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` students' 30 attempts: the skill of each exercise (1..8; 0 is kept for padding) and whether it
    was answered correctly. A student's chance on a skill rises with their ability in it and with each
    earlier attempt at it; their abilities in related skills (neighbouring ids) are alike."""
    g = _gen(seed)
    general = torch.randn(n, 1, generator=g)
    ability = general + 0.8 * torch.randn(n, SKILLS + 2, generator=g).cumsum(1)[:, 1:-1] / 2
    difficulty = torch.linspace(-1, 1, SKILLS)
    skill = torch.randint(SKILLS, (n, ATTEMPTS), generator=g)
    practice = torch.zeros(n, SKILLS)
    correct = torch.zeros(n, ATTEMPTS)
    rows = torch.arange(n)
    for step in range(ATTEMPTS):
        s = skill[:, step]
        logit = ability[rows, s] - difficulty[s] + 0.4 * practice[rows, s]
        correct[:, step] = (torch.rand(n, generator=g) < torch.sigmoid(logit)).float()
        practice[rows, s] += 1
    return skill + 1, correct
