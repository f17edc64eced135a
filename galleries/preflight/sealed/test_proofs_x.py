"""Proofs for sealed gallery X's first half (``x``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data (or its validation figure overstates that data's); every healthy case
fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _x_data as d
from galleries.preflight.sealed import _x_models as m
from galleries.preflight.sealed import x as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def denoise_error(model) -> float:
    """The mean squared error of the served image against the clean one, on the 497 held-out digits."""
    noisy, clean = d.noisy_digits("test", 3)
    return (model.predict(noisy) - clean).pow(2).mean().item()


@torch.no_grad()
def bearing_error(model) -> float:
    """The share of 2,000 held-out windows whose fault class is wrong."""
    x, label = d.vibrations(2000, 3)
    return (model.predict(x) != label).float().mean().item()


@torch.no_grad()
def interpolation_error(model) -> float:
    """The mean squared error of the served middle frame on 1,000 held-out clips."""
    frames, middle = zip(*(d.middle_frame(clip) for clip in d.clips(1000, 3)), strict=True)
    return (model.predict(torch.stack(frames)) - torch.stack(middle)).pow(2).mean().item()


@torch.no_grad()
def defect_error(model) -> float:
    """1 - the intersection over union of the served masks with the true ones (thresholded at half) over
    500 held-out plates."""
    image, mask = d.downsampled(*d.plates(500, 3))
    served = model.predict(image)
    return 1 - ((served * mask).sum() / ((served + mask) > 0).sum()).item()


@torch.no_grad()
def heart_rate_error(model) -> float:
    """The mean absolute error (bpm) of the served heart rate on 2,000 held-out windows."""
    wave, bpm = d.ppg(2000, 3)
    return (model.predict(wave) - bpm).abs().mean().item()


@torch.no_grad()
def retrieval_error(model) -> float:
    """1 - recall@1: the share of the 497 held-out digits whose nearest training digit (cosine of the served
    embeddings) is of another class."""
    query, query_class = d.digits("test")
    base, base_class = d.digits("train")
    nearest = (model.predict(query) @ model.predict(base).T).argmax(-1)
    return (base_class[nearest] != query_class).float().mean().item()


@torch.no_grad()
def validation_retrieval_error(model, loaders) -> float:
    """The retrieval error the validation set reports: its anchors searched in the training digits."""
    val = loaders["val_dataloaders"].dataset
    base, base_class = d.digits("train")
    nearest = (model.predict(val.x) @ model.predict(base).T).argmax(-1)
    return (base_class[nearest] != val.y).float().mean().item()


DENOISE, BEARING = (m.Denoiser, gallery.denoise_data), (m.BearingCNN, gallery.bearing_data)
INTERP, DEFECT = (m.Interpolator, gallery.interpolation_data), (m.DefectSegmenter, gallery.defect_data)
HEART, TRIPLET = (m.HeartRateNet, gallery.heart_rate_data), (m.TripletEmbedder, gallery.triplet_data)

PROOFS = {
    "denoise_residual_trained_on_clean": Proof(DENOISE, denoise_error, 0.02, 6),
    "denoise_flip_on_noisy_only": Proof(DENOISE, denoise_error, 0.005, 6),
    "bearing_step_decay_per_batch": Proof(BEARING, bearing_error, 0.1, 6),
    "bearing_head_reads_last_step": Proof(BEARING, bearing_error, 0.1, 6),
    "interpolation_middle_index_of_even_clip": Proof(INTERP, interpolation_error, 0.005, 6),
    "defect_mask_and_plate_turned_apart": Proof(DEFECT, defect_error, 0.1, 6),
    "defect_dice_score_added": Proof(DEFECT, defect_error, 0.05, 6),
    "defect_mask_downsampled_by_truncation": Proof(DEFECT, defect_error, 0.05, 6),
    "heart_rate_band_at_wrong_rate": Proof(HEART, heart_rate_error, 10.0, 6),
    "triplet_positive_negative_swapped": Proof(TRIPLET, retrieval_error, 0.2, 6),
    "triplet_validation_from_training_digits": Proof(
        TRIPLET, retrieval_error, 0.02, 6, lie=validation_retrieval_error, worse=False
    ),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=6)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
