"""The field gallery's ``transformers`` runs are real: each case, trained with the plain recorder alone (no
library callback), shows its problem (or, healthy, trains well) by the numbers its proof asserts."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="the transformer runs build models from `transformers` configs")

from galleries.health.field import run_case
from galleries.health.field.transformer_runs import CASES


def test_the_transformer_gallery_has_enough_problems_and_healthy_runs() -> None:
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))
    assert sum(case.expected is not None for case in CASES) >= 4
    assert sum(case.expected is None for case in CASES) >= 3


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_run_is_what_it_claims(case) -> None:  # type: ignore[no-untyped-def]
    _, recorder = run_case(case, monitor=False)
    assert case.max_steps < 0 or len(recorder.losses) == case.max_steps
    steps = len(recorder.losses)
    assert steps // case.check_every >= 6  # the monitor gets at least six checks
    assert case.onset_step < steps
    case.proof(recorder)
