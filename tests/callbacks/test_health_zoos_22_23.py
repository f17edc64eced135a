"""HealthMonitor's rules added after sealed zoos 22 and 23 were scored blind (issue #35): each test trains the
zoo run it comes from (a few seconds) and fails without its change; its look-alikes stay quiet."""

from __future__ import annotations

import math

import pytest

from galleries.health.field import run_case
from galleries.health.zoo22 import zoo as zoo22
from galleries.health.zoo23 import zoo as zoo23
from lightning_recipes.callbacks._health_repair import lr_factor_of, repair_of

RUNS = {case.name: case for case in [*zoo22.CASES, *zoo23.CASES]}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _monitor(name: str):
    monitor, _ = run_case(RUNS[name])
    assert monitor is not None
    return monitor


def test_blank_images_behind_four_heads_are_not_learning_from_the_inputs() -> None:
    """uint8 captchas floor-divided by 255: every pixel 0, so four heads predict the same for every sample.
    The loss reads the heads flattened to (samples x 4) rows: the output is compared per position over the
    samples (the batch mean over all rows mixed the heads and read as an output that varies). Dead units
    there are that input's symptom: `not_learning`, cause `inputs`."""
    found = [(f.problem, f.cause) for f in _monitor("captcha_uint8_images_floor_divided_to_zero").findings]
    assert found == [("not_learning", "inputs")], found


def test_an_lr_cut_that_stopped_a_falling_loss_is_lr_too_low_and_restored() -> None:
    """A LambdaLR warm-up that returns the LR instead of a factor: at step 50 the LR falls 267x (2.4e-3 to
    9e-6) while the loss was falling, and the loss stops there. Named within three checks, with the peak
    the repair restores; the correct warm-up and a polynomial decay to zero stay quiet."""
    monitor = _monitor("black_scholes_lambdalr_returns_lr_not_factor")
    low = monitor.findings[0]
    assert (low.problem, low.cause) == ("lr_too_low", "lr_too_low") and 50 <= low.step <= 120, low
    assert repair_of(low) == "raise_lr" and lr_factor_of(low) == pytest.approx(2.4e-3 / 9e-6, rel=0.01)
    for healthy in ("black_scholes_lambdalr_warmup_100", "flow_polynomial_lr_to_zero_at_the_end"):
        assert _monitor(healthy).findings == [], healthy


def test_a_converged_loss_bumping_at_its_floor_is_not_thrown_back_by_the_lr() -> None:
    """Adadelta at 1.0 on batches of 1024: the loss falls from 0.23 to 0.0036 and bumps to 0.0040, 11% of its
    own value but 0.2% of the progress made: a rise must undo 1% of it to be the LR's."""
    assert _monitor("trajectories_adadelta_batches_of_1024").findings == []


def test_units_that_die_while_the_loss_keeps_falling_are_not_a_finding_yet() -> None:
    """A maze CNN validated on 16 mazes: 75% of two conv layers' units stop firing around step 110, when the
    loss starts to fall from 1.05 to 0.35; alive at step 0 and dying while it learns, they are not named
    (they were blamed on the LR). Units dead from a prior bias on every layer stay a finding."""
    assert _monitor("mazes_validated_on_16").findings == []
    dead = [(f.problem, f.cause) for f in _monitor("chords_prior_bias_set_on_every_layer").findings]
    assert dead and dead[0][0] == "dead_units", dead


def test_a_finite_batch_whose_loss_is_0_over_0_is_rolled_back_and_skipped() -> None:
    """Duplicated timestamps (dt = 0) under a loss divided by the gap: batch 60 holds only finite values, yet
    its loss is 0/0 and its update makes every weight NaN. The first non-finite loss came with finite weights,
    so the batch of that step is named and the repair rolls back and skips it (it was advice only: the batch
    was not inf/nan itself). Without the repair the run ends NaN."""
    from tests.callbacks.health_repair_runs import run_zoo_case

    name = "trajectories_duplicate_timestamps_divide_by_zero"
    plain, repaired = run_zoo_case(RUNS[name], repair=False), run_zoo_case(RUNS[name], repair=True)
    first = repaired["monitor"].repairs[0]
    assert (first.cause, first.action) == ("inputs", "rollback_skip_batch"), first
    assert math.isnan(plain["final"]) and repaired["final"] < plain["best"], (plain, repaired)


def test_a_plateau_schedule_waiting_for_the_validation_loss_to_rise_is_named_once_it_collapses() -> None:
    """ReduceLROnPlateau(mode="max") on ``val_loss`` (the monitor's own validation loss): every fall counts as
    no improvement, so it cuts the LR 10x per epoch. Named ``lr_too_low`` once the LR is 30x below its peak
    while the validation loss fell (at 120, where the collapse alone was named at 180), with the peak the
    repair restores."""
    low = _monitor("fusion_reduce_on_plateau_mode_max").findings[0]
    assert (low.problem, low.evidence.get("plateau_mode")) == ("lr_too_low", "max") and low.step <= 120, low
    assert repair_of(low) == "raise_lr" and lr_factor_of(low) == pytest.approx(100, rel=0.01)
