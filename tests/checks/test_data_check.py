"""``DataCheck``: its PASS message states only what it checked (issue 12, item 11); blank, repeated and
non-finite samples and labels that disagree between the splits (issue 14)."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
import torch
from torch import Tensor

from lightning_recipes.checks import CheckContext, DataCheck, preflight
from lightning_recipes.checks.data_check import _distribution_shift
from lightning_recipes.testing import TinyTransformerLM, random_token_loader

from . import _models as M
from .gallery import data as gallery
from .gallery._data_models import gaussian, loaders, regression


class UninspectableLoader:
    """An iterable of batches that is not a ``DataLoader``: nothing tells whether it shuffles."""

    def __init__(self, batches: list) -> None:
        self.batches = batches

    def __iter__(self) -> Iterator:
        return iter(self.batches)


def _unlabelled_batches(count: int = 4) -> list[Tensor]:
    generator = torch.Generator().manual_seed(0)
    return [torch.randn(16, M.IN, generator=generator) for _ in range(count)]


def test_pass_without_labels_or_inspectable_loader_claims_neither():
    context = CheckContext(M.MLP(), UninspectableLoader(_unlabelled_batches()))
    result = DataCheck(num_batches=4).run(context)
    assert result.status == "pass"
    assert result.message == (
        "4 batch(es) look sane: finite, inputs vary and are on a sensible scale. Not checked: labels, class "
        "mixing and shuffling (no integer targets in the batches)."
    )


def test_pass_with_float_targets_does_not_claim_labels_or_shuffling():
    result = DataCheck(num_batches=2).run(CheckContext(M.Regressor(), M.regression_loader()))
    assert result.status == "pass"
    assert "labels in range" not in result.message and "loader shuffles" not in result.message
    assert "Not checked: labels, class mixing and shuffling" in result.message


def test_pass_with_labels_from_an_uninspectable_loader_does_not_claim_shuffling():
    generator = torch.Generator().manual_seed(0)
    batches = []
    for _ in range(4):
        x = torch.randn(32, M.IN, generator=generator)
        batches.append((x, torch.randint(0, M.C, (32,), generator=generator)))
    result = DataCheck(num_batches=4).run(CheckContext(M.MLP(), UninspectableLoader(batches)))
    assert result.status == "pass"
    assert result.message == (
        "4 batch(es) look sane: finite, labels in range, inputs vary and are on a sensible scale, classes "
        "mixed. Not checked: shuffling (the loader has no sampler to inspect)."
    )


def test_pass_with_everything_checked_says_so():
    result = DataCheck(num_batches=4).run(CheckContext(M.MLP(), M.loader()))
    assert result.status == "pass"
    assert result.message == (
        "4 batch(es) look sane: finite, labels in range, inputs vary and are on a sensible scale, classes "
        "mixed, loader shuffles."
    )


# ---------------------------------------------------------------- issue 14: stronger data check


@pytest.mark.parametrize("case", gallery.BUGS, ids=lambda c: c.id)
def test_gallery_bug_is_flagged(case):
    result = preflight(case.model(), **case.data(), checks=[DataCheck()])["data"]
    assert result.status == case.status, result.message
    for word in case.words:
        assert word in result.message, (word, result.message)


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda c: c.id)
def test_gallery_healthy_data_passes(case):
    result = preflight(case.model(), **case.data(), checks=[DataCheck()])["data"]
    assert result.status == "pass", result.message


def _run(x: Tensor, y: Tensor, x_val: Tensor | None = None, y_val: Tensor | None = None, model=None):
    data = loaders(x, y, x_val, y_val)
    context = CheckContext(model or M.MLP(), data["train_dataloaders"], data.get("val_dataloaders"))
    return DataCheck(num_batches=8).run(context)


def test_inf_inputs_are_reported_as_inf_not_nan():
    x, y = gaussian(256, 0)
    x[5, 2] = float("inf")
    x[9, 0] = float("-inf")
    result = _run(x, y)
    assert result.status == "fail"
    assert "2 Inf value(s) in the inputs" in result.message and "NaN value" not in result.message
    assert result.details["nonfinite_by_tensor"] == {"inputs": {"nan": 0, "inf": 2}}
    assert result.details["nonfinite_values"] == 2


def test_nan_regression_targets_fail_and_are_named():
    x, y = regression(256, 0)
    y[[3, 70]] = float("nan")
    y[100] = float("inf")
    result = _run(x, y, model=M.Regressor())
    assert result.status == "fail"
    assert "1 NaN" not in result.message
    assert "2 NaN and 1 Inf value(s) in the targets" in result.message
    assert "regression targets" in result.message


@pytest.mark.parametrize(("blank", "status"), [(1, "pass"), (6, "warn"), (16, "fail")])
def test_blank_sample_thresholds(blank, status):
    """256 samples read: 1 blank (0.4%) passes, 6 (2.3%) warn (>= 1%), 16 (6.3%) fail (>= 5%)."""
    x, y = gaussian(256, 0)
    x[:blank] = 0.0
    result = _run(x, y)
    assert result.status == status, result.message
    assert result.details["blank_samples"] == blank
    assert result.details["blank_fraction"] == blank / 256


@pytest.mark.parametrize(("copies", "status"), [(4, "pass"), (20, "warn"), (100, "fail")])
def test_identical_sample_thresholds(copies, status):
    """``copies`` samples overwritten with earlier ones: 1.6% passes, 7.8% warns (>= 5%), 39% fails."""
    x, y = gaussian(256, 0)
    x[256 - copies :] = x[:copies]
    result = _run(x, y)
    assert result.status == status, result.message
    assert result.details["duplicate_samples"] == copies


def test_repeated_token_sequences_are_not_flagged():
    """random_token_loader draws 128 sequences from 64 starts: repeats are the data, not a bug."""
    context = CheckContext(TinyTransformerLM(), random_token_loader(), random_token_loader(seed=1))
    result = DataCheck().run(context)
    assert result.status == "pass", result.message


def test_disjoint_and_unseen_label_sets():
    x, y = gaussian(512, 0)
    x_val, y_val = gaussian(256, 1)
    result = _run(x, y, x_val, y_val + 4, model=M.MLP(classes=8))
    assert result.status == "fail" and "disjoint" in result.message
    y_val_shift = torch.where(y_val == 3, torch.full_like(y_val, 4), y_val)  # class 4 never in training
    result = _run(x, y, x_val, y_val_shift, model=M.MLP(classes=5))
    assert result.details["val_unseen_label_fraction"] == (y_val == 3).float().mean().item()
    assert result.status == "warn" and "absent from the training batches" in result.message


def test_remapped_labels_fail_and_proper_labels_pass_on_the_same_inputs():
    x, y = gaussian(512, 0)
    x_val, y_val = gaussian(256, 1)
    swapped = y_val.clone()
    swapped[y_val == 0], swapped[y_val == 1] = 1, 0  # classes 0 and 1 swapped in validation only
    result = _run(x, y, x_val, swapped)
    assert result.status == "fail", result.message
    assert [r[:2] for r in result.details["remapped_classes"][0]] == [(0, 1), (1, 0)]
    assert _run(x, y, x_val, y_val).status == "pass"


def test_distribution_shift_matches_the_chi_square_formula():
    train, val = {0: 50, 1: 30, 2: 20}, {0: 10, 1: 10, 2: 40}
    n_train, n_val = 100, 60
    chi2 = 0.0
    for k in (0, 1, 2):
        for observed, n in ((train[k], n_train), (val[k], n_val)):
            expected = (train[k] + val[k]) * n / (n_train + n_val)
            chi2 += (observed - expected) ** 2 / expected
    tv = 0.5 * (abs(0.5 - 10 / 60) + abs(0.3 - 10 / 60) + abs(0.2 - 40 / 60))
    shift = _distribution_shift(train, val)
    assert shift["chi2"] == pytest.approx(chi2) and shift["tv"] == pytest.approx(tv) and shift["df"] == 2
    assert shift["significant"] == (tv > 0.2 and chi2 > 2 + 5 * math.sqrt(4))


@pytest.mark.parametrize("value", [(0.1, 0.05), (0.0, 0.5), (0.1,), "0.1", (0.1, 1.5)])
def test_bad_fraction_pairs_raise_at_construction(value):
    with pytest.raises(ValueError, match="`blank_fractions` must be a pair"):
        DataCheck(blank_fractions=value)
