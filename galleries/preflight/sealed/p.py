"""Sealed gallery P (issue #34, half ``p``): pitch estimation from short audio frames (a CREPE-like
distribution over pitch bins), sleep staging over consecutive 30-second epochs with temporal convolutions,
remaining-useful-life regression from engine sensor windows, temporal action segmentation of per-frame video
features (MS-TCN-like), image colourisation (chrominance from luminance, with a weight average) and image
orientation detection (self-labelled quarter turns). Written blind (see the package docstring); each bug is
proved against its healthy twin in ``test_proofs_p.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _p_data as d
from galleries.preflight.sealed import _p_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def pitch_data(augment=d.gain_and_shift) -> dict[str, Any]:
    """4,000 training frames (augmented per read by ``augment``) and 500 validation frames."""
    train = d.Rows(*d.tones(4000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.tones(500, 2)), batch_size=64)


def sleep_data(shuffle: bool = False) -> dict[str, Any]:
    """20 training nights and 8 validation nights of 160 epochs, in order; batches of 64 consecutive epochs
    (the training loader shuffles only with ``shuffle``)."""
    train, val = d.Rows(*d.nights(20, 1)), d.Rows(*d.nights(8, 2))
    return {**d.loaders(train, val, batch_size=64, shuffle=shuffle), "num_classes": d.STAGES}


def rul_data(at_start: bool = False, flat: bool = False) -> dict[str, Any]:
    """Windows of 60 training engines and 15 validation engines, run to failure, with their remaining life
    (at each window's last cycle, or its first with ``at_start``; one per row, or a flat vector with
    ``flat``)."""
    train = d.Rows(*d.rul_windows(60, 1, at_start=at_start, flat=flat))
    val = d.Rows(*d.rul_windows(15, 2, at_start=at_start, flat=flat))
    return d.loaders(train, val, batch_size=64)


def segment_data(truncate: bool = False) -> dict[str, Any]:
    """300 training videos and 60 validation videos, every 4th frame, with per-frame action labels (labels
    subsampled with the frames, or cut to their length with ``truncate``)."""
    train = d.Rows(*d.subsampled(*d.videos(300, 1), truncate=truncate))
    val = d.Rows(*d.subsampled(*d.videos(60, 2), truncate=truncate))
    return {**d.loaders(train, val, batch_size=16), "num_classes": d.ACTIONS}


def colour_data(augment=d.flip) -> dict[str, Any]:
    """1,000 training images (augmented per read by ``augment``) and 300 validation images."""
    train = d.Rows(*d.colour_images(1000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.colour_images(300, 2)))


def orientation_data(clockwise: bool = False) -> dict[str, Any]:
    """The 1,000 training digits turned at random per read (labelled with the turns) and the 300 validation
    digits in all four turns (each turned the same way as in training)."""
    train = d.Rows(*d.digits("train", (8, 8)), transform=d.randomly_turned(clockwise))
    val = d.Rows(*d.turned_digits("val", clockwise))
    return {**d.loaders(train, val), "num_classes": 4}


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
ORDER = "samples keep the order the model reads them in"
SHAPES = "tensors are laid out as the layers and losses read them"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
AVERAGED = "a served weight average carries every tensor the network computes with"
CONVENTION = "training labels follow the convention the served model is read with"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "pitch_resized_crop_keeps_f0",
        "pitch estimation from audio frames (augmentation)",
        m.PitchNet,
        partial(pitch_data, d.random_resized_crop),
        "A random-resized-crop augmentation borrowed from images stretches 70..100% of each frame back to "
        "its full length but keeps its pitch label: the stretched tones sound lower than they are labelled, "
        "and the served pitch comes out sharp, by about two semitones on average.",
        PAIRED,
    ),
    SealedCase(
        "pitch_gaussian_blur_precedence",
        "pitch estimation from audio frames (Gaussian-blurred bin targets)",
        m.PitchNetBlurPrecedence,
        pitch_data,
        "The target blur is written exp(-d**2 / 2 * sigma**2): sigma squared multiplies instead of "
        "dividing, every target bin is almost exactly 0, and the model learns to switch every bin off.",
        TASK_LOSS,
    ),
    SealedCase(
        "pitch_warmup_stepped_per_epoch",
        "pitch estimation from audio frames (learning-rate warm-up)",
        m.PitchNetWarmupPerEpoch,
        pitch_data,
        "The 100-step linear warm-up is scheduled with interval 'epoch': it advances once an epoch instead "
        "of once a batch, and the whole run trains at 1..6% of the intended learning rate.",
        SCHEDULE,
    ),
    SealedCase(
        "sleep_epochs_shuffled_by_loader",
        "sleep staging over consecutive 30-second epochs (temporal convolutions)",
        m.SleepStager,
        partial(sleep_data, True),
        "The training loader keeps shuffle=True from a classification template: each batch the model reads "
        "as a stretch of night is 64 epochs from anywhere, so it learns no context and stages every epoch of "
        "a served night on its own.",
        ORDER,
    ),
    SealedCase(
        "sleep_class_weights_are_frequencies",
        "sleep staging (class-weighted cross-entropy)",
        m.SleepStagerFrequencyWeights,
        sleep_data,
        "The class weights are the stages' frequencies instead of their inverse: N1 weighs least and is "
        "rarely scored, and the balanced accuracy drops.",
        TASK_LOSS,
    ),
    SealedCase(
        "rul_window_standardised",
        "remaining useful life from engine sensor windows",
        m.RULNetWindowStandardised,
        rul_data,
        "Each window is standardised per sensor inside the model (instance normalisation copied from "
        "forecasting code): the level of wear is removed, and worn and young engines look alike.",
        DEPENDS,
    ),
    SealedCase(
        "rul_label_at_window_start",
        "remaining useful life from engine sensor windows (windowing)",
        m.RULNet,
        partial(rul_data, True),
        "The remaining life is read at each window's first cycle instead of its last: every label below the "
        "cap is 29 cycles too long, and worn engines are predicted to last up to 29 cycles longer than they "
        "do.",
        PAIRED,
    ),
    SealedCase(
        "rul_flat_targets_broadcast",
        "remaining useful life from engine sensor windows (target shape)",
        m.RULNet,
        partial(rul_data, flat=True),
        "The targets are stored as a flat vector (batch,) while the model outputs (batch, 1): mse_loss "
        "broadcasts them to (batch, batch) (with only a warning), every output is scored against every "
        "target, and the model learns to answer the mean remaining life for every engine.",
        SHAPES,
    ),
    SealedCase(
        "segmentation_labels_cut_not_strided",
        "temporal action segmentation of video features (frame subsampling)",
        m.Segmenter,
        partial(segment_data, True),
        "The features are taken every 4th frame but the labels are cut to the features' length "
        "(labels[:, :T]) instead of subsampled: the labels are those of the video's first quarter, "
        "stretched over all of it.",
        PAIRED,
    ),
    SealedCase(
        "colour_hue_jitter_on_target",
        "image colourisation (chrominance from luminance; augmentation)",
        m.Colouriser,
        partial(colour_data, d.flip_and_hue),
        "The classifier's photo augmentation, with ColorJitter(hue=0.5), is applied before the image is "
        "split into luminance and chrominance: the target colours are turned at random, and the model "
        "learns to paint everything grey.",
        PAIRED,
    ),
    SealedCase(
        "colour_ema_without_norm_statistics",
        "image colourisation (served weight average)",
        m.ColouriserEMAParametersOnly,
        colour_data,
        "The weight average runs over parameters() only: the averaged network's batch-norm running "
        "statistics stay at 0 and 1, and the served (and validated) model normalises with them.",
        AVERAGED,
    ),
    SealedCase(
        "orientation_turned_clockwise",
        "image orientation detection (self-labelled quarter turns)",
        m.OrientationNet,
        partial(orientation_data, True),
        "The training turns pass rot90 its dims as (-1, -2), which turns clockwise, while the label and the "
        "served correction count counter-clockwise turns: a scan turned a quarter left is 'corrected' upside "
        "down.",
        CONVENTION,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "pitch_soft_bins_gain_shift",
            "pitch estimation (Gaussian-blurred multi-label bin targets: the loss never reaches 0; gain, "
            "circular shift and noise augmentation)",
            m.PitchNet,
            pitch_data,
        ),
        (
            "sleep_unshuffled_consecutive_epochs",
            "sleep staging (training loader not shuffled on purpose: the batch is a stretch of night; "
            "inverse-frequency class weights)",
            m.SleepStager,
            sleep_data,
        ),
        (
            "rul_capped_targets",
            "remaining useful life (targets capped at 125 cycles: a constant for young engines; two sensors "
            "blind to wear)",
            m.RULNet,
            rul_data,
        ),
        (
            "segmentation_ignored_frames_smoothing",
            "temporal action segmentation (a tenth of the frames unlabelled and ignored; a smoothing term on "
            "detached neighbours)",
            m.Segmenter,
            segment_data,
        ),
        (
            "colour_ema_served",
            "image colourisation (served and validated through a weight average with its batch-norm "
            "statistics; the averaged copy takes no gradient)",
            m.ColouriserEMA,
            colour_data,
        ),
        (
            "orientation_ignores_digit_class",
            "image orientation (labels made by the augmentation; the batches' digit classes unused)",
            m.OrientationNet,
            orientation_data,
        ),
        (
            "orientation_frozen_random_features",
            "image orientation (a hidden layer of 512 frozen on purpose at random; only the head trains)",
            m.OrientationNetRandomFeatures,
            orientation_data,
        ),
    )
]
