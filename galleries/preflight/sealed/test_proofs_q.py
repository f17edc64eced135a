"""Proofs for sealed gallery P, half ``q``, with plain torch and Lightning (no ``lightning_recipes``): every
bug costs more than a stated minimum and than 3x the seed noise of its healthy twin on the same clean
held-out data (or its validation figure overstates the held-out one); every healthy case fits: its training
and validation losses fall."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _q_data as d
from galleries.preflight.sealed import _q_models as m
from galleries.preflight.sealed import q as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def value_error(model) -> float:
    """The mean squared error of the served values of every inner cell against the exact ones, over 50 draws
    of the distractor readings."""
    cells = torch.arange(1, d.CELLS - 1).repeat(50)
    predicted = model.predict(d.observe(cells, sealed.gen(3)))
    return ((predicted - d.true_values()[cells - 1]) ** 2).mean().item()


@torch.no_grad()
def recommendation_miss(model) -> float:
    """1 - recall@10 of the served recommendations (items already consumed excluded) for 1,000 held-out users
    shown 70% of their history."""
    shown, held = d.fold_in(d.histories(1000, 3), 3)
    return 1 - m.recall_at_10(model.predict(shown), held).item()


@torch.no_grad()
def summary_miss(model) -> float:
    """1 - the share of the true summary among the 3 sentences served for each of 2,000 held-out documents."""
    sents, mask, summary = d.documents(2000, 3)
    return 1 - (model.predict(sents, mask) * summary).sum().item() / summary.sum().item()


@torch.no_grad()
def parameter_error(model) -> float:
    """The root mean squared error of the served parameters on 2,000 held-out recordings, each parameter in
    units of its prior range."""
    curves, params = d.oscillations(2000, 3)
    width = d.PRIOR[:, 1] - d.PRIOR[:, 0]
    return (((model.predict(curves) - params) / width) ** 2).mean().sqrt().item()


@torch.no_grad()
def node_error(model) -> float:
    """The mean squared error of the served node values over 500 held-out graphs, each served alone (a batch
    of one graph), relative to the targets' variance."""
    errors, targets = [], []
    for graph in d.graphs(500, 3):
        x, edges, y = d.collate_graphs([graph])
        errors.append(model.predict(x, edges) - y)
        targets.append(y)
    return (torch.cat(errors).pow(2).mean() / torch.cat(targets).var()).item()


@torch.no_grad()
def ranking_miss(model, x: torch.Tensor, y: torch.Tensor) -> float:
    """1 - the area under the ROC curve: the share of (positive, negative) pairs the served probabilities
    order wrongly (ties count half)."""
    p = model.predict(x)
    pos, neg = p[y == 1][:, None], p[y == 0][None, :]
    return 1 - ((pos > neg).float().mean() + 0.5 * (pos == neg).float().mean()).item()


def screening_miss(model) -> float:
    """1 - AUC on 4,000 held-out patients, standardised by the training panels' scaler."""
    x, y = d.panels(4000, 3)
    return ranking_miss(model, d.Standardiser(d.panels(3000, 1)[0])(x), y)


def screening_miss_oversampled(model) -> float:
    """1 - AUC on 4,000 held-out patients, standardised as the oversampled sets are."""
    x, y = d.panels(4000, 3)
    return ranking_miss(model, d.Standardiser(d.panels(3800, 1)[0][:3040])(x), y)


def validation_ranking_miss(model, loaders: dict[str, Any]) -> float:
    """What validation reports: 1 - AUC on the validation rows."""
    x, y = (torch.cat(t) for t in zip(*loaders["val_dataloaders"], strict=True))
    return ranking_miss(model, x, y)


def authorship_error(model) -> float:
    """The balanced error (the mean over authors of the share of their snippets misattributed) on snippets of
    4 new books by each author."""
    x, author, _ = d.snippets((4,) * d.AUTHORS, 3)
    return balanced_error(model, x, author)


def validation_authorship_error(model, loaders: dict[str, Any]) -> float:
    """What validation reports: the balanced error on the validation snippets."""
    x, author = (torch.cat(t) for t in zip(*loaders["val_dataloaders"], strict=True))
    return balanced_error(model, x, author)


@torch.no_grad()
def balanced_error(model, x: torch.Tensor, author: torch.Tensor) -> float:
    wrong = (model.predict(x) != author).float()
    return torch.stack([wrong[author == a].mean() for a in range(d.AUTHORS)]).mean().item()


VALUE, HISTORY = (m.ValueNet, gallery.value_data), (m.MultDAE, gallery.history_data)
SUMMARY, OSCILLATOR = (m.SentenceScorer, gallery.summary_data), (m.OscillatorNet, gallery.oscillator_data)
GRAPH, SCREEN = (m.NodeRegressor, gallery.graph_data), (m.Screener, gallery.screening_data)
OVERSAMPLED = (m.Screener, gallery.oversampled_screening_data)
AUTHORSHIP = (m.AuthorNet, gallery.author_data)

PROOFS = {
    "value_returns_run_across_episodes": Proof(VALUE, value_error, 0.01, 6),
    "value_returns_normalised_per_batch": Proof(VALUE, value_error, 0.05, 6),
    "mult_dae_functional_dropout_served": Proof(HISTORY, recommendation_miss, 0.03, 8),
    "mult_dae_softmax_over_users": Proof(HISTORY, recommendation_miss, 0.05, 8),
    "mult_dae_manual_warmup_never_advanced": Proof(
        (m.MultDAEManual, gallery.history_data), recommendation_miss, 0.05, 8
    ),
    "summary_context_averaged_over_batch": Proof(SUMMARY, summary_miss, 0.1, 8),
    "summary_shuffle_leaves_marks": Proof(SUMMARY, summary_miss, 0.1, 8),
    "oscillator_recordings_peak_normalised": Proof(OSCILLATOR, parameter_error, 0.03, 12),
    "oscillator_plateau_mode_max": Proof(OSCILLATOR, parameter_error, 0.008, 12),
    "graph_collate_without_offsets": Proof(GRAPH, node_error, 0.1, 8),
    "graph_edges_one_way": Proof(GRAPH, node_error, 0.1, 8),
    "graph_ema_decay_too_slow": Proof((m.NodeRegressorEMA, gallery.graph_data), node_error, 0.1, 8),
    "screening_trained_on_raw_units": Proof(SCREEN, screening_miss, 0.1, 8),
    "screening_oversampled_before_split": Proof(
        OVERSAMPLED, screening_miss_oversampled, 0.03, 12, lie=validation_ranking_miss, worse=False
    ),
    "authorship_sampler_weights_by_frequency": Proof(AUTHORSHIP, authorship_error, 0.05, 16),
    "authorship_split_by_snippet": Proof(
        AUTHORSHIP, authorship_error, 0.03, 16, lie=validation_authorship_error, worse=False
    ),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=16, healthy=13)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
