"""Proofs for sealed gallery T's first half (``t``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _t_data as d
from galleries.preflight.sealed import _t_models as m
from galleries.preflight.sealed import t as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def illuminant_degrees(model) -> float:
    """The mean angular error (degrees) of the served illuminant on 2,000 held-out scenes."""
    pixels, illum = d.scenes(2000, 3)
    cosine = (model.predict(pixels) * illum).sum(1).clamp(-1, 1)
    return torch.rad2deg(torch.acos(cosine)).mean().item()


@torch.no_grad()
def reach_error(model) -> float:
    """The mean distance between 2,000 held-out target positions and where the arm reaches with the served
    joint angles (the arm is 1.8 long)."""
    position, _, _ = d.arm_poses(2000, 3)
    return (d.forward_kinematics(model.predict(position)) - position).norm(dim=1).mean().item()


@torch.no_grad()
def soc_rmse(model) -> float:
    """The root mean squared error of the served state of charge on 2,000 held-out windows, served in
    batches of 64 in order."""
    window, soc = d.drive_windows(2000, 3)
    predicted = torch.cat([model.predict(part) for part in window.split(64)])
    return (predicted - soc).pow(2).mean().sqrt().item()


@torch.no_grad()
def match_mse(model) -> float:
    """The mean squared error of the served goal difference against the expected one (no Poisson noise) on
    2,000 held-out fixtures."""
    teams, _, _ = d.matches(2000, 3)
    return (model.predict(teams) - d.expected_difference(teams)).pow(2).mean().item()


@torch.no_grad()
def radio_error(model) -> float:
    """The error rate of the served modulation on 2,000 held-out bursts."""
    iq, kind = d.bursts(2000, 3)
    return (model.predict(iq) != kind).float().mean().item()


@torch.no_grad()
def ppb_relative_error(model) -> float:
    """The mean absolute relative error of the served concentration on 2,000 held-out hours (a share of
    the reference's reading)."""
    x, ppb = d.sensor_rows(2000, 3)
    return ((model.predict(x) - ppb[:, 0]).abs() / ppb[:, 0]).mean().item()


SCENE, ARM = (m.IlluminantNet, gallery.scene_data), (m.ArmIK, gallery.arm_data)
MANUAL, BATTERY = (m.ArmIKManual, gallery.arm_data), (m.SoCNet, gallery.battery_data)
SWAP = (m.MatchNet, lambda: gallery.match_data(d.swap_sides))
SCALED, RADIO = (m.MatchNetScaled, gallery.match_data), (m.ModulationNet, gallery.radio_data)
SENSOR, DROPOUT = (m.Calibrator, gallery.sensor_data), (m.SoCNetDropout, gallery.battery_data)

PROOFS = {
    "illuminant_colour_jitter_keeps_label": Proof(SCENE, illuminant_degrees, 1.0, 6),
    "illuminant_cosine_over_batch": Proof(SCENE, illuminant_degrees, 1.0, 6),
    "illuminant_per_channel_normalised": Proof(SCENE, illuminant_degrees, 1.0, 6),
    "arm_ik_cos_sin_swapped": Proof(ARM, reach_error, 0.3, 6),
    "arm_ik_manual_scheduler_per_batch": Proof(MANUAL, reach_error, 0.05, 6),
    "battery_gru_not_batch_first": Proof(BATTERY, soc_rmse, 0.005, 6),
    "battery_dropout_on_when_served": Proof(DROPOUT, soc_rmse, 0.005, 6),
    "match_swap_keeps_goal_difference": Proof(SWAP, match_mse, 0.1, 6),
    "match_unscaled_without_mean": Proof(SCALED, match_mse, 0.1, 6),
    "radio_nll_loss_on_logits": Proof(RADIO, radio_error, 0.05, 6),
    "airq_log1p_served_with_exp": Proof(SENSOR, ppb_relative_error, 0.02, 10),
    "airq_step_decay_per_batch": Proof(SENSOR, ppb_relative_error, 0.02, 10),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=12, healthy=10)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
