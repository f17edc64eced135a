"""Warmup learning-rate schedules as picklable ``LambdaLR`` factories over pure multiplier functions.

Every schedule is a pure function ``multiplier(step, ...) -> float`` wrapped in ``LambdaLR`` through
``functools.partial``: it pickles (``ddp_spawn``), and a resumed run continues exactly from the scheduler's
``last_epoch`` (the only state it needs). Step these schedulers every optimizer step
(``"interval": "step"`` in Lightning). Lengths accept steps (``int``) or a fraction of ``total_steps``
(``float`` in (0, 1)). Past ``total_steps`` every schedule holds its final value.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Literal

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

__all__ = [
    "resolve_steps",
    "warmup_constant",
    "warmup_constant_multiplier",
    "warmup_cosine",
    "warmup_cosine_multiplier",
    "warmup_linear",
    "warmup_linear_multiplier",
    "warmup_stable_decay",
    "warmup_stable_decay_multiplier",
]

DecayShape = Literal["linear", "cosine", "1-sqrt"]
_DECAY_SHAPES = ("linear", "cosine", "1-sqrt")


def resolve_steps(name: str, value: int | float, total_steps: int) -> int:
    """Turn a length given as steps (``int`` >= 0) or a fraction of ``total_steps`` (``float`` in (0, 1)) into steps.

    Example:
        >>> resolve_steps("warmup_steps", 0.1, 1000), resolve_steps("warmup_steps", 50, 1000)
        (100, 50)
    """
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"`total_steps` must be an int >= 1, got {total_steps!r}.")
    if isinstance(value, bool):
        raise ValueError(f"`{name}` must be an int in [0, total_steps] or a float in (0, 1), got {value!r}.")
    if isinstance(value, int):
        if not 0 <= value <= total_steps:
            raise ValueError(
                f"`{name}` must be in [0, total_steps={total_steps}] when given as steps, got {value!r}."
            )
        return value
    if isinstance(value, float):
        if not 0.0 < value < 1.0:
            raise ValueError(
                f"`{name}` must be in (0, 1) when given as a fraction of total_steps, got {value!r}."
            )
        return round(value * total_steps)
    raise ValueError(f"`{name}` must be an int (steps) or a float in (0, 1) (fraction), got {value!r}.")


def _check_ratio(min_lr_ratio: float) -> None:
    if (
        isinstance(min_lr_ratio, bool)
        or not isinstance(min_lr_ratio, (int, float))
        or not 0.0 <= min_lr_ratio <= 1.0
    ):
        raise ValueError(f"`min_lr_ratio` must be in [0, 1], got {min_lr_ratio!r}.")


def _warmup(step: int, warmup_steps: int) -> float:
    return float(step) / float(max(1, warmup_steps))


def warmup_cosine_multiplier(
    step: int, *, warmup_steps: int, total_steps: int, num_cycles: float = 0.5, min_lr_ratio: float = 0.0
) -> float:
    """Linear warmup from 0, then cosine decay: Hugging Face's ``get_cosine_schedule_with_warmup`` multiplier
    (and, with ``min_lr_ratio = r``, its min-lr variant ``m * (1 - r) + r``) for ``0 <= step <= total_steps``.

    Past ``total_steps`` it holds the value at ``total_steps`` (Hugging Face's formula would climb back up).

    Example:
        >>> [round(warmup_cosine_multiplier(s, warmup_steps=2, total_steps=6), 3) for s in range(8)]
        [0.0, 0.5, 1.0, 0.854, 0.5, 0.146, 0.0, 0.0]
    """
    step = min(step, total_steps)
    if step < warmup_steps:
        return _warmup(step, warmup_steps)
    progress = float(step - warmup_steps) / float(max(1, total_steps - warmup_steps))
    factor = 0.5 * (1.0 + math.cos(math.pi * float(num_cycles) * 2.0 * progress))
    return max(0.0, factor * (1.0 - min_lr_ratio) + min_lr_ratio)


def warmup_linear_multiplier(
    step: int, *, warmup_steps: int, total_steps: int, min_lr_ratio: float = 0.0
) -> float:
    """Linear warmup from 0, then linear decay to ``min_lr_ratio`` at ``total_steps`` (Hugging Face's
    ``get_linear_schedule_with_warmup`` when ``min_lr_ratio=0``).

    Example:
        >>> [warmup_linear_multiplier(s, warmup_steps=2, total_steps=6) for s in range(8)]
        [0.0, 0.5, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    """
    step = min(step, total_steps)
    if step < warmup_steps:
        return _warmup(step, warmup_steps)
    factor = max(0.0, float(total_steps - step) / float(max(1, total_steps - warmup_steps)))
    return factor * (1.0 - min_lr_ratio) + min_lr_ratio


def warmup_constant_multiplier(step: int, *, warmup_steps: int) -> float:
    """Linear warmup from 0, then 1.0 (Hugging Face's ``get_constant_schedule_with_warmup``).

    Example:
        >>> [warmup_constant_multiplier(s, warmup_steps=4) for s in range(6)]
        [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    """
    return _warmup(step, warmup_steps) if step < warmup_steps else 1.0


def warmup_stable_decay_multiplier(
    step: int,
    *,
    warmup_steps: int,
    total_steps: int,
    decay_steps: int,
    decay_shape: DecayShape = "linear",
    min_lr_ratio: float = 0.0,
) -> float:
    """Warmup-Stable-Decay (WSD, "trapezoidal"): linear warmup from 0, 1.0 until ``total_steps - decay_steps``,
    then a cooldown to ``min_lr_ratio`` at ``total_steps``: ``linear`` ``1 - x``, ``cosine``
    ``(1 + cos(pi x)) / 2`` or ``1-sqrt`` ``1 - sqrt(x)`` of the cooldown progress ``x``.

    Example:
        >>> [warmup_stable_decay_multiplier(s, warmup_steps=2, total_steps=8, decay_steps=4) for s in range(10)]
        [0.0, 0.5, 1.0, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
    """
    step = min(step, total_steps)
    if step < warmup_steps:
        return _warmup(step, warmup_steps)
    decay_start = total_steps - decay_steps
    if step < decay_start:
        return 1.0
    progress = float(step - decay_start) / float(max(1, decay_steps))
    if decay_shape == "linear":
        factor = 1.0 - progress
    elif decay_shape == "cosine":
        factor = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        factor = 1.0 - math.sqrt(progress)
    return max(0.0, factor) * (1.0 - min_lr_ratio) + min_lr_ratio


def warmup_cosine(
    optimizer: Optimizer,
    warmup_steps: int | float,
    total_steps: int,
    *,
    min_lr_ratio: float = 0.0,
    num_cycles: float = 0.5,
    last_epoch: int = -1,
) -> LambdaLR:
    """Linear warmup, then cosine decay to ``min_lr_ratio`` x the peak LR; see :func:`warmup_cosine_multiplier`.

    Args:
        optimizer: Its groups' ``lr`` is the peak learning rate.
        warmup_steps: Warmup length: steps, or a fraction of ``total_steps``.
        total_steps: Optimizer steps of the whole run (``trainer.estimated_stepping_batches``).
        min_lr_ratio: Final LR as a fraction of the peak, in [0, 1].
        num_cycles: Cosine waves over the decay (0.5: one half-wave from peak to minimum), > 0.
        last_epoch: Index of the last step taken (``-1`` for a new run), as in ``LambdaLR``.

    Raises:
        ValueError: For lengths out of range, ``min_lr_ratio`` outside [0, 1] or ``num_cycles <= 0``.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> scheduler = warmup_cosine(optimizer, warmup_steps=0.25, total_steps=8, min_lr_ratio=0.1)
        >>> lrs = []
        >>> for _ in range(9):
        ...     lrs.append(round(scheduler.get_last_lr()[0], 3))
        ...     optimizer.step()
        ...     scheduler.step()
        >>> lrs
        [0.0, 0.5, 1.0, 0.94, 0.775, 0.55, 0.325, 0.16, 0.1]
    """
    warmup = resolve_steps("warmup_steps", warmup_steps, total_steps)
    _check_ratio(min_lr_ratio)
    if isinstance(num_cycles, bool) or not isinstance(num_cycles, (int, float)) or not num_cycles > 0:
        raise ValueError(f"`num_cycles` must be a number > 0, got {num_cycles!r}.")
    fn = partial(
        warmup_cosine_multiplier,
        warmup_steps=warmup,
        total_steps=total_steps,
        num_cycles=float(num_cycles),
        min_lr_ratio=float(min_lr_ratio),
    )
    return LambdaLR(optimizer, fn, last_epoch=last_epoch)


def warmup_linear(
    optimizer: Optimizer,
    warmup_steps: int | float,
    total_steps: int,
    *,
    min_lr_ratio: float = 0.0,
    last_epoch: int = -1,
) -> LambdaLR:
    """Linear warmup, then linear decay to ``min_lr_ratio`` x the peak; see :func:`warmup_linear_multiplier`.

    Raises:
        ValueError: For lengths out of range or ``min_lr_ratio`` outside [0, 1].

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
        >>> scheduler = warmup_linear(optimizer, warmup_steps=1, total_steps=3)
        >>> [scheduler.lr_lambdas[0](s) * 2.0 for s in range(5)]
        [0.0, 2.0, 1.0, 0.0, 0.0]
    """
    warmup = resolve_steps("warmup_steps", warmup_steps, total_steps)
    _check_ratio(min_lr_ratio)
    fn = partial(
        warmup_linear_multiplier,
        warmup_steps=warmup,
        total_steps=total_steps,
        min_lr_ratio=float(min_lr_ratio),
    )
    return LambdaLR(optimizer, fn, last_epoch=last_epoch)


def warmup_constant(
    optimizer: Optimizer, warmup_steps: int | float, total_steps: int | None = None, *, last_epoch: int = -1
) -> LambdaLR:
    """Linear warmup, then the peak LR for good; see :func:`warmup_constant_multiplier`.

    ``total_steps`` is only needed when ``warmup_steps`` is a fraction.

    Raises:
        ValueError: For a warmup out of range, or a fractional warmup without ``total_steps``.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> [warmup_constant(optimizer, 2).lr_lambdas[0](s) for s in range(4)]
        [0.0, 0.5, 1.0, 1.0]
    """
    if isinstance(warmup_steps, float) and total_steps is None:
        raise ValueError(f"`warmup_steps={warmup_steps!r}` is a fraction, so `total_steps` is required.")
    if total_steps is None:
        if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError(f"`warmup_steps` must be an int >= 0, got {warmup_steps!r}.")
        warmup = warmup_steps
    else:
        warmup = resolve_steps("warmup_steps", warmup_steps, total_steps)
    return LambdaLR(
        optimizer, partial(warmup_constant_multiplier, warmup_steps=warmup), last_epoch=last_epoch
    )


def warmup_stable_decay(
    optimizer: Optimizer,
    warmup_steps: int | float,
    total_steps: int,
    *,
    decay_steps: int | float = 0.2,
    decay_shape: DecayShape = "linear",
    min_lr_ratio: float = 0.0,
    last_epoch: int = -1,
) -> LambdaLR:
    """Warmup, constant peak, then a cooldown over the last ``decay_steps`` (WSD); see
    :func:`warmup_stable_decay_multiplier`.

    Args:
        optimizer: Its groups' ``lr`` is the peak learning rate.
        warmup_steps: Warmup length: steps, or a fraction of ``total_steps``.
        total_steps: Optimizer steps of the whole run.
        decay_steps: Cooldown length (steps or fraction; default the last 20%).
        decay_shape: ``"linear"``, ``"cosine"`` or ``"1-sqrt"``.
        min_lr_ratio: Final LR as a fraction of the peak, in [0, 1].
        last_epoch: As in ``LambdaLR``.

    Raises:
        ValueError: For lengths out of range, ``warmup + decay > total_steps``, an unknown ``decay_shape``
            or ``min_lr_ratio`` outside [0, 1].

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> scheduler = warmup_stable_decay(optimizer, 1, 5, decay_steps=2, decay_shape="1-sqrt")
        >>> [round(scheduler.lr_lambdas[0](s), 3) for s in range(6)]
        [0.0, 1.0, 1.0, 1.0, 0.293, 0.0]
    """
    warmup = resolve_steps("warmup_steps", warmup_steps, total_steps)
    decay = resolve_steps("decay_steps", decay_steps, total_steps)
    if warmup + decay > total_steps:
        raise ValueError(
            f"`warmup_steps` + `decay_steps` must not exceed `total_steps`, got {warmup} + {decay} > {total_steps}."
        )
    if decay_shape not in _DECAY_SHAPES:
        raise ValueError(f"`decay_shape` must be one of {_DECAY_SHAPES}, got {decay_shape!r}.")
    _check_ratio(min_lr_ratio)
    fn = partial(
        warmup_stable_decay_multiplier,
        warmup_steps=warmup,
        total_steps=total_steps,
        decay_steps=decay,
        decay_shape=decay_shape,
        min_lr_ratio=float(min_lr_ratio),
    )
    return LambdaLR(optimizer, fn, last_epoch=last_epoch)
