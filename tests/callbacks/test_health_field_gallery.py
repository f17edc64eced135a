"""HealthMonitor on the field gallery: each problem named with its root cause, no healthy run flagged."""

from __future__ import annotations

import importlib.util

import pytest

from galleries.health.field import FieldCase, run_case
from galleries.health.field.field_runs import CASES as FIELD

if importlib.util.find_spec("transformers") is not None:
    from galleries.health.field.transformer_runs import CASES as TRANSFORMER
else:  # pragma: no cover - the dev group installs transformers
    TRANSFORMER = []

CASES = [*FIELD, *TRANSFORMER]

#: Problems the monitor does not name yet, each with why: it must stay silent on them (no wrong cause).
KNOWN_MISSES = {
    "bert_finetune_10x_lr_stuck_at_chance": (
        "BERT at 10x its good LR never leaves ln 2 in 150 steps. After the first ~20 steps its update ratio "
        "(3e-3..1.5e-2) is no larger than the good LR's, so the update ratio says nothing; what remains is a "
        "flat loss, and a plateau claim needs 150 steps of it (a healthy BERT sits at ln 2 for ~100 steps), "
        "which this run does not have. Silence, not a wrong name."
    ),
    "gpt2_adamw_10x_lr_stuck": (
        "Caught under 2 of 4 kernel/thread settings, never reliably: with the suite's AVX2 kernels and one "
        "thread its update ratio sits at 0.0072-0.0127 after step 20 (above 1e-2 at 2 of 10 checks) and the "
        "loss still falls beyond noise (3.96 at step 20 to 3.17 at 200), so neither a rise nor a sustained "
        "ratio holds; under AVX-512 a 0.13 rise at step 140 happened to be significant. Its weights grew 6x "
        "in the first 20 steps, which no rule reads without a healthy run to compare. Silence, not a wrong "
        "name."
    ),
}


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_field_gallery_names_the_root_cause_and_leaves_healthy_runs_alone(case: FieldCase) -> None:
    monitor, _ = run_case(case)
    assert monitor is not None
    summary = [(f.problem, f.step, f.evidence) for f in monitor.findings]
    found = {f.problem for f in monitor.findings}
    if case.expected is None:
        assert monitor.findings == [], summary
        return
    assert found <= {case.expected, *case.also_allowed}, summary
    if case.name in KNOWN_MISSES:
        assert case.expected not in found, f"{case.name} is caught now: take it off KNOWN_MISSES"
        return
    assert case.expected in found, summary
    first = min(f.step for f in monitor.findings if f.problem == case.expected)
    assert first >= case.onset_step, summary


def test_the_gallery_is_as_large_and_varied_as_the_issue_asks() -> None:
    problems = [c for c in CASES if c.expected is not None]
    healthy = [c for c in CASES if c.expected is None]
    assert len(problems) >= 12 and len(healthy) >= 8
    assert len({c.name for c in CASES}) == len(CASES)
    assert set(KNOWN_MISSES) <= {c.name for c in problems}
