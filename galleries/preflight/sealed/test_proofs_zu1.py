"""Proofs for sealed gallery ZU1 (``zu1``), with plain torch and Lightning (no ``lightning_recipes``): every
bug costs more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean
held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zu1_data as d
from galleries.preflight.sealed import _zu1_models as m
from galleries.preflight.sealed import zu1 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def disparity_error(model) -> float:
    """The mean absolute disparity error (pixels) over the observable pixels of 1,000 held-out pairs."""
    pair, disparity, valid = d.stereo_pairs(1000, 3)
    if isinstance(model, m.StereoNetRaw):
        pair = d.raw_intensities(pair)
    return (model.predict(pair) - disparity).abs()[valid].mean().item()


@torch.no_grad()
def separation_error(model) -> float:
    """The served voice's squared error relative to the voice's energy, over 1,000 held-out mixtures."""
    mixture, voice, _ = d.mixtures(1000, 3)
    return ((model.predict(mixture) - voice).pow(2).sum() / voice.pow(2).sum()).item()


@torch.no_grad()
def dyck_error(model) -> float:
    """The share of 2,000 held-out words whose membership (balanced or not) is served wrong."""
    tokens, lengths, label = d.bracket_words(2000, 3)
    return (model.predict(tokens, lengths) != label).float().mean().item()


@torch.no_grad()
def reconstruction_error(model) -> float:
    """The mean squared error per pixel of the images reconstructed from 1,000 held-out sinograms."""
    sinogram, image = d.phantoms(1000, 3)
    return (model.predict(sinogram) - image).pow(2).mean().item()


@torch.no_grad()
def star_error(model) -> float:
    """The share of 2,000 held-out stars served the wrong kind."""
    curve, mask, kind = d.light_curves(2000, 3)
    return (model.predict(curve, mask) != kind).float().mean().item()


STEREO = (m.StereoNet, gallery.stereo_data)
SEPARATION, TWO_MASKS = (m.Separator, gallery.separation_data), (m.TwoMaskSeparator, gallery.separation_data)
DYCK = (m.DyckLSTM, gallery.dyck_data)
BALANCED = (m.DyckLSTM, partial(gallery.dyck_data, sampler=d.class_balanced))
TOMOGRAPHY = (m.TomoNet, gallery.tomography_data)
STARS, ACCUMULATED = (m.StarNet, gallery.star_data), (m.StarNetAccumulated, gallery.star_data)

PROOFS = {
    "stereo_crop_disparity_at_origin": Proof(STEREO, disparity_error, 0.15, 8),
    "stereo_right_features_shifted_left": Proof(STEREO, disparity_error, 0.3, 8),
    "stereo_loss_on_occluded_pixels": Proof(STEREO, disparity_error, 1.0, 8),
    "separation_gain_on_mixture_only": Proof(SEPARATION, separation_error, 0.02, 6),
    "separation_sources_in_name_order": Proof(SEPARATION, separation_error, 0.5, 6),
    "separation_encoder_detached": Proof(SEPARATION, separation_error, 0.05, 6),
    "separation_steplr_every_step": Proof(SEPARATION, separation_error, 0.03, 6),
    "separation_mask_softmax_over_time": Proof(TWO_MASKS, separation_error, 0.3, 6),
    "dyck_last_padded_step": Proof(DYCK, dyck_error, 0.2, 6),
    "dyck_labels_count_brackets": Proof(DYCK, dyck_error, 0.1, 6),
    "dyck_sampler_weighted_by_label": Proof(BALANCED, dyck_error, 0.2, 6),
    "tomography_image_turned_not_rescanned": Proof(TOMOGRAPHY, reconstruction_error, 0.02, 8),
    "tomography_sinogram_over_own_max": Proof(TOMOGRAPHY, reconstruction_error, 0.01, 8),
    "tomography_output_channel_broadcast": Proof(TOMOGRAPHY, reconstruction_error, 0.03, 8),
    "stars_mean_over_padding": Proof(STARS, star_error, 0.1, 8),
    "stars_subsample_sorts_times_only": Proof(STARS, star_error, 0.1, 8),
    "stars_grads_cleared_per_epoch": Proof(ACCUMULATED, star_error, 0.2, 8),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=14, healthy=10)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
