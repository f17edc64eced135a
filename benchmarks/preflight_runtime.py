"""Wall time of the full preflight on the demo's digits CNN, per check, next to what Lightning offers and to
training.

Interleaved (round-robin) in one process, ``--rounds`` times, medians reported, so machine load hits every
variant alike. Variants:

- ``preflight``: ``lightning_recipes.preflight(DigitsCNN(), datamodule=DigitsDataModule())``, all six checks,
  with torch's default intra-op threads (2 here);
- ``preflight_1_thread``: the same with ``torch.set_num_threads(1)`` (on a loaded 2-core machine, two OpenMP
  threads per process oversubscribe the cores);
- ``preflight_callback``: the same checks as the ``Preflight`` callback at the start of a 1-step ``fit``;
- ``fast_dev_run``: ``Trainer(fast_dev_run=True).fit`` - Lightning's built-in smoke test (one train + one val
  batch; it asserts nothing about the loss);
- ``train_epoch``: one epoch of the demo's training (1,438 images, batch 64), to put the preflight in units of
  the training it protects (the demo trains 12 epochs).

Run: ``python -m benchmarks.preflight_runtime [--rounds 3]``. The acceptance bar is the full preflight <= 30 s
on the project's 2-core CPU.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import lightning.pytorch as pl
import torch

from lightning_recipes.callbacks import Preflight
from lightning_recipes.checks import preflight
from lightning_recipes.data import DigitsDataModule
from lightning_recipes.testing import DigitsCNN

__all__ = ["main"]

BUDGET_S = 30.0


def _trainer(**overrides: object) -> pl.Trainer:
    settings: dict = {
        "accelerator": "cpu",
        "devices": 1,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
    }
    settings.update(overrides)
    return pl.Trainer(**settings)


def run_preflight(per_check: dict[str, list[float]], threads: int | None = None) -> float:
    saved = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        started = time.perf_counter()
        report = preflight(DigitsCNN(), datamodule=DigitsDataModule())
        elapsed = time.perf_counter() - started
    finally:
        torch.set_num_threads(saved)
    if not report.ok:
        raise RuntimeError(f"the demo model failed its preflight:\n{report}")
    for result in report:
        per_check.setdefault(result.name, []).append(result.seconds)
    return elapsed


def run_preflight_callback() -> float:
    started = time.perf_counter()
    trainer = _trainer(max_steps=1, callbacks=[Preflight(print_report=False)])
    trainer.fit(DigitsCNN(), datamodule=DigitsDataModule())
    return time.perf_counter() - started


def run_fast_dev_run() -> float:
    started = time.perf_counter()
    _trainer(fast_dev_run=True).fit(DigitsCNN(), datamodule=DigitsDataModule())
    return time.perf_counter() - started


def run_train_epoch() -> float:
    started = time.perf_counter()
    _trainer(max_epochs=1, limit_val_batches=0).fit(DigitsCNN(), datamodule=DigitsDataModule())
    return time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.preflight_runtime", description=__doc__)
    parser.add_argument("--rounds", type=int, default=3, help="round-robin rounds (default: 3)")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads for every variant (default: torch's)",
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.rounds < 1:
        raise ValueError(f"`--rounds` must be >= 1, got {args.rounds!r}.")
    if args.threads is not None:
        if args.threads < 1:
            raise ValueError(f"`--threads` must be >= 1, got {args.threads!r}.")
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    per_check: dict[str, list[float]] = {}
    variants: dict[str, Callable[[], float]] = {
        "preflight": lambda: run_preflight(per_check),
        "preflight_1_thread": lambda: run_preflight({}, threads=1),
        "preflight_callback": run_preflight_callback,
        "fast_dev_run": run_fast_dev_run,
        "train_epoch": run_train_epoch,
    }
    run_preflight({})  # warm-up: imports, sklearn load, first-call kernels
    times: dict[str, list[float]] = {name: [] for name in variants}
    loads = []
    for _ in range(args.rounds):
        for name, variant in variants.items():
            times[name].append(variant())
        loads.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"))

    median = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"\nmachine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({torch.get_num_threads()} threads), lightning {pl.__version__}, "
        f"Python {platform.python_version()}; "
        f"1-min load average during the rounds: {', '.join(f'{x:.1f}' for x in loads)} (shared machine)"
    )
    print(f"rounds: {args.rounds} (round-robin), medians\n")
    print("| variant | median s | runs s | x fast_dev_run | x one training epoch |")
    print("|---|---:|---|---:|---:|")
    for name, values in times.items():
        print(
            f"| {name} | {median[name]:.2f} | {', '.join(f'{v:.2f}' for v in values)} | "
            f"{median[name] / median['fast_dev_run']:.1f} | {median[name] / median['train_epoch']:.2f} |"
        )
    print("\n| check (inside `preflight`) | median s | share |")
    print("|---|---:|---:|")
    total = sum(statistics.median(v) for v in per_check.values())
    for name, values in per_check.items():
        value = statistics.median(values)
        print(f"| {name} | {value:.2f} | {value / total:.0%} |")
    verdict = "within" if median["preflight"] <= BUDGET_S else "OVER"
    print(f"\nfull preflight median {median['preflight']:.2f} s: {verdict} the {BUDGET_S:.0f} s budget")
    return 0 if median["preflight"] <= BUDGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
