"""Proofs for sealed gallery ZV's second half (``zv2``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data; every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import math
from functools import partial

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _zv2_data as d
from galleries.preflight.sealed import _zv2_models as m
from galleries.preflight.sealed import zv2 as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def orientation_error(model) -> float:
    """The mean absolute angle (degrees) between the served and the true heading of 2,000 held-out arrows."""
    points, heading = d.arrows(2000, 3)
    gap = torch.remainder(model.predict(points) - heading + math.pi, 2 * math.pi) - math.pi
    return math.degrees(gap.abs().mean().item())


@torch.no_grad()
def jet_error(model) -> float:
    """1 - the ROC AUC of the served W probability on 1,000 held-out jets, each served alone (a trigger
    tags jets one at a time)."""
    parts, label = d.jets(1000, 3)
    score = torch.cat([model.predict(p[None]) for p in parts])
    order = score.argsort()
    ranks = torch.empty(len(score))
    ranks[order] = torch.arange(1, len(score) + 1).float()
    positive = label == 1
    n_pos, n_neg = int(positive.sum()), int((~positive).sum())
    auc = (ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
    return 1 - auc.item()


@torch.no_grad()
def traffic_error(model) -> float:
    """The mean absolute error (km/h) of the served next 3 readings of every sensor over the windows of a
    held-out series of 1,500 steps."""
    windows = d.Windows(d.speeds(1500, 3))
    past, ahead = (torch.stack(column) for column in zip(*(windows[i] for i in range(len(windows)))))
    return (model.predict(past) - ahead).abs().mean().item()


@torch.no_grad()
def language_error(model) -> float:
    """The balanced error (the mean over the five languages of the share of their strings served another
    language) on 4,000 held-out strings."""
    counts, language = d.counts_matrix(4000, 3)
    wrong = (model.predict(counts) != language).float()
    return torch.stack([wrong[language == k].mean() for k in range(d.LANGUAGES)]).mean().item()


@torch.no_grad()
def edge_error(model) -> float:
    """1 - the F1 score of the served edge pixels over 500 held-out images."""
    image, edge = d.shapes(500, 3)
    served = model.predict(image)
    hits = (served * edge).sum()
    return 1 - (2 * hits / (served.sum() + edge.sum())).item()


@torch.no_grad()
def portfolio_error(model) -> float:
    """Minus the annualised Sharpe ratio of the served weights, held from each close to the next, over 3,000
    held-out days."""
    features, returns = d.trading_days(3000, 3)
    return -m.Portfolio.sharpe((model.predict(features) * returns).sum(-1)).item()


ORIENT, JET = (m.OrientationNet, gallery.orientation_data), (m.JetTagger, gallery.jet_data)
TURNED_JET = (m.JetTagger, partial(gallery.jet_data, d.turn_jet))
TRAFFIC = (m.TrafficGNN, gallery.traffic_data)
LANGUAGE = (m.LanguageIDWeighted, gallery.language_data)
BALANCED = (m.LanguageID, partial(gallery.language_data, "per string"))
EDGE, PORTFOLIO = (m.EdgeNet, gallery.edge_data), (m.Portfolio, gallery.portfolio_data)

PROOFS = {
    "orientation_raw_angle_regressed": Proof(ORIENT, orientation_error, 10.0, 6),
    "orientation_atan2_arguments_swapped": Proof(ORIENT, orientation_error, 30.0, 6),
    "orientation_mirror_in_step_keeps_angle": Proof(ORIENT, orientation_error, 20.0, 6),
    "jet_padding_mask_read_as_keep": Proof(JET, jet_error, 0.05, 6),
    "jet_rotation_augmentation_wrong_columns": Proof(TURNED_JET, jet_error, 0.1, 6),
    "traffic_adjacency_transposed": Proof(TRAFFIC, traffic_error, 0.2, 6),
    "traffic_target_window_off_by_one": Proof(TRAFFIC, traffic_error, 0.2, 6),
    "traffic_warmup_counted_in_epochs": Proof(TRAFFIC, traffic_error, 0.2, 6),
    "language_sampler_given_class_weights": Proof(BALANCED, language_error, 0.1, 6),
    "language_letters_shuffled_augmentation": Proof(LANGUAGE, language_error, 0.05, 6),
    "language_class_weights_upside_down": Proof(LANGUAGE, language_error, 0.05, 6),
    "edge_pos_weight_inverted": Proof(EDGE, edge_error, 0.05, 10),
    "edge_probability_thresholded_at_zero": Proof(EDGE, edge_error, 0.2, 10),
    "portfolio_returns_same_day": Proof(PORTFOLIO, portfolio_error, 0.5, 6),
    "portfolio_sharpe_not_negated": Proof(PORTFOLIO, portfolio_error, 0.5, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=7)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
