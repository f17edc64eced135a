"""HealthMonitor's rules changed after sealed zoos 24 and 25 were scored blind (issue #35): each test trains
the zoo run it comes from (a few seconds) and fails without its change; its look-alikes stay quiet."""

from __future__ import annotations

import pytest

from galleries.health.field import run_case
from galleries.health.zoo12 import zoo as zoo12
from galleries.health.zoo24 import zoo as zoo24
from galleries.health.zoo25 import zoo as zoo25

RUNS = {case.name: case for case in [*zoo24.CASES, *zoo25.CASES]}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _found(name: str) -> list[tuple[str, str]]:
    monitor, _ = run_case(RUNS[name])
    assert monitor is not None
    return [(f.problem, f.cause) for f in monitor.findings]


def _first(name: str):
    monitor, _ = run_case(RUNS[name])
    assert monitor is not None and monitor.findings, name
    return monitor.findings[0]


def test_nan_weights_from_an_lr_that_blew_up_from_the_first_step_are_the_lr() -> None:
    """SGD momentum at 5.0 on clean data: the gradients grow 190x in two steps (0.37 to 70) and the weights
    turn NaN before any rise of 100x was seen; the LR is named (it read as non-finite weights, no cause)."""
    first = _first("insurance_sgd_lr_100x_nan")
    assert (first.problem, first.cause) == ("lr_too_high", "lr_too_high") and first.step <= 20, first


def test_nan_weights_straight_after_an_ordinary_gradient_are_not_the_lr() -> None:
    """The blind pair's other half (zoo 12): Adam with eps=0 divides a silent channel's zero gradient by 0 on
    its first step. The weights are NaN after one ordinary gradient, none grew: a non-finite update, no LR."""
    case = next(c for c in zoo12.CASES if c.name == "tones_adam_eps_zero_silent_stereo_channel")
    monitor, _ = run_case(case)
    assert monitor is not None and monitor.findings
    first = monitor.findings[0]
    assert (first.problem, first.cause) == ("nonfinite_activations", "nonfinite_weights"), first
    assert all(f.problem != "lr_too_high" for f in monitor.findings), monitor.findings


def test_a_loss_below_zero_that_overfits_is_overfitting_and_its_healthy_twin_is_quiet() -> None:
    """A negative-Sharpe loss: the generalisation loss was read as (val - best) / best, which is negative
    for a negative best, so the validation Sharpe falling from 1.6 was never a rise. The run trained the same
    loss on all its years is quiet."""
    first = _first("portfolio_sharpe_fit_to_one_year_overfits")
    assert first.problem == "overfitting", first
    assert _found("portfolio_negative_sharpe_loss") == []


def test_gradients_from_outlier_batches_named_as_outliers_are_not_an_explosion() -> None:
    """Detector sentinels (6553.5 mph) left in: the batches holding one have losses ~1000x the others', named
    as outlier batches; their gradients, large on those batches only, are not exploding_gradients."""
    found = _found("traffic_detector_no_data_sentinels_left_in")
    assert found and all(problem != "exploding_gradients" for problem, _ in found), found
    assert found[0][0] in ("inputs", "outlier_batches"), found


def test_a_body_cut_from_the_graph_is_frozen_parameters() -> None:
    """A ``.detach()`` on a deep set's pooled embedding: the per-constituent network gets no gradient at all
    (zero from step 0, with the LR above zero) while the readout learns: the cause is frozen_parameters,
    not an LR."""
    first = _first("jets_deep_set_pooled_embedding_detached")
    assert first.cause == "frozen_parameters" and first.problem in ("frozen_parameters", "not_learning"), (
        first
    )
    assert ".detach()" in first.action, first.action


def test_labels_shuffled_apart_from_their_documents_are_not_the_lr() -> None:
    """Labels permuted apart from their documents: the training loss falls a little (memorising) while
    validation stays at log 5; that is not a sustained LR growth but a run not learning from its inputs."""
    first = _first("langid_labels_shuffled_apart_from_documents")
    assert first.problem == "not_learning", first
