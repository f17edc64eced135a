"""``LightningRecipesDeprecationWarning``: a ``FutureWarning`` of our own that filters can single out."""

from __future__ import annotations

import warnings

import pytest

from lightning_recipes import LightningRecipesDeprecationWarning
from lightning_recipes.optim.schedules import warmup_fields


def test_the_category_is_ours_and_a_future_warning_that_filters_can_silence_or_escalate() -> None:
    assert issubclass(LightningRecipesDeprecationWarning, FutureWarning)
    assert not issubclass(LightningRecipesDeprecationWarning, DeprecationWarning)  # hidden by default
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # anything else would raise
        warnings.simplefilter("ignore", LightningRecipesDeprecationWarning)  # (the later filter wins)
        assert warmup_fields(0.5, None) == (None, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LightningRecipesDeprecationWarning)
        with pytest.raises(LightningRecipesDeprecationWarning, match=r"use `warmup_ratio=0\.5`"):
            warmup_fields(0.5, None)


REMOVED = (  # deprecated in 0.2.0 (their names moved, issue #33), removed in 0.3.0: docs/guides/versioning.md
    "optim.layer_decay",
    "harness.errors",
    "harness.fit_data",
    "strategies.step_memory",
    "tune.lr_range_test",
    "tune.apply_speed_options",
    "tune.verdict",
)


@pytest.mark.parametrize("old", REMOVED)
def test_a_module_path_deprecated_in_0_2_is_gone_in_0_3(old: str) -> None:
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(f"lightning_recipes.{old}")
