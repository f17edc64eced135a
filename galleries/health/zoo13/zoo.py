"""Zoo 13's runs: new tasks (scikit-learn's diabetes progression and breast-cancer tables, a reaction-rate
regression on log concentrations, a MADE autoregressive density model of binarised digits, a deep residual
MLP), new optimizers and schedules (RAdam with decoupled weight decay, NAdam, Adamax, two-group Adam,
MultiStepLR with its milestones or its gamma wrong, LinearLR warm-up), new bugs (a missing-value mask
inverted, a zero concentration logged to ``-inf``, a step-down written as a step-up, epoch milestones taken
as steps, a config key misspelt into a zero LR, the StandardScaler left out before tanh, residual branches
drawn with std 0.25), blind pairs, runs a repair could save, healthy look-alikes.

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
from galleries.health.zoo13 import _builds as build
from galleries.health.zoo13 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair: the loss at the target's variance from step 0
    case(
        "diabetes_missing_mask_inverted_zeroes_every_input",
        build.diabetes_inverted_mask,
        "not_learning",
        proof.diabetes_mask_stuck,
        "Trivial loss from a data-cleaning bug: diabetes progression, NAdam 3e-3; missing readings are "
        "filled with 0 and multiplied by the mask of missing entries (meant present ones), so every input "
        "is 0 and the MSE stays at the target's variance.",
        also_allowed=("loss_plateau",),
    ),
    case(
        "diabetes_radam_lr_10000x_too_low",
        build.diabetes_radam,
        "lr_too_low",
        proof.diabetes_lr_stuck,
        "Trivial loss from an LR 10000x too low: diabetes progression, RAdam with decoupled weight decay at "
        "3e-7 (meant 3e-3); the inputs are fine, the MSE stays at the target's variance.",
        also_allowed=STUCK,
    ),
    # -- blind pair: NaN from a non-finite input / from an LR blow-up
    case(
        "reaction_rates_zero_concentration_logged_to_minus_inf",
        build.rates_zero_reading,
        "inputs",
        proof.rates_zero_reading_nan,
        "NaN from one non-finite input: reaction rates on log concentrations read in order, Adam 1e-3; one "
        "concentration below the detection limit was entered as 0 and logged to -inf, batch 40's loss is NaN "
        "and its update makes every weight NaN.",
        onset_step=proof.BAD_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    case(
        "reaction_rates_sgd_lr_100x_nan",
        build.rates_sgd,
        "lr_too_high",
        proof.rates_sgd_nan,
        "NaN from an LR blow-up on clean inputs: reaction rates, SGD momentum 0.9 at 3.0 (meant 0.03); the "
        "loss grows 100x in a few steps and turns NaN.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
    ),
    # -- blind pair: the validation loss rising from overfitting / from an LR raised mid-run
    case(
        "diabetes_wide_mlp_on_40_rows_overfits",
        build.diabetes_few_rows,
        "overfitting",
        proof.diabetes_overfits,
        "Overfitting: a width-512 two-hidden-layer MLP on 40 diabetes rows (a debug subset left in), "
        "validated every epoch (2 steps); the training MSE falls to ~0 while the validation MSE climbs from "
        "its best.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "reaction_rates_multistep_gamma_10_not_01",
        build.rates_stage_gamma,
        "lr_too_high",
        proof.rates_stage_diverges,
        "An LR raised 10x mid-run: reaction rates, SGD momentum 0.9 at 0.02 under MultiStepLR([100], "
        "gamma=10) (meant 0.1: a step-down written as a step-up); from step 100 the loss rises and "
        "validation is >5x its best.",
        onset_step=proof.STAGE_ONSET,
        also_allowed=("exploding_gradients",),
        trainer_kwargs=every(20),
    ),
    # -- single causes
    case(
        "made_multistep_epoch_milestones_stepped_per_batch",
        build.made_epoch_milestones,
        "lr_too_low",
        proof.made_collapses,
        "An LR collapsing early: a MADE of binarised digits, Adam 2e-3 under MultiStepLR([20, 40], "
        "gamma=0.01) meant in epochs (22 steps each) but stepped per batch; the LR is 100x down at step 20 "
        "and 10000x at 40, the loss frozen far above the fixed run's.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(20),
    ),
    case(
        "reaction_rates_body_lr_config_key_misspelt",
        build.rates_body_lr,
        "frozen_parameters",
        proof.rates_body_frozen,
        "A frozen body from a config typo: reaction rates, Adam with the hidden layers' group at "
        'config.get("body_lr", 0.0) while the config says "bodylr"; the hidden layers get gradients and '
        "never change, only the readout learns.",
    ),
    case(
        "breast_cancer_raw_features_into_tanh_saturate",
        build.cancer_raw_tanh,
        "saturated_activations",
        proof.cancer_tanh_saturates,
        "Saturated tanh units from unscaled inputs: breast cancer with the StandardScaler left out (areas up "
        "to ~2500), a tanh MLP, Adam 1e-3; most first-layer units sit beyond +-0.99 on every batch.",
        also_allowed=("vanishing_gradients",),
    ),
    case(
        "reaction_rates_residual_branches_std_025_explode",
        build.rates_residual_init,
        "initialisation",
        proof.rates_residual_explodes,
        "Exploding gradients from initialisation: a residual MLP of eight blocks whose branch weights are "
        "drawn normal(0, 0.25) (the default is ~0.07 for width 64), so each block multiplies the signal; "
        "first gradients ~1e7, losses ~1e5.",
        also_allowed=("exploding_gradients",),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "reaction_rates_zero_concentration_logged_to_minus_inf",
    "diabetes_wide_mlp_on_40_rows_overfits",
    "reaction_rates_multistep_gamma_10_not_01",
    "made_multistep_epoch_milestones_stepped_per_batch",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "diabetes_target_in_raw_units",
        build.diabetes_raw_target,
        None,
        proof.diabetes_raw_trains,
        "Diabetes with the target in its own units (variance ~6000): MSE in the thousands, gradients in the "
        "hundreds, Adam 3e-3 trains.",
    ),
    case(
        "breast_cancer_25pct_training_labels_flipped",
        build.cancer_flipped_labels,
        None,
        proof.cancer_flipped_trains,
        "25% of the training labels flipped: the training loss floors near H(0.25) ~ 0.56, the clean "
        "validation loss falls.",
    ),
    case(
        "made_linear_warmup_150_steps",
        build.made_long_warmup,
        None,
        proof.made_warmup_trains,
        "A MADE with a LinearLR warm-up from 1% over 150 steps: nothing moves at first, then it learns.",
        trainer_kwargs=every(20),
    ),
    case(
        "reaction_rates_random_features_frozen_on_purpose",
        build.rates_random_features,
        None,
        proof.rates_random_features_trains,
        "Hidden layers frozen on purpose (random features, width 512): only the readout trains, and well.",
    ),
    case(
        "breast_cancer_validated_on_12_tumours",
        build.cancer_tiny_val,
        None,
        proof.cancer_tiny_val_trains,
        "Breast cancer validated on 12 tumours only: a validation loss from so few rows that it rises at "
        "some checks, yet falls 30x overall.",
    ),
    case(
        "made_adamax_2e_4_slow_and_steady",
        build.made_adamax_slow,
        None,
        proof.made_slow_trains,
        "A MADE with Adamax at 2e-4: slow, but every validation is better than the last.",
        trainer_kwargs=every(20),
    ),
    case(
        "reaction_rates_sgd_lr_divided_10x_at_100",
        build.rates_step_down,
        None,
        proof.rates_step_down_trains,
        "Reaction rates, SGD momentum 0.9 at 0.02 divided by 10 at step 100: a loss that drops at the step.",
        trainer_kwargs=every(20),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
