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
    """One ``scheduler`` as Lightning steps it: every ``frequency`` intervals (``interval``: ``"step"`` or
    ``"epoch"``), on a monitored metric when ``reduce_on_plateau``."""

    scheduler: Any
    interval: str = "epoch"
    frequency: int = 1
    reduce_on_plateau: bool = False

    @property
    def optimizer(self) -> Optimizer | None:
        optimizer = getattr(self.scheduler, "optimizer", None)
        return optimizer if isinstance(optimizer, Optimizer) else None


def schedulers_from_config(config: Any) -> list[SchedulerConfig]:
    """Every scheduler in any return format of ``configure_optimizers``, with Lightning's defaults.

    Raises:
        ValueError: For an ``interval`` other than ``"step"``/``"epoch"`` or a ``frequency`` below 1.

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
    if isinstance(config, Mapping):
        return _one(config.get("lr_scheduler"))
    if not isinstance(config, (list, tuple)):
        return []
    if (
        len(config) == 2
        and isinstance(config[0], (list, tuple))
        and isinstance(config[1], (list, tuple))
        and all(isinstance(o, Optimizer) for o in config[0])
    ):
        return [found for item in config[1] for found in _one(item)]
    return [found for item in config if isinstance(item, Mapping) for found in schedulers_from_config(item)]


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
