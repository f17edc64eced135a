"""Sealed gallery R, half ``s``: chord recognition from chroma frames (pitch-shift augmentation over few
training keys), crop-type classification from monthly satellite time series (a GRU; cloudy months),
heartbeat classification across patients (patient-wise splits, manual optimisation), learning from a crowd
of unreliable annotators (soft labels from padded votes), discrete-time survival of customers (a logistic
hazard per month under censoring), polyphonic sound event detection (frame-level multi-label, clips mixed
as augmentation, a served weight average) and learning from label proportions (bags of digits labelled only
with their class shares). Written blind (see the package docstring); each bug is proved against its healthy
twin in ``test_proofs_s.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch
from torch.utils.data import DataLoader

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _s_data as d
from galleries.preflight.sealed import _s_models as m
from galleries.sealed import gen


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def chord_data(augment=d.transposed) -> dict[str, Any]:
    """2,000 training frames and 500 validation frames from songs in five keys (the training frames
    transposed per read by ``augment``)."""
    train = d.Rows(*d.chroma(2000, 1, d.SONG_ROOTS), transform=augment)
    val = d.Rows(*d.chroma(500, 2, d.SONG_ROOTS))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.CHORDS}


def crop_data(augment=None, clouds: bool = False) -> dict[str, Any]:
    """3,000 training fields (augmented per read by ``augment``) and 500 validation fields; with ``clouds``,
    cloudy months are blanked (in both) and flagged in a fifth channel."""
    train = d.Rows(*d.fields(3000, 1), transform=augment or (d.clouded if clouds else None))
    val_x, val_y = d.fields(500, 2)
    if clouds:
        val_x = d.clouded_set(val_x, 2)
    return {**d.loaders(train, d.Rows(val_x, val_y), batch_size=64), "num_classes": d.CROPS}


def beat_data(split_by_patient: bool = True) -> dict[str, Any]:
    """The heartbeats of 40 patients: the first 30 patients' beats train and the other 10's validate (as new
    patients will be served), or, without ``split_by_patient`` (the BUG), all 4,000 beats shuffled and cut
    3,000 / 1,000, so every validation patient's other beats are in training."""
    x, y, _ = d.patients(0, 40)
    order = torch.arange(len(x)) if split_by_patient else torch.randperm(len(x), generator=gen(5))
    train, val = order[:3000], order[3000:]
    return {**d.loaders(d.Rows(x[train], y[train]), d.Rows(x[val], y[val]), batch_size=64), "num_classes": 3}


def crowd_data(padding_value: int = -1) -> dict[str, Any]:
    """The 1,000 training digits and 300 validation digits, each with the 2..5 votes of a crowd (no expert
    label), padded to 5 with ``padding_value``."""
    train = d.Rows(*d.padded_votes("train", 1, padding_value))
    val = d.Rows(*d.padded_votes("val", 2, padding_value))
    return d.loaders(train, val, batch_size=32)


def churn_data() -> dict[str, Any]:
    """3,000 training customers and 500 validation customers: covariates, the month their record ends and
    whether it ends by churning."""
    return d.loaders(d.Rows(*d.customers(3000, 1)), d.Rows(*d.customers(500, 2)), batch_size=64)


def event_data(union: bool = True, augment=None) -> dict[str, Any]:
    """800 training clips, each mixed with its batch neighbour (labels: the union of their events, or the
    first clip's only without ``union``) after ``augment``, and 200 validation clips as recorded."""
    train = d.Rows(*d.clips(800, 1), transform=augment)
    val = d.Rows(*d.clips(200, 2))
    collate = d.mixing_collate(union)
    return {
        "train_dataloaders": DataLoader(train, batch_size=32, shuffle=True, collate_fn=collate),
        "val_dataloaders": DataLoader(val, batch_size=256),
    }


def proportion_data() -> dict[str, Any]:
    """400 training bags of 8 digits and 100 validation bags, labelled only with their class proportions;
    a batch holds 16 bags."""
    train = d.Rows(*d.bags("train", 400, 1))
    return d.loaders(train, d.Rows(*d.bags("val", 100, 2)), batch_size=16)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
SPLIT = "validation data are as new to the model as the data it will be served"
SHAPES = "tensors are laid out as the layers and losses read them"
MASKED = "only observed entries are scored; padding and unobserved cells carry no target"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
AVERAGED = "a served weight average follows the weights the run trains"
CONVENTION = "the loss's convention matches the task's (exclusive classes or independent labels)"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "chord_transpose_wraps_quality",
        "chord recognition from chroma frames (pitch-shift augmentation)",
        m.ChordNet,
        partial(chord_data, d.transposed_wrapping),
        "The transposition moves the label with (chord + k) % 24 over the 24 chord classes instead of "
        "moving the root modulo 12: roots pushed past B spill into the other quality, about half of the "
        "augmented majors are labelled minor (and the reverse), and major and minor are confused when "
        "served.",
        PAIRED,
    ),
    SealedCase(
        "crop_time_shift_augmentation",
        "crop-type classification from monthly satellite time series (augmentation)",
        m.CropNet,
        partial(crop_data, d.time_shifted),
        "A random circular time shift of up to three months, copied from generic time-series augmentation, "
        "moves each field's green-up while keeping its crop: the timing that tells the crops apart is "
        "scrambled, and crops that differ by sowing date are confused.",
        PAIRED,
    ),
    SealedCase(
        "crop_gru_not_batch_first",
        "crop-type classification from monthly satellite time series (GRU)",
        m.CropNetNotBatchFirst,
        crop_data,
        "The GRU lacks batch_first=True: it reads the batch as the time axis and the months as separate "
        "sequences, and the classifier sees December's values of this and earlier fields in the batch "
        "instead of the field's year.",
        SHAPES,
    ),
    SealedCase(
        "beats_split_not_by_patient",
        "heartbeat classification across patients (validation split)",
        m.BeatNet,
        partial(beat_data, False),
        "The beats are shuffled and split without regard to the patient: every validation patient's other "
        "beats (their morphology and their share of abnormal beats) are in training, and validation "
        "accuracy overstates that on new patients.",
        SPLIT,
    ),
    SealedCase(
        "beats_nll_on_raw_scores",
        "heartbeat classification across patients (loss)",
        m.BeatNetNLLOnLogits,
        beat_data,
        "nll_loss is applied to the head's raw scores (the log_softmax was never added): the loss is minus "
        "the true class's score, falls without bound, and nothing pushes the wrong classes' scores down.",
        TASK_LOSS,
    ),
    SealedCase(
        "beats_manual_grads_never_zeroed",
        "heartbeat classification across patients (manual optimisation)",
        m.ManualBeatNetNeverZeroed,
        beat_data,
        "The manual optimisation loop never zeroes the gradients: each step's gradients add to all earlier "
        "ones and Adam follows their running sum.",
        SCHEDULE,
    ),
    SealedCase(
        "crowd_votes_padded_with_zero",
        "learning from crowd annotations (soft labels from votes)",
        m.CrowdNet,
        partial(crowd_data, 0),
        "The votes are padded with pad_sequence's default value 0, which the soft labels count as votes for "
        "the digit 0: items with few votes are taught to be mostly zeros.",
        MASKED,
    ),
    SealedCase(
        "churn_censored_as_event",
        "discrete-time survival of customers (logistic hazard)",
        m.HazardNetCensoredAsChurn,
        churn_data,
        "The last observed month of every record is labelled a churn, censored or not: customers who simply "
        "joined recently or stayed all year count as lost, and the served churn risk is far too high.",
        TASK_LOSS,
    ),
    SealedCase(
        "churn_no_risk_set",
        "discrete-time survival of customers (logistic hazard)",
        m.HazardNetNoRiskSet,
        churn_data,
        "The at-risk mask is dropped: months after a customer churned or stopped being observed are scored "
        "as months they stayed, and the served survival curves are far too optimistic.",
        MASKED,
    ),
    SealedCase(
        "events_softmax_over_classes",
        "polyphonic sound event detection (frame-level multi-label)",
        m.EventDetectorSoftmax,
        event_data,
        "The frame loss is cross_entropy over the event classes (softmax), although events overlap: "
        "overlapping events share each frame's probability, silent frames cost nothing, and the served "
        "detections are wrong both ways.",
        CONVENTION,
    ),
    SealedCase(
        "events_mixed_clip_labels_dropped",
        "polyphonic sound event detection (clip mixing augmentation)",
        m.EventDetector,
        partial(event_data, False),
        "The mixing augmentation sums two clips but keeps the first clip's labels only: the second clip's "
        "events sound in the input labelled as silence, and the detector learns to miss events.",
        PAIRED,
    ),
    SealedCase(
        "events_ema_decay_without_warmup",
        "polyphonic sound event detection (served weight average)",
        m.EventDetectorEMANoWarmup,
        event_data,
        "The served weight average uses a long run's fixed decay of 0.999 without its warm-up: in a run of "
        "150 steps the average never leaves the untrained weights, and the served detector misses most "
        "events.",
        AVERAGED,
    ),
    SealedCase(
        "proportions_decay_stepped_per_batch",
        "learning from label proportions (bags of digits; step decay of the learning rate)",
        m.ProportionNetDecayedPerStep,
        proportion_data,
        "The StepLR meant to divide the rate by 10 after 6 epochs is scheduled with interval 'step': it "
        "divides it every 6 batches, the run stops learning within its first epoch, and the served digit "
        "classifier is left half trained.",
        SCHEDULE,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "chord_transposed_to_all_keys",
            "chord recognition (labels rewritten by a pitch-shift augmentation: training labels cover keys "
            "the stored data never has)",
            m.ChordNet,
            chord_data,
        ),
        (
            "crop_cloudy_months_flagged",
            "crop-type classification (a fifth of the months blanked to 0 by clouds, at random per read, and "
            "flagged in an extra channel)",
            m.CloudyCropNet,
            partial(crop_data, clouds=True),
        ),
        (
            "beats_manual_optimisation_clipped",
            "heartbeat classification (manual optimisation with per-step gradient clipping; dropout; "
            "patient-wise split)",
            m.ManualBeatNet,
            beat_data,
        ),
        (
            "crowd_soft_votes",
            "learning from crowd annotations (soft targets from 2..5 votes, one annotator a spammer: the "
            "loss keeps the votes' entropy; no expert labels at all)",
            m.CrowdNet,
            crowd_data,
        ),
        (
            "churn_logistic_hazard_censored",
            "discrete-time survival (most records censored; 12 targets per row, most of them masked out)",
            m.HazardNet,
            churn_data,
        ),
        (
            "events_mixed_clips_union",
            "polyphonic sound event detection (every training input is the sum of two clips, labelled with "
            "the union of their events; validation clips unmixed)",
            m.EventDetector,
            event_data,
        ),
        (
            "events_time_masked",
            "polyphonic sound event detection (SpecAugment time masks: input frames zeroed, labels kept)",
            m.EventDetector,
            partial(event_data, augment=d.time_masked),
        ),
        (
            "events_ema_served",
            "polyphonic sound event detection (served and validated through a weight average with a "
            "warmed-up decay; the averaged copy takes no gradient)",
            m.EventDetectorEMA,
            event_data,
        ),
        (
            "proportions_bag_level_targets",
            "learning from label proportions (a batch is 16 bags of 8 digits; targets are bag proportions, "
            "the served output is per digit; the loss keeps the proportions' entropy; a per-epoch step "
            "decay)",
            m.ProportionNetStepDecay,
            proportion_data,
        ),
    )
]
