"""The numbers behind ``input_independence``: whether a loss fell beyond its noise (:func:`loss_drop`), and
one copy's gain over a control with its noise, held out (:func:`held_out_gain`) and in training."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from lightning_recipes._stats import standard_error, t_quantile

__all__ = ["CONFIDENCE", "Gain", "LossDrop", "held_out_gain", "loss_drop", "relative_gain", "training_gain"]

#: One-sided confidence of every bound the check states (1% false-alarm odds per question).
CONFIDENCE = 0.99


class LossDrop(NamedTuple):
    """How far a training loss fell between its first and its last steps, against its own noise."""

    drop: float  # mean loss of the first steps minus mean loss of the last ones
    noise: float  # standard error of that difference, from the step-to-step spread of the loss
    fell: bool  # drop > 2 x noise: the model learned
    start: float = math.nan  # mean loss of the first steps (the level the drop is measured from)


def loss_drop(losses: list[Tensor] | list[float], num_batches: int) -> LossDrop:
    """Whether a training loss fell by more than 2 standard errors of its own noise: each batch (step ``i``
    trained on batch ``i % num_batches``) compared on its first and its last visit, else the first half of
    the steps with the second. A non-finite loss, or fewer than 4 steps, is no evidence of learning.

    Example:
        >>> loss_drop([2.0, 2.2, 1.8, 2.0] * 4, num_batches=4).fell  # lr = 0: the same losses again
        False
        >>> drop = loss_drop([2.0, 2.2, 1.8, 2.0, 1.7, 1.9, 1.5, 1.7], num_batches=4)
        >>> round(drop.drop, 3), round(drop.noise, 3), drop.fell
        (0.3, 0.115, True)
    """
    values = torch.tensor([float(v) for v in losses], dtype=torch.float64)  # sync: once per value
    n = len(values)
    if n < 4 or not bool(torch.isfinite(values).all()):
        return LossDrop(0.0, math.inf, False)
    pairs = min(num_batches, n - num_batches)  # batches 0 .. pairs-1 were seen at least twice
    if pairs >= 2:
        first = values[:pairs]
        last = values[[b + num_batches * ((n - 1 - b) // num_batches) for b in range(pairs)]]
    else:
        first, last = values[: n // 2], values[n - n // 2 :]
    drop = float(first.mean() - last.mean())
    noise = math.hypot(float(standard_error(first)), float(standard_error(last)))  # Welch: SE of a difference
    return LossDrop(drop, noise, drop > 2 * noise, float(first.mean()))


def relative_gain(real: float, control: float) -> float:
    """``(control - real) / max(|control|, |real|)``: how much lower the real copy's loss is, as a share,
    bounded to [-2, 2]; 0 when both are 0.

    Example:
        >>> relative_gain(0.5, 1.0), relative_gain(1.0, 1e-12), relative_gain(0.0, 0.0)
        (0.5, -0.999999999999, 0.0)
    """
    scale = max(abs(control), abs(real))
    if not math.isfinite(scale):
        return -math.inf if not math.isfinite(real) else math.inf
    return (control - real) / scale if scale > 0 else 0.0


class Gain(NamedTuple):
    """The real copy's held-out gain over a control (:func:`relative_gain` of the means) with its one-sided
    :data:`CONFIDENCE` bounds, from the paired per-chunk differences."""

    gain: float
    noise: float  # standard error of the gain
    low: float
    high: float


def held_out_gain(real: Tensor, control: Tensor) -> Gain:
    """The :class:`Gain` of ``real`` over ``control`` from their losses on the same ``K`` chunks: the noise is
    the standard error of the mean paired difference, the bounds at the Student-t quantile (``K - 1`` df).

    Example:
        >>> real, control = torch.tensor([1.0, 1.1, 0.9, 1.0]), torch.tensor([2.0, 2.2, 1.9, 2.1])
        >>> gain = held_out_gain(real, control)
        >>> round(gain.gain, 3), gain.low > 0
        (0.512, True)
    """
    real_mean, control_mean = float(real.double().mean()), float(control.double().mean())
    gain = relative_gain(real_mean, control_mean)
    count = len(real)
    scale = max(abs(real_mean), abs(control_mean), 1e-12)
    if count < 3 or not math.isfinite(gain):
        return Gain(gain, math.inf, -math.inf, math.inf)
    noise = float(standard_error((control - real).double())) / scale
    spread = t_quantile(CONFIDENCE, count - 1) * noise
    return Gain(gain, noise, gain - spread, gain + spread)


def training_gain(real: list[Tensor], control: list[Tensor], blocks: int = 8) -> Gain:
    """How much lower the real copy's training loss is than a control's trained on the same batches, as a
    share: per-step paired differences averaged in ``blocks`` consecutive blocks (the loss of neighbouring
    steps is correlated, blocks far less), their mean and standard error over the blocks.

    Example:
        >>> real = [torch.tensor(2.0 - 0.01 * i) for i in range(40)]
        >>> control = [torch.tensor(2.0 - 0.005 * i) for i in range(40)]
        >>> gain = training_gain(real, control)
        >>> round(gain.gain, 3), gain.low > 0
        (0.051, True)
    """
    pairs = torch.stack([torch.stack([r.float(), c.float()]) for r, c in zip(real, control)]).double().cpu()
    count = len(pairs) // blocks * blocks
    if count < blocks or not bool(torch.isfinite(pairs).all()):
        return Gain(math.nan, math.inf, -math.inf, math.inf)
    means = pairs[len(pairs) - count :].reshape(blocks, -1, 2).mean(1)
    return held_out_gain(means[:, 0], means[:, 1])
