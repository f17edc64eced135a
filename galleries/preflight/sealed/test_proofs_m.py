"""Proofs for sealed gallery M, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data;
every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from galleries import sealed
from galleries.preflight.sealed import _m_data as d
from galleries.preflight.sealed import _m_models as m
from galleries.preflight.sealed import m as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def sample_error(model) -> float:
    """The mean distance of 2,000 points drawn by the served sampler to the nearest of the ring's 8 cluster
    centres (0.19 for points drawn from the data itself)."""
    points = model.sample(2000, sealed.gen(3))
    return torch.cdist(points, d.RING_CENTRES).min(1).values.mean().item()


@torch.no_grad()
def pehe(model) -> float:
    """The root mean squared error of the served treatment effect against the true one, held-out customers."""
    x, _, _ = d.uplift_rows(4000, 3)
    _, effect = d.uplift_truth(x)
    return (model.predict(x) - effect).pow(2).mean().sqrt().item()


@torch.no_grad()
def click_log_loss(model) -> float:
    """The log loss of the served click probability on a held-out, complete (not downsampled) log."""
    codes, clicked = d.clicks(20000, 3)
    return F.binary_cross_entropy(model.predict(codes).clamp(1e-6, 1 - 1e-6), clicked).item()


@torch.no_grad()
def function_error(model) -> float:
    """The MSE of the served values at the target points of held-out functions, given their context."""
    *inputs, target_y = d.sine_tasks(2000, 3)
    return F.mse_loss(model.predict(*inputs), target_y).item()


@torch.no_grad()
def min_ade(model) -> float:
    """minADE over the 3 served hypotheses on held-out tracks (the average displacement of the closest)."""
    past, future = d.tracks(2000, 3)
    hypotheses, _ = model.predict(past)
    return (hypotheses - future[:, None]).norm(dim=-1).mean(-1).min(1).values.mean().item()


@torch.no_grad()
def mode_nll(model) -> float:
    """The negative log of the served chance of the hypothesis closest to the true future, on held-out
    tracks (how well the served scores say which path the agent will take)."""
    past, future = d.tracks(2000, 3)
    hypotheses, chance = model.predict(past)
    closest = (hypotheses - future[:, None]).norm(dim=-1).mean(-1).argmin(1)
    return -chance[torch.arange(len(past)), closest].log().mean().item()


def auc(score: torch.Tensor, label: torch.Tensor) -> float:
    pos, neg = score[label == 1][:, None], score[label == 0][None]
    return ((pos > neg).float() + 0.5 * (pos == neg).float()).mean().item()


@torch.no_grad()
def next_answer_miss(model) -> float:
    """1 - the AUROC of the served chance of a correct last answer of held-out students, given their first
    29 attempts."""
    skill, correct = d.attempts(3000, 3)
    return 1 - auc(model.predict(skill[:, :-1], correct[:, :-1], skill[:, -1]), correct[:, -1])


@torch.no_grad()
def next_answer_validation_miss(model, loaders: dict[str, Any]) -> float:
    """What validation reports: 1 - the AUROC of the scored answers of the validation students."""
    scored = [model.scores(batch) for batch in loaders["val_dataloaders"]]
    return 1 - auc(torch.cat([s for s, _ in scored]).flatten(), torch.cat([c for _, c in scored]).flatten())


@torch.no_grad()
def angular_error(model) -> float:
    """The mean absolute angle (radians) between the served and true heading of held-out readings."""
    x, heading = d.headings(4000, 3)
    gap = (model.predict(x) - heading).abs() % (2 * math.pi)
    return torch.minimum(gap, 2 * math.pi - gap).mean().item()


DIFFUSION, UPLIFT = (m.PointDiffusion, gallery.point_data), (m.TARNet, gallery.uplift_data)
CNP, TRACKS = (m.SineCNP, gallery.sine_data), (m.TrajectoryWTA, gallery.track_data)

PROOFS = {
    "diffusion_target_is_clean_point": Proof(DIFFUSION, sample_error, 0.2, 40),
    "diffusion_schedule_indexed_reversed": Proof(DIFFUSION, sample_error, 0.1, 40),
    "uplift_both_heads_fit_every_outcome": Proof(UPLIFT, pehe, 0.3, 10),
    "uplift_effect_sign_reversed": Proof(UPLIFT, pehe, 0.5, 10),
    "uplift_effect_left_standardised": Proof((m.TARNetStandardised, gallery.uplift_data), pehe, 0.2, 10),
    "ctr_fields_without_offsets": Proof((m.ClickFM, gallery.click_data), click_log_loss, 0.005, 6),
    "ctr_downsampled_served_uncorrected": Proof(
        (m.ClickFMDownsampled, gallery.downsampled_click_data), click_log_loss, 0.05, 6
    ),
    "ctr_sparse_gradients_never_cleared": Proof(
        (m.ClickFMTwoOptimizers, gallery.click_data), click_log_loss, 0.02, 6
    ),
    "cnp_decoder_bounded_by_tanh": Proof(CNP, function_error, 0.05, 15),
    "cnp_step_decay_every_batch": Proof(CNP, function_error, 0.05, 15),
    "trajectory_all_hypotheses_regressed": Proof(TRACKS, min_ade, 0.3, 30),
    "trajectory_rotation_of_past_only": Proof(TRACKS, min_ade, 0.5, 30),
    "trajectory_score_head_not_optimised": Proof(TRACKS, mode_nll, 0.1, 30),
    "knowledge_tracing_inputs_not_shifted": Proof(
        (m.KnowledgeTracer, gallery.attempt_data), next_answer_miss, 0.05, 8, lie=next_answer_validation_miss
    ),
    "heading_regressed_as_raw_radians": Proof((m.HeadingNet, gallery.heading_data), angular_error, 0.05, 10),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=15, healthy=10)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=4)
