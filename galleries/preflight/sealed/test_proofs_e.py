"""Proofs for sealed gallery E, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data (or,
for a validation lie, its validation figure overstates the held-out one by more than the twin's does); every
healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _e_data as d
from galleries.preflight.sealed import _e_models as m
from galleries.preflight.sealed import e as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
def _relative_mse(predicted: torch.Tensor, target: torch.Tensor) -> float:
    """Mean squared error over the target's variance."""
    return (((predicted - target) ** 2).mean() / target.var()).item()


@torch.no_grad()
def graph_error(model) -> float:
    x, adj, y = d.graphs(500, 3)
    return _relative_mse(model(x, adj), y)


@torch.no_grad()
def rank_error(model) -> float:
    """The share of document pairs of different grades ranked the wrong way round, over new queries (new
    documents: a click column, where the model reads one, is 0)."""
    x, grade = d.ranked_lists(500, 3)
    if model.features > d.FEATURES:
        x = torch.cat([x, torch.zeros_like(x[..., :1])], -1)
    score = model(x)
    above = grade[..., :, None] > grade[..., None, :]
    return ((score[..., :, None] <= score[..., None, :]) & above).sum().item() / above.sum().item()


@torch.no_grad()
def face_error(model) -> float:
    x, eyes = d.faces(500, 3)
    return _relative_mse(model.predict(x), eyes)


@torch.no_grad()
def superres_error(model) -> float:
    low, high = d.superres("test")
    return ((model(low) - high) ** 2).mean().item()


@torch.no_grad()
def hidden_patch_error(model) -> float:
    """The squared error on the hidden pixels of test digits, each with a random mask."""
    return model.hidden_error(d.fixed_masks(d.digits("test")[0], 3)).item()


@torch.no_grad()
def patch_val_figure(model, loaders: dict[str, Any]) -> float:
    return torch.stack([model.val_figure(batch) for batch in loaders["val_dataloaders"]]).mean().item()


@torch.no_grad()
def digit_error(model) -> float:
    x, y = d.digits("test")
    return (model(x).argmax(-1) != y).float().mean().item()


@torch.no_grad()
def branch_nll(model) -> float:
    return model.nll(*d.two_branches(1000, 3)).mean().item()


@torch.no_grad()
def density_nll(model) -> float:
    return -model.log_prob(d.moons(1000, 3)).mean().item()


@torch.no_grad()
def sequence_error(model) -> float:
    """Served through whichever padding (right or left) it does best with."""
    return min(
        _relative_mse(model(x, k), y) for x, k, y in (d.sequences(500, 3, pad) for pad in (False, True))
    )


@torch.no_grad()
def bag_error(model) -> float:
    bags, label = d.bags("test", 500, 3)
    return ((model(bags) > 0).float() != label).float().mean().item()


@torch.no_grad()
def action_error(model) -> float:
    """Against the expert's action on the states of new episodes."""
    states, actions = d.trajectories(100, 3)
    return _relative_mse(model(states), actions)


def force_error(model) -> float:
    pos, _, forces = d.molecules(500, 3)
    return _relative_mse(model.predict(pos)[1].detach(), forces)


@torch.no_grad()
def tabular_error(model) -> float:
    """Served through whichever of the two pipelines (marks before or after the fill) it does best with."""
    rows = [d.tabular_rows(1000, 3, after) for after in (False, True)]
    return min(_relative_mse(model(r["features"], r["missing"]), r["target"]) for r in rows)


@torch.no_grad()
def tabular_val_figure(model, loaders: dict[str, Any]) -> float:
    rows = [(model(r["features"], r["missing"]), r["target"]) for r in loaders["val_dataloaders"]]
    return _relative_mse(torch.cat([p for p, _ in rows]), torch.cat([y for _, y in rows]))


GRAPH = (m.GraphNet, gallery.graph_data)
FACES = (m.EyeLocator, gallery.face_data)
SUPERRES = (m.SuperResolver, gallery.superres_data)
PATCHES = (m.PatchFiller, gallery.patch_data)
DENSITY = (m.Flow, gallery.densities)
TRAJECTORIES = (m.Cloner, gallery.trajectory_data)
MOLECULES = (m.PairPotential, gallery.molecules)

PROOFS = {
    "gnn_messages_along_out_edges": Proof(GRAPH, graph_error, 0.2, 6),
    "gnn_node_shuffle_leaves_edges": Proof(GRAPH, graph_error, 0.2, 6),
    "rank_click_count_leaks_grade": Proof((m.ListRanker, gallery.rank_data), rank_error, 0.02, 6),
    "keypoints_flip_keeps_eye_names": Proof(FACES, face_error, 0.1, 8),
    "keypoints_flip_mirrors_heights": Proof(FACES, face_error, 0.1, 8),
    "keypoints_ema_updated_per_epoch": Proof((m.EyeLocatorEMA, gallery.faces), face_error, 0.1, 8),
    "superres_flip_drawn_per_tensor": Proof(SUPERRES, superres_error, 0.002, 8),
    "superres_unfrozen_encoder_never_stepped": Proof(
        (m.StagedSuperResolver, gallery.superres_data), superres_error, 0.002, 8
    ),
    "masked_patches_loss_on_visible": Proof(PATCHES, hidden_patch_error, 0.02, 8),
    "masked_patches_same_mask_every_read": Proof(PATCHES, hidden_patch_error, 0.02, 8),
    "masked_patches_validated_on_all_pixels": Proof(
        PATCHES, hidden_patch_error, 0.01, 8, lie=patch_val_figure, worse=False
    ),
    "mixup_labels_from_second_permutation": Proof(
        (m.MixupDigitNet, gallery.digit_data), digit_error, 0.02, 8
    ),
    "mdn_weighted_sum_of_log_likelihoods": Proof(
        (m.MixtureDensityNet, gallery.branches), branch_nll, 0.3, 12
    ),
    "flow_log_det_subtracted": Proof(DENSITY, density_nll, 0.5, 8),
    "flow_couplings_never_alternate": Proof(DENSITY, density_nll, 0.1, 8),
    "packed_sequences_padded_on_the_left": Proof(
        (m.PackedSequenceRegressor, gallery.sequence_data), sequence_error, 0.1, 6
    ),
    "mil_bag_label_from_first_instance": Proof((m.BagClassifier, gallery.bag_data), bag_error, 0.1, 6),
    "bc_state_logged_with_next_action": Proof(TRAJECTORIES, action_error, 0.05, 8),
    "bc_head_reinitialised_every_epoch": Proof(TRAJECTORIES, action_error, 0.02, 8),
    "forces_without_create_graph": Proof(MOLECULES, force_error, 0.1, 8),
    "forces_sign_flipped": Proof(MOLECULES, force_error, 0.1, 8),
    "tabular_validated_on_back_filled_rows": Proof(
        (m.MissingAwareRegressor, gallery.tabular_data),
        tabular_error,
        0.02,
        6,
        lie=tabular_val_figure,
        worse=False,
    ),
    "tabular_missing_marked_after_fill": Proof(
        (m.MissingAwareRegressor, gallery.tabular_data), tabular_error, 0.03, 6
    ),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=22, healthy=14)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=4)
