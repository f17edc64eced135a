"""How :func:`~lightning_recipes.tune.speed_tune` times one configuration: a short real fit of a module copy,
its step times, its one-off cost (the time the run took beyond its steps at the steady step time) and its
loss trajectory.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from torch.utils.data import DataLoader, IterableDataset, Sampler
from typing_extensions import override

from lightning_recipes._loss_output import loss_of
from lightning_recipes.harness import Harness, preserved_loader_rng, quiet_trial
from lightning_recipes.tune._speed_options import SpeedOption

__all__ = [
    "Run",
    "StepTimer",
    "deviation",
    "loader_reason",
    "measure_run",
    "planned_steps",
    "rebuild_loader",
    "step_memory",
    "timed_loader",
]


class StepTimer(Callback):
    """Wall time at train start and at every batch end (so a step's time includes its data loading), and each
    step's loss (detached, on the device).

    Syncs: on CUDA, one ``torch.cuda.synchronize`` per step, so that a step's time includes its GPU work (a
    timing tool, not for a production run).

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> timer = StepTimer()
        >>> fast_trainer(max_steps=3, callbacks=[timer]).fit(TinyClassifier(), random_classification_loader())
        >>> len(timer.ends), len(timer.losses)
        (3, 3)
    """

    def __init__(self) -> None:
        self.start = 0.0
        self.ends: list[float] = []
        self.losses: list[torch.Tensor] = []

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.start = time.perf_counter()

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if pl_module.device.type == "cuda":
            torch.cuda.synchronize(pl_module.device)  # sync: the step's time includes its GPU work
        self.ends.append(time.perf_counter())
        loss = loss_of(outputs)
        if loss is None:
            raise TypeError(
                f"`training_step` must return the loss (a tensor or a dict with 'loss'), got {outputs!r}."
            )
        self.losses.append(loss.detach().float().clone())


@dataclass
class Run:
    step_ms: float  # median step time after the warm-up steps
    first_step_ms: float  # train start to the first batch end (worker start-up, compile, first calls)
    overhead_s: float  # the run's time beyond its steps at the steady step time: its one-off cost
    losses: list[float]
    cuda_peak_bytes: int | None = None


class _FixedBatches(Sampler[list[int]]):
    """A batch sampler replaying a fixed list of index batches (the same batches for every measured run)."""

    def __init__(self, batches: list[list[int]]) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


def timed_loader(loader: Any, num_steps: int) -> Any:
    """The loader the measured runs read: for a map-style ``DataLoader`` whose epoch ends in a smaller batch,
    its first ``num_steps - 1`` batches and then that last one, fixed, so that a run pays what a new batch
    shape costs once in a real epoch (``torch.compile`` compiles again for it); else ``loader`` itself.
    Call it under :func:`~lightning_recipes.harness.preserved_loader_rng` (it draws the epoch's shuffle).
    """
    if not isinstance(loader, DataLoader) or isinstance(loader.dataset, IterableDataset):
        return loader
    try:
        # As a DataLoader iterator does: it draws its base seed before the sampler draws the shuffle.
        torch.empty((), dtype=torch.int64).random_(generator=loader.generator)
        batches = [list(batch) for batch in loader.batch_sampler]  # type: ignore[union-attr]
    except TypeError:  # no batch sampler to read (a loader with batch_size=None)
        return loader
    if len(batches) <= num_steps or len(batches[-1]) == len(batches[0]):
        return loader
    return DataLoader(
        loader.dataset,
        batch_sampler=_FixedBatches([*batches[: num_steps - 1], batches[-1]]),
        num_workers=loader.num_workers,
        collate_fn=loader.collate_fn,
        pin_memory=loader.pin_memory,
        worker_init_fn=loader.worker_init_fn,
        persistent_workers=loader.persistent_workers,
        generator=loader.generator,
    )


def planned_steps(trainer: pl.Trainer, loader: Any) -> int | None:
    """The training batches ``trainer.fit`` would run on ``loader``: ``max_steps`` (times the gradient
    accumulation) or ``max_epochs`` epochs of ``limit_train_batches`` batches, whichever ends first;
    ``None`` when the loader has no length and ``max_steps`` is not set.

    Example:
        >>> from lightning_recipes.testing import random_classification_loader
        >>> loader = random_classification_loader()
        >>> planned_steps(pl.Trainer(max_epochs=3, logger=False), loader) == 3 * len(loader)
        True
    """
    accumulate = max(1, int(trainer.accumulate_grad_batches))
    by_steps = trainer.max_steps * accumulate if trainer.max_steps >= 0 else None
    max_epochs = trainer.max_epochs
    if max_epochs is None or max_epochs < 0:
        max_epochs = None if by_steps is not None or max_epochs == -1 else 1000  # Lightning's own default
    try:
        per_epoch: int | None = len(loader)
    except TypeError:
        per_epoch = None
    limit = trainer.limit_train_batches
    if per_epoch is not None and limit is not None:
        per_epoch = min(per_epoch, int(limit)) if isinstance(limit, int) else int(per_epoch * limit)
    by_epochs = max_epochs * per_epoch if max_epochs is not None and per_epoch is not None else None
    candidates = [n for n in (by_steps, by_epochs) if n is not None]
    return min(candidates) if candidates else None


def rebuild_loader(loader: Any, loader_kwargs: dict[str, Any]) -> Any:
    if not loader_kwargs:
        return loader
    if not isinstance(loader, DataLoader):
        raise TypeError(f"the loader options need a torch DataLoader, got {type(loader).__name__}")
    batching: dict[str, Any] = (
        {"batch_size": loader.batch_size, "drop_last": loader.drop_last}  # its sampler is torch's own
        if isinstance(loader.dataset, IterableDataset)
        else {"batch_sampler": loader.batch_sampler}
    )
    return DataLoader(
        loader.dataset,
        **batching,
        collate_fn=loader.collate_fn,
        worker_init_fn=loader.worker_init_fn,
        generator=loader.generator,  # the iterator draws its base seed from it: keeps the shuffle in step
        **loader_kwargs,
    )


def loader_reason(loader: Any, loader_kwargs: dict[str, Any]) -> str | None:
    if not isinstance(loader, DataLoader):
        return f"the training data is a {type(loader).__name__}, not a torch DataLoader to rebuild"
    if isinstance(loader.dataset, IterableDataset) and loader_kwargs.get("num_workers", 0) > 0:
        return (
            "the training data is an IterableDataset: its batches change with the number of workers (each "
            "worker yields the share the dataset gives it), so the loss check cannot compare them"
        )
    return None


def measure_run(
    copy_model: Callable[[], pl.LightningModule],
    loader: Any,
    options: Sequence[SpeedOption],
    *,
    warmup_steps: int,
    measure_steps: int,
    accelerator: str,
    seed: int,
) -> Run:
    trainer_kwargs: dict[str, Any] = {}
    loader_kwargs: dict[str, Any] = {}
    for option in options:
        trainer_kwargs.update(option.trainer_kwargs)
        loader_kwargs.update(option.loader_kwargs)
    timer = StepTimer()
    with preserved_loader_rng(loader), quiet_trial(), ExitStack() as stack:  # same shuffle every run
        for option in options:
            stack.enter_context(option.context() if option.context else nullcontext())
            stack.enter_context(option.measure_context() if option.measure_context else nullcontext())
        torch.manual_seed(seed)  # the same data order and dropout masks for every option
        module: Any = copy_model()
        for option in options:
            if option.prepare is not None:
                module = option.prepare(module)
        trainer = pl.Trainer(
            accelerator=accelerator,
            devices=1,
            max_steps=warmup_steps + measure_steps,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            limit_val_batches=0,
            callbacks=[timer],
            **trainer_kwargs,
        )
        on_cuda = accelerator == "gpu"
        if on_cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        trainer.fit(module, train_dataloaders=rebuild_loader(loader, loader_kwargs))
        cuda_peak = torch.cuda.max_memory_allocated() if on_cuda else None
    steps = [b - a for a, b in zip(timer.ends, timer.ends[1:])]
    measured = steps[warmup_steps - 1 :] if warmup_steps > 0 else steps
    losses = torch.stack(timer.losses).cpu().tolist()  # sync: once, after the run
    step_s = statistics.median(measured)
    return Run(
        step_ms=1e3 * step_s,
        first_step_ms=1e3 * (timer.ends[0] - timer.start),
        overhead_s=max(0.0, timer.ends[-1] - timer.start - len(timer.ends) * step_s),
        losses=losses,
        cuda_peak_bytes=cuda_peak,
    )


def step_memory(context: Harness, options: Sequence[SpeedOption], seed: int) -> tuple[float, float] | None:
    """(activation MiB, step peak MiB) of one training step of a prepared copy, counted by ``MemTracker``;
    ``None`` when the count fails (a tensor subclass or compiled code it cannot follow)."""
    from lightning_recipes.harness import preserved_rng
    from lightning_recipes.strategies import measure_step_memory

    batch = context.train_batches(1)[0]
    with preserved_rng():
        torch.manual_seed(seed)
        module: Any = context.copy_model()
        for option in options:
            if option.prepare is not None:
                module = option.prepare(module)
        try:
            memory = measure_step_memory(module, batch)
        except Exception as err:  # a failed count leaves the timing rows as they are
            names = [option.name for option in options] or ["baseline"]
            rank_zero_warn(f"speed_tune could not count the step memory of {names}: {err}")
            return None
    return memory.activations / 2**20, memory.peak / 2**20


def deviation(losses: list[float], reference: list[float]) -> float:
    """The largest relative difference between two loss trajectories, step by step."""
    if len(losses) != len(reference):
        return float("inf")
    worst = 0.0
    for value, ref in zip(losses, reference):
        if value != value:  # NaN
            return float("inf")
        worst = max(worst, abs(value - ref) / max(abs(ref), 1e-8))
    return worst
