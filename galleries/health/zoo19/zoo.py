"""Zoo 19's runs: new tasks (digit-pair arithmetic, a mixture density network of Bishop's inverse sine,
graph-level regression with dense message passing on small random graphs, a physics-informed fit of the
logistic ODE, a building table with three targets in very different units), new optimizers and schedules
(AdamW with amsgrad, RMSprop with momentum, ASGD, plain SGD, Adam with betas (0.5, 0.9); ReduceLROnPlateau on
``val_loss``, ExponentialLR, a LambdaLR warm-up, MultiStepLR, none), new bugs (image and label pairs drawn
apart, an Adam LR given to plain SGD, NaN targets left by the cleaning step, a smoke-test subset left in, an
ExponentialLR decay with its end points swapped, a plateau schedule in ``mode="max"`` on a loss, an optimizer
built from the readout alone, graph features recomputed on every read, rows exported in Wh among kWh, a
PINN drawn with std 0.01, an LR of 0.1 that kills an MDN's ReLUs), blind pairs, runs a repair could save,
healthy look-alikes.

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
from galleries.health.zoo19 import _builds as build
from galleries.health.zoo19 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair: the loss stuck at (or near) the trivial level of the digit sums
    case(
        "digit_sums_image_and_label_pairs_drawn_apart",
        build.digits_labels_drawn_apart,
        "not_learning",
        proof.digits_labels_stuck,
        "Trivial loss from a data-pipeline bug: digit-pair sums (19 classes), Adam betas (0.5, 0.9) at 5e-3; "
        "the pair builder draws the image pairs and the label pairs with two separate sampler calls, so "
        "every sum belongs to two other digits; the weights move at an ordinary rate and the cross-entropy "
        "sits at the sums' entropy.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(30),
    ),
    case(
        "digit_sums_plain_sgd_given_adams_lr",
        build.digits_sgd_adam_lr,
        "lr_too_low",
        proof.digits_lr_stuck,
        "Loss stuck near its starting level from an LR far too low: digit-pair sums, plain SGD without "
        "momentum at 1e-4 (the LR of the Adam config it was copied from; SGD needs ~1 here); the labels are "
        "right, the weights barely move.",
        also_allowed=STUCK,
        trainer_kwargs=every(30),
    ),
    # -- blind pair: NaN from broken targets / from an LR blow-up
    case(
        "buildings_humidity_nan_rows_left_by_cleaning",
        build.buildings_nan_humidity,
        "inputs",
        proof.buildings_nan_rows,
        "NaN from broken data: a building table (energy, temperature, humidity targets) read in order, "
        "AdamW amsgrad 3e-3 under MultiStepLR; the cleaning step dropped rows with NaN features but not "
        "three with a NaN humidity target, so batch 25's loss is NaN and its update makes every weight NaN.",
        onset_step=proof.NAN_BATCH,
        also_allowed=("nonfinite_activations", "nonfinite_weights"),
        trainer_kwargs=every(20),
    ),
    case(
        "buildings_plain_sgd_lr_3_not_03",
        build.buildings_sgd_lr,
        "lr_too_high",
        proof.buildings_sgd_nan,
        "NaN from an LR blow-up on clean data: the building table, plain SGD without momentum at 3.0 "
        "(meant 0.3); the loss grows 1e4x in a few steps, then turns inf and NaN.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
        trainer_kwargs=every(20),
    ),
    # -- blind pair: the validation loss rising from overfitting / from an LR growing 1000x
    case(
        "digit_sums_smoke_test_subset_of_320_pairs_overfits",
        build.digits_debug_subset,
        "overfitting",
        proof.digits_overfits,
        "Overfitting: the digit adder trained on 320 pairs (a smoke-test subset left in the config), AdamW "
        "amsgrad 3e-3, validated on 1000 pairs every epoch (5 steps); the training loss falls >10x while "
        "the validation cross-entropy climbs from its best to well above the trivial level.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "graphs_exponential_decay_endpoints_swapped",
        build.graphs_exponential_inverted,
        "lr_too_high",
        proof.graphs_lr_grows,
        "An LR growing 1000x over the run: graph regression with message passing, Adam betas (0.5, 0.9) at "
        "3e-3 under ExponentialLR(gamma=(end/start)**(1/300)) with start and end passed the wrong way round, "
        "so gamma > 1; from step ~40 the training and validation losses rise (validation ~3x its best) "
        "and by step ~175 every ReLU is dead, the prediction a constant.",
        onset_step=proof.EXP_ONSET,
        also_allowed=("dead_units", "loss_plateau"),
        trainer_kwargs=every(20),
    ),
    # -- single causes
    case(
        "logistic_pinn_reduce_on_plateau_mode_max",
        build.pinn_plateau_mode_max,
        "lr_too_low",
        proof.pinn_lr_collapses,
        "An LR collapsing early: a physics-informed fit of the logistic ODE (data + autograd residual), "
        "AdamW amsgrad 1e-2 under ReduceLROnPlateau on val_loss with mode='max' (copied from an accuracy "
        "monitor, factor 0.1, patience 1); every improvement counts as a bad epoch, so the LR is 100x down "
        "at step 50 and ~1e6x by the end, the fit frozen far from the fixed run's.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
    ),
    case(
        "graphs_rmsprop_given_the_readout_parameters_only",
        build.graphs_readout_only,
        "frozen_parameters",
        proof.graphs_body_frozen,
        "A frozen body from an optimizer bug: graph regression, RMSprop momentum 0.9 at 1e-3 built from "
        "net.readout.parameters() (meant net.parameters()); the encoder and message layers get gradients "
        "and never change, only the readout learns.",
        trainer_kwargs=every(20),
    ),
    case(
        "graphs_shortest_path_features_recomputed_every_read",
        build.graphs_features_every_read,
        "data_stall",
        proof.graphs_stall,
        "A data-loading stall: graph regression, ASGD 0.05; the dataset computes each graph's node features "
        "(plain-Python Floyd-Warshall and walk counts) in __getitem__ on every read instead of once, so the "
        "loop waits for each batch several times longer than the step takes.",
        max_steps=proof.STALL_STEPS,
        trainer_kwargs=every(20),
    ),
    case(
        "buildings_four_rows_of_energy_exported_in_wh",
        build.buildings_energy_in_wh,
        "outlier_batches",
        proof.buildings_outliers,
        "Outlier batches from a unit mix-up: the building table, Adam betas (0.5, 0.9) at 3e-3; four rows' "
        "annual energy came from a meter exported in Wh (1000x the others' kWh), so every batch holding one "
        "has a loss orders of magnitude above the rest and a gradient spike that sets the fit back.",
        onset_step=proof.OUTLIER_ONSET,
        also_allowed=("exploding_gradients",),
        trainer_kwargs=every(20),
    ),
    case(
        "logistic_pinn_six_tanh_layers_drawn_std_001",
        build.pinn_tiny_init,
        "initialisation",
        proof.pinn_vanishes,
        "Vanishing gradients from initialisation: a physics-informed logistic fit with six tanh layers of "
        "32 whose weights are all drawn normal(0, 0.01) (copied from a shallow model), ASGD 0.1; each layer "
        "shrinks the signal ~20x, the first layers never move and the fit stays near a constant.",
        also_allowed=("vanishing_gradients", *STUCK),
    ),
    case(
        "mdn_adam_lr_01_kills_the_relus",
        build.mdn_adam_lr,
        "lr_too_high",
        proof.mdn_kills_units,
        "Dead ReLUs from an LR 100x too high: a mixture density network of the inverse sine, Adam betas "
        "(0.5, 0.9) at 0.1 (meant 1e-3); within ~20 steps over 75% of the body's second-layer units stop "
        "getting any gradient and the NLL ends well above the fixed run's.",
        also_allowed=("dead_units",),
        trainer_kwargs=every(20),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "buildings_humidity_nan_rows_left_by_cleaning",
    "digit_sums_smoke_test_subset_of_320_pairs_overfits",
    "graphs_exponential_decay_endpoints_swapped",
    "logistic_pinn_reduce_on_plateau_mode_max",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "digit_sums_30pct_training_sums_random",
        build.digits_noisy_labels,
        None,
        proof.digits_noisy_trains,
        "Digit sums with 30% of the training sums replaced by random ones (crowd labels; the validation sums "
        "are checked): the training loss floors high, the clean validation loss falls.",
        trainer_kwargs=every(30),
    ),
    case(
        "mdn_lambda_warmup_100_steps_nll_below_zero",
        build.mdn_warmup,
        None,
        proof.mdn_warmup_trains,
        "A mixture density network after a LambdaLR warm-up from 1% over 100 steps, AdamW amsgrad 3e-3: "
        "little moves at first, then the NLL falls below zero, as a density's may.",
        trainer_kwargs=every(20),
    ),
    case(
        "logistic_pinn_lr_divided_by_5_at_100_and_200",
        build.pinn_step_decay,
        None,
        proof.pinn_decay_trains,
        "A physics-informed logistic fit, Adam betas (0.5, 0.9) at 1e-2 under MultiStepLR([100, 200], 0.2): "
        "losses of 1e-4 and below, steps in the LR, a fit 100x better than at the start.",
    ),
    case(
        "graphs_encoder_frozen_on_purpose",
        build.graphs_frozen_encoder,
        None,
        proof.graphs_frozen_trains,
        "Graph regression with the node encoder and first message layer frozen on purpose (random "
        "features): only the rest trains, and well.",
        trainer_kwargs=every(20),
    ),
    case(
        "graphs_asgd_002_slow_and_steady",
        build.graphs_asgd_slow,
        None,
        proof.graphs_slow_trains,
        "Graph regression with ASGD at 0.02: a long flat start, yet every validation beats the last.",
        trainer_kwargs=every(20),
    ),
    case(
        "buildings_mse_in_kwh_degc_and_fraction",
        build.buildings_raw_units,
        None,
        proof.buildings_raw_trains,
        "The building table trained on the MSE in the targets' own units (a head maps outputs to kWh, degC "
        "and a fraction), RMSprop momentum 0.9 at 1e-3: losses ~1e8, gradients ~1e8, and it trains.",
        trainer_kwargs=every(20),
    ),
    case(
        "buildings_validated_on_10_rows_with_plateau_schedule",
        build.buildings_tiny_val,
        None,
        proof.buildings_tiny_val_trains,
        "The building table validated on 10 rows every 20 steps, AdamW amsgrad 3e-3 under ReduceLROnPlateau "
        "on that jittery val_loss: it rises at some checks and the LR is halved, yet it trains well.",
        trainer_kwargs=every(20),
    ),
    case(
        "graphs_exponential_decay_1000x",
        build.graphs_exponential_decay,
        None,
        proof.graphs_decay_trains,
        "Graph regression, Adam betas (0.5, 0.9) at 3e-3 decayed 1000x by ExponentialLR (the fixed "
        "schedule): the LR ends at 3e-6 and the loss flattens, as intended.",
        trainer_kwargs=every(20),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
