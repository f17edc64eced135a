"""Proofs of HealthMonitor's sealed zoo 23: board, chord, dynamics, fusion and maze runs, blind pairs,
repairable runs and healthy look-alikes (issue #35), with plain torch and Lightning (no HealthMonitor).

Each run of ``galleries/health/zoo23/zoo.py`` trains once with :class:`PlainRecorder` alone and
its proof asserts, from that recording (and a healthy twin's where one makes the point), that its problem is
real and present from its ``onset_step``, or that a healthy run trains well.
"""

from __future__ import annotations

import pytest

from galleries.health import sealed_zoo
from galleries.health.zoo23 import zoo


def test_the_zoo_is_as_big_and_as_varied_as_promised() -> None:
    # three names of its vocabulary HealthMonitor gives only as a finding's cause
    causes = ("frozen_parameters", "inputs", "nonfinite_weights")
    sealed_zoo.check_zoo(zoo, problems=14, healthy=11, causes=12, repairable=4, as_causes=causes)


@pytest.mark.parametrize("case", zoo.CASES, ids=lambda case: case.name)
def test_proof(case) -> None:
    sealed_zoo.prove(case)
