"""Score HealthMonitor on the sealed zoo, once, at the end of the work it judges (issue #35).

Run from the repository root::

    PYTHONPATH=$PWD OMP_NUM_THREADS=1 .venv/bin/python -m galleries.health.zoo1.score [--names a]

A problem run is named when the monitor's findings include its expected problem at or after its onset and
nothing outside ``{expected, *also_allowed}`` (anything else is a misdiagnosis); a healthy run is clean when
it gets no finding at all. A case whose expected value is a cause rather than one of
``HealthMonitor.PROBLEMS`` (e.g. ``frozen_parameters``) is named by a finding with that cause. The field
gallery's test (``tests/callbacks/test_health_field_gallery.py``) uses the same rule.
"""

from __future__ import annotations

import argparse

import torch

from galleries.health.field import run_case
from galleries.health.field._case import FieldCase
from galleries.health.zoo1.zoo import CASES
from lightning_recipes.callbacks import HealthMonitor


def main(argv: list[str] | None = None, cases: list[FieldCase] = CASES) -> None:
    """Score ``cases`` (default: this zoo's) and print one row per run, then the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--names", default="", help="comma-separated case names (default: every case)")
    args = parser.parse_args(argv)
    wanted = {name for name in args.names.split(",") if name}
    torch.set_num_threads(1)
    named = wrong = missed = alarms = healthy = problems = 0
    for case in cases:
        if wanted and case.name not in wanted:
            continue
        monitor, _ = run_case(case)
        assert monitor is not None
        by_cause = case.expected is not None and case.expected not in HealthMonitor.PROBLEMS
        findings = [(f.cause if by_cause and f.cause else f.problem, f.step) for f in monitor.findings]
        found = {problem for problem, _ in findings}
        if case.expected is None:
            healthy += 1
            alarms += bool(findings)
            verdict = "ALARM" if findings else "clean"
        else:
            problems += 1
            onset_ok = any(p == case.expected and step >= case.onset_step for p, step in findings)
            if found - {case.expected, *case.also_allowed}:
                wrong += 1
                verdict = "MISDIAGNOSED"
            elif onset_ok:
                named += 1
                verdict = "named"
            else:
                missed += 1
                verdict = "MISSED"
        print(f"{case.name:52s} {case.expected!s:24s} {verdict:13s} {findings[:4]}", flush=True)
    print(f"problems named: {named}/{problems} (misdiagnosed {wrong}, missed {missed})")
    print(f"healthy runs with a finding: {alarms}/{healthy}")


if __name__ == "__main__":
    main()
