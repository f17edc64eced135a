"""Proofs of HealthMonitor's sealed zoo 5: new tasks, blind pairs, repairable runs and healthy look-alikes
(issues #35/#36), with plain torch and Lightning (no HealthMonitor).

Each run of ``tests/callbacks/health_sealed_zoo5/zoo.py`` trains once with :class:`PlainRecorder` alone and
its proof asserts, from that recording (and a healthy twin's where one makes the point), that its problem is
real and present from its ``onset_step``, or that a healthy run trains well.
"""

from __future__ import annotations

import pytest

from lightning_recipes.callbacks.health_monitor import HealthMonitor
from tests.callbacks.health_field_gallery._case import FieldCase, run_case
from tests.callbacks.health_sealed_zoo5.zoo import CASES, HEALTHY_CASES, PROBLEM_CASES, REPAIRABLE

# the zoo's vocabulary (issues #35/#36): the monitor's problems and two causes it does not name (yet)
VOCABULARY = (*HealthMonitor.PROBLEMS, "frozen_parameters", "initialisation")


def test_the_zoo_is_as_big_and_as_varied_as_promised() -> None:
    assert len(PROBLEM_CASES) >= 14 and len(HEALTHY_CASES) >= 12
    assert len({case.expected for case in PROBLEM_CASES}) >= 8
    assert len({case.name for case in CASES}) == len(CASES)
    assert len(REPAIRABLE) >= 5 and set(REPAIRABLE) <= {case.name for case in PROBLEM_CASES}
    for case in PROBLEM_CASES:
        assert case.expected in VOCABULARY, case.name
        assert case.expected not in case.also_allowed, case.name
        assert set(case.also_allowed) <= set(VOCABULARY), case.name
        assert case.onset_step >= 0 and case.description, case.name
    assert all(case.expected is None and case.description for case in HEALTHY_CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_proof(case: FieldCase) -> None:
    _, recorder = run_case(case, monitor=False)
    case.proof(recorder)
