"""Cost and accuracy of ``HealthMonitor``: step overhead vs a bare Trainer, and the gallery's detection table.

1. ``steps``: the cost per training step of ``HealthMonitor(check_every_n_steps=50)`` on the models of
   :data:`MODELS` (a digits MLP, the digits CNN, a small transformer LM), against a bare Trainer. Each round
   fits a bare and a monitored Trainer for ``--steps`` steps in one process, alternating which goes first,
   and times both with the process's CPU time (``time.process_time``: time other processes take on a shared
   machine is not counted, as wall time would). The overhead of a round is the ratio of its two per-step
   times minus one; reported as the median over rounds and their spread (the lowest and highest round). The
   time inside the monitor's own hooks (also CPU time) is reported apart: per step between checks (the
   per-step path: the gradient norm and the largest input of every step, the loss, the data-wait clock)
   and per step with the checks spread over their interval; it is a work count that machine load moves far
   less than the ratio of two whole runs.
2. ``gallery``: every run of ``tests.helpers.health_gallery``'s ``CASES``: what it should
   be diagnosed with, where the problem starts, the step of the first correct finding, and the false alarms
   (findings outside the case's expected and allowed problems; any finding on a healthy run). Printed as a
   Markdown table for ``benchmarks/RESULTS.md``.

Run: ``python -m benchmarks.health_overhead [--only steps|gallery] [--models mlp,cnn,transformer] [--rounds 7]
[--steps 200] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader

from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.data.digits import DigitsDataModule
from lightning_recipes.testing import DigitsCNN, TinyTransformerLM, fast_trainer, random_token_loader

__all__ = ["MODELS", "bench_gallery", "bench_steps", "main"]

CHECK_EVERY = 50  # the monitor's default
SKIP = 50  # steps left out at the start of each fit: set-up and the first interval (the step-0 measurements)


class DigitsMLP(pl.LightningModule):
    """64 -> 128 -> 128 -> 10 with ReLU on the flattened 8x8 digits, AdamW (~26k parameters in 6 tensors)."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10)
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def _digits(flatten: bool) -> DataLoader:
    data = DigitsDataModule(batch_size=64, flatten=flatten)
    data.setup("fit")
    return data.train_dataloader()


MODELS: dict[str, tuple[str, Callable[[], pl.LightningModule], Callable[[], DataLoader]]] = {
    "mlp": ("digits MLP 64-128-128-10, AdamW, batch 64", DigitsMLP, lambda: _digits(True)),
    "cnn": ("DigitsCNN (width 32, BatchNorm), AdamW, batch 64", DigitsCNN, lambda: _digits(False)),
    "transformer": (
        "TinyTransformerLM d=128, 2 blocks, 4 heads, vocab 256, AdamW, 16 x 64 tokens",
        lambda: TinyTransformerLM(vocab_size=256, d_model=128, n_heads=4, n_layers=2, max_seq_len=64),
        lambda: random_token_loader(num_samples=16 * 8, seq_len=64, vocab_size=256, batch_size=16),
    ),
}


class StepClock(Callback):
    """The process's CPU time from the start of step ``SKIP`` to the end of training."""

    def __init__(self) -> None:
        self.start: float | None = None
        self.end = 0.0

    def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
        if trainer.global_step == SKIP and self.start is None:
            self.start = time.process_time()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.end = time.process_time()


def timed_hooks(monitor: Callback) -> dict[int, float]:
    """Wrap ``monitor``'s three training-step hooks with a CPU-time timer; returns the seconds spent in them
    per step (keyed by the global step at the batch's start). The forward hooks of the sampled batches are
    not in it: they run inside the model's forward."""
    seconds: dict[int, float] = {}
    step = [0]

    def wrap(name: str) -> None:
        hook = getattr(monitor, name)

        def timed(trainer: pl.Trainer, *args: object) -> None:
            if name == "on_train_batch_start":
                step[0] = trainer.global_step
            start = time.process_time()
            hook(trainer, *args)
            seconds[step[0]] = seconds.get(step[0], 0.0) + time.process_time() - start

        setattr(monitor, name, timed)

    for name in ("on_train_batch_start", "on_before_optimizer_step", "on_train_batch_end"):
        wrap(name)
    return seconds


Monitor = Callable[[], Callback]


def _fit(model: str, monitor: Monitor | None, steps: int) -> tuple[float, dict[int, float]]:
    """CPU seconds per step from step ``SKIP`` on, and the monitor's hook seconds per step."""
    _, module, loader = MODELS[model]
    torch.manual_seed(0)
    clock = StepClock()
    callbacks: list[Callback] = [clock]
    hooks: dict[int, float] = {}
    if monitor is not None:
        callbacks.append(monitor())
        hooks = timed_hooks(callbacks[-1])
    trainer = fast_trainer(max_steps=SKIP + steps, max_epochs=-1, callbacks=callbacks, limit_val_batches=0)
    trainer.fit(module(), loader())
    assert clock.start is not None
    return (clock.end - clock.start) / steps, hooks


def bench_steps(
    model: str, rounds: int, steps: int, monitors: dict[str, Monitor] | None = None
) -> dict[str, dict[str, float]]:
    """Per monitor (default: ``HealthMonitor(check_every_n_steps=50)``): the bare and monitored CPU time per
    step (medians over rounds), the overhead per round (median, lowest, highest) and the monitor's own hook
    time per step (between checks; with the checks spread). Rounds interleave the bare and monitored fits,
    their order turned around every round."""
    monitors = monitors or {"HealthMonitor": lambda: HealthMonitor(check_every_n_steps=CHECK_EVERY)}
    variants: list[tuple[str, Monitor | None]] = [("bare", None), *monitors.items()]
    for _, monitor in variants:  # warm-up
        _fit(model, monitor, 5)
    seconds: dict[str, list[float]] = {name: [] for name, _ in variants}
    between: dict[str, list[float]] = {name: [] for name in monitors}
    amortized: dict[str, list[float]] = {name: [] for name in monitors}
    for r in range(rounds):
        for name, monitor in variants if r % 2 == 0 else variants[::-1]:
            per_step, hooks = _fit(model, monitor, steps)
            seconds[name].append(per_step)
            if monitor is not None:
                timed = {k: v for k, v in hooks.items() if k >= SKIP}
                # between checks: not the check's step, nor the activation-sampled steps before it
                off = [v for k, v in timed.items() if k % CHECK_EVERY < CHECK_EVERY - 2]
                between[name].append(statistics.median(off))
                amortized[name].append(sum(timed.values()) / len(timed))
    base = statistics.median(seconds["bare"])
    results = {}
    for name in monitors:
        overheads = sorted(m / b - 1.0 for m, b in zip(seconds[name], seconds["bare"]))
        results[name] = {
            "bare_ms": 1e3 * base,
            "health_ms": 1e3 * statistics.median(seconds[name]),
            "overhead": statistics.median(overheads),
            "overhead_low": overheads[0],
            "overhead_high": overheads[-1],
            "between_us": 1e6 * statistics.median(between[name]),
            "between_fraction": statistics.median(between[name]) / base,
            "amortized_us": 1e6 * statistics.median(amortized[name]),
            "amortized_fraction": statistics.median(amortized[name]) / base,
        }
    return results


def bench_gallery() -> list[dict[str, object]]:
    from tests.helpers.health_gallery import CASES, run_case

    rows = []
    for case in CASES:
        start = time.perf_counter()
        monitor = run_case(case)
        seconds = time.perf_counter() - start
        allowed = set(case.expected) | set(case.allowed)
        detected = {f.problem: f.step for f in reversed(monitor.findings)}
        rows.append(
            {
                "case": case.name,
                "expected": ", ".join(case.expected) or "(healthy)",
                "onset": case.onset_step,
                "detected": ", ".join(str(detected.get(p, "missed")) for p in case.expected) or "-",
                "false_alarms": sum(f.problem not in allowed for f in monitor.findings),
                "seconds": seconds,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("steps", "gallery"))
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of {tuple(MODELS)}")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=200, help="timed steps per fit (after SKIP)")
    parser.add_argument("--threads", type=int)
    args = parser.parse_args(argv)
    models = args.models.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.error(f"--models: unknown {unknown}; allowed: {tuple(MODELS)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__}, "
        f"lightning {pl.__version__}, {torch.get_num_threads()} thread(s), load {load:.1f}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}"
    )
    if args.only in (None, "steps"):
        print(
            f"\nHealthMonitor(check_every_n_steps={CHECK_EVERY}), {args.steps} steps x {args.rounds} "
            "interleaved rounds, CPU time per step"
        )
        print(
            "\n| model | bare ms/step | monitored ms/step | overhead: median (lowest, highest round) | "
            "hooks between checks | hooks with the checks spread |"
        )
        print("|---|---:|---:|---|---:|---:|")
        for model in models:
            r = bench_steps(model, args.rounds, args.steps)["HealthMonitor"]
            print(
                f"| {MODELS[model][0]} | {r['bare_ms']:.2f} | {r['health_ms']:.2f} | "
                f"{100 * r['overhead']:+.1f}% ({100 * r['overhead_low']:+.1f}%, "
                f"{100 * r['overhead_high']:+.1f}%) | {r['between_us']:.0f} us = "
                f"{100 * r['between_fraction']:.2f}% | {r['amortized_us']:.0f} us = "
                f"{100 * r['amortized_fraction']:.2f}% |",
                flush=True,
            )
    if args.only in (None, "gallery"):
        print("\n| run | should find | problem starts at step | found at step | false alarms |")
        print("|---|---|---|---|---|")
        for row in bench_gallery():
            print(
                f"| {row['case']} | {row['expected']} | {row['onset']} | {row['detected']} | "
                f"{row['false_alarms']} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
