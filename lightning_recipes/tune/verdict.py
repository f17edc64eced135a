"""Is an LR sweep's curve evidence of learning? A fall of the loss measured against the sweep's own noise.

A rule such as ``min_div_10`` always returns a learning rate, even from a curve that never falls: on a flat
curve its "minimum" is wherever the noise dipped lowest, anywhere in the sweep (issue #22: a BERT classifier
whose sweep stayed at chance gave picks from 9e-6 to 1e-2 across seeds, and ``lr="find"`` then trained at
chance). :func:`curve_verdict` decides first whether there is anything to read:

- **Start**: the mean raw loss over the sweep's first quarter (at least one smoothing window), the lowest
  learning rates (1e-7 .. ~6e-6 by default), where the weights barely move.
- **Noise**: the per-step standard deviation ``sigma`` of the loss, from the differences of successive
  steps (``sqrt(mean(diff**2) / 2)``: the level and a slow trend cancel out) over the sweep from its first
  step to the end of the minimum's window (the divergence after it is left out). The sweep measures it on
  itself, on the user's own batches. A steep fall inflates it, which raises the threshold where
  the fall is large anyway; but on a short sweep (few steps per decade: 20 steps from 1e-7 to 10 jump 2.3x a
  step) a model that learns can read as inconclusive: sweep longer (40+ steps).
- **Fall**: the start minus the lowest point of the centred moving average the rules read (window of
  ``n`` points, fewer at the ends). Its standard error under "nothing is learned" is
  ``sigma * sqrt(1 / n_start + 1 / n)``.
- **Threshold**: the minimum is the lowest of ``m`` candidate points, so a flat curve's lowest point sits
  below its start by chance; the fall must exceed ``k`` standard errors, with ``k`` the Student-t quantile
  (one degree of freedom per difference less one, as ``sigma`` is itself estimated) at ``1 - alpha / m``
  (Bonferroni over the candidates), ``alpha = 0.01``: a flat curve passes at most 1% of the time. Simulated
  flat curves (Gaussian, Student-t with 3 degrees of freedom, 4 batches cycled, drifting; sweeps of 30, 100
  and 300 steps) pass 0-0.5% of the time (``benchmarks/RESULTS.md``).

The numbers come from the statistics, not from the benchmark's models; the benchmark checks them.

Example:
    >>> import random
    >>> rng = random.Random(0)
    >>> flat = [0.693 + 0.01 * rng.gauss(0, 1) for _ in range(100)]
    >>> lrs = [1e-7 * 1.2**i for i in range(100)]
    >>> curve_verdict(lrs, flat).significant
    False
    >>> falling = [0.693 / (1 + (lr / 1e-3) ** 2) + 0.01 * rng.gauss(0, 1) for lr in lrs]
    >>> curve_verdict(lrs, falling).significant
    True
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from lightning_recipes._stats import difference_noise, t_quantile
from lightning_recipes.tune.suggest import centred, half_window_for

__all__ = ["ALPHA", "CurveVerdict", "curve_verdict", "t_quantile"]

#: The largest chance that a curve with no learning in it is read as one that learns.
ALPHA = 0.01


@dataclass(frozen=True)
class CurveVerdict:
    """The evidence that an LR sweep's loss fell (all losses in the loss's own units).

    Attributes:
        significant: ``fall > threshold``: the curve can be read; else the sweep is inconclusive.
        start_loss: Mean raw loss over the first ``start_points`` steps.
        best_loss: Lowest point of the centred moving average (after the first tenth of the sweep).
        best_lr: The learning rate there.
        fall: ``start_loss - best_loss``.
        noise: Per-step standard deviation of the loss (successive differences, first ``noise_points``).
        threshold: ``k * noise * sqrt(1 / start_points + 1 / window_points)``.
        k: The Student-t quantile at ``1 - alpha / candidates`` with ``start_points - 1`` degrees of freedom.
        start_points: Steps averaged for the start.
        window_points: Steps averaged at the minimum.
        candidates: Points the minimum was chosen among.
        noise_points: Steps the noise was measured on.
        alpha: The false-pass rate bound.
    """

    significant: bool
    start_loss: float
    best_loss: float
    best_lr: float
    fall: float
    noise: float
    threshold: float
    k: float
    start_points: int
    window_points: int
    candidates: int
    noise_points: int
    alpha: float = ALPHA

    def describe(self) -> str:
        """The decision in words, with the numbers it rests on (and, when inconclusive, what to try)."""
        scale = abs(self.start_loss) or 1.0
        stated = (
            f"the smoothed loss fell {self.fall / scale:.2%} below its start ({self.start_loss:.4g} -> "
            f"{self.best_loss:.4g} at lr {self.best_lr:.2g}); the sweep's own noise is "
            f"{self.noise / scale:.2%} per step (sigma {self.noise:.3g}, from its first {self.noise_points} "
            f"steps), so telling learning from noise needs a fall of more than k * sigma * "
            f"sqrt(1/{self.start_points} + 1/{self.window_points}) = {self.k:.2f} x "
            f"{self.threshold / max(self.k, 1e-12):.3g} = "
            f"{self.threshold / scale:.2%} (k: the Student-t bound for a {self.alpha:.0%} chance that a flat "
            f"curve passes, over the {self.candidates} points its minimum could fall on)"
        )
        if self.significant:
            return f"conclusive: {stated}."
        return (
            f"inconclusive: {stated}. No learning rate can be read from this curve; a pick from it would be "
            "wherever the noise dipped. Try: a longer sweep (`num_steps=300` or more: more steps per decade "
            "of LR, and a wider window at the minimum; a model that sits at chance for its first hundreds of "
            "steps, such as a transformer from scratch, needs them), a narrower range around plausible LRs "
            "(`min_lr=1e-5, max_lr=1`), a short warm-up at a small LR before sweeping (start from weights "
            "that have left the initial plateau), or a larger batch (per-step noise falls as 1/sqrt(batch)). "
            "If it stays flat, check that the model can learn at all (`preflight`'s overfit check) or pick "
            "the LR from a short grid of trainings."
        )


def curve_verdict(lrs: Sequence[float], losses: Sequence[float], alpha: float = ALPHA) -> CurveVerdict:
    """Whether the sweep's loss fell significantly below its start, relative to its own noise.

    Non-finite points are dropped, as the rules drop them.

    Raises:
        ValueError: If fewer than 6 finite points remain.
    """
    finite = [(lr, loss) for lr, loss in zip(lrs, losses) if math.isfinite(loss)]
    count = len(finite)
    if count < 6:
        raise ValueError(f"the LR sweep has {count} finite points; judging its curve needs at least 6.")
    values = [loss for _, loss in finite]
    half = half_window_for(count)
    smoothed = centred(values, half)
    first = max(1, count // 10)  # as the rules skip: the first steps measure the initial loss
    best = min(range(first, count), key=smoothed.__getitem__)
    start_points = max(2 * half + 1, count // 4)
    start_loss = sum(values[:start_points]) / start_points
    # the noise: from the start up to the minimum's window (not the divergence after it), differences of
    # successive steps: a trend moves them little, and a steep one only raises the threshold
    measured = values[: max(start_points, best + half + 1)]
    noise = difference_noise(measured, order=1)
    # a loss that does not move at all at small LRs (a zero-initialised head) still rounds in float32
    noise = max(noise, 8 * 2.0**-23 * abs(start_loss))
    window_points = min(best + half + 1, count) - max(0, best - half)
    candidates = count - first
    k = t_quantile(1 - alpha / candidates, len(measured) - 2)  # one df per difference, less one
    threshold = k * noise * math.sqrt(1 / start_points + 1 / window_points)
    fall = start_loss - smoothed[best]
    return CurveVerdict(
        significant=fall > threshold,
        start_loss=start_loss,
        best_loss=smoothed[best],
        best_lr=finite[best][0],
        fall=fall,
        noise=noise,
        threshold=threshold,
        k=k,
        start_points=start_points,
        window_points=window_points,
        candidates=candidates,
        noise_points=len(measured),
        alpha=alpha,
    )
