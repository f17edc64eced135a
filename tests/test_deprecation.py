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


LR = "lightning_recipes"
MOVED = {  # old module path -> (a name it exported, where that name lives now): the 0.2.0 diet (issue #33)
    f"{LR}.optim.layer_decay": ("layer_depths", f"{LR}.optim.param_groups"),
    f"{LR}.harness.errors": ("CannotRunOnCopy", f"{LR}.harness.isolation"),
    f"{LR}.harness.fit_data": ("resolve_fit_data", f"{LR}.harness.loaders"),
    f"{LR}.strategies.step_memory": ("measure_step_memory", f"{LR}.strategies.memory"),
    f"{LR}.tune.lr_range_test": ("LRRangeTest", f"{LR}.tune.lr_range_callback"),
    f"{LR}.tune.apply_speed_options": ("ApplySpeedOptions", f"{LR}.tune._speed_options"),
    f"{LR}.tune.verdict": ("curve_verdict", f"{LR}.tune.suggest"),
}


@pytest.mark.parametrize("old", sorted(MOVED))
def test_a_moved_module_path_still_imports_and_warns_naming_the_new_home(old: str) -> None:
    import importlib

    name, new = MOVED[old]
    with pytest.warns(LightningRecipesDeprecationWarning, match=f"import `{name}` from `{new}`"):
        found = getattr(importlib.import_module(old), name)
    assert found is getattr(importlib.import_module(new), name)
