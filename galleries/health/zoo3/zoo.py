"""Zoo 3's runs: new tasks (1-D convolutions, LSTMs, count and heteroscedastic regression, tf-idf bags,
siamese pairs, residual MLPs, a patch transformer), blind pairs, runs a repair could save, healthy
look-alikes.

Written blind (without reading HealthMonitor's rules), each run different in task or bug from the first two
sealed zoos. Each problem run holds one bug a user could have written; ``expected`` names the cause a careful
engineer would accept (the description names the root cause), ``onset_step`` the first optimizer step at
which the problem exists (measured from the plain recording by the proofs), ``also_allowed`` only symptoms
of that same cause. :data:`REPAIRABLE` names the runs a repair callback can save in process: their proofs
measure the final and the best validation loss.
"""

from __future__ import annotations

from galleries.health.field._case import FieldCase
from galleries.health.sealed_zoo import LR_BLOWUP
from galleries.health.sealed_zoo import case as _case
from galleries.health.sealed_zoo import every as _every
from galleries.health.zoo3 import _builds as build
from galleries.health.zoo3 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- pair 1: the loss stays at the prior (ln 3 / the constant rate's NLL) for three causes
    _case(
        "waveform_cnn_adam_lr_1000x_too_low",
        build.conv_lr_typo,
        "lr_too_low",
        proof.conv_lr_typo_stuck,
        "Trivial loss from an LR 1000x too low: a 1-D CNN on waveforms, Adam at 1e-6 (meant 1e-3); the "
        "loss stays at ln 3.",
        also_allowed=("not_learning", "loss_plateau"),
    ),
    _case(
        "waveform_cnn_frozen_all_but_head_bias",
        build.conv_frozen,
        "not_learning",
        proof.conv_frozen_stuck,
        "Trivial loss from a model frozen by mistake: requires_grad is off for "
        "every parameter but the head's bias (a freeze loop that matched too much); the loss stays at ln 3.",
        also_allowed=("loss_plateau",),
    ),
    _case(
        "poisson_counts_targets_sorted_apart",
        build.counts_shuffled,
        "not_learning",
        proof.counts_shuffled_learn_nothing,
        "Trivial loss from targets that do not belong to their "
        "inputs: a Poisson count regression whose counts were re-sorted apart from the features; the "
        "validation NLL stays at the constant rate's.",
    ),
    # -- pair 2: validation loss rising from overfitting / from divergence (both repairable)
    _case(
        "lstm_tokens_32_sequences_overfits",
        build.lstm_few_rows,
        "overfitting",
        proof.lstm_overfits,
        "Overfitting: a width-128 LSTM on 32 token sequences (a debug subset left in), validated every "
        "2 steps; training loss to ~1e-4 while the validation loss climbs past 1.6x its best.",
        onset_step=proof.OVERFIT_ONSET,
        max_steps=200,
        check_every=10,
    ),
    _case(
        "hetero_regression_cyclic_lr_peak_40x_diverges",
        build.hetero_cyclic,
        "lr_too_high",
        proof.cyclic_diverges,
        "Divergence after healthy steps from an LR too high: a triangular CyclicLR "
        "climbing to 2.0 (meant 0.05); the loss falls, then rises with the LR, validation up 10x, then NaN.",
        onset_step=proof.CYCLIC_ONSET,
        also_allowed=LR_BLOWUP,
        trainer_kwargs=_every(20),
    ),
    _case(
        "residual_layernorm_mlp_lr_multiplied_20x_at_step_100",
        build.residual_lr_jump,
        "lr_too_high",
        proof.lr_jump_diverges,
        "An LR 20x too high from mid-run: a residual LayerNorm MLP, SGD 0.01 whose "
        "schedule multiplies the LR by 20 at step 100 (meant to divide); it diverges to NaN within 5 steps.",
        onset_step=build.JUMP_STEP,
        also_allowed=LR_BLOWUP,
        trainer_kwargs=_every(20),
    ),
    # -- pair 3: saturated tanh units from initialisation / from an LR far too high
    _case(
        "siamese_tanh_encoder_unit_normal_init_saturates",
        build.siamese_unit_init,
        "saturated_activations",
        proof.siamese_init_saturates,
        "Saturated units from initialisation: a "
        "siamese digit-pair tanh encoder whose hidden layers were drawn from normal_(0, 1); most hidden "
        "units sit at +-1 from step 0.",
        also_allowed=("vanishing_gradients",),
    ),
    _case(
        "siamese_tanh_encoder_sgd_lr_100x_saturates",
        build.siamese_lr,
        "lr_too_high",
        proof.siamese_lr_saturates,
        "Saturated units from an LR 100x too high: the same siamese encoder, "
        "default init, SGD at 2.0 (meant 0.02); within 5 steps the hidden tanh units sit at +-1 and "
        "the gradient is ~0.",
        onset_step=proof.SATURATE_ONSET,
        also_allowed=("saturated_activations", "vanishing_gradients", "not_learning"),
    ),
    # -- pair 4: gradient spikes from outlier rows / from an unstable LR
    _case(
        "tfidf_bag_sentinel_idf_weight_spikes",
        build.tfidf_outliers,
        "outlier_batches",
        proof.tfidf_spikes,
        "Spikes from outlier rows: a tf-idf EmbeddingBag classifier read in order; two "
        "documents hold a token missing from the idf snapshot, weight 5000 (others ~1); their batches "
        "(21, 40) carry the gradient spikes.",
        onset_step=proof.OUTLIER_ONSET,
    ),
    _case(
        "hetero_regression_plain_sgd_lr_16x_spikes",
        build.hetero_sgd,
        "lr_too_high",
        proof.hetero_sgd_spikes,
        "Spikes from an unstable LR on ordinary batches: a heteroscedastic "
        "regression MLP, plain SGD at 0.8 (meant 0.05): gradient spikes >5x the fixed run's median, "
        "validation 2x worse.",
        also_allowed=("exploding_gradients",),
    ),
    # -- single causes
    _case(
        "poisson_per_event_loss_quiet_batch_nan",
        build.counts_per_event,
        "nonfinite_activations",
        proof.per_event_nan,
        "One non-finite update from a zero divisor: a Poisson loss hand-normalised "
        "by the batch's event count; the batch of a quiet day (step 100) has none, the loss is inf, every "
        "weight NaN after.",
        onset_step=build.QUIET_BATCH,
        max_steps=200,
        check_every=10,
        trainer_kwargs=_every(25),
    ),
    _case(
        "deep_tanh_mlp_normal_002_init_vanishes",
        build.deep_tanh,
        "vanishing_gradients",
        proof.deep_tanh_vanishes,
        "Vanishing gradients from initialisation: a 10-layer tanh MLP drawn from "
        "normal_(0, 0.02) (a transformer recipe's init); the first layer's updates are <1e-4 of the last's, "
        "the loss stays at ln 4.",
        also_allowed=("not_learning", "loss_plateau"),
    ),
    _case(
        "residual_mlp_no_norm_gain_3_explodes",
        build.residual_no_norm,
        "exploding_gradients",
        proof.residual_explodes,
        "Exploding gradients from initialisation: a 10-block residual MLP without "
        "normalisation, block weights x3; the gradient is >1e4x the fixed twin's at step 0.",
        max_steps=200,
    ),
    _case(
        "waveform_cnn_sampler_rereads_index_stall",
        build.conv_sampler_stall,
        "data_stall",
        proof.sampler_stalls,
        "A batch sampler that re-reads the length index from storage (~60 ms) for "
        "every batch, in the main process: the loop waits for data most of the time.",
        max_steps=120,
        check_every=12,
    ),
    _case(
        "hetero_regression_steplr_stepped_per_batch_collapses",
        build.hetero_steplr,
        "lr_too_low",
        proof.steplr_collapses,
        "An LR collapsing to ~0 early: StepLR(step_size=20, gamma=0.1) meant per "
        "epoch but stepped per batch; the LR is 100x down by step 40, 1e-10 by 200, the loss frozen high.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=_every(25),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "lstm_tokens_32_sequences_overfits",
    "hetero_regression_cyclic_lr_peak_40x_diverges",
    "residual_layernorm_mlp_lr_multiplied_20x_at_step_100",
    "poisson_per_event_loss_quiet_batch_nan",
    "hetero_regression_steplr_stepped_per_batch_collapses",
)

HEALTHY_CASES: list[FieldCase] = [
    _case(
        "waveform_cnn_150_step_warmup_cosine",
        build.conv_long_warmup,
        None,
        proof.warmup_trains,
        "AdamW with a 150-step linear warm-up, then cosine: the loss sits near ln 3 for ~50 steps.",
    ),
    _case(
        "waveform_cnn_clipped_every_step",
        build.conv_clipped,
        None,
        proof.clipped_trains,
        "Gradients clipped to norm 0.02: every step is clipped, Adam trains normally.",
        trainer_kwargs={"gradient_clip_val": 0.02},
    ),
    _case(
        "poisson_counts_sum_reduction",
        build.counts_sum,
        None,
        proof.counts_sum_trains,
        "Poisson NLL summed over the batch of 64: a loss in the tens, falling below zero (no Stirling term).",
    ),
    _case(
        "lstm_tokens_40pct_labels_redrawn",
        build.lstm_label_noise,
        None,
        proof.label_noise_trains,
        "40% of the labels redrawn at random: the loss floors high, at the noise's level.",
    ),
    _case(
        "batchnorm_mlp_batch_four",
        build.batchnorm_batch4,
        None,
        proof.batchnorm_trains,
        "BatchNorm with batches of 4: noisy batch statistics and a noisy loss; validation falls.",
        trainer_kwargs=_every(100),
    ),
    _case(
        "waveform_curriculum_clean_then_noisy",
        build.conv_curriculum,
        None,
        proof.curriculum_trains,
        "A two-phase curriculum: the loss jumps >2x when the noisy waveforms arrive (step 150), then falls.",
    ),
    _case(
        "hetero_regression_gaussian_nll_negative",
        build.hetero_gaussian_nll,
        None,
        proof.gaussian_nll_trains,
        "Gaussian NLL with a learnt variance: the loss falls through zero.",
    ),
    _case(
        "patch_vit_lr_divided_10x_at_150",
        build.vit_step_decay,
        None,
        proof.step_decay_trains,
        "A ViT-like patch model on digits, the LR divided by 10 at step 150 (MultiStepLR).",
    ),
    _case(
        "tfidf_bag_frozen_embeddings_head_only",
        build.tfidf_frozen_embeddings,
        None,
        proof.frozen_embeddings_train,
        "A frozen embedding table, only the MLP head trains: slow but real progress.",
    ),
    _case(
        "residual_layernorm_linear_target_converged_idles",
        build.residual_converged,
        None,
        proof.converged_idles,
        "A noiseless linear target: converged by ~125 steps, then idles near its floor.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
