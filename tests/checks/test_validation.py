"""Every public constructor in ``checks/`` rejects every invalid argument at construction, naming the
argument, the value and what is allowed (the package-wide idiom of ``lightning_recipes/_validation.py``)."""

from __future__ import annotations

import math
import re

import pytest

from lightning_recipes.checks import (
    BatchIndependenceCheck,
    CausalityCheck,
    CheckContext,
    DataCheck,
    EvalModeCheck,
    GradFlowCheck,
    InitLossCheck,
    InputIndependenceCheck,
    LoaderCheck,
    LossCheck,
    OptimizationCheck,
    OverfitBatchCheck,
    PaddingCheck,
    Preflight,
    ScheduleCheck,
    SplitOverlapCheck,
    TargetLeakageCheck,
    ValidationPathCheck,
    preflight,
)
from lightning_recipes.testing import TinyClassifier, random_classification_loader

INT = "must be an integer"
KEY = "must be an int index, a str key or None"
BAD_PAIRS = [(0.1, 0.05), (0.0, 0.5), (0.1,), "0.1", (0.1, 1.5)]

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


# (constructor, keyword arguments, the start of the message): the other checks' own arguments
NAMED = [
    (CausalityCheck, {"causal": "yes"}, "`causal` must be True, False or None"),
    (CausalityCheck, {"num_positions": 0}, "`num_positions` must be an integer >= 1"),
    (CausalityCheck, {"num_samples": 0}, "`num_samples` must be an integer >= 1"),
    (CausalityCheck, {"rtol": 0.0}, "`rtol` must be a number in (0, 1)"),
    *[(DataCheck, {"blank_fractions": v}, "`blank_fractions` must be a pair") for v in BAD_PAIRS],
    (EvalModeCheck, {"num_samples": 0}, "`num_samples` must be an integer >= 1, got 0"),
    (EvalModeCheck, {"rtol": 0.0}, "`rtol`"),
    (EvalModeCheck, {"rtol": 1.5}, "`rtol`"),
    (LoaderCheck, {"max_samples": 5}, "`max_samples`"),
    (LoaderCheck, {"z_threshold": 0}, "`z_threshold`"),
    (LoaderCheck, {"min_expected": -1}, "`min_expected`"),
    (LoaderCheck, {"rarer_ratios": (0.4, 0.6)}, "`rarer_ratios`"),
    (LoaderCheck, {"rarer_ratios": (1.2, 0.5)}, "`rarer_ratios`"),
    (LossCheck, {"num_batches": 0}, "`num_batches`"),
    (OptimizationCheck, {"steps": 1}, "`steps`"),
    (OptimizationCheck, {"max_samples": 0}, "`max_samples`"),
    (PaddingCheck, {"extra": 0}, "`extra`"),
    (PaddingCheck, {"padding_key": 1.5}, "`padding_key`"),
    (ScheduleCheck, {"collapse": 0}, "`collapse`"),
    (ScheduleCheck, {"collapse": 0.1, "low": 0.01}, "`collapse`"),
    (ScheduleCheck, {"growth": 1.0}, "`growth`"),
    (ScheduleCheck, {"low": -1}, "`low`"),
    (SplitOverlapCheck, {"num_batches": 0}, "`num_batches` must be an integer >= 1, got 0."),
    (SplitOverlapCheck, {"near_cosine": 0.0}, "`near_cosine`"),
    (SplitOverlapCheck, {"near_tokens": 1.5}, "`near_tokens`"),
    (
        SplitOverlapCheck,
        {"warn_fraction": 0.5, "fail_fraction": 0.2},
        "`warn_fraction` must be <= `fail_fraction`, got 0.5 > 0.2.",
    ),
    (TargetLeakageCheck, {"num_batches": 0}, "`num_batches` must be an integer >= 1"),
    (TargetLeakageCheck, {"num_samples": 1}, "`num_samples` must be an integer >= 2"),
    (TargetLeakageCheck, {"max_accuracy": 0.0}, "`max_accuracy` must be a number in (0, 1]"),
    (TargetLeakageCheck, {"max_correlation": 1.5}, "`max_correlation` must be a number in (0, 1]"),
    (TargetLeakageCheck, {"train_steps": -1}, "`train_steps` must be an integer >= 0"),
    (TargetLeakageCheck, {"too_good_fraction": 0}, "`too_good_fraction` must be a number in (0, 1]"),
    (ValidationPathCheck, {"min_share": 1.5}, "`min_share`"),
    (ValidationPathCheck, {"steps": 2}, "`steps`"),
    (InitLossCheck, {"num_classes": 1}, "`num_classes` must be an integer >= 2, got 1"),
    (InitLossCheck, {"expected_loss": math.inf}, "`expected_loss` must be a finite number or None, got inf"),
    (InitLossCheck, {"low_rtol": 1.5}, "`low_rtol` must be a number in (0, 1), got 1.5"),
    (InitLossCheck, {"warn_rtol": 0.9}, "`warn_rtol` must not exceed"),
    (InitLossCheck, {"on_fail": "ignore"}, "`on_fail` must be one of"),
    (OverfitBatchCheck, {"target_ratio": 1.0}, "`target_ratio` must be a number in (0, 1), got 1.0"),
    (OverfitBatchCheck, {"max_steps": 0}, "`max_steps` must be an integer >= 1, got 0"),
    (InputIndependenceCheck, {"min_improvement": -0.1}, "`min_improvement` must be a number in"),
    (BatchIndependenceCheck, {"num_samples": 1}, "`num_samples` must be an integer >= 2, got 1"),
    (GradFlowCheck, {"max_steps": 0}, "`max_steps` must be an integer >= 1, got 0"),
    (DataCheck, {"max_scale": 0}, "`max_scale` must be a finite number > 0, got 0"),
    (Preflight, {"checks": ["init_los"]}, "`checks` entries must be SanityCheck instances or one of"),
    (Preflight, {"checks": ["data", "data"]}, "names each check at most once, got ['data']"),
    (Preflight, {"on_fail": "stop"}, "`on_fail` must be one of"),
]


@pytest.mark.parametrize(
    ("factory", "kwargs", "words"), NAMED, ids=[f"{f.__name__}-{k}" for f, k, _ in NAMED]
)
def test_invalid_check_argument_is_rejected_naming_it(factory, kwargs, words):
    with pytest.raises(ValueError, match=re.escape(words)):
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


@pytest.mark.parametrize(
    "factory",
    [
        GradFlowCheck,
        BatchIndependenceCheck,
        CausalityCheck,
        PaddingCheck,
        EvalModeCheck,
        ScheduleCheck,
        OptimizationCheck,
        ValidationPathCheck,
    ],
)
def test_the_shared_keywords_pass_through_and_a_bad_one_is_still_rejected(factory):
    """The model and loop checks pass ``on_fail``/``input_key``/``target_key``/``time_budget`` on to
    ``SanityCheck`` (#34): they are kept, validated there, and an unknown keyword raises naming it."""
    check = factory(on_fail="warn", input_key="x", target_key=1, time_budget=None)
    assert (check.on_fail, check.input_key, check.target_key, check.time_budget) == ("warn", "x", 1, None)
    with pytest.raises(ValueError, match="on_fail"):
        factory(on_fail="stop")
    with pytest.raises(TypeError, match="bogus"):
        factory(bogus=1)
