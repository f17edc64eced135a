"""The LR finder against grids of real trainings, on five kinds of model (issue #22).

For each model (``benchmarks/_lr_models.py``): a grid of 7 peak LRs half a decade apart (1e-4 .. 1e-1),
each a full short training with the recipe's AdamW and warmup-cosine schedule (seed 0), best by validation
loss; then ``find_lr`` from several seeds (model init and sweep), each giving a verdict (``ok`` or
``inconclusive``, with the fall, the sweep's own noise and the threshold) and, when ``ok``, ``peak_lr`` (what
``lr="find"`` trains at under warmup-cosine). The acceptance: inconclusive where the curve is flat, else
``peak_lr`` within 3x of the grid's best. Also printed: what other pick rules would give on the same curves
(to judge the rule on more than two models).

Usage::

    python -m benchmarks.lr_finder [--models bert_xor,mlp_regression] [--seeds 0,1,2,3] [--threads 1]
        [--num_steps 100] [--grid_cache grid.json] [--out result.json]

About 2.5 minutes on the 2-vCPU guest with 1 thread: the grid (42 short trainings) ~95 s, the 24 sweeps ~25 s.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import random
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import torch

from benchmarks._lr_models import SETUPS
from lightning_recipes.testing import fast_trainer
from lightning_recipes.tune import find_lr
from lightning_recipes.tune.suggest import curve_verdict, suggest

GRID = [10 ** (exponent / 2) for exponent in range(-8, -1)]  # 1e-4 .. 1e-1


def _quiet() -> None:
    warnings.filterwarnings("ignore")
    for name in ("lightning", "lightning.pytorch", "lightning.fabric"):
        logging.getLogger(name).setLevel(logging.ERROR)


def grid(name: str) -> dict[str, float]:
    """Validation loss after the setup's budget at each grid LR (seed 0)."""
    setup = SETUPS[name]
    losses: dict[str, float] = {}
    for lr in GRID:
        pl.seed_everything(0, verbose=False)
        trainer = fast_trainer(max_epochs=setup.epochs)
        trainer.fit(setup.make(lr), setup.data())
        losses[f"{lr:.3g}"] = float(trainer.callback_metrics["val_loss"])
    return losses


def sweep(name: str, seed: int, num_steps: int) -> dict[str, Any]:
    """One ``find_lr`` (model init and sweep seeded with ``seed``) and what each rule picks from its curve."""
    setup = SETUPS[name]
    pl.seed_everything(seed, verbose=False)
    model = setup.make(1e-3)
    start = time.perf_counter()
    result = find_lr(model, datamodule=setup.data(), seed=seed, num_steps=num_steps)
    seconds = time.perf_counter() - start
    skip = max(1, len(result.lrs) // 10)
    evidence = result.evidence
    assert evidence is not None
    lr_at_min = 10 * suggest(result.lrs, result.losses, "min_div_10", skip_begin=skip)
    return {
        "verdict": result.verdict,
        "reason": result.reason,
        "fall": evidence.fall,
        "noise": evidence.noise,
        "threshold": evidence.threshold,
        "start_loss": evidence.start_loss,
        "suggestion": result.suggestion,
        "peak_lr": result.peak_lr,
        "stopped": result.stopped,
        "steps": len(result.lrs),
        "seconds": seconds,
        "lr_at_min": lr_at_min,
        "steepest": suggest(result.lrs, result.losses, "steepest", skip_begin=skip),
        "lrs": result.lrs,
        "losses": result.losses,
    }


def false_pass_rates(trials: int) -> str:
    """How often a flat simulated sweep (no learning in it) reads as significant: per sweep length and kind of
    noise (Gaussian; Student-t with 3 degrees of freedom; 4 batches cycled with small jitter; a slow upward
    drift). The verdict's bound is 1%."""
    rng = random.Random(0)
    kinds = {
        "gaussian": lambda i: rng.gauss(0, 1),
        "student-t 3": lambda i: rng.gauss(0, 1) / math.sqrt(sum(rng.gauss(0, 1) ** 2 for _ in range(3)) / 3),
        "drift": lambda i: rng.gauss(0, 1) + 0.01 * i,
    }
    lines = ["| steps | " + " | ".join([*kinds, "4 batches cycled"]) + " |", "|---:|" + "---:|" * 4]
    for steps in (30, 100, 300):
        lrs = [1e-7 * 1.1**i for i in range(steps)]
        rates = []
        for noise in kinds.values():
            hits = sum(
                curve_verdict(lrs, [5 + noise(i) for i in range(steps)]).significant for _ in range(trials)
            )
            rates.append(hits / trials)
        hits = 0
        for _ in range(trials):
            offsets = [rng.gauss(0, 1) for _ in range(4)]
            hits += curve_verdict(
                lrs, [5 + offsets[i % 4] + 0.3 * rng.gauss(0, 1) for i in range(steps)]
            ).significant
        rates.append(hits / trials)
        lines.append(f"| {steps} | " + " | ".join(f"{r:.2%}" for r in rates) + " |")
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def report(name: str, losses: dict[str, float], sweeps: dict[int, dict[str, Any]]) -> str:
    best_key = min(losses, key=losses.__getitem__)
    best = float(best_key)
    rows = []
    for seed, s in sweeps.items():
        ratio = None if s["peak_lr"] is None else s["peak_lr"] / best
        within = "-" if ratio is None else ("yes" if 1 / 3 <= ratio <= 3 else "**no**")
        fall = s["fall"] / abs(s["start_loss"]) if s["start_loss"] else math.nan
        noise = s["noise"] / abs(s["start_loss"]) if s["start_loss"] else math.nan
        threshold = s["threshold"] / abs(s["start_loss"]) if s["start_loss"] else math.nan
        rows.append(
            f"| {name} | {seed} | {s['verdict']} | {fall:.2%} | {noise:.2%} | {threshold:.2%} | "
            f"{_fmt(s['peak_lr'])} | {_fmt(ratio)} | {within} | {s['lr_at_min'] / 2 / best:.2g} | "
            f"{s['lr_at_min'] / best:.2g} | {s['steepest'] / best:.2g} | {s['steps']} ({s['stopped']}) |"
        )
    table = ", ".join(f"{lr}: {loss:.3f}" for lr, loss in losses.items())
    return f"{name}: grid val loss {table}; best {best_key}\n" + "\n".join(rows)


HEADER = (
    "| model | seed | verdict | fall / start | noise / start | threshold / start | peak_lr | peak_lr / best "
    "| within 3x | (min/2) / best | min / best | steepest / best | steps (stopped) |\n"
    "|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|---:|---|"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lr_finder", description=__doc__)
    parser.add_argument("--models", default=",".join(SETUPS))
    parser.add_argument("--seeds", default="0,1,2,3")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--num_steps", type=int, default=100)
    parser.add_argument("--grid_cache", type=Path, default=None, help="read/write the grid's losses here")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--simulate", type=int, default=0, help="also simulate this many flat sweeps per cell"
    )
    args = parser.parse_args(argv)
    _quiet()
    torch.set_num_threads(args.threads)
    cached: dict[str, dict[str, float]] = {}
    if args.grid_cache is not None and args.grid_cache.exists():
        cached = json.loads(args.grid_cache.read_text())
    results: dict[str, Any] = {}
    if args.simulate:
        print(f"False-pass rate of flat simulated sweeps ({args.simulate} per cell):")
        print(false_pass_rates(args.simulate), flush=True)
    print(HEADER)
    for name in args.models.split(","):
        if name not in cached:
            cached[name] = grid(name)
            if args.grid_cache is not None:
                args.grid_cache.write_text(json.dumps(cached, indent=1))
        sweeps = {int(seed): sweep(name, int(seed), args.num_steps) for seed in args.seeds.split(",")}
        results[name] = {"grid": cached[name], "sweeps": sweeps}
        print(report(name, cached[name], sweeps), flush=True)
    if args.out is not None:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
