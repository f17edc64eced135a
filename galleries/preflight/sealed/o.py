"""Sealed gallery N, second half (``o``): time difference of arrival of a click between two microphones
(crops and microphone swaps), reading two-digit strips with one head per position, learning with noisy labels
through forward loss correction, multi-task bioassay activity from compound fingerprints (assays not run,
replicate measurements), long-tailed classification with a logit-adjusted loss (and a step decay),
imputation of gaps in sensor series (also by manual optimisation) and insurance claim frequency with an
exposure offset. Written blind (see the package docstring); each bug is proved against its healthy twin in
``test_proofs_o.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _o_data as d
from galleries.preflight.sealed import _o_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def delay_data(augment=d.crop_and_swap) -> dict[str, Any]:
    """2,000 training recordings (cropped, and swapped, per read by ``augment``) and 500 validation ones
    (centre window)."""
    train = d.Rows(*d.stereo_clicks(2000, 1), transform=augment)
    val = d.Rows(*d.stereo_clicks(500, 2), transform=d.centre_crop)
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.DELAYS}


def strip_data(augment=d.jitter) -> dict[str, Any]:
    """3,000 training strips from the training digits (moved per read by ``augment``) and 500 validation
    strips from the validation digits."""
    train = d.Rows(*d.strips("train", 3000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.strips("val", 500, 2)), batch_size=64)


def noisy_label_data() -> dict[str, Any]:
    """The training and validation digits with their labels as annotated (40% moved to the next class)."""
    train, val = d.Rows(*d.noisy_digits("train", 1)), d.Rows(*d.noisy_digits("val", 2))
    return {**d.loaders(train, val), "num_classes": 10}


def assay_data(prepare=None) -> dict[str, Any]:
    """3,000 training and 500 validation compounds from the screening table, each run in 3 of 8 assays;
    ``prepare`` is applied per read."""
    train = d.Rows(*d.screen(3000, 1), transform=prepare)
    val = d.Rows(*d.screen(500, 2), transform=prepare)
    return d.loaders(train, val, batch_size=64)


def replicate_data(split=d.split_compounds) -> dict[str, Any]:
    """1,200 compounds measured 3 times each, split 5:1 into training and validation by ``split``."""
    parts = split(1200, 3)
    return d.loaders(d.Rows(*parts["train"]), d.Rows(*parts["val"]), batch_size=64)


def long_tail_data() -> dict[str, Any]:
    """The long-tailed training and validation digits (class 9 at 5% of class 0)."""
    return {**d.loaders(d.Rows(*d.long_tail("train")), d.Rows(*d.long_tail("val"))), "num_classes": 10}


def gap_data() -> dict[str, Any]:
    """2,000 training series (a fresh 30% of steps hidden per read) and 500 validation series with fixed
    gaps."""
    train = d.Rows(*d.series(2000, 1), transform=d.hide)
    return d.loaders(train, d.Rows(*d.gappy_series(500, 2)), batch_size=64)


def claim_data() -> dict[str, Any]:
    """4,000 training and 1,000 validation policies: features, exposure and claim count (the true rate is not
    known to a user and is left out)."""
    train, val = d.policies(4000, 1)[:3], d.policies(1000, 2)[:3]
    return d.loaders(d.Rows(*train), d.Rows(*val), batch_size=128)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
SPLIT = "what validation scores was not seen in training"
SCHEDULE = "the loop's state machines (schedulers, accumulation, averaging) advance as declared"
DEPENDS = "the output depends on what the task says it depends on"
TASK_LOSS = "the loss scores the target the task declares"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "tdoa_crop_per_channel",
        "time difference of arrival (two-microphone click, random crops)",
        m.DelayNet,
        partial(delay_data, d.random_crop_per_channel),
        "The random 64-sample crop is applied to each channel separately, at its own offset: the delay the "
        "model sees is the true one plus the difference of two random offsets, so the label is mostly wrong.",
        PAIRED,
    ),
    SealedCase(
        "tdoa_swap_without_negating",
        "time difference of arrival (microphone-swap augmentation)",
        m.DelayNet,
        partial(delay_data, d.crop_and_swap_keep_label),
        "The left and right channels are swapped half the time to augment, but the delay label is not "
        "negated: the model cannot learn which microphone heard the click first and is wrong on the sign.",
        PAIRED,
    ),
    SealedCase(
        "strip_mirror_augmentation",
        "two-digit strip reading (one head per digit position)",
        m.StripReader,
        partial(strip_data, d.jitter_and_mirror),
        "The augmentation copied from an image classifier flips strips horizontally half the time: the two "
        "digits change places (and are mirrored) while the labels stay (left, right).",
        PAIRED,
    ),
    SealedCase(
        "strip_heads_after_global_pool",
        "two-digit strip reading (position heads)",
        m.StripReaderPooled,
        strip_data,
        "The position heads read globally average-pooled features: the left-digit and right-digit heads see "
        "the same vector, which has lost where each digit was, so the order of the two digits is a guess.",
        DEPENDS,
    ),
    SealedCase(
        "noisy_labels_transition_transposed",
        "learning with noisy labels (forward loss correction)",
        m.ForwardCorrectedTransposed,
        noisy_label_data,
        "softmax @ T.T where T is stored as T[clean, noisy]: the correction models labels moving to the "
        "previous class, so the clean classifier absorbs the real noise and shifts its answers.",
        TASK_LOSS,
    ),
    SealedCase(
        "assay_unrun_as_inactive",
        "multi-task bioassay activity (fingerprints, assays not run)",
        m.AssayNet,
        partial(assay_data, d.missing_as_inactive),
        "The screening table is passed through nan_to_num: the 5 assays a compound was never run in count as "
        "measured inactive, so the served probability of activity is pushed far below the truth.",
        TASK_LOSS,
    ),
    SealedCase(
        "assay_replicates_split_by_row",
        "multi-task bioassay activity (replicate measurements, random split)",
        m.WideAssayNet,
        partial(replicate_data, d.split_rows),
        "Rows are split at random although each compound was measured 3 times: validation compounds have "
        "replicates in training, and the memorised compounds make validation overstate new-compound "
        "accuracy.",
        SPLIT,
    ),
    SealedCase(
        "long_tail_prior_sign_flipped",
        "long-tailed classification (logit-adjusted loss)",
        m.LogitAdjustedSignFlipped,
        long_tail_data,
        "The log prior is subtracted from the logits in the loss instead of added: the served raw logits "
        "lean further towards the frequent classes and the rare digits are rarely predicted.",
        TASK_LOSS,
    ),
    SealedCase(
        "long_tail_decay_stepped_per_batch",
        "long-tailed classification (step decay)",
        m.LogitAdjustedDecayPerStep,
        long_tail_data,
        "The StepLR(step_size=8, gamma=0.3) meant per epoch is declared with interval 'step': the learning "
        "rate falls 0.3x every 8 batches and training stops in effect during the third epoch.",
        SCHEDULE,
    ),
    SealedCase(
        "imputation_loss_on_observed_steps",
        "imputation of gaps in sensor series",
        m.ImputerScoredOnObserved,
        gap_data,
        "The loss weights the error by the observation mask rather than by its complement: the model is "
        "scored only where it was shown the answer, learns to copy its input, and fills gaps with noise.",
        TASK_LOSS,
    ),
    SealedCase(
        "imputation_warm_up_never_stepped",
        "imputation of gaps in sensor series (manual optimisation, warm-up schedule)",
        m.ImputerScheduleNeverStepped,
        gap_data,
        "After the switch to manual optimisation (to accumulate 4 batches) nobody calls the scheduler's "
        "step: Lightning does not in manual mode, so the linear warm-up stays at 2% of the learning rate "
        "for the whole run.",
        SCHEDULE,
    ),
    SealedCase(
        "claims_exposure_offset_missing",
        "insurance claim frequency (Poisson counts over exposure)",
        m.ClaimRateNoOffset,
        claim_data,
        "The Poisson loss compares the predicted rate with the claim count without the log-exposure offset: "
        "the model learns claims per policy, and the yearly rate it serves is too low by the mean exposure.",
        TASK_LOSS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "tdoa_crop_and_swap_negated",
            "time difference of arrival (shared crop, swapped microphones with the delay negated)",
            m.DelayNet,
            delay_data,
        ),
        (
            "strip_jitter_flattened_heads",
            "two-digit strips (a 20-way head read as 2 x 10, both digits moved together)",
            m.StripReader,
            strip_data,
        ),
        (
            "noisy_labels_forward_corrected",
            "learning with noisy labels (the loss stays near .67 nats: the label noise cannot be learned)",
            m.ForwardCorrected,
            noisy_label_data,
        ),
        (
            "assay_masked_unrun",
            "multi-task bioassays (5 of 8 targets NaN in every row, left out of the loss)",
            m.AssayNet,
            assay_data,
        ),
        (
            "assay_replicates_split_by_compound",
            "multi-task bioassays (identical replicate rows, a wide MLP)",
            m.WideAssayNet,
            replicate_data,
        ),
        (
            "long_tail_logit_adjusted",
            "long-tailed classification (log prior added to the logits in the loss only)",
            m.LogitAdjusted,
            long_tail_data,
        ),
        (
            "imputation_scored_on_gaps",
            "imputation of sensor series (the loss ignores 70% of the outputs; new gaps every read)",
            m.Imputer,
            gap_data,
        ),
        (
            "imputation_manual_accumulation",
            "sensor-series imputation (manual optimisation: step per 4 batches, warm-up stepped in the loop)",
            m.ImputerAccumulated,
            gap_data,
        ),
        (
            "claims_with_exposure_offset",
            "insurance claim frequency (an offset the model never sees; most counts are 0)",
            m.ClaimRate,
            claim_data,
        ),
    )
]
