"""What :class:`~lightning_recipes.callbacks.InputPipelineMonitor` advises when training waits for data: built
from what the loader is (an in-memory dataset, workers or not) and from a measurement (the time to build one
batch in the main process against the measured wait), never from ``num_workers == 0`` alone."""

from __future__ import annotations

import os
import random
import statistics
import time
from typing import Any

import torch
from torch.utils.data import ConcatDataset, DataLoader, IterableDataset, Subset, TensorDataset

__all__ = ["in_memory_kind", "loader_advice", "time_batch_build_ms"]

_EXPLAINS = 0.5  # building a batch explains the wait when it takes at least half of it


def in_memory_kind(dataset: Any) -> str | None:
    """The dataset's type name when its ``__getitem__`` is indexing into tensors held in memory
    (``TensorDataset``, or a ``Subset`` / ``ConcatDataset`` of such), else ``None``.

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
    """The median time, in ms, to build one batch of ``loader`` in this process as its fetcher does (index
    the dataset ``batch_size`` times, then ``collate_fn``), on the first indices; ``None`` for an
    ``IterableDataset`` or a loader without a batch size. Every RNG is restored afterwards (a random
    augmentation draws from them), so training sees the same stream.
    """
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
    """What would shorten a wait of ``fetch_ms`` per batch for data against ``step_ms`` of computing: one
    or two sentences with the measured numbers and the one change to make (nothing about what would not help).

    Example:
        >>> data = TensorDataset(torch.zeros(64, 2))
        >>> text = loader_advice(DataLoader(data, batch_size=8), fetch_ms=5.0, step_ms=5.0, device_type="cpu")
        >>> "in-memory TensorDataset" in text and "num_workers` > 0" not in text
        True
    """
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
