"""Proofs for sealed gallery ZV1 (``zv1``), with plain torch and Lightning (no ``lightning_recipes``): every
bug costs more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean
held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zv1_data as d
from galleries.preflight.sealed import _zv1_models as m
from galleries.preflight.sealed import zv1 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def binding_error(model) -> float:
    """The share of 2,000 held-out windows whose binding (a site on either strand) is served wrong."""
    x, bound = d.sequences(2000, 3)
    return (model.predict(x) != bound).float().mean().item()


@torch.no_grad()
def redshift_error(model) -> float:
    """The mean |z_served - z| / (1 + z) over 3,000 held-out galaxies."""
    mags, z, _ = d.galaxies(3000, 3)
    return ((model.predict(mags) - z).abs() / (1 + z)).mean().item()


@torch.no_grad()
def coverage_error(model) -> float:
    """How far the share of 3,000 held-out redshifts inside their served 1-sigma interval is from 68.3%."""
    mags, z, _ = d.galaxies(3000, 3)
    low, high = model.predict_interval(mags)
    return abs(((low <= z) & (z <= high)).float().mean().item() - 0.6827)


@torch.no_grad()
def move_error(model) -> float:
    """The share of the 1,120 held-out positions where the served cell is not a best move (a taken cell
    never is)."""
    x, _, best = d.tictactoe("test")
    return 1 - best.gather(1, model.predict(x)[:, None]).mean().item()


@torch.no_grad()
def premium_error(model) -> float:
    """The mean |log(served / true pure premium)| over 4,000 held-out policies."""
    x, _, _, _, premium = d.policies(4000, 3)
    return (model.predict(x).clamp(min=1e-3) / premium).log().abs().mean().item()


@torch.no_grad()
def deblur_error(model) -> float:
    """The mean squared error of the served signal on 1,000 held-out signals blurred by the sensor."""
    observed, clean = d.observed_pairs(1000, 3)
    return (model.predict(observed) - clean).pow(2).mean().item()


BINDING, PHOTOZ = (m.BindingCNN, gallery.binding_data), (m.PhotoZ, gallery.photoz_data)
GAUSSIAN = (m.PhotoZGaussian, gallery.photoz_data)
MOVES, CLAIMS = (m.MovePicker, gallery.tictactoe_data), (m.PurePremium, gallery.claims_data)
DEBLUR = (m.Deblurrer, gallery.deblur_data)

PROOFS = {
    "binding_reverse_not_complemented": Proof(BINDING, binding_error, 0.05, 6),
    "binding_view_not_transpose": Proof(BINDING, binding_error, 0.05, 6),
    "binding_labels_forward_strand_only": Proof(BINDING, binding_error, 0.05, 6),
    "photoz_served_with_exp": Proof(PHOTOZ, redshift_error, 0.1, 16),
    "photoz_sigma_as_variance": Proof(GAUSSIAN, coverage_error, 0.2, 20),
    "photoz_split_of_sorted_catalogue": Proof(PHOTOZ, redshift_error, 0.01, 16),
    "tictactoe_mask_not_served": Proof(MOVES, move_error, 0.05, 6),
    "tictactoe_move_turned_the_other_way": Proof(MOVES, move_error, 0.05, 6),
    "tictactoe_expert_maximises_for_x": Proof(MOVES, move_error, 0.1, 6),
    "claims_log_target_mse": Proof(CLAIMS, premium_error, 0.2, 10),
    "claims_exposure_applied_twice": Proof(CLAIMS, premium_error, 0.2, 10),
    "claims_step_drops_claim_free_rows": Proof(CLAIMS, premium_error, 0.2, 10),
    "claims_plateau_mode_max": Proof(CLAIMS, premium_error, 0.05, 10),
    "deblur_blur_simulated_as_correlation": Proof(DEBLUR, deblur_error, 0.005, 6),
    "deblur_average_decay_too_slow": Proof(DEBLUR, deblur_error, 0.005, 6),
    "deblur_warmup_per_epoch": Proof(DEBLUR, deblur_error, 0.005, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
