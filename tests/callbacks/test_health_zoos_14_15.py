"""HealthMonitor's rules added after sealed zoos 14 and 15 were scored blind (issue #35): each test trains the
zoo run it comes from (a few seconds) and fails without its rule. The shared ``nn.Tanh`` of zoo 12 and the NaN
target of zoo 15 are tested where their mechanisms live (``test_health_monitor_collector.py``,
``test_health_diagnosis.py``)."""

from __future__ import annotations

import pytest

from galleries.health.field import run_case
from galleries.health.zoo14 import zoo as zoo14

RUNS = {case.name: case for case in zoo14.CASES}


def _findings(name: str) -> list[tuple[str, int]]:
    monitor, _ = run_case(RUNS[name])
    assert monitor is not None
    return [(f.problem, f.step) for f in monitor.findings]


@pytest.mark.parametrize(
    "name", ["wine_random_first_layer_frozen_on_purpose", "iris_polynomial_lr_to_zero_at_the_end"]
)
def test_a_validation_of_one_small_batch_drifting_up_12_percent_is_not_overfitting(name: str) -> None:
    """Both validate on one batch of 30-36 rows: no spread is measured, and the series' own smoothness made a
    12-13% rise from the best "significant" (its floor of 0.5 per-sample variation says it is not)."""
    monitor, _ = run_case(RUNS[name])
    assert monitor is not None and monitor.findings == []
    vals = [v[1] for v in monitor._history.validations]
    best = min(vals)
    assert 1.08 < vals[-1] / best < 1.2  # the drift is there: a real, small, noisy rise
    assert all(v[4] <= 36 for v in monitor._history.validations)


def test_a_classifier_whose_validation_never_beats_its_untrained_loss_is_not_learning() -> None:
    """Features and labels shuffled by two permutations: the training loss creeps under the input-free guess
    (it memorises 120 rows); no validation (30 rows) is better than the untrained model's loss."""
    found = _findings("iris_features_and_labels_shuffled_with_two_permutations")
    assert [problem for problem, _ in found] == ["not_learning"], found
