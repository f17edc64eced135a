"""Proofs for sealed gallery I, with plain torch and Lightning (no ``lightning_recipes``): every bug costs
more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean held-out data (and
where the bug also flatters validation, its validation figure overstates the held-out one by more than the
twin's does); every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F

from galleries import sealed
from galleries.preflight.sealed import _i_data as d
from galleries.preflight.sealed import _i_models as m
from galleries.preflight.sealed import i as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def bandit_error(model) -> float:
    """The share of held-out digits whose served arm is not paid (the regret per context)."""
    x, y = sealed.digits("test")
    return (model.predict(x) != y).float().mean().item()


@torch.no_grad()
def hole_error(model) -> float:
    """The MSE of the served fill on the holes of held-out digits, relative to the holes' variance."""
    masked, mask, image = d.holed_digits("test", 3)
    hole = mask.bool()
    return (((model.predict(masked, mask) - image)[hole] ** 2).mean() / image[hole].var()).item()


@torch.no_grad()
def task_error(model) -> float:
    """The MSE on held-out rows of every task, relative to the target's variance."""
    x, task, y = d.task_rows(2000, 3)
    return (((model(x, task) - y) ** 2).mean() / y.var()).item()


@torch.no_grad()
def next_gap_nll(model) -> float:
    """The exponential negative log-likelihood of the 33rd gap of held-out streams under the rate served
    after their first 32 gaps."""
    (gaps,) = d.event_gaps(2000, 3)
    rate = model.predict(gaps[:, :-1])
    return (-rate.log() + rate * gaps[:, -1]).mean().item()


@torch.no_grad()
def validation_nll(model, loaders: dict[str, Any]) -> float:
    """What validation reports: the mean loss over the validation streams."""
    return torch.stack([model.loss(batch) for batch in loaders["val_dataloaders"]]).mean().item()


@torch.no_grad()
def digit_nll(model) -> float:
    """The negative log-likelihood of the served probabilities on held-out digits."""
    x, y = sealed.digits("test")
    return F.nll_loss(model.predict(x).clamp_min(1e-8).log(), y).item()


@torch.no_grad()
def uncertainty_miss(model) -> float:
    """1 - the AUROC of the served uncertainty (the members' disagreement) at flagging the ensemble's wrong
    answers on held-out digits (0.5: it tells nothing)."""
    x, y = sealed.digits("test")
    wrong = model.predict(x).argmax(-1) != y
    spread = model.disagreement(x)
    flagged, passed = spread[wrong][:, None], spread[~wrong][None]
    return 1 - ((flagged > passed).float() + 0.5 * (flagged == passed).float()).mean().item()


@torch.no_grad()
def served_in_small_batches(model, size: int = 7) -> float:
    """The error rate on held-out digits served as requests of ``size`` rows, in their order."""
    x, y = sealed.digits("test")
    predicted = torch.cat([model.predict(rows).argmax(-1) for rows in x.split(size)])
    return (predicted != y).float().mean().item()


@torch.no_grad()
def target_error(model) -> float:
    """The error rate on held-out rows of the target domain (whose labels training never saw)."""
    x, y = d.domain_rows(2000, 3, "target")
    return (model.predict(x) != y).float().mean().item()


@torch.no_grad()
def credit_log_loss(model) -> float:
    x, default = d.credit_rows(4000, 3)
    return F.binary_cross_entropy(model.predict(x).clamp(1e-6, 1 - 1e-6), default).item()


BANDIT, FILM, TPP = (
    (m.DigitBandit, gallery.bandit_data),
    (m.FiLMNet, gallery.task_data),
    (m.GapGRU, gallery.event_data),
)
DANN, INPAINT = (m.DANN, gallery.adaptation_data), (m.InpaintNet, gallery.inpaint_data)

PROOFS = {
    "bandit_log_prob_broadcasts": Proof(BANDIT, bandit_error, 0.3, 6),
    "bandit_greedy_actions_in_training": Proof(BANDIT, bandit_error, 0.1, 6),
    "bandit_logged_without_propensity": Proof((m.DigitOffPolicy, gallery.logged_data), bandit_error, 0.04, 4),
    "inpaint_loss_on_visible_pixels": Proof(INPAINT, hole_error, 0.3, 6),
    "inpaint_hole_cut_in_place": Proof(INPAINT, hole_error, 0.3, 6),
    "calibration_fit_on_scorer_training_rows": Proof(
        (m.CalibratedScorer, gallery.calibration_data), digit_nll, 0.2, 4
    ),
    "film_reads_first_rows_task": Proof(FILM, task_error, 0.2, 6),
    "tpp_outputs_not_shifted": Proof(TPP, next_gap_nll, 0.1, 6, lie=validation_nll),
    "tpp_compensator_dropped": Proof(TPP, next_gap_nll, 0.5, 6),
    "ensemble_one_member_five_times": Proof((m.DigitEnsemble, gallery.digit_data), uncertainty_miss, 0.2, 8),
    "stacked_members_in_plain_list": Proof((m.StackedEnsemble, gallery.digit_data), digit_nll, 0.1, 8),
    "mc_dropout_switches_batchnorm": Proof(
        (m.MCDropoutNet, gallery.digit_data), served_in_small_batches, 0.02, 6
    ),
    "dann_progress_from_max_steps": Proof(DANN, target_error, 0.05, 6),
    "dann_reversal_without_minus": Proof(DANN, target_error, 0.05, 6),
    "monotone_income_wrong_direction": Proof((m.MonotoneRisk, gallery.credit_data), credit_log_loss, 0.05, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=15, healthy=13)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=4)
