"""Zoo 14's runs: new tasks (scikit-learn's wine and iris tables, linnerud multi-output regression, a GRU
forecaster of synthetic sine mixtures, a small convolutional denoiser of scikit-learn's digits, a
character-level LSTM language model of a generated text), new optimizers and schedules (Adagrad, RMSprop, SGD
with Nesterov momentum, AdamW with amsgrad; OneCycleLR, CosineAnnealingWarmRestarts, ExponentialLR,
PolynomialLR, LambdaLR, SequentialLR), new bugs (a LambdaLR whose lambda returns the LR, not the factor; ReLU
biases set to -3 by a gate-init helper; features and labels shuffled with two permutations; a stuck sensor's
flat windows divided by their zero std; an LR typed 3e-0; pruned rows renormalised into NaN weights; an
ExponentialLR decay written as growth; an optimizer built on the decoder alone; PolynomialLR epochs taken as
steps; six sigmoid layers; tanh weights drawn with std 1; a vocabulary rebuilt for every item; three 12-bit
scans among 0..16 ones), blind pairs, runs a repair could save, healthy look-alikes.

Written blind (without reading HealthMonitor's rules, or any sealed zoo but zoo 13, the format example), in
tasks, optimizers and schedules other than zoo 13's. Each problem run holds one bug a user could have written;
``expected`` names the cause a careful engineer would accept (the description names the root cause),
``onset_step`` the first optimizer step at which the problem exists (measured from the plain recording by the
proofs), ``also_allowed`` only symptoms of that same cause. :data:`REPAIRABLE` names the runs a repair
callback can save in process: their proofs measure the final and the best validation loss.
"""

from __future__ import annotations

from galleries.health.field._case import FieldCase
from galleries.health.sealed_zoo import LR_BLOWUP, STUCK, case, every
from galleries.health.zoo14 import _builds as build
from galleries.health.zoo14 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind quartet: the validation loss at the best constant guess (the class prior) from step 0
    case(
        "wine_lambdalr_lambda_returns_the_lr_not_the_factor",
        build.wine_lambda_absolute,
        "lr_too_low",
        proof.wine_lambda_stuck,
        "Trivial loss from an LR 1000x too low: wine, RMSprop 1e-3 under a LambdaLR warm-up whose lambda "
        "returns 1e-3 * min(1, (step + 1) / 20) (the LR, meant the factor), so the LR peaks at 1e-6; inputs "
        "and gradients are fine, the validation loss stays at the class prior's.",
        also_allowed=STUCK,
    ),
    case(
        "wine_relu_biases_set_to_minus_3_by_gate_init",
        build.wine_gate_bias,
        "dead_units",
        proof.wine_dead_stuck,
        "Trivial loss from dead ReLUs: wine, AdamW (amsgrad) 3e-3, every Linear initialised by a helper "
        "meant for gated layers that sets the bias to -3, the ReLU layers' too; every hidden unit is off on "
        "every row from step 0, only the readout bias learns the class prior.",
        also_allowed=("not_learning", "initialisation"),
    ),
    case(
        "iris_features_and_labels_shuffled_with_two_permutations",
        build.iris_two_permutations,
        "not_learning",
        proof.iris_labels_stuck,
        "Trivial loss from labels torn from their rows: iris, Adagrad 0.02; the table is shuffled with one "
        "randperm for the features and another for the labels, so nothing is learnable; LR and gradients are "
        "normal, the loss stays at the labels' entropy.",
        also_allowed=("loss_plateau",),
    ),
    case(
        "iris_six_sigmoid_layers_vanish",
        build.iris_deep_sigmoid,
        "vanishing_gradients",
        proof.iris_sigmoid_vanishes,
        "Trivial loss from vanishing gradients: iris, an MLP of six width-32 sigmoid hidden layers at "
        "PyTorch's default init, SGD Nesterov 0.05; the updates shrink ~5x a layer towards the input (the "
        "first layer's >10,000x smaller than the readout's), the validation loss stays at the class prior's.",
        also_allowed=STUCK,
    ),
    # -- blind trio: a NaN loss from a non-finite input / an LR blow-up / NaN weights
    case(
        "sines_gru_stuck_sensor_window_divided_by_zero_std",
        build.sines_stuck_sensor,
        "inputs",
        proof.sines_stuck_nan,
        "NaN from non-finite inputs: a GRU forecaster of sine mixtures read in time order, AdamW (amsgrad) "
        "3e-3; one sensor held its value for 40 steps and the per-window normalisation divides by the "
        "window's std (0), so batch 28 holds 0/0 windows, its loss is NaN and its update makes every weight "
        "NaN.",
        onset_step=proof.STUCK_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    case(
        "sines_gru_sgd_nesterov_lr_typed_3e0",
        build.sines_sgd,
        "lr_too_high",
        proof.sines_sgd_nan,
        "NaN from an LR blow-up on clean inputs: the GRU forecaster, SGD Nesterov momentum 0.9 at 3.0 (typed "
        "3e-0, meant 3e-2); the loss grows 1000x in two steps and is non-finite within 15.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
        trainer_kwargs=every(20),
    ),
    case(
        "iris_pruned_rows_renormalised_into_nan_weights",
        build.iris_pruned_renormalised,
        "nonfinite_weights",
        proof.iris_nan_weights,
        "NaN from NaN weights: iris, RMSprop 1e-3; a quarter of the first layer's rows are pruned to 0 and "
        "then every row is rescaled to its old norm (w / ||w|| * norm), so the pruned rows are 0/0 = NaN "
        "before the first step; the inputs are finite, every loss is NaN.",
        also_allowed=("nonfinite_activations",),
    ),
    # -- blind pair: the validation loss rising from overfitting / from an LR that keeps growing
    case(
        "linnerud_wide_mlp_on_15_men_overfits",
        build.linnerud_wide,
        "overfitting",
        proof.linnerud_overfits,
        "Overfitting: a width-256 two-hidden-layer MLP on linnerud's 15 training men (exercises to weight, "
        "waist and pulse), AdamW (amsgrad) 1e-3 without weight decay for 100 epochs of 3 steps, no early "
        "stopping; the validation MSE is best after epoch 4 and ends >3x higher while the training MSE "
        "keeps falling.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "digits_denoiser_exponential_gamma_1_plus_0_02",
        build.denoise_exponential,
        "lr_too_high",
        proof.denoise_lr_grows,
        "An LR that grows until it is too high: the digits denoiser, SGD Nesterov 0.05 under ExponentialLR("
        "gamma=1 + 0.02) stepped per step (meant 1 - 0.02: a decay written as growth); the validation loss "
        "is best at step 79 (LR ~0.24), rises from there and the loss turns NaN by step 160.",
        onset_step=proof.GROWTH_ONSET,
        also_allowed=LR_BLOWUP,
        trainer_kwargs=every(20),
    ),
    # -- single causes
    case(
        "digits_denoiser_optimizer_built_on_decoder_only",
        build.denoise_decoder_only,
        "frozen_parameters",
        proof.denoise_encoder_frozen,
        "A frozen encoder from the optimizer's parameter list: the digits denoiser, RMSprop 1e-3 built on "
        "net.decoder.parameters() (left from a decoder fine-tuning stage; meant net.parameters()); the "
        "encoder gets gradients and never changes.",
        trainer_kwargs=every(20),
    ),
    case(
        "char_lstm_polynomial_lr_epochs_taken_as_steps",
        build.char_polynomial,
        "lr_too_low",
        proof.char_lr_collapses,
        "An LR collapsing to 0 early: a character LSTM language model, AdamW (amsgrad) 3e-3 under "
        "PolynomialLR(total_iters=30, power=1) meant in epochs (100 steps each) but stepped per step; the LR "
        "is 0 from step 30 and the loss is frozen far above the fixed run's.",
        onset_step=proof.POLY_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(20),
    ),
    case(
        "wine_tanh_weights_drawn_with_std_1",
        build.wine_tanh_unit_normal,
        "saturated_activations",
        proof.wine_tanh_saturates,
        "Saturated tanh units from initialisation: wine, a width-128 tanh MLP whose weights are drawn by "
        "nn.init.normal_(w) (std 1, meant the fan-in scaled default), Adagrad 0.01; on every batch >30% of "
        "the first hidden layer's and >70% of the second's outputs sit beyond +-0.99, the net memorises its "
        "training rows and validates far worse than the fix (~1.1 against ~0.06).",
        also_allowed=("initialisation", "vanishing_gradients"),
    ),
    case(
        "char_lstm_dataset_rebuilds_vocabulary_per_item",
        build.char_slow_loader,
        "data_stall",
        proof.char_loader_stalls,
        "A data stall: the character LSTM, RMSprop 2e-3, its Dataset's __getitem__ rebuilds the vocabulary "
        "from the whole 150,000-character training text for every chunk (meant once, in __init__); most of "
        "each step is spent waiting for the batch, the training itself is fine.",
        max_steps=80,
        check_every=10,
        trainer_kwargs=every(40),
    ),
    case(
        "digits_denoiser_three_12_bit_scans_among_0_16",
        build.denoise_mixed_scale,
        "outlier_batches",
        proof.denoise_outliers,
        "Outlier batches from broken inputs: the digits denoiser, RMSprop 1e-3; three of the 1400 training "
        "scans came from a 12-bit scanner (0..4095) and were divided by 16 like the 0..16 ones, so every "
        "batch holding one has a loss >50x the others' (about one batch in eight, from batch 0).",
        onset_step=proof.OUTLIER_ONSET,
        also_allowed=("inputs",),
        trainer_kwargs=every(20),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "wine_lambdalr_lambda_returns_the_lr_not_the_factor",
    "sines_gru_stuck_sensor_window_divided_by_zero_std",
    "linnerud_wide_mlp_on_15_men_overfits",
    "char_lstm_polynomial_lr_epochs_taken_as_steps",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "char_lstm_one_cycle_from_4e_4",
        build.char_one_cycle,
        None,
        proof.char_one_cycle_trains,
        "A character LSTM under OneCycleLR (max 1e-2 at step 90, AdamW amsgrad): the LR starts 25x below its "
        "peak, climbs, and anneals to ~0 by the end; it learns throughout.",
        trainer_kwargs=every(20),
    ),
    case(
        "sines_gru_cosine_warm_restarts",
        build.sines_warm_restarts,
        None,
        proof.sines_restarts_train,
        "The GRU forecaster read in time order, RMSprop 3e-3 under CosineAnnealingWarmRestarts(50, "
        "T_mult=2): the LR falls to ~0 and jumps back at steps 50 and 150, the loss bumps, and it trains.",
        trainer_kwargs=every(20),
    ),
    case(
        "digits_denoiser_warmup_100_then_exponential_decay",
        build.denoise_warmup_then_decay,
        None,
        proof.denoise_warmup_trains,
        "The digits denoiser, SGD Nesterov 0.05 under SequentialLR: LinearLR from 1% over 100 steps, then "
        "ExponentialLR(0.995); little moves at first, then it learns.",
        trainer_kwargs=every(20),
    ),
    case(
        "digits_denoiser_in_raw_0_16_units",
        build.denoise_raw_units,
        None,
        proof.denoise_raw_trains,
        "The digits denoiser in the table's own units (pixels 0..16), AdamW (amsgrad) 1e-3: MSE ~50 and "
        "gradients ~50 at first, falling steadily.",
        trainer_kwargs=every(20),
    ),
    case(
        "wine_random_first_layer_frozen_on_purpose",
        build.wine_random_features,
        None,
        proof.wine_random_features_train,
        "Wine with a width-256 random first layer frozen on purpose (random features), only the readout "
        "trained, Adagrad 0.05: it trains well.",
    ),
    case(
        "iris_30pct_training_labels_redrawn_on_purpose",
        build.iris_noisy_labels,
        None,
        proof.iris_noisy_trains,
        "Iris with 30% of the training labels redrawn at random on purpose (a label-noise drill), SGD "
        "Nesterov 0.02: the training loss floors above 0.5, the clean validation loss falls.",
    ),
    case(
        "wine_validated_on_8_wines",
        build.wine_tiny_val,
        None,
        proof.wine_tiny_val_trains,
        "Wine validated on 8 wines only, AdamW (amsgrad, weight decay 0.05) 1e-3: a validation loss from so "
        "few rows that it sometimes rises, yet falls 50x overall.",
    ),
    case(
        "digits_denoiser_batches_of_700",
        build.denoise_big_batch,
        None,
        proof.denoise_big_batch_trains,
        "The digits denoiser on batches of 700 (two steps an epoch), RMSprop 3e-3, 80 steps, validated every "
        "10 epochs: few, big steps.",
        max_steps=80,
        trainer_kwargs={"check_val_every_n_epoch": 10},
    ),
    case(
        "sines_gru_lr_divided_10x_at_150",
        build.sines_step_decay,
        None,
        proof.sines_step_decay_trains,
        "The GRU forecaster, SGD Nesterov 0.1 with a LambdaLR that divides the LR by 10 at step 150: a step "
        "decay.",
        trainer_kwargs=every(20),
    ),
    case(
        "char_lstm_dropout_04_train_above_val",
        build.char_heavy_dropout,
        None,
        proof.char_dropout_trains,
        "A character LSTM with dropout 0.4 on embeddings and outputs, AdamW (amsgrad) 3e-3: the training "
        "loss (dropout on) sits far above the validation loss (dropout off); it trains.",
        trainer_kwargs=every(20),
    ),
    case(
        "iris_polynomial_lr_to_zero_at_the_end",
        build.iris_polynomial_to_zero,
        None,
        proof.iris_poly_trains,
        "Iris, RMSprop 3e-3 under PolynomialLR(total_iters=300, power=2): the LR decays to 0 exactly at the "
        "run's end (below 1% for the last 30 steps), as planned.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
