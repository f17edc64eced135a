"""``PreflightOptions``: the one record of a preflight's options, validated once (the report it gives is
compared with the one saved before it in ``test_compat.py``)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from lightning_recipes.checks import Preflight
from lightning_recipes.checks._options import PreflightOptions
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader


def test_the_record_is_frozen_and_validated_once_at_construction() -> None:
    options = PreflightOptions(input_key="x", seed=3, num_threads=1, time_budget=None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.seed = 4  # type: ignore[misc]
    assert dataclasses.replace(options, seed=5).seed == 5
    for bad, match in [
        ({"num_classes": 1}, "`num_classes` must be an integer >= 2, got 1"),
        ({"seed": 0.5}, "`seed` must be an integer"),
        ({"num_threads": 0}, "`num_threads` must be an integer >= 1"),
        ({"input_key": 1.5}, "`input_key` must be an int index"),
        ({"time_budget": 0}, "`time_budget`"),
        ({"total_time_budget": "default"}, "`total_time_budget` must be a positive number"),
    ]:
        with pytest.raises(ValueError, match=match):
            PreflightOptions(**bad)
    with pytest.raises(TypeError, match="`print_report`"):
        PreflightOptions(print_report="yes")  # type: ignore[arg-type]


def test_preflight_and_the_callback_build_the_same_record_from_their_keyword_arguments() -> None:
    kwargs: dict[str, Any] = {"input_key": 0, "target_key": 1, "num_classes": 4, "seed": 2, "num_threads": 1}
    callback = Preflight(checks=["init_loss"], print_report=False, progress=False, **kwargs)
    assert callback.options == PreflightOptions(print_report=False, progress=False, **kwargs)


def test_the_callback_runs_with_its_record_in_a_real_trainer() -> None:
    callback = Preflight(checks=["init_loss"], print_report=False, progress=False, seed=1, num_threads=1)
    trainer = fast_trainer(max_steps=1, callbacks=[callback])
    trainer.fit(TinyClassifier(), random_classification_loader())
    assert callback.report is not None and callback.report["init_loss"].status == "pass"
