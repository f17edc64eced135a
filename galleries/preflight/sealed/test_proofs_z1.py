"""Proofs for sealed gallery Z's first half (``z1``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from functools import partial

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _z1_data as d
from galleries.preflight.sealed import _z1_models as m
from galleries.preflight.sealed import z1 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def rank_error(model) -> float:
    """The share of elements served a wrong rank, over 2,000 held-out lists."""
    x = d.lists(2000, 3)
    return (model.predict(x) != d.ranks(x)).float().mean().item()


@torch.no_grad()
def addition_error(model) -> float:
    """The share of 2,000 held-out additions whose served sum is wrong."""
    pairs = d.operands(2000, 3)
    return (model.predict(d.tokens(pairs)) != pairs.sum(-1)).float().mean().item()


@torch.no_grad()
def registration_error(model) -> float:
    """The mean squared error of the served (shift x, shift y, turn), each scaled to [-1, 1], over two
    correctly moved copies of each of the 497 held-out digits."""
    x, target = d.pairs("test", 3)
    return (model.predict(x) - target).pow(2).mean().item()


@torch.no_grad()
def probe_error(model) -> float:
    """The share of the 497 held-out digits whose served class is wrong."""
    x, label = d.digits("test", (1, 8, 8))
    return (model.predict(x) != label).float().mean().item()


def auc(score: torch.Tensor, label: torch.Tensor) -> float:
    """The area under the ROC curve: the chance a default is scored above a non-default (no ties)."""
    rank = score.argsort().argsort().double() + 1
    positives = label.sum()
    negatives = len(label) - positives
    return ((rank[label == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives)).item()


@torch.no_grad()
def credit_error(model) -> float:
    """1 - the AUC of the served scores on the 2,400 applications of the 24 months after the validation
    ones, at application time."""
    x, default, _ = d.applications(range(30, 54), 3)
    return 1 - auc(model.predict(x), default)


@torch.no_grad()
def volatility_error(model) -> float:
    """The mean squared log ratio of the served variance to the true conditional variance, over 3,000
    held-out windows."""
    x, _, variance = d.return_windows(3000, 3)
    return (model.predict(x).log() - variance.log()).pow(2).mean().item()


SORT, ADD = (m.Ranker, gallery.sorting_data), (m.Adder, gallery.addition_data)
REGISTER, PRETEXT = (m.Registration, gallery.registration_data), (m.RotationPretext, gallery.pretext_data)
CREDIT, VOLATILITY = (m.CreditScorer, gallery.credit_data), (m.VolatilityNet, gallery.volatility_data)
MIRRORED = (m.Registration, partial(gallery.registration_data, d.mirror_pair))  # the flip done right
OVERSAMPLED = (m.CreditScorerPlain, partial(gallery.credit_data, d.oversampler))  # one weight per row

PROOFS = {
    "sort_target_is_sorting_permutation": Proof(SORT, rank_error, 0.2, 6),
    "sort_cross_entropy_on_element_axis": Proof(SORT, rank_error, 0.2, 6),
    "addition_decoder_fed_unshifted_targets": Proof(ADD, addition_error, 0.3, 6),
    "addition_places_in_written_order": Proof(ADD, addition_error, 0.3, 6),
    "addition_final_carry_dropped": Proof(ADD, addition_error, 0.3, 6),
    "registration_flip_keeps_target": Proof(MIRRORED, registration_error, 0.05, 6),
    "registration_turn_in_degrees": Proof(REGISTER, registration_error, 0.05, 6),
    "pretext_probe_left_out_of_optimizer": Proof(PRETEXT, probe_error, 0.3, 6),
    "pretext_probe_on_turn_logits": Proof(PRETEXT, probe_error, 0.3, 6),
    "credit_sampler_given_class_weights": Proof(OVERSAMPLED, credit_error, 0.05, 6),
    "credit_arrears_recorded_at_outcome": Proof(CREDIT, credit_error, 0.02, 6),
    "volatility_window_includes_target_day": Proof(VOLATILITY, volatility_error, 0.5, 6),
    "volatility_std_passed_as_variance": Proof(VOLATILITY, volatility_error, 0.5, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
