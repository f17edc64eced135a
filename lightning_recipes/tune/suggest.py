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

from lightning_recipes.sweep_args import RULES, Rule

__all__ = [
    "RELATIVE_STEP",
    "RELATIVE_STEP_FACTOR",
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
#: What ``peak_lr`` keeps of ``warmup_factor`` for them: 1/5, so the default peak is the suggestion itself.
RELATIVE_STEP_FACTOR = 0.2


def peak_factor(optimizers: Sequence[object], warmup_factor: float) -> float:
    """``peak_lr / suggestion`` for a sweep of ``optimizers``: ``warmup_factor``, times
    :data:`RELATIVE_STEP_FACTOR` when one of them takes relative steps (:data:`RELATIVE_STEP`).

    Why: an absolute step (AdamW, Lion, SGD) adds about ``lr`` per weight, and a warm-up run spends most steps
    below its peak, so the peak can sit at half the LR of the sweep's minimum (``5 x`` its tenth). A relative
    step multiplies each layer's norm by about ``sqrt(1 + lr**2)`` whatever the gradient, and the steps
    compound: the sweep sees each LR for a few steps, a run holds its peak for hundreds, so the edge a run
    can hold lies well below the sweep's minimum. Measured: LAMB on a Conv1d+GRU classifier (min at 0.29:
    0.03 trains to 99.7%, 0.146 stays at chance) and a digits MLP (min ~0.1: 0.03-0.06 learn, 0.1 does not).

    Example:
        >>> import torch
        >>> from lightning_recipes.optim import Lamb
        >>> params = [torch.nn.Parameter(torch.zeros(1))]
        >>> peak_factor([torch.optim.AdamW(params)], 5.0), peak_factor([Lamb(params)], 5.0)
        (5.0, 1.0)
    """
    relative = any(c.__name__ in RELATIVE_STEP for o in optimizers for c in type(o).__mro__)
    return warmup_factor * RELATIVE_STEP_FACTOR if relative else warmup_factor


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
