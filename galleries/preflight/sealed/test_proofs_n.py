"""Proofs for sealed gallery N, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data;
every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch
import torch.nn.functional as F

from galleries import sealed
from galleries.preflight.sealed import _n_data as d
from galleries.preflight.sealed import _n_models as m
from galleries.preflight.sealed import n as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def assay_log_loss(model) -> float:
    """The mean log loss of the served probabilities on held-out molecules with every assay measured."""
    x, y = d.molecules(2000, 3, measured=1.0)
    return F.binary_cross_entropy(model.predict(x).clamp(1e-6, 1 - 1e-6), y).item()


@torch.no_grad()
def imputation_error(model) -> float:
    """The squared error of the served series at a fixed quarter of the observed readings of held-out series
    (hidden from the model), relative to the readings' variance."""
    inputs, visible, target, hidden = d.held_out_series(1000, 3)
    error = ((model.predict(inputs, visible) - target) ** 2 * hidden).sum() / hidden.sum()
    return (error / target[hidden.bool()].var()).item()


def imputation_validation_error(model, loaders: dict[str, Any]) -> float:
    """What validation reports: the ``val_loss`` a Lightning validation run logs, relative to the variance of
    the validation series' observed readings (as :func:`imputation_error` is)."""
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    (logged,) = trainer.validate(model, loaders["val_dataloaders"], verbose=False)
    (series,) = d.sensor_series(400, 2)
    return logged["val_loss"] / series[~series.isnan()].var().item()


@torch.no_grad()
def change_miss(model) -> float:
    """1 - the intersection over union of the served change masks with the true ones on held-out pairs."""
    before, after, mask = d.image_pairs(1000, 3)
    predicted, truth = model.predict(before, after), mask.bool()
    return 1 - ((predicted & truth).sum() / (predicted | truth).sum()).item()


@torch.no_grad()
def gesture_error(model) -> float:
    """The error rate on held-out gesture sequences, served in batches of 64."""
    points, label = d.gestures(2000, 3)
    predicted = torch.cat([model.predict(chunk) for chunk in points.split(64)])
    return (predicted != label).float().mean().item()


@torch.no_grad()
def heater_mae(model) -> float:
    """The mean absolute error (kW) of the heater's served power at every midpoint of a held-out house."""
    window, power = d.seq2point(*d.house(6000, 3), stride=1)
    return (model.predict(window) - power).abs().mean().item()


@torch.no_grad()
def digit_error(model) -> float:
    """The error rate on the clean held-out digits."""
    x, y = d.digits("test")
    return (model.predict(x) != y).float().mean().item()


ASSAYS, SERIES = (m.AssayNet, gallery.assay_data), (m.Imputer, gallery.series_data)
CHANGE, GESTURE = (m.ChangeNet, gallery.change_data), (m.GestureGRU, gallery.gesture_data)
MAINS = (m.Seq2Point, gallery.mains_data)

PROOFS = {
    "assays_unmeasured_as_inactive": Proof(ASSAYS, assay_log_loss, 0.1, 6),
    "imputer_scored_on_visible_readings": Proof(SERIES, imputation_error, 0.2, 6),
    "imputer_validated_on_observed_readings": Proof(
        SERIES, imputation_error, 0.02, 6, lie=imputation_validation_error, worse=False
    ),
    "imputer_manual_loop_without_zero_grad": Proof(
        (m.ImputerManual, gallery.series_data), imputation_error, 0.1, 6
    ),
    "change_pair_flipped_independently": Proof(CHANGE, change_miss, 0.1, 8),
    "change_after_image_encoded_twice": Proof(CHANGE, change_miss, 0.2, 8),
    "gesture_mirror_keeps_swipe_label": Proof(GESTURE, gesture_error, 0.1, 6),
    "gesture_gru_not_batch_first": Proof(GESTURE, gesture_error, 0.2, 6),
    "gesture_centred_on_each_frame": Proof(
        (m.GestureGRUCentred, gallery.gesture_data), gesture_error, 0.2, 6
    ),
    "seq2point_target_after_window": Proof(MAINS, heater_mae, 0.05, 6),
    "seq2point_step_lr_per_batch": Proof(MAINS, heater_mae, 0.05, 6),
    "small_loss_selection_keeps_largest": Proof(
        (m.SmallLossNet, gallery.noisy_digit_data), digit_error, 0.1, 8
    ),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=12, healthy=8)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
