"""Speed tuning on the user's model: each speed option trains a copy for a few real steps, timed and checked,
and is ranked by the projected time of the whole run it is for.

:func:`speed_tune` trains a deep copy of the module for ``warmup_steps + measure_steps`` steps once per option
(and once as the baseline), in repeats that interleave the options so that a load change on the machine hits
every option alike, and compares the median step time, the one-off cost (compilation, worker start-up, first
calls) and the loss trajectory with the baseline's. The one-off cost is counted against the run's planned
steps (from the ``trainer``, ``run_steps`` or one epoch), so an option that pays only after thousands of steps
is not chosen for a short run; every row says from which run length it pays. The options that do not apply on
the device are listed as skipped, with the reason. The result names the fastest combination of options that
were each faster for the run and kept the loss, re-measured against the baseline together, and applies it
(:class:`~lightning_recipes.tune.ApplySpeedOptions`, ``.trainer_kwargs``, ``.loader_kwargs``, ``.to_yaml()``).

The option catalogue is in ``_speed_options.py``, the timing of one configuration in ``_speed_measure.py``,
the result in ``_speed_result.py``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch

from lightning_recipes._progress import ProgressLine
from lightning_recipes._validation import check_bool, check_in_range, check_int, check_positive
from lightning_recipes.harness import Harness, preserved_loader_rng, resolve_fit_data
from lightning_recipes.tune._speed_measure import (
    Run,
    StepTimer,
    deviation,
    loader_reason,
    measure_run,
    planned_steps,
    rebuild_loader,
    step_memory,
    timed_loader,
)
from lightning_recipes.tune._speed_options import OPTIONS, SpeedOption, compile_targets, resolve_options
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

_rebuild_loader = rebuild_loader  # the name earlier releases' tests import


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
    """Measure which speed options make ``model``'s whole run faster, on copies, without changing its loss.

    Each option (default: all of :data:`OPTIONS`) and the baseline train a deep copy for
    ``warmup_steps + measure_steps`` steps with a plain Trainer, ``repeats`` times, interleaved. When an epoch
    of the loader ends in a smaller batch, the timed steps end with that batch (a new shape makes
    ``torch.compile`` compile again, once per run). Per option:

    - its **step time**, the median of its steps after the warm-up, and its **speed-up**, the baseline's
      step time (same repeats) over its own;
    - its **one-off cost**: the time its run took beyond its steps at its step time (compilation, worker
      start-up, first calls; the largest over repeats, i.e. the cold one), minus the baseline's; ``0`` when
      within noise (the spread of the baseline's own over repeats, at least two of its steps);
    - its **break-even**: the run length, in training batches, from which the per-step gain repays the
      one-off cost (``None``: never, it is not faster per step);
    - its **projected run time** over the run's planned steps (``run_steps``; else from ``trainer``:
      ``max_steps`` / ``max_epochs`` x batches per epoch, ``limit_train_batches``, gradient accumulation;
      else one epoch of the training data) and the baseline's projection over it: the **run speed-up** that
      ranks the options. An option faster per step whose one-off cost the run does not repay reads ``not
      faster for this run``, with its break-even.

    Its loss trajectory must stay within ``loss_rtol`` (relative, every step) of the baseline's, else it is
    ``incorrect`` (``bf16-mixed`` uses its own looser tolerance, shown in the row). The options faster for
    the run and correct are then combined and re-measured against the baseline (``repeats`` times; of two
    options that compile the same code, only the faster joins); the combination is kept only if its run
    speed-up beats the best single option's, else the single best option is. The model, the RNG streams and
    the loader are left as they were.

    What is not projected: validation (``torch.compile`` compiles the eval-mode graph again at the first
    validation), checkpointing and logging, which every option pays alike except for that recompilation.

    Memory: when an option with ``measure_memory`` runs (``activation_checkpointing``), its row and the
    baseline's get ``activation_mb`` and ``step_peak_mb``, counted on one step of a copy, so the table shows
    what checkpointing saves next to what it costs in time. On CUDA every row also gets ``cuda_peak_mb``.
    Activation checkpointing is slower by design (it recomputes each block's forward in backward); it is in
    the table for the memory it saves and is chosen only if it is also faster.

    Cost: ``(1 + options) * repeats + 2 * repeats`` short fits; one host sync per step for CUDA timing.

    Args:
        model: A ``LightningModule`` with automatic optimisation.
        datamodule: Its ``setup("fit")`` and ``train_dataloader()`` give the data.
        train_dataloaders: The training loader when there is no datamodule (default: the model's own).
        options: Option names from :data:`OPTIONS` or :class:`SpeedOption` objects (default: all).
        trainer: The Trainer of the run to tune for (not fitted here): its planned steps weigh the one-off
            costs.
        run_steps: The run's planned training batches, an int >= 1 (overrides ``trainer``).
        warmup_steps: Steps not timed (compilation, allocator and cache warm-up), an int >= 1.
        measure_steps: Steps timed, an int >= 2.
        repeats: Interleaved repeats of every option, an int >= 1.
        loss_rtol: Relative loss tolerance against the baseline's trajectory, > 0.
        min_speedup: The run speed-up an option needs to count as ``faster``, >= 1 (a margin over timing
            noise; below it and above 1 the row reads ``not faster``).
        device: Where the copies train (default: the model's device).
        seed: Seed of every run (the same data order and initial RNG for all options).
        progress: Show one transient progress line (the run in progress, how many are done) on stderr, erased
            at the end; only on rank zero and when stderr is a terminal. ``False``: nothing.

    Returns:
        A :class:`SpeedTuneResult`: ``.rows``, ``.best``, ``.trainer_kwargs``, ``.loader_kwargs``,
        ``.callback()``, ``.apply(model)``, ``.to_yaml()``, ``.table()``.

    Raises:
        ValueError: For an argument out of range (naming it) or no training data.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> result = speed_tune(TinyClassifier(), train_dataloaders=random_classification_loader(),
        ...                     options=["pin_memory"], measure_steps=2, repeats=1)
        >>> [(row.option, row.status.split(":")[0]) for row in result.rows]
        [('baseline', 'baseline'), ('pin_memory', 'skipped')]
        >>> result.run_steps_source
        'one epoch of the training data (pass `trainer` or `run_steps` for the real run)'
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
    accelerator = "gpu" if target.type == "cuda" else target.type
    # copy_model: a deep copy on `target` sharing the datamodule and loaders, with no Trainer attached
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

    def measure(configs: dict[str, list[SpeedOption]]) -> dict[str, list[Run]]:
        runs: dict[str, list[Run]] = {name: [] for name in configs}
        line = ProgressLine("speed_tune", repeats * len(configs), enabled=progress)
        with line:
            for repeat in range(repeats):
                for name, config in configs.items():
                    line.show(f"{name} (repeat {repeat + 1}/{repeats})")
                    runs[name].append(
                        measure_run(
                            context.copy_model,
                            loader,
                            config,
                            warmup_steps=warmup_steps,
                            measure_steps=measure_steps,
                            accelerator=accelerator,
                            seed=seed,
                        )
                    )
                    line.advance(f"{name} (repeat {repeat + 1}/{repeats})")
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
    if any(option.measure_memory for option in active):
        by_name = {option.name: option for option in active}
        for row in rows:
            counted_option = by_name.get(row.option)
            if row.option == "baseline" or (counted_option is not None and counted_option.measure_memory):
                counted = step_memory(context, [counted_option] if counted_option else [], seed)
                if counted is not None:
                    row.activation_mb, row.step_peak_mb = counted

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
    """What orders the faster options: the projected run speed-up, else (no run length) the per-step one."""
    return row.run_speedup if row.run_speedup is not None else (row.speedup or 1.0)


def _without_conflicts(good: list[tuple[float, SpeedOption]]) -> set[str]:
    """The names of the faster options that can run together: of two that conflict, the faster stays."""
    kept: list[SpeedOption] = []
    for _, option in sorted(good, key=lambda pair: -pair[0]):
        if not any(option.name in other.conflicts or other.name in option.conflicts for other in kept):
            kept.append(option)
    return {option.name for option in kept}


def _median_ms(runs: list[Run]) -> float:
    return statistics.median(run.step_ms for run in runs)


def _overhead_s(runs: list[Run]) -> float:
    return max(run.overhead_s for run in runs)  # the cold repeat: compile caches within the process


def _overhead_noise_s(base: list[Run]) -> float:
    """How much a one-off time can differ by noise alone: the spread of the baseline's over its repeats, and
    at least two of its steps (a run's one-off time sums its steps' deviations from the median)."""
    spread = max(run.overhead_s for run in base) - min(run.overhead_s for run in base)
    return max(spread, 2 * _median_ms(base) / 1e3)


def _first(runs: list[Run]) -> float:
    return max(run.first_step_ms for run in runs)  # the first repeat compiles; later ones hit the cache


def _cuda_peak(runs: list[Run]) -> float | None:
    peaks = [run.cuda_peak_bytes for run in runs if run.cuda_peak_bytes is not None]
    return max(peaks) / 2**20 if peaks else None


def _baseline_row(base: list[Run], rtol: float, steps: int | None) -> SpeedRow:
    step_ms = _median_ms(base)
    row = SpeedRow("baseline", "baseline", step_ms, 1.0, 0.0, rtol, _first(base))
    row.baseline_step_ms, row.one_off_s, row.break_even_steps = step_ms, 0.0, 0
    if steps is not None:
        row.run_s, row.run_speedup = steps * step_ms / 1e3 + _overhead_s(base), 1.0
    row.cuda_peak_mb = _cuda_peak(base)
    return row


def break_even_steps(one_off_s: float, step_ms: float, baseline_step_ms: float) -> int | None:
    """The run length, in steps, from which an option with this one-off cost and step time beats the
    baseline: ``0`` when it costs nothing once and is faster, ``None`` when it is not faster per step.

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
    step_ms, base_ms = _median_ms(runs), _median_ms(base)
    speedup = base_ms / step_ms
    one_off = _overhead_s(runs) - _overhead_s(base)
    if abs(one_off) <= _overhead_noise_s(base):
        one_off = 0.0  # within what the baseline's own one-off time varies by: not counted
    row = SpeedRow(name, "", step_ms, speedup, None, rtol, _first(runs))
    row.baseline_step_ms, row.one_off_s = base_ms, one_off
    row.break_even_steps = break_even_steps(one_off, step_ms, base_ms)
    if steps is not None:
        row.run_s = steps * step_ms / 1e3 + _overhead_s(base) + one_off
        row.run_speedup = (steps * base_ms / 1e3 + _overhead_s(base)) / row.run_s
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
            f"{_steps(row.break_even_steps)} steps, the run has {steps}"
        )
    else:
        row.status = "slower" if ratio <= 1.0 else "not faster"
    row.cuda_peak_mb = _cuda_peak(runs)
    return row


def _steps(value: int | None) -> str:
    return "never" if value is None else str(value)
