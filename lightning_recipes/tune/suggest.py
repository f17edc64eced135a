"""Reading an LR range test's curve: a centred moving average (no lag) and the rules that pick an LR:
``"min_div_10"`` (fastai: a tenth of the LR at the smoothed minimum) and ``"steepest"`` (Smith 2017,
Lightning's default: where the smoothed loss falls fastest per unit of ``log(lr)``).

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

    A relative step moves each layer by ``lr`` times its norm and these changes add up over the steps the
    sweep spends near one LR, so the peak kept is proportional to that exposure (measured:
    ``benchmarks/RESULTS.md``).

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
