"""`SweepArgs`: the LR range test's arguments as one frozen record read by every entry point."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from lightning_recipes.cli.tune import build_parser
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.sweep_args import SweepArgs
from lightning_recipes.tune import find_lr


def test_find_lr_and_the_tune_cli_default_to_the_record():
    defaults = SweepArgs().to_dict()
    signature = inspect.signature(find_lr).parameters
    assert {name: signature[name].default for name in defaults} == defaults
    parsed = build_parser().parse_args(["--model=lightning_recipes.testing.TinyClassifier"])
    assert {name: parsed[name] for name in ("min_lr", "max_lr", "num_steps", "rule", "seed")} == {
        name: defaults[name] for name in ("min_lr", "max_lr", "num_steps", "rule", "seed")
    }


def test_the_record_is_frozen_and_its_copies_are_checked():
    args = SweepArgs(num_steps=30)
    with pytest.raises(dataclasses.FrozenInstanceError):
        args.num_steps = 5  # type: ignore[misc]
    with pytest.raises(ValueError, match="`num_steps`"):
        dataclasses.replace(args, num_steps=5)


def test_a_recipe_keeps_its_checked_record_and_follows_an_in_place_change():
    recipe = OptimizerRecipe(lr="find", lr_find={"num_steps": 30})
    assert recipe.sweep_args is recipe.sweep_args and recipe.sweep_args == SweepArgs(num_steps=30)
    assert OptimizerRecipe(lr="find").sweep_args is None
    assert recipe.lr_find is not None
    recipe.lr_find["num_steps"] = 40  # a dict field: changeable in place, the record follows
    assert recipe.sweep_args == SweepArgs(num_steps=40)
