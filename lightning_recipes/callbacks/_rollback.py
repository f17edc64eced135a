"""The parts of a rollback shared by ``StabilityGuard`` and ``HealthMonitor(repair=True)``: the snapshot it
restores (with the timings that space snapshots) and the learning-rate cut around every optimizer step."""

from __future__ import annotations

import math
import time
from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor

from lightning_recipes.callbacks._snapshot import Snapshot, capture_averages, copy_to_cpu, load_average

__all__ = ["LRScaling", "RollbackSnapshot", "adaptive_snapshot_interval"]


class RollbackSnapshot:
    """The snapshot a rollback restores (with weight averages) and the host timings that space snapshots."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None  # the last verified state (None: none yet)
        self.averages: list[tuple[Any, Any]] = []  # WeightAveraging averages taken with the snapshot
        self.snapshot_s: float | None = None  # host seconds a snapshot takes (median of the last 3 timed)
        self.snapshot_times: list[float] = []
        self.step_s: float | None = None  # host seconds per optimizer step, measured between checks
        self.last_check: tuple[float, int] | None = None  # (perf_counter, global_step)
        self.snapshot_s_since_check = 0.0

    def release(self) -> None:
        self.snapshot = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "snapshot": None}

    @property
    def step(self) -> int:
        return -1 if self.snapshot is None else self.snapshot.step

    def interval(self, check_every_n_steps: int, overhead: float) -> int:
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
        timed = self.snapshot is not None  # the first capture allocates its buffers: not representative
        start = time.perf_counter()
        schedulers = [config.scheduler for config in trainer.lr_scheduler_configs]
        self.snapshot = (self.snapshot or Snapshot()).capture(  # sync with wait, to time it (adaptive only)
            pl_module, trainer.optimizers, schedulers, step=trainer.global_step, extra=extra, wait=wait
        )
        self.averages = capture_averages(trainer, pl_module)
        elapsed = time.perf_counter() - start
        self.snapshot_s_since_check += elapsed
        if timed:  # the median of the last three damps a preempted copy on a busy machine
            self.snapshot_times = [*self.snapshot_times[-2:], elapsed]
            self.snapshot_s = sorted(self.snapshot_times)[len(self.snapshot_times) // 2]

    def restore(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> Any:
        """Put weights, optimizers, schedulers, weight averages back, clear the gradients; the ``extra``."""
        snapshot = self.snapshot
        assert snapshot is not None  # callers check
        snapshot.restore(pl_module, trainer.optimizers, [c.scheduler for c in trainer.lr_scheduler_configs])
        for callback, kept in self.averages:  # the bad steps were averaged in too (EMAWeightAveraging)
            load_average(trainer, pl_module, callback, copy_to_cpu(kept))
        for optimizer in trainer.optimizers:
            optimizer.zero_grad(set_to_none=True)
        return snapshot.extra


def adaptive_snapshot_interval(
    check_every_n_steps: int, snapshot_s: float | None, step_s: float | None, overhead: float
) -> int:
    """Steps between snapshots: the fewest whole checks over which one snapshot costs at most ``overhead``.

    Example:
        >>> adaptive_snapshot_interval(10, snapshot_s=0.001, step_s=0.05, overhead=0.01)  # 0.2% per check
        10
        >>> adaptive_snapshot_interval(10, snapshot_s=0.5, step_s=0.05, overhead=0.01)  # needs 1000 steps
        1000
    """
    if snapshot_s is None or step_s is None or step_s <= 0:
        return check_every_n_steps  # not measured yet
    steps = snapshot_s / (overhead * step_s)
    return max(1, math.ceil(steps / check_every_n_steps - 1e-9)) * check_every_n_steps


class LRScaling:
    """Multiplies every param group's learning rate by ``factor()`` during each optimizer step, unseen by
    any scheduler; ``floors()`` (per optimizer, per group, or ``None``) first raises a rate below its floor,
    and ``ceilings()`` (likewise) lowers one above its ceiling.
    """

    def __init__(self, factor: Any, floors: Any = None, ceilings: Any = None) -> None:
        self._factor = factor  # () -> float, read at every step
        self._floors = floors  # () -> list[list[float]] | None, read at every step
        self._ceilings = ceilings  # () -> list[list[float]] | None, read at every step
        self._saved: dict[int, list[Any]] = {}
        self._handles: list[Any] = []
        self._index: dict[int, int] = {}  # id(optimizer) -> its position in the attached list

    def attach(self, optimizers: list[torch.optim.Optimizer]) -> None:
        for index, optimizer in enumerate(optimizers):
            self._index[id(optimizer)] = index
            self._handles.append(optimizer.register_step_pre_hook(self._scale))
            self._handles.append(optimizer.register_step_post_hook(self._unscale))

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles, self._index = [], {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_handles": [], "_saved": {}, "_index": {}}

    def _scale(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        factor = self._factor()
        floors = self._floors() if self._floors is not None else None
        ceilings = self._ceilings() if self._ceilings is not None else None
        index = self._index.get(id(optimizer), -1)
        lows = floors[index] if floors and 0 <= index < len(floors) else None
        highs = ceilings[index] if ceilings and 0 <= index < len(ceilings) else None
        if factor != 1.0 or lows or highs:
            self._saved[id(optimizer)] = [group["lr"] for group in optimizer.param_groups]
            for i, group in enumerate(optimizer.param_groups):
                low = lows[i] if lows and i < len(lows) else None
                high = highs[i] if highs and i < len(highs) else None
                lr = group["lr"] if low is None else max(group["lr"], low)
                group["lr"] = (lr if high is None else min(lr, high)) * factor

    def _unscale(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        for group, lr in zip(optimizer.param_groups, self._saved.pop(id(optimizer), [])):
            group["lr"] = lr
