"""Zoo 4's runs: new tasks (a matrix-factorisation recommender, deep sets, multi-label BCE, quantile
regression, a U-Net-like denoiser, depthwise-separable convolutions with GroupNorm, a graph network), blind
pairs, runs a repair could save, healthy look-alikes.

Written blind (without reading HealthMonitor's rules), each run different in task or bug from the first
three sealed zoos. Each problem run holds one bug a user could have written; ``expected`` names the cause a
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
from galleries.health.zoo4 import _builds as build
from galleries.health.zoo4 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- pair 1: the loss stays at the trivial level (the ratings' variance / the targets' variance)
    _case(
        "recommender_adagrad_lr_10000x_too_low",
        build.recommender_adagrad,
        "lr_too_low",
        proof.recommender_lr_stuck,
        "Trivial loss from an LR 10000x too low: matrix factorisation of star ratings, Adagrad at 1e-5 "
        "(meant 0.1); the MSE stays at the ratings' variance.",
        also_allowed=STUCK,
    ),
    _case(
        "recommender_prediction_rounded_to_stars",
        build.recommender_rounded,
        "not_learning",
        proof.recommender_rounded_stuck,
        "Trivial loss from a cut gradient path: the forward pass rounds the predicted rating to whole "
        "stars, so every gradient is exactly zero; the MSE stays at the ratings' variance.",
        also_allowed=("loss_plateau", "vanishing_gradients"),
    ),
    _case(
        "deep_sets_points_reshaped_not_transposed",
        build.sets_reshaped,
        "not_learning",
        proof.sets_reshaped_learn_nothing,
        "Trivial loss from inputs that do not belong to their targets: points stored element-major were "
        "reshaped (not transposed) into sets, so each set mixes ten other sets' points; MSE at the "
        "targets' variance.",
        also_allowed=("loss_plateau",),
    ),
    # -- pair 2: gradient spikes from outlier images / from an LR too high
    _case(
        "unet_denoiser_two_images_left_in_0_255",
        build.unet_unscaled_images,
        "outlier_batches",
        proof.unet_outlier_spikes,
        "Spikes from outlier rows: a U-Net-like digits denoiser read in order; two images from a second "
        "source kept their 0-255 range (the rest is in [0, 1]); their batches (10, 30 of each epoch) "
        "carry the gradient spikes.",
        onset_step=proof.UNET_OUTLIER_ONSET,
    ),
    _case(
        "unet_denoiser_adam_lr_50x_spikes",
        build.unet_adam,
        "lr_too_high",
        proof.unet_adam_spikes,
        "Spikes from an LR 50x too high on ordinary batches: the same denoiser (every image in [0, 1]), "
        "Adam at 0.1 (meant 2e-3); bursts of gradients >20x the fixed run's median all run long, "
        "validation ~15% worse.",
        also_allowed=("exploding_gradients",),
    ),
    # -- pair 3: dead ReLU units from initialisation / from a mid-run LR jump
    _case(
        "multilabel_mlp_first_layer_sign_flipped_dead",
        build.multilabel_sign_init,
        "dead_units",
        proof.multilabel_init_dead,
        "Dead units from initialisation: a multi-label digits MLP (BCE on four attributes) whose first "
        "layer was made non-positive at init (-w.abs(), a sign typo) on non-negative pixels; every "
        "first-layer unit is dead from step 0.",
        also_allowed=("not_learning",),
    ),
    _case(
        "multilabel_mlp_adam_lr_100x_from_step_100_kills_units",
        build.multilabel_lr_jump,
        "lr_too_high",
        proof.multilabel_jump_kills_units,
        "An LR 100x too high from mid-run: the same multi-label MLP, Adam 1e-3, a second phase at step "
        "100 sets the LR to 0.1 (the SGD recipe's); >90% of first-layer units die within steps and "
        "validation loss nearly doubles.",
        onset_step=build.JUMP_STEP,
        also_allowed=("dead_units", "not_learning"),
        trainer_kwargs=_every(20),
    ),
    # -- pair 4: validation loss rising from overfitting / from divergence (both repairable)
    _case(
        "multilabel_wide_mlp_48_images_overfits",
        build.multilabel_few_rows,
        "overfitting",
        proof.multilabel_overfits,
        "Overfitting: a width-256 multi-label MLP on 48 digit images (a debug subset left in), validated "
        "every epoch (2 steps); training loss to ~2e-4 while the validation loss climbs to 1.7x its best.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    _case(
        "sepconv_groupnorm_lr_grows_2pct_a_step_diverges",
        build.sepconv_lr_growth,
        "lr_too_high",
        proof.sepconv_diverges,
        "Divergence after healthy steps from an LR too high: a depthwise-separable GroupNorm digits CNN, "
        "SGD Nesterov 0.05 under a per-step factor 1.02**step (meant 0.997); the loss falls, then rises "
        "for good once the LR passes ~0.45 (step 112).",
        onset_step=proof.GROWTH_ONSET,
        also_allowed=LR_BLOWUP,
        trainer_kwargs=_every(20),
    ),
    # -- pair 5: NaN from one bad batch / from an LR blow-up
    _case(
        "multilabel_per_batch_pos_weight_batch_without_positives_nan",
        build.multilabel_pos_weight,
        "nonfinite_activations",
        proof.pos_weight_nan,
        "One non-finite update from one batch: a multi-label MLP whose BCE re-weights positives by the "
        "batch's negatives/positives; batch 100 holds no digit with a loop (pos_weight inf, 0 * inf), "
        "every weight NaN after.",
        onset_step=build.BAD_BATCH,
        max_steps=200,
        check_every=10,
        trainer_kwargs=_every(25),
    ),
    _case(
        "unet_denoiser_sgd_lr_40x_blows_up_to_nan",
        build.unet_sgd,
        "lr_too_high",
        proof.unet_sgd_nan,
        "NaN from an LR blow-up: the denoiser, SGD with momentum at 2.0 (meant 0.05); the gradient grows "
        "10^7x in three steps and the loss is NaN from step 3.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
    ),
    # -- single causes
    _case(
        "quantile_mlp_lr_decayed_every_step_collapses",
        build.quantile_decay,
        "lr_too_low",
        proof.quantile_collapses,
        "An LR collapsing to ~0 early: a 0.9-quantile (pinball) regression, Adam under 0.95**(step / "
        "decay_steps) with decay_steps=1 (meant 1000); the LR is 100x down by step 90, the loss frozen.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=_every(25),
    ),
    _case(
        "deep_sets_sum_pool_over_100_points_saturates_tanh",
        build.sets_sum_tanh,
        "saturated_activations",
        proof.sets_sum_saturates,
        "Saturated units from the architecture: a tanh deep-sets model over sets of 100 points pooled by a "
        "sum (meant the mean); the head's tanh units sit at +-1 from step 0.",
        also_allowed=("vanishing_gradients",),
    ),
    _case(
        "quantile_deep_relu_every_layer_scaled_down_vanishes",
        build.quantile_deep_scaled,
        "vanishing_gradients",
        proof.quantile_deep_vanishes,
        "Vanishing gradients from initialisation: a 9-layer ReLU MLP whose every layer was scaled to 0.1 "
        "of He's std (Fixup's down-scaling applied to all layers), SGD; the first layer barely moves.",
        also_allowed=STUCK,
    ),
    _case(
        "gcn_raw_adjacency_explodes",
        build.gcn_raw_adjacency,
        "exploding_gradients",
        proof.gcn_explodes,
        "Exploding gradients from the architecture: a three-layer graph network propagating over the raw "
        "A + I (meant D^-1/2 (A + I) D^-1/2); each layer multiplies the signal by the degree (~17).",
    ),
    _case(
        "deep_sets_loader_workers_restart_every_epoch_stall",
        build.sets_worker_startup,
        "data_stall",
        proof.workers_stall,
        "A loader of 8 batches an epoch whose two workers start over every epoch (persistent_workers "
        "off) and each spend 0.5 s loading a vocabulary: the loop waits for data most of the time.",
        max_steps=120,
        check_every=12,
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "multilabel_mlp_adam_lr_100x_from_step_100_kills_units",
    "multilabel_wide_mlp_48_images_overfits",
    "sepconv_groupnorm_lr_grows_2pct_a_step_diverges",
    "multilabel_per_batch_pos_weight_batch_without_positives_nan",
    "quantile_mlp_lr_decayed_every_step_collapses",
)

HEALTHY_CASES: list[FieldCase] = [
    _case(
        "sepconv_groupnorm_150_step_warmup_nesterov",
        build.sepconv_long_warmup,
        None,
        proof.sepconv_warmup_trains,
        "SGD Nesterov 0.1 with a 150-step linear warm-up, then cosine: the loss sits near ln 10 at first.",
    ),
    _case(
        "gcn_strong_communities_converged_idles",
        build.gcn_converged,
        None,
        proof.gcn_converged_idles,
        "A graph network on clear communities: solved early, then idles near its floor.",
    ),
    _case(
        "multilabel_mlp_30pct_attribute_bits_flipped",
        build.multilabel_label_noise,
        None,
        proof.multilabel_noise_trains,
        "30% of the attribute bits flipped at random: the loss floors high, at the noise's level.",
    ),
    _case(
        "quantile_mlp_batch_four",
        build.quantile_batch4,
        None,
        proof.quantile_batch4_trains,
        "Quantile regression in batches of 4: a noisy loss that still falls.",
        trainer_kwargs=_every(100),
    ),
    _case(
        "deep_sets_curriculum_tight_then_loose_sets",
        build.sets_curriculum,
        None,
        proof.sets_curriculum_trains,
        "A two-phase curriculum: the loss jumps when loose sets arrive (step 150), then falls.",
    ),
    _case(
        "recommender_sum_reduced_mse",
        build.recommender_sum_loss,
        None,
        proof.recommender_sum_trains,
        "Squared error summed over batches of 64: a loss in the tens, Adam trains normally.",
    ),
    _case(
        "unet_denoiser_lr_divided_10x_at_150",
        build.unet_step_decay,
        None,
        proof.unet_step_decay_trains,
        "The denoiser with its LR divided by 10 at step 150 (MultiStepLR).",
    ),
    _case(
        "multilabel_mlp_clipped_every_step",
        build.multilabel_clipped,
        None,
        proof.multilabel_clipped_trains,
        "Gradients clipped to norm 0.01: every step is clipped, Adam trains normally.",
        trainer_kwargs={"gradient_clip_val": 0.01},
    ),
    _case(
        "gcn_frozen_random_propagation_head_only",
        build.gcn_frozen_propagation,
        None,
        proof.gcn_frozen_trains,
        "Random, frozen propagation layers and a trained head: real progress on a few parameters.",
    ),
    _case(
        "quantile_mlp_cyclic_lr_in_range",
        build.quantile_cyclic,
        None,
        proof.quantile_cyclic_trains,
        "A triangular CyclicLR between 1e-4 and 3e-3 with Adam: the LR swings, the loss falls.",
        trainer_kwargs=_every(50),
    ),
    _case(
        "deep_sets_median_loss_plus_constant_25",
        build.sets_offset_loss,
        None,
        proof.sets_offset_trains,
        "A median (pinball) loss carrying a constant 25: the loss falls by <1% of its value, yet trains.",
    ),
    _case(
        "recommender_adagrad_slow_but_steady",
        build.recommender_adagrad_slow,
        None,
        proof.recommender_slow_trains,
        "Adagrad at 0.02: the loss falls slowly and steadily for the whole run.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
