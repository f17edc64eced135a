"""Warmup LR schedules: picklable multipliers ``f(step, ...)`` in ``LambdaLR``, stepped every optimizer step;
Hugging Face's values step for step, except that past ``total_steps`` every schedule holds its final value."""

from __future__ import annotations

import math
from functools import partial
from typing import Any, Literal

from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from lightning_recipes._deprecation import warn_deprecated
from lightning_recipes._validation import check_choice, check_in_range, check_int, check_positive

__all__ = [
    "resolve_steps",
    "resolve_warmup",
    "warmup_constant",
    "warmup_constant_multiplier",
    "warmup_cosine",
    "warmup_cosine_multiplier",
    "warmup_fields",
    "warmup_linear",
    "warmup_linear_multiplier",
    "warmup_stable_decay",
    "warmup_stable_decay_multiplier",
]

DecayShape = Literal["linear", "cosine", "1-sqrt"]
_DECAY_SHAPES = ("linear", "cosine", "1-sqrt")


def resolve_steps(name: str, value: int | float, total_steps: int) -> int:
    """Steps from a length given as steps (``int`` >= 0) or a fraction (``float`` in (0, 1)).

    Example:
        >>> resolve_steps("warmup_steps", 0.1, 1000), resolve_steps("warmup_steps", 50, 1000)
        (100, 50)
    """
    _check_total(total_steps)
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


def warmup_fields(
    warmup_steps: int | float | None, warmup_ratio: float | None, *, stacklevel: int = 2
) -> tuple[int | None, float | None]:
    """The two warm-up spellings as ``(steps, ratio)``; a float ``warmup_steps`` is deprecated.

    Example:
        >>> warmup_fields(10, None), warmup_fields(None, 0.1)
        ((10, None), (None, 0.1))
    """
    if warmup_steps is not None and warmup_ratio is not None:
        raise ValueError(
            f"Give `warmup_steps` or `warmup_ratio`, not both, got warmup_steps={warmup_steps!r} and "
            f"warmup_ratio={warmup_ratio!r}."
        )
    if isinstance(warmup_steps, float):
        if not 0.0 < warmup_steps < 1.0:
            raise ValueError(
                "`warmup_steps` must be in (0, 1) when given as a fraction of total_steps (deprecated: use "
                f"`warmup_ratio`), or an int number of steps, got {warmup_steps!r}."
            )
        warn_deprecated(
            f"`warmup_steps={warmup_steps!r}` as a fraction of the run is deprecated: use "
            f"`warmup_ratio={warmup_steps!r}` (`warmup_steps` now takes a whole number of steps).",
            stacklevel=stacklevel,
        )
        return None, warmup_steps
    if warmup_steps is not None:
        check_int("warmup_steps", warmup_steps, minimum=0)
    if warmup_ratio is not None:
        check_in_range("warmup_ratio", warmup_ratio, 0.0, 1.0, high_open=True)
        warmup_ratio = float(warmup_ratio)
    return warmup_steps, warmup_ratio


def resolve_warmup(
    warmup_steps: int | float | None, warmup_ratio: float | None, total_steps: int, *, stacklevel: int = 2
) -> int:
    """Warm-up steps from ``warmup_steps`` (an int, at most ``total_steps``) or ``warmup_ratio``
    (``ceil(ratio * total_steps)``, as Hugging Face's ``TrainingArguments.get_warmup_steps``); neither: 0.

    Example:
        >>> resolve_warmup(50, None, 1000), resolve_warmup(None, 0.05, 30), resolve_warmup(None, None, 10)
        (50, 2, 0)
    """
    total_steps = _check_total(total_steps)
    steps, ratio = warmup_fields(warmup_steps, warmup_ratio, stacklevel=stacklevel + 1)
    if ratio is not None:
        # `- 1e-9`: 0.07 * 100 is 7.000000000000001 in floating point, which must give 7 steps, not 8
        return min(total_steps, math.ceil(ratio * total_steps - 1e-9))
    return resolve_steps("warmup_steps", steps or 0, total_steps)


def _check_total(total_steps: int | None) -> int:
    if total_steps is None:
        raise ValueError("`total_steps` is required: the optimizer steps of the whole run.")
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"`total_steps` must be an int >= 1, got {total_steps!r}.")
    return total_steps


def _lengths(
    warmup_steps: int | float | None, warmup_ratio: float | None, total_steps: int | None, min_lr_ratio: float
) -> tuple[int, int]:
    """``(total, warmup)`` of a decaying schedule, ``min_lr_ratio`` checked."""
    total = _check_total(total_steps)
    warmup = resolve_warmup(warmup_steps, warmup_ratio, total, stacklevel=4)
    check_in_range("min_lr_ratio", min_lr_ratio, 0.0, 1.0)
    return total, warmup


def _lambda(optimizer: Optimizer, last_epoch: int, multiplier: Any, **fixed: Any) -> LambdaLR:
    return LambdaLR(optimizer, partial(multiplier, **fixed), last_epoch=last_epoch)


def _warmup(step: int, warmup_steps: int) -> float:
    return float(step) / float(max(1, warmup_steps))


def warmup_cosine_multiplier(
    step: int, *, warmup_steps: int, total_steps: int, num_cycles: float = 0.5, min_lr_ratio: float = 0.0
) -> float:
    """Linear warmup from 0, then cosine decay to ``min_lr_ratio`` (Hugging Face's
    ``get_cosine_with_min_lr_schedule_with_warmup``); held past ``total_steps``.

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


def _shape(shape: str, progress: float, *, rising: bool) -> float:
    """Hugging Face's WSD curves: rising (warm-up) from 0 to 1, falling (cooldown) from 1 to 0."""
    if shape == "linear":
        return progress if rising else 1.0 - progress
    if shape == "cosine":
        return 0.5 * (1.0 - math.cos(math.pi * progress) if rising else 1.0 + math.cos(math.pi * progress))
    return 1.0 - math.sqrt(1.0 - progress) if rising else 1.0 - math.sqrt(progress)


def warmup_stable_decay_multiplier(
    step: int,
    *,
    warmup_steps: int,
    total_steps: int,
    decay_steps: int,
    decay_shape: DecayShape = "linear",
    min_lr_ratio: float = 0.0,
    warmup_shape: DecayShape = "linear",
) -> float:
    """Warmup-Stable-Decay, Hugging Face's ``get_wsd_schedule``: a warm-up from ``min_lr_ratio`` to 1.0, 1.0
    until ``total_steps - decay_steps``, then a cooldown to ``min_lr_ratio`` at ``total_steps``, held after.
    Shapes (``linear``, ``cosine``, ``1-sqrt``): ``docs/guides/optimizers.md``.

    Example:
        >>> [warmup_stable_decay_multiplier(s, warmup_steps=2, total_steps=8, decay_steps=4)
        ...  for s in range(10)]
        [0.0, 0.5, 1.0, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0]
        >>> [warmup_stable_decay_multiplier(s, warmup_steps=2, total_steps=4, decay_steps=0, min_lr_ratio=0.5)
        ...  for s in range(6)]
        [0.5, 0.75, 1.0, 1.0, 0.5, 0.5]
    """
    if step >= total_steps:
        return min_lr_ratio
    if step < warmup_steps:
        factor = _shape(warmup_shape, float(step) / float(max(1, warmup_steps)), rising=True)
        return max(0.0, factor * (1.0 - min_lr_ratio) + min_lr_ratio)
    decay_start = total_steps - decay_steps
    if step < decay_start:
        return 1.0
    progress = float(step - decay_start) / float(max(1, decay_steps))
    factor = _shape(decay_shape, progress, rising=False)
    return max(0.0, factor * (1.0 - min_lr_ratio) + min_lr_ratio)


def warmup_cosine(
    optimizer: Optimizer,
    warmup_steps: int | float | None = None,
    total_steps: int | None = None,
    *,
    warmup_ratio: float | None = None,
    min_lr_ratio: float = 0.0,
    num_cycles: float = 0.5,
    last_epoch: int = -1,
) -> LambdaLR:
    """Linear warmup (``warmup_steps``, or ``warmup_ratio`` of ``total_steps``), then ``num_cycles`` cosine
    waves down to ``min_lr_ratio`` x the peak LR: a ``LambdaLR`` of :func:`warmup_cosine_multiplier`.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> scheduler = warmup_cosine(optimizer, total_steps=8, warmup_ratio=0.25, min_lr_ratio=0.1)
        >>> [round(scheduler.lr_lambdas[0](s), 3) for s in range(9)]
        [0.0, 0.5, 1.0, 0.94, 0.775, 0.55, 0.325, 0.16, 0.1]
    """
    total, warmup = _lengths(warmup_steps, warmup_ratio, total_steps, min_lr_ratio)
    check_positive("num_cycles", num_cycles)
    return _lambda(
        optimizer, last_epoch, warmup_cosine_multiplier, warmup_steps=warmup, total_steps=total,
        num_cycles=float(num_cycles), min_lr_ratio=float(min_lr_ratio),
    )  # fmt: skip


def warmup_linear(
    optimizer: Optimizer,
    warmup_steps: int | float | None = None,
    total_steps: int | None = None,
    *,
    warmup_ratio: float | None = None,
    min_lr_ratio: float = 0.0,
    last_epoch: int = -1,
) -> LambdaLR:
    """Linear warmup, then linear decay to ``min_lr_ratio`` x the peak; see :func:`warmup_linear_multiplier`.
    Arguments and errors as in :func:`warmup_cosine`.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=2.0)
        >>> scheduler = warmup_linear(optimizer, warmup_steps=1, total_steps=3)
        >>> [scheduler.lr_lambdas[0](s) * 2.0 for s in range(5)]
        [0.0, 2.0, 1.0, 0.0, 0.0]
    """
    total, warmup = _lengths(warmup_steps, warmup_ratio, total_steps, min_lr_ratio)
    return _lambda(
        optimizer, last_epoch, warmup_linear_multiplier, warmup_steps=warmup, total_steps=total,
        min_lr_ratio=float(min_lr_ratio),
    )  # fmt: skip


def warmup_constant(
    optimizer: Optimizer,
    warmup_steps: int | float | None = None,
    total_steps: int | None = None,
    *,
    warmup_ratio: float | None = None,
    last_epoch: int = -1,
) -> LambdaLR:
    """Linear warmup, then the peak LR for good (:func:`warmup_constant_multiplier`); ``total_steps`` is
    needed only with ``warmup_ratio``.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> [warmup_constant(optimizer, 2).lr_lambdas[0](s) for s in range(4)]
        [0.0, 0.5, 1.0, 1.0]
    """
    steps, ratio = warmup_fields(warmup_steps, warmup_ratio, stacklevel=3)
    if ratio is not None and total_steps is None:
        raise ValueError(f"`warmup_ratio={ratio!r}` is a fraction, so `total_steps` is required.")
    warmup = (steps or 0) if total_steps is None else resolve_warmup(steps, ratio, total_steps)
    return _lambda(optimizer, last_epoch, warmup_constant_multiplier, warmup_steps=warmup)


def warmup_stable_decay(
    optimizer: Optimizer,
    warmup_steps: int | float | None = None,
    total_steps: int | None = None,
    *,
    warmup_ratio: float | None = None,
    decay_steps: int | float = 0.2,
    decay_shape: DecayShape = "linear",
    warmup_shape: DecayShape = "linear",
    min_lr_ratio: float = 0.0,
    last_epoch: int = -1,
) -> LambdaLR:
    """Warmup (``warmup_shape``), constant peak, then a cooldown (``decay_shape``) over the last
    ``decay_steps`` (steps or a fraction, default 20%): a ``LambdaLR`` of
    :func:`warmup_stable_decay_multiplier`. Other arguments as in :func:`warmup_cosine`.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> scheduler = warmup_stable_decay(optimizer, 1, 5, decay_steps=2, decay_shape="1-sqrt")
        >>> [round(scheduler.lr_lambdas[0](s), 3) for s in range(6)]
        [0.0, 1.0, 1.0, 1.0, 0.293, 0.0]
    """
    total, warmup = _lengths(warmup_steps, warmup_ratio, total_steps, min_lr_ratio)
    decay = resolve_steps("decay_steps", decay_steps, total)
    if warmup + decay > total:
        raise ValueError(
            f"`warmup_steps` + `decay_steps` must not exceed `total_steps`, got {warmup} + {decay} > {total}."
        )
    check_choice("decay_shape", decay_shape, _DECAY_SHAPES)
    check_choice("warmup_shape", warmup_shape, _DECAY_SHAPES)
    return _lambda(
        optimizer, last_epoch, warmup_stable_decay_multiplier, warmup_steps=warmup, total_steps=total,
        decay_steps=decay, decay_shape=decay_shape, min_lr_ratio=float(min_lr_ratio),
        warmup_shape=warmup_shape,
    )  # fmt: skip
