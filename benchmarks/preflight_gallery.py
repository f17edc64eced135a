"""Precision and recall of the whole preflight on the gallery of planted bugs and healthy models.

Every case of ``galleries/preflight/families`` (the first gallery, ``legacy``, and the families added for
issue #14) gets the full default preflight, every check on. Per case:

- a bug is **caught** when the check meant for it reports the expected status (``fail``; ``warn`` for the
  cases where only a warning is right) - the strict measure: the right check, the right verdict;
- a bug is **flagged** when any check fails (or warns, for warn-level cases) - what a user sees;
- a healthy model raises a **false alarm** when any check fails (warnings are counted apart).

Precision = flagged bugs / (flagged bugs + healthy models with a false alarm); recall = caught / bugs.

Run: ``python -m benchmarks.preflight_gallery [--threads 1] [--only legacy,causality]``.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import platform
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch

from lightning_recipes.checks import preflight


def _gallery() -> dict[str, Any]:
    package = importlib.import_module("galleries.preflight.families")
    names = sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.name.startswith("_"))
    return {name: importlib.import_module(f"galleries.preflight.families.{name}") for name in names}


def _run(case: Any, threads: int) -> tuple[dict[str, str], float]:
    started = time.perf_counter()
    torch.manual_seed(0)  # the models initialise from the global RNG: the same init in every run
    report = preflight(case.model(), **case.data(), num_threads=threads, progress=False)
    return {r.name: r.status for r in report}, time.perf_counter() - started


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated gallery modules (default: all)")
    args = parser.parse_args(argv)
    modules = _gallery()
    if args.only:
        modules = {k: v for k, v in modules.items() if k in args.only.split(",")}
    rows: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    misses: list[str] = []
    alarms: list[str] = []
    total_seconds = 0.0
    seen: set[str] = set()  # a healthy model listed by two families counts once
    for module_name, module in modules.items():
        era = "old" if module_name == "legacy" else "new"
        for case in getattr(module, "BUGS", []):
            statuses, seconds = _run(case, args.threads)
            total_seconds += seconds
            row = rows[f"{era} bugs: {case.family}"]
            row["n"] += 1
            wanted = ("fail",) if case.status == "fail" else ("warn", "fail")
            caught = statuses.get(case.check) in wanted
            flagged = any(s in wanted for s in statuses.values())
            row["caught"] += caught
            row["flagged"] += flagged
            if not caught:
                misses.append(f"{case.id} ({case.check}: {statuses.get(case.check)})")
        for case in getattr(module, "HEALTHY", []):
            if case.id in seen:
                continue
            seen.add(case.id)
            statuses, seconds = _run(case, args.threads)
            total_seconds += seconds
            row = rows[f"{era} healthy"]
            row["n"] += 1
            failed = [name for name, s in statuses.items() if s == "fail"]
            row["false_alarm"] += bool(failed)
            row["warned"] += any(s == "warn" for s in statuses.values())
            if failed:
                alarms.append(f"{case.id} ({', '.join(failed)})")
    print(
        f"machine: {platform.machine()} {platform.processor() or ''}, torch {torch.__version__}, "
        f"threads {args.threads}, {total_seconds:.0f} s of preflights"
    )
    print(f"{'group':<34} {'n':>3} {'caught':>7} {'flagged':>8} {'false alarm':>12} {'warned':>7}")
    for name in sorted(rows):
        r = rows[name]
        counts = f"{r['caught']:>7} {r['flagged']:>8} {r['false_alarm']:>12} {r['warned']:>7}"
        print(f"{name:<34} {r['n']:>3} {counts}")
    for era in ("old", "new", "all"):
        bugs = [r for k, r in rows.items() if "bugs" in k and (era == "all" or k.startswith(era))]
        healthy = [r for k, r in rows.items() if "healthy" in k and (era == "all" or k.startswith(era))]
        n = sum(r["n"] for r in bugs)
        caught, flagged = sum(r["caught"] for r in bugs), sum(r["flagged"] for r in bugs)
        false = sum(r["false_alarm"] for r in healthy)
        precision = flagged / (flagged + false) if flagged + false else float("nan")
        recall = caught / n if n else float("nan")
        print(
            f"{era:>4}: recall (right check) {caught}/{n} = {recall:.2f}, flagged {flagged}/{n}, "
            f"precision {precision:.2f} ({false} of {sum(r['n'] for r in healthy)} healthy with a fail)"
        )
    if misses:
        print("missed:", "; ".join(misses))
    if alarms:
        print("false alarms:", "; ".join(alarms))
    return 0


if __name__ == "__main__":
    sys.exit(main())
