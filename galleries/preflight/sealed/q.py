"""Sealed gallery P, half ``q``: Monte-Carlo value estimation from logged episodes (returns-to-go over a flat
buffer), collaborative filtering with a denoising autoencoder over item histories (Mult-DAE), extractive
summarisation by scoring a document's sentence embeddings (pointwise and listwise), simulation-based
inference of a damped oscillator's parameters, node regression on small graphs batched as edge lists,
screening for a rare condition from a lab panel in clinical units (oversampled positives) and authorship
attribution of snippets from word frequencies (imbalanced authors, books held out). Written blind (see the
package docstring); each bug is proved against its healthy twin in ``test_proofs_q.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch.utils.data import DataLoader, WeightedRandomSampler

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _q_data as d
from galleries.preflight.sealed import _q_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def value_data(returns=d.returns_to_go) -> dict[str, Any]:
    """The steps of 500 logged training episodes and of 120 validation episodes, each observation paired with
    its discounted return-to-go as ``returns`` computes it from the flat buffer."""
    obs, rewards, dones = d.episodes(500, 1)
    val_obs, val_rewards, val_dones = d.episodes(120, 2)
    train = d.Rows(obs, returns(rewards, dones))
    return d.loaders(train, d.Rows(val_obs, returns(val_rewards, val_dones)), batch_size=64)


def history_data() -> dict[str, Any]:
    """2,000 training users (each history both the input and the target) and 500 validation users shown 70%
    of their history and asked for the rest."""
    train = d.histories(2000, 1)
    shown, held = d.fold_in(d.histories(500, 2), 2)
    return d.loaders(d.Rows(train, train), d.Rows(shown, held), batch_size=64)


def summary_data(augment=d.shuffle_sentences) -> dict[str, Any]:
    """2,000 training documents (their sentences reordered per read by ``augment``) and 500 validation
    documents."""
    train = d.Rows(*d.documents(2000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.documents(500, 2)), batch_size=64)


def oscillator_data() -> dict[str, Any]:
    """3,000 simulated training recordings (fresh sensor noise per read) and 500 validation recordings."""
    curves, params = d.oscillations(3000, 1, noise=0.0)
    train = d.Rows(curves, params, transform=d.add_noise)
    return d.loaders(train, d.Rows(*d.oscillations(500, 2)), batch_size=64)


def graph_data(collate=d.collate_graphs) -> dict[str, Any]:
    """1,500 training graphs in batches of 32 and 300 validation graphs, batched by ``collate`` into one
    disconnected graph each."""
    train, val = d.graphs(1500, 1), d.graphs(300, 2)
    return {
        "train_dataloaders": DataLoader(train, batch_size=32, shuffle=True, collate_fn=collate),
        "val_dataloaders": DataLoader(val, batch_size=256, collate_fn=collate),
    }


def screening_data(scale_training_rows: bool = True) -> dict[str, Any]:
    """3,000 training and 800 validation patients, standardised by the scaler fitted on the training panels
    (the training rows left in clinical units when ``scale_training_rows`` is false)."""
    x, y = d.panels(3000, 1)
    val_x, val_y = d.panels(800, 2)
    scale = d.Standardiser(x)
    train = d.Rows(scale(x) if scale_training_rows else x, y)
    return d.loaders(train, d.Rows(scale(val_x), val_y), batch_size=64)


def oversampled_screening_data(oversample_first: bool = False) -> dict[str, Any]:
    """3,800 patients (standardised by the first 3,040 records' statistics) split 80/20 at random into
    training and validation rows, the training positives repeated 4 times (or, with the flag, every positive
    repeated before the split)."""
    x, y = d.panels(3800, 1)
    x = d.Standardiser(x[:3040])(x)
    if oversample_first:
        x, y = d.oversample(x, y)
    order = d.permutation(len(y), 5)
    cut = int(0.8 * len(y))
    train_x, train_y = x[order[:cut]], y[order[:cut]]
    if not oversample_first:
        train_x, train_y = d.oversample(train_x, train_y)
    return d.loaders(d.Rows(train_x, train_y), d.Rows(x[order[cut:]], y[order[cut:]]), batch_size=64)


def author_data(weights=d.balancing_weights, split_by_book: bool = True) -> dict[str, Any]:
    """60 snippets from each of 32 books by 5 authors (12 books by the most prolific, 3 by the least): each
    author's last books held out whole for validation (4 of 12, 3 of 8, 2 of 5, 2 of 4, 1 of 3) or, with
    ``split_by_book`` false, a random quarter of the snippets; training snippets drawn with replacement by a
    ``WeightedRandomSampler`` with ``weights``."""
    x, author, book = d.snippets(d.BOOKS, 1)
    if split_by_book:
        firsts = torch.tensor([0, *d.BOOKS]).cumsum(0)
        val_books = torch.cat([firsts[a + 1] - torch.arange(1, n // 4 + 2) for a, n in enumerate(d.BOOKS)])
        is_val = torch.isin(book, val_books)
    else:
        is_val = torch.zeros(len(book), dtype=torch.bool)
        is_val[d.permutation(len(book), 6)[: len(book) // 4]] = True
    sampler = WeightedRandomSampler(weights(author[~is_val]), int((~is_val).sum()))
    train, val = d.Rows(x[~is_val], author[~is_val]), d.Rows(x[is_val], author[is_val])
    return {**d.loaders(train, val, batch_size=32, sampler=sampler), "num_classes": d.AUTHORS}


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
DEPENDS = "the output depends on what the task says it depends on"
SHAPES = "tensors are laid out as the layers read them"
SERVED = "what validation reports is what the model does when served"
MODES = "the model behaves as its mode (training or evaluation) says"
SPLIT = "validation rows are independent of the training rows"
PREPARED = "the model is trained on inputs prepared as the ones it is served"
SAMPLED = "rows are drawn as often as the training scheme declares"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "value_returns_run_across_episodes",
        "Monte-Carlo value estimation from logged episodes (returns-to-go over a flat buffer)",
        m.ValueNet,
        partial(value_data, d.returns_over_buffer),
        "The reward-to-go loop copied from a single-episode script ignores the done flags of the flat "
        "buffer: each episode's returns run on into the next episode's, and the states next to either end "
        "are valued as if the walk went on.",
        TASK_LOSS,
    ),
    SealedCase(
        "value_returns_normalised_per_batch",
        "Monte-Carlo value estimation from logged episodes (value regression)",
        m.ValueNetReturnsNormalisedPerBatch,
        value_data,
        "The returns are standardised per batch before the loss (PPO's advantage normalisation applied to "
        "the value targets): the network learns values relative to each batch, on a scale of standard "
        "deviations, and serves them so.",
        TASK_LOSS,
    ),
    SealedCase(
        "mult_dae_functional_dropout_served",
        "collaborative filtering with a denoising autoencoder over item histories (Mult-DAE)",
        m.MultDAEFunctionalDropout,
        history_data,
        "The input corruption is F.dropout(x, 0.5), whose training flag defaults to True: in evaluation mode "
        "too half of every user's history is dropped at random, and recommendations are built on the rest.",
        MODES,
    ),
    SealedCase(
        "mult_dae_softmax_over_users",
        "collaborative filtering with a denoising autoencoder (multinomial likelihood)",
        m.MultDAESoftmaxOverUsers,
        history_data,
        "The multinomial log-likelihood takes F.log_softmax(logits, 0): the softmax runs over the batch's "
        "users, not over the items, so the scores rank users for each item and a user's ranking of items "
        "carries an arbitrary offset per item.",
        TASK_LOSS,
    ),
    SealedCase(
        "mult_dae_manual_warmup_never_advanced",
        "collaborative filtering with a denoising autoencoder (manual optimisation, learning-rate warmup)",
        m.MultDAEManualWarmupNeverAdvanced,
        history_data,
        "After the switch to manual optimisation nobody steps the scheduler (Lightning leaves it to the "
        "user): the linear warmup stays at its first factor, and the whole run trains at 1% of the "
        "learning rate.",
        SCHEDULE,
    ),
    SealedCase(
        "summary_context_averaged_over_batch",
        "extractive summarisation (scoring sentence embeddings against the document)",
        m.SentenceScorerBatchContext,
        summary_data,
        "The document context is sents.mean(0), from the one-document prototype: in a batch it averages each "
        "sentence slot over the batch's documents, which broadcasts silently, and no sentence is compared to "
        "its own document.",
        SHAPES,
    ),
    SealedCase(
        "summary_shuffle_leaves_marks",
        "extractive summarisation (sentence-order augmentation)",
        m.SentenceScorer,
        partial(summary_data, d.shuffle_sentences_only),
        "The sentence-order augmentation reorders the sentences but not the summary marks: the marks land on "
        "random sentences, and the scorer learns next to nothing about which sentences summarise.",
        PAIRED,
    ),
    SealedCase(
        "oscillator_recordings_peak_normalised",
        "simulation-based inference of a damped oscillator's parameters",
        m.OscillatorNetPeakNormalised,
        oscillator_data,
        "Each recording is divided by its own peak before the MLP (a habit from spectra): the amplitude, one "
        "of the three parameters to infer, is erased from the input and is guessed from the prior.",
        DEPENDS,
    ),
    SealedCase(
        "oscillator_plateau_mode_max",
        "simulation-based inference of a damped oscillator's parameters (ReduceLROnPlateau)",
        m.OscillatorNetPlateauMax,
        oscillator_data,
        "ReduceLROnPlateau is built with mode='max' on the training loss: a falling loss never counts as an "
        "improvement, so the learning rate is cut by 5 every second epoch while the fit is still far from "
        "done.",
        SCHEDULE,
    ),
    SealedCase(
        "graph_collate_without_offsets",
        "node regression on small graphs batched as edge lists",
        m.NodeRegressor,
        partial(graph_data, d.collate_graphs_unshifted),
        "The custom collate_fn stacks the graphs' node rows but concatenates their edge lists unshifted: "
        "every edge of the batch connects nodes of the first graph, so in training the other graphs' nodes "
        "hear no neighbours and the first graph's hear 32 graphs' worth.",
        PAIRED,
    ),
    SealedCase(
        "graph_edges_one_way",
        "node regression on small graphs (mean aggregation over a stored edge list)",
        m.NodeRegressorOneWay,
        graph_data,
        "The edge table stores each undirected edge once (i < j) and is used as the message list without "
        "adding the reverse direction: a node hears only its lower-numbered neighbours.",
        DEPENDS,
    ),
    SealedCase(
        "graph_ema_decay_too_slow",
        "node regression on small graphs (served exponential moving average of the weights)",
        m.NodeRegressorEMASlow,
        graph_data,
        "The served weight average uses decay .999, copied from a recipe of a hundred thousand steps: after "
        "this run's few hundred steps it is still mostly the random initialisation.",
        SERVED,
    ),
    SealedCase(
        "screening_trained_on_raw_units",
        "screening for a rare condition from a lab panel (standardised features)",
        m.Screener,
        partial(screening_data, False),
        "The scaler is fitted on the training panels and applied to validation and serving, but the training "
        "Dataset is built from the unscaled array: the network learns on clinical units from 0.01 to 1,000 "
        "and is served z-scores.",
        PREPARED,
    ),
    SealedCase(
        "screening_oversampled_before_split",
        "screening for a rare condition from a lab panel (oversampled positives)",
        m.Screener,
        partial(oversampled_screening_data, True),
        "The positives are oversampled (repeated 4 times) before the train/validation split: most validation "
        "positives are copies of training rows the network has memorised, and validation overstates how "
        "well it finds new patients.",
        SPLIT,
    ),
    SealedCase(
        "authorship_sampler_weights_by_frequency",
        "authorship attribution from word frequencies (imbalanced authors, weighted sampling)",
        m.AuthorNet,
        partial(author_data, d.frequency_weights),
        "The WeightedRandomSampler meant to balance the authors is given each snippet's author count instead "
        "of its inverse: the prolific author fills most batches, and the rarer authors' snippets are "
        "attributed to the prolific ones.",
        SAMPLED,
    ),
    SealedCase(
        "authorship_split_by_snippet",
        "authorship attribution from word frequencies (validation split)",
        m.AuthorNet,
        partial(author_data, split_by_book=False),
        "The validation snippets are a random quarter of all snippets, so every validation snippet comes "
        "from a book the model trained on: its topic words name the book, and validation reports an accuracy "
        "the model does not reach on a new book.",
        SPLIT,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "value_returns_to_go_per_episode",
            "Monte-Carlo value estimation (returns restarted at each done flag; two distractor inputs)",
            m.ValueNet,
            value_data,
        ),
        (
            "value_scaled_returns",
            "Monte-Carlo value estimation (targets scaled by 1 / (1 - gamma), unscaled when served)",
            m.ValueNetScaledReturns,
            value_data,
        ),
        (
            "mult_dae_fold_in",
            "collaborative filtering (Mult-DAE: input dropout, multinomial likelihood summed over items)",
            m.MultDAE,
            history_data,
        ),
        (
            "mult_dae_manual_warmup",
            "collaborative filtering (manual optimisation: clipping by hand, warmup stepped by hand)",
            m.MultDAEManual,
            history_data,
        ),
        (
            "summary_pointwise_shuffled",
            "extractive summarisation (sentences and marks reordered together; padded documents)",
            m.SentenceScorer,
            summary_data,
        ),
        (
            "summary_listwise_softmax",
            "extractive summarisation (a softmax over each document's sentences, padding at -inf; the loss "
            "cannot go below log 3)",
            m.SentenceScorerListwise,
            summary_data,
        ),
        (
            "oscillator_plateau_min",
            "simulation-based inference (fresh simulator noise per read; ReduceLROnPlateau on the loss)",
            m.OscillatorNet,
            oscillator_data,
        ),
        (
            "oscillator_log_damping",
            "simulation-based inference (damping learnt on a log scale, served through exp)",
            m.OscillatorNetLogDamping,
            oscillator_data,
        ),
        (
            "graph_offsets_both_ways",
            "node regression on edge lists (offsets per graph, each edge sent both ways, isolated nodes, a "
            "feature that matters nowhere)",
            m.NodeRegressor,
            graph_data,
        ),
        (
            "graph_served_ema",
            "node regression on edge lists (served EMA of the weights: a frozen copy beside the trained MLP)",
            m.NodeRegressorEMA,
            graph_data,
        ),
        (
            "screening_scaled",
            "screening for a rare condition (standardised lab panel, 15% positives)",
            m.Screener,
            screening_data,
        ),
        (
            "screening_oversampled_after_split",
            "screening for a rare condition (training positives repeated 4 times after the split)",
            m.Screener,
            oversampled_screening_data,
        ),
        (
            "authorship_balanced_sampler_book_split",
            "authorship attribution (inverse-frequency sampling with replacement; half of every snippet "
            "topic words the model must learn to discount; books held out whole)",
            m.AuthorNet,
            author_data,
        ),
    )
]
