"""Proofs for sealed gallery ZX's second half (``zx2``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data (or its validation figure overstates that data's); every healthy case
fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zx2_data as d
from galleries.preflight.sealed import _zx2_models as m
from galleries.preflight.sealed import zx2 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def colour_error(model) -> float:
    """The mean squared error of the served colour image on 500 held-out images, from their true grey
    (luminance) versions."""
    grey, rgb = d.grey_pairs(500, 3)
    return (model.predict(grey) - rgb).pow(2).mean().item()


@torch.no_grad()
def target_error(model) -> float:
    """The share of the 497 held-out digits, in the target domain, whose served class is wrong."""
    x, label = d.target_digits("test", 3)
    return (model.predict(x) != label).float().mean().item()


OPTIMAL_V = d.optimal_q().max(-1).values


@torch.no_grad()
def regret(model) -> float:
    """The mean over the open cells of V*(s) - V(s) of the served greedy policy (exact; every step costs 1,
    so a policy that never reaches the goal is worth -10)."""
    policy = model.predict(torch.arange(d.STATES))
    return (OPTIMAL_V - d.policy_value(policy))[d.OPEN].mean().item()


@torch.no_grad()
def basket_error(model) -> float:
    """1 - recall@5: the share of the next basket's items missing from the top five served scores, over
    2,000 held-out shoppers."""
    history, basket = d.shoppers(2000, 3)
    top = model.predict(history).topk(5, -1).indices
    hits = basket.gather(1, top).sum(-1)
    return (1 - hits / basket.sum(-1)).mean().item()


@torch.no_grad()
def selective_risk(model) -> float:
    """The error rate (against the noisy labels) of the half of 5,000 held-out points the served confidence
    ranks highest: the risk at 50% coverage."""
    x, label = d.noisy_points(5000, 3)
    guess, confidence = model.predict(x)
    kept = confidence.argsort(descending=True)[:2500]
    return (guess[kept] != label[kept]).float().mean().item()


@torch.no_grad()
def bracket_error(model) -> float:
    """The share of 2,000 held-out strings whose served verdict (probability above one half) is wrong."""
    strings, label = d.bracket_strings(2000, 3)
    return ((model.predict(d.batch_of(strings)) > 0.5).float() != label).float().mean().item()


COLOUR, DANN = (m.Colouriser, gallery.colour_data), (m.DANN, gallery.dann_data)
FQI, BASKET = (m.QNet, gallery.fqi_data), (m.NextBasket, gallery.basket_data)
SOFTMAX, SELECTOR = (m.SoftmaxResponse, gallery.selective_data), (m.SelectorHead, gallery.selective_data)
GRU = (m.BracketGRU, gallery.bracket_data)

PROOFS = {
    "colour_offsets_through_sigmoid": Proof(COLOUR, colour_error, 0.005, 6),
    "colour_grey_made_in_bgr_order": Proof(COLOUR, colour_error, 0.002, 6),
    "dann_gradient_reversal_dropped": Proof(DANN, target_error, 0.1, 12),
    "dann_target_set_is_source": Proof(DANN, target_error, 0.1, 12),
    "fqi_target_network_syncs_itself": Proof(FQI, regret, 0.5, 8),
    "fqi_done_flag_ignored": Proof(FQI, regret, 0.5, 8),
    "fqi_bootstrap_with_logged_action": Proof(FQI, regret, 0.5, 8),
    "fqi_next_state_from_shuffled_log": Proof(FQI, regret, 0.5, 8),
    "basket_target_is_last_history_basket": Proof(BASKET, basket_error, 0.05, 6),
    "basket_cross_entropy_on_argmax": Proof(BASKET, basket_error, 0.05, 6),
    "basket_last_basket_read_from_front": Proof(BASKET, basket_error, 0.05, 6),
    "selective_entropy_served_as_confidence": Proof(SOFTMAX, selective_risk, 0.1, 6),
    "selective_selector_head_not_optimised": Proof(SELECTOR, selective_risk, 0.05, 6),
    "brackets_reversed_without_mirroring": Proof(GRU, bracket_error, 0.03, 6),
    "brackets_negatives_by_dropping_a_bracket": Proof(GRU, bracket_error, 0.1, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
