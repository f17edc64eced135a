"""Proofs for sealed gallery Y's second half (``y``), with plain torch and Lightning (no
``lightning_recipes``): every bug costs more than a stated minimum and than 3x the seed noise of its healthy
twin on the same clean held-out data (or, for a validation lie, its validation figure overstates the held-out
one); every healthy case fits: its training and validation losses fall."""

from __future__ import annotations

import pytest
import torch

from galleries import sealed
from galleries.preflight.sealed import _y_data as d
from galleries.preflight.sealed import _y_models as m
from galleries.preflight.sealed import y as gallery
from galleries.sealed import Proof

BUGS = {case.id: case for case in gallery.BUGS}


# --- task metrics on clean held-out data: errors, lower is better -------------------------------------------
@torch.no_grad()
def rating_rmse(model) -> float:
    """The root mean squared error of the served ratings of 2,000 held-out (user, item) pairs."""
    users, items, rating = d.ratings(2000, 3)
    return (model.predict(users, items) - rating).pow(2).mean().sqrt().item()


@torch.no_grad()
def ndcg_error(model) -> float:
    """1 - the mean NDCG@5 (gains 2^grade - 1) of the served rankings of 500 held-out queries."""
    x, relevance = d.query_lists(500, 3)
    gains = 2**relevance - 1
    discount = 1 / torch.log2(torch.arange(5).float() + 2)
    served = (gains.gather(1, model.rank(x)[:, :5]) * discount).sum(1)
    ideal = (gains.sort(1, descending=True).values[:, :5] * discount).sum(1)
    return 1 - (served / ideal.clamp_min(1e-9)).mean().item()


@torch.no_grad()
def concordance_error(model) -> float:
    """1 - the concordance index of the served risk against the true (uncensored) event times of 1,000
    held-out patients: the share of pairs in which the patient with the higher risk dies first."""
    x, _, _, event_time = d.patients(1000, 3)
    risk = model.predict(x)
    earlier = event_time[:, None] < event_time[None, :]
    concordant = (risk[:, None] > risk[None, :]) & earlier
    return 1 - (concordant.sum() / earlier.sum()).item()


def _node_error(model, mask: str) -> float:
    graph = d.citation_graph()
    with torch.no_grad():
        wrong = model.predict(graph) != graph["y"]
    return wrong[graph[mask]].float().mean().item()


def node_error(model) -> float:
    """The error rate on the 840 test nodes of the graph (the whole graph served at once)."""
    return _node_error(model, "test_mask")


def node_validation_error(model, loaders) -> float:
    """The error rate on the nodes the model's ``validation_step`` selects: what its validation reports."""
    return _node_error(model, model.val_mask)


@torch.no_grad()
def fine_topic_error(model) -> float:
    """The fine-topic error rate of the served (top-down) topics of 2,000 held-out documents."""
    counts, _, fine = d.documents(2000, 3)
    return (model.predict(counts) != fine).float().mean().item()


@torch.no_grad()
def price_rmse(model) -> float:
    """The root mean squared error of the served log price of 2,000 held-out rows (levels coded by their
    sorted names, as the serving pipeline codes them)."""
    cats, num, _, price = d.listings(2000, 3)
    return (model.predict(cats, num) - price).pow(2).mean().sqrt().item()


@torch.no_grad()
def bag_error(model) -> float:
    """The error rate of the served bag labels (probability over 0.5) of 2,000 held-out bags, scored in one
    pass."""
    x, mask, label, _ = d.bags(2000, 3)
    return ((model.predict(x, mask) > 0.5).float() != label).float().mean().item()


RATINGS, RANKING = (m.RatingMF, gallery.rating_data), (m.ListRanker, gallery.ranking_data)
COX, GRAPH = (m.CoxNet, gallery.survival_data), (m.GCN, gallery.graph_data)
TOPICS, TABULAR = (m.TopicNet, gallery.topic_data), (m.TabularNet, gallery.tabular_data)

PROOFS = {
    "ratings_item_user_columns_swapped": Proof(RATINGS, rating_rmse, 0.2, 8),
    "ranking_docs_shuffled_without_labels": Proof(RANKING, ndcg_error, 0.2, 4),
    "ranking_served_argsort_ascending": Proof(RANKING, ndcg_error, 0.3, 4),
    "cox_risk_set_sorted_ascending": Proof(COX, concordance_error, 0.1, 8),
    "cox_censoring_flag_read_as_event": Proof(COX, concordance_error, 0.1, 8),
    "gcn_adjacency_without_self_loops": Proof(GRAPH, node_error, 0.05, 5),
    "gcn_validates_on_train_mask": Proof(GRAPH, node_error, 0.05, 5, lie=node_validation_error, worse=False),
    "topics_parent_map_from_sorted_names": Proof(TOPICS, fine_topic_error, 0.1, 5),
    "tabular_categories_factorized_per_table": Proof(TABULAR, price_rmse, 0.3, 6),
    "tabular_plateau_scheduler_per_step": Proof(TABULAR, price_rmse, 0.3, 6),
    "mil_attention_softmax_over_batch": Proof((m.AttentionMIL, gallery.bag_data), bag_error, 0.1, 6),
}


def test_every_bug_has_a_proof() -> None:
    sealed.check_gallery(gallery, PROOFS, bugs=11, healthy=8)


@pytest.mark.parametrize("case_id", list(PROOFS))
def test_bug_is_real(case_id: str) -> None:
    sealed.check_bug_is_real(BUGS[case_id], PROOFS[case_id])


@pytest.mark.parametrize("case", gallery.HEALTHY, ids=lambda case: case.id)
def test_healthy_case_fits(case) -> None:
    sealed.check_healthy_case_fits(case, epochs=6)
