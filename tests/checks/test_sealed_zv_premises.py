"""Premises sealed gallery ZV (issue #34) showed the checks assumed: each test runs the ZV case it comes from
and fails without its change; what the check still catches is kept beside it."""

from __future__ import annotations

from functools import cache

import pytest
import torch
import torch.nn.functional as F

from galleries.preflight.dev.score import gallery_cases
from lightning_recipes.checks import preflight
from lightning_recipes.checks.loss._expected_loss import SHUT_BELOW, expected_initial_loss, record_loss_calls

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@cache
def _cases() -> dict:
    return {case.id: case for case in gallery_cases("sealed-zv", twins=True)}


def _result(case_id: str, check: str):
    case = _cases()[case_id]
    return preflight(case.model(), **case.data(), checks=[check], num_threads=1, progress=False)[check]


def test_logits_a_mask_shuts_expect_the_log_of_the_classes_left_open() -> None:
    """Tic-tac-toe moves over 9 squares with the occupied ones masked to -1e4: at init the loss is the mean
    ln of each board's open squares, not ln 9 (it warned on healthy boards). A target on a masked square (a
    move rotated the other way from its board) cannot be predicted at all: a ``fail``."""
    assert _result("tictactoe_rotated", "init_loss").status == "pass"
    turned = _result("tictactoe_move_turned_the_other_way", "init_loss")
    assert turned.status == "fail" and "masks out" in turned.message, turned.message


def test_the_expected_loss_under_a_mask_is_the_mean_log_of_the_open_classes() -> None:
    """The formula, by hand: rows with 9, 5 and 2 open classes expect (ln 9 + ln 5 + ln 2) / 3; a score
    ``SHUT_BELOW`` under its row's top is shut; a target on a shut class is counted."""
    logits = torch.zeros(3, 9)
    logits[1, 5:] = -SHUT_BELOW - 1
    logits[2, 2:] = float("-inf")
    target = torch.tensor([0, 1, 4])  # row 2's class 4 is shut
    masked, plain = (_call(scores, target) for scores in (logits, torch.zeros(3, 9)))
    expectation = expected_initial_loss(masked)
    assert expectation.value == pytest.approx(torch.tensor([9.0, 5.0, 2.0]).log().mean().item())
    assert expectation.extra["targets_on_masked_classes"] == 1
    assert expected_initial_loss(plain).value == pytest.approx(torch.tensor(9.0).log().item())
    assert "targets_on_masked_classes" not in expected_initial_loss(plain).extra


def _call(scores: torch.Tensor, target: torch.Tensor):
    with record_loss_calls() as calls:
        F.cross_entropy(scores, target)
    return calls[0]


def test_a_balancing_sampler_is_no_label_shift_between_the_splits() -> None:
    """Language ID drawn by a sampler that balances the languages: the training batches' labels differ from
    validation's by design. The split's labels are judged on batches drawn uniformly from the dataset, as
    validation's are (it warned of a label shift on the healthy run)."""
    result = _result("language_balanced_sampler_windows", "data")
    assert result.status == "pass", result.message


def test_a_sampler_that_draws_labels_less_evenly_than_the_dataset_warns_and_its_fix_is_quiet() -> None:
    """A WeightedRandomSampler given one weight per class where one per sample belongs draws the languages
    less evenly than the dataset holds them: the shift is the sampler's, and named as such. Its twin,
    weighting each sample by 1 / its class's count, balances them and is quiet."""
    bug = _result("language_sampler_given_class_weights", "data")
    assert bug.status == "warn" and "less evenly" in bug.message, bug.message
    assert _result("language_sampler_given_class_weights__fixed", "data").status == "pass"
