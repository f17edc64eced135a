"""HealthMonitor's rules added after sealed zoos 20 and 21 were scored blind (issue #35): each test trains
the zoo run it comes from (a few seconds) and fails without its rule; its look-alikes stay quiet."""

from __future__ import annotations

import pytest

from galleries.health.field import run_case
from galleries.health.zoo20 import zoo as zoo20
from galleries.health.zoo21 import zoo as zoo21

RUNS = {case.name: case for case in [*zoo20.CASES, *zoo21.CASES]}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _findings(name: str) -> list[tuple[str, str | None, int]]:
    monitor, _ = run_case(RUNS[name])
    assert monitor is not None
    return [(f.problem, f.cause, f.step) for f in monitor.findings]


def test_units_dead_at_step_0_behind_one_output_for_every_sample_are_the_inputs_symptom() -> None:
    """One-hot states written with `==`: every state is all zeros, half the first layer's units sit at a
    negative bias (dead from step 0) and the other half fire alike for every sample: the run is not learning
    and the inputs are why (zoo 22 showed the dead units are a symptom). The blind pair, every ReLU dead from
    a prior bias of -4.6 on each conv, stays the initialisation's."""
    assert [(p, c) for p, c, _ in _findings("gridworld_bc_one_hots_written_with_double_equals")] == [
        ("not_learning", "inputs")
    ]
    assert [(p, c) for p, c, _ in _findings("keypoint_heatmaps_focal_prior_bias_on_every_conv")] == [
        ("dead_units", "initialisation")
    ]


@pytest.mark.parametrize(
    "name", ["keypoint_heatmaps_nadam_lr_0_1_kills_relus", "flow_adamax_lr_0_3_dropped_exponent"]
)
def test_a_loss_the_first_steps_throw_far_above_its_start_is_the_lr(name: str) -> None:
    """NAdam at 0.1 (the loss 4000x its value before any update within 20 steps, then every ReLU dead) and
    Adamax at 0.3 (a flow's NLL to 4e6): the first step moved the weights far beyond 1e-2 of their norm."""
    found = _findings(name)
    assert found[0] == ("lr_too_high", "lr_too_high", 20), found
    assert (
        found[0][0] in {p for p, _, _ in found} - {"exploding_gradients", "not_learning"} or len(found) == 1
    )


def test_large_first_gradients_while_the_loss_falls_to_a_tenth_are_a_steep_start() -> None:
    """A flow on moons in raw units: a first loss of 689 and a gradient of 3.9e4 at step 0, and the loss at
    71 by step 20: no explosion."""
    assert _findings("flow_moons_in_raw_units") == []
