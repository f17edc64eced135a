"""Sealed gallery K: optical-flow-like motion regression on frame pairs, next-frame prediction on
weather-like two-field grids, dense retrieval with mined hard negatives, contrastive audio-text (CLAP-like)
pretraining served zero-shot, pool-based active learning (uncertainty sampling) and semi-supervised learning
with a mean teacher. Written blind (see the package docstring); each bug is proved against its healthy twin
in ``test_proofs_k.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _k_data as d
from galleries.preflight.sealed import _k_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def flow_data(augment=d.jitter_and_flip) -> dict[str, Any]:
    """2,000 training pairs (through ``augment`` per read) and 300 centre-cropped validation pairs."""
    val = d.centre_crop(*d.blob_pairs(300, 2))
    return d.loaders(d.Rows(*d.blob_pairs(2000, 1), transform=augment), d.Rows(*val), batch_size=64)


def weather_data(observe=None) -> dict[str, Any]:
    """1,500 training and 300 validation samples (past frames, next frame with gaps); ``observe`` maps each
    read."""
    train = d.Rows(*d.weather(1500, 1), transform=observe)
    return d.loaders(train, d.Rows(*d.weather(300, 2), transform=observe), batch_size=64)


def retrieval_data(exclude: str = "product") -> dict[str, Any]:
    """Four training queries per product with their positive and mined negatives; one validation query per
    product, mined the same way."""
    train = d.mined_rows(d.QUERIES_PER_PRODUCT, 1, exclude)
    return d.loaders(d.Rows(*train), d.Rows(*d.mined_rows(1, 2, exclude)), batch_size=64)


def clip_data(augment=d.gain_and_shift) -> dict[str, Any]:
    """2,000 training clips with captions (through ``augment``) and 300 validation clips."""
    train = d.Rows(*d.clips(2000, 1)[:2], transform=augment)
    return d.loaders(train, d.Rows(*d.clips(300, 2)[:2]), batch_size=64)


def active_data(most_uncertain: bool = True) -> dict[str, Any]:
    """The 200 labelled digits of the acquisition round (each seen 5 times an epoch) and the validation
    digits."""
    x, y = d.acquired(most_uncertain)
    return {**d.loaders(d.Rows(x.repeat(5, 1), y.repeat(5)), d.Rows(*d.digits("val"))), "num_classes": 10}


def labelled_split_data(oversample_first: bool = False) -> dict[str, Any]:
    """The acquired labelled set, split into training rows (each seen 5 times) and validation rows."""
    train_x, train_y, val_x, val_y = d.labelled_split(oversample_first)
    return {**d.loaders(d.Rows(train_x, train_y), d.Rows(val_x, val_y)), "num_classes": 10}


def semi_data(unknown: int = d.UNLABELLED) -> dict[str, Any]:
    """The 1,000 training digits, 100 of them labelled, and the labelled validation digits."""
    out = d.loaders(d.Rows(*d.few_labels(unknown)), d.Rows(*d.digits("val")), batch_size=64)
    return {**out, "num_classes": 10}


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
SCALED = "inputs and targets are scaled so that the task's signal survives"
SCHEDULE = "the loop's state machines (schedulers, accumulation, averaging) advance as declared"
SPLIT = "the training rows are the ones the task says to learn from"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "flow_flip_keeps_target",
        "optical-flow-like motion regression (augmentation)",
        m.FlowNet,
        partial(flow_data, d.jitter_and_flip_keep_flow),
        "The horizontal flip borrowed from the image recipe mirrors both frames but not the motion: half the "
        "flipped pairs say u where they move -u, and the model learns to predict u near 0.",
        PAIRED,
    ),
    SealedCase(
        "flow_crop_per_frame",
        "optical-flow-like motion regression (augmentation)",
        m.FlowNet,
        partial(flow_data, d.jitter_each_frame),
        "The random crop is applied to each frame on its own, so the two crops differ by up to 4 pixels and "
        "their offset is added to the motion the target states: the model learns a shrunken, noisy motion.",
        PAIRED,
    ),
    SealedCase(
        "grid_gaps_filled_with_zero",
        "weather-like grid next-frame prediction (observations with gaps)",
        m.GridNet,
        partial(weather_data, d.filled_with_zero),
        "The missing observations are filled with 0 (nan_to_num) to keep the loss finite and are scored: 0 K "
        "and 0 hPa are 35 and 250 spreads away, and the prediction everywhere is dragged towards them.",
        TASK_LOSS,
    ),
    SealedCase(
        "grid_one_scalar_normaliser",
        "weather-like grid next-frame prediction (normalisation)",
        m.GridNetGlobalStats,
        weather_data,
        "Temperature and pressure are standardised with one mean and spread pooled over both channels: each "
        "field's pattern is squeezed to a few hundredths of a unit and the forecasts are coarse.",
        SCALED,
    ),
    SealedCase(
        "grid_stats_broadcast_over_time",
        "weather-like grid next-frame prediction (normalisation shapes)",
        m.GridNetStatsOnTimeAxis,
        weather_data,
        "The history is standardised with statistics shaped (2, 1, 1, 1) for one (channel, height, width) "
        "frame; against (time, channel, height, width) they broadcast along time: the older frame gets the "
        "temperature's statistics in both channels, the newer one the pressure's.",
        SCALED,
    ),
    SealedCase(
        "retrieval_paraphrases_mined_as_negatives",
        "dense retrieval with mined hard negatives",
        m.DualEncoder,
        partial(retrieval_data, exclude="positive"),
        "Mining excludes only the clicked document, not the other listings of the same product: the first "
        "stage ranks those paraphrases top, they become hard 'negatives', and the encoder learns to push "
        "relevant documents away.",
        TASK_LOSS,
    ),
    SealedCase(
        "retrieval_temperature_multiplies",
        "dense retrieval with mined hard negatives (temperature)",
        m.DualEncoderTemperatureTimes,
        retrieval_data,
        "The similarities are multiplied by the temperature 0.05 instead of divided: the softmax is flat, "
        "the loss barely moves from ln(batch) and the hard negatives weigh no more than the easy ones.",
        TASK_LOSS,
    ),
    SealedCase(
        "clap_speed_perturbation",
        "contrastive audio-text pretraining (augmentation)",
        m.AudioText,
        partial(clip_data, d.speed_perturb),
        "The speech recipe's speed perturbation resamples the clip by 0.5x to 2x, which moves its pitch by "
        "up to an octave: the clip no longer matches its caption's pitch word, and zero-shot pitch is "
        "confused.",
        PAIRED,
    ),
    SealedCase(
        "clap_decay_per_step",
        "contrastive audio-text pretraining (schedule)",
        m.AudioTextStepDecay,
        clip_data,
        "A learning-rate decay of 0.9 meant per epoch is registered with interval 'step': the rate is 1% of "
        "its start after 44 batches and the encoders stop learning in the first epoch.",
        SCHEDULE,
    ),
    SealedCase(
        "active_acquires_surest_rows",
        "pool-based active learning (uncertainty sampling)",
        m.DigitNet,
        partial(active_data, most_uncertain=False),
        "The acquisition takes topk(entropy, largest=False): the labelling budget goes to the 160 pool "
        "digits the seed model is surest of, near copies of what it knows, and the classes it confuses stay "
        "unlabelled.",
        SPLIT,
    ),
    SealedCase(
        "active_oversampled_before_split",
        "pool-based active learning (validation carved from the labelled set)",
        m.DigitNet,
        partial(labelled_split_data, oversample_first=True),
        "The labelled set is repeated 5 times (to make an epoch) before it is split 80/20: nearly every "
        "validation digit has copies among the training rows, and validation reports an error near 0.",
        "splits do not share rows",
    ),
    SealedCase(
        "semi_unlabelled_read_as_zero",
        "semi-supervised learning with a mean teacher (label column)",
        m.MeanTeacher,
        partial(semi_data, unknown=0),
        "The label column was allocated with zeros and only the labelled rows written: the 900 unlabelled "
        "digits are not ignored (-1) but trained as class 0, and the model calls many digits 0.",
        TASK_LOSS,
    ),
    SealedCase(
        "semi_teacher_updated_per_epoch",
        "semi-supervised learning with a mean teacher (EMA)",
        m.MeanTeacherEpochUpdate,
        semi_data,
        "The teacher's moving average is updated in on_train_epoch_end with the per-step decay 0.95: after 6 "
        "epochs it is 74% its random initialisation, and the served teacher is far behind the student.",
        SCHEDULE,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "flow_flip_negates_u",
            "optical-flow-like regression (a flip that changes the target)",
            m.FlowNet,
            flow_data,
        ),
        (
            "flow_endpoint_error",
            "optical-flow-like regression (EPE loss, a distance)",
            m.FlowNetEPE,
            flow_data,
        ),
        (
            "grid_masked_gaps",
            "weather-like grids (NaN targets left out of the loss)",
            m.GridNet,
            weather_data,
        ),
        (
            "grid_tendency_zero_init",
            "weather-like grids (predicts the change; output layer zero at init)",
            partial(m.GridNet, tendency=True),
            weather_data,
        ),
        (
            "retrieval_mined_negatives",
            "dense retrieval (4 mined negatives a row)",
            m.DualEncoder,
            retrieval_data,
        ),
        (
            "retrieval_frozen_document_tower",
            "dense retrieval (document tower frozen on purpose)",
            m.FrozenIndexEncoder,
            retrieval_data,
        ),
        ("clap_gain_and_shift", "contrastive audio-text (learned logit scale)", m.AudioText, clip_data),
        (
            "clap_decay_per_epoch",
            "contrastive audio-text (decay per epoch)",
            m.AudioTextEpochDecay,
            clip_data,
        ),
        ("active_most_uncertain", "active learning (200 labels, repeated 5x)", m.DigitNet, active_data),
        (
            "active_split_then_oversampled",
            "active learning (40 validation labels carved out, training rows repeated 5x)",
            m.DigitNet,
            labelled_split_data,
        ),
        (
            "semi_mean_teacher",
            "mean teacher (90% of labels -1, EMA teacher served)",
            m.MeanTeacher,
            semi_data,
        ),
    )
]
