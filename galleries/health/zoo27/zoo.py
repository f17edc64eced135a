"""Zoo 27's runs: new tasks (protein secondary-structure tagging from one-hot residue windows, data
association between two tracker frames as a per-row classification over the next frame's detections,
reaction yields from an order-invariant pair of reactant fingerprints with a bounded 0-100% target,
grasp success from small depth patches with rare positives and rotation augmentation, a surrogate of the
periodic 1-D heat equation), new optimizers and schedules (AdamW with AMSGrad, Adagrad, SGD with Nesterov
momentum, RAdam, a ChainedScheduler of LinearLR and ExponentialLR, PolynomialLR, CosineAnnealingWarmRestarts,
ReduceLROnPlateau stepped per step, ``bf16-mixed`` on the CPU with gradient clipping by value, gradient
accumulation, manual optimisation), new bugs (a padding mask written ``==``, a proteome re-encoded per item,
quantitative yields under a logit target, a Nesterov LR with a digit shifted, a plateau schedule fed the noisy
training loss every step, augmentation given to the validation split, an exponential decay written 1.02, a
ReLU on the logit, boxes in pixels into tanh units, a ``normal_`` init without its ``std``, an encoder under
``torch.no_grad()``, targets not permuted with the shuffled frame, a PolynomialLR given epochs as steps, a
manual loop without ``zero_grad``), blind pairs, runs a repair could save, healthy look-alikes.

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
from galleries.health.zoo27 import _builds as build
from galleries.health.zoo27 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair: the loss stuck near its chance level from step 0
    case(
        "ss_padding_mask_inverted_zeroes_every_residue",
        build.ss_mask_inverted,
        "inputs",
        proof.ss_mask_stuck,
        "Chance-level loss from broken inputs: secondary-structure tagging from 7-residue one-hot windows, "
        "AdamW 3e-3 with AMSGrad; the padding mask is written token == PAD (meant !=), so every real "
        "residue's one-hot is zeroed and only the padding past the chain ends is left: validation stays at "
        "the class prior's entropy (0.95; fixed: 0.30).",
        also_allowed=STUCK,
    ),
    case(
        "ss_adagrad_lr_1000x_too_low",
        build.ss_adagrad,
        "lr_too_low",
        proof.ss_adagrad_stuck,
        "Chance-level loss from an LR 1000x too low: secondary structure, Adagrad at 1e-5 (meant 1e-2); the "
        "windows are right and reach every weight, the loss stays at ln 3 (fixed: under 0.45).",
        also_allowed=STUCK,
    ),
    # -- blind pair: NaN from the data / from the LR
    case(
        "yield_logit_target_of_quantitative_yields",
        build.yield_logit_target,
        "inputs",
        proof.yield_logit_nan,
        "NaN from the data: reaction yields regressed on the logit scale logit(y / 100), Adam 1e-3; three "
        "reactions reported at exactly 100% give the target +inf (meant: clipped to 99.5% first); the first "
        "batch holding one (step 85) has an infinite loss whose update makes every weight NaN.",
        onset_step=proof.YIELD_ONSET,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(10),
    ),
    case(
        "yield_nesterov_lr_digit_shifted",
        build.yield_nesterov,
        "lr_too_high",
        proof.yield_nesterov_nan,
        "NaN from an LR 10x too high on clean data: reaction yields on the logit scale (targets clipped), "
        "SGD with Nesterov momentum at 0.3 (meant 0.03) behind a LinearLR warm-up from 1%; once the LR "
        "passes 0.03 (step 10) the loss swings wider and turns NaN before step 40.",
        onset_step=proof.NESTEROV_ONSET,
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
        trainer_kwargs=every(10),
    ),
    case(
        "yield_reduce_on_plateau_fed_the_step_loss",
        build.yield_plateau_per_step,
        "lr_too_low",
        proof.yield_plateau_collapses,
        "An LR collapsed by its schedule: yields in percent, batches of 16, RAdam 3e-3 under "
        'ReduceLROnPlateau(factor=0.5, patience=0) with {"interval": "step", "monitor": "train_loss"} (meant '
        "the validation loss once an epoch); every noisy step that is not a new low halves the LR, below 2% "
        "of it by step 7, and the loss stays at its start (~1,700; fixed: ~170).",
        onset_step=proof.PLATEAU_ONSET,
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    # -- blind pair: the validation loss rising after its best, from overfitting / from a growing LR
    case(
        "grasp_augmentation_given_to_the_validation_split",
        build.grasp_augment_val,
        "overfitting",
        proof.grasp_overfits,
        "Overfitting: grasp success from 160 labelled depth patches (5 steps an epoch), a wide CNN, Adam "
        "3e-3; the random rotations and flips were given to the validation Dataset instead of the training "
        "one, so the CNN memorises the same 160 patches (training loss ~0.003) while validation doubles "
        "from its best.",
        onset_step=proof.OVERFIT_ONSET,
        max_steps=200,
        trainer_kwargs={"check_val_every_n_epoch": 2},
    ),
    case(
        "grasp_exponential_decay_written_1_02",
        build.grasp_gamma,
        "lr_too_high",
        proof.grasp_lr_grows,
        "An LR growing without bound: grasps, Adam 1e-3 under ChainedScheduler(LinearLR warm-up, "
        "ExponentialLR(gamma=1.02)) stepped per step, the ExponentialLR of an LR range test left in the "
        "recipe (meant: the warm-up alone); the LR passes 19x its base by step 150, after which the "
        "validation loss climbs from its best.",
        onset_step=proof.GAMMA_ONSET,
        also_allowed=("exploding_gradients", "outlier_batches"),
        trainer_kwargs=every(25),
    ),
    # -- blind pair: saturated tanh units, from unscaled inputs / from initialisation
    case(
        "assoc_boxes_in_pixels_into_tanh",
        build.assoc_pixels,
        "saturated_activations",
        proof.assoc_pixels_saturated,
        "Saturated tanh units from unscaled inputs: data association between two frames (which of the 6 "
        "next-frame detections is each detection), Adam 1e-2; the boxes are fed in pixels (meant: divided "
        "by the image size), so most of the encoder's tanh units sit at +-1 from step 0 and the scorer "
        "associates ~7x worse than the fixed run.",
        also_allowed=("inputs",),
        trainer_kwargs=every(25),
    ),
    case(
        "assoc_normal_init_without_std",
        build.assoc_normal_init,
        "initialisation",
        proof.assoc_init_saturated,
        "Saturated tanh units from initialisation: data association, Adam 1e-2; every Linear re-initialised "
        "with nn.init.normal_(weight), its default std=1 (meant 1/sqrt(fan_in)), so the scorer's tanh units "
        "sit at +-1 from step 0; the loss starts at 3x chance and ends over 10x the fixed run's.",
        also_allowed=("saturated_activations",),
        trainer_kwargs=every(25),
    ),
    # -- single causes
    case(
        "assoc_encoder_under_no_grad",
        build.assoc_no_grad_encoder,
        "frozen_parameters",
        proof.assoc_encoder_frozen,
        "Frozen parameters: data association, Adam 1e-2; the detection encoder's forward runs under "
        "torch.no_grad() (copied from the tracker's inference code), so it never gets a gradient or moves "
        "and only the pair scorer trains on random embeddings (validation ~3x the fixed run's).",
        trainer_kwargs=every(25),
    ),
    case(
        "assoc_targets_not_permuted_with_the_frame",
        build.assoc_targets_unpermuted,
        "not_learning",
        proof.assoc_targets_stuck,
        "Not learning from a labelling bug: data association, Adam 1e-2; frame 2's detections are shuffled "
        "(so the identity is no shortcut) but the targets are left as arange(6), so no target belongs to its "
        "detection and the loss stays at ln 6.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(25),
    ),
    case(
        "ss_dataset_encodes_the_proteome_per_item",
        build.ss_per_item,
        "data_stall",
        proof.ss_stalls,
        "A data stall: secondary structure from a Dataset whose __getitem__ encodes the whole 8,000-residue "
        "proteome string to indices for every window it serves (meant: once, in __init__); the step waits "
        "for its batch of 32 many times longer than it computes.",
        max_steps=50,
        trainer_kwargs=every(50),
    ),
    case(
        "grasp_relu_on_the_logit",
        build.grasp_relu_logit,
        "dead_units",
        proof.grasp_logit_dead,
        "A dead unit: grasps, Adam 1e-3; the CNN's head written Linear + ReLU for every layer, the last "
        "included, so with ~9% positives the logit's ReLU is pushed below zero on every patch, passes no "
        "gradient, and the loss is ln 2 for good.",
        onset_step=proof.RELU_ONSET,
        also_allowed=("not_learning", "vanishing_gradients"),
        trainer_kwargs=every(25),
    ),
    case(
        "heat_polynomial_lr_total_iters_in_epochs",
        build.heat_polynomial,
        "lr_too_low",
        proof.heat_lr_collapses,
        "An LR collapsed by its schedule: the heat-equation surrogate, Adam 3e-3 under PolynomialLR("
        "total_iters=30, power=1) stepped per step, 30 being the recipe's epochs; the LR is 0 from step 30 "
        "and validation is frozen at ~0.01 (fixed: ~1e-5).",
        onset_step=proof.POLY_ONSET,
        also_allowed=("loss_plateau", "not_learning"),
        trainer_kwargs=every(25),
    ),
    case(
        "heat_manual_optimisation_without_zero_grad",
        build.heat_no_zero_grad,
        "exploding_gradients",
        proof.heat_gradients_accumulate,
        "Exploding gradients from a training-loop bug: the heat surrogate with manual optimisation, SGD 0.05 "
        "with momentum 0.9, optimizer.zero_grad() left out, so every step's gradient is the sum of all "
        "before it; the gradient norm grows without bound and the loss overflows.",
        onset_step=1,
        also_allowed=("lr_too_high", "nonfinite_activations", "outlier_batches"),
        trainer_kwargs=every(25),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "yield_logit_target_of_quantitative_yields",
    "yield_reduce_on_plateau_fed_the_step_loss",
    "grasp_augmentation_given_to_the_validation_split",
    "grasp_exponential_decay_written_1_02",
    "heat_polynomial_lr_total_iters_in_epochs",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "ss_heavy_regularisation",
        build.ss_regularised,
        None,
        proof.ss_regularised_trains,
        "Secondary structure under dropout 0.5 on inputs and hidden units, label smoothing 0.2 and AdamW "
        "weight decay 0.1: a training loss that floors near 0.9 while the plain validation cross-entropy "
        "falls to ~0.67.",
        trainer_kwargs=every(25),
    ),
    case(
        "ss_class_weighted_nesterov",
        build.ss_weighted_nesterov,
        None,
        proof.ss_weighted_trains,
        "Secondary structure with ~14% strand residues under class weights, SGD with Nesterov momentum at "
        "0.1: a bumpy validation curve that ends far below chance.",
        trainer_kwargs=every(25),
    ),
    case(
        "assoc_bf16_mixed_value_clipping",
        build.assoc_bf16_value_clip,
        None,
        proof.assoc_bf16_trains,
        'Data association under precision="bf16-mixed" on the CPU with gradient_clip_val=0.05 by value: '
        "bf16-rounded losses, a slow first 200 steps, then a good association.",
        trainer_kwargs={
            **every(25),
            "precision": "bf16-mixed",
            "gradient_clip_val": 0.05,
            "gradient_clip_algorithm": "value",
        },
    ),
    case(
        "assoc_radam_plateau_then_drop",
        build.assoc_plateau,
        None,
        proof.assoc_plateau_trains,
        "Data association with RAdam 2e-3: the loss sits at ln 6 for ~60 steps while the scorer finds the "
        "boxes, then falls steadily.",
        trainer_kwargs=every(25),
    ),
    case(
        "yield_percent_targets_radam",
        build.yield_percent_radam,
        None,
        proof.yield_radam_trains,
        "Reaction yields in percent on a bounded 100 * sigmoid output, RAdam 3e-3: an MSE in the thousands "
        "then the hundreds (percent squared), gradient norms in the thousands, a slow start, and a fit down "
        "to the noise.",
        trainer_kwargs=every(25),
    ),
    case(
        "yield_adagrad_batches_of_4",
        build.yield_small_batches,
        None,
        proof.yield_small_batches_train,
        "Reaction yields with batches of 4 and Adagrad 0.05: a per-step loss swinging 50x, and it trains.",
        trainer_kwargs=every(25),
    ),
    case(
        "grasp_rare_positives_weighted_accumulated",
        build.grasp_weighted_accumulated,
        None,
        proof.grasp_accumulated_trains,
        "Grasps with ~9% positives: BCE with pos_weight=9 (losses above 1), AdamW 3e-3, batches of 16 under "
        "accumulate_grad_batches=4, rotation and flip augmentation: it trains.",
        max_steps=100,
        trainer_kwargs={"val_check_interval": 100, "accumulate_grad_batches": 4},
    ),
    case(
        "grasp_cosine_warm_restarts",
        build.grasp_warm_restarts,
        None,
        proof.grasp_restarts_train,
        "Grasps, SGD momentum 0.9 under CosineAnnealingWarmRestarts(T_0=50, T_mult=2): the LR falls to ~0 "
        "and jumps back to 0.05 at step 50 and 150, and the model trains.",
        trainer_kwargs=every(25),
    ),
    case(
        "heat_gaussian_nll_below_zero",
        build.heat_gaussian_nll,
        None,
        proof.heat_nll_trains,
        "The heat surrogate with a predicted variance on the Gaussian negative log-likelihood: the loss goes "
        "below zero (to ~-3) and keeps going down noisily, and the mean is accurate.",
        trainer_kwargs=every(25),
    ),
    case(
        "heat_nesterov_near_the_edge_of_stability",
        build.heat_nesterov_high_lr,
        None,
        proof.heat_nesterov_trains,
        "The heat surrogate, SGD with Nesterov momentum at 0.5, half the LR at which it diverges: a high "
        "but fine LR.",
        trainer_kwargs=every(25),
    ),
    case(
        "heat_manual_optimisation",
        build.heat_manual,
        None,
        proof.heat_manual_trains,
        "The heat surrogate with manual optimisation (zero_grad, manual_backward, step), SGD 0.05 momentum "
        "0.9: it trains.",
        trainer_kwargs=every(25),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
