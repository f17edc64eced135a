"""Wall time of the full preflight, per check, on three models, at torch's default threads and at one thread,
next to each model's own training step.

Models (no downloads):

- ``cnn``: the demo's ``DigitsCNN`` on ``DigitsDataModule`` (scikit-learn's 8x8 digits);
- ``char``: ``TinyTransformerLM`` (d_model 64, 2 layers) on ``CharLMDataModule`` (seq_len 64, batch 32);
- ``lm``: Lightning's demo ``LightningTransformer`` (``lightning.pytorch.demos``: an ``nn.Transformer``
  encoder-decoder, 2+2 layers, width 200) with a 2,000-token vocabulary, which makes it the 2.1M parameters of
  issue #14; its data are generated token sequences (``random_token_loader``, 35 tokens, batch 20: the
  word-language-model example's ``bptt`` and batch) instead of WikiText-2.

For each model and thread setting: the preflight's total and per-check seconds (``preflight(...)`` with its
default per-check ``time_budget``, or ``--time_budget``), and the median seconds of one training step of the
model (``training_step`` + ``backward`` + ``optimizer.step`` on a batch of its loader), so the preflight is
also given in training steps. Variants run round-robin, ``--rounds`` times, medians reported, so machine load
hits every variant alike.

Run: ``python -m benchmarks.preflight_runtime [--rounds 2] [--models cnn,char,lm] [--time_budget 8]``
(``--time_budget 0`` = unlimited, the behaviour before budgets). Exit status 1 when a median total is over the
30 s acceptance bar.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import lightning.pytorch as pl
import torch

from lightning_recipes.checks import preflight
from lightning_recipes.checks._budget import DEFAULT_TIME_BUDGET

__all__ = ["MODELS", "main"]

BUDGET_S = 30.0


def _cnn() -> tuple[pl.LightningModule, dict[str, Any]]:
    from lightning_recipes.data import DigitsDataModule
    from lightning_recipes.testing import DigitsCNN

    return DigitsCNN(), {"datamodule": DigitsDataModule()}


def _char() -> tuple[pl.LightningModule, dict[str, Any]]:
    from lightning_recipes.data import CharLMDataModule
    from lightning_recipes.testing import TinyTransformerLM

    datamodule = CharLMDataModule(seq_len=64, batch_size=32)
    datamodule.setup("fit")
    model = TinyTransformerLM(vocab_size=datamodule.vocab_size, d_model=64, n_layers=2, max_seq_len=64)
    return model, {"datamodule": datamodule}


def _lm() -> tuple[pl.LightningModule, dict[str, Any]]:
    from lightning.pytorch.demos import LightningTransformer

    from lightning_recipes.testing import random_token_loader

    vocab = 2000
    train = random_token_loader(num_samples=640, seq_len=35, vocab_size=vocab, batch_size=20, shuffle=True)
    val = random_token_loader(num_samples=160, seq_len=35, vocab_size=vocab, batch_size=20, seed=1)
    return LightningTransformer(vocab_size=vocab), {"train_dataloaders": train, "val_dataloaders": val}


MODELS: dict[str, Callable[[], tuple[pl.LightningModule, dict[str, Any]]]] = {
    "cnn": _cnn,
    "char": _char,
    "lm": _lm,
}


def _first_batch(model: pl.LightningModule, data: dict[str, Any]) -> Any:
    loader = data.get("train_dataloaders")
    if loader is None:
        datamodule = data["datamodule"]
        datamodule.setup("fit")
        loader = datamodule.train_dataloader()
    return next(iter(loader))


def step_seconds(name: str, steps: int = 5) -> float:
    """Median wall time of one training step of model ``name`` (after one warm-up step)."""
    torch.manual_seed(0)
    model, data = MODELS[name]()
    batch = _first_batch(model, data)
    optimizer = model.configure_optimizers()
    optimizer = optimizer[0] if isinstance(optimizer, (list, tuple)) else optimizer
    optimizer = optimizer["optimizer"] if isinstance(optimizer, dict) else optimizer
    times = []
    for index in range(steps + 1):
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        output = model.training_step(batch, index)
        loss = output["loss"] if isinstance(output, dict) else output
        loss.backward()
        optimizer.step()
        if index:
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def run_preflight(name: str, budget: float | None) -> tuple[float, dict[str, tuple[float, str]]]:
    """Total seconds and ``{check: (seconds, status)}`` of one full preflight of model ``name``."""
    torch.manual_seed(0)
    model, data = MODELS[name]()
    started = time.perf_counter()
    report = preflight(model, **data, time_budget=budget, progress=False)
    total = time.perf_counter() - started
    return total, {r.name: (r.seconds, r.status) for r in report}


def _with_threads(threads: int | None, function: Callable[[], Any]) -> Any:
    saved = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        return function()
    finally:
        torch.set_num_threads(saved)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.preflight_runtime", description=__doc__)
    parser.add_argument("--rounds", type=int, default=2, help="round-robin rounds (default: 2)")
    parser.add_argument("--models", default="cnn,char,lm", help=f"comma-separated, of {sorted(MODELS)}")
    parser.add_argument(
        "--time_budget",
        type=float,
        default=DEFAULT_TIME_BUDGET,
        help=f"per-check budget in seconds; 0 = unlimited (default: {DEFAULT_TIME_BUDGET:g})",
    )
    parser.add_argument(
        "--threads", default="default,1", help="thread settings to compare: 'default' and/or integers"
    )
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.rounds < 1:
        raise ValueError(f"`--rounds` must be >= 1, got {args.rounds!r}.")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise ValueError(f"`--models` must name models of {sorted(MODELS)}, got {unknown}.")
    settings: list[int | None] = [None if t == "default" else int(t) for t in args.threads.split(",")]
    budget = None if args.time_budget <= 0 else args.time_budget
    default_threads = torch.get_num_threads()

    totals: dict[tuple[str, int | None], list[float]] = {}
    checks: dict[tuple[str, int | None], dict[str, list[tuple[float, str]]]] = {}
    steps: dict[tuple[str, int | None], list[float]] = {}
    for name in models:  # warm-up: imports, dataset loads, first-call kernels
        _with_threads(1, lambda name=name: step_seconds(name, steps=1))
    loads = []
    for _ in range(args.rounds):
        for name in models:
            for threads in settings:
                key = (name, threads)
                total, per_check = _with_threads(threads, lambda name=name: run_preflight(name, budget))
                totals.setdefault(key, []).append(total)
                for check, value in per_check.items():
                    checks.setdefault(key, {}).setdefault(check, []).append(value)
                steps.setdefault(key, []).append(_with_threads(threads, lambda name=name: step_seconds(name)))
                loads.append(os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan"))

    print(
        f"\nmachine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} (default "
        f"{default_threads} threads), lightning {pl.__version__}, Python {platform.python_version()}; "
        f"1-min load average during the runs: {min(loads):.1f} to {max(loads):.1f} (shared machine)"
    )
    label = "unlimited" if budget is None else f"{budget:g} s"
    print(f"rounds: {args.rounds} (round-robin), medians; per-check time budget: {label}\n")
    names = sorted({c for per in checks.values() for c in per}, key=_order(checks))
    header = "| model | threads | preflight s | train step s | = steps | " + " | ".join(names) + " |"
    print(header)
    print("|---|---|---:|---:|---:|" + "---|" * len(names))
    over = False
    for (name, threads), values in totals.items():
        total = statistics.median(values)
        step = statistics.median(steps[(name, threads)])
        over |= total > BUDGET_S
        cells = []
        for check in names:
            runs = checks[(name, threads)].get(check, [])
            if not runs:
                cells.append("-")
                continue
            seconds = statistics.median(s for s, _ in runs)
            statuses = "/".join(sorted({status for _, status in runs}))
            cells.append(f"{seconds:.2f} {statuses}")
        shown = "default" if threads is None else str(threads)
        row = f"| {name} | {shown} | {total:.1f} | {step:.3f} | {total / step:.0f} | "
        print(row + " | ".join(cells) + " |")
    verdict = "OVER" if over else "within"
    print(f"\nevery median total {verdict} the {BUDGET_S:.0f} s bar")
    return 1 if over else 0


def _order(checks: dict[Any, dict[str, list[Any]]]) -> Callable[[str], int]:
    """Checks in the order they ran (the first model's report order)."""
    first: list[str] = []
    for per in checks.values():
        first += [c for c in per if c not in first]
    return first.index


if __name__ == "__main__":
    sys.exit(main())
