"""HealthMonitor's gallery: every broken run named correctly, no healthy run with a finding."""

from __future__ import annotations

import pytest

from tests.helpers.health_gallery import CASES, Case, run_case


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_gallery_names_each_problem_and_healthy_runs_get_none(case: Case) -> None:
    monitor = run_case(case)
    found = [f.problem for f in monitor.findings]
    summary = [(f.problem, f.step, f.evidence) for f in monitor.findings]
    for problem in case.expected:
        assert problem in found, summary
    assert set(found) <= set(case.expected) | set(case.allowed), summary
    for finding in monitor.findings:
        if finding.problem in case.expected:
            assert finding.step >= case.onset_step, summary
        if finding.problem == "overfitting":  # began after some healthy epochs, and the finding says when
            assert finding.evidence["began_epoch"] >= 2, summary
