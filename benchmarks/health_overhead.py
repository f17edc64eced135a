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

3. ``profile`` (only when asked): :func:`profile_steps`, the monitor's device ops and CPU time per kind of
   step and per place (its forward hooks, each of its four step hooks).
4. ``hooks`` (only when asked): :func:`hook_costs`, the host time of one call of each of the monitor's step
   hooks between checks (``perf_counter_ns`` around every real call, the timer's own cost taken off; the
   minimum and median over the calls: the minimum is what load moves least), their device ops between checks
   and on the check step, and what Lightning's dispatch of one empty callback's hook costs per step.

Run: ``python -m benchmarks.health_overhead [--only steps|gallery|profile|hooks]
[--models mlp,cnn,transformer] [--rounds 7] [--steps 200] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import statistics
import sys
import time
import timeit
import warnings
from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.data import DataLoader

from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.data.digits import DigitsDataModule
from lightning_recipes.testing import DigitsCNN, TinyTransformerLM, fast_trainer, random_token_loader

__all__ = ["MODELS", "bench_gallery", "bench_steps", "hook_costs", "main", "profile_steps"]

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


HOOKS = ("on_train_batch_start", "on_before_backward", "on_before_optimizer_step", "on_train_batch_end")


def timed_hooks(monitor: Callback) -> dict[int, float]:
    """Wrap ``monitor``'s four training-step hooks with a CPU-time timer; returns the seconds spent in them
    per step (keyed by the global step at the batch's start). The forward hooks of the sampled batches are
    not in it: they run inside the model's forward (:func:`profile_steps` counts them)."""
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

    for name in HOOKS:
        wrap(name)
    return seconds


class _OpCount(TorchDispatchMode):
    """The number of device ops dispatched while active (a work count: no clock)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        self.count += 1
        return func(*args, **(kwargs or {}))


def _step_kind(step: int) -> str:
    position = step % CHECK_EVERY
    if position == CHECK_EVERY - 1:
        return "check step"
    return "sampled step" if position >= CHECK_EVERY - 2 else "between checks"


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


def _profile_fit(
    model: str, measure: str, monitor: Monitor | None, steps: int
) -> dict[tuple[str, str], float]:
    """One fit: per (kind of step, place), the median ``measure`` (``"ops"`` or ``"cpu_us"``)."""
    found: dict[tuple[str, str], list[float]] = {}
    at = [0]

    def measured(fn: Callable[..., Any], place: str) -> Callable[..., Any]:
        def run(*args: Any, **kwargs: Any) -> Any:
            counter = _OpCount()
            start = time.process_time()
            if measure == "ops":
                with counter:
                    out = fn(*args, **kwargs)
            else:
                out = fn(*args, **kwargs)
            value = counter.count if measure == "ops" else 1e6 * (time.process_time() - start)
            if at[0] >= CHECK_EVERY:
                found.setdefault((_step_kind(at[0]), place), []).append(value)
            return out

        return run

    class Steps(Callback):
        def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
            at[0] = trainer.global_step

    _, module, loader = MODELS[model]
    torch.manual_seed(0)
    lightning_module = module()
    lightning_module.training_step = measured(lightning_module.training_step, "training_step")  # type: ignore[method-assign]
    callbacks: list[Callback] = [Steps()]
    if monitor is not None:
        hooked = monitor()
        for name in HOOKS:
            setattr(hooked, name, measured(getattr(hooked, name), name))
        callbacks.append(hooked)
    trainer = fast_trainer(max_steps=steps, max_epochs=-1, callbacks=callbacks, limit_val_batches=0)
    trainer.fit(lightning_module, loader())
    return {key: statistics.median(values) for key, values in found.items()}


def profile_steps(model: str, steps: int = 4 * CHECK_EVERY, monitor: Monitor | None = None) -> dict[str, Any]:
    """Where the monitor's work goes, per kind of step (between checks; the activation-sampled step before
    the check; the check step, sampled too) and per place (each of its four hooks; its forward hooks, as the
    ``training_step``'s ops beyond a bare run's): device ops (a ``TorchDispatchMode``) and CPU time
    (``time.process_time``, the median step), in one bare and one monitored fit for each measure. Steps
    before ``CHECK_EVERY`` (the step-0 measurements) are left out."""
    monitor = monitor or (lambda: HealthMonitor(check_every_n_steps=CHECK_EVERY))
    rows: dict[str, dict[str, float]] = {}
    for measure in ("ops", "cpu_us"):
        bare = _profile_fit(model, measure, None, steps)
        monitored = _profile_fit(model, measure, monitor, steps)
        for kind in ("between checks", "sampled step", "check step"):
            row = rows.setdefault(kind, {})
            forward = monitored[(kind, "training_step")] - bare[(kind, "training_step")]
            row[f"forward hooks {measure}"] = forward
            for name in HOOKS:
                row[f"{name} {measure}"] = monitored[(kind, name)]
            row[f"total {measure}"] = forward + sum(monitored[(kind, name)] for name in HOOKS)
    return rows


def _timer_cost() -> float:
    """The seconds :func:`hook_costs`' timer adds around a call (a no-op timed the same way, min of many)."""
    calls = []
    clock = time.perf_counter_ns

    def noop(*args: Any) -> None:
        return None

    for _ in range(20000):
        start = clock()
        noop(None)
        calls.append(clock() - start)
    return 1e-9 * min(calls)


def _dispatch_cost(trainer: pl.Trainer, module: pl.LightningModule) -> float:
    """Seconds Lightning's ``_call_callback_hooks`` adds per callback per hook, for an empty callback: its
    call with 10 empty callbacks minus its call with none, over 10 (timeit, min of 7 repeats)."""
    from lightning.pytorch.trainer import call

    saved = trainer.callbacks  # type: ignore[attr-defined]
    try:
        times = []
        for count in (0, 10):
            trainer.callbacks = [Callback() for _ in range(count)]  # type: ignore[attr-defined]
            timer = timeit.Timer(lambda: call._call_callback_hooks(trainer, "on_before_zero_grad", None))
            times.append(min(timer.repeat(repeat=7, number=500)) / 500)
    finally:
        trainer.callbacks = saved  # type: ignore[attr-defined]
    return (times[1] - times[0]) / 10


def hook_costs(model: str, steps: int = 4 * CHECK_EVERY, monitor: Monitor | None = None) -> dict[str, Any]:
    """Per step hook of the monitor: the host seconds of one real call between checks (``perf_counter_ns``
    around each call, the timer's own cost taken off; ``min`` and ``median`` over the calls), and its device
    ops between checks (``ops``, the median step) and on the check step (``check_ops``); with
    ``dispatch_s``, what Lightning's dispatch of one empty callback's hook costs, and ``hooks_per_step``, how
    many callback hooks Lightning calls per training step (every callback pays both, overridden or not)."""
    from lightning.pytorch.trainer import call

    monitor = monitor or (lambda: HealthMonitor(check_every_n_steps=CHECK_EVERY))
    _, module, loader = MODELS[model]
    timer = _timer_cost()
    at = [0]
    calls: dict[str, list[float]] = {name: [] for name in HOOKS}
    ops: dict[tuple[str, str], list[int]] = {}
    dispatch = [0.0]
    hook_calls: dict[int, int] = {}
    real_call = call._call_callback_hooks

    def counted(trainer: pl.Trainer, hook_name: str, *args: Any, **kwargs: Any) -> None:
        hook_calls[at[0]] = hook_calls.get(at[0], 0) + 1
        real_call(trainer, hook_name, *args, **kwargs)

    class Steps(Callback):
        def on_train_batch_start(self, trainer: pl.Trainer, *args: object) -> None:
            at[0] = trainer.global_step

        def on_train_batch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule, *args: Any) -> None:
            if at[0] == CHECK_EVERY + 10:
                dispatch[0] = _dispatch_cost(trainer, pl_module)

    def wrapped(hook: Callable[..., Any], name: str, count_ops: bool) -> Callable[..., Any]:
        clock = time.perf_counter_ns

        def run(*args: Any) -> Any:
            if count_ops:
                counter = _OpCount()
                with counter:
                    out = hook(*args)
                if at[0] >= CHECK_EVERY:
                    kind = "check" if _step_kind(at[0]) == "check step" else _step_kind(at[0])
                    ops.setdefault((kind, name), []).append(counter.count)
                return out
            start = clock()
            out = hook(*args)
            elapsed = 1e-9 * (clock() - start) - timer
            if at[0] >= CHECK_EVERY and _step_kind(at[0]) == "between checks":
                calls[name].append(elapsed)
            return out

        return run

    for count_ops in (False, True):
        torch.manual_seed(0)
        hooked = monitor()
        for name in HOOKS:
            setattr(hooked, name, wrapped(getattr(hooked, name), name, count_ops))
        trainer = fast_trainer(
            max_steps=steps, max_epochs=-1, callbacks=[Steps(), hooked], limit_val_batches=0
        )
        call._call_callback_hooks = counted  # type: ignore[assignment]
        try:
            trainer.fit(module(), loader())
        finally:
            call._call_callback_hooks = real_call  # type: ignore[assignment]
    out: dict[str, Any] = {}
    for name in HOOKS:
        out[name] = {
            "min": min(calls[name]),
            "median": statistics.median(calls[name]),
            "ops": statistics.median(ops.get(("between checks", name), [0])),
            "check_ops": statistics.median(ops.get(("check", name), [0])),
        }
    out["dispatch_s"] = dispatch[0]
    between = [
        n for step, n in hook_calls.items() if step >= CHECK_EVERY and _step_kind(step) == "between checks"
    ]
    out["hooks_per_step"] = statistics.median(between) / 2  # two fits counted
    return out


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
    parser.add_argument("--only", choices=("steps", "gallery", "profile", "hooks"))
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
    if args.only == "profile":
        places = ("forward hooks", *HOOKS, "total")
        print(
            f"\nHealthMonitor(check_every_n_steps={CHECK_EVERY}): device ops / CPU us (median step) per place"
        )
        print("\n| model | step | " + " | ".join(places) + " |")
        print("|---|---|" + "---:|" * len(places))
        for model in models:
            rows = profile_steps(model)
            for kind in ("between checks", "sampled step", "check step"):
                row = rows[kind]
                cells = [f"{row[f'{p} ops']:.0f} / {row[f'{p} cpu_us']:.0f}" for p in places]
                print(f"| {model} | {kind} | " + " | ".join(cells) + " |", flush=True)
    if args.only == "hooks":
        print(
            f"\nHealthMonitor(check_every_n_steps={CHECK_EVERY}): host us per call between checks, min / "
            "median over the calls (perf_counter_ns, the timer's cost taken off); device ops between checks "
            "/ on the check step"
        )
        print("\n| model | " + " | ".join(HOOKS) + " | sum of mins | Lightning per empty hook | hooks/step |")
        print("|---|" + "---:|" * (len(HOOKS) + 3))
        for model in models:
            costs = hook_costs(model)
            cells = [
                f"{1e6 * costs[h]['min']:.1f} / {1e6 * costs[h]['median']:.1f} us, "
                f"{costs[h]['ops']:.0f} / {costs[h]['check_ops']:.0f} ops"
                for h in HOOKS
            ]
            total = 1e6 * sum(costs[h]["min"] for h in HOOKS)
            print(
                f"| {model} | " + " | ".join(cells) + f" | {total:.1f} us | "
                f"{1e6 * costs['dispatch_s']:.2f} us | {costs['hooks_per_step']:.0f} |",
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
