"""Our deprecation category (issue #26): ``LightningRecipesDeprecationWarning`` is a ``FutureWarning`` of our
own, so Python shows it by default (tests/test_shown_warnings.py: in plain code and from LightningCLI YAML)
and filters can silence or escalate it alone."""

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
