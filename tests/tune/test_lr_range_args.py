"""Every ``LRRangeTest`` argument is checked at construction; each message names the argument, the value
and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from lightning_recipes.harness import Harness
from lightning_recipes.sweep_args import SweepArgs
from lightning_recipes.testing import TinyClassifier, random_classification_loader
from lightning_recipes.tune import LRRangeTest, sweep_lr


@pytest.mark.parametrize(
    ("kwargs", "error", "parts"),
    [
        ({"warmup_factor": -1.0}, ValueError, ["`warmup_factor`", "> 0", "-1.0"]),
        ({"warmup_factor": 0}, ValueError, ["`warmup_factor`", "> 0", "0"]),
        ({"warmup_factor": "5"}, ValueError, ["`warmup_factor`", "> 0", "'5'"]),
        ({"seed": 1.5}, ValueError, ["`seed`", "integer", "1.5"]),
        ({"seed": True}, ValueError, ["`seed`", "integer", "True"]),
        ({"min_lr": -1e-3}, ValueError, ["`min_lr`", "> 0", "-0.001"]),
        ({"min_lr": 1.0, "max_lr": 0.5}, ValueError, ["`max_lr`", "greater than `min_lr`", "0.5"]),
        ({"num_steps": 5}, ValueError, ["`num_steps`", ">= 10", "5"]),
        ({"num_steps": 50.0}, ValueError, ["`num_steps`", "integer", "50.0"]),
        ({"rule": "valley"}, ValueError, ["`rule`", "'min_div_10'", "'valley'"]),
        ({"smoothing": 1.0}, ValueError, ["`smoothing`", "[0, 1)", "1.0"]),
        ({"divergence": 0.5}, ValueError, ["`divergence`", "> 1", "0.5"]),
        ({"apply": "yes"}, TypeError, ["`apply`", "True or False", "'yes'"]),
        ({"stop": 1}, TypeError, ["`stop`", "True or False", "1"]),
        ({"print_result": None}, TypeError, ["`print_result`", "True or False", "None"]),
        (
            {"num_step": 10},
            TypeError,
            ["['num_step']", *(f"'{key}'" for key in SweepArgs.field_names()), "'apply'"],
        ),
    ],
)
def test_bad_arguments_are_refused_at_construction_naming_value_and_allowed(
    kwargs: dict[str, Any], error: type[Exception], parts: list[str]
):
    """Before: warmup_factor and seed were not checked (a negative warmup_factor gave a negative peak_lr
    after a 100-step sweep), apply/stop/print_result took anything, and an unknown key listed no keys."""
    with pytest.raises(error) as raised:
        LRRangeTest(**kwargs)
    for part in parts:
        assert part in str(raised.value), (part, str(raised.value))


def test_sweep_lr_refuses_a_negative_warmup_factor_before_sweeping():
    context = Harness(TinyClassifier(), random_classification_loader())
    with pytest.raises(ValueError, match=r"`warmup_factor` must be a finite number > 0, got -5"):
        sweep_lr(context, num_steps=10, warmup_factor=-5)


def test_good_arguments_are_kept():
    finder = LRRangeTest(num_steps=20, warmup_factor=3, seed=7, apply=True, stop=True, print_result=False)
    assert finder.sweep["num_steps"] == 20 and finder.sweep["warmup_factor"] == 3 and finder.seed == 7
    assert (finder.apply, finder.stop, finder.print_result) == (True, True, False)
