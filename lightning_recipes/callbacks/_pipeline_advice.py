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
    """The advice for a training loop that waits ``fetch_ms`` per batch for data and computes ``step_ms``.

    Example:
        >>> data = TensorDataset(torch.zeros(64, 2))
        >>> text = loader_advice(DataLoader(data, batch_size=8), fetch_ms=5.0, step_ms=5.0, device_type="cpu")
        >>> "in-memory TensorDataset" in text and "num_workers` > 0" not in text
        True
    """
    if not isinstance(loader, DataLoader):
        return (
            f"The training data is a {type(loader).__name__}, not a torch DataLoader: its batches could not "
            "be timed apart from the loop, so the cause is not known (time iterating it alone to see)."
        )
    workers = loader.num_workers
    current = (
        f"The train DataLoader has num_workers={workers}, pin_memory={loader.pin_memory}, "
        f"persistent_workers={loader.persistent_workers}, prefetch_factor={loader.prefetch_factor}."
    )
    kind = in_memory_kind(loader.dataset)
    build_ms = time_batch_build_ms(loader)
    cpus = os.cpu_count() or 1
    pin = (
        " Set `pin_memory=True` for asynchronous host-to-GPU copies."
        if device_type == "cuda" and not loader.pin_memory
        else ""
    )
    if build_ms is None:
        return (
            f"{current} A batch of this loader could not be built apart from the loop (an IterableDataset), "
            "so the cause of the wait is not known: time iterating the loader alone; if that is as slow, the "
            f"dataset's per-sample work is the cause.{pin}"
        )
    measured = f"Building one batch in this process takes {build_ms:.1f} ms (measured now)"
    if kind is not None:
        if workers > 0:
            return (
                f"{current} The dataset is an in-memory {kind}: a sample is an indexing operation, so worker "
                "processes add inter-process copies and remove no work. Try `num_workers=0` and compare the "
                f"wait. {measured}.{pin}"
            )
        if build_ms >= _EXPLAINS * fetch_ms:
            return (
                f"{current} The dataset is an in-memory {kind}: a sample is an indexing operation, so worker "
                f"processes would not help (they add inter-process copies). {measured}, most of the wait: it "
                "is the per-sample indexing and collation. Index whole batches at once instead: "
                "`DataLoader(dataset, batch_size=None, sampler=BatchSampler(RandomSampler(dataset), "
                "batch_size, drop_last=False))` (one indexing per batch), or keep the tensors on the device "
                f"and slice them.{pin}"
            )
        return _elsewhere(current, f"{measured}, of the {fetch_ms:.1f} ms wait", pin, in_memory=kind)
    if workers == 0:
        if build_ms >= _EXPLAINS * fetch_ms:
            return (
                f"{current} {measured}, most of the {fetch_ms:.1f} ms wait, is the dataset's per-sample "
                f"work: set `num_workers` > 0 (e.g. {max(1, min(8, cpus - 1))}; this machine has {cpus} "
                f"CPUs) so batches load in the background, with `persistent_workers=True`.{pin}"
            )
        return _elsewhere(current, f"{measured}, of the {fetch_ms:.1f} ms wait", pin, in_memory=None)
    per_worker_ms = build_ms / workers
    if per_worker_ms > step_ms:
        more = (
            f"raise `num_workers` from {workers} towards {cpus - 1} (this machine has {cpus} CPUs)"
            if workers < cpus - 1
            else f"the {workers} workers use this machine's {cpus} CPUs: make the per-sample work cheaper "
            "(precompute decoding, augmentation, tokenisation)"
        )
        return (
            f"{current} {measured}; with {workers} workers that is {per_worker_ms:.1f} ms a batch against a "
            f"{step_ms:.1f} ms step: the workers cannot keep up. {more[0].upper() + more[1:]}.{pin}"
        )
    return (
        f"{current} {measured}; with {workers} workers that is {per_worker_ms:.1f} ms a batch against a "
        f"{step_ms:.1f} ms step, so the workers should keep up: the cause is inconclusive (the copy of "
        "batches between processes, or other work between steps); more workers are not indicated."
        f"{pin}"
    )


def _elsewhere(current: str, measured: str, pin: str, in_memory: str | None) -> str:
    what = (
        f" (the dataset is an in-memory {in_memory}: a sample is an indexing operation, and worker processes "
        "would only add inter-process copies)"
        if in_memory
        else ""
    )
    return (
        f"{current} {measured}: most of the wait is not the loader{what}, so more workers would not help. "
        "It is other work between steps: the LightningModule's `on_train_batch_end`, loggers writing every "
        f"step, the host-to-device copy of the batch.{pin}"
    )
