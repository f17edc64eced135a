"""Speed tuning (:func:`speed_tune`): each option trains a copy for a few real steps, timed, checked against
the baseline's loss, ranked by the projected time of the whole run."""

from __future__ import annotations

import functools
import math
import statistics
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from torch.utils.data import DataLoader, IterableDataset
from typing_extensions import override

from lightning_recipes._loss_output import loss_of
from lightning_recipes._progress import ProgressLine
from lightning_recipes._validation import check_bool, check_in_range, check_int, check_positive
from lightning_recipes.harness import (
    Harness,
    preserved_loader_rng,
    preserved_rng,
    quiet_trial,
    resolve_fit_data,
)
from lightning_recipes.harness.silent_trainer import silent_trainer
from lightning_recipes.tune._speed_options import (
    OPTIONS,
    SpeedOption,
    compile_targets,
    loader_reason,
    rebuild_loader,
    resolve_options,
)
from lightning_recipes.tune._speed_result import SpeedRow, SpeedTuneResult

__all__ = [
    "OPTIONS",
    "SpeedOption",
    "SpeedRow",
    "SpeedTuneResult",
    "StepTimer",
    "compile_targets",
    "speed_tune",
]


def speed_tune(
    model: pl.LightningModule,
    datamodule: pl.LightningDataModule | None = None,
    train_dataloaders: Any = None,
    *,
    options: Sequence[str | SpeedOption] | None = None,
    trainer: pl.Trainer | None = None,
    run_steps: int | None = None,
    warmup_steps: int = 3,
    measure_steps: int = 10,
    repeats: int = 3,
    loss_rtol: float = 0.02,
    min_speedup: float = 1.03,
    device: torch.device | str | None = None,
    seed: int = 0,
    progress: bool = True,
) -> SpeedTuneResult:
    """Measure which speed ``options`` (names of :data:`OPTIONS` or :class:`SpeedOption`; default all) make
    ``model``'s whole run faster, on copies, without changing its loss.

    The baseline and each option train a copy for ``warmup_steps + measure_steps`` steps, ``repeats`` times;
    one-off costs are weighed against ``run_steps`` (else ``trainer``'s length, else one epoch);
    ``min_speedup`` and ``loss_rtol`` decide faster and correct. Data as
    :func:`~lightning_recipes.tune.find_lr` takes it. Method: ``docs/guides/tuning.md``.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> result = speed_tune(TinyClassifier(), train_dataloaders=random_classification_loader(),
        ...                     options=["pin_memory"], measure_steps=2, repeats=1)
        >>> [(row.option, row.status.split(":")[0]) for row in result.rows]
        [('baseline', 'baseline'), ('pin_memory', 'skipped')]
    """
    check_int("warmup_steps", warmup_steps, minimum=1)
    check_int("measure_steps", measure_steps, minimum=2)
    check_int("repeats", repeats, minimum=1)
    check_positive("loss_rtol", loss_rtol)
    check_in_range("min_speedup", min_speedup, 1.0, float("inf"))
    check_int("seed", seed)
    check_bool("progress", progress)
    if run_steps is not None:
        check_int("run_steps", run_steps, minimum=1)
    if trainer is not None and not isinstance(trainer, pl.Trainer):
        raise TypeError(f"`trainer` must be a lightning.pytorch.Trainer, got {type(trainer).__name__}.")
    if not isinstance(model, pl.LightningModule):
        raise TypeError(f"`model` must be a LightningModule, got {type(model).__name__}.")
    resolved = resolve_options(options)
    train_dataloaders = resolve_fit_data("speed_tune", model, datamodule, train_dataloaders).train
    steps, source = _run_length(run_steps, trainer, train_dataloaders)
    target = torch.device(device) if device is not None else model.device
    context = Harness(model, train_dataloaders, device=target, datamodule=datamodule, seed=seed)
    with preserved_loader_rng(train_dataloaders):
        torch.manual_seed(seed)
        loader = timed_loader(train_dataloaders, warmup_steps + measure_steps)

    skipped: dict[str, str] = {}
    for option in resolved:
        reason = option.skip_reason(model, target) if option.skip_reason else None
        if not reason and option.loader_kwargs:
            reason = loader_reason(train_dataloaders, option.loader_kwargs)
        if reason:
            skipped[option.name] = reason
    active = [option for option in resolved if option.name not in skipped]
    run_once = functools.partial(
        measure_run, context.copy_model, loader, warmup_steps=warmup_steps, measure_steps=measure_steps,
        device=target, seed=seed,
    )  # fmt: skip

    def measure(configs: dict[str, list[SpeedOption]]) -> dict[str, list[Run]]:
        runs: dict[str, list[Run]] = {name: [] for name in configs}
        with ProgressLine("speed_tune", repeats * len(configs), enabled=progress) as line:
            for repeat in range(repeats):
                for name, config in configs.items():
                    line.show(label := f"{name} (repeat {repeat + 1}/{repeats})")
                    runs[name].append(run_once(config))
                    line.advance(label)
        return runs

    runs = measure({"baseline": [], **{option.name: [option] for option in active}})
    base = runs["baseline"]
    rows = [_baseline_row(base, loss_rtol, steps)]
    good: list[tuple[float, SpeedOption]] = []
    for option in resolved:
        if option.name in skipped:
            rows.append(SpeedRow(option.name, f"skipped: {skipped[option.name]}"))
            continue
        row = _row(option.name, runs[option.name], base, option.loss_rtol or loss_rtol, min_speedup, steps)
        rows.append(row)
        if row.status == "faster":
            good.append((_rank(row), option))
    counted = {option.name: [option] for option in active if option.measure_memory}
    for row in rows if counted else []:
        if row.option == "baseline" or row.option in counted:
            memory = step_memory(context, counted.get(row.option, []), seed)
            if memory is not None:
                row.activation_mb, row.step_peak_mb = memory

    result = SpeedTuneResult(rows, run_steps=steps, run_steps_source=source)
    chosen: list[SpeedOption] = []
    chosen_row: SpeedRow | None = None
    faster = _without_conflicts(good)
    if len(faster) > 1:
        combo = [option for option in resolved if option.name in faster]
        again = measure({"baseline": [], "combination": combo})
        rtol = max(option.loss_rtol or loss_rtol for option in combo)
        name = "+".join(option.name for option in combo)
        row = _row(name, again["combination"], again["baseline"], rtol, min_speedup, steps)
        result.rows.append(row)  # the re-measurement, shown last, with the baseline step time of its repeats
        if row.status == "faster" and _rank(row) > max(rank for rank, _ in good):
            chosen, chosen_row = combo, row
    if good and not chosen:
        _, best = max(good, key=lambda pair: pair[0])
        chosen, chosen_row = [best], next(row for row in rows if row.option == best.name)
    if chosen_row is not None:
        result.best_speedup = chosen_row.speedup or 1.0
        result.best_run_speedup = chosen_row.run_speedup or result.best_speedup
    result.best = [option.name for option in chosen]
    result.chosen_options = list(chosen)
    for option in chosen:
        result.trainer_kwargs.update(option.trainer_kwargs)
        result.loader_kwargs.update(option.loader_kwargs)
        builtin = OPTIONS.get(option.name) is option  # a custom SpeedOption: `.apply(model)`, no callback
        if builtin and (option.prepare is not None or option.context is not None):
            result.module_options.append(option.name)
        if option.advice:
            result.advice[option.name] = option.advice
    return result


def _run_length(run_steps: int | None, trainer: pl.Trainer | None, loader: Any) -> tuple[int | None, str]:
    if run_steps is not None:
        return run_steps, "`run_steps`"
    if trainer is not None:
        steps = planned_steps(trainer, loader)
        if steps is not None:
            return steps, "the Trainer's max_steps / max_epochs"
    try:
        return len(loader), "one epoch of the training data (pass `trainer` or `run_steps` for the real run)"
    except TypeError:
        return None, "unknown (the loader has no length): ranked by step time alone"


def _rank(row: SpeedRow) -> float:
    """The projected run speed-up, else (no run length) the per-step one."""
    return row.run_speedup if row.run_speedup is not None else (row.speedup or 1.0)


def _without_conflicts(good: list[tuple[float, SpeedOption]]) -> set[str]:
    """The faster options that can run together: of two that conflict, the faster stays."""
    kept: list[SpeedOption] = []
    for _, option in sorted(good, key=lambda pair: -pair[0]):
        if not any(option.name in other.conflicts or other.name in option.conflicts for other in kept):
            kept.append(option)
    return {option.name for option in kept}


def _baseline_row(base: list[Run], rtol: float, steps: int | None) -> SpeedRow:
    row = _row("baseline", base, base, rtol, 1.0, steps)
    row.status, row.loss_deviation, row.break_even_steps = "baseline", 0.0, 0
    return row


def break_even_steps(one_off_s: float, step_ms: float, baseline_step_ms: float) -> int | None:
    """The run length, in steps, from which an option with this one-off cost beats the baseline (``None``:
    never).

    Example:
        >>> break_even_steps(2.0, 9.0, 10.0)  # 2 s repaid at 1 ms a step
        2000
        >>> break_even_steps(2.0, 10.0, 10.0) is None
        True
    """
    if step_ms >= baseline_step_ms:
        return None
    return math.ceil(max(0.0, one_off_s) / ((baseline_step_ms - step_ms) / 1e3))


def _row(
    name: str,
    runs: list[Run],
    base: list[Run],
    rtol: float,
    min_speedup: float,
    steps: int | None,
) -> SpeedRow:
    step_ms, base_ms = (statistics.median(run.step_ms for run in rs) for rs in (runs, base))
    speedup = base_ms / step_ms
    base_once = max(run.overhead_s for run in base)  # the cold repeat: compile caches within the process
    one_off = max(run.overhead_s for run in runs) - base_once
    # within what the baseline's own one-off time varies by (at least two of its steps): not counted
    if abs(one_off) <= max(base_once - min(run.overhead_s for run in base), 2 * base_ms / 1e3):
        one_off = 0.0
    first_ms = max(run.first_step_ms for run in runs)  # the first repeat compiles; later ones hit the cache
    row = SpeedRow(name, "", step_ms, speedup, None, rtol, first_ms)
    row.baseline_step_ms, row.one_off_s = base_ms, one_off
    row.break_even_steps = break_even_steps(one_off, step_ms, base_ms)
    if steps is not None:
        row.run_s = steps * step_ms / 1e3 + base_once + one_off
        row.run_speedup = (steps * base_ms / 1e3 + base_once) / row.run_s
    ratio = _rank(row)
    row.loss_deviation = max(deviation(run.losses, base[0].losses) for run in runs)
    if row.loss_deviation > rtol:
        row.status = (
            f"incorrect: loss deviates {row.loss_deviation:.2g} (relative) from the baseline, "
            f"tolerance {rtol:.2g}"
        )
    elif ratio >= min_speedup:
        row.status = "faster"
    elif speedup >= min_speedup:
        row.status = (
            f"not faster for this run: x{speedup:.2f} per step, but {one_off:.1f} s once; pays after "
            f"{'never' if row.break_even_steps is None else row.break_even_steps} steps, the run has {steps}"
        )
    else:
        row.status = "slower" if ratio <= 1.0 else "not faster"
    peaks = [run.cuda_peak_bytes for run in runs if run.cuda_peak_bytes is not None]
    row.cuda_peak_mb = max(peaks) / 2**20 if peaks else None
    return row


class StepTimer(Callback):
    """Wall time at train start and at every batch end, and each step's loss. Syncs on CUDA once per step.

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
            raise TypeError(f"`training_step` must return the loss (or a dict with 'loss'), got {outputs!r}.")
        self.losses.append(loss.detach().float().clone())


@dataclass
class Run:
    step_ms: float  # median step time after the warm-up steps
    first_step_ms: float  # train start to the first batch end (worker start-up, compile, first calls)
    overhead_s: float  # the run's time beyond its steps at the steady step time: its one-off cost
    losses: list[float]
    cuda_peak_bytes: int | None = None


def timed_loader(loader: Any, num_steps: int) -> Any:
    """For a map-style ``DataLoader`` whose epoch ends in a smaller batch, its first ``num_steps - 1``
    batches then that last one (a run pays what a new shape costs, as in a real epoch); else ``loader``."""
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
    kept = {key: getattr(loader, key) for key in ("num_workers", "pin_memory", "persistent_workers")}
    return rebuild_loader(loader, kept, batch_sampler=[*batches[: num_steps - 1], batches[-1]])


def planned_steps(trainer: pl.Trainer, loader: Any) -> int | None:
    """The training batches ``trainer.fit`` would run on ``loader`` (``max_steps`` or ``max_epochs``,
    whichever ends first); ``None`` when it cannot be told.

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


def measure_run(
    copy_model: Callable[[], pl.LightningModule],
    loader: Any,
    options: Sequence[SpeedOption],
    *,
    warmup_steps: int,
    measure_steps: int,
    device: torch.device,
    seed: int,
) -> Run:
    trainer_kwargs = {key: value for option in options for key, value in option.trainer_kwargs.items()}
    loader_kwargs = {key: value for option in options for key, value in option.loader_kwargs.items()}
    timer = StepTimer()
    with preserved_loader_rng(loader), quiet_trial(), ExitStack() as stack:  # same shuffle every run
        for option in options:
            stack.enter_context(option.context() if option.context else nullcontext())
            stack.enter_context(option.measure_context() if option.measure_context else nullcontext())
        torch.manual_seed(seed)  # the same data order and dropout masks for every option
        module = _prepared(copy_model, options)
        trainer = silent_trainer(
            device, max_steps=warmup_steps + measure_steps, callbacks=[timer], **trainer_kwargs
        )
        on_cuda = device.type == "cuda"
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


def _prepared(copy_model: Callable[[], pl.LightningModule], options: Sequence[SpeedOption]) -> Any:
    module: Any = copy_model()
    for option in options:
        module = option.prepare(module) if option.prepare is not None else module
    return module


def step_memory(context: Harness, options: Sequence[SpeedOption], seed: int) -> tuple[float, float] | None:
    """(activation MiB, step peak MiB) of one step of a prepared copy; ``None`` when the count fails."""
    from lightning_recipes.strategies import measure_step_memory

    batch = context.train_batches(1)[0]
    with preserved_rng():
        torch.manual_seed(seed)
        module = _prepared(context.copy_model, options)
        try:
            memory = measure_step_memory(module, batch)
        except Exception as err:  # a failed count leaves the timing rows as they are
            names = [option.name for option in options] or ["baseline"]
            rank_zero_warn(f"speed_tune could not count the step memory of {names}: {err}")
            return None
    return memory.activations / 2**20, memory.peak / 2**20


def deviation(losses: list[float], reference: list[float]) -> float:
    """The largest relative difference between two loss trajectories, step by step (NaN: infinite)."""
    if len(losses) != len(reference) or any(value != value for value in losses):
        return float("inf")
    return max((abs(v - r) / max(abs(r), 1e-8) for v, r in zip(losses, reference)), default=0.0)
