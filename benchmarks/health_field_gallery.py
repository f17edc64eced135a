"""HealthMonitor on the field gallery (issue #25), one row per run.

Every run of ``galleries/health/field/*_runs.py`` trains with a ``HealthMonitor`` alone; a row
says what the run must show, from which step, what the monitor found, the verdict and the seconds it took.

Verdicts: ``caught`` (the expected problem found at or after its onset, and nothing outside the expected
problem and the case's ``also_allowed``), ``healthy ok`` (a healthy run, no finding), ``missed`` (nothing
named), ``misnamed`` (another problem named, with or without the expected one), ``early`` (the expected
problem found only before its onset), ``false alarm`` (a finding on a healthy run). A module that cannot be
imported (absent, or ``transformers`` not installed) is skipped with its reason.

Run: ``PYTHONPATH=. python -m benchmarks.health_field_gallery [--module field_runs|transformer_runs|all]
[--only NAME]``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch

GALLERY = Path(__file__).resolve().parents[1] / "galleries" / "health" / "field"
PACKAGE = "galleries.health.field"


def gallery_modules() -> list[str]:
    """The gallery's run modules (``*_runs.py``), by name."""
    return sorted(path.stem for path in GALLERY.glob("*_runs.py"))


def verdict(case: Any, findings: list[Any]) -> str:
    """Judge one run's findings against its case (see the module docstring)."""
    if case.expected is None:
        return "healthy ok" if not findings else "false alarm"
    allowed = {case.expected, *case.also_allowed}
    hit = any(f.problem == case.expected and f.step >= case.onset_step for f in findings)
    extra = [f for f in findings if f.problem not in allowed]
    if extra:
        return "misnamed"
    if hit:
        return "caught"
    if any(f.problem == case.expected for f in findings):
        return "early"
    return "misnamed" if findings else "missed"


def found_text(findings: list[Any]) -> str:
    return ", ".join(f"{f.problem}@{f.step}" for f in findings) or "-"


def run_module(name: str, only: str | None) -> list[tuple[str, ...]]:
    try:
        module = importlib.import_module(f"{PACKAGE}.{name}")
    except ImportError as err:
        print(f"[health_field_gallery] skipping {name}: {err}", flush=True)
        return []
    from galleries.health.field._case import run_case

    rows = []
    for case in module.CASES:
        if only is not None and case.name != only:
            continue
        start = time.perf_counter()
        monitor, _ = run_case(case, monitor=True)
        seconds = time.perf_counter() - start
        findings = list(monitor.findings) if monitor is not None else []
        row = (
            case.name,
            case.expected or "healthy",
            str(case.onset_step),
            found_text(findings),
            verdict(case, findings),
            f"{seconds:.1f}",
        )
        print("  ".join(row), file=sys.stderr, flush=True)
        rows.append(row)
    return rows


def table(rows: list[tuple[str, ...]]) -> str:
    header = ("case", "expected", "onset", "found (problem@step)", "verdict", "s")
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary(rows: list[tuple[str, ...]]) -> str:
    counts: dict[str, int] = {}
    for row in rows:
        counts[row[4]] = counts.get(row[4], 0) + 1
    return ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", default="all", help="a *_runs module of the gallery, or 'all' (default)")
    parser.add_argument("--only", default=None, metavar="NAME", help="run only the case with this name")
    parser.add_argument("--threads", type=int, default=1, help="torch intra-op threads (default 1)")
    args = parser.parse_args(argv)
    modules = gallery_modules() if args.module == "all" else [args.module]
    if args.module != "all" and not (GALLERY / f"{args.module}.py").exists():
        print(f"[health_field_gallery] skipping {args.module}: no such module in {GALLERY}")
        modules = []
    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore")
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning").setLevel(logging.ERROR)
    rows = [row for name in modules for row in run_module(name, args.only)]
    if not rows:
        print("[health_field_gallery] no case ran")
        return 0
    print(table(rows))
    print(f"\n{len(rows)} runs: {summary(rows)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
