"""The private helpers of the preflight's core, their former doctests (issue #34)."""

from __future__ import annotations

import pytest
import torch

from lightning_recipes._report_text import first_sentence
from lightning_recipes.checks._budget import hard_limit, holds_compiled_module, out_of_time, time_budget
from lightning_recipes.checks._num_classes import infer_num_classes
from lightning_recipes.checks._options import PreflightOptions, check_time_budget
from lightning_recipes.checks._probe import keeping_statistics, listed
from lightning_recipes.checks._runner import progress_line
from lightning_recipes.checks.base import error_result
from lightning_recipes.checks.report import CheckResult
from lightning_recipes.harness.batches import entries, replace_entries


def test_batch_entries_names_and_statistics() -> None:
    assert [(k, label) for k, label, _ in entries({"x": torch.zeros(1), "n": 3})] == [("x", "batch['x']")]
    assert replace_entries((torch.zeros(1), torch.zeros(1)), {1: torch.ones(1)})[1].tolist() == [1.0]
    assert (
        listed(["encoder.weight", "encoder.bias", "head.weight"], width=30)
        == "encoder.weight, encoder.bias +1"
    )
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    assert [type(m).__name__ for m in keeping_statistics(net, lambda: net(torch.randn(4, 2)))] == [
        "BatchNorm1d"
    ]
    found = infer_num_classes(torch.zeros(4, 10), torch.tensor([0, 1, 2, 3]))
    assert found == (10, "logits [4, 10] for integer targets [4]")
    assert infer_num_classes(torch.zeros(4, 1), torch.rand(4, 1)) is None


def test_budgets_and_options() -> None:
    with time_budget(None):
        assert out_of_time() is False
    with time_budget(0.0):
        assert out_of_time() is True
    assert (hard_limit(10.0), hard_limit(1.0)) == (15.0, 3.0)
    assert holds_compiled_module(torch.nn.Sequential(torch.nn.Linear(2, 2))) is False
    check_time_budget("time_budget", "default", allow_default=True)
    with pytest.raises(ValueError) as err:
        check_time_budget("time_budget", "default")
    assert (
        str(err.value)
        == "`time_budget` must be a positive number of seconds, None (unlimited), got 'default'."
    )
    assert PreflightOptions(seed=3, num_threads=1).time_budget == 30.0
    with pytest.raises(ValueError) as err:
        PreflightOptions(num_classes=1)
    assert str(err.value) == "`num_classes` must be an integer >= 2, got 1."


def test_progress_lines_first_sentences_and_error_results() -> None:
    assert progress_line(4, 6, "overfit_batch", 8.0) == "preflight [5/6] overfit_batch: running (budget 8 s)"
    done = CheckResult("overfit_batch", "pass", "", seconds=2.34)
    assert progress_line(4, 6, "overfit_batch", 8.0, done) == "preflight [5/6] overfit_batch: PASS in 2.3 s"
    assert (
        first_sentence("loss 2.30 at init. Target values: every one moves the loss.") == "loss 2.30 at init."
    )
    assert (
        first_sentence("0.2% expected by chance; e.g. 3 of 359") == "0.2% expected by chance; e.g. 3 of 359"
    )
    try:
        [][1]
    except IndexError as err:
        result = error_result("data", err)
    assert (result.status, result.details["error"]) == ("error", "IndexError: list index out of range")
