"""Proofs for sealed gallery F, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data (or,
for a validation lie, its validation figure overstates the held-out one by more than the twin's does); every
healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import torch
import torch.nn.functional as F

from galleries import sealed
from galleries.preflight.sealed import _f_data as d
from galleries.preflight.sealed import _f_models as m
from galleries.preflight.sealed import f as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
def _relative_mse(predicted: torch.Tensor, target: torch.Tensor) -> float:
    return (((predicted.squeeze(-1) - target) ** 2).mean() / target.var()).item()


def _error_rate(predicted: torch.Tensor, target: torch.Tensor) -> float:
    if predicted.dim() > 1:
        predicted = predicted.argmax(-1)
    return (predicted != target).float().mean().item()


@torch.no_grad()
def box_error(model) -> float:
    x, _, box = d.canvases("test")
    return ((model(x)[1] - box) ** 2).mean().item()


@torch.no_grad()
def tone_error(model) -> float:
    clip, label, _ = d.tones(1000, 3)
    return _error_rate(model(clip), label)


@torch.no_grad()
def anomaly_error(model) -> float:
    """1 - the AUROC of the forecast-error score at telling spiked chunks from normal ones."""
    chunk, flag = d.series_chunks(1000, 3, anomalies=True)
    score = model(chunk)
    higher = score[flag == 1][:, None] > score[flag == 0][None, :]
    return 1 - higher.float().mean().item()


@torch.no_grad()
def fusion_error(model) -> float:
    batch = d.fused_digits("test")
    return _error_rate(model(batch), batch["target"])


@torch.no_grad()
def new_subject_error(model) -> float:
    x, y, _ = d.subject_rows(20, 3)
    return _relative_mse(model(x), y)


@torch.no_grad()
def subject_val_figure(model, loaders: dict[str, Any]) -> float:
    rows = [(model(x), y) for x, y in loaders["val_dataloaders"]]
    return _relative_mse(torch.cat([p for p, _ in rows]), torch.cat([y for _, y in rows]))


@torch.no_grad()
def decoder_error(model) -> float:
    x, y = d.digits("test")
    return F.mse_loss(model(y), x).item()


@torch.no_grad()
def char_error(model) -> float:
    return _error_rate(*_apply(model, *d.motif_strings(1000, 3)))


def _apply(model, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return model.predict(x), y


@torch.no_grad()
def digit_error(model) -> float:
    return _error_rate(*_apply(model, *d.digits("test")))


@torch.no_grad()
def field_error(model) -> float:
    return _relative_mse(*_apply(model, *d.field(2000, 3)))


@torch.no_grad()
def sensor_error(model) -> float:
    return _relative_mse(*_apply(model, *d.sensor_rows(1000, 3)))


@torch.no_grad()
def curve_nll(model) -> float:
    x, y = d.noisy_curve(2000, 3)
    mean, var = model.predict(x)
    return F.gaussian_nll_loss(mean, y, var).item()


@torch.no_grad()
def preference_error(model) -> float:
    """The share of new pairs ranked against their true utility."""
    a, b, _ = d.preference_pairs(2000, 3)
    return ((model(b) > model(a)) != (d.utility(b) > d.utility(a))).float().mean().item()


@torch.no_grad()
def event_error(model) -> float:
    """The balanced error rate of the served decision (logit > 0)."""
    x, y = d.rare_events(20000, 3)
    said = model(x) > 0
    return 0.5 * ((~said[y == 1]).float().mean() + said[y == 0].float().mean()).item()


DETECTOR = (m.Detector, gallery.detection_data)
TONES = (m.ToneNet, gallery.tone_data)
FORECAST = (m.Forecaster, gallery.series_data)
FUSION = (m.FusionNet, gallery.fusion_data)
FUSION_DROPOUT = (partial(m.FusionNet, dropout=0.3), gallery.fusion_data)
CHARS = (m.CharCNN, gallery.chars)
DIGITS = (m.CheckpointedNet, gallery.digit_data)
FIELD = (m.FieldNet, gallery.fields)
CURVE = (m.HeteroscedasticNet, gallery.curves)

PROOFS = {
    "det_shift_leaves_box": Proof(
        (m.Detector, partial(gallery.detection_data, move_box=True)), box_error, 0.003, 6
    ),
    "det_box_snapped_to_anchors": Proof(DETECTOR, box_error, 0.005, 6),
    "tones_time_stretch_changes_class": Proof(
        (m.ToneNet, partial(gallery.tone_data, d.roll_and_gain)), tone_error, 0.05, 6
    ),
    "tones_epoch_decay_stepped_per_batch": Proof(
        (partial(m.ToneNet, scheduler="epoch"), gallery.tone_data), tone_error, 0.1, 6
    ),
    "tones_curriculum_never_widens": Proof(
        (m.ToneNet, partial(gallery.tone_data, curriculum=True)), tone_error, 0.015, 6
    ),
    "anomaly_window_includes_target": Proof(FORECAST, anomaly_error, 0.1, 6),
    "fusion_side_key_typo": Proof(FUSION, fusion_error, 0.3, 6),
    "fusion_functional_dropout_at_serving": Proof(FUSION_DROPOUT, fusion_error, 0.1, 6),
    "subjects_split_by_row": Proof(
        (m.SubjectRegressor, gallery.subject_data),
        new_subject_error,
        0.3,
        8,
        lie=subject_val_figure,
        worse=False,
    ),
    "decoder_images_sorted_apart_from_labels": Proof(
        (m.ConditionalDecoder, gallery.decoder_data), decoder_error, 0.01, 6
    ),
    "chars_conv_over_embedding_axis": Proof(CHARS, char_error, 0.1, 6),
    "tones_accumulation_zeroed_per_micro_batch": Proof(
        (m.ToneNetAccumulated, gallery.tone_data), tone_error, 0.02, 6
    ),
    "checkpoint_reentrant_block_frozen": Proof(DIGITS, digit_error, 0.02, 6),
    "early_exit_on_raw_logits": Proof((m.EarlyExitNet, gallery.digit_data), digit_error, 0.03, 6),
    "field_custom_softplus_wrong_backward": Proof(FIELD, field_error, 0.01, 6),
    "field_step_warmup_stepped_per_epoch": Proof(FIELD, field_error, 0.01, 6),
    "sensor_running_var_fed_std": Proof((m.SensorRegressor, gallery.sensors), sensor_error, 0.3, 6),
    "hetero_log_std_loss_log_var_predict": Proof(CURVE, curve_nll, 0.1, 6),
    "hetero_mean_detached": Proof(CURVE, curve_nll, 0.1, 6),
    "reward_winner_convention_flipped": Proof((m.RewardModel, gallery.pairs), preference_error, 0.3, 6),
    "reward_grad_norm_clipped_to_1e-3": Proof((m.RewardModelSGD, gallery.pairs), preference_error, 0.1, 6),
    "events_pos_weight_inverted": Proof(
        (lambda: m.EventDetector(gallery.event_weight()), gallery.events), event_error, 0.1, 6
    ),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=22, healthy=16)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=4)
