"""Cost and accuracy of ``HealthMonitor``: step overhead vs a bare Trainer, and the gallery's detection table.

1. ``steps``: wall time of ``--steps`` training steps of the benchmark transformer (``callback_overhead``'s
   ``BenchLM``: 4 blocks, d=192, fused AdamW, 2,048 tokens per step), bare Trainer vs the same Trainer with
   ``HealthMonitor(check_every_n_steps=50)``, interleaved round-robin in one process so machine load hits
   both alike; the median per-step time of each and their ratio.
2. ``gallery``: every run of ``tests.helpers.health_gallery``'s ``CASES``: what it should
   be diagnosed with, where the problem starts, the step of the first correct finding, and the false alarms
   (findings outside the case's expected and allowed problems; any finding on a healthy run). Printed as a
   Markdown table for ``benchmarks/RESULTS.md``.

Run: ``python -m benchmarks.health_overhead [--only steps|gallery] [--rounds 5] [--steps 100] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import logging
import platform
import statistics
import sys
import time
import warnings

import lightning.pytorch as pl
import torch

from benchmarks.callback_overhead import BATCH, SEQ_LEN, BenchLM
from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.testing import fast_trainer, random_token_loader

__all__ = ["bench_gallery", "bench_steps", "main"]


class TimedHealthMonitor(HealthMonitor):
    """Adds up the host time spent in the monitor's own training hooks (a less noisy overhead than the ratio
    of two whole runs on a busy machine; the forward hooks of the sampled batches are not in it)."""

    seconds = 0.0

    def _timed(self, name: str, *args: object) -> None:
        start = time.perf_counter()
        getattr(super(), name)(*args)
        TimedHealthMonitor.seconds += time.perf_counter() - start

    def on_train_batch_start(self, *args: object) -> None:  # type: ignore[override]
        self._timed("on_train_batch_start", *args)

    def on_before_optimizer_step(self, *args: object) -> None:  # type: ignore[override]
        self._timed("on_before_optimizer_step", *args)

    def on_train_batch_end(self, *args: object) -> None:  # type: ignore[override]
        self._timed("on_train_batch_end", *args)


def _fit_seconds(with_monitor: bool, steps: int) -> float:
    torch.manual_seed(0)
    model = BenchLM()
    loader = random_token_loader(num_samples=BATCH * 8, seq_len=SEQ_LEN, vocab_size=512, batch_size=BATCH)
    callbacks: list[pl.Callback] = [TimedHealthMonitor(check_every_n_steps=50)] if with_monitor else []
    trainer = fast_trainer(max_steps=steps, max_epochs=-1, callbacks=callbacks, limit_val_batches=0)
    start = time.perf_counter()
    trainer.fit(model, loader)
    return (time.perf_counter() - start) / steps


def bench_steps(rounds: int, steps: int) -> dict[str, float]:
    """Median seconds per step, bare and monitored, interleaved; one warm-up fit of each first."""
    _fit_seconds(False, 5), _fit_seconds(True, 5)
    times: dict[str, list[float]] = {"bare": [], "health": [], "hooks": []}
    for _ in range(rounds):
        times["bare"].append(_fit_seconds(False, steps))
        TimedHealthMonitor.seconds = 0.0
        times["health"].append(_fit_seconds(True, steps))
        times["hooks"].append(TimedHealthMonitor.seconds / steps)
    bare, health = statistics.median(times["bare"]), statistics.median(times["health"])
    hooks = statistics.median(times["hooks"])
    return {
        "bare_ms": 1e3 * bare,
        "health_ms": 1e3 * health,
        "ratio": health / bare,
        "hooks_ms": 1e3 * hooks,
        "hooks_fraction": hooks / bare,
    }


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
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--threads", type=int)
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    print(
        f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, lightning "
        f"{pl.__version__}, {torch.get_num_threads()} thread(s), {time.strftime('%Y-%m-%d')}"
    )
    if args.only in (None, "steps"):
        result = bench_steps(args.rounds, args.steps)
        print(
            f"\nsteps (BenchLM, {args.steps} steps x {args.rounds} interleaved rounds, medians): bare "
            f"{result['bare_ms']:.1f} ms/step, HealthMonitor(check_every_n_steps=50) "
            f"{result['health_ms']:.1f} ms/step, ratio {result['ratio']:.3f}; time in the monitor's hooks "
            f"{result['hooks_ms']:.2f} ms/step = {100 * result['hooks_fraction']:.2f}% of the bare step"
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
