"""What activation checkpointing of the repeated blocks saves and costs, as ``speed_tune`` measures it.

For transformers of growing depth and sequence length (``TinyTransformerLM`` and ``callback_overhead``'s
``BenchLM``), ``speed_tune(..., options=["activation_checkpointing"])`` trains the plain copy and the
checkpointed copy in interleaved repeats and counts, on one step of each, the activation bytes the forward
pass keeps for backward and the step's peak (``MemTracker``, tensor by tensor: any device, no allocator
statistics needed). Printed: activations and peak with and without, the saving, the time ratio
(default / checkpointed, so below 1 is slower) and the loss deviation (0: the recomputation replays the
same dropout masks).

Run: ``python -m benchmarks.activation_checkpointing [--repeats 3] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import sys
from collections.abc import Callable, Sequence
from typing import Any

import lightning.pytorch as pl
import torch

from lightning_recipes.testing import TinyTransformerLM, random_token_loader
from lightning_recipes.tune import speed_tune

__all__ = ["WORKLOADS", "main"]


def _lm(d_model: int, n_layers: int, seq_len: int) -> Callable[[], TinyTransformerLM]:
    def build() -> TinyTransformerLM:
        return TinyTransformerLM(vocab_size=256, d_model=d_model, n_layers=n_layers, max_seq_len=seq_len)

    return build


def _bench_lm() -> pl.LightningModule:
    from benchmarks.callback_overhead import BenchLM

    return BenchLM()


# name -> (model factory, sequence length, batch size)
WORKLOADS: dict[str, tuple[Callable[[], pl.LightningModule], int, int]] = {
    "TinyTransformerLM d64 x2, seq 64": (_lm(64, 2, 64), 64, 32),
    "TinyTransformerLM d64 x8, seq 64": (_lm(64, 8, 64), 64, 32),
    "TinyTransformerLM d128 x4, seq 256": (_lm(128, 4, 256), 256, 16),
    "BenchLM d192 x4, seq 128": (_bench_lm, 128, 16),
}


def run(repeats: int) -> list[dict[str, Any]]:
    rows = []
    for name, (build, seq_len, batch_size) in WORKLOADS.items():
        torch.manual_seed(0)
        vocab = 512 if name.startswith("BenchLM") else 256
        loader = random_token_loader(
            num_samples=batch_size * 8, seq_len=seq_len, vocab_size=vocab, batch_size=batch_size
        )
        result = speed_tune(
            build(), train_dataloaders=loader, options=["activation_checkpointing"], repeats=repeats
        )
        base, ckpt = result.rows
        rows.append({"workload": name, "base": base, "ckpt": ckpt})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.activation_checkpointing")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved repeats (default: 3)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1: shared machine)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({args.threads} threads), Python {platform.python_version()}, 1-min load {os.getloadavg()[0]:.1f}"
    )
    print(
        "| workload | activations MiB (plain -> ckpt) | saved | step peak MiB (plain -> ckpt) "
        "| time ratio | loss dev. |"
    )
    print("|---|---|---|---|---|---|")
    status = 0
    for row in run(args.repeats):
        base, ckpt = row["base"], row["ckpt"]
        if base.activation_mb is None or ckpt.activation_mb is None:
            print(f"| {row['workload']} | not counted: {ckpt.status} | | | | |")
            status = 1
            continue
        saved = 1 - ckpt.activation_mb / base.activation_mb
        print(
            f"| {row['workload']} | {base.activation_mb:.1f} -> {ckpt.activation_mb:.1f} | {saved:.0%} "
            f"| {base.step_peak_mb:.1f} -> {ckpt.step_peak_mb:.1f} | x{ckpt.speedup:.2f} "
            f"| {ckpt.loss_deviation:.1e} |",
            flush=True,
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
