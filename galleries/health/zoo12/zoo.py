"""Zoo 12's runs: new tasks on audio-like signals and images (a 1-D CNN that tells four wave shapes apart,
mono and stereo takes, a fixed Gabor filter bank under a trainable 1-D CNN, a deep unnormalised residual 1-D
CNN, a small U-Net that denoises 8x8 digits), optimizers and schedules (RAdam, Adam with ``eps=0``, AdamW
with per-block LR groups, Adamax at a high LR, NAdam under a quadratic warm-up, an ``exp_range`` CyclicLR,
MultiStepLR stepped per batch), new bugs (a stereo downmix with one channel in reverse polarity, Adam's
``eps=0`` meeting a silent channel, a per-block LR table missing the U-Net's up block, a clip with NaN samples
from a failed decode, raw 16-bit counts into tanh, an ``exp_range`` gamma above 1, epoch milestones stepped
per batch, a training list left sliced, residual branches added at full scale, mu-law decoded in Python on
every read), blind pairs, runs a repair could save, healthy look-alikes.

Written blind (without reading HealthMonitor's rules), each run different in task or bug from the sealed zoos
before it. Each problem run holds one bug a user could have written; ``expected`` names the cause a careful
engineer would accept (the description names the root cause), ``onset_step`` the first optimizer step at which
the problem exists (measured from the plain recording by the proofs), ``also_allowed`` only symptoms of that
same cause. :data:`REPAIRABLE` names the runs a repair callback can save in process: their proofs measure the
final and the best validation loss.
"""

from __future__ import annotations

from galleries.health.field._case import FieldCase
from galleries.health.sealed_zoo import STUCK, case, every
from galleries.health.zoo12 import _builds as build
from galleries.health.zoo12 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair: the loss stays at ln 4 from step 0 (an LR far too low / inputs that carry no signal)
    case(
        "tones_radam_lr_1e7_sign_slip",
        build.signal_radam,
        "lr_too_low",
        proof.signal_lr_stuck,
        "Trivial loss from an LR 30000x too low: a 1-D CNN telling four wave shapes apart, RAdam at 1e-7 "
        "(meant 3e-3); the cross-entropy stays at ln 4.",
        also_allowed=STUCK,
    ),
    case(
        "tones_stereo_downmix_right_channel_reversed",
        build.signal_downmix,
        "not_learning",
        proof.downmix_stuck,
        "Trivial loss from inputs without signal: the same classifier fed the mono downmix (L + R) / 2 of "
        "stereo takes whose right channel was wired in reverse polarity, so the wave cancels and only noise "
        "is left; Adam 3e-3 is sound, the cross-entropy stays at ln 4.",
        also_allowed=("loss_plateau",),
    ),
    # -- blind pair: the loss turns NaN (one clip's NaN samples / an update that divides 0 by 0)
    case(
        "tones_one_clip_nan_samples_from_failed_decode",
        build.signal_nan_clip,
        "inputs",
        proof.nan_clip,
        "A non-finite input: clips read in order, one clip's decoder failed half-way and left 12 NaN samples;"
        " batch 50's loss is NaN, its update makes every weight NaN, and every loss after is NaN.",
        onset_step=proof.NAN_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(10),
    ),
    case(
        "tones_adam_eps_zero_silent_stereo_channel",
        build.signal_eps_zero,
        "nonfinite_weights",
        proof.eps_zero_nan,
        "A non-finite update from finite data: mono takes stored as stereo (the right channel all zeros), "
        "Adam with eps=0; the silent channel's weights (and those of units dead on the first batch) get exact"
        " zero gradients, the first step divides 0 by 0, and those weights (then every loss from step 1) are "
        "NaN.",
        also_allowed=("nonfinite_activations",),
    ),
    # -- single causes
    case(
        "unet_block_lr_table_missing_up_block",
        build.unet_block_lrs,
        "frozen_parameters",
        proof.unet_up_frozen,
        "A block left out of the optimizer: a U-Net denoiser whose AdamW groups come from a per-block LR "
        "table copied from an encoder-only model (down, mid, out); the up block gets gradients on every step"
        " and never changes.",
    ),
    case(
        "tones_64_clips_smoke_test_slice_left_in",
        build.signal_few_clips,
        "overfitting",
        proof.few_clips_overfit,
        "Overfitting: a width-64 classifier on 64 noisy clips (the training list sliced for a smoke test and "
        "never restored), validated every 5 epochs (10 steps); the training loss keeps falling while the "
        "validation loss climbs ~1.4x above its best.",
        onset_step=proof.OVERFIT_ONSET,
        trainer_kwargs={"check_val_every_n_epoch": 5},
    ),
    case(
        "unet_cyclic_exp_range_gamma_above_one",
        build.unet_cyclic,
        "lr_too_high",
        proof.cyclic_diverges,
        "An LR that grows out of range mid-run: a U-Net denoiser, Adam under an exp_range CyclicLR 1e-4 to "
        "3e-3 with gamma 1.025 (meant 0.975); in the second cycle the LR passes 0.03 by step ~125, the net "
        "collapses to a constant image and stays there.",
        onset_step=proof.CYCLIC_ONSET,
        also_allowed=("dead_units", "loss_plateau", "exploding_gradients"),
        trainer_kwargs=every(20),
    ),
    case(
        "tones_multistep_epoch_milestones_stepped_per_batch",
        build.signal_multistep,
        "lr_too_low",
        proof.multistep_collapses,
        "An LR collapsing early: Adam 3e-3 under MultiStepLR with milestones 10, 20, 30 and gamma 0.1 meant "
        "for epochs but stepped every batch; the LR is 100x down from step 20, the loss frozen near ln 4.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    case(
        "tones_tanh_fed_raw_16bit_counts",
        build.signal_raw_counts,
        "saturated_activations",
        proof.raw_counts_saturate,
        "Saturated activations from unscaled inputs: a tanh 1-D CNN fed raw 16-bit sample counts (the / 32768"
        " left out); nearly every first-layer tanh sits beyond +-0.99 for the whole run and the net learns "
        "only from signs.",
    ),
    case(
        "deep_residual_cnn_branches_at_full_scale",
        build.residual_deep,
        "exploding_gradients",
        proof.residual_explodes,
        "Exploding gradients from initialisation: a 24-block residual 1-D CNN without normalisation whose "
        "He-initialised branches are added at full scale (a gain ~3 a block); logits in the thousands, first "
        "gradients >1000x the scaled twin's.",
        also_allowed=("initialisation",),
    ),
    case(
        "tones_mu_law_decoded_in_python_on_every_read",
        build.signal_mulaw_reads,
        "data_stall",
        proof.mulaw_stall,
        "A loader that decodes every clip from 4096 8-bit mu-law codes in a Python loop on each read (no "
        "cache, no workers, 32 clips a batch): the loop waits for data most of the time.",
        max_steps=120,
        check_every=12,
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "tones_one_clip_nan_samples_from_failed_decode",
    "tones_64_clips_smoke_test_slice_left_in",
    "unet_cyclic_exp_range_gamma_above_one",
    "tones_multistep_epoch_milestones_stepped_per_batch",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "unet_pixels_0_255_mse_in_thousands",
        build.unet_pixel_counts,
        None,
        proof.pixel_counts_trains,
        "A U-Net denoiser on pixels in 0-255: an MSE in the thousands and gradient norms in the thousands, "
        "Adam trains it as well as on [0, 1].",
    ),
    case(
        "tones_40pct_labels_redrawn",
        build.signal_label_noise,
        None,
        proof.label_noise_trains,
        "40% of the tone labels redrawn at random: the loss floors high, near ln 4.",
    ),
    case(
        "tones_nadam_quadratic_warmup_150",
        build.signal_long_warmup,
        None,
        proof.long_warmup_trains,
        "NAdam under a quadratic warm-up over 150 steps: nothing moves for ~50 steps, then it learns.",
    ),
    case(
        "tones_fixed_gabor_filterbank_frozen_on_purpose",
        build.filterbank_frozen,
        None,
        proof.filterbank_trains,
        "A fixed Gabor filter bank (requires_grad off on purpose) under a trainable 1-D CNN, Adamax: trains.",
    ),
    case(
        "unet_sgd_momentum_slow_steady",
        build.unet_sgd_slow,
        None,
        proof.sgd_slow_trains,
        "The U-Net denoiser with SGD 0.02, momentum 0.9: slower than Adam, every validation lower.",
    ),
    case(
        "tones_eight_clip_validation_jitters",
        build.signal_tiny_val,
        None,
        proof.tiny_val_trains,
        "Validated on 8 clips every 10 steps: the validation loss jumps up and down, and falls.",
        trainer_kwargs=every(10),
    ),
    case(
        "tones_adamax_lr_002",
        build.signal_adamax_aggressive,
        None,
        proof.adamax_trains,
        "Adamax at 0.02, ten times its usual LR: aggressive, stable, it trains fast.",
    ),
    case(
        "deep_residual_cnn_branches_scaled_01",
        build.residual_scaled,
        None,
        proof.residual_scaled_trains,
        "The 24-block residual 1-D CNN with each branch scaled by 0.1: deep and unnormalised, it trains.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
