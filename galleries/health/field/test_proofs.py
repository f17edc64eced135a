"""The field gallery's runs are what they claim: each problem is real and each healthy run trains well, proven
from a plain recording of the run (``PlainRecorder``, no library code) trained without the monitor."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

from galleries.health.field._case import run_case
from galleries.health.field.field_runs import CASES


@pytest.fixture(autouse=True)
def one_thread() -> Iterator[None]:
    """Each run on one intra-op thread, as timed (and as under ``-n 2`` on 2 cores): on a loaded machine two
    threads make a tiny step ~50x slower, which would hide the data-stall run's wait."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_gallery_has_enough_runs_with_unique_names() -> None:
    problems = [case for case in CASES if case.expected is not None]
    assert len(problems) >= 10 and len(CASES) - len(problems) >= 6
    assert len({case.name for case in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_run_is_what_it_claims(case) -> None:  # type: ignore[no-untyped-def]
    _, recorder = run_case(case, monitor=False)
    case.proof(recorder)
