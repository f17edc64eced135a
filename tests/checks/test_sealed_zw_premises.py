"""Premises sealed gallery ZW (issue #34) showed the checks assumed: each test runs the ZW case it comes from
and fails without its change; what the check still catches is kept beside it."""

from __future__ import annotations

from functools import cache

import pytest
import torch

from galleries.preflight.dev.score import gallery_cases
from lightning_recipes.checks import preflight
from lightning_recipes.checks.data.data_check import scan_samples

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@cache
def _cases() -> dict:
    return {case.id: case for case in gallery_cases("sealed-zw", twins=True)}


def _result(case_id: str, check: str):
    case = _cases()[case_id]
    return preflight(case.model(), **case.data(), checks=[check], num_threads=1, progress=False)[check]


def test_a_view_a_presence_mask_declares_missing_is_not_a_blank_sample() -> None:
    """Two sensor views of an object, one zero-filled where the batch's mask says it is missing: 41% of the
    rows of view B are zeros, which failed as blank samples (and, once excused, counted as copies)."""
    result = _result("fusion_modality_dropout", "data")
    assert result.status == "pass", result.message
    blank = torch.zeros(3, 4)
    rows = torch.cat([blank, torch.randn(5, 4)])
    mask = torch.cat([torch.zeros(3, 1), torch.ones(5, 1)])
    assert scan_samples([rows], [mask]) == (5, 0, 0, 5)  # declared missing: neither blank nor copies
    index = torch.arange(8.0)[:, None]  # a column that marks every row apart declares nothing
    assert scan_samples([rows], [index])[1] == 3


def test_raw_units_the_model_scales_before_its_first_layer_are_not_unnormalised() -> None:
    """Option quotes in raw units (spot and strike ~100) that the model turns into log-moneyness and
    standardised features before its first Linear: no warning. Raw inputs into a Linear still warn
    (``test_data_check``'s ``unnormalised_inputs``)."""
    result = _result("option_parity_puts", "data")
    assert result.status == "pass", result.message
    assert abs(result.details["first_layer_input"]["mean"]) < 5 < result.details["input_mean"]


def test_a_constant_multiple_of_one_known_loss_has_that_multiple_of_its_floor() -> None:
    """Four captcha heads under ``4 * cross_entropy``: the loss is no one call, so its floor was unknown and
    ``overfit_batch`` said ``inconclusive`` even when the four heads were one shared layer. The same ratio to
    the one call on two batches makes it a constant multiple, with 4x the call's floor (0): the shared heads
    fall only half way, the separate heads fit."""
    shared = _result("captcha_heads_share_one_layer", "overfit_batch")
    assert shared.status == "warn" and shared.details["floor_from"].startswith("4 x "), shared.message
    assert _result("captcha_heads_share_one_layer__fixed", "overfit_batch").status == "pass"
    smoothed = _result("captcha_label_smoothing_nudged", "overfit_batch")  # 4 x label smoothing's entropy
    assert smoothed.status == "pass" and smoothed.details["floor"] == pytest.approx(4 * 0.5139620, rel=1e-5)
