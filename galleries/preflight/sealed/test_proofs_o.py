"""Proofs for sealed gallery N's second half (``o``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data (and where the bug flatters validation, its validation figure overstates
the held-out one by more than the twin's does); every healthy case fits: its training and validation losses
fall."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _o_data as d
from galleries.preflight.sealed import _o_models as m
from galleries.preflight.sealed import o as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def delay_error(model) -> float:
    """The share of held-out recordings (centre window) whose delay is not read exactly."""
    x, label = d.stereo_clicks(2000, 3)
    window = x[..., d.CENTRE : d.CENTRE + d.WINDOW]
    return (model.predict(window) != label - d.MAX_DELAY).float().mean().item()


@torch.no_grad()
def strip_error(model) -> float:
    """The per-digit error rate on held-out strips of the held-out digits."""
    strip, label = d.strips("test", 2000, 3)
    return (model.predict(strip) != label).float().mean().item()


@torch.no_grad()
def clean_error(model) -> float:
    """The error rate against the clean labels of the held-out digits."""
    x, label = d.digits("test")
    return (model.predict(x) != label).float().mean().item()


@torch.no_grad()
def assay_error(model) -> float:
    """The error rate of the served probability at .5 over all 8 assays of held-out compounds, every assay
    measured."""
    x, y = d.compounds(2000, 3)
    return ((model.predict(x) > 0.5).float() != y).float().mean().item()


@torch.no_grad()
def new_compound_error(model) -> float:
    """The same on held-out new compounds of the replicate study (with effects the bits do not explain)."""
    x, y = d.compounds(2000, 4, own=d.OWN)
    return ((model.predict(x) > 0.5).float() != y).float().mean().item()


@torch.no_grad()
def validation_assay_error(model, loaders: dict[str, Any]) -> float:
    """What validation reports: the error rate at .5 on the validation rows."""
    wrong = [((model.predict(x) > 0.5).float() != y).float().flatten() for x, y in loaders["val_dataloaders"]]
    return torch.cat(wrong).mean().item()


@torch.no_grad()
def balanced_error(model) -> float:
    """The mean over the 10 classes of the error rate on the held-out digits (balanced, as served)."""
    x, label = d.digits("test")
    wrong = (model.predict(x) != label).float()
    return torch.stack([wrong[label == k].mean() for k in range(10)]).mean().item()


@torch.no_grad()
def gap_error(model) -> float:
    """The MSE of the filled-in values on the gaps of held-out series, relative to the series' variance."""
    x, observed = d.gappy_series(2000, 3)
    gap = observed == 0
    return (((model.predict(x, observed) - x)[gap] ** 2).mean() / x.var()).item()


@torch.no_grad()
def rate_error(model) -> float:
    """The mean absolute log ratio of the served yearly claim rate to the true one on held-out policies."""
    x, _, _, rate = d.policies(4000, 3)
    return (model.predict(x).log() - rate.log()).abs().mean().item()


DELAY, STRIP = (m.DelayNet, gallery.delay_data), (m.StripReader, gallery.strip_data)
LONG_TAIL = (m.LogitAdjusted, gallery.long_tail_data)

PROOFS = {
    "tdoa_crop_per_channel": Proof(DELAY, delay_error, 0.2, 6),
    "tdoa_swap_without_negating": Proof(DELAY, delay_error, 0.2, 6),
    "strip_mirror_augmentation": Proof(STRIP, strip_error, 0.03, 6),
    "strip_heads_after_global_pool": Proof(STRIP, strip_error, 0.1, 6),
    "noisy_labels_transition_transposed": Proof(
        (m.ForwardCorrected, gallery.noisy_label_data), clean_error, 0.05, 10
    ),
    "assay_unrun_as_inactive": Proof((m.AssayNet, gallery.assay_data), assay_error, 0.1, 6),
    "assay_replicates_split_by_row": Proof(
        (m.WideAssayNet, gallery.replicate_data),
        new_compound_error,
        0.05,
        8,
        lie=validation_assay_error,
        worse=False,
    ),
    "long_tail_prior_sign_flipped": Proof(LONG_TAIL, balanced_error, 0.05, 24),
    "long_tail_decay_stepped_per_batch": Proof(LONG_TAIL, balanced_error, 0.05, 24),
    "imputation_loss_on_observed_steps": Proof((m.Imputer, gallery.gap_data), gap_error, 0.05, 6),
    "imputation_warm_up_never_stepped": Proof((m.ImputerAccumulated, gallery.gap_data), gap_error, 0.05, 6),
    "claims_exposure_offset_missing": Proof((m.ClaimRate, gallery.claim_data), rate_error, 0.2, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=12, healthy=9)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
