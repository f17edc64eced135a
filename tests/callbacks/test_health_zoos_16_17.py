"""HealthMonitor's rules added after sealed zoos 16 and 17 were scored blind (issue #35): each test trains
the zoo run it comes from (a few seconds) and fails without its rule; its look-alikes stay quiet."""

from __future__ import annotations

import pytest

from galleries.health.field import run_case
from galleries.health.zoo15 import zoo as zoo15
from galleries.health.zoo16 import zoo as zoo16
from galleries.health.zoo17 import zoo as zoo17

RUNS = {case.name: case for case in [*zoo15.CASES, *zoo16.CASES, *zoo17.CASES]}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _findings(name: str) -> list[tuple[str, int]]:
    monitor, _ = run_case(RUNS[name])
    assert monitor is not None
    return [(f.problem, f.step) for f in monitor.findings]


@pytest.mark.parametrize(
    ("name", "cause"),
    [
        ("kws_eight_sigmoid_conv_layers", "vanishing_gradients"),
        ("topics_vocabulary_keyed_by_word_count_pairs", "inputs"),
    ],
)
def test_a_prediction_the_same_for_every_sample_is_not_blamed_on_the_labels_or_the_lr(
    name: str, cause: str
) -> None:
    """Both sit at their prior's loss with a prediction the same for every sample at every check (gain over
    the batch-mean guess ~1e-7 of the loss): eight sigmoid conv layers lose the clip on its way (was "labels
    do not match inputs"); a vocabulary keyed by (word, count) pairs encodes every token as the unknown id
    (was ``lr_too_low``, its small steps the prior's, fitted). Shuffled labels still vary the prediction."""
    monitor, _ = run_case(RUNS[name])
    assert monitor is not None
    assert [(f.problem, f.cause) for f in monitor.findings] == [("not_learning", cause)], monitor.findings


def test_a_validation_of_one_batch_rising_at_every_look_is_overfitting() -> None:
    """A GCN without dropout or weight decay validates on one batch (no spread measured, so the floor of 0.5
    per-sample variation hides a 90% rise); its loss rose at every one of 25 validations: a sign test."""
    found = _findings("gcn_dropout_and_weight_decay_left_out_overfits")
    assert [problem for problem, _ in found] == ["overfitting"], found


def test_a_jittery_validation_of_eight_nodes_is_not_overfitting() -> None:
    assert _findings("gcn_validated_on_8_nodes") == []


@pytest.mark.parametrize(
    "name", ["diabetes_two_targets_typed_with_an_extra_zero", "restore_merged_source_left_in_0_16_units"]
)
def test_values_ten_times_too_large_on_a_few_batches_are_outlier_batches(name: str) -> None:
    """Two targets typed with an extra zero (5x the typical batch's largest value once standardised) and 8
    images left in 0..16 units (16x): the batches holding them have 5-40x the calm gradient, below the 30x
    of a sentinel, and every such step holds one; no plateau is reported for the loss they hold up."""
    found = _findings(name)
    assert [problem for problem, _ in found] == ["outlier_batches"], found


def test_a_denoiser_trained_in_raw_pixel_units_has_no_outlier_batches() -> None:
    """Every batch is in 0..16 units: no batch's values stand out, whatever the gradients."""
    assert _findings("restore_denoise_in_raw_pixel_units") == []
