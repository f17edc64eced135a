"""Sealed gallery L: click-through-rate prediction with a factorisation machine (field offsets, downsampled
negatives), uplift modelling with a two-headed outcome network, pedestrian trajectory forecasting with
rotation augmentation, positive-unlabelled learning with the non-negative PU risk (and manual optimisation),
denoising diffusion on 2-D points, a learned one-step dynamics model served by rollout, graph-level
classification of padded graphs and DNA binding-site classification with reverse-complement augmentation.
Written blind (see the package docstring); each bug is proved against its healthy twin in
``test_proofs_l.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _l_data as d
from galleries.preflight.sealed import _l_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def click_data() -> dict[str, Any]:
    """The training log of 20,000 impressions (every click, a quarter of the non-clicks) and a validation log
    of 5,000 impressions downsampled the same way."""
    train = d.Rows(*d.downsampled_impressions(20000, 1))
    val = d.Rows(*d.downsampled_impressions(5000, 2))
    return d.loaders(train, val, batch_size=128)


def uplift_data() -> dict[str, Any]:
    """3,000 training and 600 validation rows: (covariates, treatment, logged propensity, outcome)."""
    train, val = d.Rows(*d.observational(3000, 1)), d.Rows(*d.observational(600, 2))
    return d.loaders(train, val, batch_size=64)


def track_data(augment=d.rotate, stored=d.relative_tracks) -> dict[str, Any]:
    """2,000 training tracks (turned at random per read by ``augment``) and 500 validation tracks, in the
    ``stored`` form: relative to the last observed position, the future as per-step displacements."""
    train = d.Rows(*stored(2000, 1), transform=augment)
    return d.loaders(train, d.Rows(*stored(500, 2)), batch_size=64)


def pu_data() -> dict[str, Any]:
    """4,000 training and 1,000 validation rows with only the labelled flag (30% of the positives)."""
    train, val = d.Rows(*d.pu_training(4000, 1)), d.Rows(*d.pu_training(1000, 2))
    return d.loaders(train, val, batch_size=128)


def pendulum_data(pairs=d.transitions) -> dict[str, Any]:
    """The one-step pairs of 300 training and 60 validation trajectories (29 pairs each), built by
    ``pairs``."""
    return d.loaders(d.Rows(*pairs(300, 1)), d.Rows(*pairs(60, 2)), batch_size=128)


def graph_data() -> dict[str, Any]:
    """2,000 training and 500 validation padded graphs: (node types, adjacency, node mask, label)."""
    train, val = d.Rows(*d.molecules(2000, 1)), d.Rows(*d.molecules(500, 2))
    return {**d.loaders(train, val, batch_size=64), "num_classes": 2}


def ring_data() -> dict[str, Any]:
    """3,000 training and 500 validation points of the ring of clusters."""
    return d.loaders(d.Rows(*d.ring(3000, 1)), d.Rows(*d.ring(500, 2)), batch_size=128)


def dna_data(augment=d.reverse_complement_half) -> dict[str, Any]:
    """2,000 training sequences (read from either strand by ``augment``) and 500 validation sequences."""
    train = d.Rows(*d.sequences(2000, 1), transform=augment)
    val = d.Rows(*d.sequences(500, 2))
    return {**d.loaders(train, val, batch_size=64), "num_classes": 2}


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
SERVED = "what validation reports is what the model does when served"
DEPENDS = "the output depends on what the task says it depends on"
TASK_LOSS = "the loss scores the target the task declares"
SHAPES = "the loss compares each prediction with its own target, element for element"
CLEAN = "the training data is drawn as the data the model will serve"
SCHEDULE = "the loop's state machines (schedulers, accumulation, averaging) advance as declared"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "ctr_field_codes_share_rows",
        "click-through-rate prediction (factorisation machine over categorical fields)",
        m.ClickFMSharedRows,
        click_data,
        "Every field's codes start at 0 and index one shared embedding table without the field offsets: "
        "value 3 of the site, the ad, the device and the hour share one weight and one factor.",
        DEPENDS,
    ),
    SealedCase(
        "ctr_downsampling_not_undone",
        "click-through-rate prediction (negative downsampling)",
        m.ClickFMUncorrected,
        click_data,
        "Three in four non-clicks were dropped from the training log and the served probability is the raw "
        "sigmoid, without the log(.25) shift: served click rates are too high, near 4x for rare clicks.",
        SERVED,
    ),
    SealedCase(
        "uplift_factual_loss_broadcasts",
        "uplift modelling (two-headed outcome network, factual loss)",
        m.UpliftNetBroadcast,
        uplift_data,
        "The factual prediction is a (n, 1) column and the hand-written squared error against the (n,) "
        "outcomes broadcasts to (n, n): both heads learn the batch mean and the served uplift is flat.",
        SHAPES,
    ),
    SealedCase(
        "uplift_heads_unpacked_reversed",
        "uplift modelling (two-headed outcome network, serving)",
        m.UpliftNetHeadsReversed,
        uplift_data,
        "Training fits column 0 to the control rows; predict() unpacks the heads as (treated, control): "
        "every served uplift has the wrong sign.",
        SERVED,
    ),
    SealedCase(
        "tracks_rotated_history_only",
        "pedestrian trajectory forecasting (rotation augmentation)",
        m.TrackForecaster,
        partial(track_data, d.rotate_history_only),
        "The rotation augmentation turns the observed positions but not the future displacements: the "
        "heading the model sees says nothing about where the person goes next.",
        PAIRED,
    ),
    SealedCase(
        "tracks_served_without_running_sum",
        "pedestrian trajectory forecasting (per-step displacements)",
        m.TrackForecasterNoCumsum,
        track_data,
        "The model predicts per-step displacements; predict() adds each to the last observed position on its "
        "own, without the running sum, so every served future position is a step from the start.",
        SERVED,
    ),
    SealedCase(
        "tracks_centred_on_whole_window",
        "pedestrian trajectory forecasting (scene normalisation)",
        m.TrackForecasterWindowCentred,
        partial(track_data, stored=d.window_centred_tracks),
        "Each 20-step window is centred on its mean position, future included, before it is cut into history "
        "and future: the centre tells the model where the person goes, validation scores that, and served "
        "histories (centred on their own mean) do much worse.",
        CLEAN,
    ),
    SealedCase(
        "pu_prior_from_labelled_share",
        "positive-unlabelled learning (non-negative PU risk)",
        m.PUClassifierLabelledPrior,
        pu_data,
        "The class prior of the nnPU risk is set to the share of labelled rows (.12), not the share of "
        "positives (.4): hidden positives are scored as negatives and the classifier misses most positives.",
        TASK_LOSS,
    ),
    SealedCase(
        "pu_warm_up_never_stepped",
        "positive-unlabelled learning (nnPU with manual optimisation, learning-rate warm-up)",
        m.PUClassifierAscentUnstepped,
        pu_data,
        "The warm-up scheduler is returned with interval 'step' but the manual training_step never calls its "
        "step(), and Lightning does not under manual optimisation: the whole run trains at 1% of the rate.",
        SCHEDULE,
    ),
    SealedCase(
        "diffusion_per_step_alpha",
        "denoising diffusion (DDPM noise prediction, forward process)",
        m.DenoiserPerStepAlpha,
        ring_data,
        "The forward process mixes with the per-step alpha_t instead of the cumulative alpha-bar_t: training "
        "only ever sees light noise, and the sampler's noisy steps are served by an untrained regime.",
        CLEAN,
    ),
    SealedCase(
        "diffusion_clean_point_target",
        "denoising diffusion (DDPM, prediction target)",
        m.DenoiserCleanTarget,
        ring_data,
        "The loss regresses the clean point x_0 while the sampler reads the output as the noise eps: the "
        "model learns to denoise, and serves its guess of the clean point as noise.",
        TASK_LOSS,
    ),
    SealedCase(
        "pendulum_pairs_rolled_around",
        "learned dynamics (one-step pendulum model, served by rollout)",
        m.PendulumStep,
        partial(pendulum_data, d.transitions_rolled),
        "The next states are made with torch.roll(states, -1, dims=1), so each trajectory's last state is "
        "paired with its first: one pair in 30 teaches a jump across the state space, and rollouts drift.",
        PAIRED,
    ),
    SealedCase(
        "pendulum_rollout_wrong_normaliser",
        "learned dynamics (normalised state changes, rollout)",
        m.PendulumStepWrongScale,
        pendulum_data,
        "The rollout turns the model's normalised change back with the states' spread instead of the "
        "changes' spread: every served step is several times too long, while one-step training and "
        "validation are fine.",
        SERVED,
    ),
    SealedCase(
        "graph_messages_without_self_loop",
        "graph-level classification (padded batches of small graphs, message passing)",
        m.GraphClassifierNoSelfLoop,
        graph_data,
        "Each round of message passing sums the neighbours' states only (adj @ h, the self loop of A + I "
        "dropped): a node forgets its own type after the first round, and the label asks about it.",
        DEPENDS,
    ),
    SealedCase(
        "dna_reversed_not_complemented",
        "DNA binding-site classification (reverse-complement augmentation)",
        m.MotifCNN,
        partial(dna_data, d.reverse_half),
        "The other-strand augmentation reverses the sequence without complementing its bases: a reversed "
        "binding motif is the non-binding decoy, so half the augmented binders look like non-binders.",
        PAIRED,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "ctr_fm_downsampled_corrected",
            "click-through rate (factorisation machine; 3 in 4 non-clicks dropped, undone when served)",
            m.ClickFM,
            click_data,
        ),
        (
            "uplift_two_heads_factual",
            "uplift modelling (each row trains only the head of its own treatment)",
            m.UpliftNet,
            uplift_data,
        ),
        (
            "uplift_propensity_weighted",
            "uplift modelling (inverse-propensity weighted factual loss, four-tensor batches)",
            m.UpliftNetWeighted,
            uplift_data,
        ),
        (
            "tracks_rotated_scene",
            "trajectory forecasting (whole scene turned at random per read; per-step displacement targets)",
            m.TrackForecaster,
            track_data,
        ),
        (
            "pu_nnpu_clamped",
            "positive-unlabelled learning (no negative labels at all; a clamped risk)",
            m.PUClassifier,
            pu_data,
        ),
        (
            "pu_nnpu_gradient_ascent",
            "positive-unlabelled learning (manual optimisation, ascent on a negative risk, warm-up by hand)",
            m.PUClassifierAscent,
            pu_data,
        ),
        (
            "pendulum_one_step_rollout",
            "learned dynamics (inputs and outputs scaled by different normalisers; served by rollout)",
            m.PendulumStep,
            pendulum_data,
        ),
        (
            "graph_masked_readout",
            "graph-level classification (padding nodes ignored by a masked mean)",
            m.GraphClassifier,
            graph_data,
        ),
        (
            "diffusion_noise_prediction",
            "denoising diffusion (fresh steps and noise each batch; loss about 1 at init, not 0 at best)",
            m.Denoiser,
            ring_data,
        ),
        (
            "dna_reverse_complement",
            "DNA binding (sequences read from either strand per read)",
            m.MotifCNN,
            dna_data,
        ),
    )
]
