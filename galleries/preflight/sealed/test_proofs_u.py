"""Proofs for sealed gallery T's second half (``u``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _u_data as d
from galleries.preflight.sealed import _u_models as m
from galleries.preflight.sealed import u as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def nir_mae(model) -> float:
    """The mean absolute error of the served content (0..1) on 1,000 held-out spectra."""
    spectra, content = d.spectra(1000, 3)
    return (model.predict(spectra) - content).abs().mean().item()


@torch.no_grad()
def soc_rmse(model) -> float:
    """The root mean squared error of the served state of charge (0..1) on 1,000 held-out windows."""
    window, soc = d.cell_windows(1000, 3)
    return (model.predict(window) - soc).pow(2).mean().sqrt().item()


@torch.no_grad()
def jigsaw_error(model) -> float:
    """The share of held-out puzzles (each test digit in all 24 orders, quarter ``perm[i]`` at position
    ``i``) that the served reassembly does not restore exactly."""
    puzzles, _, _ = d.all_puzzles("test")
    x, _ = d.digits("test", (8, 8))
    return (model.reassemble(puzzles) != x.repeat(24, 1, 1)).flatten(1).any(1).float().mean().item()


@torch.no_grad()
def bike_rmse(model) -> float:
    """The root mean squared error of the served expected rentals against the true expected rentals of
    2,000 held-out hours."""
    codes, temp, _, rate = d.rentals(2000, 3)
    return (model.predict(codes, temp) - rate).pow(2).mean().sqrt().item()


@torch.no_grad()
def digit_error(model) -> float:
    """The served error rate on the 497 held-out digits."""
    x, y = d.digits("test", (8, 8))
    return (model.predict(x) != y).float().mean().item()


@torch.no_grad()
def air_rmse(model) -> float:
    """The root mean squared error (ug/m3) of the calibrated PM2.5 on 1,000 held-out hours."""
    rows, reference = d.air_quality(1000, 3)
    return 50 * (model.predict(rows) - reference).pow(2).mean().sqrt().item()


@torch.no_grad()
def affect_mse(model) -> float:
    """The mean squared error of the served (valence, arousal) on 1,000 held-out rows."""
    x, target = d.affect(1000, 3)
    return (model.predict(x) - target).pow(2).mean().item()


@torch.no_grad()
def reported_nir_mae(model, loaders) -> float:
    """The mean absolute error the validation loader reports."""
    spectra, content = (torch.cat(parts) for parts in zip(*loaders["val_dataloaders"], strict=True))
    return (model.predict(spectra) - content).abs().mean().item()


NIR, MIXUP = (m.NIRNet, gallery.nir_data), (m.NIRNetMixup, gallery.nir_data)
SOC, JIGSAW = (m.SOCNet, gallery.soc_data), (m.JigsawNet, gallery.jigsaw_data)
BIKE, DIGITS = (m.BikeNet, gallery.bike_data), (m.DigitTTA, gallery.digit_data)
AIR, AFFECT = (m.AirQNet, gallery.air_data), (m.AffectNet, gallery.affect_data)
EMA, SCANS = (m.AffectNetEMA, gallery.affect_data), (m.NIRNet, gallery.nir_replicate_data)

PROOFS = {
    "nir_mixup_content_not_mixed": Proof(MIXUP, nir_mae, 0.02, 15),
    "nir_shift_augmentation_moves_bands": Proof(NIR, nir_mae, 0.02, 15),
    "nir_replicate_scans_split_apart": Proof(SCANS, nir_mae, 0.01, 15, lie=reported_nir_mae, worse=False),
    "soc_gru_time_major": Proof(SOC, soc_rmse, 0.02, 10),
    "jigsaw_quarters_scattered": Proof(JIGSAW, jigsaw_error, 0.2, 8),
    "bike_softplus_rate_read_as_log": Proof(BIKE, bike_rmse, 5.0, 8),
    "bike_hour_embedding_reads_weekday": Proof(BIKE, bike_rmse, 5.0, 8),
    "tta_mirrored_digits": Proof(DIGITS, digit_error, 0.01, 15),
    "airq_decay_stepped_per_batch": Proof(AIR, air_rmse, 1.0, 6),
    "affect_pearson_not_concordance": Proof(AFFECT, affect_mse, 0.01, 8),
    "affect_ema_decay_from_long_recipe": Proof(EMA, affect_mse, 0.01, 8),
    "affect_concordance_over_targets": Proof(AFFECT, affect_mse, 0.003, 8),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=12, healthy=10)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
