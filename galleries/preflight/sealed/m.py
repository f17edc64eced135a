"""Sealed gallery L, second half (``m``): denoising diffusion on 2-D points (noise prediction), uplift
modelling of a treatment's effect from observational rows (TARNet), click-through rate with a factorisation
machine over categorical fields (downsampled logs, manual optimisation with two optimizers), conditional
neural processes (few-shot regression on new functions), multi-modal trajectory forecasting with
winner-takes-all hypotheses, knowledge tracing of students' answers and circular (heading) regression.
Written blind (see the package docstring); each bug is proved against its healthy twin in
``test_proofs_m.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _m_data as d
from galleries.preflight.sealed import _m_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def rows_data(make, n: int = 2000, transform=None, batch_size: int = 64) -> dict[str, Any]:
    """``make(n, 1)`` for training (through ``transform`` per read, if given) and ``make(500, 2)`` for
    validation."""
    train = d.Rows(*make(n, 1), transform=transform)
    return d.loaders(train, d.Rows(*make(500, 2)), batch_size=batch_size)


point_data = partial(rows_data, d.ring_points)
uplift_data = partial(rows_data, d.uplift_rows)
sine_data = partial(rows_data, d.sine_tasks)


def click_data(make=d.clicks) -> dict[str, Any]:
    """An impression log of 20,000 rows (``make`` may downsample it) and 5,000 validation rows made the same
    way: (field codes, clicked)."""
    train = d.Rows(*make(20000, 1))
    return d.loaders(train, d.Rows(*make(5000, 2)), batch_size=256)


downsampled_click_data = partial(click_data, d.downsampled_clicks)


def track_data(augment=d.rotate_scene) -> dict[str, Any]:
    """2,000 training tracks (turned per read by ``augment``) and 500 validation tracks."""
    return rows_data(d.tracks, transform=augment)


def attempt_data() -> dict[str, Any]:
    """2,000 training and 500 validation students, 30 attempts each."""
    return rows_data(d.attempts)


heading_data = partial(rows_data, d.headings)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
SERVED = "what validation reports is what the model does when served"
SCHEDULE = "the loop's state machines (schedulers, accumulation, averaging) advance as declared"
DEPENDS = "the output depends on what the task says it depends on"
TASK_LOSS = "the loss scores the target the task declares"
CLEAN = "the training data is drawn as the data the model will serve"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "diffusion_target_is_clean_point",
        "denoising diffusion (DDPM noise prediction on 2-D points)",
        m.PointDiffusionCleanTarget,
        point_data,
        "The training step regresses the clean point x0 (the tutorial's convention) while the sampler takes "
        "the output as the predicted noise: the loss falls nicely and every sample lands in the wrong place.",
        TASK_LOSS,
    ),
    SealedCase(
        "diffusion_schedule_indexed_reversed",
        "denoising diffusion (noise schedule)",
        m.PointDiffusionScheduleReversed,
        point_data,
        "The noise-level table is built in the sampler's order (step 99 first) and indexed by the training "
        "step's t: each timestep is trained at the opposite noise level, and the sampler asks the model "
        "about levels it never saw at that step.",
        CLEAN,
    ),
    SealedCase(
        "uplift_both_heads_fit_every_outcome",
        "uplift modelling (TARNet, treatment effect from observational data)",
        m.TARNetBothHeads,
        uplift_data,
        "Both outcome heads are fitted to every observed outcome, the factual selection by treatment left "
        "out: each head learns the pooled outcome and the served effect is about 0 for every customer.",
        TASK_LOSS,
    ),
    SealedCase(
        "uplift_effect_sign_reversed",
        "uplift modelling (serving the effect)",
        m.TARNetEffectReversed,
        uplift_data,
        "The served effect is untreated minus treated outcome: the model fits both arms well, but every "
        "customer's uplift comes back negated, so the campaign targets exactly the wrong people.",
        SERVED,
    ),
    SealedCase(
        "uplift_effect_left_standardised",
        "uplift modelling (standardised outcomes)",
        m.TARNetEffectStandardised,
        uplift_data,
        "The heads are fitted to standardised outcomes and the served effect is their difference as it "
        "comes, never multiplied back by the outcome's standard deviation: every uplift is shrunk 1.8-fold.",
        SERVED,
    ),
    SealedCase(
        "ctr_fields_without_offsets",
        "click-through rate (factorisation machine over categorical fields)",
        m.ClickFMSharedRows,
        click_data,
        "The field codes index the embedding table without their field offsets: user 3, ad 3 and hour 3 "
        "share one row, and the user-ad interactions are learned through rows the other fields drag around.",
        DEPENDS,
    ),
    SealedCase(
        "ctr_downsampled_served_uncorrected",
        "click-through rate (negative downsampling)",
        m.ClickFM,
        downsampled_click_data,
        "Trained on a log that keeps a fifth of the non-clicks and served without the log-odds correction: "
        "every served click probability is several times too high, and bids made on them overpay.",
        SERVED,
    ),
    SealedCase(
        "ctr_sparse_gradients_never_cleared",
        "click-through rate (manual optimisation, one optimizer for the tables and one for the rest)",
        m.ClickFMTablesNeverCleared,
        click_data,
        "Under manual optimisation only the dense optimizer's zero_grad is called: the embedding tables' "
        "gradients pile up over the run and every Adagrad step follows their running sum.",
        SCHEDULE,
    ),
    SealedCase(
        "cnp_decoder_bounded_by_tanh",
        "conditional neural process (few-shot regression on sine functions)",
        m.SineCNPBoundedOutput,
        sine_data,
        "The decoder ends in a tanh copied from a model of standardised targets: the functions reach "
        "amplitudes of 2, and every value beyond 1 is clipped, for loud functions over half their range.",
        TASK_LOSS,
    ),
    SealedCase(
        "cnp_step_decay_every_batch",
        "conditional neural process (step learning-rate decay)",
        m.SineCNPStepDecay,
        sine_data,
        "A StepLR of x0.1 every 10 epochs is returned with interval 'step': the learning rate falls tenfold "
        "every 10 batches and the model stops learning within its first epoch.",
        SCHEDULE,
    ),
    SealedCase(
        "trajectory_all_hypotheses_regressed",
        "multi-modal trajectory forecasting (winner-takes-all hypotheses)",
        m.TrajectoryAllHypotheses,
        track_data,
        "The regression averages the error of all 3 hypotheses instead of the winner's: every hypothesis is "
        "pulled to the mean future and the three collapse onto one path between the turns.",
        TASK_LOSS,
    ),
    SealedCase(
        "trajectory_rotation_of_past_only",
        "multi-modal trajectory forecasting (rotation augmentation)",
        m.TrajectoryWTA,
        partial(track_data, d.rotate_past_only),
        "The rotation augmentation turns the observed track but not the future: the future no longer follows "
        "the direction of travel, and the model learns hypotheses that barely move.",
        PAIRED,
    ),
    SealedCase(
        "trajectory_score_head_not_optimised",
        "multi-modal trajectory forecasting (parameter groups per head)",
        m.TrajectoryScoresNotOptimised,
        track_data,
        "The heads' parameter group lists the path head only, the score head added later left out: the paths "
        "train well, the scores keep their random init, and the served most likely path is a random pick.",
        DEPENDS,
    ),
    SealedCase(
        "knowledge_tracing_inputs_not_shifted",
        "knowledge tracing (DKT: a GRU over students' attempts)",
        m.KnowledgeTracerUnshifted,
        attempt_data,
        "The attempts fed to the GRU are sliced like the targets, not one step behind: each position reads "
        "the answer it predicts, validation looks near perfect, and the served next-answer chance is poor.",
        PAIRED,
    ),
    SealedCase(
        "heading_regressed_as_raw_radians",
        "circular regression (heading from sensor readings)",
        m.HeadingNetRawAngle,
        heading_data,
        "The heading in radians is regressed directly with MSE: 0.1 and 6.2 rad, almost the same heading, "
        "are far apart to the loss, and near north the model answers in between, pointing south.",
        TASK_LOSS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "diffusion_points_noise_prediction",
            "denoising diffusion (random timestep and noise every step: the loss stays far from 0)",
            m.PointDiffusion,
            point_data,
        ),
        (
            "uplift_factual_heads",
            "uplift modelling (each row trains one of two heads; the other outcome is never observed)",
            m.TARNet,
            uplift_data,
        ),
        (
            "uplift_standardised_outcomes",
            "uplift modelling (outcomes standardised for training, effects scaled back when served)",
            m.TARNetStandardised,
            uplift_data,
        ),
        (
            "ctr_full_log",
            "click-through rate (factorisation machine, 1 click in 8)",
            m.ClickFM,
            click_data,
        ),
        (
            "ctr_downsampled_with_correction",
            "click-through rate (a fifth of the non-clicks kept; log-odds correction at serving)",
            m.ClickFMDownsampled,
            downsampled_click_data,
        ),
        (
            "ctr_manual_two_optimizers",
            "click-through rate (manual optimisation: Adagrad on the tables, Adam on the bias)",
            m.ClickFMTwoOptimizers,
            click_data,
        ),
        (
            "cnp_masked_context_epoch_decay",
            "conditional neural process (3..8 padded context points; step decay per epoch)",
            m.SineCNP,
            sine_data,
        ),
        (
            "trajectory_winner_takes_all",
            "trajectory forecasting (only the closest of 3 hypotheses regressed; whole-scene rotations)",
            m.TrajectoryWTA,
            track_data,
        ),
        (
            "knowledge_tracing_next_attempt",
            "knowledge tracing (each attempt predicts the next exercise's answer, on its skill only)",
            m.KnowledgeTracer,
            attempt_data,
        ),
        (
            "heading_cosine_loss",
            "circular regression (a 2-vector output, 1 - cosine loss blind to its length)",
            m.HeadingNet,
            heading_data,
        ),
    )
]
