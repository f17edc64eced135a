"""Zoo 5's runs: new tasks (a PointNet on 3-D point clouds, a VAE, a gated mixture of experts, ordinal
regression with CORAL and cumulative-link heads, a weight-shared deep net, a hypernetwork), new optimizers
(RAdam, NAdam, Adamax, SGD with momentum 0.99, AdamW with a huge decay), blind pairs, runs a repair could
save, healthy look-alikes.

Written blind (without reading HealthMonitor's rules), each run different in task or bug from the first
four sealed zoos. Each problem run holds one bug a user could have written; ``expected`` names the cause a
careful engineer would accept (the description names the root cause), ``onset_step`` the first optimizer
step at which the problem exists (measured from the plain recording by the proofs), ``also_allowed`` only
symptoms of that same cause. :data:`REPAIRABLE` names the runs a repair callback can save in process: their
proofs measure the final and the best validation loss.
"""

from __future__ import annotations

from typing import Any

from galleries.health.field._case import FieldCase
from galleries.health.zoo5 import _builds as build
from galleries.health.zoo5 import _proofs as proof

LR_BLOWUP = ("exploding_gradients", "nonfinite_activations")
STUCK = ("not_learning", "loss_plateau")


def _case(name: str, build: Any, expected: str | None, proof: Any, description: str, **kw: Any) -> FieldCase:
    """A 300-step run from step 0 unless told otherwise."""
    kw.setdefault("max_steps", 300)
    return FieldCase(name=name, build=build, expected=expected, onset_step=kw.pop("onset_step", 0),
                     proof=proof, description=description, **kw)  # fmt: skip


def _every(steps: int) -> dict[str, Any]:
    return {"val_check_interval": steps}


PROBLEM_CASES: list[FieldCase] = [
    # -- blind quartet: the loss stays at the trivial level (the levels' / classes' prior entropy)
    _case(
        "ordinal_coral_radam_lr_3000x_too_low",
        build.ordinal_radam,
        "lr_too_low",
        proof.ordinal_lr_stuck,
        "Trivial loss from an LR 3000x too low: ordinal regression (CORAL head, five levels), RAdam at 1e-6 "
        "(meant 3e-3); the loss stays at the levels' prior entropy.",
        also_allowed=STUCK,
    ),
    _case(
        "ordinal_coral_adamw_weight_decay_100_keeps_weights_at_zero",
        build.ordinal_weight_decay,
        "not_learning",
        proof.ordinal_decay_stuck,
        "Trivial loss from a weight decay 1000x too strong: AdamW at 1e-2 with weight_decay=100 on the "
        "weight matrices (meant 0.1), so lr * wd = 1 wipes every weight each step; only the thresholds learn"
        " the prior.",
        also_allowed=("loss_plateau", "vanishing_gradients"),
    ),
    _case(
        "pointnet_max_pool_over_batch_not_points",
        build.points_pool_batch,
        "not_learning",
        proof.points_pool_stuck,
        "Trivial loss from a pooling axis bug: a PointNet max-pools over dims (0, 1), the batch too (meant "
        "dim 1, the points), so every cloud of a batch gets the same feature; the CE stays at ln 4.",
        also_allowed=("loss_plateau",),
    ),
    _case(
        "vae_encoder_lr_mult_integer_division_zero",
        build.vae_encoder_lr_mult,
        "frozen_parameters",
        proof.vae_encoder_frozen,
        "A frozen encoder from a typo: a digits VAE's encoder group runs at lr * (1 // 10) = 0 (meant 1 / "
        "10); the encoder gets gradients yet never changes, only the decoder learns.",
    ),
    # -- pair: gradient spikes from outlier rows / from an LR too high
    _case(
        "moe_two_rows_logged_in_millivolts",
        build.moe_outliers,
        "outlier_batches",
        proof.moe_outlier_spikes,
        "Spikes from outlier rows: a gated mixture of experts read in order; two rows of a second sensor "
        "kept millivolts (x1000); their batches (15, 55 of each 94) carry gradients >1000x the median.",
        onset_step=proof.MOE_OUTLIER_ONSET,
    ),
    _case(
        "moe_nadam_lr_250x_spikes",
        build.moe_nadam,
        "lr_too_high",
        proof.moe_nadam_spikes,
        "Spikes from an LR 250x too high on ordinary rows: the same mixture (no outliers), NAdam at 0.5 "
        "(meant 2e-3); gradient bursts >20x the fixed run's median early and late, validation >3x worse.",
        also_allowed=("exploding_gradients",),
    ),
    # -- pair: dead ReLU units from initialisation / from a mid-run LR jump
    _case(
        "pointnet_point_layer_bias_init_minus_2_dead",
        build.points_bias_init,
        "dead_units",
        proof.points_init_dead,
        "Dead units from initialisation: a PointNet whose first point layer's biases start at -2 (as a ReLU "
        "threshold) for clouds within radius ~1.3; every point unit is dead from step 0, CE at ln 4.",
        also_allowed=("initialisation", "not_learning"),
    ),
    _case(
        "pointnet_sgd_finetune_stage_lr_30x_from_step_100",
        build.points_lr_jump,
        "lr_too_high",
        proof.points_jump_kills_units,
        "An LR 100x too high from mid-run: a PointNet, SGD momentum 0.9 at 0.02; at step 100 a fine-tuning "
        "stage multiplies the LR by 30 (meant 0.3); the point units die and validation doubles.",
        onset_step=build.JUMP_STEP,
        also_allowed=("dead_units", "not_learning"),
        trainer_kwargs=_every(20),
    ),
    # -- pair: validation loss rising from overfitting / from divergence (both repairable)
    _case(
        "ordinal_wide_mlp_64_rows_overfits",
        build.ordinal_few_rows,
        "overfitting",
        proof.ordinal_overfits,
        "Overfitting: a width-256 two-layer ordinal MLP on 64 rows (a debug subset left in), validated every"
        " epoch (2 steps); the training loss keeps falling while the validation loss climbs to ~1.8x its "
        "best.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    _case(
        "moe_sgd_momentum_099_diverges",
        build.moe_momentum,
        "lr_too_high",
        proof.moe_momentum_diverges,
        "Divergence after healthy steps from a step 10x too large: the mixture, SGD at 0.05 with momentum "
        "0.99 (meant 0.9: an effective LR 10x higher once the momentum builds up); the loss falls, then "
        "rises for good and turns NaN.",
        onset_step=proof.MOMENTUM_ONSET,
        also_allowed=LR_BLOWUP,
        trainer_kwargs=_every(20),
    ),
    # -- triple: NaN from one bad batch / an LR blow-up / a log of zero
    _case(
        "vae_one_image_in_16bit_counts_nan",
        build.vae_bad_image,
        "nonfinite_activations",
        proof.vae_bad_image_nan,
        "One non-finite update from one bad batch: a digits VAE read in order; one image was stored as "
        "16-bit counts (0-65535), its logvar overflows exp() in batch 40 and every weight is NaN after.",
        onset_step=proof.BAD_BATCH,
        trainer_kwargs=_every(10),
    ),
    _case(
        "shared_depth_net_sgd_lr_100x_nan",
        build.shared_sgd,
        "lr_too_high",
        proof.shared_sgd_nan,
        "NaN from an LR blow-up: a digits net whose one block is applied four times (weights shared across "
        "depth), SGD momentum 0.9 at 5.0 (meant 0.05); the loss is NaN within five steps.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
    ),
    _case(
        "ordinal_cumulative_link_thresholds_init_zero_log_of_zero",
        build.ordinal_zero_thresholds,
        "nonfinite_activations",
        proof.ordinal_zero_nan,
        "NaN from a log of zero: a cumulative-link ordinal NLL -log(sigmoid(b_y - f) - sigmoid(b_{y-1} - f))"
        " with the thresholds initialised to zeros (meant sorted); the middle levels' probability is exactly"
        " 0.",
        also_allowed=("initialisation",),
        max_steps=100,
        check_every=10,
    ),
    # -- single causes
    _case(
        "moe_cosine_sized_for_30_steps_collapses",
        build.moe_collapse,
        "lr_too_low",
        proof.moe_collapses,
        "An LR collapsing to ~0 early: the mixture, Adam 3e-3 under a cosine to 0 sized for 30 steps (meant "
        "30 epochs); the LR is 100x down by step 29 and 0 from step 30, the loss frozen.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=_every(25),
    ),
    _case(
        "shared_depth_net_default_init_12_applications_vanishes",
        build.shared_default_init,
        "vanishing_gradients",
        proof.shared_vanishes,
        "Vanishing gradients from initialisation: one block with PyTorch's default init (std 1/sqrt(3 "
        "fan_in), a gain ~0.4 after ReLU) applied 12 times; the stem barely moves, the CE stays at ln 10.",
        also_allowed=("initialisation", *STUCK),
    ),
    _case(
        "moe_sigmoid_gates_bias_init_8_saturate",
        build.moe_sigmoid_gates,
        "saturated_activations",
        proof.moe_gates_saturate,
        'Saturated gates from initialisation: a mixture with sigmoid gates whose biases start at 8 ("every '
        'expert on at first"); every gate sits at >0.99 and the gate barely learns to route.',
        also_allowed=("initialisation", "vanishing_gradients"),
    ),
    _case(
        "hypernet_generated_weights_not_rescaled_explode",
        build.hyper_unscaled,
        "exploding_gradients",
        proof.hyper_explodes,
        "Exploding gradients from initialisation: a hypernetwork generates six 64x64 layers with std ~0.6 "
        "(He's is ~0.18; the rescale was left out), a gain ~3.4 a layer; first gradients >300x the fixed "
        "run's.",
        also_allowed=("initialisation",),
    ),
    _case(
        "pointnet_clouds_resampled_on_every_read_stall",
        build.points_slow_reads,
        "data_stall",
        proof.points_stall,
        "A loader that re-samples every cloud from its mesh on each read (2 ms a cloud, 32 a batch, no "
        "cache, no workers): the loop waits for data most of the time.",
        max_steps=120,
        check_every=12,
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "pointnet_sgd_finetune_stage_lr_30x_from_step_100",
    "ordinal_wide_mlp_64_rows_overfits",
    "moe_sgd_momentum_099_diverges",
    "vae_one_image_in_16bit_counts_nan",
    "moe_cosine_sized_for_30_steps_collapses",
)

HEALTHY_CASES: list[FieldCase] = [
    _case(
        "vae_kl_weight_annealed_over_150_steps",
        build.vae_kl_warmup,
        None,
        proof.vae_kl_warmup_trains,
        "A VAE with its KL weight ramped 0 -> 1 over 150 steps: the training loss stalls as the KL arrives.",
    ),
    _case(
        "pointnet_clean_clouds_converged_idles",
        build.points_easy_converged,
        None,
        proof.points_converged_idles,
        "A PointNet on clean clouds: solved early, then idles near its floor.",
    ),
    _case(
        "ordinal_40pct_levels_redrawn",
        build.ordinal_label_noise,
        None,
        proof.ordinal_noise_trains,
        "40% of the ordinal levels redrawn at random: the loss floors high, close to the prior.",
    ),
    _case(
        "ordinal_nadam_batch_four",
        build.ordinal_batch4,
        None,
        proof.ordinal_batch4_trains,
        "Ordinal regression in batches of 4 with NAdam: a noisy loss that still falls.",
        trainer_kwargs=_every(100),
    ),
    _case(
        "pointnet_curriculum_clean_then_jittered",
        build.points_curriculum,
        None,
        proof.points_curriculum_trains,
        "A curriculum: the loss jumps when jittered clouds arrive (step 150), then falls.",
    ),
    _case(
        "vae_elbo_summed_over_batch",
        build.vae_batch_sum,
        None,
        proof.vae_sum_trains,
        "A VAE's negative ELBO summed over batches of 64: a loss in the thousands, Adam 1e-4 trains "
        "steadily.",
        trainer_kwargs=_every(20),
    ),
    _case(
        "moe_lr_divided_10x_at_150",
        build.moe_step_decay,
        None,
        proof.moe_step_decay_trains,
        "The mixture with its LR divided by 10 at step 150 (MultiStepLR).",
    ),
    _case(
        "hypernet_adamax_clipped_every_step",
        build.hyper_clipped,
        None,
        proof.hyper_clipped_trains,
        "A (rescaled) hypernetwork with Adamax, gradients clipped to norm 0.05: every step clips, it trains.",
        trainer_kwargs={"gradient_clip_val": 0.05},
    ),
    _case(
        "pointnet_frozen_random_point_mlp_head_only",
        build.points_frozen_point_mlp,
        None,
        proof.points_frozen_trains,
        "A PointNet whose per-point MLP keeps its random weights on purpose: only the head trains, and well.",
    ),
    _case(
        "moe_cyclic_lr_in_range",
        build.moe_cyclic,
        None,
        proof.moe_cyclic_trains,
        "A triangular CyclicLR between 1e-4 and 4e-3 with Adam: the LR swings 40x, the loss falls.",
        trainer_kwargs=_every(50),
    ),
    _case(
        "ordinal_loss_plus_log_120",
        build.ordinal_offset,
        None,
        proof.ordinal_offset_trains,
        "A CORAL loss carrying a constant log(5!) ~ 4.79: the loss falls by a few % of its value, yet "
        "trains.",
    ),
    _case(
        "shared_depth_net_sgd_momentum_099_small_lr",
        build.shared_momentum_099,
        None,
        proof.shared_momentum_trains,
        "SGD at 2e-3 with momentum 0.99 on the weight-shared net: the loss oscillates step to step, and "
        "falls.",
    ),
    _case(
        "ordinal_adamw_weight_decay_005",
        build.ordinal_moderate_decay,
        None,
        proof.ordinal_decay_trains,
        "AdamW at 1e-2 with weight decay 0.05 on the weight matrices: a sound decay, the loss falls.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
