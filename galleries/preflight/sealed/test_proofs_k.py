"""Proofs for sealed gallery K, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data (the
split bug instead: its validation figure overstates the held-out one by more than the twin's does); every
healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _k_data as d
from galleries.preflight.sealed import _k_models as m
from galleries.preflight.sealed import k as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def flow_epe(model) -> float:
    """The average end-point error (pixels) of the served motion on held-out centre-cropped pairs."""
    frames, flow = d.centre_crop(*d.blob_pairs(1000, 3))
    return (model.predict(frames) - flow).norm(dim=-1).mean().item()


@torch.no_grad()
def grid_rmse(model) -> float:
    """The RMSE of the served next frame on held-out complete grids, in each field's spreads (K / 8, hPa / 4),
    averaged over the two fields."""
    past, future = d.weather(1000, 3, gaps=0.0)
    spread = torch.tensor([d.TEMPERATURE[1], d.PRESSURE[1]]).view(1, 2, 1, 1)
    return ((model.predict(past) - future) / spread).pow(2).mean(dim=(0, 2, 3)).sqrt().mean().item()


@torch.no_grad()
def retrieval_miss(model) -> float:
    """1 - R-precision on held-out queries over the whole corpus: the share of a query's top 4 documents that
    are not among its product's 4."""
    documents, product = d.corpus()
    query, query_product = d.queries(2, 3)
    top = model(query, documents).topk(d.PARAPHRASES, dim=1).indices
    return 1 - (product[top] == query_product[:, None]).float().mean().item()


@torch.no_grad()
def zero_shot_error(model) -> float:
    """The zero-shot error rate on held-out clips: the class prompt the served model finds most similar."""
    audio, _, label = d.clips(1000, 3)
    return (model.predict(audio) != label).float().mean().item()


@torch.no_grad()
def digit_error(model) -> float:
    x, y = sealed.digits("test")
    return (model.predict(x) != y).float().mean().item()


@torch.no_grad()
def validation_error(model, loaders: dict[str, Any]) -> float:
    """What validation reports: the error rate on the validation rows."""
    wrong = [(model.predict(x) != y).float() for x, y in loaders["val_dataloaders"]]
    return torch.cat(wrong).mean().item()


FLOW, GRID = (m.FlowNet, gallery.flow_data), (m.GridNet, gallery.weather_data)
RETRIEVAL, CLAP = (m.DualEncoder, gallery.retrieval_data), (m.AudioText, gallery.clip_data)
TEACHER = (m.MeanTeacher, gallery.semi_data)

PROOFS = {
    "flow_flip_keeps_target": Proof(FLOW, flow_epe, 0.3, 5),
    "flow_crop_per_frame": Proof(FLOW, flow_epe, 0.3, 5),
    "grid_gaps_filled_with_zero": Proof(GRID, grid_rmse, 1.0, 5),
    "grid_one_scalar_normaliser": Proof(GRID, grid_rmse, 0.3, 5),
    "grid_stats_broadcast_over_time": Proof(GRID, grid_rmse, 0.3, 5),
    "retrieval_paraphrases_mined_as_negatives": Proof(RETRIEVAL, retrieval_miss, 0.05, 8),
    "retrieval_temperature_multiplies": Proof(RETRIEVAL, retrieval_miss, 0.1, 8),
    "clap_speed_perturbation": Proof(CLAP, zero_shot_error, 0.1, 12),
    "clap_decay_per_step": Proof(CLAP, zero_shot_error, 0.2, 12),
    "active_acquires_surest_rows": Proof((m.DigitNet, gallery.active_data), digit_error, 0.05, 6),
    "active_oversampled_before_split": Proof(
        (m.DigitNet, gallery.labelled_split_data), digit_error, 0.03, 6, lie=validation_error, worse=False
    ),
    "semi_unlabelled_read_as_zero": Proof(TEACHER, digit_error, 0.3, 6),
    "semi_teacher_updated_per_epoch": Proof(TEACHER, digit_error, 0.1, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=13, healthy=11)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=4)
