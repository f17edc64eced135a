"""Sealed gallery ZY2 (issue #34, half ``zy2``): link prediction on a community graph (a two-layer graph
encoder, dot-product scores, sampled negatives, held-out edges), arithmetic on images (two digits in, their
sum out, as a class or a regression target), sorting a set of numbers (each number's rank, per-position
classification with self-attention), frame-sequence classification (which way a digit moves across a short
clip; a GRU over per-frame features), monotone regression (a price that rises with floor area: positive
weights or a penalty) and churn classification with a time-ordered split (train on the past, validate on the
future). Written blind (see the package docstring); each bug is proved against its healthy twin in
``test_proofs_zy2.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zy2_data as d
from galleries.preflight.sealed import _zy2_models as m
from galleries.sealed import gen


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def link_data(doubled_before_split: bool = False, in_batch: bool = False) -> dict[str, Any]:
    """The training edges, each with a uniform negative pair drawn afresh per read (or alone, with
    ``in_batch``: the model's ``training_step`` makes the negatives), and the validation edges with as many
    fixed non-edges."""
    split = d.edge_split(doubled_before_split)
    train = d.EdgesOnly(split["train"]) if in_batch else d.EdgesWithNegatives(split["train"])
    return d.loaders(train, d.Rows(*d.scored_pairs(split["val"], 2)), batch_size=64)


def sum_data(read=d.pair_and_sum, num_classes: int | None = d.SUMS) -> dict[str, Any]:
    """2,000 pairs of the 1,000 training digits drawn afresh per read and 600 fixed pairs of the 300
    validation digits, each read as (images, target) by ``read``."""
    train = d.FreshPairs("train", 2000, read)
    val = d.Rows(*d.digit_pairs("val", 600, 2), transform=pair_target(read))
    out = d.loaders(train, val, batch_size=64)
    return {**out, "num_classes": num_classes} if num_classes else out


def pair_target(read):
    """Validation reads the pairs in their fixed order (a random swap is training augmentation only)."""
    return d.pair_and_sum if read is d.either_order else read


regression_sum_data = partial(sum_data, d.pair_and_float_sum, None)


def rank_data() -> dict[str, Any]:
    """3,000 training sets and 500 validation sets of 8 numbers, with each number's rank."""
    train, val = d.Rows(*d.number_sets(3000, 1)), d.Rows(*d.number_sets(500, 2))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.SET_SIZE}


def motion_data(augment=None) -> dict[str, Any]:
    """2,000 training clips of the training digits (augmented per read by ``augment``) and 400 validation
    clips of the validation digits."""
    train = d.Rows(*d.moving_digits("train", 2000, 1), transform=augment)
    val = d.Rows(*d.moving_digits("val", 400, 2))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.DIRECTIONS}


def house_data() -> dict[str, Any]:
    """600 training houses and 300 validation houses (inputs, price)."""
    return d.loaders(d.Rows(*d.houses(600, 1)), d.Rows(*d.houses(300, 2)), batch_size=32)


def churn_data(
    random_split: bool = False, leaky: bool = False, with_time: bool = False, val_share: float = 0.2
) -> dict[str, Any]:
    """3,000 snapshots over [0, 1), split by time: the last ``val_share`` of the rows (the most recent)
    validates and the earlier ones train (or, with ``random_split``, a random 20% of the rows validates);
    rows read as (features, churned) or, ``with_time``, (features, churned, timestamp)."""
    x, churned, t = d.churn_rows(3000, 1, leaky=leaky)
    n_val = int(val_share * len(x))
    order = torch.randperm(len(x), generator=gen(5)) if random_split else torch.arange(len(x))
    val, train = order[-n_val:], order[:-n_val]
    columns = (x, churned, t) if with_time else (x, churned)
    return d.loaders(d.Rows(*(c[train] for c in columns)), d.Rows(*(c[val] for c in columns)), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
TRAINED = "every parameter the model declares trainable is optimised"
HELD_OUT = "validation data are held out from training"
SERVED = "the served output is read with the convention the model was trained with"
SERVING_FEATURES = "the features trained on are computed as they will be when the model is served"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "link_score_reads_source_twice",
        "link prediction on a community graph (dot-product scores of graph-encoder codes)",
        m.LinkGNNSourceTwice,
        link_data,
        "The pair score multiplies the source's code by itself (z[src] * z[src]) instead of by the "
        "destination's: it is one node's squared norm, a popularity score that ignores whom the node links "
        "to, and held-out edges rank barely above random non-edges.",
        DEPENDS,
    ),
    SealedCase(
        "link_edges_doubled_before_split",
        "link prediction on a community graph (train/validation edge split)",
        m.LinkGNNDoubledSplit,
        partial(link_data, True),
        "The undirected edges are listed both ways ((u, v) and (v, u)) before the train/validation split: "
        "most validation edges have their reverse among the training edges and in the message-passing "
        "graph, and the validation AUC overstates the AUC on new edges.",
        HELD_OUT,
    ),
    SealedCase(
        "link_labels_concatenated_in_wrong_order",
        "link prediction on a community graph (negatives sampled in training_step)",
        m.LinkGNNLabelsSwappedInStep,
        partial(link_data, in_batch=True),
        "training_step concatenates the pairs as [edges, sampled negatives] but their labels as [zeros, "
        "ones]: edges are taught as non-edges and random pairs as edges, and the served scores rank edges "
        "low.",
        PAIRED,
    ),
    SealedCase(
        "digit_sum_target_reads_first_label_twice",
        "arithmetic on images (two digits in, their sum as a class 0..18)",
        m.DigitSum,
        partial(sum_data, d.pair_and_first_twice),
        "The target is written labels[0] + labels[0] (a typo for labels[1]): the model learns twice the "
        "first digit and ignores the second image.",
        PAIRED,
    ),
    SealedCase(
        "digit_sum_optimiser_on_head_only",
        "arithmetic on images (shared digit encoder and a sum head)",
        m.DigitSumHeadOnlyOptimised,
        sum_data,
        "configure_optimizers passes self.head.parameters() only (from a fine-tuning recipe with a frozen "
        "pretrained encoder): this encoder is randomly initialised and never trained, and the head cannot "
        "read the digits from its random features.",
        TRAINED,
    ),
    SealedCase(
        "digit_sum_regression_served_without_std",
        "arithmetic on images (the sum as a standardised regression target)",
        m.DigitSumRegressionUnscaledWithoutStd,
        regression_sum_data,
        "predict undoes the target standardisation as out + mean, forgetting the * std: every served sum is "
        "squeezed towards 9 by a factor of four, and only sums near 9 come out right.",
        SERVED,
    ),
    SealedCase(
        "rank_attention_causal_mask",
        "sequence sorting (each number's rank by self-attention, per-position classes)",
        m.RankTransformerCausal,
        rank_data,
        "The encoder is called with a causal mask (is_causal=True, from a language-model template): each "
        "number sees only those before it and cannot count the smaller numbers after it.",
        DEPENDS,
    ),
    SealedCase(
        "rank_cross_entropy_class_axis_last",
        "sequence sorting (per-position cross-entropy)",
        m.RankTransformerLossNotTransposed,
        rank_data,
        "F.cross_entropy is given the (batch, position, rank) logits without moving the class axis to dim 1: "
        "with 8 positions and 8 ranks the shapes pass, the positions are read as the classes, and the served "
        "argmax over ranks is a scrambled answer (the network learned which position holds each rank).",
        TASK_LOSS,
    ),
    SealedCase(
        "rank_warmup_stepped_per_epoch",
        "sequence sorting (Adam with a linear warm-up)",
        m.RankTransformerWarmupPerEpoch,
        rank_data,
        "The warm-up scheduler's dict has no 'interval': 'step', so Lightning steps it once an epoch: the "
        "30-step warm-up lasts 30 epochs and a short run trains at 3% to 20% of the learning rate.",
        SCHEDULE,
    ),
    SealedCase(
        "motion_time_reversal_keeps_label",
        "frame-sequence classification (which way a digit moves; time-reversal augmentation)",
        m.MotionGRU,
        partial(motion_data, d.reversed_in_time),
        "Clips are played backwards half the time as augmentation (from an action-recognition recipe) with "
        "the label kept: a reversed clip moves the opposite way, so left/right and up/down are labelled at "
        "random and the model cannot tell them apart.",
        PAIRED,
    ),
    SealedCase(
        "motion_gru_not_batch_first",
        "frame-sequence classification (a GRU over per-frame features)",
        m.MotionGRUTimeMajor,
        motion_data,
        "The GRU keeps the default batch_first=False on (batch, frames, features) clips: it runs along the "
        "batch, out[:, -1] is each clip's last frame (mixed with the clips before it in the batch), and the "
        "motion between frames is never seen.",
        DEPENDS,
    ),
    SealedCase(
        "price_monotone_path_on_wrong_column",
        "monotone regression (a price rising with floor area; positive-weight path)",
        m.MonotonePriceWrongColumn,
        house_data,
        "The positive-weight path reads column 1 (the season; the index counted the dropped id column): the "
        "season's up-and-down effect is forced to be monotone, and the price's seasonal swing is lost.",
        DEPENDS,
    ),
    SealedCase(
        "price_penalty_sign_flipped",
        "monotone regression (a monotonicity penalty)",
        m.MonotonePricePenaltyFlipped,
        house_data,
        "The penalty is written relu(rise) instead of relu(-rise): it punishes the price for rising with "
        "the area, and the network is pushed to make it fall.",
        TASK_LOSS,
    ),
    SealedCase(
        "price_served_in_logs",
        "monotone regression (log-price target)",
        m.MonotonePriceServedInLogs,
        house_data,
        "predict returns the network output, the log price, without exp: the served prices are ~5 where "
        "they should be ~150.",
        SERVED,
    ),
    SealedCase(
        "churn_random_split",
        "churn classification (time-stamped snapshots; the split)",
        m.ChurnNet,
        partial(churn_data, True),
        "The rows are split at random instead of by time: validation months are months the model trained "
        "on (it learns each month's churn pressure through the month feature), and the validation error "
        "overstates how well it predicts the months to come.",
        HELD_OUT,
    ),
    SealedCase(
        "churn_inactivity_measured_at_export",
        "churn classification (time-stamped snapshots; a leaky feature)",
        m.ChurnNet,
        partial(churn_data, leaky=True),
        "Days inactive is computed at the export date instead of at each snapshot: a churner's row also "
        "counts the days since it left, the model leans on that leak, and served rows (measured at the "
        "snapshot) lack it.",
        SERVING_FEATURES,
    ),
    SealedCase(
        "churn_pos_weight_inverted",
        "churn classification (class-weighted binary cross-entropy)",
        m.ChurnNetPosWeightInverted,
        churn_data,
        "pos_weight is computed as positives / negatives (1/3) instead of negatives / positives (3): the "
        "churners, already the minority, are down-weighted, and the served model rarely flags one.",
        TASK_LOSS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "link_in_batch_negatives",
            "link prediction (in-batch negatives: training_step pairs sources with the batch's destinations "
            "shuffled; the rare true edge among them kept as a negative)",
            m.LinkGNNInBatchNegatives,
            partial(link_data, in_batch=True),
        ),
        (
            "link_negatives_sampled_in_step",
            "link prediction (the loader yields edges only; training_step adds uniform negatives, so the "
            "training batch is twice the loader's)",
            m.LinkGNNSampledInStep,
            partial(link_data, in_batch=True),
        ),
        (
            "digit_sum_deep_sets_either_order",
            "arithmetic on images (Deep Sets: the two codes summed, order-blind on purpose; pairs swapped at "
            "random)",
            m.DigitSumDeepSets,
            partial(sum_data, d.either_order),
        ),
        (
            "digit_sum_as_regression",
            "arithmetic on images (a class task trained as standardised regression; served rounded and "
            "clipped)",
            m.DigitSumRegression,
            regression_sum_data,
        ),
        (
            "rank_rescaled_smoothed_no_positions",
            "sequence sorting (no positional encoding, each set rescaled by its own min and max, label "
            "smoothing 0.1)",
            m.RankTransformerRescaledSmoothed,
            rank_data,
        ),
        (
            "motion_reversed_and_relabelled",
            "frame-sequence classification (clips played backwards half the time, relabelled with the "
            "opposite direction)",
            m.MotionGRU,
            partial(motion_data, d.reversed_and_relabelled),
        ),
        (
            "price_monotone_by_penalty",
            "monotone regression (an unconstrained MLP with a finite-difference monotonicity penalty of "
            "weight 100 in the loss)",
            m.MonotonePricePenalty,
            house_data,
        ),
        (
            "churn_recency_weighted_tiny_val",
            "churn classification (rows weighted by recency in the loss; a 3-tuple batch with the timestamp; "
            "a tiny validation set: the last 5% of the timeline)",
            m.ChurnNetRecencyWeighted,
            partial(churn_data, with_time=True, val_share=0.05),
        ),
    )
]
