"""Zoo 9's runs: new tasks (skip-gram word embeddings with negative sampling, an LSTM language model with an
EMA copy of its weights, Bishop's mixture density network, a sparse autoencoder of digits), new optimizers
and schedules (Adam with amsgrad, ExponentialLR, LinearLR warm-up inside SequentialLR, plain SGD at LRs of
20 and 200), new bugs (both word2vec tables started at zero, pair columns shuffled apart, the training step
run through the EMA copy, a missing target filled with float32's largest value, an L1 weight 1000x too
strong), blind pairs, runs a repair could save, healthy look-alikes.

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
from galleries.health.zoo9 import _builds as build
from galleries.health.zoo9 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind triple: the skip-gram loss sits at 2 ln 2 (every score 0) from step 0
    case(
        "skipgram_both_tables_init_zero",
        build.skipgram_zero_init,
        "initialisation",
        proof.skipgram_zero_stuck,
        "Trivial loss from initialisation: skip-gram word embeddings with both tables started at zero "
        "(word2vec zeroes only the output table), Adam 1e-2; every score is 0 and every gradient exactly 0, "
        "forever.",
        also_allowed=("not_learning", "vanishing_gradients", "loss_plateau"),
        trainer_kwargs=every(50),
    ),
    case(
        "skipgram_centre_and_context_columns_shuffled_apart",
        build.skipgram_shuffled_apart,
        "not_learning",
        proof.skipgram_apart_stuck,
        "Trivial loss from a data bug: the skip-gram's centre and context columns were each shuffled on "
        "their own (meant one permutation of the rows), so the pairs are unrelated words; Adam 1e-2 moves "
        "the weights, the loss stays at 2 ln 2.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(50),
    ),
    case(
        "skipgram_amsgrad_lr_1e_6",
        build.skipgram_amsgrad,
        "lr_too_low",
        proof.skipgram_lr_stuck,
        "Trivial loss from an LR 10000x too low: skip-gram, Adam with amsgrad at 1e-6 (meant 1e-2); the loss "
        "stays at 2 ln 2.",
        also_allowed=STUCK,
        trainer_kwargs=every(50),
    ),
    # -- pair: dead code units from a regulariser / from initialisation
    case(
        "sparse_autoencoder_l1_weight_1000x_kills_codes",
        build.sae_l1,
        "dead_units",
        proof.sae_l1_dead,
        "Dead units from an L1 weight 1000x too strong: a sparse autoencoder of digits (128 ReLU codes), "
        "Adam 3e-3, the codes' L1 at 1.0 (meant 1e-3); within 18 steps >= 90% of the codes are dead on every "
        "batch and the reconstruction stays near the mean image.",
        onset_step=proof.L1_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(22),
    ),
    case(
        "sparse_autoencoder_code_bias_init_minus_3",
        build.sae_bias_init,
        "initialisation",
        proof.sae_init_dead,
        "Dead units from initialisation: the sparse autoencoder's code biases start at -3 (\"sparse from the "
        'start") for pixels in [0, 1]; every code is dead from step 0, only the decoder bias learns the mean '
        "image.",
        also_allowed=("dead_units", "not_learning", "loss_plateau"),
        trainer_kwargs=every(22),
    ),
    # -- the weights never move: frozen by a forward through the wrong copy
    case(
        "lstm_lm_training_step_runs_the_ema_copy",
        build.lm_ema,
        "frozen_parameters",
        proof.lm_ema_frozen,
        "Frozen parameters: an LSTM language model keeps an EMA copy for validation, but its training step "
        "runs the copy (meant the network, which the optimizer holds); the copy gets gradients "
        "(accumulating, never zeroed) and is never stepped, the network gets none: the loss stays at its "
        "first value.",
        also_allowed=("not_learning", "loss_plateau", "exploding_gradients"),
        trainer_kwargs=every(proof.LM_EVERY),
    ),
    # -- LR: a collapse (repairable) and a blow-up from a zero too many (repairable)
    case(
        "lstm_lm_exponential_lr_stepped_per_batch",
        build.lm_exponential,
        "lr_too_low",
        proof.lm_collapses,
        "An LR collapsing to ~0 early: the LSTM language model, Adam 3e-3 under ExponentialLR(gamma=0.9) "
        "stepped every batch (meant every epoch of 64 batches); 100x down by step 44, 1e-17 at the end, the "
        "loss frozen far above the fixed run's.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(proof.LM_EVERY),
    ),
    case(
        "lstm_lm_plain_sgd_lr_200",
        build.lm_sgd,
        "lr_too_high",
        proof.lm_sgd_too_high,
        "An LR 10x too high: the LSTM language model, plain SGD at 200 (a zero too many for the 20 of "
        "PyTorch's word-language-model example); from the first update the loss jumps to ~10x the trivial "
        "level and stays there.",
        also_allowed=("exploding_gradients", "saturated_activations"),
        trainer_kwargs=every(proof.LM_EVERY),
    ),
    # -- the validation loss rising (repairable)
    case(
        "lstm_lm_wide_48_lines_overfits",
        build.lm_few_lines,
        "overfitting",
        proof.lm_overfits,
        "Overfitting: a width-256 LSTM language model on 48 lines (a debug subset left in), Adam 3e-3, "
        "validated every 2 epochs (6 steps); the training loss falls to ~0.03 while the validation loss "
        "climbs to >2x its best.",
        onset_step=proof.OVERFIT_ONSET,
        trainer_kwargs={"check_val_every_n_epoch": 2},
    ),
    # -- one bad row makes a non-finite update (repairable)
    case(
        "mdn_missing_target_filled_with_float32_max",
        build.mdn_missing_target,
        "nonfinite_weights",
        proof.mdn_missing_nan,
        "A non-finite update from one bad row: a mixture density network (NAdam 2e-3) read in order; one "
        "missing target was filled with float32's largest value; in batch 60 its squared z-score overflows, "
        "the loss is inf and the update makes every weight NaN.",
        onset_step=proof.MISSING_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "lstm_lm_exponential_lr_stepped_per_batch",
    "lstm_lm_plain_sgd_lr_200",
    "lstm_lm_wide_48_lines_overfits",
    "mdn_missing_target_filled_with_float32_max",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "mdn_nll_goes_negative",
        build.mdn_plain,
        None,
        proof.mdn_negative_trains,
        "A mixture density network on Bishop's inverse sine (Adam 3e-3): its NLL of a density falls below 0.",
        trainer_kwargs=every(20),
    ),
    case(
        "mdn_validated_on_12_points",
        build.mdn_tiny_validation,
        None,
        proof.mdn_tiny_val_trains,
        "The mixture density network validated on 12 points: the validation loss jumps around as it falls.",
        trainer_kwargs=every(20),
    ),
    case(
        "lstm_lm_plain_sgd_lr_20",
        build.lm_sgd_20,
        None,
        proof.lm_sgd_20_trains,
        "The LSTM language model with plain SGD at 20, unclipped: aggressive, and stable on this model.",
        trainer_kwargs=every(25),
    ),
    case(
        "sparse_autoencoder_200_step_linear_warmup",
        build.sae_long_warmup,
        None,
        proof.sae_warmup_trains,
        "The sparse autoencoder, Adam 3e-3 warmed up from 1% over 200 steps (LinearLR in SequentialLR): a "
        "slow start.",
        trainer_kwargs=every(22),
    ),
    case(
        "sparse_autoencoder_raw_pixel_counts",
        build.sae_raw_pixels,
        None,
        proof.sae_raw_trains,
        "The sparse autoencoder on raw pixel counts (0-16): a loss in the thousands and gradient norms near "
        "4000 at first; Adam trains it down steadily.",
        trainer_kwargs=every(22),
    ),
    case(
        "skipgram_half_the_pairs_off_topic",
        build.skipgram_noisy,
        None,
        proof.skipgram_noisy_trains,
        "Skip-gram on pairs whose context is on the centre's topic only half of the time: a high floor, near "
        "2 ln 2, reached.",
        trainer_kwargs=every(50),
    ),
    case(
        "skipgram_plain_sgd_slow_start",
        build.skipgram_sgd_slow,
        None,
        proof.skipgram_slow_start_trains,
        "Skip-gram with plain SGD at 20 from word2vec's near-zero start: the loss sits at 2 ln 2 for dozens "
        "of steps, then falls.",
        trainer_kwargs=every(50),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
