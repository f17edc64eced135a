"""Sealed gallery I's data: small seeded synthetic sets (conditioned regression tasks, bursty event streams, a
source and a shifted target domain, credit rows with a monotone feature) and scikit-learn's digits (as a
contextual bandit, as logged bandit feedback, with holes to inpaint, and for ensembles, MC dropout and
calibration). Every builder is deterministic (its own generator); random augmentation at read time draws
from the global RNG."""

from __future__ import annotations

import math

import torch

from galleries.preflight.sealed._e_data import Rows
from galleries.sealed import digits, loaders
from galleries.sealed import gen as _gen

__all__ = ["Rows", "digits", "loaders"]


# --- several regression tasks behind one task id (FiLM conditioning) ----------------------------------------
FEATURES, TASKS = 8, 4


def _task_directions() -> torch.Tensor:
    directions = torch.randn(TASKS, FEATURES, generator=_gen(81))
    return directions / directions.norm(dim=1, keepdim=True)


def task_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` rows of 8 features, a task id (0..3) and the target of that task: sin(1.5 a_t . x) + 0.25 (a_t .
    x)^2 with a task's own unit direction a_t (+ noise 0.05): tasks disagree, so the id is needed."""
    g = _gen(seed)
    x, task = torch.randn(n, FEATURES, generator=g), torch.randint(TASKS, (n,), generator=g)
    along = (x * _task_directions()[task]).sum(1)
    return x, task, torch.sin(1.5 * along) + 0.25 * along**2 + 0.05 * torch.randn(n, generator=g)


# --- bursty event streams (a temporal point process) --------------------------------------------------------
EVENTS, CALM_RATE, BURST_RATE, SWITCH = 33, 0.3, 4.0, 0.1


def event_gaps(n: int, seed: int) -> tuple[torch.Tensor]:
    """``n`` streams of 33 inter-event gaps from a hidden two-state process: a calm regime (rate 0.3 events
    per unit time) and a burst (rate 4) that switch with probability 0.1 after each event. The recent gaps
    reveal the regime, so the next gap is predictable from the history (the batch holds the gaps only)."""
    g = _gen(seed)
    state = torch.rand(n, generator=g) < 0.5
    gaps = torch.empty(n, EVENTS)
    for i in range(EVENTS):
        rate = torch.where(state, BURST_RATE, CALM_RATE)
        gaps[:, i] = -torch.log(torch.rand(n, generator=g)) / rate
        state = state ^ (torch.rand(n, generator=g) < SWITCH)
    return (gaps,)


# --- domain adaptation: labelled source rows, unlabelled target rows ---------------------------------------
SIGNAL, NUISANCE = 8, 2


def domain_rows(n: int, seed: int, domain: str) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` rows of 10 features and a binary label. Features 0..7 carry the label the same way in both
    domains (a noisy direction); features 8..9 are a sensor that tracked the label closely at the source
    plant and reads pure noise at the target plant (what the adaptation must learn not to lean on)."""
    g = _gen(seed)
    label = torch.randint(2, (n,), generator=g)
    sign = 2 * label.float() - 1
    signal = 1.2 * sign[:, None] / math.sqrt(SIGNAL) + torch.randn(n, SIGNAL, generator=g)
    if domain == "source":
        nuisance = 1.5 * sign[:, None] + 0.5 * torch.randn(n, NUISANCE, generator=g)
    else:
        nuisance = 1.6 * torch.randn(n, NUISANCE, generator=g)
    return torch.cat([signal, nuisance], 1), label


def adaptation_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Labelled source rows zipped with as many unlabelled target rows: (source x, source label, target x)."""
    source, label = domain_rows(n, seed, "source")
    target, _ = domain_rows(n, seed + 1000, "target")
    return source, label, target


# --- credit rows: default risk falls with income ------------------------------------------------------------
def credit_rows(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` applicants: column 0 is standardised income, columns 1..5 other standardised attributes; the
    label is a default (1) drawn from a logistic model whose log-odds fall steeply (and non-linearly) with
    income."""
    g = _gen(seed)
    x = torch.randn(n, 6, generator=g)
    log_odds = -2.5 * torch.tanh(1.5 * x[:, 0]) - 0.8 * x[:, 0] + 0.7 * x[:, 1] - 0.5 * x[:, 2] * x[:, 3]
    return x, (torch.rand(n, generator=g) < torch.sigmoid(log_odds)).float()


# --- logged bandit feedback (off-policy) --------------------------------------------------------------------
IMPRESSIONS = 8


def logging_policy() -> torch.Tensor:
    """The production policy that logged the data: a context-free preference for the low arms (0.29 for arm
    0 down to 0.015 for arm 9)."""
    return torch.softmax(torch.linspace(1.5, -1.5, 10), 0)


def logged_feedback(part: str, seed: int) -> tuple[torch.Tensor, ...]:
    """Each digit of ``part`` shown 8 times; each time the logging policy drew an arm, which paid 1 if it was
    the digit's label: (pixels, arm, reward, the arm's logged propensity)."""
    x, y = digits(part)
    x, y = x.repeat(IMPRESSIONS, 1), y.repeat(IMPRESSIONS)
    policy = logging_policy()
    arm = torch.multinomial(policy, len(y), replacement=True, generator=_gen(seed))
    return x, arm, (arm == y).float(), policy[arm]


# --- image inpainting: digits with a square hole ------------------------------------------------------------
HOLE = 3


def hole_mask(g: torch.Generator | None = None) -> torch.Tensor:
    """A 1x8x8 mask with a random 3x3 square of ones (the hole)."""
    r, c = torch.randint(0, 8 - HOLE + 1, (2,), generator=g).tolist()
    mask = torch.zeros(1, 8, 8)
    mask[:, r : r + HOLE, c : c + HOLE] = 1
    return mask


def cut_hole(image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """A fresh hole per read: (masked image, mask, the whole image as the target)."""
    mask = hole_mask()
    return image * (1 - mask), mask, image


def cut_hole_in_place(image: torch.Tensor, label: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The BUG: the hole is zeroed in place, in the row the dataset hands out, a view of the stored digit:
    the target (the same tensor) loses the hole too, and the stored digits collect holes epoch after epoch."""
    mask = hole_mask()
    image[mask.bool()] = 0
    return image, mask, image


def holed_digits(part: str, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A digits part with fixed holes (validation and held-out rows): (masked image, mask, image)."""
    image, _ = digits(part, shape=(1, 8, 8))
    g = _gen(seed)
    mask = torch.stack([hole_mask(g) for _ in range(len(image))])
    return image * (1 - mask), mask, image
