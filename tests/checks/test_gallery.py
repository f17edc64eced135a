"""The first gallery (``galleries/preflight/families``): ids, counts, and no healthy model gets a ``fail``
from any check of the full preflight."""

from __future__ import annotations

import importlib
import pkgutil

import pytest
import torch

from galleries.preflight import families as gallery
from galleries.preflight.families import Case
from lightning_recipes.checks import CHECKS, preflight


def _cases(kind: str) -> list[tuple[str, Case]]:
    """Every case of every family module; a case listed by two families (one healthy model that matters to
    both, same id) counts once."""
    found: dict[str, tuple[str, Case]] = {}
    for name in sorted(m.name for m in pkgutil.iter_modules(gallery.__path__) if not m.name.startswith("_")):
        module = importlib.import_module(f"{gallery.__name__}.{name}")
        for case in getattr(module, kind, []):
            found.setdefault(case.id, (name, case))
    return list(found.values())


BUGS, HEALTHY = _cases("BUGS"), _cases("HEALTHY")


def test_every_case_is_well_formed():
    ids = [case.id for _, case in BUGS + HEALTHY]
    assert len(ids) == len(set(ids)), sorted({i for i in ids if ids.count(i) > 1})  # a bug is never healthy
    for _, case in BUGS:
        assert case.check in CHECKS, (case.id, case.check)
        assert case.status in ("fail", "warn"), case.id
    for _, case in HEALTHY:
        assert case.check is None, case.id


def test_the_new_gallery_is_as_large_as_the_issue_asks():
    """#14: at least 15 new planted bugs in several shapes, at least 8 healthy models of new shapes."""
    new_bugs = [case for module, case in BUGS if module != "legacy"]
    new_healthy = [case for module, case in HEALTHY if module != "legacy"]
    assert len(new_bugs) >= 15, len(new_bugs)
    assert len(new_healthy) >= 8, len(new_healthy)
    assert len({case.shape for case in new_bugs}) >= 4, sorted({case.shape for case in new_bugs})


# legacy: test_healthy_models.py; these shapes cases: test_hf_models.py, the same run with stricter assertions
# (every applicable check passes), so the whole preflight runs once on each
IN_TEST_HF_MODELS = {
    "hf_gpt2_causal_lm",
    "hf_gpt2_labels_from_input_ids",
    "hf_bert_classifier",
    "wrapped_cnn_returns_dict",
}
NEW_HEALTHY = [
    (module, case) for module, case in HEALTHY if module != "legacy" and case.id not in IN_TEST_HF_MODELS
]


@pytest.mark.parametrize(("module", "case"), NEW_HEALTHY, ids=[case.id for _, case in NEW_HEALTHY])
def test_healthy_model_gets_no_failure_from_any_check(module: str, case: Case):
    torch.manual_seed(0)  # the models initialise from the global RNG: the same init whatever ran before
    report = preflight(case.model(), **case.data(), num_threads=1, progress=False)
    failures = {r.name: r.message for r in report if r.status == "fail"}
    assert not failures, failures
    if module == "healthy":  # the gallery of new shapes (run once: this was test_healthy_gallery.py)
        assert all(r.message.startswith("skipped: ") for r in report if r.status == "skip")  # a stated reason
        # the checks that know these shapes now: a clean pass (before: BCE skipped init_loss, a
        # prior-initialised bias was "suspiciously low", LoRA's frozen base was a warning)
        for name in ("init_loss", "grad_flow", "overfit_batch"):
            assert report[name].status == "pass", report[name].message
