"""Zoo 7's runs: new tasks (a GRU encoder-decoder reversing sequences, a dilated causal temporal CNN
forecasting a series with an auxiliary head, a RealNVP normalising flow on two moons, a TabNet-like attentive
tabular classifier), new optimizers and schedules (RMSprop, Adadelta, LARS written by hand, PolynomialLR, a
hand-made loss scale), blind pairs, runs a repair could save, healthy look-alikes.

Written blind (without reading HealthMonitor's rules), each run different in task or bug from the sealed zoos
before it. Each problem run holds one bug a user could have written; ``expected`` names the cause a careful
engineer would accept (the description names the root cause), ``onset_step`` the first optimizer step at which
the problem exists (measured from the plain recording by the proofs), ``also_allowed`` only symptoms of that
same cause. :data:`REPAIRABLE` names the runs a repair callback can save in process: their proofs measure the
final and the best validation loss.
"""

from __future__ import annotations

from galleries.health.field._case import FieldCase
from galleries.health.sealed_zoo import LR_BLOWUP, STUCK, case, every
from galleries.health.zoo7 import _builds as build
from galleries.health.zoo7 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair: the loss stays at ln 10 (the tokens' prior entropy) from step 0
    case(
        "seq2seq_rmsprop_lr_1e7_exponent_typo",
        build.seq2seq_rmsprop,
        "lr_too_low",
        proof.seq2seq_lr_stuck,
        "Trivial loss from an LR 10^4 too low: a GRU encoder-decoder reversing 6-token sequences, RMSprop at "
        "1e-7 (meant 1e-3); the token cross-entropy stays at ln 10.",
        also_allowed=STUCK,
        trainer_kwargs=every(50),
    ),
    case(
        "seq2seq_targets_reversed_after_sources_shuffled",
        build.seq2seq_targets_apart,
        "not_learning",
        proof.seq2seq_apart_learns_nothing,
        "Trivial loss from targets shuffled apart from their sources: the training targets were reversed "
        "from the sources after these were permuted for the split, so no target is its source reversed; "
        "RMSprop at a sound 1e-3, the loss stays at ln 10.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(50),
    ),
    case(
        "seq2seq_encoder_param_group_left_out",
        build.seq2seq_encoder_left_out,
        "frozen_parameters",
        proof.seq2seq_encoder_frozen,
        "A frozen encoder from a missing parameter group: RMSprop is given groups for the decoder and the "
        "head only; the encoder gets gradients every step (they pile up, never zeroed) and never changes, "
        "so the decoder learns from random codes.",
        trainer_kwargs=every(50),
    ),
    # -- blind pair: a non-finite loss from non-finite data / from a non-finite update
    case(
        "tcn_forecast_sensor_gap_stored_as_nan",
        build.forecast_sensor_gap,
        "inputs",
        proof.forecast_gap_nan,
        "A NaN in the data: a temporal CNN forecaster read in series order; one window holds a sensor gap "
        "stored as NaN (batch 37), so its loss and gradient are NaN and Adam's update spreads NaN to every "
        "weight.",
        onset_step=proof.GAP_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    case(
        "tcn_forecast_hand_lars_divides_by_zero_gradient",
        build.forecast_lars_aux_off,
        "nonfinite_weights",
        proof.forecast_lars_nan,
        "A non-finite update from clean data: LARS written by hand (trust ratio ||w|| / ||g||, no guard) on "
        "the forecaster whose auxiliary head's loss weight is annealed to exactly 0 at step 120; that head's "
        "gradient is 0, its ratio infinite, the update NaN, every later loss NaN.",
        onset_step=proof.AUX_OFF,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    # -- blind pair: gradient spikes from two outlier windows / from an LR 10x too high
    case(
        "tcn_forecast_two_windows_in_adc_counts",
        build.forecast_glitches,
        "outlier_batches",
        proof.forecast_glitch_spikes,
        "Spikes from outlier rows: the forecaster read in order, two windows (and their targets) were "
        "written by a logger in raw ADC counts (x300); their batches (20 and 70 of each 100) throw the "
        "gradient >100x the median.",
        onset_step=proof.GLITCH_ONSET,
    ),
    case(
        "tcn_forecast_rmsprop_lr_10x_spikes",
        build.forecast_rmsprop,
        "lr_too_high",
        proof.forecast_rmsprop_spikes,
        "Spikes from an LR 10x too high on clean windows: the same forecaster and batch order, RMSprop at "
        "0.01 (meant 1e-3); bursts of gradients >20x the fixed run's median over the first 40 steps, "
        "validation >3x worse.",
        also_allowed=("exploding_gradients",),
    ),
    # -- blind pair: saturated GRU gates from the initialisation / from an LR 30x too high
    case(
        "seq2seq_embeddings_init_std_30_saturate_gates",
        build.seq2seq_embedding_std,
        "initialisation",
        proof.seq2seq_init_saturates,
        "Saturated gates from the initialisation: both embeddings drawn N(0, 30^2) (a transformer recipe's "
        "sqrt(d_model) scale misread as the init's std); >50% of the encoder GRU's gates sit beyond "
        "0.01-0.99 from step 0 and it learns at a fraction of the fixed run's pace.",
        also_allowed=("saturated_activations",),
        trainer_kwargs=every(50),
    ),
    case(
        "seq2seq_rmsprop_lr_30x_saturates_gates",
        build.seq2seq_rmsprop_high,
        "lr_too_high",
        proof.seq2seq_lr_saturates,
        "Saturated gates from an LR 30x too high: default init, RMSprop at 0.03 (meant 1e-3); the first "
        "large steps blow the embeddings up, the loss jumps above ln 10 and >50% of the gates saturate from "
        "step 10 on.",
        also_allowed=("saturated_activations",),
        trainer_kwargs=every(50),
    ),
    # -- single causes
    case(
        "realnvp_adam_lr_200x_blows_up",
        build.flow_adam,
        "lr_too_high",
        proof.flow_blows_up,
        "An LR blow-up: a RealNVP flow on two moons, Adam at 0.2 (meant 1e-3); the first steps throw the NLL "
        "up by >10^4 and the gradient by >10^6, and it settles far above the fixed run.",
        also_allowed=LR_BLOWUP,
        trainer_kwargs=every(25),
    ),
    case(
        "realnvp_polynomial_lr_total_iters_meant_as_epochs",
        build.flow_poly_decay,
        "lr_too_low",
        proof.flow_collapses,
        "An LR collapsing to 0 early: the flow, Adam 3e-3 under PolynomialLR(total_iters=40, power=2) meant "
        "as 40 epochs but stepped per batch; below 1% of its peak from step 37 and 0 from step 40, the NLL "
        "frozen.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(25),
    ),
    case(
        "attentive_tabular_160_rows_wide_overfits",
        build.tabular_few_rows,
        "overfitting",
        proof.tabular_overfits,
        "Overfitting: a width-128 TabNet-like classifier on 160 rows (a debug subset left in), validated "
        "every epoch (5 steps); the training loss falls to ~0 while the validation loss climbs past 2x its "
        "best.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "seq2seq_sources_retokenised_on_every_read_stall",
        build.seq2seq_slow_tokenising,
        "data_stall",
        proof.seq2seq_stall,
        "A loader that re-tokenises every source from its text on each read with a slow pure-Python "
        "tokenizer (3 ms a sequence, 32 a batch, no cache, no workers): the loop waits for data most of the "
        "time.",
        max_steps=120,
        check_every=12,
        trainer_kwargs=every(60),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "tcn_forecast_sensor_gap_stored_as_nan",
    "realnvp_polynomial_lr_total_iters_meant_as_epochs",
    "attentive_tabular_160_rows_wide_overfits",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "realnvp_moons_in_hundredths_negative_nll",
        build.flow_small_units,
        None,
        proof.flow_small_units_trains,
        "The flow on two moons measured in hundredths: the NLL is shifted down by ~9.2 nats, so the loss "
        "runs from positive to about -4, and falls.",
    ),
    case(
        "attentive_tabular_16_validation_rows_jitter",
        build.tabular_tiny_val,
        None,
        proof.tabular_tiny_val_trains,
        "The TabNet-like classifier validated on 16 rows: its validation loss jumps between checks while "
        "it trains.",
        trainer_kwargs=every(25),
    ),
    case(
        "attentive_tabular_half_labels_redrawn",
        build.tabular_label_noise,
        None,
        proof.tabular_noise_trains,
        "Half the labels redrawn at random: the loss floors high, close to the prior's ln 3.",
        trainer_kwargs=every(50),
    ),
    case(
        "seq2seq_rmsprop_150_step_warmup",
        build.seq2seq_long_warmup,
        None,
        proof.seq2seq_warmup_trains,
        "RMSprop warmed up linearly from 0 over 150 steps: the loss sits at ln 10 for the first ~30 steps, "
        "then falls.",
        trainer_kwargs=every(50),
    ),
    case(
        "seq2seq_source_embedding_frozen_on_purpose",
        build.seq2seq_frozen_source_embedding,
        None,
        proof.seq2seq_frozen_embedding_trains,
        "The encoder's embedding keeps random codes on purpose (requires_grad off); the rest trains well.",
        trainer_kwargs=every(50),
    ),
    case(
        "tcn_forecast_adadelta",
        build.forecast_adadelta,
        None,
        proof.forecast_adadelta_trains,
        "The forecaster with Adadelta at 0.1: small, self-scaled steps; it trains.",
        trainer_kwargs=every(50),
    ),
    case(
        "tcn_forecast_loss_scale_4096_by_hand_adam",
        build.forecast_loss_scaled_adam,
        None,
        proof.forecast_scaled_trains,
        "A loss multiplied by 4096 by hand (never unscaled) under Adam, which ignores the scale: gradients "
        "in the thousands every step, training as usual.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
