"""Sealed gallery V (issue #34, half ``v``): traffic-sign recognition (mirror-image and colour-coded
classes), seismic phase picking (a per-sample arrival probability over a trace), semantic textual similarity
with a bi-encoder (cosine against a 0..5 score), no-reference image quality assessment (an opinion score from
a distorted scan), indoor positioning from Wi-Fi fingerprints (with a step decay) and gaze estimation from
eye crops (a bounded head, manual optimisation). Written blind (see the package docstring); each bug is
proved against its healthy twin in ``test_proofs_v.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _v_data as d
from galleries.preflight.sealed import _v_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def sign_data(augment=None, bgr: bool = False) -> dict[str, Any]:
    """3,000 training crops (augmented per read by ``augment``) and 500 validation crops; with ``bgr`` (the
    BUG) both as OpenCV loads them, channels reversed."""
    (x, y), (vx, vy) = d.signs(3000, 1), d.signs(500, 2)
    if bgr:
        x, vx = d.as_bgr(x), d.as_bgr(vx)
    train = d.Rows(x, y, transform=augment)
    return {**d.loaders(train, d.Rows(vx, vy), batch_size=64), "num_classes": d.SIGN_CLASSES}


def picking_data(augment=d.random_crop) -> dict[str, Any]:
    """3,000 training traces (cropped per read by ``augment``) and 500 whole validation traces."""
    train = d.Rows(*d.traces(3000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.traces(500, 2)), batch_size=64)


def similarity_data(bucketed: bool = False, augment=None) -> dict[str, Any]:
    """3,000 training pairs (sorted by length with ``bucketed``; augmented per read by ``augment``) and 500
    validation pairs."""
    pairs = d.sentence_pairs(3000, 1)
    if bucketed:
        pairs = d.bucketed_by_length(*pairs)
    train = d.Rows(*pairs, transform=augment)
    return d.loaders(train, d.Rows(*d.sentence_pairs(500, 2)), batch_size=64)


def quality_data(augment=None) -> dict[str, Any]:
    """The 1,000 training digits in 3 distortions each (augmented per read by ``augment``) and the 300
    validation digits in 2."""
    train = d.Rows(*d.distorted("train", 3, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.distorted("val", 2, 2)), batch_size=64)


def wifi_data(floor_plan: bool = False, augment=None) -> dict[str, Any]:
    """3,000 surveyed training positions (labels read off the floor plan as (row, column) with
    ``floor_plan``, the BUG; augmented per read by ``augment``) and 500 validation positions."""
    rssi, xy = d.fingerprints(3000, 1)
    vrssi, vxy = d.fingerprints(500, 2)
    if floor_plan:
        xy, vxy = d.as_floor_plan_pixels(xy), d.as_floor_plan_pixels(vxy)
    train = d.Rows(d.scaled(rssi), xy, transform=augment)
    return d.loaders(train, d.Rows(d.scaled(vrssi), vxy), batch_size=32)


def gaze_data() -> dict[str, Any]:
    """3,000 training eye crops and 500 validation crops with their gaze in degrees."""
    return d.loaders(d.Rows(*d.eyes(3000, 1)), d.Rows(*d.eyes(500, 2)), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
CONVENTION = "training inputs and labels follow the convention the served model is read with"
UNITS = "targets are in the units and range the output is read in"
FRESH_GRADIENTS = "each optimisation step follows the gradient of its own batch"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "signs_hflip_keeps_label",
        "traffic-sign recognition (augmentation)",
        m.SignNet,
        partial(sign_data, d.hflip),
        "The random horizontal flip of the image-classification template keeps the label: a flipped "
        "'turn left' sign is taught as 'turn left' although it now shows 'turn right', and the served model "
        "confuses left and right signs.",
        PAIRED,
    ),
    SealedCase(
        "signs_trained_on_bgr",
        "traffic-sign recognition (colour channels)",
        m.SignNet,
        partial(sign_data, bgr=True),
        "The crops are loaded with OpenCV (blue, green, red) for training and validation, while the served "
        "camera frames are RGB: red prohibition signs are read as blue mandatory ones and the reverse.",
        CONVENTION,
    ),
    SealedCase(
        "picking_crop_keeps_catalogue_onset",
        "seismic phase picking (random-window augmentation)",
        m.Picker,
        partial(picking_data, d.random_crop_onset_kept),
        "The random 2-second window keeps the catalogue's onset on the whole trace's clock instead of "
        "moving it to the window's: the labels lie 0..0.56 s after the arrival the window shows, and the "
        "served picks come late.",
        PAIRED,
    ),
    SealedCase(
        "picking_onset_seconds_as_samples",
        "seismic phase picking (Gaussian pick labels)",
        m.PickerOnsetInSeconds,
        picking_data,
        "The label Gaussian is centred on the onset in seconds, as the catalogue gives it, as if it were a "
        "sample index: every target peaks at the trace's first samples and the model learns to pick there.",
        UNITS,
    ),
    SealedCase(
        "similarity_raw_scores",
        "semantic textual similarity (bi-encoder, cosine regression)",
        m.SimilarityNetRawScores,
        similarity_data,
        "The cosine is regressed on the raw 0..5 score, not the score over 5: most targets lie above any "
        "cosine, the encoder learns to make every sentence alike, and the served scores say 5 for all.",
        UNITS,
    ),
    SealedCase(
        "similarity_pairs_bucketed_scores_not",
        "semantic textual similarity (length bucketing)",
        m.SimilarityNet,
        partial(similarity_data, True),
        "The pairs are sorted by length for bucketing but the scores keep the file's order: each pair "
        "trains on another pair's score, and the model learns nothing about similarity.",
        PAIRED,
    ),
    SealedCase(
        "quality_photometric_jitter",
        "no-reference image quality assessment (augmentation)",
        m.QualityNet,
        partial(quality_data, d.photometric_jitter),
        "The photometric augmentation of a classifier template (contrast jitter and Gaussian noise) is "
        "applied to the scans but their opinion scores are kept: the augmentation adds and removes the very "
        "distortions the score measures, and the served scores drift from the opinions.",
        PAIRED,
    ),
    SealedCase(
        "quality_per_image_standardised",
        "no-reference image quality assessment (input normalisation)",
        m.QualityNetPerImageStandardised,
        quality_data,
        "Each scan is standardised on its own, as classifiers normalise: the contrast loss that lowers the "
        "score is divided away before the network sees it.",
        DEPENDS,
    ),
    SealedCase(
        "wifi_labels_row_column",
        "indoor positioning from Wi-Fi fingerprints (position labels)",
        m.Locator,
        partial(wifi_data, True),
        "The surveyed positions were clicked on the floor-plan image and read back as (row, column), that "
        "is (y, x), while the served position is read as (x, y): on a 60 x 20 m floor every answer is "
        "mirrored across the diagonal.",
        CONVENTION,
    ),
    SealedCase(
        "wifi_step_decay_per_batch",
        "indoor positioning from Wi-Fi fingerprints (step decay)",
        m.LocatorStepDecayPerBatch,
        wifi_data,
        "The StepLR(step_size=4) meant to halve the rate every 4 epochs is scheduled with interval "
        "'step': it halves every 4 batches, and the network stops learning within the first epoch.",
        SCHEDULE,
    ),
    SealedCase(
        "gaze_tanh_head_on_degrees",
        "gaze estimation from eye crops (bounded head)",
        m.GazeNetTanhDegrees,
        gaze_data,
        "A tanh head copied from a model of normalised angles regresses the gaze in degrees: the answer "
        "cannot leave (-1, 1) degree and every gaze is served as nearly straight ahead.",
        UNITS,
    ),
    SealedCase(
        "gaze_manual_step_without_zero_grad",
        "gaze estimation from eye crops (manual optimisation)",
        m.GazeNetManualNoZeroGrad,
        gaze_data,
        "The hand-written optimisation step never zeroes the gradients: each backward adds to the sum of "
        "every earlier batch's, each step follows that stale sum, and the served gaze stays coarse.",
        FRESH_GRADIENTS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "signs_hflip_relabels_mirror",
            "traffic-sign recognition (a horizontal flip that relabels left as right and right as left; "
            "'ahead' signs keep their label)",
            m.SignNet,
            partial(sign_data, d.hflip_mirrored),
        ),
        (
            "picking_softmax_over_time_polarity",
            "seismic phase picking (one softmax over the trace's samples against a normalised Gaussian: its "
            "floor is the target's entropy; random windows and reversed polarity)",
            m.PickerSoftmaxOverTime,
            partial(picking_data, d.crop_and_polarity),
        ),
        (
            "similarity_swapped_pairs_dropped_tokens",
            "semantic textual similarity (pairs in random order, a tenth of the tokens dropped to padding)",
            m.SimilarityNet,
            partial(similarity_data, augment=d.swap_and_drop),
        ),
        (
            "quality_bounded_head_flips",
            "image quality assessment (a sigmoid head bounded to the 1..5 scale; flips and quarter turns)",
            m.QualityNetBounded,
            partial(quality_data, d.flips_and_turns),
        ),
        (
            "wifi_access_point_dropout_step_decay",
            "indoor positioning (access points dropped at random to 'not heard'; a step decay per epoch)",
            m.LocatorStepDecay,
            partial(wifi_data, augment=d.access_point_dropout),
        ),
        (
            "gaze_tanh_head_normalised",
            "gaze estimation (a tanh head on angles over 40 degrees)",
            m.GazeNetTanh,
            gaze_data,
        ),
        (
            "gaze_manual_clipped_steps",
            "gaze estimation (manual optimisation: zero, backward, clip to norm 1, step, by hand)",
            m.GazeNetManual,
            gaze_data,
        ),
    )
]
