"""Proofs for sealed gallery R's second half (``s``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data (or its validation figure overstates the held-out one); every healthy
case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _s_data as d
from galleries.preflight.sealed import _s_models as m
from galleries.preflight.sealed import s as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def chord_error(model) -> float:
    """The share of 3,000 held-out frames, in all twelve keys, whose chord is misread."""
    frames, chords = d.chroma(3000, 3)
    return (model.predict(frames) != chords).float().mean().item()


@torch.no_grad()
def crop_error(model) -> float:
    """The share of 2,000 held-out fields whose crop is misread (served in batches of 256)."""
    series, crops = d.fields(2000, 3)
    predicted = torch.cat([model.predict(part) for part in series.split(256)])
    return (predicted != crops).float().mean().item()


@torch.no_grad()
def new_patient_error(model) -> float:
    """1 - the balanced accuracy (the mean of the three classes' recalls) on 40 new patients' beats."""
    x, y, _ = d.patients(100, 40)
    predicted = model.predict(x)
    return 1 - torch.stack([(predicted[y == c] == c).float().mean() for c in range(3)]).mean().item()


@torch.no_grad()
def validation_beat_error(model, loaders) -> float:
    """The same figure on the validation loader, as the user reads it."""
    x, y = (torch.cat(parts) for parts in zip(*loaders["val_dataloaders"], strict=True))
    predicted = model.predict(x)
    return 1 - torch.stack([(predicted[y == c] == c).float().mean() for c in range(3)]).mean().item()


@torch.no_grad()
def digit_error(model) -> float:
    """The share of the 497 held-out digits (their true labels, never voted on) misread."""
    x, y = d.digits("test")
    return (model.predict(x) != y).float().mean().item()


@torch.no_grad()
def survival_error(model) -> float:
    """The mean absolute error of the served survival curves against the true ones (all 12 months) of 2,000
    held-out customers."""
    x, _, _ = d.customers(2000, 3)
    return (model.predict(x) - d.true_survival(x)).abs().mean().item()


@torch.no_grad()
def event_error(model) -> float:
    """1 - the frame-level micro F1 of the served event activity on 300 held-out clips as recorded."""
    spectra, labels = d.clips(300, 3)
    predicted = model.predict(spectra).float()
    hits = (predicted * labels).sum()
    return 1 - (2 * hits / (predicted.sum() + labels.sum())).item()


CHORD, CROP = (m.ChordNet, gallery.chord_data), (m.CropNet, gallery.crop_data)
BEATS, MANUAL = (m.BeatNet, gallery.beat_data), (m.ManualBeatNet, gallery.beat_data)
CROWD, CHURN = (m.CrowdNet, gallery.crowd_data), (m.HazardNet, gallery.churn_data)
PROPORTIONS = (m.ProportionNetStepDecay, gallery.proportion_data)
EVENTS, EMA = (m.EventDetector, gallery.event_data), (m.EventDetectorEMA, gallery.event_data)

PROOFS = {
    "chord_transpose_wraps_quality": Proof(CHORD, chord_error, 0.1, 6),
    "crop_time_shift_augmentation": Proof(CROP, crop_error, 0.03, 6),
    "crop_gru_not_batch_first": Proof(CROP, crop_error, 0.1, 6),
    "beats_split_not_by_patient": Proof(
        BEATS, new_patient_error, 0.03, 15, lie=validation_beat_error, worse=False
    ),
    "beats_nll_on_raw_scores": Proof(BEATS, new_patient_error, 0.05, 15),
    "beats_manual_grads_never_zeroed": Proof(MANUAL, new_patient_error, 0.05, 15),
    "crowd_votes_padded_with_zero": Proof(CROWD, digit_error, 0.05, 10),
    "churn_censored_as_event": Proof(CHURN, survival_error, 0.03, 6),
    "churn_no_risk_set": Proof(CHURN, survival_error, 0.03, 6),
    "events_softmax_over_classes": Proof(EVENTS, event_error, 0.05, 6),
    "events_mixed_clip_labels_dropped": Proof(EVENTS, event_error, 0.05, 6),
    "events_ema_decay_without_warmup": Proof(EMA, event_error, 0.05, 6),
    "proportions_decay_stepped_per_batch": Proof(PROPORTIONS, digit_error, 0.1, 10),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=13, healthy=9)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
