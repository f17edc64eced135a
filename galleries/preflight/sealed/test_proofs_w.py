"""Proofs for sealed gallery V's second half (``w``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data (or its validation figure overstates that data's); every healthy case
fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _w_data as d
from galleries.preflight.sealed import _w_models as m
from galleries.preflight.sealed import w as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def pick_error(model) -> float:
    """The mean absolute error (samples at 50 Hz) of the served onset on 1,000 held-out traces with the
    onset anywhere in the window, labelled at 50 Hz."""
    wave, onset = d.traces(1000, 3)
    return (model.predict(wave) - onset).abs().float().mean().item()


@torch.no_grad()
def stay_rmse(model) -> float:
    """The root mean squared error of the served log length of stay on 2,000 held-out admissions, with the
    lab tests of their first 24 hours (all that exists at admission)."""
    table, ward, log_stay = d.stays(2000, 3)
    return (model.predict(table, ward) - log_stay).pow(2).mean().sqrt().item()


@torch.no_grad()
def stay_validation_rmse(model, loaders) -> float:
    """The root mean squared error the validation loader reports."""
    table, ward, log_stay = (torch.cat(parts) for parts in zip(*loaders["val_dataloaders"]))
    return (model.predict(table, ward) - log_stay).pow(2).mean().sqrt().item()


@torch.no_grad()
def solubility_rmse(model) -> float:
    """The root mean squared error of the served log solubility of 1,000 new molecules, one enumerated form
    each."""
    bits, log_s = d.molecules(1000, 3)
    rows, targets = d.enumerated(bits, log_s, 4)
    return (model.predict(rows[:: d.COPIES]) - targets[:: d.COPIES]).pow(2).mean().sqrt().item()


@torch.no_grad()
def solubility_validation_rmse(model, loaders) -> float:
    """The root mean squared error the validation loader reports."""
    rows, targets = (torch.cat(parts) for parts in zip(*loaders["val_dataloaders"]))
    return (model.predict(rows) - targets).pow(2).mean().sqrt().item()


@torch.no_grad()
def share_error(model) -> float:
    """The mean absolute error of the served blast share on 1,000 held-out samples."""
    cells, count, share = d.samples(1000, 3)
    return (model.predict(cells, count) - share).abs().mean().item()


@torch.no_grad()
def quality_error(model) -> float:
    """The mean absolute error of the served opinion score on the 497 held-out digits, distorted."""
    image, score = d.distorted("test", 3)
    return (model.predict(image) - score).abs().mean().item()


@torch.no_grad()
def stability_rmse(model) -> float:
    """The root mean squared error of the served ddG on 2,000 held-out mutations."""
    x, ddg = d.mutations(2000, 3)
    return (model.predict(x) - ddg).pow(2).mean().sqrt().item()


PICK, STAY = (m.Picker, gallery.picking_data), (m.StayNet, gallery.stay_data)
SOLUBILITY = (m.SolubilityNet, gallery.solubility_data)
SHARE, QUALITY = (m.BlastShare, gallery.cytometry_data), (m.QualityNet, gallery.quality_data)
STABILITY = (m.StabilityNet, gallery.stability_data)

PROOFS = {
    "picking_windows_aligned_on_pick": Proof(PICK, pick_error, 10.0, 6),
    "picking_onset_at_recording_rate": Proof(PICK, pick_error, 10.0, 6),
    "stay_labs_counted_over_whole_stay": Proof(STAY, stay_rmse, 0.1, 6, lie=stay_validation_rmse),
    "stay_ward_codes_from_extract": Proof(STAY, stay_rmse, 0.1, 6),
    "solubility_split_after_enumeration": Proof(
        SOLUBILITY, solubility_rmse, 0.1, 10, lie=solubility_validation_rmse, worse=False
    ),
    "cytometry_mean_over_padding": Proof(SHARE, share_error, 0.02, 6),
    "cytometry_sigmoid_twice": Proof((m.BlastShareLogit, gallery.cytometry_data), share_error, 0.02, 6),
    "quality_noise_augmentation_keeps_score": Proof(QUALITY, quality_error, 0.1, 6),
    "quality_plateau_on_batch_loss": Proof(QUALITY, quality_error, 0.1, 6),
    "stability_reverse_keeps_sign": Proof(STABILITY, stability_rmse, 0.2, 15),
    "stability_mutant_columns_copied": Proof(STABILITY, stability_rmse, 0.2, 15),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
