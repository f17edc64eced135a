"""Cost of the training-health callbacks: step time vs a bare Trainer, host syncs per step, norm kernels.

Three measurements, each interleaved (round-robin) in one process so machine load hits every variant alike:

1. ``norm``: the total gradient norm alone on a 25.2M-parameter, 147-tensor layout (a 12-layer d=384 GPT's
   gradients as views of one flat buffer) - ``torch.nn.utils.get_total_norm`` vs ours vs references.
2. ``steps``: median training-step time of a small transformer LM under a real Trainer, for every entry of
   :data:`CONFIGS` (bare Trainer, each callback alone, our full stack, Lightning's documented ``grad_norm()``
   recipe), as a ratio to the bare Trainer, plus the time spent inside the callbacks' own hooks (a less noisy
   overhead).
3. ``syncs``: host-device syncs per non-logging and per logging step for every entry, counted with
   :class:`lightning_recipes.testing.HostSyncCounter` (a separate pass: counting slows training).

Other benchmarks can add entries to :data:`CONFIGS`. Run: ``python -m benchmarks.callback_overhead
[--quick]``.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import grad_norm

from benchmarks._layouts import transformer25m_shapes
from lightning_recipes.callbacks import (
    AdaptiveGradClip,
    GradNormMonitor,
    InputPipelineMonitor,
    StabilityGuard,
)
from lightning_recipes.norms import total_norm
from lightning_recipes.testing import HostSyncCounter, InMemoryLogger, TinyTransformerLM, random_token_loader

__all__ = ["CONFIGS", "Config", "main"]

LOG_EVERY = (
    25  # each timed fit includes one logging step (amortized over 25 steps; Lightning's default is 50)
)
SYNC_LOG_EVERY = 10  # the (slow, dispatch-mode) sync count needs only a few logging steps
SEQ_LEN = 128
BATCH = (
    16  # 2,048 tokens per step; the callbacks' cost is per step, so its share falls as tokens per step grow
)


class BenchLM(TinyTransformerLM):
    """A small GPT-style LM (4 blocks, d=192, ~1.9M parameters in 52 tensors) with fused AdamW.

    Fused AdamW keeps its step counters off the host path, so the bare Trainer does zero host syncs per step
    and every counted sync belongs to a callback.
    """

    def __init__(self) -> None:
        super().__init__(vocab_size=512, d_model=192, n_heads=6, n_layers=4, max_seq_len=SEQ_LEN)

    def training_step(self, batch, batch_idx):
        tokens, target = batch
        return self.loss(self(tokens), target)  # no self.log: the bare run syncs nothing

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=3e-4, fused=True)


class LightningRecipeLM(BenchLM):
    """Lightning's documented replacement for ``track_grad_norm`` (debugging_intermediate.rst)."""

    def on_before_optimizer_step(self, optimizer):
        self.log_dict(grad_norm(self, norm_type=2))


@dataclass
class Config:
    """One benchmarked Trainer set-up: a name, a factory for its callbacks and one for the module."""

    name: str
    callbacks: Callable[[], list[Callback]]
    module: Callable[[], pl.LightningModule] = BenchLM
    timed_types: tuple[type, ...] = field(default=())  # callbacks whose hook time is reported


OURS = (GradNormMonitor, AdaptiveGradClip, InputPipelineMonitor)

CONFIGS: list[Config] = [
    Config("bare Trainer", lambda: []),
    Config("GradNormMonitor()", lambda: [GradNormMonitor()], timed_types=OURS),
    Config("GradNormMonitor(group_by=2)", lambda: [GradNormMonitor(group_by=2)], timed_types=OURS),
    Config("AdaptiveGradClip()", lambda: [AdaptiveGradClip()], timed_types=OURS),
    Config("InputPipelineMonitor()", lambda: [InputPipelineMonitor()], timed_types=OURS),
    Config(
        "our full stack (all three)",
        lambda: [GradNormMonitor(group_by=2), AdaptiveGradClip(), InputPipelineMonitor()],
        timed_types=OURS,
    ),
    Config("Lightning grad_norm() recipe", lambda: [], module=LightningRecipeLM),
    # StabilityGuard (issue 5): defaults (snapshot every 100 steps, so only the start-of-training snapshot
    # here)
    Config(
        "StabilityGuard(check_every_n_steps=10)",
        lambda: [StabilityGuard(check_every_n_steps=10)],
        timed_types=(StabilityGuard,),
    ),
    Config(
        "StabilityGuard(check_every_n_steps=1)",
        lambda: [StabilityGuard(check_every_n_steps=1)],
        timed_types=(StabilityGuard,),
    ),
]


# ------------------------------------------------------------------------------------------------------------
# 1. the norm kernel alone
# ------------------------------------------------------------------------------------------------------------


def transformer25m_grads() -> tuple[torch.Tensor, list[torch.Tensor]]:
    """147 gradient tensors, 25.23M floats, views of one flat buffer (as DDP/FSDP buckets lay them out)."""
    shapes = transformer25m_shapes()
    total = sum(math.prod(s) for s in shapes)
    flat = torch.randn(total, generator=torch.Generator().manual_seed(0))
    grads, offset = [], 0
    for shape in shapes:
        n = math.prod(shape)
        grads.append(flat[offset : offset + n].view(shape))
        offset += n
    return flat, grads


def bench_norm(rounds: int) -> list[dict]:
    flat, grads = transformer25m_grads()
    module = torch.nn.Module()
    module.params = torch.nn.ParameterList(
        [torch.nn.Parameter(torch.zeros(()).expand(g.shape)) for g in grads]
    )
    for p, g in zip(module.params, grads):
        p.grad = g  # grad_norm() reads p.grad of named_parameters()
    truth = float(torch.linalg.vector_norm(flat.double()))

    def dot_per_tensor() -> torch.Tensor:
        return torch.stack([torch.dot(g.view(-1), g.view(-1)) for g in grads]).sum().sqrt()

    def lightning_grad_norm() -> torch.Tensor:
        return grad_norm(module, 2)["grad_2.0_norm_total"]

    methods: dict[str, Callable[[], torch.Tensor]] = {
        "torch.nn.utils.get_total_norm (baseline)": lambda: torch.nn.utils.get_total_norm(grads),
        "ours: lightning_recipes total_norm (BLAS dot on CPU)": lambda: total_norm(grads),
        "torch._foreach_norm + stack + vector_norm": lambda: torch.linalg.vector_norm(
            torch.stack(torch._foreach_norm(grads))
        ),
        "reference: per-tensor dot, no wrapper": dot_per_tensor,
        "lightning grad_norm() (per-param dict)": lightning_grad_norm,
        "floor: torch.dot(flat buffer) (1 op)": lambda: torch.dot(flat, flat).sqrt(),
    }
    for fn in methods.values():  # warm-up
        fn()
    times: dict[str, list[float]] = {name: [] for name in methods}
    for r in range(rounds):
        order = list(methods.items())
        if r % 2:
            order.reverse()
        for name, fn in order:
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    base = times["torch.nn.utils.get_total_norm (baseline)"]
    rows = []
    for name, fn in methods.items():
        with HostSyncCounter() as counter:
            value = float(fn())
        ratios = [t / b for t, b in zip(times[name], base)]
        rows.append(
            {
                "method": name,
                "median_ms": 1e3 * statistics.median(times[name]),
                "p25_ms": 1e3 * _quantile(times[name], 0.25),
                "p75_ms": 1e3 * _quantile(times[name], 0.75),
                "ratio": statistics.median(ratios),
                "syncs": counter.count - 1,  # minus the float() of the result
                "rel_err": abs(value - truth) / truth,
            }
        )
    return rows


# ------------------------------------------------------------------------------------------------------------
# 2. step time and 3. syncs
# ------------------------------------------------------------------------------------------------------------


class StepTimer(Callback):
    """Wall time from one ``on_train_batch_start`` to the next (a whole step, logging and data included), and
    the time spent in the instrumented hooks from the first timed step on (one-time set-up excluded)."""

    def __init__(self, spent: list[float], skip: int = 2) -> None:
        self.steps: list[float] = []
        self.spent, self.skip = spent, skip
        self._last: float | None = None
        self._spent_at_skip = 0.0

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        now = time.perf_counter()
        if batch_idx == self.skip:
            self._spent_at_skip = self.spent[0]
        if self._last is not None and batch_idx > self.skip:
            self.steps.append(now - self._last)
        self._last = now

    def on_train_end(self, trainer, pl_module):
        if self._last is not None:
            self.steps.append(time.perf_counter() - self._last)

    def hook_seconds_per_step(self) -> float:
        return (self.spent[0] - self._spent_at_skip) / max(len(self.steps), 1)


def _instrument(callbacks: list[Callback], timed_types: tuple[type, ...]) -> list[float]:
    """Wrap every hook of the timed callbacks with a timer; returns the list the time accumulates into."""
    spent = [0.0]
    hooks = [n for n in dir(Callback) if n.startswith("on_") or n in ("setup", "teardown")]
    for cb in callbacks:
        if not isinstance(cb, timed_types):
            continue
        for name in hooks:
            method = getattr(cb, name)

            def timed(*args, _method=method, **kwargs):
                start = time.perf_counter()
                try:
                    return _method(*args, **kwargs)
                finally:
                    spent[0] += time.perf_counter() - start

            setattr(cb, name, timed)
    return spent


ACCELERATOR = ["cpu"]  # --accelerator gpu: the step and sync measurements on a CUDA device


def _trainer(callbacks: list[Callback], steps: int, logger, log_every: int) -> pl.Trainer:
    return pl.Trainer(
        accelerator=ACCELERATOR[0],
        devices=1,
        max_steps=steps,
        logger=logger,
        log_every_n_steps=log_every,
        callbacks=callbacks,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
    )


def _loader(steps: int, batch_size: int = BATCH, seq_len: int = SEQ_LEN):
    return random_token_loader(
        num_samples=batch_size * (steps + 1), seq_len=seq_len, vocab_size=512, batch_size=batch_size
    )


def run_steps(config: Config, steps: int) -> tuple[list[float], float]:
    """Step times after the first two (optimizer state allocation, caches) and hook seconds per timed step."""
    torch.manual_seed(0)
    callbacks = config.callbacks()
    spent = _instrument(callbacks, config.timed_types)
    timer = StepTimer(spent)
    _trainer([timer, *callbacks], steps, InMemoryLogger(), LOG_EVERY).fit(config.module(), _loader(steps))
    return timer.steps, timer.hook_seconds_per_step()


def bench_steps(rounds: int, steps: int) -> list[dict]:
    per_config: dict[str, list[float]] = {c.name: [] for c in CONFIGS}
    hook_share: dict[str, list[float]] = {c.name: [] for c in CONFIGS}
    bare_name = CONFIGS[0].name
    for r in range(rounds):
        order = CONFIGS if r % 2 == 0 else CONFIGS[::-1]
        for config in order:
            step_times, spent = run_steps(config, steps)
            print(
                f"  round {r + 1}/{rounds} {config.name}: {1e3 * statistics.median(step_times):.1f} ms",
                file=sys.stderr,
            )
            per_config[config.name].append(statistics.median(step_times))
            hook_share[config.name].append(spent)
    rows = []
    for config in CONFIGS:
        medians = per_config[config.name]
        ratios = [m / b for m, b in zip(medians, per_config[bare_name])]
        hook_ms = statistics.median(hook_share[config.name]) * 1e3
        rows.append(
            {
                "config": config.name,
                "step_ms": 1e3 * statistics.median(medians),
                "ratio": statistics.median(ratios),
                "ratio_range": (min(ratios), max(ratios)),
                "hook_ms": hook_ms if config.timed_types else float("nan"),
                "hook_share": hook_ms / (1e3 * statistics.median(medians)),
            }
        )
    return rows


class _SyncLedger(Callback):
    def __init__(self, counter: HostSyncCounter) -> None:
        self.counter, self.per_batch, self._mark = counter, [], None

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        if self._mark is not None:
            self.per_batch.append(self.counter.count - self._mark)
        self._mark = self.counter.count

    def on_train_end(self, trainer, pl_module):
        if self._mark is not None:
            self.per_batch.append(self.counter.count - self._mark)


def bench_syncs(steps: int = 2 * SYNC_LOG_EVERY) -> list[dict]:
    rows = []
    for config in CONFIGS:
        torch.manual_seed(0)
        with HostSyncCounter() as counter:
            ledger = _SyncLedger(counter)
            loader = _loader(
                steps, batch_size=2, seq_len=16
            )  # counts do not depend on the batch; dispatch is slow
            trainer = _trainer([ledger, *config.callbacks()], steps, InMemoryLogger(), SYNC_LOG_EVERY)
            trainer.fit(config.module(), loader)
        logging = [n for i, n in enumerate(ledger.per_batch) if (i + 1) % SYNC_LOG_EVERY == 0]
        other = [n for i, n in enumerate(ledger.per_batch) if (i + 1) % SYNC_LOG_EVERY != 0]
        rows.append({"config": config.name, "non_logging": max(other), "logging": max(logging)})
    return rows


# ------------------------------------------------------------------------------------------------------------


def _params() -> int:
    return sum(p.numel() for p in BenchLM().parameters())


def _quantile(values: list[float], q: float) -> float:
    return float(torch.tensor(values).quantile(q))


def machine() -> str:
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (
        f"{platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} ({torch.get_num_threads()} "
        f"threads), lightning {pl.__version__}, Python {platform.python_version()}, load average at start "
        f"{load:.1f} (shared machine: other jobs ran concurrently; rounds interleaved, medians reported)"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds (smoke run)")
    parser.add_argument("--only", choices=["norm", "steps", "syncs"], action="append")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help=(
            "intra-op threads (default: torch's). On an oversubscribed machine use 1: with 2 threads every "
            "parallel op can wait a scheduler quantum for the descheduled thread"
        ),
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the step-time benchmark")
    parser.add_argument(
        "--steps", type=int, default=27, help="training steps per fit (the first 2 are not timed)"
    )
    parser.add_argument("--accelerator", default="cpu", choices=["cpu", "gpu"], help="where the Trainer runs")
    args = parser.parse_args(argv)
    ACCELERATOR[0] = args.accelerator
    if args.threads:
        torch.set_num_threads(args.threads)
    parts = args.only or ["norm", "syncs", "steps"]
    norm_rounds, step_rounds, steps = (10, 1, 8) if args.quick else (60, args.rounds, args.steps)
    print(f"machine: {machine()}\n")
    if "norm" in parts:
        print(f"## Total gradient norm, 25.23M params in 147 tensors ({norm_rounds} interleaved rounds)\n")
        print(
            "| method | median ms | p25-p75 ms | ratio to get_total_norm (median of per-round) | syncs | "
            "rel. err vs fp64 |"
        )
        print("|---|---|---|---|---|---|")
        for row in bench_norm(norm_rounds):
            print(
                f"| {row['method']} | {row['median_ms']:.2f} | {row['p25_ms']:.2f}-{row['p75_ms']:.2f} | "
                f"{row['ratio']:.2f}x | {row['syncs']} | {row['rel_err']:.1e} |"
            )
        print()
    if "syncs" in parts:
        print(f"## Host syncs per training step (log_every_n_steps={SYNC_LOG_EVERY})\n")
        print("| config | syncs per non-logging step | syncs per logging step |")
        print("|---|---|---|")
        for row in bench_syncs():
            print(f"| {row['config']} | {row['non_logging']} | {row['logging']} |")
        print()
    if "steps" in parts:
        print(
            f"## Step time, BenchLM (4 blocks, d=192, {_params() / 1e6:.1f}M params, batch "
            f"{BATCH}x{SEQ_LEN}, fused AdamW), {step_rounds} interleaved rounds x {steps} steps, "
            f"log_every_n_steps={LOG_EVERY}\n"
        )
        print(
            "| config | median step ms | ratio to bare (median, min-max over rounds) | time in the "
            "callbacks' hooks per step | share of its step |"
        )
        print("|---|---|---|---|---|")
        for row in bench_steps(step_rounds, steps):
            lo, hi = row["ratio_range"]
            hook = "" if math.isnan(row["hook_ms"]) else f"{row['hook_ms']:.2f} ms"
            share = "" if math.isnan(row["hook_ms"]) else f"{100 * row['hook_share']:.2f}%"
            print(
                f"| {row['config']} | {row['step_ms']:.1f} | {row['ratio']:.3f} ({lo:.3f}-{hi:.3f}) | {hook} "
                f"| {share} |"
            )
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
