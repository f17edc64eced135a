"""Zoo 17's runs: new tasks (1-D conv keyword spotting on generated audio-like clips, restoring 8x8 digits by
denoising or 2x super-resolution with a small residual conv net, a small transformer encoder that counts
tokens), new optimizers and schedules (RAdam, SGD with Nesterov momentum 0.99, AdamW with amsgrad;
CosineAnnealingWarmRestarts, ExponentialLR, MultiStepLR), bf16-mixed precision on the CPU and manual
optimisation, new bugs (conv biases initialised to -3, silent clips peak-normalised to 0/0, a zero-mean
unit-norm filter init on a 1x1 layer, the linear LR scaling rule without its /256, a clip generator re-seeded
every epoch, an ExponentialLR growth for a decay, 16-bit PCM into tanh, a Python FIR filter in
``__getitem__``, a merged image source left unscaled, a per-epoch decay stepped per batch, the optimizer
handed the EMA copy), blind pairs, runs a repair could save, healthy look-alikes.

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
from galleries.health.zoo17 import _builds as build
from galleries.health.zoo17 import _proofs as proof

NAN = ("nonfinite_activations",)

PROBLEM_CASES: list[FieldCase] = [
    # -- blind set: the loss stuck at its starting level from step 0, four different causes
    case(
        "kws_conv_biases_initialised_to_minus_3",
        build.kws_dead_bias,
        "dead_units",
        proof.kws_dead_stuck,
        "Dead ReLUs from initialisation: a 1-D conv keyword spotter, RAdam 3e-3, whose conv biases an init "
        "helper (written for another model's gates) sets to -3; every ReLU is off on every clip, the conv "
        "weights get exactly zero gradient and the loss stays at ln 5.",
        also_allowed=STUCK,
    ),
    case(
        "kws_sgd_nesterov_lr_1e_6",
        build.kws_sgd_low,
        "lr_too_low",
        proof.kws_sgd_low_stuck,
        "An LR 3000x too low: the keyword spotter with SGD, Nesterov momentum 0.99, at 1e-6 (meant 3e-3); "
        "gradients reach every weight but the updates are ~1e-6 of the weights and the loss stays at its "
        "start.",
        also_allowed=STUCK,
    ),
    case(
        "kws_eight_sigmoid_conv_layers",
        build.kws_deep_sigmoid,
        "vanishing_gradients",
        proof.kws_sigmoid_vanishes,
        "Vanishing gradients from the architecture: the keyword spotter built eight conv layers deep with "
        "sigmoid activations (meant ReLU), AdamW+amsgrad 1e-3; the first layer's gradient is ~1e-5 of the "
        "last one's and the loss stays at ln 5.",
        also_allowed=STUCK,
    ),
    case(
        "counting_optimizer_given_the_ema_copy",
        build.counting_ema_optimizer,
        "frozen_parameters",
        proof.counting_ema_frozen,
        "A frozen network from a wiring bug: a transformer encoder counting tokens, validated with an EMA of "
        "its weights; configure_optimizers hands AdamW+amsgrad self.ema.parameters() (the copy, which gets "
        "no gradients) instead of self.net's, so the network gets gradients and never changes.",
        also_allowed=STUCK,
        trainer_kwargs=every(20),
    ),
    # -- blind set: NaN, three different causes
    case(
        "kws_silent_clips_peak_normalised_to_nan",
        build.kws_silent_clips,
        "inputs",
        proof.kws_silent_nan,
        "NaN from broken inputs: keyword clips read in recording order, AdamW+amsgrad 3e-3; two clips are "
        "recorder dropouts (all zeros) and the loader peak-normalises x / max|x|, so they are 0/0 = NaN; "
        "batch 45's loss is NaN and its update makes every weight NaN.",
        onset_step=proof.SILENT_ONSET,
        also_allowed=NAN,
        trainer_kwargs=every(15),
    ),
    case(
        "restore_unit_norm_filter_init_on_1x1_skip",
        build.restore_unit_filters,
        "nonfinite_weights",
        proof.restore_unit_filters_nan,
        "NaN weights from initialisation: a residual conv net denoising 8x8 digits, RAdam 1e-3, whose init "
        "makes every conv filter zero-mean and unit-norm; the 1x1 skip projection's filters hold one weight "
        "each, so w - mean(w) = 0 and 0/0 = NaN: the loss is NaN from step 0 on finite inputs.",
        also_allowed=NAN,
    ),
    case(
        "restore_linear_scaling_rule_without_per_256",
        build.restore_scaled_lr,
        "lr_too_high",
        proof.restore_scaled_lr_nan,
        "NaN from an LR 256x too high: 2x super-resolution of digits, SGD momentum 0.9, the linear scaling "
        "rule written base_lr * batch_size = 3.2 (meant * batch_size / 256 = 0.0125); the loss jumps 10000x "
        "at step 1 and is non-finite by step 4.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
    ),
    # -- blind pair: the validation loss rising from its best, two different causes
    case(
        "kws_same_128_clips_every_epoch",
        build.kws_same_clips_every_epoch,
        "overfitting",
        proof.kws_overfits,
        "Overfitting: the keyword spotter, AdamW+amsgrad 3e-3, trained on a clip generator meant to draw "
        "fresh clips every epoch but re-seeded with a constant, so every epoch is the same 128 clips; the "
        "training loss falls to ~0 while the validation loss climbs from its best.",
        onset_step=proof.OVERFIT_ONSET,
        trainer_kwargs={"check_val_every_n_epoch": 2},
    ),
    case(
        "kws_exponential_lr_gamma_1_01",
        build.kws_exponential_up,
        "lr_too_high",
        proof.kws_exponential_up_diverges,
        "An LR growing without bound: the keyword spotter, AdamW+amsgrad 3e-3 under "
        "ExponentialLR(gamma=1.01) stepped per step (meant 0.99: a decay written as a growth); past ~0.02 "
        "(step ~180) the loss breaks away and the validation loss ends >10x its best.",
        onset_step=proof.GROWTH_ONSET,
        also_allowed=("exploding_gradients", "dead_units"),
    ),
    # -- single causes
    case(
        "kws_int16_pcm_into_tanh",
        build.kws_int16_tanh,
        "saturated_activations",
        proof.kws_tanh_saturates,
        "Saturated tanh units from unscaled inputs: keyword clips stored as 16-bit PCM fed raw (the / 32768 "
        "left out, amplitudes ~1e4) into a tanh conv net, AdamW+amsgrad 1e-3; nearly every first-layer unit "
        "sits beyond +-0.99 on every batch.",
        also_allowed=("vanishing_gradients",),
    ),
    case(
        "kws_python_fir_filter_in_getitem",
        build.kws_python_filter,
        "data_stall",
        proof.kws_python_filter_stalls,
        "A stalled input pipeline: the keyword spotter's dataset low-passes and decimates each 2x-rate clip "
        "in nested Python loops inside __getitem__ (meant: once, vectorised), so each step waits several "
        "times longer for its batch than it computes.",
        max_steps=80,
        check_every=10,
    ),
    case(
        "restore_merged_source_left_in_0_16_units",
        build.restore_mixed_sources,
        "inputs",
        proof.restore_mixed_outliers,
        "Broken inputs: 2x super-resolution of digits, AdamW+amsgrad 1e-3, on images merged from two sources "
        "with the / 16 scaling applied to the first only; the 8 images left in 0..16 units make every batch "
        "holding one an outlier with a ~10x loss.",
        onset_step=proof.OUTLIER_ONSET,
        also_allowed=("outlier_batches",),
    ),
    case(
        "counting_manual_per_epoch_decay_stepped_per_batch",
        build.counting_manual_decay,
        "lr_too_low",
        proof.counting_decay_collapses,
        "An LR collapsing early: the counting transformer under manual optimisation, AdamW+amsgrad 2e-3; "
        "ExponentialLR(gamma=0.9), tuned per epoch (63 batches), is stepped in training_step after every "
        "optimizer step: the LR is 100x down at step 44 and the loss frozen far above the fixed run's.",
        onset_step=proof.DECAY_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(20),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "kws_sgd_nesterov_lr_1e_6",
    "kws_silent_clips_peak_normalised_to_nan",
    "kws_same_128_clips_every_epoch",
    "kws_exponential_lr_gamma_1_01",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "kws_30pct_noisy_training_labels",
        build.kws_noisy_labels,
        None,
        proof.kws_noisy_labels_trains,
        "30% of the training keywords relabelled at random (crowd-sourced labels): the training loss floors "
        "high while the validation loss on checked labels falls.",
    ),
    case(
        "kws_sgd_nesterov_099_slow_start",
        build.kws_sgd_nesterov,
        None,
        proof.kws_sgd_slow_start_trains,
        "SGD with Nesterov momentum 0.99 at 3e-3: the loss is flat for its first ~60 steps, then falls "
        "steadily.",
    ),
    case(
        "kws_manual_two_batch_accumulation_clipped",
        build.kws_manual_accumulate,
        None,
        proof.kws_manual_accumulate_trains,
        "Manual optimisation, RAdam 3e-3: two batches accumulated per optimizer step and the gradient norm "
        "clipped to 1 (most steps clipped); it trains.",
        max_steps=150,
    ),
    case(
        "counting_bf16_mixed_on_cpu",
        build.counting_bf16,
        None,
        proof.counting_bf16_trains,
        'The counting transformer trained with precision="bf16-mixed" on the CPU, AdamW+amsgrad 2e-3, '
        "gradients clipped to 1: a plateau near 1.75 for ~80 steps, then it learns.",
        trainer_kwargs={**every(20), "precision": "bf16-mixed", "gradient_clip_val": 1.0},
    ),
    case(
        "counting_onehot_embedding_frozen_on_purpose",
        build.counting_onehot_frozen,
        None,
        proof.counting_onehot_trains,
        "The counting transformer with its token embedding a fixed one-hot code, frozen on purpose: the "
        "embedding never changes, the rest learns.",
        trainer_kwargs={**every(20), "gradient_clip_val": 1.0},
    ),
    case(
        "counting_multistep_two_decays",
        build.counting_step_decay,
        None,
        proof.counting_step_decay_trains,
        "The counting transformer under MultiStepLR([200, 260], gamma=0.2): the LR drops 5x twice and the "
        "loss settles after each drop.",
        trainer_kwargs={**every(20), "gradient_clip_val": 1.0},
    ),
    case(
        "restore_denoise_in_raw_pixel_units",
        build.restore_raw_units,
        None,
        proof.restore_raw_units_trains,
        "Denoising digits in their raw 0..16 units (noise std 4.8): an MSE of ~25 at first, gradients ~100, "
        "AdamW+amsgrad 3e-3 trains.",
    ),
    case(
        "restore_denoise_cosine_warm_restarts",
        build.restore_warm_restarts,
        None,
        proof.restore_warm_restarts_trains,
        "Denoising digits under CosineAnnealingWarmRestarts(T_0=50, T_mult=2): the LR jumps back to its peak "
        "at steps 50 and 150, the loss keeps falling.",
    ),
    case(
        "restore_sr_validated_on_8_images",
        build.restore_tiny_val,
        None,
        proof.restore_tiny_val_trains,
        "2x super-resolution of digits, RAdam 3e-3, validated on 8 images only (every 20 steps).",
        trainer_kwargs=every(20),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
