"""``HealthMonitor(repair=True)`` on repairable problem runs (issue #36): each run twice, same seed, without
and with repair; one row per run: the problem, the finding, the action, its step, the final validation loss
without -> with repair.

The runs reuse the field gallery's builders (``tests/callbacks/health_field_gallery``) and add a validation
set from the same task (a different seed of the same teacher): an LR far too high (Adam at 0.5), a StepLR
that collapses the LR 1e6x at step 80, a wide MLP overfitting 32 noisy samples, and a weighted loss whose one
batch has all its weights 0 (0/0: a NaN loss, a NaN update, every weight NaN after it).

Run: ``PYTHONPATH=. python -m benchmarks.health_repair [--only NAME]``.
"""

from __future__ import annotations

import argparse
import logging
import math
import warnings
from typing import Any

from tests.callbacks.health_repair_runs import RUNS, RepairRun, run


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default=None)
    args = parser.parse_args()
    logging.getLogger("lightning").setLevel(logging.ERROR)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    logging.getLogger("lightning_recipes").setLevel(logging.ERROR)  # the events are printed below
    warnings.filterwarnings("ignore")
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
