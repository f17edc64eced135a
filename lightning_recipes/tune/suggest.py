"""Reading an LR range test's curve: smoothing, where it diverged, and the rules that pick a learning rate.

The curve is the training loss at each step of an exponential learning-rate sweep. Two rules are implemented,
both from the literature:

- ``"steepest"`` (Smith 2017, "Cyclical Learning Rates", sec. 3.3; Lightning's ``lr_find`` default): the LR
  where the smoothed loss falls fastest per unit of ``log(lr)``.
- ``"min_div_10"`` (Howard & Gugger, fastai ``lr_find`` ``minimum`` rule): a tenth of the LR at the lowest
  smoothed loss, i.e. one order of magnitude before the loss stops improving.

Example:
    >>> import math
    >>> lrs = [10 ** (-4 + i / 10) for i in range(41)]      # 1e-4 .. 1
    >>> losses = [2.0 / (1 + 50 * lr) + (30 * lr) ** 4 for lr in lrs]  # falls, then blows up
    >>> smoothed = smooth(losses, beta=0.0)
    >>> f"{suggest(lrs, smoothed, 'min_div_10'):.2g}", f"{suggest(lrs, smoothed, 'steepest'):.2g}"
    ('0.002', '0.01')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

__all__ = ["RULES", "Rule", "smooth", "suggest"]

Rule = Literal["min_div_10", "steepest"]
RULES: tuple[str, ...] = ("min_div_10", "steepest")


def smooth(losses: Sequence[float], beta: float = 0.9) -> list[float]:
    """Bias-corrected exponential moving average (as Adam corrects its moments); ``beta=0``: the raw curve."""
    smoothed: list[float] = []
    average = 0.0
    for step, loss in enumerate(losses, start=1):
        average = beta * average + (1 - beta) * loss
        smoothed.append(average / (1 - beta**step) if beta > 0 else average)
    return smoothed


def suggest(lrs: Sequence[float], smoothed: Sequence[float], rule: Rule, skip_begin: int = 0) -> float:
    """The learning rate a rule picks from a smoothed curve (points before ``skip_begin`` are ignored).

    Raises:
        ValueError: If the curve has fewer than 3 usable points or ``rule`` is unknown.
    """
    points = [(lr, loss) for lr, loss in zip(lrs, smoothed) if math.isfinite(loss)][skip_begin:]
    if len(points) < 3:
        raise ValueError(
            f"the LR sweep has {len(points)} usable points after skipping {skip_begin}; it needs at least 3 "
            "(raise `num_steps`, lower `min_lr`, or check that the loss is finite at small learning rates)."
        )
    best = min(range(len(points)), key=lambda i: points[i][1])
    if rule == "min_div_10":
        return points[best][0] / 10
    if rule == "steepest":
        # central differences of loss against log(lr), up to the minimum (beyond it the loss only rises)
        logs = [math.log(lr) for lr, _ in points]
        end = max(best, 2)
        slopes = [(points[i + 1][1] - points[i - 1][1]) / (logs[i + 1] - logs[i - 1]) for i in range(1, end)]
        return points[1 + min(range(len(slopes)), key=slopes.__getitem__)][0]
    raise ValueError(f"`rule` must be one of {RULES}, got {rule!r}.")
