"""Where StabilityGuard's time goes: median cost per hook call, per check and per snapshot, vs the bare step.

``callback_overhead.py`` gives the end-to-end ratio and the *mean* hook time per step (sensitive to the
process being descheduled on a shared machine). This module times every guard hook call separately and
reports medians, split into plain steps, check steps and snapshot steps, next to the median step time of
a bare Trainer measured in the same process (interleaved rounds). Same model as ``callback_overhead``
(``BenchLM``, fused AdamW). Run: ``python -m benchmarks.stability_overhead [--rounds N] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback

from benchmarks.callback_overhead import BenchLM, machine
from lightning_recipes.callbacks import StabilityGuard
from lightning_recipes.testing import InMemoryLogger, random_token_loader

SEQ_LEN, BATCH = 64, 8  # as in callback_overhead

__all__ = ["main"]


class TimedGuard(StabilityGuard):
    """Records the wall time of every per-step hook call, labelled plain / check / snapshot."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: dict[str, list[float]] = {
            "before_optimizer_step": [],
            "plain": [],
            "check": [],
            "snapshot": [],
        }

    def on_before_optimizer_step(self, *args: Any) -> None:
        start = time.perf_counter()
        super().on_before_optimizer_step(*args)
        self.calls["before_optimizer_step"].append(time.perf_counter() - start)

    def on_train_batch_end(self, *args: Any) -> None:
        checks = len(self._pending) + 1 >= self.check_every_n_steps
        snapshot_before = self._snapshot_step
        start = time.perf_counter()
        super().on_train_batch_end(*args)
        elapsed = time.perf_counter() - start
        label = "snapshot" if self._snapshot_step != snapshot_before else "check" if checks else "plain"
        self.calls[label].append(elapsed)


class _StepTimer(Callback):
    def __init__(self) -> None:
        self.steps: list[float] = []
        self._last: float | None = None

    def on_train_batch_start(self, *args: Any) -> None:
        now = time.perf_counter()
        if self._last is not None:
            self.steps.append(now - self._last)
        self._last = now


def _fit(callbacks: list[Any], steps: int) -> list[float]:
    torch.manual_seed(0)
    timer = _StepTimer()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_steps=steps,
        logger=InMemoryLogger(),
        callbacks=[timer, *callbacks],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )
    loader = random_token_loader(
        num_samples=BATCH * (steps + 1), seq_len=SEQ_LEN, vocab_size=512, batch_size=BATCH
    )
    trainer.fit(BenchLM(), loader)
    return timer.steps[2:]  # the first steps allocate optimizer state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--threads", type=int, default=0, help="intra-op threads (1 on a shared machine)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    # snapshots every 20 steps so that a 40-step run measures some; the table also amortises them over 100
    variants: dict[str, dict[str, Any]] = {
        "check_every_n_steps=10": {"check_every_n_steps": 10, "snapshot_every_n_steps": 20},
        "check_every_n_steps=1": {"check_every_n_steps": 1, "snapshot_every_n_steps": 20},
        "check_every_n_steps=10, check_grad_norm=False": {
            "check_every_n_steps": 10,
            "snapshot_every_n_steps": 20,
            "check_grad_norm": False,
        },
    }
    bare: list[float] = []
    calls: dict[str, dict[str, list[float]]] = {name: {} for name in variants}
    for r in range(args.rounds):
        order = list(variants.items())
        if r % 2:
            order.reverse()
        bare += _fit([], args.steps)
        for name, kwargs in order:
            guard = TimedGuard(verbose=False, **kwargs)
            _fit([guard], args.steps)
            for label, times in guard.calls.items():
                calls[name].setdefault(label, []).extend(times)
    bare_ms = 1e3 * statistics.median(bare)
    print(f"machine: {machine()}\n")
    print(
        f"## StabilityGuard cost per hook call, BenchLM, {args.rounds} rounds x {args.steps} steps "
        f"(bare Trainer median step {bare_ms:.1f} ms)\n"
    )
    print("| variant | hook call | calls | median ms | share of bare step |")
    print("|---|---|---|---|---|")
    for name, by_label in calls.items():
        for label, times in by_label.items():
            if not times:
                continue
            ms = 1e3 * statistics.median(times)
            print(f"| {name} | {label} | {len(times)} | {ms:.3f} | {100 * ms / bare_ms:.2f}% |")
        n = variants[name]["check_every_n_steps"]
        norm_ms, plain_ms, check_ms, snap_ms = (
            _median_ms(by_label.get(k)) for k in ("before_optimizer_step", "plain", "check", "snapshot")
        )
        # a snapshot step is a check step that also copies the state: count its extra once per `every` steps
        for every in (20, 100):
            amortised = norm_ms + ((n - 1) * plain_ms + check_ms) / n + max(snap_ms - check_ms, 0.0) / every
            print(
                f"| {name} | **amortised per step, snapshot every {every}** | | **{amortised:.3f}** | "
                f"**{100 * amortised / bare_ms:.2f}%** |"
            )
    print()
    return 0


def _median_ms(times: list[float] | None) -> float:
    return 1e3 * statistics.median(times) if times else 0.0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
