"""Proofs of HealthMonitor's sealed zoo 26: stereo, separation, bracket, tomography and light-curve runs,
blind pairs, repairable runs and healthy look-alikes, with plain torch and Lightning (no HealthMonitor).

Each run of ``galleries/health/zoo26/zoo.py`` trains once with :class:`PlainRecorder` alone and
its proof asserts, from that recording (and a healthy twin's where one makes the point), that its problem is
real and present from its ``onset_step``, or that a healthy run trains well.
"""

from __future__ import annotations

import pytest

from galleries.health import sealed_zoo
from galleries.health.zoo26 import zoo


def test_the_zoo_is_as_big_and_as_varied_as_promised() -> None:
    # three names of its vocabulary HealthMonitor gives only as a finding's cause
    causes = ("frozen_parameters", "inputs", "initialisation")
    sealed_zoo.check_zoo(zoo, problems=13, healthy=10, causes=9, repairable=5, as_causes=causes)


@pytest.mark.parametrize("case", zoo.CASES, ids=lambda case: case.name)
def test_proof(case) -> None:
    sealed_zoo.prove(case)
