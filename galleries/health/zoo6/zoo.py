"""Zoo 6's runs: new tasks (sequence reversal with a GRU encoder-decoder, next-value forecasting with a
temporal convolutional network, 2-D density estimation with a RealNVP flow), new optimizers (RMSprop,
Adadelta, ASGD, SGD with Nesterov momentum, Adagrad on a flow), new bugs (a loss scaled by hand and never
unscaled, a decoder started from zeros, an optimizer built for a linear probe and never widened, embeddings
scaled by sqrt(width) before a GRU, a NaN reading, points logged in millimetres, a per-item dataset that
regenerates its source), blind pairs, runs a repair could save, healthy look-alikes.

Written blind (without reading HealthMonitor's rules), each run different in task or bug from the first
five sealed zoos. Each problem run holds one bug a user could have written; ``expected`` names the cause a
careful engineer would accept (the description names the root cause), ``onset_step`` the first optimizer
step at which the problem exists (measured from the plain recording by the proofs), ``also_allowed`` only
symptoms of that same cause. :data:`REPAIRABLE` names the runs a repair callback can save in process: their
proofs measure the final and the best validation loss.
"""

from __future__ import annotations

from galleries.health.field._case import FieldCase
from galleries.health.sealed_zoo import LR_BLOWUP, STUCK
from galleries.health.sealed_zoo import case as _case
from galleries.health.sealed_zoo import every as _every
from galleries.health.zoo6 import _builds as build
from galleries.health.zoo6 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind triple: the reversal's loss stays at (or near) ln 8, the target tokens' prior entropy
    _case(
        "seq2seq_rmsprop_lr_10000x_too_low",
        build.seq2seq_rmsprop,
        "lr_too_low",
        proof.seq2seq_lr_stuck,
        "Trivial loss from an LR 10000x too low: a GRU encoder-decoder reversing 5-token sequences, RMSprop "
        "at 3e-7 (meant 3e-3); gradients flow, the weights barely move, the CE stays at ln 8.",
        also_allowed=STUCK,
    ),
    _case(
        "seq2seq_decoder_started_from_zeros",
        build.seq2seq_zero_start,
        "not_learning",
        proof.seq2seq_zero_start_stuck,
        "Trivial loss from a cut information path: the decoder starts from torch.zeros_like(h) (left in from "
        "debugging) instead of the encoder's state, so it never sees the source; RMSprop 3e-3 moves the "
        "decoder at full size, the encoder gets no gradient, the CE stays at ln 8.",
        also_allowed=("loss_plateau",),
    ),
    _case(
        "seq2seq_optimizer_holds_the_head_only",
        build.seq2seq_head_only,
        "frozen_parameters",
        proof.seq2seq_head_only_stuck,
        "A frozen body from an optimizer never widened: RMSprop was built over the output head for a "
        "linear-probe phase and the callback meant to add the embedding, encoder and decoder was left out of "
        "the Trainer; they get gradients and never move, the CE stays above 0.8 ln 8.",
        also_allowed=STUCK,
    ),
    # -- pair: a non-finite loss on the same forecaster from bad data / from an unscaled loss
    _case(
        "tcn_one_nan_reading_poisons_the_weights",
        build.tcn_nan_reading,
        "inputs",
        proof.tcn_nan_poisons,
        "Non-finite data: a TCN forecaster read in order, Adam 1e-3; one reading of one window is NaN (a "
        "sensor drop-out left in the export); its batch (60 of 94) gives a NaN loss and gradient, and Adam "
        "writes NaN into every weight.",
        onset_step=proof.NAN_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=_every(25),
    ),
    _case(
        "tcn_sgd_nesterov_loss_scaled_by_hand_never_unscaled",
        build.tcn_loss_scaled,
        "lr_too_high",
        proof.tcn_scaled_blows_up,
        "An effective step 1024x too large: the TCN's training loss is multiplied by 1024 by hand (a float16 "
        "loss scale) and the gradients never divided back, under SGD 0.01 with Nesterov momentum; the loss "
        "is NaN within a few steps.",
        also_allowed=LR_BLOWUP,
    ),
    # -- huge gradients from the initialisation (its look-alike: the scaled loss under Adam, healthy)
    _case(
        "tcn_convolutions_init_normal_std_1_explode",
        build.tcn_normal_init,
        "exploding_gradients",
        proof.tcn_init_explodes,
        "Exploding gradients from initialisation: the TCN's dilated convolutions initialised with "
        "nn.init.normal_ (std 1; He's is ~0.14) in a residual stack of four; forecasts and gradients 1e5x "
        "the fixed run's from step 0, validation 1000x worse.",
        also_allowed=("initialisation",),
    ),
    _case(
        "seq2seq_gru_embeddings_scaled_by_sqrt_width_saturate",
        build.seq2seq_embed_scaled,
        "saturated_activations",
        proof.seq2seq_gates_saturate,
        "Saturated gates from a transformer's habit: the reversal's 128-wide embeddings multiplied by "
        "sqrt(128) before a GRU; >70% of the encoder's gate pre-activations lie beyond +-3 from step 0 and "
        "the CE stalls near 1.4 (the unscaled twin: <0.4).",
        also_allowed=("loss_plateau", "vanishing_gradients"),
    ),
    _case(
        "flow_two_points_logged_in_millimetres",
        build.flow_outliers,
        "outlier_batches",
        proof.flow_outlier_spikes,
        "Spikes from outlier rows: a RealNVP on half-moons read in order; two points were logged in "
        "millimetres (x1000); their batches (11, 33 of each 47) carry gradients >100x the median.",
        onset_step=proof.FLOW_OUTLIER_ONSET,
    ),
    _case(
        "tcn_adadelta_at_an_adam_lr",
        build.tcn_adadelta,
        "lr_too_low",
        proof.tcn_adadelta_crawls,
        "An LR 1000x too low: the TCN with Adadelta at 1e-3 (an Adam-sized LR; Adadelta's is 1.0); updates "
        "<1% of the fixed run's, validation >4x worse after 300 steps.",
        also_allowed=("loss_plateau",),
    ),
    _case(
        "seq2seq_linear_decay_sized_in_epochs_stepped_per_batch",
        build.seq2seq_poly_collapse,
        "lr_too_low",
        proof.seq2seq_collapses,
        "An LR collapsing to 0 early: the reversal under RMSprop 3e-3 and PolynomialLR(total_iters=40, "
        "power=1) meant as 40 epochs but stepped every batch; the LR is 0 from step 40, the loss frozen at "
        "~0.8.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=_every(25),
    ),
    _case(
        "flow_wide_realnvp_32_points_overfits",
        build.flow_few_points,
        "overfitting",
        proof.flow_overfits,
        "Overfitting: a width-128 RealNVP fitted to 32 points of the half-moons (a debug subset left in), "
        "full batch, Adam 1e-3, validated every 10 epochs; the training NLL keeps falling while the "
        "validation NLL climbs to several times its best.",
        onset_step=proof.OVERFIT_ONSET,
        trainer_kwargs={"check_val_every_n_epoch": 10},
    ),
    _case(
        "tcn_dataset_regenerates_its_series_per_item_stalls",
        build.tcn_recompute,
        "data_stall",
        proof.tcn_stall,
        "A dataset whose __getitem__ regenerates the whole 50,000-point source series to cut one window "
        "(no cache, no workers): the loop waits for data most of the time.",
        max_steps=120,
        check_every=12,
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "tcn_one_nan_reading_poisons_the_weights",
    "seq2seq_linear_decay_sized_in_epochs_stepped_per_batch",
    "flow_wide_realnvp_32_points_overfits",
)

HEALTHY_CASES: list[FieldCase] = [
    _case(
        "tcn_adam_loss_scaled_by_1024",
        build.tcn_adam_loss_scaled,
        None,
        proof.tcn_scaled_adam_trains,
        "The TCN's training loss multiplied by 1024 by hand under Adam 1e-3: gradients in the thousands, yet "
        "Adam's step ignores their scale and it trains as the unscaled run.",
    ),
    _case(
        "flow_half_moons_in_small_units_negative_nll",
        build.flow_small_units,
        None,
        proof.flow_small_units_trains,
        "A RealNVP on half-moons measured in units 10x larger (coordinates ~0.1): the NLL is negative and "
        "falls further below zero.",
    ),
    _case(
        "seq2seq_warmup_150_steps",
        build.seq2seq_long_warmup,
        None,
        proof.seq2seq_warmup_trains,
        "The reversal under Adam 3e-3 with a 150-step linear warm-up: the loss sits at ln 8 for ~40 steps, "
        "then falls.",
    ),
    _case(
        "tcn_noise_std_07_high_floor",
        build.tcn_noisy_series,
        None,
        proof.tcn_noisy_trains,
        "The TCN on series with noise std 0.7: the MSE floors at about half the target's variance.",
    ),
    _case(
        "flow_validated_on_16_points",
        build.flow_tiny_validation,
        None,
        proof.flow_tiny_validation_trains,
        "A RealNVP validated every 10 steps on 16 points: a jittering validation NLL that still falls.",
        trainer_kwargs=_every(10),
    ),
    _case(
        "seq2seq_random_embeddings_frozen_on_purpose",
        build.seq2seq_frozen_embeddings,
        None,
        proof.seq2seq_frozen_embeddings_trains,
        "The reversal with its token embeddings kept random on purpose (requires_grad off): it trains.",
    ),
    _case(
        "tcn_asgd_lr_near_the_edge",
        build.tcn_asgd_aggressive,
        None,
        proof.tcn_asgd_trains,
        "The TCN under averaged SGD at 0.02, 2.5x below an LR that diverges: large steps, stable.",
    ),
    _case(
        "flow_adagrad_slow_and_steady",
        build.flow_adagrad_slow,
        None,
        proof.flow_adagrad_trains,
        "A RealNVP under Adagrad 0.01: the validation NLL falls a little at every check.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
