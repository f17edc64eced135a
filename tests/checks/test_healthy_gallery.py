"""The healthy gallery of new shapes: every check of the preflight gives each model no ``fail``."""

from __future__ import annotations

import pytest

from lightning_recipes.checks import preflight

from .gallery.healthy import HEALTHY


@pytest.mark.parametrize("case", HEALTHY, ids=[c.id for c in HEALTHY])
def test_healthy_model_gets_no_fail_from_any_check(case):
    report = preflight(case.model(), **case.data())
    failures = {r.name: r.message for r in report if r.status == "fail"}
    assert not failures, failures
    assert all(r.message.startswith("skipped: ") for r in report if r.status == "skip")  # a stated reason
    # the checks that know these shapes now: a clean pass (before: BCE skipped init_loss, a prior-initialised
    # bias was "suspiciously low", LoRA's frozen base was a warning)
    for name in ("init_loss", "grad_flow", "overfit_batch"):
        assert report[name].status == "pass", report[name].message
