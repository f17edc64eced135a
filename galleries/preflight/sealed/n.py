"""Sealed gallery N (issue #34, half ``n``): multi-task molecular property prediction with sparsely measured
assays, imputation of multichannel sensor series (masked self-supervision, manual optimisation), bitemporal
change detection with a siamese CNN, gesture recognition from hand-landmark sequences, energy disaggregation
(seq2point) and learning with noisy labels by small-loss selection. Written blind (see the package
docstring); each bug is proved against its healthy twin in ``test_proofs_n.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _n_data as d
from galleries.preflight.sealed import _n_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def assay_data() -> dict[str, Any]:
    """2,000 training and 500 validation molecules; about 65% of the outcomes are NaN (never measured)."""
    train, val = d.Rows(*d.molecules(2000, 1)), d.Rows(*d.molecules(500, 2))
    return d.loaders(train, val, batch_size=64)


def series_data() -> dict[str, Any]:
    """2,000 training and 400 validation series; a fresh quarter of the observed readings hidden per read."""
    train = d.Rows(*d.sensor_series(2000, 1), transform=d.hide_some)
    val = d.Rows(*d.sensor_series(400, 2), transform=d.hide_some)
    return d.loaders(train, val, batch_size=64)


def change_data(augment=d.flip_pair) -> dict[str, Any]:
    """1,500 training pairs (flipped per read by ``augment``) and 300 validation pairs."""
    train = d.Rows(*d.image_pairs(1500, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.image_pairs(300, 2)), batch_size=64)


def gesture_data(augment=d.mirror) -> dict[str, Any]:
    """2,000 training sequences (mirrored per read by ``augment``) and 500 validation sequences."""
    train = d.Rows(*d.gestures(2000, 1), transform=augment)
    val = d.Rows(*d.gestures(500, 2))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.GESTURES}


def mains_data(offset: int = d.WINDOW // 2) -> dict[str, Any]:
    """Windows every 3 readings of 12,000 readings of one house (training) and of 3,000 of another
    (validation), each paired with the heater's power ``offset`` readings into the window."""
    train = d.Rows(*d.seq2point(*d.house(12000, 1), stride=3, offset=offset))
    val = d.Rows(*d.seq2point(*d.house(3000, 2), stride=3, offset=offset))
    return d.loaders(train, val, batch_size=64)


def noisy_digit_data() -> dict[str, Any]:
    """The 1,000 training digits, 40% of their labels wrong, and 300 validation digits checked by an
    expert."""
    train, val = d.Rows(*d.noisy_digits("train", 1)), d.Rows(*d.digits("val"))
    return {**d.loaders(train, val), "num_classes": 10}


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
DEPENDS = "the output depends on what the task says it depends on"
SHAPES = "tensors are laid out as the layers read them"
SERVED = "what validation reports is what the model does when served"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "assays_unmeasured_as_inactive",
        "multi-task molecular property prediction (sparse assay labels)",
        m.AssayNetMissingAsInactive,
        assay_data,
        "The unmeasured outcomes (NaN) are filled with 0 and scored as inactive: two thirds of the labels "
        "the model learns are invented negatives, and every served probability of activity is far too low.",
        TASK_LOSS,
    ),
    SealedCase(
        "imputer_scored_on_visible_readings",
        "multichannel time-series imputation (masked self-supervision)",
        m.ImputerScoredOnVisible,
        series_data,
        "The reconstruction loss is masked with the visible mask instead of the hidden one: the residual "
        "model learns to add nothing to the readings it is given, and fills every gap with zero.",
        TASK_LOSS,
    ),
    SealedCase(
        "imputer_validated_on_observed_readings",
        "multichannel time-series imputation (validation path)",
        m.ImputerValidatedOnObserved,
        series_data,
        "validation_step averages the served series' error over every observed reading, not over the hidden "
        "ones: three quarters of the readings it scores were given to the model and pass through exactly, "
        "and the reported error is a fraction of the imputation error.",
        SERVED,
    ),
    SealedCase(
        "imputer_manual_loop_without_zero_grad",
        "multichannel time-series imputation (manual optimisation)",
        m.ImputerManualNoZeroGrad,
        series_data,
        "The manual training_step calls manual_backward and step but never zero_grad: gradients pile up over "
        "the whole run and each step follows their sum, not the current batch.",
        SCHEDULE,
    ),
    SealedCase(
        "change_pair_flipped_independently",
        "bitemporal change detection (siamese CNN, flip augmentation)",
        m.ChangeNet,
        partial(change_data, d.flip_each),
        "The single-image flip helper is mapped over before, after and mask: each draws its own flips, so in "
        "15 reads of 16 the images or the mask no longer line up and changes are learnt where none are.",
        PAIRED,
    ),
    SealedCase(
        "change_after_image_encoded_twice",
        "bitemporal change detection (siamese CNN)",
        m.ChangeNetAfterTwice,
        change_data,
        "A copy-paste slip encodes the after image in both branches: the before image is never read, and the "
        "model marks every building as new.",
        DEPENDS,
    ),
    SealedCase(
        "gesture_mirror_keeps_swipe_label",
        "gesture recognition from hand-landmark sequences (mirror augmentation)",
        m.GestureGRU,
        partial(gesture_data, d.mirror_points_only),
        "The mirror augmentation (meant for left- and right-handed users) flips x but keeps the label: a "
        "mirrored swipe left moves right yet is labelled left, and left and right swipes are confused.",
        PAIRED,
    ),
    SealedCase(
        "gesture_gru_not_batch_first",
        "gesture recognition from hand-landmark sequences (GRU)",
        m.GestureGRUTimeMajor,
        gesture_data,
        "The GRU is built without batch_first=True and fed (batch, frames, features): it recurs across the "
        "batch, and each gesture is judged from its last frame plus other gestures' last frames.",
        SHAPES,
    ),
    SealedCase(
        "gesture_centred_on_each_frame",
        "gesture recognition from hand-landmark sequences (landmark normalisation)",
        m.GestureGRUCentredPerFrame,
        gesture_data,
        "The landmark centring copied from a static hand-pose classifier subtracts each frame's own wrist: "
        "the hand's shape survives but its motion is removed, and the swipes can only be guessed.",
        DEPENDS,
    ),
    SealedCase(
        "seq2point_target_after_window",
        "energy disaggregation (seq2point on household mains)",
        m.Seq2Point,
        partial(mains_data, d.WINDOW),
        "The target index is copied from forecasting code (i + window): each window is paired with the "
        "heater's power one step after it, not at its midpoint, so every switch on or off is learnt late.",
        PAIRED,
    ),
    SealedCase(
        "seq2point_step_lr_per_batch",
        "energy disaggregation (seq2point, StepLR)",
        m.Seq2PointStepLRPerBatch,
        mains_data,
        "StepLR(step_size=2, gamma=.5) is returned with interval 'step': the learning rate halves every two "
        "batches and training stops in its first epoch.",
        SCHEDULE,
    ),
    SealedCase(
        "small_loss_selection_keeps_largest",
        "learning with noisy labels (small-loss selection)",
        m.SmallLossNetKeepsLargest,
        noisy_digit_data,
        "losses.topk(keep) keeps the largest losses (topk's default): as the forget rate ramps up, the model "
        "trains on the rows most likely mislabelled and drops the clean ones.",
        TASK_LOSS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "assays_masked_sparse_labels",
            "multi-task molecular property prediction (two thirds of the labels NaN, masked out)",
            m.AssayNet,
            assay_data,
        ),
        (
            "imputer_hidden_readings_with_mask_channel",
            "time-series imputation (residual over zeroed inputs, a mask channel; loss on a quarter of the "
            "readings)",
            m.Imputer,
            series_data,
        ),
        (
            "imputer_manual_clipped",
            "time-series imputation (manual optimisation with hand-clipped gradients)",
            m.ImputerManual,
            series_data,
        ),
        (
            "change_shared_flips",
            "bitemporal change detection (one flip for pair and mask; a fifth of the masks empty)",
            m.ChangeNet,
            change_data,
        ),
        (
            "gesture_centred_on_first_wrist",
            "gesture recognition (landmarks centred on the first frame's wrist inside the model)",
            m.GestureGRUCentred,
            gesture_data,
        ),
        (
            "gesture_mirror_swaps_swipes",
            "gesture recognition (a mirror augmentation that changes a swipe's label)",
            m.GestureGRU,
            gesture_data,
        ),
        (
            "seq2point_mostly_off_appliance",
            "energy disaggregation (target zero three quarters of the time; StepLR per epoch)",
            m.Seq2Point,
            mains_data,
        ),
        (
            "small_loss_selection_on_noisy_digits",
            "learning with noisy labels (40% of labels flipped to the next class; training loss on the "
            "smallest losses only; expert-checked validation)",
            m.SmallLossNet,
            noisy_digit_data,
        ),
    )
]
