"""Proofs for sealed gallery R's first half (``r``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data (or, for the split bug, its validation figure overstates the held-out
one); every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _r_data as d
from galleries.preflight.sealed import _r_models as m
from galleries.preflight.sealed import r as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def sum_error(model) -> float:
    """The share of wrong sums over the 497 held-out digits, each paired with a fixed held-out partner."""
    a, b, total = d.digit_pairs("test", 3)
    return (model.predict(a, b) != total).float().mean().item()


@torch.no_grad()
def abundance_error(model) -> float:
    """The mean absolute error of the served abundances of 2,000 held-out pixels, served in batches of 256."""
    spectra, abundance = d.pixels(2000, 3)
    predicted = torch.cat([model.predict(rows) for rows in spectra.split(256)])
    return (predicted - abundance).abs().mean().item()


@torch.no_grad()
def survival_error(model) -> float:
    """The mean absolute error of the served survival curves of 2,000 held-out patients against their true
    curves."""
    x, _, _ = d.patients(2000, 3)
    return (model.predict(x) - d.true_survival(x)).abs().mean().item()


@torch.no_grad()
def beat_error(model) -> float:
    """The share of wrong classes over the beats of 20 new patients."""
    wave, kind, _ = d.beats(20, 3)
    return (model.predict(wave) != kind).float().mean().item()


@torch.no_grad()
def beat_validation_error(model, loaders) -> float:
    """The share of wrong classes the validation loader reports."""
    wrong = [(model.predict(wave) != kind).float() for wave, kind in loaders["val_dataloaders"]]
    return torch.cat(wrong).mean().item()


@torch.no_grad()
def event_error(model) -> float:
    """1 - the frame-level F1 of the served detections over 1,000 held-out clips (frames x events)."""
    mel, _, active = d.clips(1000, 3)
    predicted = model.predict(mel)
    hits = (predicted * active).sum()
    return 1 - (2 * hits / (predicted.sum() + active.sum())).item()


@torch.no_grad()
def crowd_error(model) -> float:
    """The share of held-out digits served with a class other than their true one."""
    x, y = d.digits("test", (64,))
    return (model.predict(x) != y).float().mean().item()


SUM, UNMIX = (m.DigitAdder, gallery.sum_data), (m.Unmixer, gallery.unmixing_data)
SURVIVAL, BEATS = (m.HazardNet, gallery.survival_data), (m.BeatClassifier, gallery.beat_data)
EVENTS, CROWD = (m.EventDetector, gallery.event_data), (m.CrowdClassifier, gallery.crowd_data)

PROOFS = {
    "sum_partner_redrawn_per_read": Proof(SUM, sum_error, 0.2, 20),
    "sum_first_digit_encoded_twice": Proof(SUM, sum_error, 0.2, 20),
    "sum_unfrozen_encoder_not_in_optimizer": Proof(
        (m.DigitAdderWarmStart, gallery.sum_data), sum_error, 0.05, 20
    ),
    "unmixing_softmax_over_batch": Proof(UNMIX, abundance_error, 0.05, 6),
    "unmixing_kl_div_on_probabilities": Proof(UNMIX, abundance_error, 0.05, 6),
    "survival_censored_counted_as_events": Proof(SURVIVAL, survival_error, 0.05, 6),
    "survival_at_risk_mask_missing": Proof(SURVIVAL, survival_error, 0.05, 6),
    "beats_split_by_beat_not_patient": Proof(
        BEATS, beat_error, 0.05, 6, lie=beat_validation_error, worse=False
    ),
    "beats_annotations_one_beat_late": Proof(BEATS, beat_error, 0.1, 6),
    "events_served_without_log_compression": Proof(EVENTS, event_error, 0.1, 8),
    "events_step_decay_per_batch": Proof(EVENTS, event_error, 0.05, 8),
    "crowd_missing_votes_counted_as_zero": Proof(CROWD, crowd_error, 0.1, 8),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=12, healthy=9)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
