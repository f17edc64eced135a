"""Two gaps the blind hold-out gallery (``holdout.py``) found, and the tests that keep them closed."""

from __future__ import annotations

from galleries.preflight.families import holdout
from lightning_recipes.checks import preflight


def _case(case_id: str):
    (case,) = [c for c in holdout.BUGS if c.id == case_id]
    return case


def test_a_feature_grouped_by_the_label_in_each_split_is_target_leakage():
    """A per-split group mean by label determines the label wherever it is computed: leakage."""
    case = _case("ho_group_mean_by_label")
    result = preflight(case.model(), **case.data(), checks=["target_leakage"], progress=False)[0]
    assert result.status == "fail", result.message
    assert "encodes the label" in result.message
    assert result.details["single_feature"]["encodes_label_within_each_split"]


def test_exact_copies_across_the_splits_warn_even_when_training_repeats_itself_as_often():
    case = _case("ho_oversampled_before_split")
    result = preflight(case.model(), **case.data(), checks=["split_overlap"], progress=False)[0]
    assert result.status == "warn", result.message
    assert result.details["val_exact"] >= 3 and "before oversampling" in result.action
