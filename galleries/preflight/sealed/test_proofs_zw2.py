"""Proofs for sealed gallery ZW's second half (``zw2``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zw2_data as d
from galleries.preflight.sealed import _zw2_models as m
from galleries.preflight.sealed import zw2 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def board_error(model) -> float:
    """The mean absolute error (pawns) of the served evaluation on 2,000 held-out positions."""
    planes, value = d.boards(2000, 3)
    return (model.predict(planes) - value).abs().mean().item()


@torch.no_grad()
def chord_error(model) -> float:
    """The share of 2,000 held-out chroma vectors whose chord (root and quality) is wrong."""
    x, label = d.chroma(2000, 3)
    return (model.predict(x) != label).float().mean().item()


@torch.no_grad()
def rollout_error(model) -> float:
    """The mean squared error of the served rollouts of 200 held-out trajectories, from their first state
    over their own 15 gaps."""
    times, states = d.trajectories(200, 3)
    return (model.predict(states[:, 0], torch.diff(times)) - states[:, 1:]).pow(2).mean().item()


@torch.no_grad()
def fusion_error(model) -> float:
    """The share of 2,000 held-out objects (either view missing at random as in training) whose kind is
    wrong, served all at once."""
    a, b, mask, label = d.views(2000, 3)
    return (model.predict(a, b, mask) != label).float().mean().item()


@torch.no_grad()
def maze_error(model) -> float:
    """The mean absolute error (moves) of the served path length on 2,000 held-out mazes."""
    planes, length = d.mazes(2000, 3)
    return (model.predict(planes) - length).abs().mean().item()


BOARD, CHORD = (m.BoardNet, gallery.board_data), (m.ChordNet, gallery.chord_data)
DYNAMICS, FUSION = (m.ODENet, gallery.dynamics_data), (m.FusionNet, gallery.fusion_data)
MAZE = (m.MazeNet, gallery.maze_data)

PROOFS = {
    "board_colour_flip_reverses_planes": Proof(BOARD, board_error, 1.0, 6),
    "board_value_head_tanh": Proof(BOARD, board_error, 3.0, 6),
    "board_plateau_mode_max": Proof(BOARD, board_error, 1.0, 6),
    "chord_transpose_keeps_label": Proof(CHORD, chord_error, 0.3, 6),
    "chord_transpose_label_mod_24": Proof(CHORD, chord_error, 0.15, 6),
    "dynamics_gap_before_sample": Proof(DYNAMICS, rollout_error, 0.01, 6),
    "dynamics_integrates_mean_gap": Proof(DYNAMICS, rollout_error, 0.01, 6),
    "dynamics_residual_scored_against_state": Proof(DYNAMICS, rollout_error, 0.5, 6),
    "fusion_view_b_sorted_by_kind": Proof(FUSION, fusion_error, 0.1, 6),
    "fusion_mean_over_batch_count": Proof(FUSION, fusion_error, 0.1, 6),
    "fusion_mask_columns_swapped": Proof(FUSION, fusion_error, 0.1, 6),
    "maze_search_takes_diagonals": Proof(MAZE, maze_error, 0.5, 6),
    "maze_loss_broadcasts": Proof(MAZE, maze_error, 0.5, 6),
    "maze_warmup_stepped_per_epoch": Proof(MAZE, maze_error, 0.3, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
