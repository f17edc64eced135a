"""``HealthMonitor(repair=True)`` on repairable problem runs (issue #36): each run twice, same seed, without
and with repair; one row per run: the problem, the finding, the action, its step, the final validation loss
without -> with repair.

The runs reuse the field gallery's builders (``galleries/health/field``) and add a validation
set from the same task (a different seed of the same teacher): an LR far too high (Adam at 0.5), a StepLR
that collapses the LR 1e6x at step 80, a wide MLP overfitting 32 noisy samples, and a weighted loss whose one
batch has all its weights 0 (0/0: a NaN loss, a NaN update, every weight NaN after it).

``--zoo PACKAGE`` scores a case zoo instead (any package whose ``zoo`` module, or itself, holds ``CASES`` or
``PROBLEM_CASES`` of ``FieldCase``-like records: ``name``, ``build``, ``expected``, ``seed``, ``max_steps``,
``check_every``...): every problem case whose expected finding :data:`REPAIRS` can repair, trained with and
without repair from the same seed; one row per case: the finding, the action, its step, the final validation
loss without -> with repair and the best validation loss seen (without -> with). A case without a validation
set is scored on its training set (marked ``train``).

Run: ``PYTHONPATH=. python -m benchmarks.health_repair [--only NAME] [--zoo PACKAGE]``, e.g.
``--zoo galleries.health.zoo2``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import math
import warnings
from typing import Any

import torch

from lightning_recipes.callbacks._health_repair import REPAIRS
from tests.callbacks.health_repair_runs import RUNS, RepairRun, run, run_zoo_case


def row(case: RepairRun) -> dict[str, Any]:
    plain, repaired = run(case, repair=False), run(case, repair=True)
    without, with_ = plain.val_loss, repaired.val_loss
    events = repaired.monitor.repairs
    findings = ", ".join(f"{f.problem}({f.cause})@{f.step}" for f in plain.monitor.findings) or "-"
    actions = "; ".join(f"{e.action}@{e.step}" for e in events) or "-"
    better = (without - with_) / without if math.isfinite(without) and without > 0 else math.inf
    return {
        "run": case.name,
        "finding": findings,
        "action": actions,
        "without": without,
        "with": with_,
        "better": better,
        "events": events,
    }


# ---------------------------------------------------------------- any zoo of FieldCase-like records


def zoo_cases(package: str) -> list[Any]:
    """The problem cases of the zoo ``package`` whose expected finding a repair exists for: a problem or a
    named cause of :data:`REPAIRS`, or non-finite ``inputs`` (one batch skipped: ``repair_of``)."""
    try:
        module = importlib.import_module(f"{package}.zoo")
    except ModuleNotFoundError:
        module = importlib.import_module(package)
    cases = getattr(module, "PROBLEM_CASES", None) or module.CASES
    repairable = {name for pair in REPAIRS for name in pair} | {"inputs"}
    return [c for c in cases if getattr(c, "expected", None) in repairable]


def zoo_main(package: str, only: str | None) -> None:
    print(
        f"zoo {package}: its problem cases whose expected finding has a repair "
        f"({', '.join(sorted({n for pair in REPAIRS for n in pair} | {'inputs'}))})"
    )
    print(
        "| case | expected | finding (without repair) | action@step | final loss without -> with | "
        "best val loss without -> with |"
    )
    print("|---|---|---|---|---|---|")
    for case in zoo_cases(package):
        if only and case.name != only:
            continue
        plain, repaired = run_zoo_case(case, repair=False), run_zoo_case(case, repair=True)
        findings = ", ".join(f"{f.problem}({f.cause})@{f.step}" for f in plain["monitor"].findings[:3]) or "-"
        events = repaired["monitor"].repairs
        actions = "; ".join(f"{e.action}@{e.step}" for e in events) or "-"
        on = "" if plain["on"] == "val" else " (train)"
        print(
            f"| {case.name} | {case.expected} | {findings} | {actions} | "
            f"{plain['final']:.4g} -> {repaired['final']:.4g}{on} | "
            f"{plain['best']:.4g} -> {repaired['best']:.4g} |",
            flush=True,
        )
        for event in events:
            print(f"    {event.message}", flush=True)


# ---------------------------------------------------------------- the cost with nothing wrong

COST_ZOO = "galleries.health.zoo1"  # its healthy cases: runs whose checks are all healthy


def tensor_bytes(obj: Any) -> tuple[int, int]:
    """``(tensors, bytes)`` in nested dicts, lists and tuples."""
    if isinstance(obj, torch.Tensor):
        return 1, obj.numel() * obj.element_size()
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (list, tuple)) else ()
    counts = [tensor_bytes(item) for item in items]
    return sum(c[0] for c in counts), sum(c[1] for c in counts)


def cost_row(case: Any) -> dict[str, Any]:
    """CPU time (``time.process_time``, one thread: work, not wall time) of ``case`` trained without and with
    ``repair=True``, and of the repairer's healthy-check snapshots; the snapshots' tensor and byte counts."""
    import time

    from lightning_recipes.callbacks._health_repair import HealthRepair

    spent: dict[str, Any] = {"snapshot_s": 0.0, "calls": 0, "tensors": 0, "bytes": 0}
    original = HealthRepair._take_healthy

    def timed(self: HealthRepair, *args: Any) -> None:
        start = time.process_time()
        original(self, *args)
        spent["snapshot_s"] += time.process_time() - start
        spent["calls"] += 1
        taken = self._candidate.snapshot
        if taken is not None:
            spent["tensors"], spent["bytes"] = tensor_bytes([taken.model, taken.optimizers])

    start = time.process_time()
    plain = run_zoo_case(case, repair=False)
    plain_s = time.process_time() - start
    HealthRepair._take_healthy = timed  # type: ignore[method-assign]
    try:
        start = time.process_time()
        repaired = run_zoo_case(case, repair=True)
        repair_s = time.process_time() - start
    finally:
        HealthRepair._take_healthy = original  # type: ignore[method-assign]
    repairer = repaired["monitor"]._repair
    tensors, size = spent["tensors"], spent["bytes"]
    steps = max(int(repaired["steps"]), 1)
    return {
        "case": case.name,
        "steps": steps,
        "checks": repaired["monitor"].checks,
        "snapshots": repairer.snapshots_taken,
        "tensors": tensors,
        "bytes": size,
        "step_ms": 1e3 * plain_s / steps,
        "snapshot_ms": 1e3 * spent["snapshot_s"] / max(spent["calls"], 1),
        "overhead": spent["snapshot_s"] / plain_s,
        "total_change": repair_s / plain_s - 1,
        "same": plain["final"] == repaired["final"]
        or (math.isnan(plain["final"]) and math.isnan(repaired["final"])),
    }


def cost_main() -> None:
    print(f"cost of repair=True with nothing wrong: the healthy cases of {COST_ZOO}, CPU time, 1 thread")
    print(
        "| run | steps | checks | snapshots | tensors x bytes per snapshot | CPU ms per step (without) | "
        "CPU ms per snapshot (incl. the rules' memory) | snapshot CPU / training CPU | final val loss same |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    module = importlib.import_module(f"{COST_ZOO}.zoo")
    for case in module.HEALTHY_CASES:
        r = cost_row(case)
        print(
            f"| {r['case']} | {r['steps']} | {r['checks']} | {r['snapshots']} | {r['tensors']} x "
            f"{r['bytes'] / 1e6:.3g} MB | {r['step_ms']:.3g} | {r['snapshot_ms']:.3g} | "
            f"{r['overhead']:.2%} | {r['same']} |",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None)
    parser.add_argument("--zoo", default=None, help="a zoo package, e.g. galleries.health.zoo2")
    args = parser.parse_args()
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning_recipes").setLevel(logging.ERROR)  # the events are printed below
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    if args.zoo:
        zoo_main(args.zoo, args.only)
        return
    if args.only == "cost":
        cost_main()
        return
    print(
        "| run | finding (without repair) | repair: action@step | final val loss without -> with | better |"
    )
    print("|---|---|---|---|---|")
    for case in RUNS:
        if case.name.endswith("_rank1") or (args.only and case.name != args.only):
            continue
        r = row(case)
        better = "n/a (NaN without)" if math.isinf(r["better"]) else f"{r['better']:.0%}"
        change = f"{r['without']:.4g} -> {r['with']:.4g}"
        print(f"| {r['run']} | {r['finding']} | {r['action']} | {change} | {better} |", flush=True)
        for event in r["events"]:
            print(f"    {event.message}", flush=True)


if __name__ == "__main__":
    main()
