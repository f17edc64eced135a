"""The whole default preflight on the stage gallery of issue #24 (``galleries/preflight/stage``), by case.

The gallery was written blind from the issue's stage list (loaders and sampler, splits, forward, loss,
optimisation, schedule, validation path) and not tuned after running the checks. Per bug:

- **caught**: the check the gallery names reports ``fail`` (or ``warn`` where the case allows a warning);
- **flagged**: any check fails (what a user sees: the report is not ok because of a ``fail``);
- a bug that only gets ``error``/``inconclusive`` results is neither.

Per healthy look-alike: a **false alarm** is any ``fail``; an ``error`` is counted apart (the report is not
ok, but no bug was claimed). Every case's time is the whole preflight's wall time, with its slowest check.

Run: ``python -m benchmarks.preflight_stage_gallery [--threads 1] [--markdown]``.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import platform
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch

from lightning_recipes.checks import preflight

PACKAGE = "galleries.preflight.stage"


def cases(kind: str) -> list[Any]:
    """Every ``BUGS`` or ``HEALTHY`` case of the stage gallery, in module order (its ``test_twins_*`` proofs,
    which import the cases, are not case modules)."""
    package = importlib.import_module(PACKAGE)
    found: list[Any] = []
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not info.name.startswith(("_", "test_")):
            found += getattr(importlib.import_module(f"{PACKAGE}.{info.name}"), kind, [])
    return found


def run_case(case: Any, threads: int, checks: list[str] | None = None) -> tuple[dict[str, str], float, str]:
    """The statuses of the preflight (every check, or ``checks``) on ``case``, its wall time and its slowest
    check."""
    torch.manual_seed(0)  # the models initialise from the global RNG: the same init in every run
    data = case.data()
    accepted = inspect.signature(preflight).parameters
    dropped = sorted(key for key in data if key not in accepted)  # e.g. the run plan, on an older preflight
    started = time.perf_counter()
    report = preflight(
        case.model(),
        **{k: v for k, v in data.items() if k in accepted},
        num_threads=threads,
        progress=False,
        checks=checks,
    )
    seconds = time.perf_counter() - started
    slowest = report.slowest
    slow = "-" if slowest is None else f"{slowest.name} {slowest.seconds:.1f} s"
    if dropped:
        slow += f" (not accepted by this preflight: {', '.join(dropped)})"
    return {r.name: r.status for r in report}, seconds, slow


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", default="", help="comma-separated case ids (default: all)")
    parser.add_argument("--checks", default="", help="comma-separated check names (default: all)")
    args = parser.parse_args(argv)
    only = set(filter(None, args.only.split(",")))
    print(
        f"machine: {platform.machine()}, torch {torch.__version__}, threads {args.threads}, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
    )
    print("| case | stage | expected | its status | failing checks | other non-pass | seconds | slowest |")
    print("|---|---|---|---|---|---|---:|---|")
    caught = flagged = n_bugs = alarms = errors = n_healthy = 0
    longest = 0.0
    missed: list[str] = []
    for kind in ("BUGS", "HEALTHY"):
        for case in cases(kind):
            if only and case.id not in only:
                continue
            statuses, seconds, slow = run_case(
                case, args.threads, args.checks.split(",") if args.checks else None
            )
            longest = max(longest, seconds)
            failing = [name for name, s in statuses.items() if s == "fail"]
            other = [f"{name}={s}" for name, s in statuses.items() if s not in ("pass", "fail")]
            if kind == "BUGS":
                n_bugs += 1
                wanted = ("fail",) if case.status == "fail" else ("warn", "fail")
                hit = statuses.get(case.check) in wanted
                caught += hit
                flagged += bool(failing)
                if not hit:
                    missed.append(f"{case.id} ({case.check}: {statuses.get(case.check)})")
                expected, own = case.check, statuses.get(case.check, "not run")
            else:
                n_healthy += 1
                alarms += bool(failing)
                errors += any(s == "error" for s in statuses.values())
                expected, own = "healthy", "-"
            print(
                f"| {case.id} | {case.family} | {expected} | {own} | {', '.join(failing) or '-'} | "
                f"{', '.join(other) or '-'} | {seconds:.1f} | {slow} |",
                flush=True,
            )
    print()
    if n_bugs:
        print(
            f"bugs: caught by the named check {caught}/{n_bugs} = {caught / n_bugs:.0%}; "
            f"flagged {flagged}/{n_bugs}"
        )
    if n_healthy:
        print(
            f"healthy: {alarms}/{n_healthy} with a false alarm (a fail), {errors}/{n_healthy} with an error"
        )
    print(f"longest preflight: {longest:.1f} s")
    if missed:
        print("missed:", "; ".join(missed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
