"""Premises sealed gallery ZX (issue #34) showed the checks assumed: each test runs the ZX case it comes from
and fails without its change; the bug the check still catches is kept beside it."""

from __future__ import annotations

from functools import cache

import pytest

from galleries.preflight.dev.score import gallery_cases
from lightning_recipes.checks import preflight

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@cache
def _cases() -> dict:
    return {case.id: case for case in gallery_cases("sealed-zx", twins=True)}


def _result(case_id: str, check: str):
    case = _cases()[case_id]
    return preflight(case.model(), **case.data(), checks=[check], num_threads=1, progress=False)[check]


def test_batchnorm_is_judged_by_where_batch_statistics_end_not_by_a_start_in_another_mode() -> None:
    """A colouriser with BatchNorm: validation at init (running statistics 0 and 1) scores 0.026, training
    (batch statistics) 0.156; by batch statistics validation ends where training ends (0.0143 vs 0.0145).
    A next state read from a shuffled log still fails: its validation does not follow the fit."""
    healthy = _result("colour_heavy_augmentation", "validation_path")
    assert healthy.status == "pass" and "BatchNorm lags" in healthy.message, healthy.message
    assert _result("fqi_next_state_from_shuffled_log", "validation_path").status == "fail"


def test_validation_from_a_shifted_domain_is_not_a_repeat_of_training() -> None:
    """DANN validated on stained target digits: every validation sample sat equally far from all its training
    neighbours, which read as a dimension of 473, and 300 of 300 were flagged. Measured on training's own
    neighbourhoods the dimension is ordinary and nothing repeats."""
    result = _result("dann_adversarial_domain_loss", "split_overlap")
    assert result.status == "pass", result.message
    assert result.details["repeats"]["flagged"] <= 3 and result.details["repeats"]["dimension"] < 100


@pytest.mark.parametrize("check", ["data", "split_overlap"])
def test_copies_drawn_from_a_small_space_are_chance(check: str) -> None:
    """Gridworld states (agent and goal cells: at most 7^4 rows) repeat within training and across the splits
    by chance: neither the duplicate share nor the exact copies are a finding there."""
    result = _result("bc_goal_on_agent_plane__fixed", check)
    assert result.status == "pass", result.message


def test_an_own_loss_that_no_input_lowers_warns_instead_of_failing() -> None:
    """The deep gamblers' loss has an input-free optimum (abstain everywhere), which a short fit reaches with
    real pairs, inputs removed and targets permuted alike: a warning, the loss not one the checks know."""
    result = _result("selective_deep_gamblers", "input_independence")
    assert result.status == "warn" and result.details["known_loss"] is False, result.message


def test_too_good_too_soon_needs_a_cross_entropy() -> None:
    """A Q-network's Huber loss on small rewards is 0.017 after 5 steps: below 0.05 ln 2 of a binary column
    (the done flag) read as the label, but ln C is no scale of a Huber loss."""
    result = _result("fqi_double_dqn_huber_polyak", "target_leakage")
    assert result.status == "pass", result.message
    assert "not one cross-entropy" in result.details["too_good"]["reason"]
