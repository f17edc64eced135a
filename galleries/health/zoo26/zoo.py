"""Zoo 26's runs: new tasks (per-pixel disparity from a rectified pair of 1-D scanlines, source separation by
a time-frequency mask over STFT magnitudes, balanced-bracket (Dyck) recognition with an LSTM over packed
variable-length words, tomographic reconstruction from parallel-beam sinograms, variable-star classification
from irregularly sampled light curves with a masked deep set), new optimizers and schedules (SGD with
Nesterov momentum under a ChainedScheduler of LinearLR and ExponentialLR, AdamW with AMSGrad, RAdam, Adagrad,
a LambdaLR warm-up, PolynomialLR, CosineAnnealingWarmRestarts, ``bf16-mixed`` with clipping by value,
gradient accumulation over batches of 4), new bugs (saturated scanlines standardised by their zero deviation,
a Nesterov LR 250x too high that its warm-up does not hide, a square-bracket vocabulary reading round
brackets, an Adagrad LR 10^4x too low, a warm-up lambda without its cap, a PolynomialLR given one epoch's
steps, a quality cut that keeps a tenth of the curves, an encoder frozen for a checkpoint never loaded, a mask
rounded inside ``forward``, a residual branch zero-initialised in every layer, a 14-layer tanh deep set, a
``collate_fn`` recomputing the survey's zero point, light curves timed in seconds), blind pairs, runs a repair
could save, healthy look-alikes.

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
from galleries.health.zoo26 import _builds as build
from galleries.health.zoo26 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair: NaN from the data / from the LR
    case(
        "stereo_saturated_scanlines_divided_by_zero_std",
        build.stereo_saturated,
        "inputs",
        proof.stereo_saturated_nan,
        "NaN from broken input data: stereo disparity, AdamW 2e-3 with AMSGrad; three scanline pairs where "
        "the sky saturated both sensors are constant 255, and the per-scanline standardisation divides them "
        "by their standard deviation, 0; the first batch holding one (step 60) has a NaN loss whose update "
        "makes every weight NaN.",
        onset_step=proof.SATURATED_ONSET,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    case(
        "stereo_nesterov_lr_250x_under_chained_warmup",
        build.stereo_nesterov,
        "lr_too_high",
        proof.stereo_nesterov_nan,
        "NaN from an LR 250x too high on clean inputs: stereo disparity, SGD with Nesterov momentum 0.9 at "
        "5.0 (meant 2e-2) under a ChainedScheduler of a 50-step LinearLR warm-up from 1% and "
        "ExponentialLR(0.995); even the warm-up's first steps are too large: the loss grows 10^7-fold and "
        "turns NaN by step 5.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
        trainer_kwargs=every(20),
    ),
    # -- blind pair: the loss at chance (ln 2) from step 0
    case(
        "brackets_round_words_through_square_bracket_vocab",
        build.brackets_square_vocab,
        "inputs",
        proof.brackets_vocab_stuck,
        "Chance loss from broken inputs: balanced-bracket recognition with an LSTM over packed words, RAdam "
        "1e-2; the words are encoded with the vocabulary of the square-bracket recipe the code came from "
        "({'[': 1, ']': 2}), so every '(' and ')' is <unk>, only the length is left (the same for both "
        "classes) and the BCE stays at ln 2.",
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    case(
        "brackets_adagrad_lr_10000x_too_low",
        build.brackets_adagrad,
        "lr_too_low",
        proof.brackets_lr_stuck,
        "Chance loss from an LR 10^4x too low: balanced-bracket recognition with an LSTM, Adagrad at 1e-5 "
        "(meant 0.1); the encoding is right and every weight gets a gradient, the BCE stays at ln 2.",
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    # -- blind pair: the validation loss rising from overfitting / from an LR that keeps growing
    case(
        "curves_quality_cut_38_observations_overfits",
        build.curves_quality_cut,
        "overfitting",
        proof.curves_quality_overfits,
        "Overfitting: variable-star classification with a width-128 deep set, AdamW 3e-3, from a quality cut "
        "at 38 observations (meant 18) that keeps ~250 of the 2,400 light curves (2 steps an epoch); the "
        "training loss falls to ~0 while the validation loss climbs past 1.5x its best.",
        onset_step=proof.QUALITY_ONSET,
        trainer_kwargs={"check_val_every_n_epoch": 5},
    ),
    case(
        "tomo_lambdalr_warmup_without_its_cap",
        build.tomo_uncapped_warmup,
        "lr_too_high",
        proof.tomo_warmup_blows_up,
        "An LR growing too high: tomographic reconstruction, RAdam 1e-2 under LambdaLR((step + 1) / 10), a "
        "warm-up left without its min(1, ...), so the LR keeps rising linearly, 30x its meant peak by step "
        "300; it trains until the LR is ~22x too high, then the loss jumps 10x in a step (217) and the "
        "validation loss goes >100x its best.",
        onset_step=proof.WARMUP_ONSET,
        also_allowed=("exploding_gradients",),
        trainer_kwargs=every(25),
    ),
    # -- blind pair: the loss stuck high from frozen weights / from a zero gradient
    case(
        "separation_encoder_frozen_for_a_checkpoint_never_loaded",
        build.separation_frozen_encoder,
        "frozen_parameters",
        proof.separation_frozen,
        "Frozen parameters: source separation by a spectrogram mask, AdamW 3e-3; the convolutional "
        "encoder is frozen with requires_grad_(False), copied from the fine-tuning recipe whose pretrained "
        "checkpoint is never loaded here, so only the 1x1 head learns on random features and the loss "
        "stays ~4x the fixed run's.",
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    case(
        "separation_mask_rounded_inside_forward",
        build.separation_rounded_mask,
        "not_learning",
        proof.separation_rounded,
        "Not learning from a zero gradient: source separation, Adam 3e-3; the mask is rounded to 0/1 "
        "inside forward (an ideal binary mask, meant at inference only) and torch.round passes back exactly "
        "zero, so no weight ever changes and the loss stays at its first value.",
        also_allowed=("loss_plateau", "vanishing_gradients", "dead_units"),
        trainer_kwargs=every(25),
    ),
    # -- single causes
    case(
        "tomo_polynomiallr_total_iters_one_epoch",
        build.tomo_polynomial,
        "lr_too_low",
        proof.tomo_lr_collapses,
        "An LR collapsing early: tomographic reconstruction, RAdam 2e-3 under PolynomialLR(power=2) stepped "
        "per step with total_iters=len(train_loader) (one epoch, 75 steps; meant the run's 300): below 2% "
        "of the LR from step 65, 0 from step 75, the validation loss frozen at over 2x the fixed run's.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau", "not_learning"),
        trainer_kwargs=every(25),
    ),
    case(
        "tomo_residual_branch_zero_initialised_in_every_layer",
        build.tomo_zero_branch,
        "initialisation",
        proof.tomo_zero_branch_dead,
        "Dead units from initialisation: tomographic reconstruction, RAdam 2e-3; the residual refinement "
        "branch is zero-initialised in all three convolutions (meant the last one only), so no gradient ever "
        "reaches any of them and only the linear back-projection trains (validation ~1.6x the fixed run's).",
        also_allowed=("dead_units",),
        trainer_kwargs=every(25),
    ),
    case(
        "curves_14_layer_tanh_deep_set_vanishes",
        build.curves_deep_tanh,
        "vanishing_gradients",
        proof.curves_tanh_vanishes,
        "Vanishing gradients: variable-star classification, the deep set's per-observation network a "
        "14-layer tanh MLP at PyTorch's default init (no normalisation, no skips), SGD 0.05 with momentum "
        "0.9; the first layer's updates are hundreds of times smaller than the last's and the loss stays at "
        "ln 3.",
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    case(
        "curves_collate_recomputes_survey_zero_point",
        build.curves_zero_point_per_batch,
        "data_stall",
        proof.curves_stalls,
        "A data stall: variable-star classification from a list Dataset whose collate_fn recomputes the "
        "survey's zero point (the median of all 2,400 curves' medians, in Python) for every batch of 16 "
        "(meant once): the step waits longer for its batch than it computes.",
        max_steps=100,
        trainer_kwargs=every(50),
    ),
    case(
        "curves_six_light_curves_timed_in_seconds",
        build.curves_times_in_seconds,
        "inputs",
        proof.curves_seconds_spikes,
        "Broken input data: variable-star classification, AdamW 3e-3; six light curves merged from a second "
        "archive keep its times in seconds (meant converted to days), so their time features are 86,400x "
        "the others'; the gradient jumps >100x on the first batch holding one (step 2) and the run is "
        "shaken by loss spikes 100-1000x the clean run's typical loss.",
        onset_step=proof.SECONDS_ONSET,
        also_allowed=("outlier_batches", "exploding_gradients"),
        trainer_kwargs=every(25),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "stereo_saturated_scanlines_divided_by_zero_std",
    "curves_quality_cut_38_observations_overfits",
    "tomo_lambdalr_warmup_without_its_cap",
    "tomo_polynomiallr_total_iters_one_epoch",
    "brackets_adagrad_lr_10000x_too_low",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "stereo_bf16_mixed_clipped_by_value",
        build.stereo_bf16_value_clip,
        None,
        proof.stereo_bf16_trains,
        'Stereo disparity under precision="bf16-mixed" with gradient_clip_val=1.0 by value, AdamW 2e-3 with '
        "AMSGrad: a first loss of 13 px^2, gradient norms of several units, bf16-rounded losses; it trains.",
        trainer_kwargs={
            **every(25),
            "precision": "bf16-mixed",
            "gradient_clip_val": 1.0,
            "gradient_clip_algorithm": "value",
        },
    ),
    case(
        "stereo_nesterov_high_lr_chained_warmup",
        build.stereo_nesterov_high_lr,
        None,
        proof.stereo_nesterov_trains,
        "Stereo disparity, SGD with Nesterov momentum at a high but right 2e-2 under a ChainedScheduler of "
        "a LinearLR warm-up and an ExponentialLR decay: a loss from 13 to ~0.5 px^2.",
        trainer_kwargs=every(25),
    ),
    case(
        "brackets_packed_lstm_batches_of_8",
        build.brackets_batch_8,
        None,
        proof.brackets_batch_8_trains,
        "Balanced brackets with an LSTM over packed words on batches of 8, RAdam 1e-2: a very noisy loss "
        "that goes on falling.",
        trainer_kwargs=every(50),
    ),
    case(
        "brackets_sgd_plateau_then_drop",
        build.brackets_sgd_plateau,
        None,
        proof.brackets_plateau_trains,
        "Balanced brackets with an LSTM and plain SGD 1.0: the validation loss sits near 0.55 for ~100 steps "
        "while the LSTM finds a depth counter, then drops to ~0.04.",
        trainer_kwargs=every(25),
    ),
    case(
        "tomo_sgd_cosine_warm_restarts",
        build.tomo_warm_restarts,
        None,
        proof.tomo_restarts_train,
        "Tomography, SGD 0.5 with momentum 0.9 under CosineAnnealingWarmRestarts(T_0=50, T_mult=2): the LR "
        "falls to ~0 and jumps back to 0.5 at steps 50 and 150, and it trains.",
        trainer_kwargs=every(25),
    ),
    case(
        "tomo_adamw_weight_decay_05",
        build.tomo_heavy_decay,
        None,
        proof.tomo_heavy_decay_trains,
        "Tomography, AdamW 2e-3 with a heavy decoupled weight_decay=0.5: every validation better than the "
        "last.",
        trainer_kwargs=every(25),
    ),
    case(
        "separation_negative_snr_loss",
        build.separation_snr,
        None,
        proof.separation_snr_trains,
        "Source separation trained on minus the SNR in dB: a loss below zero from the first steps, falling "
        "to about -11 dB.",
        trainer_kwargs=every(25),
    ),
    case(
        "separation_adagrad_accumulate_4_of_batch_4",
        build.separation_accumulated,
        None,
        proof.separation_accumulated_trains,
        "Source separation, Adagrad 0.05 on batches of 4 accumulated 4 at a time (1,200 batches, 300 "
        "optimizer steps): noisy per-batch losses, and it trains.",
        trainer_kwargs={"val_check_interval": 100, "accumulate_grad_batches": 4},
    ),
    case(
        "curves_imbalanced_90_5_5",
        build.curves_imbalanced,
        None,
        proof.curves_imbalanced_train,
        "Variable stars with 90% pulsators and 5% each of eclipsing binaries and flare stars: a low first "
        "loss, a plateau at the prior's, then the minority classes learned.",
        trainer_kwargs=every(25),
    ),
    case(
        "curves_telescope_embedding_sparse_rows",
        build.curves_telescope_embedding,
        None,
        proof.curves_telescopes_train,
        "Variable stars with a learned offset per telescope (200, started at zero): a batch of 32 curves "
        "touches at most 32 rows, the rest get an exactly zero gradient; it trains.",
        trainer_kwargs=every(25),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
