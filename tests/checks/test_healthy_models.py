"""Healthy models of several kinds must pass every check with no failure (skips must say why)."""

from __future__ import annotations

import math

import pytest

from lightning_recipes.checks import CHECKS, preflight
from lightning_recipes.data import CharLMDataModule, DigitsDataModule
from lightning_recipes.testing import DigitsCNN, TinyClassifier, TinyTransformerLM, random_token_loader

from ._models import MLP, Regressor, loader, regression_loader

ALL = list(CHECKS)
# Checks that do not apply to every model skip, and must say why: (check, words of the reason).
NOT_APPLICABLE = {
    "split_overlap": ("no validation loader",),
    "causality": ("not next-token prediction", "not a sequence"),
    "loader": ("not one integer label per sample",),  # served label shares: classification only
    "schedule": ("no scheduler configured",),
    "padding": ("does not say what is padding",),
    "validation_path": ("defines no `validation_step`",),
    "training_pairs": ("validation batches",),
}


def _assert_all_pass(report, allowed_skips=()):
    statuses = {r.name: r.status for r in report}
    assert list(statuses) == ALL
    for result in report:
        if result.name in allowed_skips:
            assert result.status == "skip", result.message
            continue
        reasons = NOT_APPLICABLE.get(result.name, ())
        if result.status == "skip" and any(reason in result.message for reason in reasons):
            continue
        assert result.status == "pass", f"{result.name}: {result.message}"
    assert report.ok


def test_mlp_default_init_passes():
    report = preflight(MLP(), train_dataloaders=loader())
    _assert_all_pass(report)
    assert 0.75 * math.log(4) < report["init_loss"].details["measured"] < 1.25 * math.log(4)


def test_zero_init_mlp_passes_with_exact_ln_c():
    """TinyClassifier's head starts at zero: the init loss is ln C to float precision."""
    report = preflight(TinyClassifier(num_classes=4, lr=0.5), train_dataloaders=loader())
    _assert_all_pass(report)
    assert report["init_loss"].details["measured"] == pytest.approx(math.log(4), rel=1e-6)
    assert report["init_loss"].details["ratio"] == pytest.approx(1.0, rel=1e-6)
    # the zero head hides the inputs at init: batch independence looks again after optimizer steps
    assert report["batch_independence"].details["training_steps_first"] >= 1


def test_digits_cnn_with_batchnorm_and_dropout_passes():
    """The demo's CNN: BatchNorm must not count as batch mixing, dropout must not break any check."""
    report = preflight(DigitsCNN(), datamodule=DigitsDataModule())  # exactly the demo's model and data
    _assert_all_pass(report)
    assert report["batch_independence"].details["method"] == "perturbation"
    assert report["init_loss"].details["num_classes"] == 10


def test_causal_transformer_lm_passes_on_recurrence_tokens():
    model = TinyTransformerLM(vocab_size=32, d_model=32, n_heads=2, n_layers=1)
    report = preflight(model, train_dataloaders=random_token_loader(vocab_size=32, seq_len=16, shuffle=True))
    _assert_all_pass(report)
    assert report["init_loss"].details["measured"] == pytest.approx(math.log(32), rel=1e-5)
    assert report["batch_independence"].details["method"] == "perturbation"  # integer token inputs


def test_causal_transformer_lm_passes_on_char_lm_datamodule():
    model = TinyTransformerLM(vocab_size=CharLMDataModule(max_chars=1).vocab_size, d_model=32, n_layers=1)
    datamodule = CharLMDataModule(seq_len=32, batch_size=16, max_chars=40_000)
    report = preflight(model, datamodule=datamodule)
    _assert_all_pass(report)
    # letters must be learned beyond their frequencies: the real pairs are fitted faster than permuted ones
    assert report["input_independence"].details["training_gain_over_targets_permuted"]["low"] > 0


def test_regression_with_mse_passes_and_init_loss_skips_with_reason():
    report = preflight(Regressor(), train_dataloaders=regression_loader())
    _assert_all_pass(report, allowed_skips=("init_loss",))
    message = report["init_loss"].message
    assert "mse_loss" in message and "no known value at init" in message


def test_label_smoothing_classifier_passes():
    """Label smoothing keeps the init loss at ln C and puts a floor under the loss (0.22 x ln 10 here)."""
    model = MLP(classes=10, label_smoothing=0.1, in_features=64)
    report = preflight(model, datamodule=DigitsDataModule(batch_size=32, flatten=True))
    _assert_all_pass(report)
