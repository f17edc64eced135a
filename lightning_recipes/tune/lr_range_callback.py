"""The LR range test as a callback inside ``trainer.fit``, and the scaling of an LR schedule."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch import Tensor
from torch.optim import Optimizer
from torch.optim.lr_scheduler import (
    CosineAnnealingLR,
    CosineAnnealingWarmRestarts,
    CyclicLR,
    OneCycleLR,
    ReduceLROnPlateau,
)
from typing_extensions import override

from lightning_recipes._validation import check_bool
from lightning_recipes.harness import Harness
from lightning_recipes.sweep_args import SweepArgs
from lightning_recipes.tune.lr_range import LRRangeResult, sweep_lr

__all__ = ["LRRangeTest", "check_scalable", "scale_schedule", "schedule_peak"]


class LRRangeTest(Callback):
    """Run the LR range test at ``on_train_start`` on the Trainer's own data and strategy (every rank gets the
    same :attr:`result`); not on resume. Sweep arguments: ``**sweep`` (those of
    :func:`~lightning_recipes.tune.find_lr`) or ``args``. ``apply=True`` scales the whole LR schedule so that
    its peak is ``peak_lr`` (a scheduler it cannot scale is refused before the sweep); ``stop=True`` stops the
    fit after it; ``print_result`` prints the suggestion and YAML; ``progress=None`` as the Trainer's bar.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> finder = LRRangeTest(num_steps=30, stop=True, print_result=False)
        >>> trainer = fast_trainer(max_steps=5, callbacks=[finder])
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> finder.result.suggestion > 0
        True
    """

    def __init__(
        self,
        *,
        apply: bool = False,
        stop: bool = False,
        print_result: bool = True,
        progress: bool | None = None,
        args: SweepArgs | None = None,
        **sweep: Any,
    ) -> None:
        unknown = sorted(set(sweep) - set(SweepArgs.field_names()))
        if unknown:
            raise TypeError(
                f"LRRangeTest got unknown arguments {unknown}; allowed: 'apply', 'stop', 'print_result', "
                f"'progress', 'args' and the sweep's {SweepArgs.field_names()}."
            )
        if args is not None and sweep:
            raise TypeError(f"LRRangeTest takes `args` or the sweep's arguments {sorted(sweep)}, not both.")
        if args is not None and not isinstance(args, SweepArgs):
            raise TypeError(f"`args` must be a SweepArgs, got {type(args).__name__}.")
        for name, flag in {"apply": apply, "stop": stop, "print_result": print_result}.items():
            check_bool(name, flag)
        if progress is not None:
            check_bool("progress", progress)
        self.progress = progress
        self.args: SweepArgs = SweepArgs(**sweep) if args is None else args
        self.apply = apply
        self.stop = stop
        self.print_result = print_result
        self.result: LRRangeResult | None = None

    @property
    def seed(self) -> int:
        """The seed of the sweep's RNG."""
        return self.args.seed

    @property
    def sweep(self) -> dict[str, Any]:
        """The sweep's arguments but ``seed``, by name."""
        return {k: v for k, v in self.args.to_dict().items() if k != "seed"}

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.result is not None or trainer.ckpt_path is not None:
            return
        if self.apply:  # before the sweep: a schedule the found LR cannot scale fails now, not after it
            check_scalable(trainer.optimizers, [config.scheduler for config in trainer.lr_scheduler_configs])
        context = Harness.from_trainer(trainer, pl_module, seed=self.seed)
        self.result = sweep_lr(context, self.args, progress=self.progress)
        if self.print_result:
            yaml = "" if self.result.peak_lr is None else f"\n{self.result.to_yaml()}"
            rank_zero_info(f"{self.result.summary()}{yaml}")
        if self.apply and self.result.peak_lr is None:
            reason = self.result.reason
            rank_zero_warn(f"LRRangeTest(apply=True): not applied, the run keeps its LRs. {reason}")
        elif self.apply:
            self._apply(trainer)
        if self.stop:
            trainer.should_stop = True

    def _apply(self, trainer: pl.Trainer) -> None:
        """Scale the whole schedule so that its peak (``schedule_peak``) is ``peak_lr``."""
        assert self.result is not None and self.result.peak_lr is not None
        schedulers = [config.scheduler for config in trainer.lr_scheduler_configs]
        base = schedule_peak(trainer.optimizers, schedulers)
        if base > 0:
            scale_schedule(trainer.optimizers, schedulers, self.result.peak_lr / base)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"result": None if self.result is None else self.result.to_dict()}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        data = state_dict.get("result")
        self.result = None if data is None else LRRangeResult.from_dict(data)


#: Scheduler steps :func:`check_scalable` compares (a copy scaled by 2 against an unscaled copy).
CHECK_STEPS = 200


def _times(value: Any, factor: float) -> Any:
    """``value * factor``; a tensor LR (capturable / fused optimizers) in place, as torch does."""
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
    """``ValueError`` unless a copy scaled by 2 (:func:`scale_schedule`) stays at twice an unscaled copy's
    LRs over ``steps`` scheduler steps.

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
    known = all(type(s).__module__ == "torch.optim.lr_scheduler" for s in _leaves(schedulers))
    if step == 0 and steps > 0 and not known:
        raise ValueError(
            f"could not step a copy of the learning-rate schedule ({names}) to check that the found LR "
            "scales it; set the LR in your config instead (`apply=False`)."
        )


def _mismatch(plain: Sequence[Optimizer], scaled: Sequence[Optimizer]) -> tuple[float, float] | None:
    """``(got, expected)`` for the first group whose LR in ``scaled`` is not twice that in ``plain``."""
    for plain_opt, scaled_opt in zip(plain, scaled):
        for plain_group, scaled_group in zip(plain_opt.param_groups, scaled_opt.param_groups):
            expected, got = 2.0 * float(plain_group["lr"]), float(scaled_group["lr"])
            if not math.isclose(got, expected, rel_tol=1e-6, abs_tol=1e-12):
                return got, expected
    return None


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
    """Deep copies of the optimizers and schedulers sharing parameters and state tensors."""
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
