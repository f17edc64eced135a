"""The numbers behind ``input_independence``'s verdict: how far a training loss fell against its own noise
(:func:`loss_drop`), the relative held-out gap (:func:`relative_gain`) and that gap's noise
(:func:`gap_noise`)."""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
from torch import Tensor

from lightning_recipes._stats import difference_noise, standard_error

__all__ = ["LossDrop", "gap_noise", "loss_drop", "relative_gain"]


class LossDrop(NamedTuple):
    """How far a training loss fell between its first and its last steps, against its own noise."""

    drop: float  # mean loss of the first steps minus mean loss of the last ones
    noise: float  # standard error of that difference, from the step-to-step spread of the loss
    fell: bool  # drop > 2 x noise: the model learned
    start: float = math.nan  # mean loss of the first steps (the level the drop is measured from)


def loss_drop(losses: list[Tensor] | list[float], num_batches: int) -> LossDrop:
    """Whether a training loss fell by more than its own noise.

    Step ``i`` trained on batch ``i % num_batches``. Each batch seen twice or more is compared on its first
    and its last visit (so a model that does not change scores exactly the same, batch for batch); before any
    batch comes back, the first half of the steps is compared with the second. The noise is the standard
    error of the difference of the two means, from the spread of the loss across steps (batch to batch: a
    drop smaller than the loss's own jitter is not learning); learning = a drop of more than 2 of them. A
    loss that is not finite, or fewer than 4 steps, is no evidence of learning.

    Example:
        >>> loss_drop([2.0, 2.2, 1.8, 2.0] * 4, num_batches=4).fell  # lr = 0: the same losses again
        False
        >>> drop = loss_drop([2.0, 2.2, 1.8, 2.0, 1.7, 1.9, 1.5, 1.7], num_batches=4)
        >>> round(drop.drop, 3), round(drop.noise, 3), drop.fell
        (0.3, 0.115, True)
    """
    if losses and isinstance(losses[0], Tensor):
        tensors = [v.detach().float().reshape(()) for v in losses if isinstance(v, Tensor)]
        values = torch.stack(tensors).double().cpu()  # one transfer for the whole curve
    else:
        values = torch.tensor([float(v) for v in losses], dtype=torch.float64)
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


def relative_gain(real: float, zeroed: float) -> float:
    """``(zeroed - real) / max(|zeroed|, |real|)``: the relative improvement of the real-input loss, bounded
    to [-2, 2] (a zeroed-input loss near 0 no longer gives absurd percentages); 0 when both are 0.

    Example:
        >>> relative_gain(0.5, 1.0), relative_gain(1.0, 1e-12), relative_gain(0.0, 0.0)
        (0.5, -0.999999999999, 0.0)
    """
    scale = max(abs(zeroed), abs(real))
    if not math.isfinite(scale):
        return -math.inf if not math.isfinite(real) else math.inf
    return (zeroed - real) / scale if scale > 0 else 0.0


def gap_noise(
    train_losses: list[list[Tensor]], since: int, held_gaps: Tensor, size_ratio: float = 1.0
) -> float:
    """Standard error of the mean held-out gap (zeroed - real loss) over ``len(held_gaps)`` batches.

    The two copies train on the same batch at each step, so ``zeroed - real`` of their training losses is
    a paired difference per batch; its batch-to-batch spread (from successive differences, so a trend
    while the models learn does not count as noise) from step ``since`` on, scaled by ``size_ratio`` (a
    training batch's samples over a held-out batch's), is pooled with the spread of the held-out batches'
    own gaps. Infinite when nothing measures it.

    Example:
        >>> import torch
        >>> real = [torch.tensor(v) for v in (1.0, 1.2, 0.8, 1.0, 1.1, 0.9)]
        >>> zeroed = [torch.tensor(v) for v in (1.5, 1.6, 1.4, 1.5, 1.7, 1.3)]
        >>> round(gap_noise([real, zeroed], 0, torch.tensor([0.5, 0.5])), 3)
        0.068
    """
    pairs = min(len(train_losses[0]), len(train_losses[1]))
    start = since if pairs - since >= 8 else max(0, pairs - 8)
    squares, freedom = 0.0, 0
    if pairs - start >= 3:
        window = torch.stack(
            [
                (zeroed.detach().float() - real.detach().float()).reshape(())
                for real, zeroed in zip(train_losses[0][start:pairs], train_losses[1][start:pairs])
            ]
        ).double()
        values = window.tolist()  # sync: once per look
        if all(math.isfinite(v) for v in values):
            squares += difference_noise(values, order=1) ** 2 * size_ratio * (len(values) - 1)
            freedom += len(values) - 1
    if len(held_gaps) >= 2 and bool(torch.isfinite(held_gaps).all()):
        squares += float(held_gaps.var()) * (len(held_gaps) - 1)
        freedom += len(held_gaps) - 1
    if freedom == 0 or len(held_gaps) == 0:
        return math.inf
    return math.sqrt(squares / freedom / len(held_gaps))
