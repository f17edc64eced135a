"""Proofs for sealed gallery ZZ2's second half (``zz2``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zz2_data as d
from galleries.preflight.sealed import _zz2_models as m
from galleries.preflight.sealed import zz2 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def imputation_error(model) -> float:
    """The mean squared error of the served values in the 30% of entries missing (NaN) from 2,000 held-out
    rows."""
    _, mask, whole = d.masked_table(2000, 3)
    served = model.predict(torch.where(mask.bool(), torch.nan, whole))
    return ((served - whole) ** 2 * mask).sum().item() / mask.sum().item()


@torch.no_grad()
def effect_error(model) -> float:
    """The root mean squared error of the served effect against the true one on 2,000 held-out customers
    (PEHE)."""
    x, _, _ = d.uplift(2000, 3)
    return (model.predict(x) - d.effect(x)).pow(2).mean().sqrt().item()


@torch.no_grad()
def displacement_error(model) -> float:
    """The average displacement error of the 8 served future positions of 2,000 held-out tracks."""
    past, future = d.split_tracks(2000, 3)
    return (model.predict(past) - future).norm(dim=-1).mean().item()


@torch.no_grad()
def inpainting_error(model) -> float:
    """The mean squared error of the served pixels inside the 4 x 4 holes of the 497 held-out digits."""
    x, clean = d.holed_digits("test", 3)
    hole = x[:, 1:]
    return (((model.predict(x) - clean) ** 2) * hole).sum().item() / hole.sum().item()


@torch.no_grad()
def keyword_error(model) -> float:
    """The balanced error (the mean over the 7 classes of each class's error rate) on 2,000 held-out
    clips."""
    spec, label = d.spectrograms(2000, 3)
    wrong = (model.predict(spec) != label).float()
    return torch.stack([wrong[label == c].mean() for c in range(d.CLASSES)]).mean().item()


@torch.no_grad()
def pendulum_error(model) -> float:
    """The mean squared error of the served next state (angle, velocity) of 2,000 held-out transitions."""
    x, after = d.pendulum(2000, 3)
    return (model.predict(x) - after).pow(2).mean().item()


IMPUTE, UPLIFT = (m.Imputer, gallery.imputation_data), (m.TLearner, gallery.uplift_data)
TRACK, INPAINT = (m.TrajectoryMLP, gallery.trajectory_data), (m.Inpainter, gallery.inpainting_data)
SHIFTED = (m.KeywordCNN, partial(gallery.keyword_data, d.time_shift))
BALANCED = (m.KeywordCNN, partial(gallery.keyword_data, inverse=True))
PENDULUM, WARMUP = (m.PendulumStep, gallery.pendulum_data), (m.PendulumStepWarmup, gallery.pendulum_data)

PROOFS = {
    "imputation_loss_on_observed_entries": Proof(IMPUTE, imputation_error, 0.2, 6),
    "imputation_masked_fill_result_dropped": Proof(IMPUTE, imputation_error, 0.2, 6),
    "uplift_both_heads_on_every_row": Proof(UPLIFT, effect_error, 0.3, 6),
    "uplift_treatment_left_unshuffled": Proof(UPLIFT, effect_error, 0.3, 6),
    "uplift_effect_served_reversed": Proof(UPLIFT, effect_error, 0.5, 6),
    "trajectory_future_sliced_one_early": Proof(TRACK, displacement_error, 0.2, 6),
    "trajectory_halves_reversed_apart": Proof(TRACK, displacement_error, 0.2, 6),
    "trajectory_served_from_first_position": Proof(TRACK, displacement_error, 1.0, 6),
    "inpainting_hole_cut_into_stored_digit": Proof(INPAINT, inpainting_error, 0.02, 6),
    "inpainting_hole_generator_reseeded_per_read": Proof(INPAINT, inpainting_error, 0.02, 6),
    "inpainting_composite_mask_inverted": Proof(INPAINT, inpainting_error, 0.02, 6),
    "keyword_time_shift_rolls_frequency": Proof(SHIFTED, keyword_error, 0.1, 6),
    "keyword_sampler_weights_not_inverted": Proof(BALANCED, keyword_error, 0.1, 6),
    "pendulum_simulated_with_default_step": Proof(PENDULUM, pendulum_error, 0.01, 6),
    "pendulum_warmup_stepped_per_epoch": Proof(WARMUP, pendulum_error, 0.02, 6),
    "pendulum_served_times_dt_twice": Proof(PENDULUM, pendulum_error, 0.05, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
