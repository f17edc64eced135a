"""Zoo 10's runs: new tasks (a SimCLR-like contrastive encoder of digits trained with InfoNCE, a
neural-ODE-like Euler stepper learning a damped pendulum's three-second flow map, an MLP-Mixer on 2x2 patches
of digits), new optimizers and schedules (SGD with dampening, AdamW at a huge LR, StepLR stepped per batch,
ChainedScheduler with ConstantLR, CosineAnnealingWarmRestarts), new bugs (similarities multiplied by the
temperature, dampening set like a beta2, targets shuffled on their own, an ``inf`` written for a failed
simulation, two rows entered in degrees, blocks unfrozen after the optimizer was built), blind pairs, runs a
repair could save, healthy look-alikes.

Written blind (without reading HealthMonitor's rules), each run different in task or bug from the sealed zoos
before it. Each problem run holds one bug a user could have written; ``expected`` names the cause a careful
engineer would accept (the description names the root cause), ``onset_step`` the first optimizer step at which
the problem exists (measured from the plain recording by the proofs), ``also_allowed`` only symptoms of that
same cause. :data:`REPAIRABLE` names the runs a repair callback can save in process: their proofs measure the
final and the best validation loss.
"""

from __future__ import annotations

from typing import Any

from galleries.health.field._case import FieldCase
from galleries.health.sealed_zoo import STUCK, case
from galleries.health.zoo10 import _builds as build
from galleries.health.zoo10 import _proofs as proof


def _every(steps: int) -> dict[str, Any]:
    """Validate every ``steps`` optimizer steps, across epoch boundaries."""
    return {"val_check_interval": steps, "check_val_every_n_epoch": None}


PROBLEM_CASES: list[FieldCase] = [
    # -- blind triple: the loss stays at the level of knowing nothing from step 0
    case(
        "contrastive_similarities_multiplied_by_temperature",
        build.contrastive_temperature,
        "not_learning",
        proof.contrastive_temperature_stuck,
        "A trivial loss from a loss bug: InfoNCE on two views of each digit, the cosine similarities "
        "multiplied by the temperature 0.1 (meant divided); the logits span +-0.1, the loss stays at "
        "ln(batch).",
        also_allowed=("loss_plateau", "vanishing_gradients"),
    ),
    case(
        "contrastive_sgd_dampening_0999_like_a_beta2",
        build.contrastive_dampening,
        "lr_too_low",
        proof.contrastive_dampening_stuck,
        "An effective LR 100x too low: the same InfoNCE encoder, SGD 0.1 with momentum 0.9 and "
        "dampening=0.999 (set like Adam's beta2; meant 0); past the first step each gradient enters the "
        "momentum at 1/1000, the loss drifts to ln(batch) and stays.",
        also_allowed=STUCK,
    ),
    case(
        "pendulum_targets_shuffled_on_their_own",
        build.pendulum_targets_shuffled,
        "not_learning",
        proof.pendulum_shuffled_stuck,
        "A trivial loss from broken data: a Euler stepper learning a damped pendulum's flow map; the targets "
        'alone were shuffled "to mix the data", so the MSE stays at the targets\' variance.',
        also_allowed=("loss_plateau",),
        trainer_kwargs=_every(25),
    ),
    # -- pair: gradient bursts from two outlier rows / from an LR 100x too high
    case(
        "pendulum_two_rows_entered_in_degrees",
        build.pendulum_degrees,
        "outlier_batches",
        proof.pendulum_degree_spikes,
        "Spikes from outlier rows: the pendulum stepper, Adam 3e-3, read in order; two rows (state and "
        "target) were entered in degrees, not radians; their batches (12 and 47 of each 63) throw the "
        "gradient >20x the median and validation ends 2x worse.",
        onset_step=proof.DEGREE_ONSET,
        trainer_kwargs=_every(25),
    ),
    case(
        "pendulum_adamw_lr_100x",
        build.pendulum_adamw_lr,
        "lr_too_high",
        proof.pendulum_adamw_bursts,
        "Gradient bursts from an LR 100x too high on ordinary rows: the same stepper and row order (no "
        "outliers), AdamW at 0.3 (meant 3e-3); the loss runs into the hundreds from the first steps.",
        also_allowed=("exploding_gradients",),
        trainer_kwargs=_every(25),
    ),
    # -- pair: gradients in the thousands, from initialisation / from an LR 10x too high
    case(
        "pendulum_vector_field_initialised_n01",
        build.pendulum_field_init,
        "initialisation",
        proof.pendulum_init_explodes,
        "Exploding gradients from initialisation: the pendulum stepper's tanh vector field initialised from "
        "N(0, 1) on every layer (PyTorch's default std is 0.41 and 0.07); from step 0 the loss is in the "
        "hundreds and the gradients >100x the fixed run's, validation ends 20x worse.",
        also_allowed=("exploding_gradients", "saturated_activations"),
        trainer_kwargs=_every(25),
    ),
    case(
        "pendulum_sgd_lr_10x_diverges",
        build.pendulum_sgd,
        "lr_too_high",
        proof.pendulum_sgd_diverges,
        "Divergence from an LR 10x too high: the pendulum stepper, SGD at 0.1 with momentum 0.9 and "
        "dampening 0.5 (meant 0.01); one good step, then the loss climbs past 1e6 and stays there, finite.",
        onset_step=proof.SGD_ONSET,
        also_allowed=("exploding_gradients", "nonfinite_activations"),
        trainer_kwargs=_every(25),
    ),
    # -- pair: the Mixer's loss stops falling mid-run, from a frozen body / from a collapsed LR
    case(
        "mixer_blocks_unfrozen_after_optimizer_built",
        build.mixer_unfreeze,
        "frozen_parameters",
        proof.mixer_unfrozen_never_stepped,
        "A frozen body from a two-stage fine-tune: an MLP-Mixer's blocks start frozen and get requires_grad "
        "at step 100, but the Adam built at the start never holds them; from step 100 they get gradients "
        "and never change, validation ends 5x worse than when they are added to the optimizer.",
        onset_step=build.UNFREEZE_STEP,
        trainer_kwargs=_every(25),
    ),
    case(
        "mixer_steplr_meant_per_epoch_stepped_per_batch",
        build.mixer_step_decay,
        "lr_too_low",
        proof.mixer_step_decay_collapses,
        "An LR collapsing early: a Mixer, Adam 3e-3 under StepLR(step_size=10, gamma=0.1) meant per epoch "
        "and stepped every batch; the LR is 100x down at step 20 and keeps falling, the loss frozen near "
        "ln 10.",
        onset_step=proof.STEP_DECAY_ONSET,
        also_allowed=STUCK,
        trainer_kwargs=_every(25),
    ),
    # -- single causes
    case(
        "pendulum_failed_simulation_written_as_inf",
        build.pendulum_inf_target,
        "inputs",
        proof.pendulum_inf_nan,
        "Non-finite data: the pendulum stepper read in order; one target row holds inf (a failed simulation "
        "marked so by the script that wrote the table); batch 55's loss is inf and every weight NaN after.",
        onset_step=proof.INF_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=_every(25),
    ),
    case(
        "mixer_32_digit_debug_subset_overfits",
        build.mixer_few_rows,
        "overfitting",
        proof.mixer_overfits,
        "Overfitting: a Mixer trained on 32 digits (a debug subset left in), validated every 5 steps on 397; "
        "the training loss falls to ~0 while the validation loss climbs to ~1.4x its best.",
        onset_step=proof.OVERFIT_ONSET,
        trainer_kwargs={"check_val_every_n_epoch": 5},
    ),
    case(
        "contrastive_tanh_encoder_initialised_n01",
        build.contrastive_tanh_init,
        "initialisation",
        proof.contrastive_init_saturates,
        "Saturation from initialisation: a tanh encoder for InfoNCE whose layers were initialised from "
        "N(0, 1) (std 1 for 64- and 128-wide inputs, ~10x Xavier's); ~80% of the second layer's units sit "
        "beyond +-0.99 throughout, validation ends 1.5x worse than with the default init.",
        also_allowed=("saturated_activations",),
    ),
    case(
        "pendulum_dataset_integrates_each_state_on_read",
        build.pendulum_simulated_on_read,
        "data_stall",
        proof.pendulum_stall,
        "A dataset that runs the simulator on every read: each state's future integrated by RK4 one state at "
        "a time in __getitem__ (no cached table, no workers); the loop waits for data most of the time.",
        max_steps=40,
        check_every=5,
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "pendulum_failed_simulation_written_as_inf",
    "mixer_steplr_meant_per_epoch_stepped_per_batch",
    "mixer_32_digit_debug_subset_overfits",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "mixer_30pct_labels_redrawn",
        build.mixer_label_noise,
        None,
        proof.mixer_noise_trains,
        "A Mixer with 30% of its training labels redrawn at random: the training loss floors high, the clean "
        "validation loss falls.",
        trainer_kwargs=_every(25),
    ),
    case(
        "mixer_lr_held_at_1pct_for_120_steps",
        build.mixer_long_hold,
        None,
        proof.mixer_hold_trains,
        "A Mixer whose LR is held at 1% for 120 steps (ChainedScheduler of ConstantLR and StepLR): flat, "
        "then it learns.",
        trainer_kwargs=_every(25),
    ),
    case(
        "pendulum_cosine_warm_restarts_every_60",
        build.pendulum_restarts,
        None,
        proof.pendulum_restarts_trains,
        "The pendulum stepper under cosine annealing with warm restarts every 60 steps: the LR jumps back up "
        "five times, the loss falls.",
        trainer_kwargs=_every(25),
    ),
    case(
        "pendulum_full_gaussian_nll_constant",
        build.pendulum_gaussian_nll,
        None,
        proof.pendulum_nll_trains,
        "The pendulum stepper under the full Gaussian NLL with a fixed variance 4: a constant 1.61 in a loss "
        "that moves by a few % of its value, yet learns.",
        trainer_kwargs=_every(25),
    ),
    case(
        "pendulum_validated_on_8_states",
        build.pendulum_tiny_val,
        None,
        proof.pendulum_tiny_val_trains,
        "The pendulum stepper validated every 10 steps on 8 states: a jittery validation loss, a sound run.",
        trainer_kwargs=_every(10),
    ),
    case(
        "contrastive_fixed_random_projector",
        build.contrastive_fixed_projector,
        None,
        proof.contrastive_projector_trains,
        "A contrastive encoder whose projection head is a fixed random projection on purpose: only the body "
        "trains, and well.",
    ),
    case(
        "contrastive_sgd_momentum_large_first_gradients",
        build.contrastive_sgd,
        None,
        proof.contrastive_sgd_trains,
        "InfoNCE with SGD 0.1 and momentum 0.9 (the dampened run's twin): the first gradients are >4x the "
        "run's median, harmless; the loss falls well below where it started.",
    ),
    case(
        "mixer_adam_1e2_aggressive_but_stable",
        build.mixer_adam_1e2,
        None,
        proof.mixer_aggressive_trains,
        "A Mixer with Adam at 1e-2 (3x the usual): a bumpy but stable descent to a low validation loss.",
        trainer_kwargs=_every(25),
    ),
    case(
        "contrastive_adam_1e4_slow_and_steady",
        build.contrastive_slow,
        None,
        proof.contrastive_slow_trains,
        "InfoNCE with Adam at 1e-4: slow, every validation better than the last, well below ln(397) at the "
        "end.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
