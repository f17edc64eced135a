"""HealthMonitor on the field gallery (issue #25): runs it was not built from. Every problem run is named with
its root cause at or after its onset and nothing else; every healthy run gets no finding at all.

The runs were written blind (``tests/callbacks/health_field_gallery``) and each is proven real without the
library by its twin test (``test_health_field_gallery_proofs.py``, ``..._transformer_proofs.py``)."""

from __future__ import annotations

import importlib.util

import pytest

from tests.callbacks.health_field_gallery import FieldCase, run_case
from tests.callbacks.health_field_gallery.field_runs import CASES as FIELD

if importlib.util.find_spec("transformers") is not None:
    from tests.callbacks.health_field_gallery.transformer_runs import CASES as TRANSFORMER
else:  # pragma: no cover - the dev extra installs transformers
    TRANSFORMER = []

CASES = [*FIELD, *TRANSFORMER]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_field_gallery_names_the_root_cause_and_leaves_healthy_runs_alone(case: FieldCase) -> None:
    monitor, _ = run_case(case)
    assert monitor is not None
    summary = [(f.problem, f.step, f.evidence) for f in monitor.findings]
    found = {f.problem for f in monitor.findings}
    if case.expected is None:
        assert monitor.findings == [], summary
        return
    assert case.expected in found, summary
    assert found <= {case.expected, *case.also_allowed}, summary
    first = min(f.step for f in monitor.findings if f.problem == case.expected)
    assert first >= case.onset_step, summary


def test_the_gallery_is_as_large_and_varied_as_the_issue_asks() -> None:
    problems = [c for c in CASES if c.expected is not None]
    healthy = [c for c in CASES if c.expected is None]
    assert len(problems) >= 12 and len(healthy) >= 8
    assert len({c.name for c in CASES}) == len(CASES)
