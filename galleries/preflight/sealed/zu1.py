"""Sealed gallery ZU1 (issue #34, half ``zu1``): stereo disparity from a pair of 1-D scanlines (a correlation
cost volume, random crops), source separation by masking the magnitude spectrogram of a mixture of a voice
and noise, Dyck-word recognition by an LSTM over padded or packed bracket words (a length curriculum),
tomographic reconstruction of small phantoms from their parallel-beam sinograms, and variable-star
classification from irregularly sampled, padded light curves. Written blind (see the package docstring);
each bug is proved against its healthy twin in ``test_proofs_zu1.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zu1_data as d
from galleries.preflight.sealed import _zu1_models as m

# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
STEREO_KEYS = ("pair", "disparity", "valid")


def stereo_data(augment=d.crop, raw: bool = False) -> dict[str, Any]:
    """1,000 training pairs (cropped per read by ``augment``) and 300 whole validation pairs (with ``raw``:
    as the camera records them); dict batches."""
    pair, disparity, valid = d.stereo_pairs(1000, 1)
    val_pair, val_disparity, val_valid = d.stereo_pairs(300, 2)
    if raw:
        pair, val_pair = d.raw_intensities(pair), d.raw_intensities(val_pair)
    train = d.Rows(pair, disparity, valid, transform=augment, keys=STEREO_KEYS)
    val = d.Rows(val_pair, val_disparity, val_valid, keys=STEREO_KEYS)
    return {**d.loaders(train, val), "input_key": "pair", "target_key": "disparity"}


def separation_data(augment=d.gain, sources_as_named: bool = False) -> dict[str, Any]:
    """1,200 training mixtures (levelled per read by ``augment``) and 300 validation mixtures, as (mixture,
    voice, noise) magnitude spectrograms (``sources_as_named``: the sources stacked in the alphabetical
    order of their names, noise first)."""
    mixture, voice, noise = d.mixtures(1200, 1)
    val_mixture, val_voice, val_noise = d.mixtures(300, 2)
    if sources_as_named:
        voice, noise, val_voice, val_noise = noise, voice, val_noise, val_voice
    train = d.Rows(mixture, voice, noise, transform=augment)
    return d.loaders(train, d.Rows(val_mixture, val_voice, val_noise))


DYCK_KEYS = ("tokens", "length", "label")


def dyck_data(label=d.balanced, sampler=None) -> dict[str, Any]:
    """3,000 training words (labelled by ``label``; drawn by the sampler ``sampler`` builds from the lengths
    and labels, when one is given) and 600 validation words; dict batches."""
    tokens, lengths, labels = d.bracket_words(3000, 1, label)
    train = d.Rows(tokens, lengths, labels, keys=DYCK_KEYS)
    val = d.Rows(*d.bracket_words(600, 2, label), keys=DYCK_KEYS)
    kwargs = {"sampler": sampler(lengths, labels)} if sampler else {}
    loaders = d.loaders(train, val, batch_size=64, **kwargs)
    return {**loaders, "input_key": "tokens", "target_key": "label"}


def tomography_data(augment=d.turn_scan) -> dict[str, Any]:
    """1,200 training phantoms (turned per read by ``augment``) and 300 validation phantoms, as (sinogram,
    image)."""
    train = d.Rows(*d.phantoms(1200, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.phantoms(300, 2)))


STAR_KEYS = ("curve", "mask", "kind")


def star_data(augment=d.subsample) -> dict[str, Any]:
    """2,000 training stars (augmented per read by ``augment``) and 500 validation stars; dict batches of
    zero-padded (time, magnitude) curves with their masks."""
    train = d.Rows(*d.light_curves(2000, 1), transform=augment, keys=STAR_KEYS)
    val = d.Rows(*d.light_curves(500, 2), keys=STAR_KEYS)
    return {
        **d.loaders(train, val, batch_size=64),
        "input_key": "curve",
        "target_key": "kind",
        "num_classes": 4,
    }


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TARGET = "the target is the quantity the task declares, encoded as the task defines it"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
SAMPLED = "every training example can be drawn, at the rates the sampler declares"
TRAINED = "every part of the model that the task needs is trained"
NORMALISED = "inputs are normalised with statistics of the real data, the same way in training and serving"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "stereo_crop_disparity_at_origin",
        "stereo disparity from 1-D scanline pairs (random-crop augmentation)",
        m.StereoNet,
        partial(stereo_data, d.crop_images_only),
        "The random crop cuts the scanlines at a random offset but the disparity map and its mask at [:32], "
        "the crop's size: the disparities trained on belong to another stretch of the line.",
        PAIRED,
    ),
    SealedCase(
        "stereo_right_features_shifted_left",
        "stereo disparity from 1-D scanline pairs (correlation cost volume)",
        m.StereoNetShiftedLeft,
        stereo_data,
        "The cost volume shifts the right image's features to the left (x + d) instead of the right (x - d): "
        "each left pixel is correlated with the side where its match never lies.",
        DEPENDS,
    ),
    SealedCase(
        "stereo_loss_on_occluded_pixels",
        "stereo disparity from 1-D scanline pairs (masked smooth L1)",
        m.StereoNetOccludedOnly,
        stereo_data,
        "The loss indexes the per-pixel errors with ~valid instead of valid: only the occluded pixels at the "
        "line's left edge, whose match left the image, are trained on.",
        TASK_LOSS,
    ),
    SealedCase(
        "separation_gain_on_mixture_only",
        "source separation by spectrogram masking (random-gain augmentation)",
        m.Separator,
        partial(separation_data, d.gain_mixture_only),
        "The random-gain augmentation scales the mixture but not the voice it is trained to recover: the "
        "mask must undo an unknowable level, and the served voice comes out at the wrong loudness and shape.",
        PAIRED,
    ),
    SealedCase(
        "separation_sources_in_name_order",
        "source separation by spectrogram masking (the target source)",
        m.Separator,
        partial(separation_data, sources_as_named=True),
        "The dataset stacks its sources sorted by name (noise, voice) while the step unpacks (mixture, "
        "voice, noise): the model is trained to extract the noise and serve it as the voice.",
        TARGET,
    ),
    SealedCase(
        "separation_encoder_detached",
        "source separation by spectrogram masking (CNN encoder, mask head)",
        m.SeparatorEncoderDetached,
        separation_data,
        "The encoder's features are detached before the mask head, a leftover of a frozen-encoder recipe: "
        "the encoder is never trained and the mask comes from random features.",
        TRAINED,
    ),
    SealedCase(
        "separation_steplr_every_step",
        "source separation by spectrogram masking (StepLR schedule)",
        m.SeparatorStepLRPerStep,
        separation_data,
        "StepLR(step_size=30, gamma=0.1), a recipe's tenfold cut every 30 epochs, is registered with "
        "interval 'step': the learning rate is cut tenfold every 30 batches and is negligible after the "
        "first hundred.",
        SCHEDULE,
    ),
    SealedCase(
        "separation_mask_softmax_over_time",
        "source separation by spectrogram masking (two masks by a softmax across the sources)",
        m.TwoMaskSeparatorSoftmaxOverTime,
        separation_data,
        "The softmax meant to share each bin between the two sources runs over the last axis, time: each "
        "source's mask sums to one along a frequency row, and most bins are passed at a few percent.",
        DEPENDS,
    ),
    SealedCase(
        "dyck_last_padded_step",
        "Dyck-word recognition (LSTM over packed bracket words)",
        m.DyckLSTMLastPaddedStep,
        dyck_data,
        "The word's summary is the last position of the unpacked LSTM output: for every word shorter than "
        "the batch's longest it is padding (zeros), so most words are classified from nothing.",
        DEPENDS,
    ),
    SealedCase(
        "dyck_labels_count_brackets",
        "Dyck-word recognition (labels)",
        m.DyckLSTM,
        partial(dyck_data, d.counts_match),
        "The labelling function checks only that a word has as many closing as opening brackets: the "
        "shuffled words that close a bracket before opening it are labelled balanced.",
        TARGET,
    ),
    SealedCase(
        "dyck_sampler_weighted_by_label",
        "Dyck-word recognition (class-balancing sampler)",
        m.DyckLSTM,
        partial(dyck_data, sampler=d.label_weighted),
        "The WeightedRandomSampler meant to balance the classes is given the labels themselves as weights: "
        "no unbalanced word (label 0) is ever drawn, and the model learns to call every word balanced.",
        SAMPLED,
    ),
    SealedCase(
        "tomography_image_turned_not_rescanned",
        "tomographic reconstruction from parallel-beam sinograms (quarter-turn augmentation)",
        m.TomoNet,
        partial(tomography_data, d.turn_image_only),
        "The quarter-turn augmentation turns the phantom's image but keeps the sinogram of the unturned one: "
        "three reads in four pair a scan with another orientation's image.",
        PAIRED,
    ),
    SealedCase(
        "tomography_sinogram_over_own_max",
        "tomographic reconstruction from parallel-beam sinograms (input scaling)",
        m.TomoNetPerScanMax,
        tomography_data,
        "Each sinogram is divided by its own maximum inside the model: the reconstruction keeps the shape "
        "but not the density, which only the sinogram's scale carried.",
        NORMALISED,
    ),
    SealedCase(
        "tomography_output_channel_broadcast",
        "tomographic reconstruction from parallel-beam sinograms (pixel-wise squared error)",
        m.TomoNetChannelAxis,
        tomography_data,
        "The model returns (batch, 1, 16, 16) against targets of (batch, 16, 16): mse_loss broadcasts every "
        "reconstruction against every image in the batch (only a warning), and the model learns the mean "
        "phantom.",
        TASK_LOSS,
    ),
    SealedCase(
        "stars_mean_over_padding",
        "variable-star classification from padded light curves (centring the magnitudes)",
        m.StarNetMeanWithPadding,
        star_data,
        "The star's mean magnitude is taken over the padded row, zeros included: every centred magnitude is "
        "off by several magnitudes, by an amount set by how often the star was seen.",
        NORMALISED,
    ),
    SealedCase(
        "stars_subsample_sorts_times_only",
        "variable-star classification from padded light curves (observation subsampling)",
        m.StarNet,
        partial(star_data, d.subsample_sorting_times),
        "The subsampling augmentation puts the kept nights back in time order by sorting the times column "
        "alone: the magnitudes stay in the random order they were drawn, each paired with another night.",
        PAIRED,
    ),
    SealedCase(
        "stars_grads_cleared_per_epoch",
        "variable-star classification from padded light curves (manual optimisation, two-batch accumulation)",
        m.StarNetAccumulatedClearedPerEpoch,
        star_data,
        "The manual optimisation loop calls zero_grad once per epoch, in on_train_epoch_start, not after "
        "each step: within an epoch the gradients pile up, and each step follows their running sum.",
        SCHEDULE,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "stereo_cost_volume",
            "stereo disparity from 1-D scanline pairs (soft argmin over a cost volume; smooth L1 on the "
            "observable pixels only; random crops of pair and disparity together)",
            m.StereoNet,
            stereo_data,
        ),
        (
            "stereo_raw_grey_levels",
            "stereo disparity from 1-D scanline pairs (raw grey levels around 128, standardised inside the "
            "model)",
            m.StereoNetRaw,
            partial(stereo_data, raw=True),
        ),
        (
            "separation_ratio_mask",
            "source separation by spectrogram masking (sigmoid mask; mixture and sources levelled together)",
            m.Separator,
            separation_data,
        ),
        (
            "separation_two_masks",
            "source separation by spectrogram masking (a softmax across two sources; the sum of both "
            "sources' losses)",
            m.TwoMaskSeparator,
            separation_data,
        ),
        (
            "dyck_packed_lstm",
            "Dyck-word recognition (LSTM over packed words; its final hidden state)",
            m.DyckLSTM,
            dyck_data,
        ),
        (
            "dyck_gather_at_length",
            "Dyck-word recognition (LSTM over right-padded words, read at each word's last token)",
            m.DyckLSTMGatherLast,
            dyck_data,
        ),
        (
            "dyck_length_curriculum",
            "Dyck-word recognition (a custom sampler: words drawn with replacement, the longest allowed "
            "length growing each epoch)",
            m.DyckLSTM,
            partial(dyck_data, sampler=d.curriculum),
        ),
        (
            "dyck_class_balanced_sampler",
            "Dyck-word recognition (a WeightedRandomSampler drawing both classes equally often)",
            m.DyckLSTM,
            partial(dyck_data, sampler=d.class_balanced),
        ),
        (
            "tomography_mlp",
            "tomographic reconstruction from parallel-beam sinograms (phantoms turned and rescanned per "
            "read; sinograms divided by a fixed scale)",
            m.TomoNet,
            tomography_data,
        ),
        (
            "tomography_data_consistency",
            "tomographic reconstruction from parallel-beam sinograms (image loss plus a reprojection loss "
            "through a frozen projector)",
            m.TomoNetDataConsistency,
            tomography_data,
        ),
        (
            "stars_deep_sets",
            "variable-star classification from padded light curves (masked centring, masked mean and max "
            "pooling; observations subsampled per read)",
            m.StarNet,
            star_data,
        ),
        (
            "stars_focal_time_shift",
            "variable-star classification from padded light curves (focal loss; curves shifted in time per "
            "read, the kind unchanged)",
            m.StarNetFocal,
            partial(star_data, d.shift_times),
        ),
        (
            "stars_manual_accumulation",
            "variable-star classification from padded light curves (manual optimisation: two batches' "
            "gradients summed per step)",
            m.StarNetAccumulated,
            star_data,
        ),
    )
]
