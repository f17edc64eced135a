"""Every read of Lightning's private loop state, once, each with its public fallback: a Lightning release
that moves them breaks one file."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from torch.optim import Optimizer

__all__ = [
    "callback_list",
    "check_prefix",
    "emit",
    "lightning_log_step",
    "lightning_will_log",
    "logged_running_mean",
    "optimizer_index",
    "stepped",
]


def callback_list(trainer: pl.Trainer) -> list[Callback]:
    """``trainer.callbacks``: the live list Lightning iterates over, in order, for every callback hook."""
    return trainer.callbacks  # type: ignore[attr-defined,no-any-return]  # set by the Trainer, untyped


def check_prefix(prefix: Any) -> None:
    """The logged-key ``prefix`` every callback takes: a ``str`` (``_validation`` has no string check)."""
    if not isinstance(prefix, str):
        raise ValueError(f"`prefix` must be a str, got {prefix!r}.")


def stepped(trainer: pl.Trainer, step_at_batch_start: int | None) -> bool:
    """Whether the optimizer stepped since ``step_at_batch_start`` (``None``: no batch start seen: yes)."""
    return step_at_batch_start is None or trainer.global_step != step_at_batch_start


def lightning_will_log(trainer: pl.Trainer, did_step: bool = True) -> bool:
    """Whether the Trainer writes step metrics to its loggers at the end of the current training batch
    (``did_step``: :func:`stepped` in ``on_train_batch_end``; accumulating batches write none)."""
    module = trainer.lightning_module
    if module.automatic_optimization and not did_step:
        return False
    # private: Lightning's own monitors read this flag; public fallback below (Lightning's rule)
    connector = getattr(trainer, "_logger_connector", None)
    if connector is not None and hasattr(connector, "should_update_logs"):
        return bool(connector.should_update_logs)
    every = getattr(trainer, "log_every_n_steps", 0)  # set by the Trainer at construction
    return bool(every) and (lightning_log_step(trainer) + 1) % every == 0


def lightning_log_step(trainer: pl.Trainer) -> int:
    """The step Lightning attaches to logged step metrics (batches that stepped, not optimizer steps)."""
    # private: the epoch loop's counter of batches that stepped; public fallback: the global step
    epoch_loop = getattr(getattr(trainer, "fit_loop", None), "epoch_loop", None)
    return int(getattr(epoch_loop, "_batches_that_stepped", trainer.global_step))


def optimizer_index(trainer: pl.Trainer, optimizer: Optimizer) -> int:
    """The position of ``optimizer`` (or the ``LightningOptimizer`` wrapping it) in ``trainer.optimizers``."""
    for i, candidate in enumerate(trainer.optimizers):
        if candidate is optimizer or getattr(candidate, "optimizer", None) is optimizer:
            return i
    return 0


def emit(
    trainer: pl.Trainer, pl_module: pl.LightningModule, metrics: dict[str, Any], own_cadence: bool
) -> None:
    """Send host floats to the loggers: through ``log_dict`` on Lightning's cadence, or (``own_cadence``)
    straight to ``trainer.loggers`` on rank zero, as ``LearningRateMonitor``."""
    if not own_cadence:
        pl_module.log_dict(metrics, on_step=True, on_epoch=False, sync_dist=False, batch_size=1)
        return
    if trainer.is_global_zero:
        step = lightning_log_step(trainer)
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)


def logged_running_mean(trainer: pl.Trainer, name: str) -> tuple[Any, Any] | None:
    """The running weighted sum and sample count Lightning keeps for ``self.log(name, ..., on_epoch=True)``
    (mean reduction) in validation_step, replaced on each logged batch; ``None`` when not logged that way."""
    # private: the active loop's ResultCollection (``trainer._results``, Lightning 2.x), its _ResultMetrics
    results = getattr(trainer, "_results", None)
    if not isinstance(results, dict):
        return None
    for metric in results.values():
        meta = getattr(metric, "meta", None)
        if (
            meta is not None
            and getattr(meta, "name", None) == name
            and str(getattr(meta, "fx", "")).startswith("validation_step")
            and getattr(meta, "on_epoch", False)
            and getattr(meta, "is_mean_reduction", False)
            and getattr(metric, "is_tensor", False)
            and hasattr(metric, "cumulated_batch_size")
            and getattr(meta, "dataloader_idx", None) == getattr(results, "dataloader_idx", None)
        ):
            return metric.value, metric.cumulated_batch_size
    return None
