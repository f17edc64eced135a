"""Measure how much of each training step waits for the next batch, with host timers only."""

from __future__ import annotations

import os
import random
import statistics
import time
from collections import deque
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from torch.utils.data import ConcatDataset, DataLoader, IterableDataset, Subset, TensorDataset
from typing_extensions import override

from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.callbacks._trainer import (
    callback_list,
    check_prefix,
    emit,
    lightning_will_log,
    stepped,
)
from lightning_recipes.harness.loaders import first_loader

__all__ = ["InputPipelineMonitor"]

_RECENT = 256  # per-batch wait fractions kept for the median the warning also needs


class WaitClock:
    """The one timer of the data wait (end of a batch's work to the next batch's arrival) and the step
    (arrival to the end of its work); an epoch's first wait is :attr:`first_wait_s`, a :meth:`pause` neither.
    :meth:`take` reads an ``InputPipelineMonitor`` it :meth:`follow` s, else this clock.

    Example:
        >>> clock = WaitClock()
        >>> clock.batch_start(0.0); clock.batch_end(1.0)  # the first batch: its wait is unknown, left out
        >>> [clock.batch_start(4.0), clock.batch_end(5.0), clock.batch_start(5.5), clock.batch_end(6.5)]
        [3.0, 1.0, 0.5, 1.0]
        >>> clock.take()  # 3.5 s waited, 2 s stepped: the wait fraction, and 1.75 s per batch waited
        (0.6363636363636364, 1.75)
        >>> clock.take()  # nothing since
        (-1.0, -1.0)
    """

    def __init__(self) -> None:
        self.wait_s = self.step_s = 0.0
        self.batches = 0
        self.first_wait_s: float | None = None
        self._epoch: float | None = None
        self._started: float | None = None
        self._ended: float | None = None
        self._paused: float | None = None
        self._pipeline: Any = None
        self._totals = (0.0, 0.0)

    def follow(self, pipeline: Any) -> None:
        self._pipeline = pipeline
        if pipeline is not None:
            self._totals = (pipeline.total_fetch_s, pipeline.total_step_s)

    @property
    def source(self) -> str:
        """Where :meth:`take`'s fractions come from: ``"InputPipelineMonitor"`` or ``"host timing"``."""
        return "host timing" if self._pipeline is None else "InputPipelineMonitor"

    @staticmethod
    def now() -> float:
        return float(time.perf_counter())

    def epoch_start(self, now: float | None = None) -> None:
        self._ended, self._epoch = None, now  # the first batch's wait is the loader's start-up

    def batch_start(self, now: float) -> float | None:
        """This batch's wait (``None``: unknown, or the first of an epoch: then :attr:`first_wait_s`)."""
        wait = None if self._ended is None else max(now - self._ended, 0.0)
        if wait is not None:
            self.wait_s += wait
            self.batches += 1
        elif self._epoch is not None:
            self.first_wait_s = now - self._epoch
        self._started = None if wait is None else now  # a batch whose wait is unknown: its step left out
        self._ended = self._epoch = None
        return wait

    def batch_end(self, now: float) -> float | None:
        """This batch's step time (``None`` when its wait was unknown)."""
        step = None if self._started is None else max(now - self._started, 0.0)
        self.step_s += step or 0.0
        self._started, self._ended = None, now
        return step

    def pause(self, now: float) -> None:
        self._paused = now

    def resume(self, now: float) -> None:
        if self._paused is not None:
            pause = max(now - self._paused, 0.0)
            self._ended = None if self._ended is None else self._ended + pause
            self._started = None if self._started is None else self._started + pause
        self._paused = None

    def take(self) -> tuple[float, float]:
        """The wait fraction and the mean wait per batch (s) since the last take (``-1`` when nothing was
        timed), and start again."""
        wait, step, batches = self.wait_s, self.step_s, self.batches
        self.wait_s = self.step_s = 0.0
        self.batches = 0
        if self._pipeline is not None:
            fetch, stepped = self._pipeline.total_fetch_s, self._pipeline.total_step_s
            wait, step = fetch - self._totals[0], stepped - self._totals[1]
            self._totals = (fetch, stepped)
        if wait + step <= 0:
            return -1.0, -1.0
        return wait / (wait + step), wait / batches if batches else -1.0


class InputPipelineMonitor(Callback):
    """Log the fraction of wall time training waits for data, and warn once with concrete DataLoader advice.

    Warns once after ``min_batches`` batches when the wait fraction exceeds ``warn_wait_fraction`` (``None``:
    never), with advice from the loader and one timed batch build. Host timers only, no sync. What is timed,
    and when it warns: ``docs/guides/monitoring.md``.

    Logged keys (``prefix`` prepended), since the last log: ``input_pipeline/wait_fraction``,
    ``input_pipeline/fetch_ms`` (mean), ``input_pipeline/fetch_ms_max``, ``input_pipeline/step_ms`` (mean),
    ``input_pipeline/epoch_start_s`` (this epoch's first batch).

    Example:
        >>> from lightning_recipes.testing import InMemoryLogger, TinyClassifier, fast_trainer
        >>> from lightning_recipes.testing import random_classification_loader
        >>> logger = InMemoryLogger()
        >>> trainer = fast_trainer(max_steps=4, logger=logger, log_every_n_steps=2,
        ...                        callbacks=[InputPipelineMonitor()])
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> [step for step, _ in logger.history("input_pipeline/wait_fraction")]
        [1, 3]
    """

    def __init__(
        self, warn_wait_fraction: float | None = 0.2, min_batches: int = 20, prefix: str = ""
    ) -> None:
        super().__init__()
        check_in_range("warn_wait_fraction", warn_wait_fraction, 0, 1, low_open=True, optional=True)
        check_int("min_batches", min_batches, minimum=1)
        check_prefix(prefix)
        self.warn_wait_fraction = warn_wait_fraction
        self.min_batches = min_batches
        self.prefix = prefix
        self.warned = False
        self.total_fetch_s = 0.0
        self.total_step_s = 0.0
        self.total_batches = 0
        self._recent: deque[float] = deque(maxlen=_RECENT)  # per-batch wait fractions, for the median
        self._clock = WaitClock()  # its wait_s, step_s and batches: the interval since the last log
        self._fetch_max_s = 0.0
        self._last_fetch_s = 0.0
        self._epoch_start_s: float | None = None
        self._step_at_batch_start: int | None = None
        self._markers: tuple[Callback, ...] = ()

    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(prefix=self.prefix)

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        # Markers bracket every other callback's batch hooks. Inserting in front of the list Lightning is
        # iterating shifts this monitor one place on: this hook runs once more and finds the markers.
        if self._markers and self._markers[1] in callback_list(trainer):
            return
        self._markers = (_Marker(self, "batch_arrived"), _Marker(self, "work_ended"))
        callback_list(trainer).insert(0, self._markers[0])
        callback_list(trainer).append(self._markers[1])

    @override
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._clock.epoch_start(self._clock.now())

    def _batch_arrived(self, trainer: pl.Trainer) -> None:
        """Called first among all callbacks' ``on_train_batch_start``: the wait for this batch is over."""
        self._step_at_batch_start = trainer.global_step
        wait = self._clock.batch_start(self._clock.now())
        if wait is None:
            if self._clock.first_wait_s is not None:
                self._epoch_start_s, self._clock.first_wait_s = self._clock.first_wait_s, None
            return
        self._fetch_max_s = max(self._fetch_max_s, wait)
        self.total_fetch_s += wait
        self._last_fetch_s = wait

    def _work_ended(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Called last among all callbacks' ``on_train_batch_end``: the wait for the next batch starts."""
        step = self._clock.batch_end(self._clock.now())
        if step is not None:
            self.total_step_s += step
            self.total_batches += 1
            fetch = self._last_fetch_s
            self._recent.append(fetch / (fetch + step) if fetch + step > 0 else 0.0)
        self._clock.pause(self._clock.now())  # the logging and the warning below are not data wait
        did_step = stepped(trainer, self._step_at_batch_start)
        if lightning_will_log(trainer, did_step) and (self._clock.batches or self._epoch_start_s is not None):
            emit(trainer, pl_module, self._interval_metrics(), own_cadence=False)
            self._clock.take()  # the interval starts again
            self._fetch_max_s = 0.0
        self._maybe_warn(trainer)
        self._clock.resume(self._clock.now())

    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._clock.pause(self._clock.now())  # validation in the gap is not data loading

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._clock.resume(self._clock.now())

    @override
    def state_dict(self) -> dict[str, Any]:
        return {
            "warned": self.warned,
            "total_fetch_s": self.total_fetch_s,
            "total_step_s": self.total_step_s,
            "total_batches": self.total_batches,
        }

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.warned = bool(state_dict.get("warned", False))
        self.total_fetch_s = float(state_dict.get("total_fetch_s", 0.0))
        self.total_step_s = float(state_dict.get("total_step_s", 0.0))
        self.total_batches = int(state_dict.get("total_batches", 0))

    def _interval_metrics(self) -> dict[str, float]:
        metrics: dict[str, float] = {}
        key = f"{self.prefix}input_pipeline/"
        wait, step, batches = self._clock.wait_s, self._clock.step_s, self._clock.batches
        if batches:
            metrics[key + "wait_fraction"] = wait / (wait + step) if wait + step > 0 else 0.0
            metrics[key + "fetch_ms"] = 1e3 * wait / batches
            metrics[key + "fetch_ms_max"] = 1e3 * self._fetch_max_s
            metrics[key + "step_ms"] = 1e3 * step / batches
        if self._epoch_start_s is not None:
            metrics[key + "epoch_start_s"] = self._epoch_start_s
        return metrics

    def _maybe_warn(self, trainer: pl.Trainer) -> None:
        limit = self.warn_wait_fraction
        if self.warned or limit is None or self.total_batches < self.min_batches:
            return
        busy = self.total_fetch_s + self.total_step_s
        fraction = self.total_fetch_s / busy if busy > 0 else 0.0
        # a few long waits (a paused machine) lift the mean, not the typical batch: nothing to advise
        if fraction <= limit or statistics.median(self._recent) <= limit:
            return
        self.warned = True
        fetch_ms = 1e3 * self.total_fetch_s / self.total_batches
        step_ms = 1e3 * self.total_step_s / self.total_batches
        advice = loader_advice(
            first_loader(trainer.train_dataloader),
            fetch_ms=fetch_ms,
            step_ms=step_ms,
            device_type=trainer.strategy.root_device.type,
        )
        rank_zero_warn(
            f"`InputPipelineMonitor`: training waited for data {fraction:.0%} of the time ({fetch_ms:.1f} ms "
            f"a batch vs {step_ms:.1f} ms computing). {advice}",
            category=UserWarning,
        )


class _Marker(Callback):
    """First (``"batch_arrived"``) or last (``"work_ended"``) in the callbacks: the monitor's time marks."""

    def __init__(self, monitor: InputPipelineMonitor, marks: str) -> None:
        self.monitor = monitor
        self.marks = marks

    @property
    @override
    def state_key(self) -> str:
        return f"{self.monitor.state_key}/{self.marks}"

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        if self.marks == "batch_arrived":
            self.monitor._batch_arrived(trainer)

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self.marks == "work_ended":
            self.monitor._work_ended(trainer, pl_module)

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        # The last in the list removes both markers: no other callback's teardown is skipped.
        if self.marks == "work_ended" and callback_list(trainer) and callback_list(trainer)[-1] is self:
            for marker in self.monitor._markers:
                callback_list(trainer).remove(marker)
            self.monitor._markers = ()


_EXPLAINS = 0.5  # building a batch explains the wait when it takes at least half of it


def in_memory_kind(dataset: Any) -> str | None:
    """The type name of a dataset indexing tensors in memory (``TensorDataset``, a ``Subset`` or
    ``ConcatDataset`` of them), else ``None``.

    Example:
        >>> in_memory_kind(TensorDataset(torch.zeros(4, 2)))
        'TensorDataset'
        >>> in_memory_kind(Subset(TensorDataset(torch.zeros(4, 2)), [0, 1]))
        'Subset of TensorDataset'
    """
    if type(dataset) is TensorDataset:
        return "TensorDataset"
    if type(dataset) is Subset:
        inner = in_memory_kind(dataset.dataset)
        return None if inner is None else f"Subset of {inner.removeprefix('Subset of ')}"
    if type(dataset) is ConcatDataset and dataset.datasets:
        kinds = [in_memory_kind(part) for part in dataset.datasets]
        return "ConcatDataset of TensorDatasets" if all(kinds) else None
    return None


def time_batch_build_ms(loader: DataLoader, repeats: int = 3) -> float | None:
    """The median ms to build one batch of ``loader`` here as its fetcher does (``None`` for an iterable
    dataset or no batch size); every RNG is restored afterwards."""
    dataset, size = loader.dataset, loader.batch_size
    if isinstance(dataset, IterableDataset) or size is None:
        return None
    try:
        indices = list(range(min(size, len(dataset))))  # type: ignore[arg-type]
    except TypeError:
        return None
    if not indices:
        return None
    states = torch.get_rng_state(), random.getstate()
    try:
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            getitems = getattr(dataset, "__getitems__", None)
            samples = getitems(indices) if getitems is not None else [dataset[i] for i in indices]
            loader.collate_fn(samples)
            times.append(time.perf_counter() - start)
    finally:
        torch.set_rng_state(states[0])
        random.setstate(states[1])
    return 1e3 * statistics.median(times)


def loader_advice(loader: Any, *, fetch_ms: float, step_ms: float, device_type: str) -> str:
    """The one change that would shorten a wait of ``fetch_ms`` per batch against ``step_ms`` of computing."""
    if not isinstance(loader, DataLoader):
        return f"Time iterating the {type(loader).__name__} alone to find what is slow (not a DataLoader)."
    workers, cpus = loader.num_workers, os.cpu_count() or 1
    pin = (
        " Set `pin_memory=True` for asynchronous host-to-GPU copies."
        if device_type == "cuda" and not loader.pin_memory
        else ""
    )
    kind = in_memory_kind(loader.dataset)
    build_ms = time_batch_build_ms(loader)
    if build_ms is None:
        return f"Time iterating the loader alone; if it is as slow, make the per-sample work cheaper.{pin}"
    measured = f"Building one batch in this process takes {build_ms:.1f} ms"
    explains = build_ms >= _EXPLAINS * fetch_ms
    if kind is not None and workers > 0:
        return (
            f"The dataset is an in-memory {kind}, indexed, not computed: Try `num_workers=0` and compare "
            f"the wait ({workers} workers copy its samples between processes).{pin}"
        )
    if kind is not None and explains:
        return (
            f"{measured} of the in-memory {kind}: index whole batches at once (`sampler=BatchSampler("
            "RandomSampler(dataset), batch_size, drop_last=False), batch_size=None`) or slice tensors kept "
            f"on the device.{pin}"
        )
    if not explains:
        of = f" of the in-memory {kind}" if kind is not None else ""
        return (
            f"{measured}{of}, so most of the wait is not the loader: look at the work between steps "
            f"(`on_train_batch_end` hooks, per-step logging, the host-to-device copy).{pin}"
        )
    if workers == 0:
        return (
            f"{measured}: set `num_workers` > 0 (e.g. {max(1, min(8, cpus - 1))}; {cpus} CPUs) and "
            f"`persistent_workers=True` to build batches in the background.{pin}"
        )
    per_worker_ms = build_ms / workers
    if per_worker_ms <= step_ms:
        return (
            f"{measured}; {workers} workers give one every {per_worker_ms:.1f} ms against a {step_ms:.1f} ms "
            f"step, so the cause is inconclusive: time the loop without logging and hooks to find it.{pin}"
        )
    fix = (
        f"raise `num_workers` towards {cpus - 1} ({cpus} CPUs)"
        if workers < cpus - 1
        else "make the per-sample work cheaper (precompute decoding, augmentation, tokenisation)"
    )
    return (
        f"{measured}; {workers} workers give one every {per_worker_ms:.1f} ms against a {step_ms:.1f} ms "
        f"step and cannot keep up: {fix}.{pin}"
    )
