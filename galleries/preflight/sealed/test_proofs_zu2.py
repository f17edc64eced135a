"""Proofs for sealed gallery ZU's second half (``zu2``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zu2_data as d
from galleries.preflight.sealed import _zu2_models as m
from galleries.preflight.sealed import zu2 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def structure_error(model) -> float:
    """The share of the residues of 1,000 held-out chains served the wrong state (1 - Q3)."""
    x, states = d.chain_matrix(1000, 3)
    real = states >= 0
    return (model.predict(x) != states)[real].float().mean().item()


@torch.no_grad()
def association_error(model) -> float:
    """The share of the objects of 2,000 held-out frame pairs served the wrong detection (or "vanished"
    wrongly)."""
    pairs = d.frame_pairs(2000, 3)
    return (model.predict(pairs) != pairs["match"]).float().mean().item()


@torch.no_grad()
def yield_error(model) -> float:
    """The mean absolute error (percentage points) of the served yield against the true one, over 2,000
    held-out reactions listed in either order."""
    fp_a, fp_b, _ = d.reactions(2000, 3, canonical=False)
    return (model.predict(fp_a, fp_b) - d.true_yield(fp_a, fp_b)).abs().mean().item()


@torch.no_grad()
def grasp_error(model) -> float:
    """1 - the ROC AUC of the served probability that the grasp holds, over 3,000 held-out attempts."""
    depth, angle, held = d.grasps(3000, 3)
    score = model.predict(depth, angle)
    ranks = torch.empty(len(score))
    ranks[score.argsort()] = torch.arange(1, len(score) + 1).float()
    positive = held == 1
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    return 1 - ((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)).item()


@torch.no_grad()
def heat_error(model) -> float:
    """The mean squared error of the served solution at T on 1,000 held-out initial conditions."""
    u0, u = d.heat_pairs(1000, 3)
    return (model.predict(u0) - u).pow(2).mean().item()


STRUCTURE = (m.SecondaryStructure, gallery.structure_data)
ASSOCIATION = (m.Associator, gallery.association_data)
YIELD = (m.YieldNet, gallery.yield_data)
GRASP, MANUAL = (m.GraspNet, gallery.grasp_data), (m.GraspNetManual, gallery.grasp_data)
HEAT = (m.HeatCNN, gallery.heat_data)

PROOFS = {
    "structure_collate_sorts_chains_only": Proof(STRUCTURE, structure_error, 0.05, 5),
    "structure_gru_not_batch_first": Proof(STRUCTURE, structure_error, 0.05, 5),
    "structure_functional_dropout_at_serving": Proof(STRUCTURE, structure_error, 0.01, 5),
    "association_softmax_over_rows": Proof(ASSOCIATION, association_error, 0.05, 6),
    "association_vanished_labelled_column_zero": Proof(ASSOCIATION, association_error, 0.05, 6),
    "association_velocity_backwards": Proof(ASSOCIATION, association_error, 0.05, 6),
    "yield_bce_arguments_swapped": Proof(YIELD, yield_error, 10.0, 12),
    "yield_second_reactant_copied": Proof(YIELD, yield_error, 3.0, 12),
    "yield_pair_concatenated": Proof(YIELD, yield_error, 3.0, 12),
    "grasp_rotation_keeps_angle": Proof(GRASP, grasp_error, 0.05, 6),
    "grasp_depth_stretched_per_patch": Proof(GRASP, grasp_error, 0.02, 6),
    "grasp_manual_conv_optimizer_never_stepped": Proof(MANUAL, grasp_error, 0.01, 6),
    "heat_zero_padding": Proof(HEAT, heat_error, 0.001, 6),
    "heat_steplr_interval_step": Proof(HEAT, heat_error, 0.005, 6),
    "heat_reference_wavenumber_per_spacing": Proof(HEAT, heat_error, 0.02, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=14, healthy=10)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=4)
