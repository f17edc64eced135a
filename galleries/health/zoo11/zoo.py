"""Zoo 11's runs: new tasks (a neural-ODE-like regressor that Euler-steps a learnt vector field to predict
damped oscillators, a FiLM-conditioned multi-task regressor, SimCLR-like InfoNCE on digits, scikit-learn's
wine), new optimizers and schedules (SGD with dampening, Adafactor, a ChainedScheduler of LinearLR and
ExponentialLR, StepLR), new bugs (a physics damping ratio passed as SGD's ``dampening``, an optimizer built
over the readout only, contrastive pairs shuffled apart, a hand-written decoupled decay missing its ``1 -``, a
train/validation split swapped, an exponential decay with its sign flipped, a per-epoch StepLR stepped per
step, targets logged in millimetres, a missing reading left NaN, targets integrated on every read,
first-layer biases started at -3), blind pairs, runs a repair could save, healthy look-alikes.

Written blind (without reading HealthMonitor's rules), each run different in task or bug from the sealed zoos
before it. Each problem run holds one bug a user could have written; ``expected`` names the cause a careful
engineer would accept (the description names the root cause), ``onset_step`` the first optimizer step at which
the problem exists (measured from the plain recording by the proofs), ``also_allowed`` only symptoms of that
same cause. :data:`REPAIRABLE` names the runs a repair callback can save in process: their proofs measure the
final and the best validation loss.
"""

from __future__ import annotations

from galleries.health.field._case import FieldCase
from galleries.health.sealed_zoo import LR_BLOWUP, STUCK, every
from galleries.health.sealed_zoo import case as _case
from galleries.health.zoo11 import _builds as build
from galleries.health.zoo11 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair: an Euler-stepped ODE regressor whose loss stalls at ~3x its fixed twin's
    _case(
        "ode_stepper_sgd_dampening_099_steps_100x_small",
        build.ode_dampening,
        "lr_too_low",
        proof.ode_dampening_crawls,
        "Steps 100x too small from a misplaced argument: SGD at 0.05, momentum 0.9, with dampening=0.99 (the "
        "oscillators' damping ratio copied into the optimizer; meant 0); the LR reads 0.05 yet each update is"
        " ~1/100 of the fixed run's, and the loss stalls at ~3x the fixed run's.",
        also_allowed=STUCK,
    ),
    _case(
        "ode_stepper_adam_built_over_readout_only",
        build.ode_readout_only,
        "frozen_parameters",
        proof.ode_readout_frozen,
        "A frozen body from an optimizer built over net.readout.parameters() (left from a linear-probe "
        "experiment): the encoder and the vector field get gradients every step and never change; the loss "
        "stalls at ~3x the fixed run's.",
        also_allowed=("loss_plateau",),
    ),
    # -- blind pair: InfoNCE on digits with a flat loss from step 0
    _case(
        "contrastive_pairs_shuffled_apart_learns_nothing",
        build.contrastive_shuffled_apart,
        "not_learning",
        proof.contrastive_learns_nothing,
        "Learns nothing from a data bug: each contrastive pair's second image comes from a separately "
        "shuffled copy of the images, so the positive is an unrelated digit; InfoNCE stays at ln 64 (ln 397 "
        "on validation), chance, from step 0.",
        also_allowed=("loss_plateau",),
    ),
    _case(
        "contrastive_steplr_per_epoch_stepped_per_step_collapses",
        build.contrastive_step_decay,
        "lr_too_low",
        proof.contrastive_collapses,
        "An LR collapsed from step 2: InfoNCE on digits, Adam 1e-3 under StepLR(step_size=1, gamma=0.1) "
        "meant per epoch but stepped per optimizer step; the LR is 1e-5 at step 2 and 1e-302 at the end, "
        "the loss frozen where it began.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
    ),
    # -- blind pair: a FiLM regressor whose loss turns NaN mid-run
    _case(
        "film_missing_reading_left_nan",
        build.film_nan_row,
        "inputs",
        proof.film_nan_input,
        "NaN from one bad input: a FiLM multi-task regressor read in order, one row's third feature a missing"
        " reading never imputed (NaN); the loss of batch 40 is NaN, Adam's update makes every weight NaN.",
        onset_step=proof.NAN_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(10),
    ),
    _case(
        "film_chained_exponential_lr_sign_flipped_diverges",
        build.film_exponential_growth,
        "lr_too_high",
        proof.film_growth_diverges,
        "Divergence from an LR that grows 1.5% a step: the FiLM regressor, SGD 0.02 momentum 0.9 under a "
        "ChainedScheduler of a 20-step LinearLR warm-up and ExponentialLR(gamma=exp(0.015)) (meant "
        "exp(-0.015)); it learns, then from ~2.3x its LR the loss rises for good and turns NaN at step 164.",
        onset_step=proof.DIVERGE_ONSET,
        also_allowed=LR_BLOWUP,
        trainer_kwargs=every(25),
    ),
    # -- blind pair: a wine MLP whose CE stays near ln 3 from step 0
    _case(
        "wine_hand_written_decay_missing_one_minus",
        build.wine_hand_decay,
        "not_learning",
        proof.wine_decay_learns_nothing,
        "Learns nothing from a hand-written decoupled weight decay p *= lr * wd (meant 1 - lr * wd) before "
        "each Adam step: every weight is multiplied by 1e-5 each step; the wine MLP's CE stays at ln 3.",
        also_allowed=("loss_plateau", "vanishing_gradients"),
    ),
    _case(
        "wine_first_layer_bias_init_minus_3_dead",
        build.wine_bias_init,
        "initialisation",
        proof.wine_init_dead,
        "Learns nothing from initialisation: a wine MLP whose first layer's biases start at -3 (a "
        "sparse-coding recipe's threshold, meant for raw inputs in the hundreds; these are standardised); "
        "every first-layer unit is dead on every batch from step 0 and the CE stays near ln 3.",
        also_allowed=("dead_units", "not_learning", "loss_plateau"),
    ),
    # -- single causes
    _case(
        "wine_train_val_split_swapped_overfits",
        build.wine_split_swapped,
        "overfitting",
        proof.wine_overfits,
        "Overfitting from a swapped split (train, val = val, train): a wide wine MLP trains on the 48 rows "
        "meant to validate, validated every epoch (3 steps); the training loss goes to ~0 while the "
        "validation loss climbs to >2x its best.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    _case(
        "ode_stepper_two_targets_in_millimetres",
        build.ode_outliers,
        "outlier_batches",
        proof.ode_outlier_spikes,
        "Spikes from outlier rows: the Euler-stepped ODE regressor read in order; two oscillators' final "
        "state was logged in millimetres (x1000); their batches (22 and 71 of each 94) carry gradients >20x "
        "the median.",
        onset_step=proof.OUTLIER_ONSET,
    ),
    _case(
        "ode_stepper_targets_integrated_on_every_read",
        build.ode_integrated_on_read,
        "data_stall",
        proof.ode_stall,
        "A dataset that integrates each oscillator's target on every read (40 RK4 steps in Python, one row "
        "at a time, no cache, no workers): the loop waits for data most of the time.",
        max_steps=60,
        check_every=10,
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "contrastive_steplr_per_epoch_stepped_per_step_collapses",
    "film_missing_reading_left_nan",
    "film_chained_exponential_lr_sign_flipped_diverges",
    "wine_train_val_split_swapped_overfits",
)

HEALTHY_CASES: list[FieldCase] = [
    _case(
        "film_loss_plus_constant_64",
        build.film_offset,
        None,
        proof.film_offset_trains,
        "A FiLM regressor whose loss carries a constant 64: the loss falls by ~1% of its value, yet trains.",
    ),
    _case(
        "wine_twelve_row_validation_jitters",
        build.wine_tiny_validation,
        None,
        proof.wine_tiny_validation_trains,
        "A wine MLP with label smoothing 0.1 validated on 12 rows every epoch: the validation loss jitters.",
    ),
    _case(
        "contrastive_linear_warmup_120_steps",
        build.contrastive_long_warmup,
        None,
        proof.contrastive_warmup_trains,
        "InfoNCE on digits with a LinearLR warm-up from 1% over 120 steps: slow at first, then learns.",
    ),
    _case(
        "ode_stepper_random_encoder_frozen_on_purpose",
        build.ode_frozen_encoder,
        None,
        proof.ode_frozen_trains,
        "An Euler-stepped ODE regressor whose random encoder is frozen on purpose: the rest trains well.",
    ),
    _case(
        "ode_stepper_sgd_dampening_05_slow_and_steady",
        build.ode_slow_sgd,
        None,
        proof.ode_slow_trains,
        "SGD 0.05, momentum 0.9 with dampening 0.5 on the ODE regressor: half-sized steps, slow and steady.",
        trainer_kwargs=every(25),
    ),
    _case(
        "film_targets_with_noise_std_1",
        build.film_noisy_targets,
        None,
        proof.film_noisy_trains,
        "FiLM targets with noise of std 1 (most of their variance): the loss floors high, near 1.",
    ),
    _case(
        "film_adafactor_lr_005",
        build.film_adafactor,
        None,
        proof.film_adafactor_trains,
        "Adafactor at 0.05 on the FiLM regressor (25x its siblings' Adam LR): aggressive, stable, trains.",
    ),
    _case(
        "film_uncentred_targets_level_20",
        build.film_raw_offset_targets,
        None,
        proof.film_raw_offset_trains,
        "FiLM targets left at a level of 20 (uncentred), Adam 1e-2: huge first gradients, then it trains.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
