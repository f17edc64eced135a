"""Proofs for sealed gallery ZY2 (half ``zy2``), with plain torch and Lightning (no ``lightning_recipes``):
every bug costs more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean
held-out data (or its validation figure overstates that data's); every healthy case fits: its training and
validation losses fall."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zy2_data as d
from galleries.preflight.sealed import _zy2_models as m
from galleries.preflight.sealed import zy2 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
def ranking_error(scores: torch.Tensor, labels: torch.Tensor) -> float:
    """1 - the AUC: the share of (positive, negative) pairs the scores order wrongly."""
    positive, negative = scores[labels == 1], scores[labels == 0]
    return 1 - (positive[:, None] > negative[None, :]).float().mean().item()


@torch.no_grad()
def link_error(model) -> float:
    """1 - the AUC of the served scores of the 292 held-out test edges (never in a loader nor in the
    message-passing graph) against as many non-edges drawn with another seed."""
    pairs, labels = d.scored_pairs(d.edge_split()["test"], 3)
    return ranking_error(model.predict(pairs), labels)


@torch.no_grad()
def validation_link_error(model, loaders) -> float:
    """The same figure on the validation pairs, as validation reports it."""
    pairs, labels = loaders["val_dataloaders"].dataset.tensors
    return ranking_error(model.predict(pairs), labels)


@torch.no_grad()
def sum_error(model) -> float:
    """The share of wrong served sums on 2,000 pairs of the 497 held-out digits."""
    images, labels = d.digit_pairs("test", 2000, 3)
    return (model.predict(images) != labels.sum(1)).float().mean().item()


@torch.no_grad()
def rank_error(model) -> float:
    """The share of wrong served ranks over 2,000 held-out sets of 8 numbers."""
    x, rank = d.number_sets(2000, 3)
    return (model.predict(x) != rank).float().mean().item()


@torch.no_grad()
def motion_error(model) -> float:
    """The share of wrong served directions on 2,000 held-out clips of the 497 held-out digits."""
    clips, direction = d.moving_digits("test", 2000, 3)
    return (model.predict(clips) != direction).float().mean().item()


@torch.no_grad()
def price_error(model) -> float:
    """The mean relative error of the served price on 2,000 held-out houses (the noise alone makes ~0.12)."""
    x, price = d.houses(2000, 3)
    return ((model.predict(x) - price).abs() / price).mean().item()


def balanced_error(served: torch.Tensor, churned: torch.Tensor) -> float:
    """1 - the mean of the recall of churners and of stayers."""
    return 1 - 0.5 * (served[churned == 1].mean() + (1 - served[churned == 0]).mean()).item()


@torch.no_grad()
def churn_error(model) -> float:
    """The balanced error of the served flags on 4,000 new customers' snapshots over the training months."""
    x, churned, _ = d.churn_rows(4000, 3, start=0.0, end=0.8)
    return balanced_error(model.predict(x), churned)


@torch.no_grad()
def future_churn_error(model) -> float:
    """The balanced error of the served flags on 4,000 snapshots of the two periods after the data's end."""
    x, churned, _ = d.churn_rows(4000, 3, start=1.0, end=1.2)
    return balanced_error(model.predict(x), churned)


@torch.no_grad()
def validation_churn_error(model, loaders) -> float:
    """The same figure on the validation rows, as validation reports it."""
    x, churned = loaders["val_dataloaders"].dataset.tensors[:2]
    return balanced_error(model.predict(x), churned)


@torch.no_grad()
def future_churn_ranking_error(model) -> float:
    """1 - the AUC of the churn scores on 4,000 snapshots of the two periods after the data's end (clean
    features, measured at each snapshot)."""
    x, churned, _ = d.churn_rows(4000, 3, start=1.0, end=1.2)
    return ranking_error(model(x), churned)


LINK, LINK_STEP = (
    (m.LinkGNN, gallery.link_data),
    (m.LinkGNNSampledInStep, partial(gallery.link_data, in_batch=True)),
)
SUM, SUM_REGRESSION = (m.DigitSum, gallery.sum_data), (m.DigitSumRegression, gallery.regression_sum_data)
RANK, MOTION = (m.RankTransformer, gallery.rank_data), (m.MotionGRU, gallery.motion_data)
PRICE, PRICE_PENALTY = (m.MonotonePrice, gallery.house_data), (m.MonotonePricePenalty, gallery.house_data)
CHURN = (m.ChurnNet, gallery.churn_data)
LINK_EPOCHS, SUM_EPOCHS, PRICE_EPOCHS = 10, 12, 20

PROOFS = {
    "link_score_reads_source_twice": Proof(LINK, link_error, 0.1, LINK_EPOCHS),
    "link_edges_doubled_before_split": Proof(
        LINK, link_error, 0.03, LINK_EPOCHS, lie=validation_link_error, worse=False
    ),
    "link_labels_concatenated_in_wrong_order": Proof(LINK_STEP, link_error, 0.1, LINK_EPOCHS),
    "digit_sum_target_reads_first_label_twice": Proof(SUM, sum_error, 0.2, SUM_EPOCHS),
    "digit_sum_optimiser_on_head_only": Proof(SUM, sum_error, 0.2, SUM_EPOCHS),
    "digit_sum_regression_served_without_std": Proof(SUM_REGRESSION, sum_error, 0.1, SUM_EPOCHS),
    "rank_attention_causal_mask": Proof(RANK, rank_error, 0.2, 6),
    "rank_cross_entropy_class_axis_last": Proof(RANK, rank_error, 0.2, 6),
    "rank_warmup_stepped_per_epoch": Proof(RANK, rank_error, 0.05, 6),
    "motion_time_reversal_keeps_label": Proof(MOTION, motion_error, 0.2, 6),
    "motion_gru_not_batch_first": Proof(MOTION, motion_error, 0.2, 6),
    "price_monotone_path_on_wrong_column": Proof(PRICE, price_error, 0.1, PRICE_EPOCHS),
    "price_penalty_sign_flipped": Proof(PRICE_PENALTY, price_error, 0.04, PRICE_EPOCHS),
    "price_served_in_logs": Proof(PRICE, price_error, 0.3, PRICE_EPOCHS),
    "churn_random_split": Proof(CHURN, future_churn_error, 0.1, 6, lie=validation_churn_error, worse=False),
    "churn_inactivity_measured_at_export": Proof(CHURN, future_churn_ranking_error, 0.05, 6),
    "churn_pos_weight_inverted": Proof(CHURN, churn_error, 0.1, 6),
}

HEALTHY_EPOCHS = {"link": LINK_EPOCHS, "digit_sum": SUM_EPOCHS, "price": PRICE_EPOCHS}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    epochs = next((n for prefix, n in HEALTHY_EPOCHS.items() if case.id.startswith(prefix)), 6)
    sealed.check_healthy_case_fits(case, epochs=epochs)
