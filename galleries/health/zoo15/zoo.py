"""Zoo 15's runs: new tasks (scikit-learn's 8x8 digits through a BatchNorm CNN, a GRU classifying noisy
sinusoid sequences, an autoencoder of scikit-learn's wine table, a Poisson regression of claim counts with an
exposure offset under the log link, a heteroscedastic regression under a Gaussian NLL, an embedding-bag
classifier of generated topic documents), new optimizers and schedules (Adadelta, SGD without momentum, Adam
with unusual betas, RMSprop with momentum; ReduceLROnPlateau with its monitor, CyclicLR triangular2,
ConstantLR, ChainedScheduler, a warm-up written by hand in LambdaLR), new bugs (a vocabulary keyed by
``(word, count)`` pairs, Adadelta given an Adam LR, missing counts read as NaN, a unit-norm init dividing the
zeroed padding row by 0, the zero-gamma trick on every BatchNorm of a plain CNN, ``val_fraction`` 0.9 for 0.1,
a CyclicLR ``max_lr`` 100x, a plateau scheduler in ``mode="max"`` on a loss, an optimizer given the head's
parameters only, a collate function that rebuilds the vocabulary every batch, millimetre rows merged into
metres, a GRU fed raw sensor units), blind pairs, runs a repair could save, healthy look-alikes.

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
from galleries.health.zoo15 import _builds as build
from galleries.health.zoo15 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind group: the loss at its trivial level from step 0, five causes
    case(
        "topics_vocabulary_keyed_by_word_count_pairs",
        build.topics_pairs_vocabulary,
        "inputs",
        proof.topics_pairs_stuck,
        "Trivial loss from broken inputs: an embedding-bag topic classifier, Adam 3e-3 betas (0.9, 0.98); "
        "the vocabulary is built as {w: i for i, w in enumerate(counts.most_common())}, so its keys are "
        "(word, count) pairs, every token is encoded as the unknown id and every document looks the same.",
        also_allowed=STUCK,
        trainer_kwargs=every(20),
    ),
    case(
        "topics_adadelta_given_an_adam_lr_1e_3",
        build.topics_adadelta,
        "lr_too_low",
        proof.topics_adadelta_stuck,
        "Trivial loss from an LR ~1000x too low: the same topic classifier on clean inputs, Adadelta at 1e-3 "
        "(an Adam-style LR; Adadelta's is ~1.0), so its updates are >500x smaller than at 1.0 and the loss "
        "stays where it started.",
        also_allowed=STUCK,
        trainer_kwargs=every(20),
    ),
    case(
        "sequences_optimizer_given_the_head_parameters_only",
        build.sequences_head_only,
        "frozen_parameters",
        proof.sequences_gru_frozen,
        "A frozen GRU from the optimizer's parameter list: a GRU sequence classifier, Adam 3e-3 built on "
        "net.head.parameters() (left from a fine-tuning recipe); the GRU gets gradients and never changes, "
        "its random features carry no class, the loss stays at log 4.",
        also_allowed=STUCK,
        trainer_kwargs=every(20),
    ),
    case(
        "sequences_raw_sensor_units_saturate_the_gru",
        build.sequences_raw_units,
        "saturated_activations",
        proof.sequences_gates_saturate,
        "Saturated GRU gates from unscaled inputs: the sequence classifier fed raw sensor units (baseline "
        "250, 40 units per signal unit; the scaler fitted, never applied), Adam 3e-3; most reset and update "
        "gates sit at 0 or 1 and the candidate at +-1 on every batch, the loss stays at log 4.",
        also_allowed=STUCK,
        trainer_kwargs=every(20),
    ),
    # -- blind pair: every ReLU dead / dead ReLUs killed by the LR
    case(
        "digits_zero_gamma_on_every_batchnorm",
        build.digits_zero_gamma,
        "initialisation",
        proof.digits_zero_gamma_dead,
        "Dead units from initialisation: a BatchNorm CNN of 8x8 digits, SGD 0.05 without momentum; every "
        "BatchNorm's scale initialised to 0 (the zero-gamma trick for residual blocks, applied to a plain "
        "CNN), so every ReLU input is exactly 0, no filter gets a gradient and the loss stays at log 10.",
        also_allowed=("dead_units", "not_learning"),
        trainer_kwargs=every(20),
    ),
    case(
        "wine_autoencoder_sgd_lr_10x_kills_its_relus",
        build.wine_sgd,
        "lr_too_high",
        proof.wine_lr_kills_units,
        "Dead units from an LR 10x too high: a ReLU autoencoder of the wine table, SGD at 2.0 without "
        "momentum (meant 0.2); every update moves some layer by ~half its norm and from step 25 every "
        "hidden ReLU is dead for good, the reconstruction stuck at the mean wine.",
        also_allowed=("dead_units", "not_learning"),
    ),
    # -- blind pair: NaN from a non-finite input / from non-finite weights
    case(
        "claims_missing_counts_read_as_nan",
        build.claims_missing_counts,
        "inputs",
        proof.claims_missing_nan,
        "NaN from non-finite data: a Poisson regression of claim counts (log link, exposure offset) read "
        "in order, SGD 0.02 without momentum; three policies' counts are missing in the export and read as "
        "NaN (the dropna ran on the features only), batch 40's loss is NaN and its update makes every weight "
        "NaN.",
        onset_step=proof.NAN_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    case(
        "topics_unit_norm_init_divides_the_pad_row_by_zero",
        build.topics_unit_norm_pad_nan,
        "nonfinite_weights",
        proof.topics_pad_row_nan,
        "NaN from non-finite weights: the topic classifier's embeddings initialised to unit norm by "
        "w / ||w|| after the padding row was zeroed, so that row is 0/0 = NaN before any step; the masked "
        "mean multiplies it by 0, which leaves NaN, and every loss is NaN.",
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    # -- blind pair: the validation loss rising from its best, from overfitting / from the LR
    case(
        "sequences_val_fraction_09_for_01_overfits",
        build.sequences_val_fraction,
        "overfitting",
        proof.sequences_overfit,
        "Overfitting: the GRU sequence classifier with val_fraction 0.9 in its config (meant 0.1), so it "
        "trains on 100 recordings (5 steps an epoch) and validates on 900 every epoch; the training loss "
        "falls to ~0 while the validation loss climbs from its best.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "claims_cyclic_triangular2_max_lr_100x",
        build.claims_cyclic,
        "lr_too_high",
        proof.claims_cyclic_blows_up,
        "An LR 100x too high at the cycle's peak: claim counts, Adam betas (0.7, 0.99) under CyclicLR "
        "triangular2 from 1e-4 to max_lr 0.3 (meant 3e-3) over 40 steps; near the peak the loss jumps 100x "
        "and the gradients >1000x, the ReLUs die, and the validation loss ends >2.5x its best.",
        onset_step=proof.CYCLIC_ONSET,
        also_allowed=("exploding_gradients", "dead_units"),
        trainer_kwargs=every(20),
    ),
    # -- single causes
    case(
        "hetero_plateau_scheduler_mode_max_on_val_loss",
        build.hetero_plateau,
        "lr_too_low",
        proof.hetero_plateau_collapses,
        "An LR collapsing while the loss still falls: heteroscedastic regression (Gaussian NLL), RMSprop "
        "momentum 0.9 at 3e-4 under ReduceLROnPlateau(monitor='val_loss', mode='max', factor 0.1, "
        "patience 1) copied from an accuracy config; every improvement counts as no improvement, the LR is "
        "cut 10x at step 60 and every 2 epochs after, the loss frozen far above the fixed run's.",
        onset_step=proof.PLATEAU_ONSET,
        also_allowed=("loss_plateau",),
    ),
    case(
        "topics_collate_rebuilds_the_vocabulary_every_batch",
        build.topics_rebuilding_collate,
        "data_stall",
        proof.topics_collate_stalls,
        "A data stall: the topic classifier on raw text, whose collate_fn re-tokenises the whole corpus and "
        "rebuilds the vocabulary on every batch; the loader's wait per batch is >3x the step, the training "
        "itself identical to the fixed run's.",
        max_steps=150,
        trainer_kwargs=every(20),
    ),
    case(
        "hetero_millimetre_rows_merged_into_metres",
        build.hetero_millimetres,
        "outlier_batches",
        proof.hetero_outlier_batches,
        "Outlier batches from a units mix-up: heteroscedastic regression, Adam 1e-3; 6 of 1280 targets "
        "come from a second sensor logging millimetres and were merged unconverted (x1000), so ~1 batch in 7 "
        "has a loss ~10^4x the others and the fit is pulled off.",
        onset_step=proof.OUTLIER_ONSET,
        also_allowed=("exploding_gradients",),
        trainer_kwargs=every(20),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "topics_adadelta_given_an_adam_lr_1e_3",
    "claims_missing_counts_read_as_nan",
    "sequences_val_fraction_09_for_01_overfits",
    "claims_cyclic_triangular2_max_lr_100x",
    "hetero_plateau_scheduler_mode_max_on_val_loss",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "digits_hand_written_lambda_warmup_100_steps",
        build.digits_hand_warmup,
        None,
        proof.digits_warmup_trains,
        "The BatchNorm digits CNN, SGD 0.1 without momentum under a warm-up written by hand in LambdaLR "
        "(min(1, (step + 1) / 100)): an LR of 1e-3 at first, then it learns.",
        trainer_kwargs=every(20),
    ),
    case(
        "sequences_30pct_training_labels_random_on_purpose",
        build.sequences_noisy_labels,
        None,
        proof.sequences_noisy_trains,
        "30% of the training labels replaced by random ones (a robustness study): a training loss that "
        "floors high, a clean validation loss that falls.",
        trainer_kwargs=every(20),
    ),
    case(
        "wine_autoencoder_pca_encoder_frozen_on_purpose",
        build.wine_frozen_pca_encoder,
        None,
        proof.wine_pca_trains,
        "A wine autoencoder whose encoder is a PCA projection, frozen on purpose: only the decoder trains.",
    ),
    case(
        "claims_counts_in_hundreds_nll_near_minus_700",
        build.claims_counts_in_hundreds,
        None,
        proof.claims_hundreds_trains,
        "Claim counts in the hundreds: a Poisson NLL (without log y!) of about -700, gradients ~100, RMSprop "
        "momentum 0.5 at 1e-3; it closes 90% of the gap to the true rates.",
        trainer_kwargs=every(20),
    ),
    case(
        "hetero_validated_on_12_rows",
        build.hetero_tiny_val,
        None,
        proof.hetero_tiny_val_trains,
        "Heteroscedastic regression, RMSprop momentum 0.9 at 3e-4, validated on 12 rows: a validation NLL "
        "that jumps up and down (and below 0), falling overall.",
        trainer_kwargs=every(20),
    ),
    case(
        "topics_batches_of_500_adam_betas_05_09",
        build.topics_big_batches,
        None,
        proof.topics_big_batches_trains,
        "The topic classifier in batches of 500 (four steps an epoch), Adam 1e-2 with betas (0.5, 0.9), "
        "validated every 5 epochs: few, smooth steps; it trains to near 0.",
        trainer_kwargs={"check_val_every_n_epoch": 5},
    ),
    case(
        "claims_plateau_scheduler_halves_the_lr",
        build.claims_plateau_halving,
        None,
        proof.claims_plateau_trains,
        "Claim counts, SGD 0.1 without momentum under ReduceLROnPlateau(monitor='val_loss', mode='min', "
        "factor 0.5, patience 0): the LR halves when the validation loss stalls.",
    ),
    case(
        "digits_chained_constant_then_exponential_lr",
        build.digits_chained_constant_exponential,
        None,
        proof.digits_chained_trains,
        "The digits CNN, SGD 0.1 without momentum under ChainedScheduler(ConstantLR(0.1, 60 steps), "
        "ExponentialLR(0.995)): a 10x LR jump at step 60, by design.",
        trainer_kwargs=every(20),
    ),
    case(
        "wine_autoencoder_adadelta_slow_and_steady",
        build.wine_adadelta,
        None,
        proof.wine_adadelta_trains,
        "The wine autoencoder, Adadelta at 1.0: slow, but steady.",
    ),
    case(
        "sequences_cyclic_triangular2_lr_swings",
        build.sequences_cyclic,
        None,
        proof.sequences_cyclic_trains,
        "The GRU sequence classifier, Adam betas (0.5, 0.99) under CyclicLR triangular2 from 3e-4 to 6e-3: "
        "the LR swings 20x up and down, and it learns.",
        trainer_kwargs=every(20),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
