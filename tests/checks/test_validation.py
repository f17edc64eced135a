"""Every public constructor in ``checks/`` rejects every invalid argument at construction, naming the
argument, the value and what is allowed (the package-wide idiom of ``lightning_recipes/_validation.py``)."""

from __future__ import annotations

import math
import re

import pytest

from lightning_recipes.checks import (
    BatchIndependenceCheck,
    CheckContext,
    DataCheck,
    GradFlowCheck,
    InitLossCheck,
    InputIndependenceCheck,
    OverfitBatchCheck,
    Preflight,
    preflight,
)
from lightning_recipes.testing import TinyClassifier, random_classification_loader

INT = "must be an integer"
KEY = "must be an int index, a str key or None"

# (constructor, keyword arguments, error type, the words of the message)
CASES = [
    (InitLossCheck, {"target_key": -0.5}, ValueError, KEY),
    (InitLossCheck, {"input_key": 1.0}, ValueError, KEY),
    (InitLossCheck, {"input_key": True}, ValueError, KEY),
    (InitLossCheck, {"num_classes": True}, ValueError, INT + " >= 2"),
    (InitLossCheck, {"num_classes": 2.0}, ValueError, INT + " >= 2"),
    (InitLossCheck, {"num_batches": True}, ValueError, INT + " >= 1"),
    (InitLossCheck, {"num_batches": 0}, ValueError, INT + " >= 1"),
    (InitLossCheck, {"expected_loss": math.nan}, ValueError, "must be a finite number or None"),
    (InitLossCheck, {"expected_loss": True}, ValueError, "must be a finite number or None"),
    (InitLossCheck, {"warn_rtol": 0.0}, ValueError, "must be a finite number > 0"),
    (InitLossCheck, {"high_rtol": "1"}, ValueError, "must be a finite number > 0"),
    (InitLossCheck, {"low_rtol": 0.0}, ValueError, "must be a number in (0, 1)"),
    (InitLossCheck, {"on_fail": "stop"}, ValueError, "must be one of ('raise', 'warn')"),
    (DataCheck, {"num_batches": 2.5}, ValueError, INT + " >= 1"),
    (DataCheck, {"num_classes": 1}, ValueError, INT + " >= 2"),
    (DataCheck, {"max_scale": math.inf}, ValueError, "must be a finite number > 0"),
    (DataCheck, {"max_scale": True}, ValueError, "must be a finite number > 0"),
    (DataCheck, {"target_key": [1]}, ValueError, KEY),
    (GradFlowCheck, {"max_steps": True}, ValueError, INT + " >= 1"),
    (GradFlowCheck, {"max_steps": 1.5}, ValueError, INT + " >= 1"),
    (BatchIndependenceCheck, {"num_samples": True}, ValueError, INT + " >= 2"),
    (BatchIndependenceCheck, {"rtol": 1.0}, ValueError, "must be a number in (0, 1)"),
    (BatchIndependenceCheck, {"rtol": math.nan}, ValueError, "must be a number in (0, 1)"),
    (OverfitBatchCheck, {"max_steps": 10.0}, ValueError, INT + " >= 1"),
    (OverfitBatchCheck, {"num_samples": 0}, ValueError, INT + " >= 1"),
    (OverfitBatchCheck, {"num_samples": True}, ValueError, INT + " >= 1"),
    (OverfitBatchCheck, {"target_ratio": True}, ValueError, "must be a number in (0, 1)"),
    (InputIndependenceCheck, {"max_steps": 0}, ValueError, INT + " >= 1"),
    (InputIndependenceCheck, {"num_batches": True}, ValueError, INT + " >= 1"),
    (InputIndependenceCheck, {"num_eval_batches": 0.5}, ValueError, INT + " >= 1"),
    (InputIndependenceCheck, {"min_improvement": 1.0}, ValueError, "must be a number in [0, 1)"),
    (InputIndependenceCheck, {"num_samples": -1}, ValueError, INT + " >= 1"),
    (Preflight, {"on_fail": "ignore"}, ValueError, "must be one of ('raise', 'warn')"),
    (Preflight, {"print_report": "yes"}, TypeError, "must be True or False"),
    (Preflight, {"num_classes": True}, ValueError, INT + " >= 2"),
    (Preflight, {"seed": 1.5}, ValueError, INT),
    (Preflight, {"num_threads": 0}, ValueError, INT + " >= 1"),
    (Preflight, {"num_threads": True}, ValueError, INT + " >= 1"),
    (Preflight, {"input_key": 0.5}, ValueError, KEY),
    (Preflight, {"target_key": -0.5}, ValueError, KEY),
]


@pytest.mark.parametrize(
    ("factory", "kwargs", "error", "words"),
    CASES,
    ids=[f"{f.__name__}-{next(iter(k))}={next(iter(k.values()))!r}" for f, k, _, _ in CASES],
)
def test_invalid_argument_is_rejected_at_construction(factory, kwargs, error, words):
    ((name, value),) = kwargs.items()
    expected = f"`{name}` {words}, got {value!r}."
    with pytest.raises(error, match=re.escape(expected)):
        factory(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"num_classes": True}, "`num_classes` must be an integer >= 2, got True."),
        ({"seed": "0"}, "`seed` must be an integer, got '0'."),
        ({"num_threads": 0}, "`num_threads` must be an integer >= 1, got 0."),
        ({"target_key": -0.5}, "`target_key` must be an int index, a str key or None, got -0.5."),
        ({"print_report": 1}, "`print_report` must be True or False, got 1."),
    ],
)
def test_preflight_function_rejects_invalid_arguments_before_any_work(kwargs, expected):
    with pytest.raises((ValueError, TypeError), match=re.escape(expected)):
        preflight(TinyClassifier(), train_dataloaders=random_classification_loader(), **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"num_classes": 1}, "`num_classes` must be an integer >= 2, got 1."),
        ({"seed": None}, "`seed` must be an integer, got None."),
        ({"input_key": 0.0}, "`input_key` must be an int index, a str key or None, got 0.0."),
    ],
)
def test_check_context_rejects_invalid_arguments(kwargs, expected):
    with pytest.raises(ValueError, match=re.escape(expected)):
        CheckContext(TinyClassifier(), random_classification_loader(), **kwargs)


def test_valid_keys_and_numbers_are_accepted():
    InitLossCheck(input_key=0, target_key=-1, num_classes=4, expected_loss=1, warn_rtol=0.1)
    DataCheck(input_key="x", target_key="labels", max_scale=3)
    Preflight(num_classes=10, seed=3, num_threads=1, print_report=False, target_key="y")
    CheckContext(TinyClassifier(), random_classification_loader(), num_classes=4, seed=0, input_key=0)
