"""Sealed gallery R (issue #34, half ``r``): visual addition (the sum of two handwritten digits with a shared
encoder), spectral unmixing (the abundances of materials in a pixel's spectrum, on the simplex), discrete-time
survival with a logistic hazard per interval, heartbeat classification from single ECG beats of many
patients, weakly labelled sound event detection (clip tags, frame-level detections, mixing augmentation) and
learning from several annotators' votes. Written blind (see the package docstring); each bug is proved
against its healthy twin in ``test_proofs_r.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _r_data as d
from galleries.preflight.sealed import _r_models as m
from galleries.sealed import gen


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def sum_data(redraw: bool = True, swap: bool = False, stale: bool = False) -> dict[str, Any]:
    """The 1,000 training digits, each paired per read with a fresh partner (or a fixed one, without
    ``redraw``), and the 300 validation digits with fixed partners; with their sums (``swap``: the pair's
    order drawn per read; ``stale``: the sum of the fixed partner)."""
    train = d.DigitPairs("train", 1, redraw=redraw, swap=swap, stale=stale)
    return {**d.loaders(train, d.DigitPairs("val", 2)), "num_classes": d.SUMS}


def unmixing_data(augment=None) -> dict[str, Any]:
    """3,000 training pixels (through ``augment`` per read, if given) and 500 validation pixels with their
    abundances."""
    train = d.Rows(*d.pixels(3000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.pixels(500, 2)), batch_size=64)


def survival_data() -> dict[str, Any]:
    """3,000 training patients and 500 validation patients: (covariates, interval, event seen)."""
    return d.loaders(d.Rows(*d.patients(3000, 1)), d.Rows(*d.patients(500, 2)), batch_size=64)


def beat_data(split_by_beat: bool = False, first_symbol: bool = False) -> dict[str, Any]:
    """The beats of 40 recorded patients: those of 30 patients for training and of the other 10 for
    validation; with ``split_by_beat`` a random quarter of all the beats is held out for validation instead.
    The annotations come as one symbol list per recording, the record-start marker first; ``first_symbol``
    keeps that marker (the BUG: the labels then run one beat late)."""
    wave, kind, patient = d.beats(40, 1)
    if first_symbol:  # each list starts with the marker, read as normal (0): the labels run one beat late
        per_patient = kind.view(-1, d.PATIENT_BEATS)
        kind = torch.cat([per_patient.new_zeros(len(per_patient), 1), per_patient[:, :-1]], 1).flatten()
    if split_by_beat:
        held = torch.randperm(len(kind), generator=gen(7)) < len(kind) // 4
    else:
        held = patient >= 30
    train, val = d.Rows(wave[~held], kind[~held]), d.Rows(wave[held], kind[held])
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.BEAT_CLASSES}


def event_data() -> dict[str, Any]:
    """2,000 training clips (each mixed with another per read) and 400 validation clips, with their tags."""
    mel, tags, _ = d.clips(2000, 1)
    val_mel, val_tags, _ = d.clips(400, 2)
    return d.loaders(d.MixedClips(mel, tags), d.Rows(val_mel, val_tags), batch_size=64)


def crowd_data() -> dict[str, Any]:
    """The 1,000 training digits and the 300 validation digits with their annotators' votes."""
    return d.loaders(d.Rows(*d.votes("train", 1)), d.Rows(*d.votes("val", 2)))


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
DEPENDS = "the output depends on what the task says it depends on"
SHAPES = "tensors are laid out as the layers and losses read them"
CONVENTION = "each loss is called with the arguments in the form its convention expects"
TASK_LOSS = "the loss scores the target the task declares"
MASKED = "the loss covers exactly the entries the data observe"
SERVED = "the served model computes what the trained and validated one computes"
FROZEN = "every part meant to train is trained"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
SPLIT = "validation data are independent of the training data at the level the model is served at"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "sum_partner_redrawn_per_read",
        "visual addition of two handwritten digits (pairing)",
        m.DigitAdder,
        partial(sum_data, stale=True),
        "For variety, the partner image is drawn afresh at every read, but the sum is still the one computed "
        "with the fixed partner: the second digit no longer matches its label, and the served sums are off "
        "by the second digit.",
        PAIRED,
    ),
    SealedCase(
        "sum_first_digit_encoded_twice",
        "visual addition of two handwritten digits (shared encoder)",
        m.DigitAdderFirstTwice,
        sum_data,
        "A copy-paste slip encodes the first digit twice: the head never sees the second digit and can only "
        "guess it.",
        DEPENDS,
    ),
    SealedCase(
        "sum_unfrozen_encoder_not_in_optimizer",
        "visual addition of two handwritten digits (pretrained encoder, frozen for a warm-up epoch)",
        m.DigitAdderWarmStartOptimizerTrainableOnly,
        sum_data,
        "The optimizer is built from the parameters that require gradients at configuration time, while "
        "the pretrained encoder is frozen for its warm-up: unfreezing it later has no effect, and the "
        "encoder, pretrained on the digits 0..4 only, is never fine-tuned.",
        FROZEN,
    ),
    SealedCase(
        "unmixing_softmax_over_batch",
        "spectral unmixing (abundances on the simplex)",
        m.UnmixerSoftmaxOverBatch,
        unmixing_data,
        "The softmax runs over dim 0, the rows of the batch, instead of the materials: a pixel's abundances "
        "do not sum to 1 and depend on the other pixels it is served with.",
        SHAPES,
    ),
    SealedCase(
        "unmixing_kl_div_on_probabilities",
        "spectral unmixing (KL divergence loss)",
        m.UnmixerKLOnProbabilities,
        unmixing_data,
        "F.kl_div is given probabilities where it expects log-probabilities: the loss rewards putting all "
        "the mass on each pixel's main material, and the served abundances are near one-hot.",
        CONVENTION,
    ),
    SealedCase(
        "survival_censored_counted_as_events",
        "discrete-time survival (logistic hazard per interval)",
        m.HazardNetCensoredAsEvents,
        survival_data,
        "The per-interval labels are built from the time column alone: every patient who dropped out counts "
        "as an event where they left, and the served survival curves fall far too fast.",
        TASK_LOSS,
    ),
    SealedCase(
        "survival_at_risk_mask_missing",
        "discrete-time survival (logistic hazard per interval)",
        m.HazardNetNoAtRiskMask,
        survival_data,
        "The at-risk mask is left out: the intervals after an event or a drop-out are scored as survived, "
        "and the served survival curves stay far too high.",
        MASKED,
    ),
    SealedCase(
        "beats_split_by_beat_not_patient",
        "heartbeat classification from single ECG beats (validation split)",
        m.BeatClassifier,
        partial(beat_data, True),
        "Validation holds a random quarter of all beats, so every validation patient is also a training "
        "patient: the model recognises patients' own beat shapes and mixes, and the validation accuracy "
        "overstates what it does on a new patient.",
        SPLIT,
    ),
    SealedCase(
        "beats_annotations_one_beat_late",
        "heartbeat classification from single ECG beats (reading annotations)",
        m.BeatClassifier,
        partial(beat_data, first_symbol=True),
        "The record-start marker at the head of each recording's symbol list is not dropped: every beat is "
        "labelled with the type of the beat before it, which tells only the patient's usual mix of types.",
        PAIRED,
    ),
    SealedCase(
        "events_served_without_log_compression",
        "weakly labelled sound event detection (serving path)",
        m.EventDetectorServedWithoutLog,
        event_data,
        "The log compression of the energies is applied in the loss but not in predict: the served detector "
        "reads raw energies it never saw in training, while validation (through the loss) looks fine.",
        SERVED,
    ),
    SealedCase(
        "events_step_decay_per_batch",
        "weakly labelled sound event detection (learning-rate decay)",
        m.EventDetectorDecayPerBatch,
        event_data,
        "The step decay meant to halve the learning rate every 4 epochs is scheduled with interval 'step': "
        "it halves every 4 batches, and training stalls within the first epochs.",
        SCHEDULE,
    ),
    SealedCase(
        "crowd_missing_votes_counted_as_zero",
        "learning from several annotators' votes (soft targets)",
        m.CrowdClassifierMissingAsZero,
        crowd_data,
        "The -1 of a missing vote is clamped to 0 so that one_hot accepts it, and is then counted: every "
        "digit gets two extra votes for class 0, and many digits are served as 0.",
        TASK_LOSS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "sum_swapped_pairs_shared_encoder",
            "visual addition (the two digits change places at random per read; one encoder for both)",
            m.DigitAdder,
            partial(sum_data, swap=True),
        ),
        (
            "sum_pretrained_encoder_frozen_first_epoch",
            "visual addition (a pretrained encoder frozen on purpose for the first epoch, then fine-tuned; "
            "its parameters in the optimizer from the start without gradients)",
            m.DigitAdderWarmStart,
            sum_data,
        ),
        (
            "unmixing_kl_from_abundances",
            "spectral unmixing (KL divergence from soft abundance targets; illumination varies per pixel)",
            m.Unmixer,
            unmixing_data,
        ),
        (
            "unmixing_brightness_augmented",
            "spectral unmixing (each training spectrum rescaled at random per read: illumination only)",
            m.Unmixer,
            partial(unmixing_data, d.brightness),
        ),
        (
            "unmixing_soft_cross_entropy",
            "spectral unmixing (cross-entropy with soft targets: the loss keeps the targets' entropy)",
            m.UnmixerSoftCrossEntropy,
            unmixing_data,
        ),
        (
            "survival_masked_hazards",
            "discrete-time survival (binary cross-entropy only where patients were at risk; two covariates "
            "without effect)",
            m.HazardNet,
            survival_data,
        ),
        (
            "beats_split_by_patient_dropout",
            "heartbeat classification (validation on unseen patients; functional dropout in training only)",
            m.BeatClassifier,
            beat_data,
        ),
        (
            "events_mixed_clips_union_tags",
            "weakly labelled sound event detection (inputs are sums of two clips; pooled frame predictions)",
            m.EventDetector,
            event_data,
        ),
        (
            "crowd_soft_votes",
            "learning from several annotators (soft targets from 3 votes of 5 annotators, one mostly random)",
            m.CrowdClassifier,
            crowd_data,
        ),
    )
]
