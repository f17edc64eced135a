"""The package's internal trial fits are silent: no warning, no Trainer banner ("GPU available")."""

from __future__ import annotations

import logging
import warnings

import pytest

from lightning_recipes.cli.tune import main as tune_main
from lightning_recipes.testing import TinyClassifier, random_classification_loader
from lightning_recipes.tune import speed_tune
from tests.helpers.speed import FAST


def test_speed_tunes_trial_fits_print_no_warning_and_no_banner(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    loader = random_classification_loader()
    with caplog.at_level(logging.INFO), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        speed_tune(
            TinyClassifier(), train_dataloaders=loader, options=["fused_optimizer"], progress=False, **FAST
        )
    assert [str(w.message) for w in caught] == []
    banners = [r.getMessage() for r in caplog.records if r.name.startswith("lightning")]
    assert banners == [], banners
    assert "GPU available" not in capsys.readouterr().err


def test_the_tune_command_prints_its_result_and_nothing_of_its_trainers(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    model, data = "lightning_recipes.testing.DigitsCNN", "lightning_recipes.data.DigitsDataModule"
    argv = ["--model", model, "--model.width", "4", "--data", data, "--num_steps", "20", "--max_lr", "1.0"]
    with caplog.at_level(logging.INFO), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = tune_main(
            [*argv, "--max_epochs", "2", "--speed", "--speed_options", "pin_memory", "--progress=false"]
        )
    assert code == 0
    assert [str(w.message) for w in caught] == []  # also jsonargparse's `instantiate_classes` deprecation
    assert [r.getMessage() for r in caplog.records if r.name.startswith("lightning")] == []
    assert "GPU available" not in capsys.readouterr().err
