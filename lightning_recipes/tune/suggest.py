"""Reading an LR range test's curve: :func:`curve_verdict` and the rules ``"min_div_10"`` and ``"steepest"``.

Example:
    >>> lrs = [10 ** (-4 + i / 10) for i in range(41)]      # 1e-4 .. 1
    >>> losses = [2.0 / (1 + 50 * lr) + (30 * lr) ** 4 for lr in lrs]  # falls, then blows up
    >>> f"{suggest(lrs, losses, 'min_div_10'):.2g}", f"{suggest(lrs, losses, 'steepest'):.2g}"
    ('0.002', '0.01')
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from lightning_recipes._stats import difference_noise, t_quantile
from lightning_recipes._validation import check_choice
from lightning_recipes.sweep_args import RULES, Rule, SweepArgs

__all__ = [
    "ALPHA",
    "DEFAULT_EXPOSURE",
    "RELATIVE_STEP",
    "RELATIVE_STEP_EXPOSURE",
    "RELATIVE_STEP_MIN_EXPOSURE",
    "RULES",
    "CurveVerdict",
    "Rule",
    "centred",
    "curve_verdict",
    "peak_factor",
    "relative_step",
    "smooth",
    "suggest",
    "sweep_steps",
]

#: Layer-wise adaptive optimizers (class names in the MRO): their step is ``lr`` times each layer's norm.
RELATIVE_STEP = frozenset({"Lamb", "LAMB", "FusedLAMB", "Lars", "LARS", "LARC"})
#: The default sweep's steps per e-fold of LR: 100 steps over 1e-7 .. 10, 5.37.
DEFAULT_EXPOSURE = (SweepArgs.num_steps - 1) / math.log(SweepArgs.max_lr / SweepArgs.min_lr)
#: The steps per e-fold at which they keep all of ``warmup_factor``: 5x the default sweep's.
RELATIVE_STEP_EXPOSURE = 5 * DEFAULT_EXPOSURE
#: The fewest steps per e-fold a sweep of theirs runs: 16.2, 300 steps over the default range.
RELATIVE_STEP_MIN_EXPOSURE = (3 * SweepArgs.num_steps - 1) / math.log(SweepArgs.max_lr / SweepArgs.min_lr)


def relative_step(optimizers: Sequence[object]) -> bool:
    """Whether any optimizer takes relative steps (a class in its MRO named in :data:`RELATIVE_STEP`).

    Example:
        >>> import torch
        >>> from lightning_recipes.optim import Lamb
        >>> params = [torch.nn.Parameter(torch.zeros(1))]
        >>> relative_step([Lamb(params)]), relative_step([torch.optim.AdamW(params)])
        (True, False)
    """
    return any(c.__name__ in RELATIVE_STEP for o in optimizers for c in type(o).__mro__)


def sweep_steps(optimizers: Sequence[object], num_steps: int, min_lr: float, max_lr: float) -> int:
    """The steps a sweep runs: ``num_steps``, or for relative-step optimizers at least
    :data:`RELATIVE_STEP_MIN_EXPOSURE` steps per e-fold of LR.

    Example:
        >>> import torch
        >>> from lightning_recipes.optim import Lamb
        >>> params = [torch.nn.Parameter(torch.zeros(1))]
        >>> sweep_steps([Lamb(params)], 100, 1e-7, 10.0), sweep_steps([Lamb(params)], 100, 1e-4, 1.0)
        (300, 151)
        >>> sweep_steps([torch.optim.AdamW(params)], 100, 1e-7, 10.0), sweep_steps([Lamb(params)], 500, 1, 9)
        (100, 500)
    """
    if not relative_step(optimizers):
        return num_steps
    return max(num_steps, math.ceil(RELATIVE_STEP_MIN_EXPOSURE * math.log(max_lr / min_lr) - 1e-9) + 1)


def peak_factor(optimizers: Sequence[object], warmup_factor: float, steps_per_efold: float) -> float:
    """``peak_lr / suggestion``: ``warmup_factor``, times ``steps_per_efold /`` :data:`RELATIVE_STEP_EXPOSURE`
    (at most 1) for relative-step optimizers.

    Example:
        >>> import torch
        >>> from lightning_recipes.optim import Lamb
        >>> params = [torch.nn.Parameter(torch.zeros(1))]
        >>> peak_factor([torch.optim.AdamW(params)], 5.0, DEFAULT_EXPOSURE)
        5.0
        >>> [round(peak_factor([Lamb(params)], 5.0, DEFAULT_EXPOSURE * k), 6) for k in (1, 3, 10)]
        [1.0, 3.0, 5.0]
    """
    if not relative_step(optimizers):
        return warmup_factor
    return warmup_factor * min(1.0, steps_per_efold / RELATIVE_STEP_EXPOSURE)


def smooth(losses: Sequence[float], beta: float = 0.9) -> list[float]:
    """Bias-corrected exponential moving average; non-finite values pass through, outside the average.

    Raises:
        ValueError: If ``beta`` is not in ``[0, 1)``.

    Example:
        >>> smooth([1.0, 0.0, float("nan"), 0.0], 0.5)
        [1.0, 0.333..., nan, 0.142...]
    """
    if not 0.0 <= beta < 1.0:
        raise ValueError(f"`smoothing` must be in [0, 1), got {beta!r}.")
    smoothed, average, count = [], 0.0, 0
    for loss in losses:
        if math.isfinite(loss):
            count += 1
            average = beta * average + (1 - beta) * loss
        smoothed.append(average / (1 - beta**count) if math.isfinite(loss) else loss)
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
    """The learning rate ``rule`` picks from a raw loss curve (smoothed here, centred, the first
    ``skip_begin`` points ignored); ``ValueError`` under 3 usable points.
    """
    check_choice("rule", rule, RULES)
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


#: The largest chance that a curve with no learning in it is read as one that learns.
ALPHA = 0.01


@dataclass(frozen=True)
class CurveVerdict:
    """The evidence that an LR sweep's loss fell: ``significant`` when ``fall = start_loss - best_loss``
    exceeds ``threshold = k * noise * sqrt(1 / start_points + 1 / window_points)``."""

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
            f"{self.noise / scale:.2%} per step (sigma {self.noise:.3g}, first {self.noise_points} steps), so"
            f" a fall must exceed k * sigma * sqrt(1/{self.start_points} + 1/{self.window_points}) = "
            f"{self.threshold / scale:.2%} (k {self.k:.2f}: a {self.alpha:.0%} chance that a flat curve "
            f"passes, over {self.candidates} points)"
        )
        if self.significant:
            return f"conclusive: {stated}."
        return (
            f"inconclusive: {stated}. No learning rate can be read from this curve. Try: a longer sweep "
            "(`num_steps=300` or more), a narrower range (`min_lr=1e-5, max_lr=1`), a short warm-up before "
            "sweeping, or a larger batch; if it stays flat, check that the model learns at all "
            "(`preflight`'s overfit check) or pick the LR from a short grid of trainings."
        )


def curve_verdict(lrs: Sequence[float], losses: Sequence[float], alpha: float = ALPHA) -> CurveVerdict:
    """Whether the loss fell below its start (the first quarter's mean) by more than its noise explains: ``k``
    standard errors, ``k`` the Student-t quantile at ``1 - alpha / m`` (Bonferroni over ``m`` candidate
    minima). ``ValueError`` under 6 finite points.

    Example:
        >>> import random
        >>> rng = random.Random(0)
        >>> lrs = [1e-7 * 1.2**i for i in range(100)]
        >>> curve_verdict(lrs, [0.693 + 0.01 * rng.gauss(0, 1) for _ in lrs]).significant
        False
        >>> falling = [0.693 / (1 + (lr / 1e-3) ** 2) + 0.01 * rng.gauss(0, 1) for lr in lrs]
        >>> curve_verdict(lrs, falling).significant
        True
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
    # the noise: successive differences up to the minimum's window (not the divergence after it)
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
