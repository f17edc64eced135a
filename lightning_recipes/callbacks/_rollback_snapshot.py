"""StabilityGuard's last verified state: take it (timed, for the adaptive interval), restore it in place."""

from __future__ import annotations

import math
import time
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from torch import Tensor

from lightning_recipes.callbacks._snapshot import Snapshot, copy_to_cpu
from lightning_recipes.callbacks._trainer import callback_list

__all__ = ["RollbackSnapshot", "adaptive_snapshot_interval", "check_rollback_supported"]


class RollbackSnapshot:
    """The in-memory snapshot a rollback restores (model, optimizers, schedulers, weight averages, ``extra``),
    and the host timings that size the adaptive snapshot interval.

    Cost: one device-to-host copy of the model and optimizer state per :meth:`take` (plus one sync to time it
    with ``wait=True``), and that much CPU memory.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> trainer = fast_trainer(max_steps=1)
        >>> model = TinyClassifier()
        >>> trainer.fit(model, random_classification_loader())
        >>> keeper = RollbackSnapshot()
        >>> keeper.take(trainer, model, extra=None, wait=True)
        >>> keeper.step, keeper.snapshot is not None
        (1, True)
    """

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None  # the last verified state (None: none yet)
        self.averages: list[tuple[Callback, Any]] = []  # WeightAveraging averages taken with the snapshot
        self.snapshot_s: float | None = None  # host seconds a snapshot takes (median of the last 3 timed)
        self.snapshot_times: list[float] = []
        self.step_s: float | None = None  # host seconds per optimizer step, measured between checks
        self.last_check: tuple[float, int] | None = None  # (perf_counter, global_step)
        self.snapshot_s_since_check = 0.0

    def release(self) -> None:
        """Drop the snapshot (its CPU copy); the timings stay."""
        self.snapshot = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "snapshot": None}  # a copy or a spawned worker starts without one

    @property
    def step(self) -> int:
        """The step of the snapshot (``-1``: none)."""
        return -1 if self.snapshot is None else self.snapshot.step

    def interval(self, check_every_n_steps: int, overhead: float) -> int:
        """The adaptive interval (:func:`adaptive_snapshot_interval`) with the times measured so far."""
        return adaptive_snapshot_interval(check_every_n_steps, self.snapshot_s, self.step_s, overhead)

    def start_timing(self, global_step: int) -> None:
        self.last_check = (time.perf_counter(), global_step)
        self.snapshot_s_since_check = 0.0

    def measure_step_time(self, global_step: int) -> None:
        """Host seconds per optimizer step since the last check, the snapshot taken meanwhile left out."""
        now = time.perf_counter()
        if self.last_check is not None and global_step > self.last_check[1]:
            elapsed = now - self.last_check[0] - self.snapshot_s_since_check
            self.step_s = max(elapsed, 0.0) / (global_step - self.last_check[1])
        self.last_check = (now, global_step)
        self.snapshot_s_since_check = 0.0

    def take(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, extra: Tensor | None, wait: bool
    ) -> None:
        """Capture the current state (``extra`` is kept by reference: replace it, never modify it)."""
        snapshot = self.snapshot if self.snapshot is not None else Snapshot()
        timed = self.snapshot is not None  # the first capture allocates its buffers: not representative
        start = time.perf_counter()
        self.snapshot = snapshot.capture(
            pl_module,
            trainer.optimizers,
            [config.scheduler for config in trainer.lr_scheduler_configs],
            step=trainer.global_step,
            extra=extra,
            wait=wait,  # sync: per snapshot, to time it (adaptive only)
        )
        self.averages = _capture_averages(trainer, pl_module)
        elapsed = time.perf_counter() - start
        self.snapshot_s_since_check += elapsed
        if timed:  # the median of the last three damps a preempted copy on a busy machine
            self.snapshot_times = [*self.snapshot_times[-2:], elapsed]
            self.snapshot_s = sorted(self.snapshot_times)[len(self.snapshot_times) // 2]

    def restore(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> Any:
        """Put the snapshot back in place (weights, optimizers, schedulers, weight averages), clear the
        gradients, and return its ``extra``."""
        snapshot = self.snapshot
        assert snapshot is not None  # callers check
        snapshot.restore(
            pl_module, trainer.optimizers, [config.scheduler for config in trainer.lr_scheduler_configs]
        )
        for callback, kept in self.averages:
            # the weight average goes back too: the bad steps were averaged into it (EMAWeightAveraging)
            checkpoint = {**copy_to_cpu(kept), "current_model_state": pl_module.state_dict()}
            callback.on_load_checkpoint(trainer, pl_module, checkpoint)
        for optimizer in trainer.optimizers:
            optimizer.zero_grad(set_to_none=True)
        return snapshot.extra


def check_rollback_supported(trainer: pl.Trainer) -> None:
    """Raise for a sharded strategy: its state cannot be snapshotted and restored in place."""
    from lightning.pytorch.strategies import DeepSpeedStrategy, FSDPStrategy, ModelParallelStrategy

    if isinstance(trainer.strategy, (DeepSpeedStrategy, FSDPStrategy, ModelParallelStrategy)):
        raise ValueError(
            f"`StabilityGuard(mode='rollback')` does not support sharded strategies, got "
            f"{type(trainer.strategy).__name__}. Use mode='raise' or mode='skip_step' with this strategy."
        )


def adaptive_snapshot_interval(
    check_every_n_steps: int, snapshot_s: float | None, step_s: float | None, overhead: float
) -> int:
    """Steps between snapshots: the fewest whole checks over which one snapshot costs at most ``overhead``.

    Example:
        >>> adaptive_snapshot_interval(10, snapshot_s=0.001, step_s=0.05, overhead=0.01)  # 0.2% per check
        10
        >>> adaptive_snapshot_interval(10, snapshot_s=0.5, step_s=0.05, overhead=0.01)  # needs 1000 steps
        1000
        >>> adaptive_snapshot_interval(10, snapshot_s=None, step_s=0.05, overhead=0.01)  # not measured yet
        10
    """
    if snapshot_s is None or step_s is None or step_s <= 0:
        return check_every_n_steps
    steps = snapshot_s / (overhead * step_s)
    return max(1, math.ceil(steps / check_every_n_steps - 1e-9)) * check_every_n_steps


def _capture_averages(trainer: pl.Trainer, pl_module: pl.LightningModule) -> list[tuple[Callback, Any]]:
    """A copy of every ``WeightAveraging`` callback's average (Lightning's ``EMAWeightAveraging`` and
    friends), taken through its public checkpoint hook, so a rollback can put the average back with the
    weights. Empty when Lightning has no ``WeightAveraging`` or none is in the Trainer."""
    from lightning.pytorch import callbacks as pl_callbacks

    averaging = getattr(pl_callbacks, "WeightAveraging", None)
    if averaging is None:
        return []
    kept: list[tuple[Callback, Any]] = []
    for callback in callback_list(trainer):
        if isinstance(callback, averaging):
            checkpoint: dict[str, Any] = {"state_dict": {}}
            callback.on_save_checkpoint(trainer, pl_module, checkpoint)
            state = {key: checkpoint[key] for key in ("state_dict", "averaging_state") if key in checkpoint}
            kept.append((callback, copy_to_cpu(state)))
    return kept
