"""Proofs for sealed gallery ZX1's first half (``zx1``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zx1_data as d
from galleries.preflight.sealed import _zx1_models as m
from galleries.preflight.sealed import zx1 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def keypoint_error(model) -> float:
    """The mean distance (pixels) of the served keypoints from the true ones on 1,000 held-out canvases."""
    image, points = d.pins(1000, 3)
    return (model.predict(image) - points).pow(2).sum(-1).sqrt().mean().item()


@torch.no_grad()
def span_error(model) -> float:
    """1 - exact match: the share of 2,000 held-out passages whose served (start, end) is not the answer's
    (inclusive positions)."""
    tokens, spans = zip(*(d.encode(record) for record in d.records(2000, 3)), strict=True)
    served = model.predict(torch.stack(tokens))
    return (served != torch.stack(spans)).any(-1).float().mean().item()


@torch.no_grad()
def episode_error(model) -> float:
    """The query error over 300 held-out 5-way 1-shot episodes of the test digits."""
    target = torch.arange(5).repeat_interleave(5)
    return torch.stack([(model.predict(x, shot=1) != target).float().mean() for x in EPISODES]).mean().item()


EPISODES = d.held_out_episodes(300, 3)


@torch.no_grad()
def density_error(model) -> float:
    """The negative mean served log-density of 5,000 held-out points (nats)."""
    return -model.predict(d.moons(5000, 3)).mean().item()


@torch.no_grad()
def rollout_error(model) -> float:
    """The share of 400 held-out (start, goal) pairs from which the served policy fails to reach the goal."""
    return 1 - d.rollout_success(model.predict, d.starts(400, 3))


@torch.no_grad()
def rating_error(model) -> float:
    """The expected log-loss (nats) of the served win probabilities on 20,000 held-out matches, under the
    true probabilities."""
    x, p, _ = d.matches(20000, 3)
    q = model.predict(x).clamp(1e-6, 1 - 1e-6)
    return -(p * q.log() + (1 - p) * (1 - q).log()).mean().item()


PIN, SPAN = (m.PinDetector, gallery.pin_data), (m.SpanReader, gallery.span_data)
PROTO, FLOW = (m.ProtoNet, gallery.episode_data), (m.RealNVP, gallery.moon_data)
POLICY, RATING = (m.Policy, gallery.demo_data), (m.BradleyTerry, gallery.match_data)

PROOFS = {
    "pin_cross_entropy_over_keypoints": Proof(PIN, keypoint_error, 1.0, 4),
    "pin_heatmap_grid_xy_indexing": Proof(PIN, keypoint_error, 1.0, 4),
    "pin_crop_moves_keypoints_back": Proof(PIN, keypoint_error, 1.0, 4),
    "span_end_loss_on_start_logits": Proof(SPAN, span_error, 0.3, 5),
    "span_end_as_slice_served_inclusive": Proof(SPAN, span_error, 0.3, 5),
    "span_fields_shuffled_after_offsets": Proof(SPAN, span_error, 0.3, 5),
    "proto_squared_distance_as_logit": Proof(PROTO, episode_error, 0.3, 5),
    "proto_episode_classes_randperm_of_way": Proof(PROTO, episode_error, 0.08, 5),
    "flow_coupling_masks_not_alternating": Proof(FLOW, density_error, 0.15, 12),
    "flow_log_det_subtracted": Proof(FLOW, density_error, 1.0, 12),
    "flow_served_without_log_det": Proof(FLOW, density_error, 0.3, 12),
    "bc_actions_indexed_clockwise": Proof(POLICY, rollout_error, 0.3, 5),
    "bc_state_paired_with_previous_action": Proof(POLICY, rollout_error, 0.3, 5),
    "bc_goal_on_agent_plane": Proof(POLICY, rollout_error, 0.3, 5),
    "bc_warmup_stepped_per_epoch": Proof(POLICY, rollout_error, 0.3, 5),
    "bt_skills_added": Proof(RATING, rating_error, 0.05, 5),
    "bt_sigmoid_twice": Proof(RATING, rating_error, 0.02, 5),
    "bt_optimizer_without_skills": Proof(RATING, rating_error, 0.05, 5),
    "bt_ids_relabelled_for_training": Proof(RATING, rating_error, 0.05, 5),
}

HEALTHY_EPOCHS = {"pin": 4, "span": 5, "proto": 5, "flow": 12, "bc": 5, "bt": 5}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=HEALTHY_EPOCHS[case.id.split("_")[0]])
