"""Sealed gallery T (issue #34, half ``t``): colour constancy (the illuminant's colour from a scene, angular
loss), inverse kinematics of a two-link arm (angles as sine/cosine pairs, manual optimisation), battery state
of charge from drive-cycle windows with a GRU, league match outcomes from team embeddings (side-swap
augmentation, standardised targets), radio modulation recognition from I/Q bursts and calibration of a
low-cost air-quality sensor against a reference (log targets, a step decay). Written blind (see the package
docstring); each bug is proved against its healthy twin in ``test_proofs_t.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _t_data as d
from galleries.preflight.sealed import _t_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def scene_data(augment=d.brightness) -> dict[str, Any]:
    """3,000 training scenes (augmented per read by ``augment``) and 500 validation scenes."""
    train = d.Rows(*d.scenes(3000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.scenes(500, 2)), batch_size=64)


def arm_data(cos_first: bool = False) -> dict[str, Any]:
    """3,000 training positions and 500 validation positions with their joint angles as (sin, cos) pairs
    (or, with ``cos_first``, (cos, sin))."""
    train = d.Rows(*d.arm_poses(3000, 1, cos_first))
    return d.loaders(train, d.Rows(*d.arm_poses(500, 2, cos_first)), batch_size=64)


def battery_data() -> dict[str, Any]:
    """2,000 training windows and 400 validation windows with the state of charge at their end."""
    train, val = d.Rows(*d.drive_windows(2000, 1)), d.Rows(*d.drive_windows(400, 2))
    return d.loaders(train, val, batch_size=64)


def match_data(augment=None) -> dict[str, Any]:
    """3,000 training matches (augmented per read by ``augment``) and 500 validation matches, home first."""
    train = d.Rows(*d.matches(3000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.matches(500, 2)), batch_size=64)


def radio_data() -> dict[str, Any]:
    """3,000 training bursts and 500 validation bursts of four modulations."""
    train, val = d.Rows(*d.bursts(3000, 1)), d.Rows(*d.bursts(500, 2))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.MODULATIONS}


def sensor_data() -> dict[str, Any]:
    """3,000 training hours and 500 validation hours of sensor readings with the reference's ppb."""
    train, val = d.Rows(*d.sensor_rows(3000, 1)), d.Rows(*d.sensor_rows(500, 2))
    return d.loaders(train, val, batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
SHAPES = "tensors are laid out as the layers and losses read them"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
CONVENTION = "training labels follow the convention the served model is read with"
DEPENDS = "the output depends on what the task says it depends on"
MODES = "the served model runs in the mode it is served in (dropout off, statistics frozen)"
SERVED = "the served prediction undoes every transform the training target went through"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "illuminant_colour_jitter_keeps_label",
        "colour constancy (the illuminant's colour from a scene; augmentation)",
        m.IlluminantNet,
        partial(scene_data, d.colour_cast),
        "A per-channel colour jitter from a classifier's recipe is applied to the scenes, but the illuminant "
        "label is left as it was: a cast scene is labelled with light it was not taken under, and the served "
        "estimate is pulled towards the average light.",
        PAIRED,
    ),
    SealedCase(
        "illuminant_cosine_over_batch",
        "colour constancy (angular loss)",
        m.IlluminantNetCosineOverBatch,
        scene_data,
        "The angular loss calls cosine_similarity(pred, illum, dim=0) on (batch, 3) tensors: it compares "
        "each channel across the batch instead of each scene's RGB vector, so the balance between the "
        "channels, which is the illuminant's colour, is not learned.",
        TASK_LOSS,
    ),
    SealedCase(
        "illuminant_per_channel_normalised",
        "colour constancy (input normalisation)",
        m.IlluminantNetPerChannelNorm,
        scene_data,
        "Each scene's log pixels are normalised per channel (the channel's mean removed) instead of by the "
        "scene's overall brightness: the channel means carry the illuminant's colour, so the network only "
        "sees the surfaces' spread and guesses the light from it.",
        DEPENDS,
    ),
    SealedCase(
        "arm_ik_cos_sin_swapped",
        "inverse kinematics of a two-link arm (angles as sine/cosine pairs)",
        m.ArmIK,
        partial(arm_data, True),
        "The targets are built as (cos, sin) per joint while the served model reads them as (sin, cos) in "
        "atan2: every served angle is pi/2 minus the right one, and the arm reaches the wrong place.",
        CONVENTION,
    ),
    SealedCase(
        "arm_ik_manual_scheduler_per_batch",
        "inverse kinematics of a two-link arm (manual optimisation, a per-epoch decay)",
        m.ArmIKManualSchedulerPerBatch,
        arm_data,
        "In the hand-written training step (automatic optimisation off) the user also steps the scheduler "
        "after each optimizer step: the 0.7 decay meant per epoch is applied per batch, and the rate is "
        "negligible before the first epoch ends.",
        SCHEDULE,
    ),
    SealedCase(
        "battery_gru_not_batch_first",
        "battery state of charge from current/voltage windows (GRU)",
        m.SoCNetTimeFirst,
        battery_data,
        "The GRU is built without batch_first=True while the batches are (batch, steps, features): it "
        "recurs across the windows of a batch instead of along each window's steps, and each estimate rests "
        "on the window's last noisy reading and its neighbours' in the batch.",
        SHAPES,
    ),
    SealedCase(
        "battery_dropout_on_when_served",
        "battery state of charge (a GRU with dropout)",
        m.SoCNetDropoutAlwaysOn,
        battery_data,
        "The dropout on the GRU's output is the functional F.dropout(h, 0.3) without training=self.training: "
        "it is still on in eval mode, so every served (and validated) estimate is made through a random "
        "mask.",
        MODES,
    ),
    SealedCase(
        "match_swap_keeps_goal_difference",
        "league match outcomes from team embeddings (side-swap augmentation)",
        m.MatchNet,
        partial(match_data, d.swap_teams_only),
        "The side-swap augmentation swaps the two team ids in half the matches but neither flips the venue "
        "flag nor negates the goal difference: each fixture is seen both ways with the same label, the two "
        "sides' strengths cancel out, and the model learns little but the home advantage.",
        PAIRED,
    ),
    SealedCase(
        "match_unscaled_without_mean",
        "league match outcomes (standardised goal-difference targets)",
        m.MatchNetScaledNoMean,
        match_data,
        "The goal difference is standardised for training, but the served forecast is only multiplied back "
        "by the spread, not shifted back by the mean: the home advantage the mean carries is gone from every "
        "forecast.",
        SERVED,
    ),
    SealedCase(
        "radio_nll_loss_on_logits",
        "radio modulation recognition from I/Q bursts (1-D CNN)",
        m.ModulationNetNllOnLogits,
        radio_data,
        "The loss is F.nll_loss on the raw logits (no log_softmax): it only raises the true class's logit, "
        "without bound, and never lowers the others; the loss falls below zero while the classes stay "
        "confused.",
        TASK_LOSS,
    ),
    SealedCase(
        "airq_log1p_served_with_exp",
        "air-quality sensor calibration (log1p targets)",
        m.CalibratorExpServed,
        sensor_data,
        "The model learns log1p(ppb) but the served calibration applies exp instead of expm1: every "
        "concentration is reported 1 ppb too high, a large error at the low concentrations of clean air.",
        SERVED,
    ),
    SealedCase(
        "airq_step_decay_per_batch",
        "air-quality sensor calibration (step learning-rate decay)",
        m.CalibratorDecayPerStep,
        sensor_data,
        "The StepLR meant to halve the rate every 5 epochs is returned with interval 'step': it halves every "
        "5 batches, and the rate is negligible within two epochs, long before the fit converges.",
        SCHEDULE,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "illuminant_angular_loss_brightness",
            "colour constancy (angular loss that ignores the prediction's length; exposure augmentation "
            "that keeps the label; pixels sorted per channel)",
            m.IlluminantNet,
            scene_data,
        ),
        (
            "arm_ik_sin_cos_pairs",
            "inverse kinematics (periodic targets as sine/cosine pairs, never unit length exactly as "
            "predicted)",
            m.ArmIK,
            arm_data,
        ),
        (
            "arm_ik_manual_loop",
            "inverse kinematics (manual optimisation: zero_grad, manual_backward, clipping, step; the "
            "scheduler stepped by hand at each epoch's end)",
            m.ArmIKManual,
            arm_data,
        ),
        (
            "battery_gru_batch_first",
            "battery state of charge (a batch-first GRU read at the window's last step; a noisy voltage)",
            m.SoCNet,
            battery_data,
        ),
        (
            "battery_gru_coulomb_feature",
            "battery state of charge (a GRU with a weightless running-sum input: the charge drawn)",
            m.SoCNetCoulomb,
            battery_data,
        ),
        (
            "battery_gru_dropout",
            "battery state of charge (dropout on the GRU's output in training only; outputs differ between "
            "two training-mode calls)",
            m.SoCNetDropout,
            battery_data,
        ),
        (
            "match_swap_negates_difference",
            "league matches (half the matches read from the away side: teams swapped, venue -1, goal "
            "difference negated; integer, noisy targets)",
            m.MatchNet,
            partial(match_data, d.swap_sides),
        ),
        (
            "match_standardised_targets",
            "league matches (targets standardised with the training set's mean and spread, served back)",
            m.MatchNetScaled,
            match_data,
        ),
        (
            "radio_cnn_mean_over_time",
            "radio modulation recognition (one-symbol strided convolutions, a mean over time)",
            m.ModulationNet,
            radio_data,
        ),
        (
            "airq_log1p_step_decay",
            "air-quality calibration (log1p targets served with expm1; the rate halved every 5 epochs)",
            m.Calibrator,
            sensor_data,
        ),
    )
]
