"""Every argument of the LR range test is checked when given (find_lr, LRRangeTest, sweep_lr, SweepArgs); the
error names the argument."""

from __future__ import annotations

from typing import Any

import pytest

from lightning_recipes.harness import Harness
from lightning_recipes.sweep_args import SweepArgs
from lightning_recipes.testing import TinyClassifier, random_classification_loader
from lightning_recipes.tune import LRRangeTest, find_lr, sweep_lr

SWEEP_CASES = [
    ({"warmup_factor": -1.0}, "warmup_factor"),
    ({"warmup_factor": 0}, "warmup_factor"),
    ({"warmup_factor": "5"}, "warmup_factor"),
    ({"seed": 1.5}, "seed"),
    ({"seed": True}, "seed"),
    ({"min_lr": 0.0}, "min_lr"),
    ({"min_lr": 1.0, "max_lr": 0.5}, "max_lr"),
    ({"num_steps": 5}, "num_steps"),
    ({"num_steps": 50.0}, "num_steps"),
    ({"rule": "valley"}, "rule"),
    ({"smoothing": 1.0}, "smoothing"),
    ({"divergence": 0.5}, "divergence"),
    ({"divergence": 1.0}, "divergence"),
]


@pytest.mark.parametrize(("kwargs", "name"), SWEEP_CASES)
def test_a_bad_sweep_argument_is_refused_by_every_entry_point(kwargs: dict[str, Any], name: str):
    """Before: warmup_factor and seed were not checked (a negative warmup_factor gave a negative peak_lr after
    a 100-step sweep)."""
    loader = random_classification_loader()
    calls = [
        lambda: LRRangeTest(**kwargs),
        lambda: find_lr(TinyClassifier(), train_dataloaders=loader, **kwargs),
        lambda: sweep_lr(Harness(TinyClassifier(), loader), **kwargs),
        lambda: SweepArgs.from_mapping(kwargs),
    ]
    for call in calls:
        with pytest.raises(ValueError, match=f"`{name}`"):
            call()


@pytest.mark.parametrize(
    ("kwargs", "error", "name"),
    [
        ({"apply": "yes"}, TypeError, "apply"),
        ({"stop": 1}, TypeError, "stop"),
        ({"print_result": None}, TypeError, "print_result"),
        ({"progress": "no"}, TypeError, "progress"),
        ({"args": {"num_steps": 20}}, TypeError, "args"),
        ({"args": SweepArgs(), "num_steps": 30}, TypeError, "args"),
    ],
)
def test_the_callbacks_own_arguments_are_checked(kwargs: dict[str, Any], error: type[Exception], name: str):
    with pytest.raises(error, match=f"`{name}`"):
        LRRangeTest(**kwargs)


def test_an_unknown_argument_lists_the_allowed_ones():
    with pytest.raises(TypeError) as raised:
        LRRangeTest(num_step=10)
    assert all(f"'{key}'" in str(raised.value) for key in ("num_step", "apply", *SweepArgs.field_names()))
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['steps'\]"):
        SweepArgs.from_mapping({"steps": 50}, "LRRangeTest")
    with pytest.raises(ValueError, match="`LRRangeTest` must be a mapping"):
        SweepArgs.from_mapping([50], "LRRangeTest")


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"gradient_clip_val": -1.0}, "gradient_clip_val"),
        ({"gradient_clip_algorithm": "l2"}, "gradient_clip_algorithm"),
    ],
)
def test_bad_clipping_arguments_are_refused(kwargs: dict[str, Any], name: str):
    with pytest.raises(ValueError, match=f"`{name}`"):
        find_lr(TinyClassifier(), train_dataloaders=random_classification_loader(), **kwargs)


def test_good_arguments_are_kept_as_one_record():
    args = SweepArgs(num_steps=20, warmup_factor=3, seed=7)
    finder = LRRangeTest(num_steps=20, warmup_factor=3, seed=7, apply=True, stop=True, print_result=False)
    assert finder.args == args and finder.seed == 7 and finder.sweep["warmup_factor"] == 3
    assert (finder.apply, finder.stop, finder.print_result) == (True, True, False)
    assert LRRangeTest(args=args).args is args
