"""Proofs for sealed gallery V's first half (``v``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _v_data as d
from galleries.preflight.sealed import _v_models as m
from galleries.preflight.sealed import v as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def sign_error(model) -> float:
    """The error rate on 2,000 held-out RGB crops (as the served camera gives them)."""
    x, y = d.signs(2000, 3)
    return (model.predict(x) != y).float().mean().item()


@torch.no_grad()
def pick_error(model) -> float:
    """The mean absolute error (s) of the served pick on 1,000 held-out whole traces."""
    wave, onset = d.traces(1000, 3)
    return (model.predict(wave) - onset).abs().mean().item()


@torch.no_grad()
def similarity_error(model) -> float:
    """The mean squared error of the served 0..5 score on 2,000 held-out pairs."""
    a, b, score = d.sentence_pairs(2000, 3)
    return (model.predict(a, b) - score).pow(2).mean().item()


@torch.no_grad()
def quality_error(model) -> float:
    """The mean squared error of the served opinion score on the 497 held-out digits in 4 distortions."""
    scan, mos = d.distorted("test", 4, 3)
    return (model.predict(scan) - mos).pow(2).mean().item()


@torch.no_grad()
def position_error(model) -> float:
    """The mean distance (m) between the served (x, y) and the truth at 2,000 held-out positions."""
    rssi, xy = d.fingerprints(2000, 3)
    return (model.predict(d.scaled(rssi)) - xy).norm(dim=-1).mean().item()


@torch.no_grad()
def gaze_error(model) -> float:
    """The mean angular error (degrees, yaw and pitch together) of the served gaze on 2,000 held-out crops."""
    eye, gaze = d.eyes(2000, 3)
    return (model.predict(eye) - gaze).norm(dim=-1).mean().item()


SIGNS, PICK = (m.SignNet, gallery.sign_data), (m.Picker, gallery.picking_data)
SIMILAR, QUALITY = (m.SimilarityNet, gallery.similarity_data), (m.QualityNet, gallery.quality_data)
WIFI, DECAY = (m.Locator, gallery.wifi_data), (m.LocatorStepDecay, gallery.wifi_data)
GAZE, MANUAL = (m.GazeNetTanh, gallery.gaze_data), (m.GazeNetManual, gallery.gaze_data)

PROOFS = {
    "signs_hflip_keeps_label": Proof(SIGNS, sign_error, 0.15, 4),
    "signs_trained_on_bgr": Proof(SIGNS, sign_error, 0.3, 4),
    "picking_crop_keeps_catalogue_onset": Proof(PICK, pick_error, 0.1, 4),
    "picking_onset_seconds_as_samples": Proof(PICK, pick_error, 0.3, 4),
    "similarity_raw_scores": Proof(SIMILAR, similarity_error, 0.5, 5),
    "similarity_pairs_bucketed_scores_not": Proof(SIMILAR, similarity_error, 0.5, 5),
    "quality_photometric_jitter": Proof(QUALITY, quality_error, 0.05, 25),
    "quality_per_image_standardised": Proof(QUALITY, quality_error, 0.2, 25),
    "wifi_labels_row_column": Proof(WIFI, position_error, 10.0, 6),
    "wifi_step_decay_per_batch": Proof(DECAY, position_error, 1.0, 6),
    "gaze_tanh_head_on_degrees": Proof(GAZE, gaze_error, 5.0, 5),
    "gaze_manual_step_without_zero_grad": Proof(MANUAL, gaze_error, 3.0, 5),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=12, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=5)
