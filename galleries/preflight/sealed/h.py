"""Sealed gallery H: transductive node classification on one graph with train/val masks, CTC (alignment-free)
sequence labelling, siamese verification on digit pairs, multiple-choice scoring (a softmax over options),
speaker identification with an embedding and a classifier head, change-point detection in series,
implicit-feedback recommendation with a BPR loss and probabilistic forecasting with a Gaussian NLL head.
Written blind (see the package docstring); each bug is proved against its healthy twin in
``test_proofs_h.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _h_data as d
from galleries.preflight.sealed import _h_models as m
from galleries.sealed import gen


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def rows_data(make, n: int = 1000, transform=None, classes: int | None = None, **kw) -> dict[str, Any]:
    """``make(n, 1)`` for training (through ``transform`` per read, if given) and ``make(300, 2)`` for
    validation."""
    out = d.loaders(d.Rows(*make(n, 1), transform=transform), d.Rows(*make(300, 2)), **kw)
    return {**out, "num_classes": classes} if classes else out


def graph_data(edges_shifted: bool = False, unknown_as_minus_one: bool = False) -> dict[str, Any]:
    """The one graph, whole, in every batch: 25 copies an epoch for training with the training mask, once for
    validation with the validation mask."""
    graph = d.node_graph(edges_shifted)
    train = d.graph_rows(graph, "train", 25, unknown_as_minus_one)
    val = d.graph_rows(graph, "val", 1, unknown_as_minus_one)
    return {**d.loaders(train, val, batch_size=1), "num_classes": d.NODE_CLASSES}


def ctc_data(padded: bool = False) -> dict[str, Any]:
    return rows_data(partial(d.letter_frames, padded=padded), 1500)


def pair_data() -> dict[str, Any]:
    """Random training pairs of the training digits (fresh each read); fixed validation pairs."""
    x, y = d.digits("train")
    return d.loaders(d.RandomPairs(x, y), d.Rows(*d.digit_pairs("val", 600, 5)))


def choice_data(variable: bool = False) -> dict[str, Any]:
    return rows_data(partial(d.choices, variable=variable), 3000, batch_size=64)


def speaker_data() -> dict[str, Any]:
    return rows_data(d.utterances, 1000, classes=d.SPEAKERS)


def session_data(split_by_recording: bool = True) -> dict[str, Any]:
    """Ten utterances from each of 6 recordings per speaker: the last recording of every speaker validates
    (the BUG, ``split_by_recording=False``: a random sixth of the utterances, so validation shares the
    training recordings' channels)."""
    frames, speaker, recording = d.recordings(4, 6)
    if split_by_recording:
        val = recording == 5
    else:
        val = torch.rand(len(speaker), generator=gen(82)) < 1 / 6
    train, held = d.Rows(frames[~val], speaker[~val]), d.Rows(frames[val], speaker[val])
    return {**d.loaders(train, held), "num_classes": d.SPEAKERS}


def change_data(move_change: bool | None = None) -> dict[str, Any]:
    """Series with one change; ``move_change`` set: time reversal on half the reads, moving the change index
    (``True``) or not (the BUG, ``False``)."""
    transform = None if move_change is None else partial(d.reverse_time, move_change=move_change)
    return rows_data(d.level_changes, 2000, transform=transform, batch_size=32)


def click_data(factorised: bool = False) -> dict[str, Any]:
    """Training clicks (3 passes an epoch) with a fresh random negative per read; validation clicks with
    fixed negatives. ``factorised`` (the BUG): the clicks' item ids were re-encoded by
    first appearance in the click log, while the served model is asked with the catalogue's ids."""
    parts = d.clicks()
    (user, item), (val_user, val_item) = parts["train"], parts["val"]
    if factorised:
        codes = d.factorised(torch.cat([item, val_item]))
        item, val_item = codes[: len(item)], codes[len(item) :]
    user, item = user.repeat(3), item.repeat(3)
    train = d.Rows(user, item, transform=d.with_random_negative)
    fixed = torch.randint(d.ITEMS, (len(val_user),), generator=gen(81))
    return d.loaders(train, d.Rows(val_user, val_item, fixed), batch_size=64)


forecast_data = partial(rows_data, d.noisy_season, 2000)

PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
SERVED = "what validation reports is what the model does when served"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "node_own_features_overwritten",
        "transductive node classification (GraphSAGE, train/val masks)",
        m.NodeSAGEOverwritten,
        graph_data,
        "Each layer reassigns x = mean_adj @ x before the 'own' linear reads it, so a node's prediction "
        "never sees its own features, only its neighbourhood's.",
        DEPENDS,
    ),
    SealedCase(
        "node_edge_ids_shifted",
        "transductive node classification (edge list loading)",
        m.NodeSAGE,
        partial(graph_data, edges_shifted=True),
        "The edge list is 0-based but the loader subtracts 1 as if it were 1-based; negative indexing "
        "keeps it silent and every edge joins the wrong nodes, so the graph is noise.",
        PAIRED,
    ),
    SealedCase(
        "ctc_default_blank_is_a_letter",
        "CTC sequence labelling (blank index)",
        m.CTCNetDefaultBlank,
        ctc_data,
        "ctc_loss keeps its default blank=0 while letters are coded 0..4: letter 0 is learnt as the blank "
        "and never decoded.",
        TASK_LOSS,
    ),
    SealedCase(
        "ctc_blanks_dropped_before_merging",
        "CTC sequence labelling (greedy decoding)",
        m.CTCNetBlanksDroppedFirst,
        ctc_data,
        "The decoder removes blanks before merging repeats, so a doubled letter (two runs with a blank "
        "between) is served once.",
        SERVED,
    ),
    SealedCase(
        "siamese_label_convention_flipped",
        "siamese verification on digit pairs (contrastive loss)",
        m.SiameseNetPaperConvention,
        pair_data,
        "The contrastive loss follows the paper's Y = 1 for a dissimilar pair while the data's label is 1 "
        "for a matching pair: matching digits are pushed apart, different ones pulled together.",
        TASK_LOSS,
    ),
    SealedCase(
        "siamese_norm_without_dim",
        "siamese verification on digit pairs (pair distance)",
        m.SiameseNetNormWithoutDim,
        pair_data,
        "The distance is (e1 - e2).norm() without dim=-1: one number for the whole batch, broadcast against "
        "every pair's label, so nothing tells pairs apart and a served batch gets one answer.",
        "shapes that broadcast do not mix rows",
    ),
    SealedCase(
        "choice_context_repeat_not_interleaved",
        "multiple-choice scoring (one score per option, softmax over options)",
        m.ChoiceScorerRepeat,
        choice_data,
        "The context is tiled with repeat() instead of repeat_interleave(): the shapes agree, but each "
        "option is scored against another question's context.",
        PAIRED,
    ),
    SealedCase(
        "choice_unfrozen_layers_never_stepped",
        "multiple-choice scoring (head warm-up, then unfreezing)",
        m.ChoiceScorerWarmupFilteredOptimizer,
        choice_data,
        "The lower layers are frozen for a one-epoch head warm-up and unfrozen after it, but the optimizer "
        "was built from the parameters requiring grad at the start: they are never stepped and stay random.",
        "every trained parameter is stepped",
    ),
    SealedCase(
        "speaker_utterance_mean_removed",
        "speaker identification (embedding + classifier head)",
        m.SpeakerNetMeanNormalised,
        speaker_data,
        "The front end subtracts each utterance's mean (CMN from a speech-recognition recipe), which "
        "removes the speaker's mean voice along with the channel.",
        DEPENDS,
    ),
    SealedCase(
        "speaker_split_by_utterance",
        "speaker identification (validation split)",
        m.SpeakerNet,
        partial(session_data, split_by_recording=False),
        "Utterances are split at random, so validation utterances come from the training recordings: the "
        "model tells recordings (their channel) apart, and validation overstates accuracy on new recordings.",
        "splits do not share rows",
    ),
    SealedCase(
        "change_reversal_keeps_index",
        "change-point detection in series (time-reversal augmentation)",
        m.ChangeNet,
        partial(change_data, move_change=False),
        "Half the training series are reversed in time but keep their change index, so those labels point "
        "at the mirror image of the real change.",
        "augmentation preserves the target (or moves it with the input)",
    ),
    SealedCase(
        "change_warmup_stepped_per_epoch",
        "change-point detection in series (warm-up schedule)",
        m.ChangeNetWarmupEachEpoch,
        change_data,
        "A 100-step linear warm-up (LambdaLR) is returned without interval 'step', so it advances per epoch: "
        "the rate is 0 in the first epoch and at most 3% of its peak after.",
        "the loop's state machines (schedulers, accumulation, averaging) advance as declared",
    ),
    SealedCase(
        "bpr_item_ids_factorised",
        "implicit-feedback recommendation (BPR loss)",
        m.BPR,
        partial(click_data, factorised=True),
        "The click log's item ids were re-encoded by first appearance (factorize) for training and "
        "validation; the served model is asked with catalogue ids and ranks the wrong items.",
        SERVED,
    ),
    SealedCase(
        "gaussian_std_passed_as_variance",
        "probabilistic forecasting (Gaussian NLL head)",
        m.GaussianForecasterStdAsVariance,
        forecast_data,
        "The head's std goes into gaussian_nll_loss as var; training turns it into the variance and the "
        "served forecast reads it as the std, far too narrow.",
        TASK_LOSS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        ("node_masked_loss", "node classification (whole graph, masked loss)", m.NodeSAGE, graph_data),
        (
            "node_unknown_labels_minus_one",
            "node classification (targets -1 outside the split)",
            m.NodeSAGEUnknownMinusOne,
            partial(graph_data, unknown_as_minus_one=True),
        ),
        ("ctc_fixed_length", "CTC (4-tensor batch, padded targets)", m.CTCNet, ctc_data),
        ("ctc_padded_frames", "CTC (zero-padded inputs, true lengths)", m.CTCNet, partial(ctc_data, True)),
        ("siamese_fresh_pairs", "siamese verification (pairs drawn per read)", m.SiameseNet, pair_data),
        (
            "choice_variable_options",
            "multiple choice (2..4 options, padding at -inf)",
            m.ChoiceScorer,
            partial(choice_data, variable=True),
        ),
        (
            "choice_head_warmup_then_unfrozen",
            "multiple choice (lower layers frozen for epoch 0)",
            m.ChoiceScorerWarmup,
            choice_data,
        ),
        ("speaker_plain_head", "speaker identification", m.SpeakerNet, speaker_data),
        (
            "speaker_split_by_recording",
            "speaker identification (whole recordings held out)",
            m.SpeakerNet,
            session_data,
        ),
        ("speaker_margin_head", "speaker id, additive-margin cosine head", m.SpeakerNetMargin, speaker_data),
        (
            "change_reversal_moves_index",
            "change points (reversal moving the index)",
            m.ChangeNet,
            partial(change_data, move_change=True),
        ),
        ("bpr_random_negatives", "BPR (a fresh negative per read)", m.BPR, click_data),
        (
            "gaussian_nll_below_zero",
            "Gaussian NLL forecasting (loss < 0)",
            m.GaussianForecaster,
            forecast_data,
        ),
    )
]
