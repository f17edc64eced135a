"""Scale a run's whole LR schedule by one factor: every LR its optimizers and schedulers hold (``base_lrs``,
``OneCycleLR`` / ``CyclicLR``'s ``max_lr``, ``eta_min``, ``min_lrs``), so the schedule keeps its shape;
:func:`check_scalable` proves it on copies of the run's own schedulers before anything is changed.
"""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

from torch import Tensor
from torch.optim import Optimizer
from torch.optim.lr_scheduler import (
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    OneCycleLR,
    ReduceLROnPlateau,
)

__all__ = ["check_scalable", "scale_schedule", "schedule_peak"]

#: Scheduler steps :func:`check_scalable` compares (a copy scaled by 2 against an unscaled copy).
CHECK_STEPS = 200


def _times(value: Any, factor: float) -> Any:
    """``value * factor``; a tensor LR (capturable / fused optimizers) is scaled in place, as torch does."""
    if isinstance(value, Tensor):
        return value.mul_(factor)
    return value * factor


def _leaves(schedulers: Sequence[Any]) -> Iterator[Any]:
    """Every scheduler, the ones inside ``SequentialLR`` / ``ChainedScheduler`` included."""
    for scheduler in schedulers:
        yield scheduler
        yield from _leaves(getattr(scheduler, "_schedulers", None) or [])


def scale_schedule(optimizers: Sequence[Optimizer], schedulers: Sequence[Any], factor: float) -> None:
    """Multiply every learning rate ``optimizers`` and ``schedulers`` hold by ``factor``, in place.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        >>> schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.1, total_steps=10)
        >>> scale_schedule([optimizer], [schedule], 10.0)
        >>> round(optimizer.param_groups[0]["max_lr"], 6), round(optimizer.param_groups[0]["lr"], 6)
        (1.0, 0.04)
    """
    one_cycle = {id(s.optimizer) for s in _leaves(schedulers) if isinstance(s, OneCycleLR)}
    for optimizer in optimizers:
        keys = (
            ("lr", "initial_lr", "max_lr", "min_lr") if id(optimizer) in one_cycle else ("lr", "initial_lr")
        )
        for group in optimizer.param_groups:
            for key in keys:
                if key in group:
                    group[key] = _times(group[key], factor)
    for scheduler in _leaves(schedulers):
        for name in ("base_lrs", "max_lrs", "min_lrs", "_last_lr"):
            values = getattr(scheduler, name, None)
            if isinstance(values, list) and (name != "max_lrs" or isinstance(scheduler, CyclicLR)):
                setattr(scheduler, name, [v * factor for v in values])  # new tensors: the scheduler's copies
        if isinstance(scheduler, (CosineAnnealingLR, CosineAnnealingWarmRestarts)):
            scheduler.eta_min *= factor
        if isinstance(scheduler, ReduceLROnPlateau):
            scheduler.eps *= factor
            default_min_lr = getattr(scheduler, "default_min_lr", None)
            if default_min_lr is not None:
                scheduler.default_min_lr = default_min_lr * factor


def schedule_peak(optimizers: Sequence[Optimizer], schedulers: Sequence[Any]) -> float:
    """The largest LR the schedule reaches in any group: ``OneCycleLR``'s and ``CyclicLR``'s ``max_lr``,
    else the groups' ``initial_lr`` (the LR a warm-up climbs to and a decay starts from), else ``lr``.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        >>> schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.5, total_steps=10)
        >>> schedule_peak([optimizer], [schedule])
        0.5
    """
    one_cycle = {id(s.optimizer) for s in _leaves(schedulers) if isinstance(s, OneCycleLR)}
    peaks = [
        float(g["max_lr"] if id(o) in one_cycle else g.get("initial_lr", g["lr"]))
        for o in optimizers
        for g in o.param_groups
    ]
    for scheduler in _leaves(schedulers):
        if isinstance(scheduler, CyclicLR):
            peaks += [float(lr) for lr in scheduler.max_lrs]
    return max(peaks, default=0.0)


def check_scalable(
    optimizers: Sequence[Optimizer], schedulers: Sequence[Any], steps: int = CHECK_STEPS
) -> None:
    """Prove that :func:`scale_schedule` scales the whole schedule, on copies (nothing of the run changes).

    One copy is scaled by 2, one is not; both are stepped ``steps`` times (or until the schedule ends) and
    every group's LR must stay twice the unscaled one.

    Raises:
        ValueError: Naming the scheduler classes when an LR did not scale (a scheduler keeping LRs of its
            own that :func:`scale_schedule` does not know), or when a copy could not be stepped at all.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1)
        >>> check_scalable([optimizer], [torch.optim.lr_scheduler.CyclicLR(optimizer, 0.01, 0.1)])
    """
    if not schedulers:
        return
    plain, scaled = _copies(optimizers, schedulers), _copies(optimizers, schedulers)
    scale_schedule(scaled[0], scaled[1], 2.0)
    names = ", ".join(type(s).__name__ for s in schedulers)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "lr_scheduler.step() before optimizer.step()": on purpose here
        for step in range(steps + 1):
            mismatch = _mismatch(plain[0], scaled[0])
            if mismatch is not None:
                raise ValueError(
                    f"the learning-rate schedule ({names}) does not scale with its optimizer's LRs: after "
                    f"{step} step(s) a copy scaled by 2 is at {mismatch[0]:.4g}, not {mismatch[1]:.4g} (a "
                    "scheduler keeps LRs of its own). Applying the found LR would leave the run at another "
                    "LR: set it in your config instead (`apply=False` and the printed YAML)."
                )
            if step == steps or not (_step(plain[1]) and _step(scaled[1])):
                break
    if step == 0 and steps > 0 and not all(_known(s) for s in _leaves(schedulers)):
        raise ValueError(
            f"could not step a copy of the learning-rate schedule ({names}) to check that the found LR "
            "scales it; set the LR in your config instead (`apply=False`)."
        )


def _mismatch(plain: Sequence[Optimizer], scaled: Sequence[Optimizer]) -> tuple[float, float] | None:
    """``(got, expected)`` for the first group whose LR in ``scaled`` is not twice that in ``plain``."""
    for plain_group, scaled_group in zip(_groups(plain), _groups(scaled)):
        expected, got = 2.0 * float(plain_group["lr"]), float(scaled_group["lr"])
        if not math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-12):
            return got, expected
    return None


def _known(scheduler: Any) -> bool:
    return type(scheduler).__module__ == "torch.optim.lr_scheduler"


def _groups(optimizers: Sequence[Optimizer]) -> Iterator[dict[str, Any]]:
    for optimizer in optimizers:
        yield from optimizer.param_groups


def _step(schedulers: Sequence[Any]) -> bool:
    """Step every scheduler once (``ReduceLROnPlateau`` with a flat metric); ``False`` when one cannot."""
    try:
        for scheduler in schedulers:
            if isinstance(scheduler, ReduceLROnPlateau):
                scheduler.step(0.0)
            else:
                scheduler.step()
    except Exception:  # past the end of OneCycleLR, or a scheduler that needs arguments
        return False
    return True


def _copies(optimizers: Sequence[Optimizer], schedulers: Sequence[Any]) -> tuple[list[Optimizer], list[Any]]:
    """Deep copies of the optimizers and schedulers (linked to each other) sharing the parameters and the
    optimizer state tensors with the originals: only the groups' numbers and the schedulers are copied."""
    memo: dict[int, Any] = {}
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for param in group["params"]:
                memo[id(param)] = param
        for state in optimizer.state.values():
            for value in state.values():
                if isinstance(value, Tensor):
                    memo[id(value)] = value
    return copy.deepcopy((list(optimizers), list(schedulers)), memo)
