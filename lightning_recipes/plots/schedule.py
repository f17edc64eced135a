"""Preview a learning-rate schedule before training: the LR at every optimizer step."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

import torch

from lightning_recipes.plots.curves import finish, new_axes

__all__ = ["plot_schedule", "schedule_values"]


def schedule_values(schedule: Any, total_steps: int, *, lr: float | None = None) -> list[float]:
    """The LR at each step ``0`` to ``total_steps - 1``, stepped for real on a one-parameter SGD. ``schedule``
    is an :class:`~lightning_recipes.recipe.OptimizerRecipe`, a module with a recipe mixin, or a factory
    ``f(optimizer) -> LRScheduler``; ``lr``: default the recipe's, or ``1.0`` for a factory.

    Example:
        >>> from torch.optim.lr_scheduler import LambdaLR
        >>> warmup = lambda optimizer: LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 4))
        >>> schedule_values(warmup, 6, lr=0.4)
        [0.1, 0.2, 0.3, 0.4, 0.4, 0.4]
        >>> from lightning_recipes.recipe import OptimizerRecipe
        >>> recipe = OptimizerRecipe("lion", warmup_steps=2, schedule="linear")
        >>> [round(v, 6) for v in schedule_values(recipe, 6)]
        [0.0, 5e-05, 0.0001, 7.5e-05, 5e-05, 2.5e-05]
    """
    if isinstance(total_steps, bool) or not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"`total_steps` must be an int >= 1, got {total_steps!r}.")
    if lr is not None and not lr > 0:
        raise ValueError(f"`lr` must be > 0, got {lr!r}.")
    recipe = _resolved_recipe(schedule)
    if lr is None:
        lr = float(recipe["lr"]) if recipe is not None else 1.0
    parameter = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([parameter], lr=lr)
    scheduler: Any
    if recipe is not None:
        from lightning_recipes.optim.build import build_scheduler

        scheduler = build_scheduler(
            recipe["schedule"],
            optimizer,
            warmup_steps=recipe["warmup_steps"],
            warmup_ratio=recipe["warmup_ratio"],
            total_steps=total_steps,
            min_lr_ratio=recipe["min_lr_ratio"],
        )
        if scheduler is None:  # schedule="none": a constant learning rate
            return [float(lr)] * total_steps
    elif callable(schedule):
        scheduler = schedule(optimizer)
    else:
        raise TypeError(
            "`schedule` must be an OptimizerRecipe, a LightningModule with a recipe mixin, or an "
            f"LR-scheduler factory f(optimizer) -> LRScheduler, got {type(schedule).__name__}."
        )
    if isinstance(scheduler, Mapping):  # a Lightning scheduler config {"scheduler": ..., "interval": ...}
        scheduler = scheduler.get("scheduler")
    if not hasattr(scheduler, "step"):
        raise TypeError(f"The schedule factory must return an LR scheduler, got {type(scheduler).__name__}.")
    values = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. "lr_scheduler.step() before optimizer.step()"
        for _ in range(total_steps):
            values.append(float(optimizer.param_groups[0]["lr"]))
            optimizer.step()
            scheduler.step()
    return values


def _resolved_recipe(schedule: Any) -> dict[str, Any] | None:
    """The recipe fields after the mixins' precedence rules (``None``: not a recipe)."""
    from lightning_recipes.mixins import OptimizerRecipeMixin
    from lightning_recipes.recipe import OptimizerRecipe

    if isinstance(schedule, OptimizerRecipeMixin):
        return schedule.resolve_recipe()
    if isinstance(schedule, OptimizerRecipe):
        holder = SimpleNamespace(
            recipe=schedule, hparams={}, default_optimizer=OptimizerRecipeMixin.default_optimizer
        )
        return OptimizerRecipeMixin.resolve_recipe(holder)  # type: ignore[arg-type]
    return None


def plot_schedule(
    schedule: Any | Mapping[str, Any],
    total_steps: int,
    *,
    lr: float | None = None,
    ax: Any = None,
    title: str | None = "Learning-rate schedule",
    log_scale: bool = False,
) -> Any:
    """Plot the LR at every step of one ``schedule`` (what :func:`schedule_values` takes) or of several
    overlaid (``{label: schedule}``).

    Example:
        >>> import functools
        >>> from torch.optim.lr_scheduler import StepLR
        >>> figure = plot_schedule(functools.partial(StepLR, step_size=10, gamma=0.5), 40, lr=1e-3)
        >>> figure.axes[0].get_lines()[0].get_ydata()[[0, 10, 39]].tolist()
        [0.001, 0.0005, 0.000125]
    """
    figure, axes = new_axes(ax)
    named = schedule if isinstance(schedule, Mapping) else {_label(schedule): schedule}
    for label, item in named.items():
        values = schedule_values(item, total_steps, lr=lr)
        axes.plot(range(total_steps), values, label=label)
    is_multiplier = lr is None and all(_resolved_recipe(item) is None for item in named.values())
    ylabel = "LR multiplier" if is_multiplier else "learning rate"
    legend = len(named) > 1 or isinstance(schedule, Mapping)
    return finish(
        axes, figure, xlabel="optimizer step", ylabel=ylabel, log_scale=log_scale, title=title, legend=legend
    )


def _label(schedule: Any) -> str:
    recipe = _resolved_recipe(schedule)
    if recipe is not None:
        return f"{recipe['optimizer']}, {recipe['schedule']} (peak lr {recipe['lr']:.3g})"
    func: Callable[..., Any] | None = getattr(schedule, "func", None)  # functools.partial
    return getattr(func or schedule, "__name__", type(schedule).__name__)
