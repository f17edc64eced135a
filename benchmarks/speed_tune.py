"""``speed_tune`` on the digits CNN and the char transformer, then every claim it makes re-measured apart.

For each model:

1. ``speed_tune(model, datamodule=...)`` with its default options: its own table (which options are faster,
   which are skipped on this device and why, the re-measured combination) and its choice, ``.best``.
2. A separate, longer re-measurement in the same process, interleaved round-robin (``--rounds``) so that
   machine load hits every variant alike: the **default Trainer** against the **chosen configuration** and
   against **each option speed_tune called "faster", alone** (and the combination it called faster, when
   it chose something else), each a fresh model trained for ``--steps``
   steps with a real ``Trainer`` (the data loading included: the time between consecutive batch ends).
   Options are applied through their public :class:`~lightning_recipes.tune.SpeedOption` fields
   (``prepare``, ``context``, ``trainer_kwargs``, ``loader_kwargs``) as in speed_tune. A second default
   Trainer (``default (A/A)``) gives the noise floor: its ratio to the first should be 1.
   Per variant: median step time after ``WARMUP`` steps, the mean over all steps (first steps and
   ``torch.compile`` included), and the per-round ratio default / variant (median, min-max). A claim is
   **confirmed** when the median ratio is above 1 (the verdict column also says whether every round was,
   and when the median is under speed_tune's 1.03 noise margin).

Models (no downloads): ``cnn``: the demo's ``DigitsCNN`` on ``DigitsDataModule`` (batch 64, 23 steps per
epoch); ``char``: ``TinyTransformerLM`` (d_model 64, 2 layers) on ``CharLMDataModule`` (seq_len 64, batch 32),
as in ``benchmarks/preflight_runtime.py``.

3. ``--whole-fit`` (issue 22) instead: whole fits of the digits CNN (validation included), for a short and a
   long run (``--epochs 1,12``): ``speed_tune(..., trainer=Trainer(max_epochs=E))`` chooses for that run,
   then the default Trainer, that choice (applied with ``ApplySpeedOptions`` / ``trainer_kwargs`` /
   ``speed_loader``) and ``compile`` forced are each fitted in a fresh process with an empty Inductor cache
   (``TORCHINDUCTOR_CACHE_DIR``), as a training script would start, ``--rounds`` times interleaved; the wall
   time of ``trainer.fit``, compilation included.

Run: ``python -m benchmarks.speed_tune [--models cnn,char] [--rounds 5] [--steps 0] [--threads 1]``
(``--steps 0``: each model's default, 46 steps = two epochs for the CNN, 100 for the LM). Exit status 1
when a claim speed_tune made is not confirmed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from rich import box
from rich.console import Console
from rich.table import Table
from torch.utils.data import DataLoader

from lightning_recipes.tune.speed import OPTIONS, SpeedOption, StepTimer, speed_tune

__all__ = ["MODELS", "main", "run", "run_model"]

MARGIN = 1.03  # speed_tune's default `min_speedup`: a ratio above 1 but below it is within timing noise
WARMUP = 3  # steps left out of the median (first-call kernels, torch.compile, allocator warm-up)


@dataclass
class Workload:
    """A model factory, its datamodule factory and its default number of re-measured steps."""

    model: Callable[[pl.LightningDataModule], pl.LightningModule]
    datamodule: Callable[[], pl.LightningDataModule]
    steps: int


def _digits() -> pl.LightningDataModule:
    from lightning_recipes.data import DigitsDataModule

    datamodule = DigitsDataModule(batch_size=64)
    datamodule.setup("fit")
    return datamodule


def _cnn(_datamodule: pl.LightningDataModule) -> pl.LightningModule:
    from lightning_recipes.testing import DigitsCNN

    return DigitsCNN()


def _chars() -> pl.LightningDataModule:
    from lightning_recipes.data import CharLMDataModule

    datamodule = CharLMDataModule(seq_len=64, batch_size=32)
    datamodule.setup("fit")
    return datamodule


def _char_lm(datamodule: Any) -> pl.LightningModule:
    from lightning_recipes.testing import TinyTransformerLM

    return TinyTransformerLM(vocab_size=datamodule.vocab_size, d_model=64, n_layers=2, max_seq_len=64)


MODELS: dict[str, Workload] = {
    "cnn": Workload(_cnn, _digits, steps=46),
    "char": Workload(_char_lm, _chars, steps=100),
}


@dataclass
class Fit:
    median_ms: float  # median time between batch ends after WARMUP steps
    mean_ms: float  # (last batch end - train start) / steps: every step, compile and first calls included
    final_loss: float  # mean training loss of the last 10 steps


@contextmanager
def _quiet() -> Iterator[None]:
    logger = logging.getLogger("lightning.pytorch")
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _loader(datamodule: pl.LightningDataModule, loader_kwargs: dict[str, Any]) -> Any:
    loader = datamodule.train_dataloader()  # a fresh loader with the datamodule's seeded generator
    if not loader_kwargs:
        return loader
    return DataLoader(
        loader.dataset,
        batch_sampler=loader.batch_sampler,
        collate_fn=loader.collate_fn,
        generator=loader.generator,
        **loader_kwargs,
    )


def fit_once(workload: Workload, datamodule: Any, options: Sequence[SpeedOption], steps: int) -> Fit:
    """Train a fresh model (seed 0) for ``steps`` steps under a default Trainer with ``options`` applied."""
    trainer_kwargs: dict[str, Any] = {}
    loader_kwargs: dict[str, Any] = {}
    for option in options:
        trainer_kwargs.update(option.trainer_kwargs)
        loader_kwargs.update(option.loader_kwargs)
    timer = StepTimer()
    with _quiet(), ExitStack() as stack:
        for option in options:
            if option.context is not None:
                stack.enter_context(option.context())
        torch.manual_seed(0)
        model: Any = workload.model(datamodule)
        for option in options:  # OPTIONS' order: the model changes first, torch.compile last
            if option.prepare is not None:
                model = option.prepare(model)
        trainer = pl.Trainer(
            accelerator="auto",
            devices=1,
            max_steps=steps,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            limit_val_batches=0,
            callbacks=[timer],
            **trainer_kwargs,
        )
        trainer.fit(model, train_dataloaders=_loader(datamodule, loader_kwargs))
    intervals = [b - a for a, b in zip(timer.ends, timer.ends[1:])][WARMUP - 1 :]
    losses = torch.stack(timer.losses[-10:]).cpu()  # sync: once, after the fit
    return Fit(
        median_ms=1e3 * statistics.median(intervals),
        mean_ms=1e3 * (timer.ends[-1] - timer.start) / len(timer.ends),
        final_loss=float(losses.mean()),
    )


def _ordered(names: Sequence[str]) -> list[SpeedOption]:
    """The named options in :data:`OPTIONS` order (the order speed_tune combines them in)."""
    unknown = sorted(set(names) - set(OPTIONS))
    if unknown:
        raise ValueError(f"speed_tune chose options {unknown} that are not in OPTIONS ({sorted(OPTIONS)}).")
    return [option for name, option in OPTIONS.items() if name in set(names)]


def run_model(name: str, rounds: int, steps: int, console: Console) -> dict[str, Any]:
    """speed_tune on model ``name``, then the interleaved re-measurement; prints both tables."""
    workload = MODELS[name]
    steps = steps or workload.steps
    datamodule = workload.datamodule()
    torch.manual_seed(0)
    started = time.perf_counter()
    with _quiet():
        result = speed_tune(workload.model(datamodule), datamodule=datamodule)
    tune_s = time.perf_counter() - started
    console.print(result.table())
    console.print(f"{name}: speed_tune took {tune_s:.1f} s; chosen: {result.best or 'the default Trainer'}")
    console.print(result.to_yaml())

    # Only the public row fields: new options are new rows, new statuses are left alone. Re-measured: every
    # row whose status starts with "faster", a single option of OPTIONS or a combination "a+b" of them.
    claimed = [row.option for row in result.rows if row.status.startswith("faster")]
    variants: dict[str, list[SpeedOption]] = {"default": [], "default (A/A)": []}
    if result.best:
        variants["chosen: " + "+".join(result.best)] = _ordered(result.best)
    for claim in claimed:
        names = claim.split("+") if claim not in OPTIONS else [claim]
        if set(names) == set(result.best) or not set(names) <= set(OPTIONS):
            continue
        label = f"{claim} alone" if len(names) == 1 else f"combined: {claim}"
        variants[label] = _ordered(names)
    fits: dict[str, list[Fit]] = {label: [] for label in variants}
    loads: list[float] = []
    started = time.perf_counter()
    for _ in range(rounds):
        for label, options in variants.items():
            fits[label].append(fit_once(workload, datamodule, options, steps))
        loads.append(os.getloadavg()[0])
    remeasure_s = time.perf_counter() - started

    table = Table(
        title=f"{name}: re-measured, {steps} steps x {rounds} interleaved rounds (ratio = default / variant)",
        box=box.MARKDOWN,
    )
    table.add_column("variant", no_wrap=True)
    for column in ("median step ms", "ratio (min-max)", "mean ms/step, all", "ratio", "last loss"):
        table.add_column(column)
    table.add_column("verdict", no_wrap=True)
    base = fits["default"]
    rows = []
    for label, runs in fits.items():
        ratios = [b.median_ms / r.median_ms for b, r in zip(base, runs)]
        mean_ratios = [b.mean_ms / r.mean_ms for b, r in zip(base, runs)]
        row: dict[str, Any] = {
            "variant": label,
            "options": [option.name for option in variants[label]],
            "median_ms": statistics.median(r.median_ms for r in runs),
            "ratio": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
            "mean_ms": statistics.median(r.mean_ms for r in runs),
            "mean_ratio": statistics.median(mean_ratios),
            "final_loss": statistics.median(r.final_loss for r in runs),
        }
        row["confirmed"] = label == "default" or row["ratio"] > 1.0
        row["verdict"] = _verdict(label, row["ratio"], row["ratio_min"])
        rows.append(row)
        table.add_row(
            label,
            f"{row['median_ms']:.2f}",
            f"{row['ratio']:.2f} ({row['ratio_min']:.2f}-{row['ratio_max']:.2f})",
            f"{row['mean_ms']:.2f}",
            f"{row['mean_ratio']:.2f}",
            f"{row['final_loss']:.4f}",
            row["verdict"],
        )
    console.print(table)
    claims = [row for row in rows if row["variant"] not in ("default", "default (A/A)")]
    unconfirmed = [row["variant"] for row in claims if not row["confirmed"]]
    skipped = {
        row.option: row.status.removeprefix("skipped").lstrip(": ")
        for row in result.rows
        if row.status.startswith("skipped")
    }
    console.print(
        f"{name}: re-measurement took {remeasure_s:.1f} s, 1-min load {min(loads):.1f}-{max(loads):.1f}; "
        f"claims confirmed (ratio > 1): {len(claims) - len(unconfirmed)} of {len(claims)}"
        + (f"; NOT confirmed: {unconfirmed}" if unconfirmed else "")
    )
    return {
        "speed_tune": result.to_dict(),
        "speed_tune_s": tune_s,
        "skipped": skipped,
        "remeasure": rows,
        "remeasure_s": remeasure_s,
        "steps": steps,
        "rounds": rounds,
        "load": (min(loads), max(loads)),
        "unconfirmed": unconfirmed,
    }


def _verdict(label: str, ratio: float, ratio_min: float) -> str:
    if label.startswith("default"):
        return "reference" if label == "default" else "noise floor (should be 1)"
    if ratio <= 1.0:
        return "NOT confirmed"
    notes = [] if ratio_min > 1.0 else ["not in every round"]
    if ratio < MARGIN:
        notes.append(f"under speed_tune's {MARGIN} margin")
    return "confirmed" + (f" ({'; '.join(notes)})" if notes else " (every round)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.speed_tune", description=__doc__)
    parser.add_argument("--models", default="cnn,char", help=f"comma-separated, of {sorted(MODELS)}")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default: 5)")
    parser.add_argument("--steps", type=int, default=0, help="re-measured steps per fit (0: model default)")
    parser.add_argument("--threads", type=int, default=1, help="intra-op threads (default 1: shared machine)")
    parser.add_argument("--whole-fit", action="store_true", help="whole fits, default vs chosen (issue 22)")
    parser.add_argument("--epochs", default="1,12", help="--whole-fit: run lengths in epochs (default 1,12)")
    parser.add_argument("--child", default="", help=argparse.SUPPRESS)  # one fit / tune in a fresh process
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.child:
        return _child(json.loads(args.child), args.threads)
    if args.whole_fit:
        epochs = [int(e) for e in args.epochs.split(",") if e.strip()]
        if not epochs or min(epochs) < 1:
            raise ValueError(f"`--epochs` must be positive integers, got {args.epochs!r}.")
        whole_fit(epochs, rounds=args.rounds, threads=args.threads)
        return 0
    if args.rounds < 1:
        raise ValueError(f"`--rounds` must be >= 1, got {args.rounds!r}.")
    if args.steps != 0 and args.steps < WARMUP + 2:
        raise ValueError(f"`--steps` must be 0 or >= {WARMUP + 2}, got {args.steps!r}.")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise ValueError(f"`--models` must name models of {sorted(MODELS)}, got {unknown}.")
    results = run(models, rounds=args.rounds, steps=args.steps, threads=args.threads)
    return 1 if any(r["unconfirmed"] for r in results.values()) else 0


def run(models: Sequence[str], *, rounds: int = 5, steps: int = 0, threads: int = 1) -> dict[str, Any]:
    """Every model of ``models`` in turn (see the module docstring); returns ``{model: results}``."""
    saved = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        console = Console(width=180)
        console.print(
            f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
            f"({torch.get_num_threads()} threads), lightning {pl.__version__}, Python "
            f"{platform.python_version()}, 1-min load {os.getloadavg()[0]:.1f} (shared machine)"
        )
        return {name: run_model(name, rounds, steps, console) for name in models}
    finally:
        torch.set_num_threads(saved)


def _child(job: dict[str, Any], threads: int) -> int:
    """In a fresh process: ``{"tune": epochs}`` runs speed_tune for that run, ``{"fit": ...}`` one whole fit;
    prints one JSON line."""
    torch.set_num_threads(threads)
    with _quiet():
        if "tune" in job:
            datamodule = _digits()
            torch.manual_seed(0)
            plan = pl.Trainer(max_epochs=job["tune"], logger=False)
            started = time.perf_counter()
            result = speed_tune(_cnn(datamodule), datamodule=datamodule, trainer=plan)
            print(json.dumps({**result.to_dict(), "tune_s": time.perf_counter() - started}, default=str))
            return 0
        print(json.dumps(_fit_whole(job["fit"], job["epochs"])))
    return 0


def _fit_whole(options: list[str], epochs: int) -> dict[str, Any]:
    """One whole fit of the digits CNN (validation each epoch) with ``options`` applied through the public
    API: the Trainer arguments, ``ApplySpeedOptions`` for the module-side ones, ``speed_loader``."""
    from lightning_recipes.data import DigitsDataModule
    from lightning_recipes.tune import ApplySpeedOptions, speed_loader

    datamodule = DigitsDataModule(batch_size=64)
    datamodule.setup("fit")
    trainer_kwargs: dict[str, Any] = {}
    for name in options:
        trainer_kwargs.update(OPTIONS[name].trainer_kwargs)
    module_side = [n for n in options if OPTIONS[n].prepare is not None or OPTIONS[n].context is not None]
    torch.manual_seed(0)
    model = _cnn(datamodule)
    trainer = pl.Trainer(
        max_epochs=epochs,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[ApplySpeedOptions(module_side)] if module_side else [],
        **trainer_kwargs,
    )
    loader = speed_loader(datamodule.train_dataloader(), options)
    started = time.perf_counter()
    trainer.fit(model, train_dataloaders=loader, val_dataloaders=datamodule.val_dataloader())
    fit_s = time.perf_counter() - started
    return {
        "fit_s": fit_s,
        "steps": trainer.global_step,
        "val_acc": float(trainer.callback_metrics["val_acc"]),
    }


def _in_fresh_process(job: dict[str, Any], threads: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="inductor_") as cache:  # an empty compile cache: a cold start
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache}
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "benchmarks.speed_tune",
                "--threads",
                str(threads),
                "--child",
                json.dumps(job),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            check=True,
        )
    return json.loads(done.stdout.strip().splitlines()[-1])


def whole_fit(epochs: Sequence[int], *, rounds: int = 2, threads: int = 1) -> dict[int, Any]:
    """For each run length: speed_tune's choice for it, then whole fits (default / chosen / compile) in fresh
    processes, ``rounds`` interleaved; prints a table per length and returns the numbers."""
    console = Console(width=180)
    console.print(
        f"machine: {platform.machine()}, {os.cpu_count()} CPUs, torch {torch.__version__} "
        f"({threads} threads), lightning {pl.__version__}, Python {platform.python_version()}, "
        f"1-min load {os.getloadavg()[0]:.1f}"
    )
    results: dict[int, Any] = {}
    for length in epochs:
        tuned = _in_fresh_process({"tune": length}, threads)
        rows = {row["option"]: row for row in tuned["rows"]}
        console.print(
            f"{length} epoch(s): speed_tune ({tuned['tune_s']:.0f} s) planned {tuned['run_steps']} steps, "
            f"chose {tuned['best'] or 'the default Trainer'} (projected x{tuned['best_run_speedup']:.2f} for "
            f"the run, x{tuned['best_speedup']:.2f} per step)"
        )
        for name in ("compile", "channels_last", "bf16-mixed", "num_workers", "fused_optimizer"):
            row = rows.get(name)
            if row and row.get("step_ms") is not None:
                console.print(
                    f"  {name}: {row['status'][:60]}; x{row['speedup']:.2f} per step, one-off "
                    f"{row['one_off_s']:.2f} s, pays after {row['break_even_steps']} steps, run x"
                    f"{row['run_speedup']:.2f}"
                )
        variants = {"default": [], f"chosen: {'+'.join(tuned['best']) or 'default'}": list(tuned["best"])}
        if "compile" not in tuned["best"]:
            variants["compile (forced)"] = ["compile"]
        fits: dict[str, list[dict[str, Any]]] = {label: [] for label in variants}
        for _ in range(rounds):
            for label, options in variants.items():
                fits[label].append(_in_fresh_process({"fit": options, "epochs": length}, threads))
        table = Table(
            title=f"whole fit, {length} epoch(s), {rounds} rounds, fresh process each", box=box.MARKDOWN
        )
        for column in (
            "variant",
            "fit s (median)",
            "fit s (rounds)",
            "default / variant",
            "val_acc",
            "steps",
        ):
            table.add_column(column)
        base = statistics.median(f["fit_s"] for f in fits["default"])
        for label, runs in fits.items():
            median = statistics.median(f["fit_s"] for f in runs)
            table.add_row(
                label,
                f"{median:.2f}",
                ", ".join(f"{f['fit_s']:.2f}" for f in runs),
                f"{base / median:.2f}",
                f"{statistics.median(f['val_acc'] for f in runs):.3f}",
                str(runs[0]["steps"]),
            )
        console.print(table)
        results[length] = {"speed_tune": tuned, "fits": fits}
    return results


if __name__ == "__main__":
    sys.exit(main())
