"""Reading an LR range test's curve: smoothing, and the rules that pick a learning rate.

The curve is the training loss at each step of an exponential learning-rate sweep. The sweep itself stops on
a causal moving average (it cannot see the future), but such an average lags: with ``beta = 0.9`` it trails
the raw loss by about ten steps, which on a 100-step sweep from 1e-7 to 10 is a factor of ~6 in learning rate.
Once the sweep is over the whole curve is known, so the rules read a **centred** moving average instead,
which has no lag (:func:`centred`). Two rules, both from the literature:

- ``"min_div_10"`` (Howard & Gugger, fastai's ``lr_find`` "minimum" rule): a tenth of the LR at the lowest
  smoothed loss, i.e. one order of magnitude before the loss stops improving.
- ``"steepest"`` (Smith 2017, "Cyclical Learning Rates", sec. 3.3; Lightning's ``lr_find`` default): the LR
  where the smoothed loss falls fastest per unit of ``log(lr)``.

Example:
    >>> lrs = [10 ** (-4 + i / 10) for i in range(41)]      # 1e-4 .. 1
    >>> losses = [2.0 / (1 + 50 * lr) + (30 * lr) ** 4 for lr in lrs]  # falls, then blows up
    >>> f"{suggest(lrs, losses, 'min_div_10'):.2g}", f"{suggest(lrs, losses, 'steepest'):.2g}"
    ('0.002', '0.01')
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from lightning_recipes.sweep_args import RULES, Rule, SweepArgs

__all__ = [
    "DEFAULT_EXPOSURE",
    "RELATIVE_STEP",
    "RELATIVE_STEP_EXPOSURE",
    "RULES",
    "Rule",
    "centred",
    "peak_factor",
    "smooth",
    "suggest",
]

#: Layer-wise adaptive optimizers (by class name, any class in the MRO): their step is relative, ``lr`` times
#: each layer's weight norm (LAMB's trust ratio ``||w|| / ||update||``, LARS's).
RELATIVE_STEP = frozenset({"Lamb", "LAMB", "FusedLAMB", "Lars", "LARS", "LARC"})
#: The default sweep's steps per e-fold of LR: 100 steps over 1e-7 .. 10, 5.37.
DEFAULT_EXPOSURE = (SweepArgs.num_steps - 1) / math.log(SweepArgs.max_lr / SweepArgs.min_lr)
#: The steps per e-fold at which they keep all of ``warmup_factor``: 5x the default sweep's.
RELATIVE_STEP_EXPOSURE = 5 * DEFAULT_EXPOSURE


def peak_factor(optimizers: Sequence[object], warmup_factor: float, steps_per_efold: float) -> float:
    """``peak_lr / suggestion`` for a sweep of ``optimizers`` that spends ``steps_per_efold`` steps per e-fold
    of LR: ``warmup_factor``; when one of them takes relative steps (:data:`RELATIVE_STEP`), times
    ``steps_per_efold /`` :data:`RELATIVE_STEP_EXPOSURE` (at most 1): a fifth for the default sweep.

    Why: an absolute step (AdamW, Lion, SGD) moves each weight by about ``lr``, whatever its size; the sweep's
    minimum marks the step a single update can take, and a warm-up run, which spends most steps below its
    peak, can sit at half of it (``5 x`` its tenth). A relative step moves each layer by ``lr`` times its own
    norm, whatever the gradient, and these changes add up: the sweep's minimum is where the change summed over
    the ~``steps_per_efold`` steps it spends near one LR becomes too much (so it falls as that exposure
    grows), while a run holds its peak for hundreds of steps. The peak kept is therefore proportional to the
    exposure. Measured (LAMB, warm-up cosine): a Conv1d+GRU classifier, 100-step sweep minimum 0.29 -> peak
    0.029 (99.5%; the x5 peak 0.146 stayed at chance), 300 steps minimum 0.06 -> 0.018 (grid: 0.01 88%,
    0.03 99.7%, 0.1 chance); a digits MLP, 0.01-0.014 and 0.022 (0.01-0.07 learn, 0.1 does not).

    Example:
        >>> import torch
        >>> from lightning_recipes.optim import Lamb
        >>> params = [torch.nn.Parameter(torch.zeros(1))]
        >>> peak_factor([torch.optim.AdamW(params)], 5.0, DEFAULT_EXPOSURE)
        5.0
        >>> [round(peak_factor([Lamb(params)], 5.0, DEFAULT_EXPOSURE * k), 6) for k in (1, 3, 10)]
        [1.0, 3.0, 5.0]
    """
    relative = any(c.__name__ in RELATIVE_STEP for o in optimizers for c in type(o).__mro__)
    return warmup_factor * min(1.0, steps_per_efold / RELATIVE_STEP_EXPOSURE) if relative else warmup_factor


def smooth(losses: Sequence[float], beta: float = 0.9) -> list[float]:
    """Bias-corrected exponential moving average (as Adam corrects its moments); ``beta=0``: the raw curve."""
    smoothed: list[float] = []
    average = 0.0
    for step, loss in enumerate(losses, start=1):
        average = beta * average + (1 - beta) * loss
        smoothed.append(average / (1 - beta**step) if beta > 0 else average)
    return smoothed


def centred(losses: Sequence[float], half_window: int) -> list[float]:
    """Centred moving average over ``2 * half_window + 1`` points (fewer at the ends): no lag.

    Example:
        >>> centred([1.0, 2.0, 3.0, 10.0], 1)
        [1.5, 2.0, 5.0, 6.5]
    """
    return [
        sum(window) / len(window)
        for window in (losses[max(0, i - half_window) : i + half_window + 1] for i in range(len(losses)))
    ]


def half_window_for(points: int) -> int:
    """The centred window's half width: 5% of the sweep (5 points of 100), at least 1."""
    return max(1, round(points / 20))


def suggest(lrs: Sequence[float], losses: Sequence[float], rule: Rule, skip_begin: int = 0) -> float:
    """The learning rate a rule picks from a raw loss curve (smoothed here, centred; the first
    ``skip_begin`` points are ignored).

    Raises:
        ValueError: If the curve has fewer than 3 usable points or ``rule`` is unknown.
    """
    if rule not in RULES:
        raise ValueError(f"`rule` must be one of {RULES}, got {rule!r}.")
    finite = [(lr, loss) for lr, loss in zip(lrs, losses) if math.isfinite(loss)]
    smoothed = centred([loss for _, loss in finite], half_window_for(len(finite)))
    points = list(zip([lr for lr, _ in finite], smoothed))[skip_begin:]
    if len(points) < 3:
        raise ValueError(
            f"the LR sweep has {len(points)} usable points after skipping {skip_begin}; it needs at least 3 "
            "(raise `num_steps`, lower `min_lr`, or check that the loss is finite at small learning rates)."
        )
    best = min(range(len(points)), key=lambda i: points[i][1])
    if rule == "min_div_10":
        return points[best][0] / 10
    # central differences of the loss against log(lr), up to the minimum (beyond it the loss only rises)
    logs = [math.log(lr) for lr, _ in points]
    end = max(best, 2)
    slopes = [(points[i + 1][1] - points[i - 1][1]) / (logs[i + 1] - logs[i - 1]) for i in range(1, end)]
    return points[1 + min(range(len(slopes)), key=slopes.__getitem__)][0]
