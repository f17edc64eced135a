"""The field gallery's runs are what they claim: each problem is real and each healthy run trains well, proven
from a plain recording of the run (``PlainRecorder``, no library code) trained without the monitor."""

from __future__ import annotations

import pytest

from tests.callbacks.health_field_gallery._case import run_case
from tests.callbacks.health_field_gallery.field_runs import CASES


def test_the_gallery_has_enough_runs_with_unique_names() -> None:
    problems = [case for case in CASES if case.expected is not None]
    assert len(problems) >= 10 and len(CASES) - len(problems) >= 6
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_run_is_what_it_claims(case) -> None:  # type: ignore[no-untyped-def]
    _, recorder = run_case(case, monitor=False)
    case.proof(recorder)
