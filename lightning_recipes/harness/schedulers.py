"""The LR schedulers a ``configure_optimizers`` return value configures, with Lightning's defaults:
:func:`schedulers_from_config`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from torch.optim import Optimizer
from torch.optim.lr_scheduler import ReduceLROnPlateau

__all__ = ["SchedulerConfig", "schedulers_from_config"]


@dataclass(frozen=True)
class SchedulerConfig:
    """One scheduler as Lightning steps it.

    Attributes:
        scheduler: The scheduler object (built on the copy's optimizer).
        interval: ``"step"`` (after every optimizer step) or ``"epoch"`` (after every epoch; the default).
        frequency: Step it every ``frequency`` intervals.
        reduce_on_plateau: Whether it steps on a monitored metric (``ReduceLROnPlateau``).
    """

    scheduler: Any
    interval: str = "epoch"
    frequency: int = 1
    reduce_on_plateau: bool = False

    @property
    def optimizer(self) -> Optimizer | None:
        optimizer = getattr(self.scheduler, "optimizer", None)
        return optimizer if isinstance(optimizer, Optimizer) else None


def schedulers_from_config(config: Any) -> list[SchedulerConfig]:
    """Every scheduler in any of the return formats ``configure_optimizers`` allows: ``([optimizers],
    [schedulers or dicts])``, ``{"optimizer": ..., "lr_scheduler": scheduler or dict}``, a list of such
    dicts; a dict's ``interval``/``frequency`` as given, else Lightning's defaults (``"epoch"``, 1).

    Raises:
        ValueError: For an ``interval`` other than ``"step"``/``"epoch"`` or a ``frequency`` below 1
            (Lightning refuses them too), naming the value.

    Example:
        >>> import torch
        >>> optimizer = torch.optim.SGD(torch.nn.Linear(2, 2).parameters(), lr=0.1)
        >>> scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3)
        >>> [(c.interval, c.frequency) for c in schedulers_from_config(
        ...     {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}})]
        [('step', 1)]
        >>> [c.interval for c in schedulers_from_config(([optimizer], [scheduler]))]
        ['epoch']
    """
    found: list[SchedulerConfig] = []
    if isinstance(config, Mapping):
        if "lr_scheduler" in config:
            found.extend(_one(config["lr_scheduler"]))
    elif isinstance(config, (list, tuple)):
        if (
            len(config) == 2
            and isinstance(config[0], (list, tuple))
            and isinstance(config[1], (list, tuple))
            and all(isinstance(o, Optimizer) for o in config[0])
        ):
            for item in config[1]:
                found.extend(_one(item))
        else:
            for item in config:
                if isinstance(item, Mapping):
                    found.extend(schedulers_from_config(item))
    return found


def _one(item: Any) -> list[SchedulerConfig]:
    if item is None:
        return []
    if isinstance(item, Mapping):
        scheduler = item.get("scheduler")
        if scheduler is None:
            return []
        interval = item.get("interval", "epoch")
        frequency = item.get("frequency", 1)
        if interval not in ("step", "epoch"):
            raise ValueError(f'an lr_scheduler\'s "interval" must be "step" or "epoch", got {interval!r}.')
        if isinstance(frequency, bool) or not isinstance(frequency, int) or frequency < 1:
            raise ValueError(f'an lr_scheduler\'s "frequency" must be an integer >= 1, got {frequency!r}.')
        plateau = bool(item.get("reduce_on_plateau", False)) or isinstance(scheduler, ReduceLROnPlateau)
        return [SchedulerConfig(scheduler, interval, frequency, plateau)]
    return [SchedulerConfig(item, "epoch", 1, isinstance(item, ReduceLROnPlateau))]
