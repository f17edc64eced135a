"""Proofs for sealed gallery ZZ1's first half (``zz1``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zz1_data as d
from galleries.preflight.sealed import _zz1_models as m
from galleries.preflight.sealed import zz1 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def ranking_error(model) -> float:
    """1 - the mean NDCG@5 (graded gains) of the served lists of 2,000 held-out queries."""
    x, grade, mask = d.queries(2000, 3)
    return 1 - d.ndcg(model.predict(x, mask), grade).mean().item()


@torch.no_grad()
def node_error(model) -> float:
    """The share of the nodes of 300 held-out graphs (symmetric adjacency) whose served class is wrong."""
    x, adj, y, _ = d.graphs(300, 3)
    return (model.predict(x, adj) != y).float().mean().item()


@torch.no_grad()
def anomaly_error(model) -> float:
    """1 - the AUROC of the served score for telling the faulty rows (both kinds) of a held-out log of
    3,000 rows, half of them faults."""
    x, status = d.readings(3000, 3, faults=0.5)
    return 1 - d.auroc(model.predict(x), status != d.NORMAL)


@torch.no_grad()
def super_res_error(model) -> float:
    """The mean squared error of the served 16 x 16 images of 500 held-out shapes from their area-averaged
    8 x 8 copies (the camera's)."""
    high = d.shapes(500, 3)
    return (model.predict(d.downsample(high)) - high).pow(2).mean().item()


@torch.no_grad()
def localisation_error(model) -> float:
    """1 - the mean over 1,000 held-out canvases of the served box's IoU with the true one (in pixels),
    counted 0 where the served class is wrong."""
    image, kind, box = d.canvases(1000, 3)
    served_kind, served_box = model.predict(image)
    return 1 - (d.iou(served_box, box[:, 0] * d.SCALE) * (served_kind == kind)).mean().item()


RANK, LAMBDA = (m.Ranker, gallery.ranking_data), (m.LambdaRanker, gallery.ranking_data)
GRAPH, ANOMALY = (m.NodeGCN, gallery.graph_data), (m.AutoEncoder, gallery.anomaly_data)
SUPER_RES, LOCALISE = (m.SuperRes, gallery.super_res_data), (m.Localiser, gallery.localisation_data)

PROOFS = {
    "rank_served_as_ranks": Proof(RANK, ranking_error, 0.2, 5),
    "rank_grades_binarised": Proof(RANK, ranking_error, 0.05, 5),
    "lambdarank_no_zero_grad": Proof(LAMBDA, ranking_error, 0.05, 5),
    "gcn_node_shuffle_keeps_graph": Proof(GRAPH, node_error, 0.1, 12),
    "gcn_loss_on_unlabelled_nodes": Proof(GRAPH, node_error, 0.1, 12),
    "gcn_first_half_labelled": Proof(GRAPH, node_error, 0.1, 12),
    "gcn_edges_stored_once": Proof(GRAPH, node_error, 0.03, 12),
    "autoencoder_trained_on_faults_too": Proof(ANOMALY, anomaly_error, 0.2, 5),
    "autoencoder_skip_connection": Proof(ANOMALY, anomaly_error, 0.05, 5),
    "autoencoder_signed_score": Proof(ANOMALY, anomaly_error, 0.2, 5),
    "autoencoder_rows_standardised": Proof(ANOMALY, anomaly_error, 0.1, 5),
    "super_res_strided_inputs": Proof(SUPER_RES, super_res_error, 0.003, 5),
    "super_res_crop_offset_odd": Proof(SUPER_RES, super_res_error, 0.003, 5),
    "super_res_view_not_pixel_shuffle": Proof(SUPER_RES, super_res_error, 0.003, 5),
    "localise_flip_without_swap": Proof(LOCALISE, localisation_error, 0.2, 6),
    "localise_box_list_broadcast": Proof(LOCALISE, localisation_error, 0.2, 6),
    "localise_served_scale_hw": Proof(LOCALISE, localisation_error, 0.2, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=5)
