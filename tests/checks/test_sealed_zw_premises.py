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
