"""Sealed gallery Y (issue #34, half ``y``): explicit-feedback rating prediction by biased matrix
factorisation, listwise learning to rank (ListNet), neural Cox survival models, transductive node
classification with a graph convolution on one citation-like graph, hierarchical topic classification of
bag-of-words documents (a fine softmax with consistent coarse probabilities, served top-down), tabular
regression with categorical embeddings and multiple-instance learning with attention pooling. Written blind
(see the package docstring); each bug is proved against its healthy twin in ``test_proofs_y.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from torch.utils.data import DataLoader

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _y_data as d
from galleries.preflight.sealed import _y_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def rating_data(item_first: bool = False) -> dict[str, Any]:
    """6,000 training ratings and 1,000 validation ratings as (user, item, rating), or, with ``item_first``,
    as the export's (item, user, rating) column order."""
    users, items, rating = d.ratings(6000, 1)
    train = d.Rows(items, users, rating) if item_first else d.Rows(users, items, rating)
    val_users, val_items, val_rating = d.ratings(1000, 2)
    val = d.Rows(val_items, val_users, val_rating) if item_first else d.Rows(val_users, val_items, val_rating)
    return d.loaders(train, val, batch_size=128)


def ranking_data(shuffle=d.docs_shuffled) -> dict[str, Any]:
    """1,500 training queries (their candidates shuffled per read by ``shuffle``) and 300 validation
    queries, 20 candidates each."""
    train = d.Rows(*d.query_lists(1500, 1), transform=shuffle)
    return d.loaders(train, d.Rows(*d.query_lists(300, 2)), batch_size=32)


def survival_data(flag_is_censored: bool = False) -> dict[str, Any]:
    """3,000 training patients and 1,000 validation patients in batches of 256 (the partial likelihood
    compares each event with the rest of its batch); with ``flag_is_censored`` the flag column is the
    registry's 'censored' indicator, read by the model as the event indicator."""

    def rows(n: int, seed: int) -> d.Rows:
        x, time, event, true_time = d.patients(n, seed)
        return d.Rows(x, time, 1 - event if flag_is_censored else event, true_time)

    return d.loaders(rows(3000, 1), rows(1000, 2), batch_size=256, drop_last=True)


def graph_data() -> dict[str, Any]:
    """The one citation graph, whole, as each of 20 training steps an epoch (``batch_size=None``: no batch
    dimension) and once for validation."""
    graph = d.citation_graph()
    return {
        "train_dataloaders": DataLoader(d.Graph(graph, 20), batch_size=None),
        "val_dataloaders": DataLoader(d.Graph(graph, 1), batch_size=None),
        "num_classes": d.NODE_CLASSES,
    }


def topic_data() -> dict[str, Any]:
    """3,000 training documents and 600 validation documents as (word counts, coarse topic, fine topic)."""
    train, val = d.Rows(*d.documents(3000, 1)), d.Rows(*d.documents(600, 2))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.FINE}


def tabular_data(factorized: bool = False) -> dict[str, Any]:
    """3,000 training rows and 600 validation rows as (categories, numbers, row id, log price), categories
    coded by their sorted level names, or, with ``factorized``, each table coded by order of appearance."""

    def rows(n: int, seed: int) -> d.Rows:
        cats, num, ids, price = d.listings(n, seed)
        return d.Rows(d.coded_by_appearance(cats) if factorized else cats, num, ids, price)

    return d.loaders(rows(3000, 1), rows(600, 2), batch_size=64)


def bag_data() -> dict[str, Any]:
    """2,000 training bags and 400 validation bags as (instances, mask, bag label, instance labels)."""
    return d.loaders(d.Rows(*d.bags(2000, 1)), d.Rows(*d.bags(400, 2)), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
CONVENTION = "training labels follow the convention the served model is read with"
DEPENDS = "the output depends on what the task says it depends on"
SHAPES = "tensors are laid out as the layers and losses read them"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
VALIDATION = "validation measures held-out data the model was not fitted to"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "ratings_item_user_columns_swapped",
        "explicit-feedback ratings (biased matrix factorisation)",
        m.RatingMF,
        partial(rating_data, True),
        "The ratings export lists (item, user, rating) and the dataset passes the columns in that order "
        "while the model reads (user, item): with as many users as items nothing fails, the user table "
        "learns the items and the served predictions for real (user, item) pairs are mostly bias noise.",
        PAIRED,
    ),
    SealedCase(
        "ranking_docs_shuffled_without_labels",
        "listwise learning to rank (ListNet; candidate shuffling)",
        m.ListRanker,
        partial(ranking_data, d.docs_shuffled_features_only),
        "The in-list shuffle against position bias indexes the features with a random permutation and leaves "
        "the relevance grades in place: every grade belongs to a random candidate of its list.",
        PAIRED,
    ),
    SealedCase(
        "ranking_served_argsort_ascending",
        "listwise learning to rank (served ranking)",
        m.ListRankerAscending,
        ranking_data,
        "The served ranking is scores.argsort(-1) without descending=True: the least relevant candidates "
        "are shown first, though training and the validation loss look right.",
        CONVENTION,
    ),
    SealedCase(
        "cox_risk_set_sorted_ascending",
        "survival analysis (neural Cox partial likelihood)",
        m.CoxNetAscending,
        survival_data,
        "The batch is sorted by time ascending before the cumulative log-sum-exp: each event's 'risk set' is "
        "the patients who left before it, and the learned risk ordering is largely reversed.",
        TASK_LOSS,
    ),
    SealedCase(
        "cox_censoring_flag_read_as_event",
        "survival analysis (neural Cox; registry flag convention)",
        m.CoxNet,
        partial(survival_data, True),
        "The registry's flag column means 'censored' (1 = still alive at last contact) and is passed where "
        "the loss expects 'event observed': the censored, longer-lived patients are treated as the deaths.",
        CONVENTION,
    ),
    SealedCase(
        "gcn_adjacency_without_self_loops",
        "transductive node classification (graph convolution on one graph)",
        m.GCNNoSelfLoops,
        graph_data,
        "The adjacency is normalised as D^-1/2 A D^-1/2 without adding the identity first: each node's own "
        "description is dropped from its first layer, and nodes are classified from their neighbours.",
        DEPENDS,
    ),
    SealedCase(
        "gcn_validates_on_train_mask",
        "transductive node classification (validation path)",
        m.GCNValidatesOnTrainNodes,
        graph_data,
        "validation_step, copied from training_step, still selects batch['train_mask']: the validation "
        "figure is measured on the 120 labelled training nodes and overstates the accuracy on the others.",
        VALIDATION,
    ),
    SealedCase(
        "topics_parent_map_from_sorted_names",
        "hierarchical topic classification of documents (consistent coarse/fine softmax, top-down serving)",
        m.TopicNetSortedParents,
        topic_data,
        "The fine-to-coarse parent map was built from the sorted topic names (f -> f % 5) while the label "
        "ids follow the taxonomy (f -> f // 4): the coarse term pulls probability to the wrong children and "
        "top-down serving picks the fine topic among the wrong siblings.",
        TASK_LOSS,
    ),
    SealedCase(
        "tabular_categories_factorized_per_table",
        "tabular regression with categorical embeddings (category coding)",
        m.TabularNet,
        partial(tabular_data, True),
        "The training table's categorical columns are coded with pd.factorize (order of first appearance) "
        "while serving codes levels by their sorted names: every embedding row is read for another level.",
        CONVENTION,
    ),
    SealedCase(
        "tabular_plateau_scheduler_per_step",
        "tabular regression with categorical embeddings (learning-rate schedule)",
        m.TabularNetPlateauPerStep,
        tabular_data,
        "ReduceLROnPlateau is stepped every batch on the noisy batch loss (interval 'step', monitor "
        "train_loss): it halves the rate every few steps, and training stalls within the first epoch.",
        SCHEDULE,
    ),
    SealedCase(
        "mil_attention_softmax_over_batch",
        "multiple-instance learning (attention pooling over padded bags)",
        m.AttentionMILSoftmaxOverBatch,
        bag_data,
        "The attention weights are normalised with softmax(0), over the batch's bags at each instance slot "
        "instead of over each bag's instances: a bag's score depends on the other bags in its batch, and "
        "scored in one pass over a held-out file the bags' representations shrink to nothing.",
        SHAPES,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "ratings_mf_with_dropout",
            "explicit-feedback ratings (biases start at 0, global mean a parameter, dropout on factors, "
            "predictions clipped when served)",
            m.RatingMF,
            rating_data,
        ),
        (
            "ranking_listnet_shuffled_lists",
            "listwise learning to rank (ListNet: a cross-entropy between list distributions that never "
            "reaches 0; candidates and grades shuffled together per read)",
            m.ListRanker,
            ranking_data,
        ),
        (
            "ranking_query_normalised_features",
            "listwise learning to rank (features standardised within each list: the list's offset ignored "
            "on purpose)",
            m.ListRankerQueryNormalised,
            ranking_data,
        ),
        (
            "cox_partial_likelihood",
            "survival analysis (Cox partial likelihood: no intercept, a loss near log(batch) at start, "
            "batches of 256 with 40% censored)",
            m.CoxNet,
            survival_data,
        ),
        (
            "gcn_full_graph_masked",
            "transductive node classification (the whole graph as every batch, no batch dimension; loss on "
            "10% of the nodes, the other labels present but masked)",
            m.GCN,
            graph_data,
        ),
        (
            "topics_consistent_hierarchy",
            "hierarchical topic classification (coarse probabilities summed from the fine softmax; two "
            "targets per document)",
            m.TopicNet,
            topic_data,
        ),
        (
            "tabular_row_id_carried",
            "tabular regression with categorical embeddings (a row id in every batch, unused on purpose)",
            m.TabularNet,
            tabular_data,
        ),
        (
            "mil_attention_padded_bags",
            "multiple-instance learning (bags of 4..16 instances padded and masked; attention pooling; the "
            "instance labels in the batch unused)",
            m.AttentionMIL,
            bag_data,
        ),
    )
]
