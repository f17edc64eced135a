"""HealthMonitor's rules added after sealed zoos 18 and 19 were scored blind (issue #35): each test trains
the zoo run it comes from (a few seconds) and fails without its rule; its look-alikes stay quiet."""

from __future__ import annotations

import pytest

from galleries.health.field import run_case
from galleries.health.zoo6 import zoo as zoo6
from galleries.health.zoo9 import zoo as zoo9
from galleries.health.zoo18 import zoo as zoo18
from galleries.health.zoo19 import zoo as zoo19

RUNS = {case.name: case for case in [*zoo6.CASES, *zoo9.CASES, *zoo18.CASES, *zoo19.CASES]}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _findings(name: str) -> list[tuple[str, str | None]]:
    monitor, _ = run_case(RUNS[name])
    assert monitor is not None
    return [(f.problem, f.cause) for f in monitor.findings]


def test_a_gru_whose_gates_are_saturated_by_its_input_from_the_first_batch_is_named() -> None:
    """Embeddings scaled by sqrt(128) before a GRU: most gate pre-activations beyond +-3 from step 0, which
    no hook saw inside the GRU's one operator (sealed zoo 6, missed until the gates were measured)."""
    found = _findings("seq2seq_gru_embeddings_scaled_by_sqrt_width_saturate")
    assert [problem for problem, _ in found] == ["saturated_activations"], found


def test_lstm_gates_saturated_by_an_lr_that_blew_the_embeddings_up_stay_the_lr_s() -> None:
    """SGD at 200: the first updates blow the embeddings up and the LSTM's gates saturate after step 0, not
    from it: the LR's symptom, never a saturation finding of its own."""
    found = _findings("lstm_lm_plain_sgd_lr_200")
    assert [problem for problem, _ in found] == ["lr_too_high"], found


def test_weights_that_grow_while_the_loss_falls_at_every_check_are_being_fitted() -> None:
    """A character GRU on frozen one-hot codes, NAdam 3e-3: update ratios of 1.5-3e-2 and weights grown 2.7x
    at step 100, while the loss fell significantly at every check (2.97 to 1.46): no LR finding."""
    assert _findings("char_gru_one_hot_embedding_frozen_on_purpose") == []


def test_a_validation_that_wobbles_more_than_it_rose_is_not_overfitting() -> None:
    """The LR decays to 0: validation wanders 0.067-0.16 after a best of 0.065 and ends at 0.078, +20% but
    within its own epoch-to-epoch wobble, though each epoch's sample noise (0.002) calls it significant."""
    assert _findings("mil_polynomial_lr_to_zero_over_the_run") == []


def test_overfitting_whose_rise_clears_its_wobble_is_still_named() -> None:
    assert [problem for problem, _ in _findings("link_embeddings_weight_decay_read_as_zero_overfit")] == [
        "overfitting"
    ] * 3


def test_gradients_at_rounding_level_do_not_explode() -> None:
    """Every pair labelled 1 and 0: the model scores every pair 0, its gradient 1e-15 then 1e-8 (rounding);
    the 1e7 ratio was named exploding_gradients. It is not learning."""
    assert _findings("link_negatives_sampled_as_reordered_positives") == [("not_learning", None)]


def test_a_prediction_the_same_for_every_sample_is_not_learning_though_it_fell_from_its_start() -> None:
    """Six tanh layers drawn with std 0.01: the output learned its mean (the loss fell 14% from step 0)
    and has been the same for every sample since; the fall was the constant's, not learning."""
    found = _findings("logistic_pinn_six_tanh_layers_drawn_std_001")
    assert found == [("not_learning", "vanishing_gradients")], found
