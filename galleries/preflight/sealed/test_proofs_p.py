"""Proofs for sealed gallery P's first half (``p``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _p_data as d
from galleries.preflight.sealed import _p_models as m
from galleries.preflight.sealed import p as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def pitch_error(model) -> float:
    """The mean absolute error (cents) of the served pitch on held-out frames, unaugmented."""
    wave, f0 = d.tones(2000, 3)
    return (model.predict(wave) - d.cents(f0)).abs().mean().item()


@torch.no_grad()
def sleep_balanced_error(model) -> float:
    """1 - the balanced accuracy (the mean of the five stages' recalls) on 20 held-out nights, each served
    whole and in order."""
    features, stages = d.nights(20, 3)
    predicted = torch.cat([model.predict(night) for night in features.split(d.NIGHT)])
    recalls = [(predicted[stages == s] == s).float().mean() for s in range(d.STAGES)]
    return 1 - torch.stack(recalls).mean().item()


@torch.no_grad()
def rul_rmse(model) -> float:
    """The root mean squared error (cycles) of the served remaining life of 300 held-out engines, each cut
    5..150 cycles before failure (the true life capped at 125, as the targets are)."""
    window, rul = d.truncated_engines(300, 3)
    return (model.predict(window) - rul).pow(2).mean().sqrt().item()


@torch.no_grad()
def segmentation_error(model) -> float:
    """The frame error rate on the annotated frames of 200 held-out videos (every 4th frame)."""
    features, labels = d.subsampled(*d.videos(200, 3))
    annotated = labels != -100
    return (model.predict(features)[annotated] != labels[annotated]).float().mean().item()


@torch.no_grad()
def colour_error(model) -> float:
    """The mean squared error of the served chrominance on 1,000 held-out images."""
    lum, ab = d.colour_images(1000, 3)
    return (model.predict(lum) - ab).pow(2).mean().item()


@torch.no_grad()
def orientation_error(model) -> float:
    """The share of held-out digits, in all four counter-clockwise quarter turns, that the served correction
    does not set upright."""
    images, _, _ = d.turned_digits("test")
    x, _ = d.digits("test", (8, 8))
    upright = x.repeat(4, 1, 1)
    return (model.upright(images) != upright).flatten(1).any(1).float().mean().item()


PITCH, SLEEP = (m.PitchNet, gallery.pitch_data), (m.SleepStager, gallery.sleep_data)
RUL, SEGMENT = (m.RULNet, gallery.rul_data), (m.Segmenter, gallery.segment_data)
COLOUR, ORIENT = (m.Colouriser, gallery.colour_data), (m.OrientationNet, gallery.orientation_data)
EMA, WARMUP = (m.ColouriserEMA, gallery.colour_data), (m.PitchNetWarmup, gallery.pitch_data)

PROOFS = {
    "pitch_resized_crop_keeps_f0": Proof(PITCH, pitch_error, 50.0, 6),
    "pitch_gaussian_blur_precedence": Proof(PITCH, pitch_error, 100.0, 6),
    "pitch_warmup_stepped_per_epoch": Proof(WARMUP, pitch_error, 50.0, 6),
    "sleep_epochs_shuffled_by_loader": Proof(SLEEP, sleep_balanced_error, 0.05, 12),
    "sleep_class_weights_are_frequencies": Proof(SLEEP, sleep_balanced_error, 0.05, 12),
    "rul_window_standardised": Proof(RUL, rul_rmse, 5.0, 6),
    "rul_label_at_window_start": Proof(RUL, rul_rmse, 5.0, 6),
    "rul_flat_targets_broadcast": Proof(RUL, rul_rmse, 5.0, 6),
    "segmentation_labels_cut_not_strided": Proof(SEGMENT, segmentation_error, 0.1, 6),
    "colour_hue_jitter_on_target": Proof(COLOUR, colour_error, 0.02, 6),
    "colour_ema_without_norm_statistics": Proof(
        (m.ColouriserEMA, gallery.colour_data), colour_error, 0.02, 6
    ),
    "orientation_turned_clockwise": Proof(ORIENT, orientation_error, 0.2, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=12, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
