"""Zoo 2's runs: blind pairs (one visible symptom, different causes, each its own run) and healthy
look-alikes.

Written blind (without reading HealthMonitor's rules), each run different in task or bug from the first
sealed zoo. Each problem run holds one bug a user could have written; ``expected`` names the cause a careful
engineer would accept (the description names the root cause), ``onset_step`` the first optimizer step at
which the problem exists (measured from the plain recording by the proofs), ``also_allowed`` only symptoms
of that same cause.
"""

from __future__ import annotations

from galleries.health.field._case import FieldCase
from galleries.health.sealed_zoo import case as _case
from galleries.health.zoo2 import _builds as build
from galleries.health.zoo2 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- pair 1: dead ReLUs from initialisation / from outlier rows / from an LR far too high
    _case(
        name="digits_cnn_negative_conv_bias_init_dead",
        build=build.conv_bias_init,
        expected="dead_units",
        proof=proof.conv_bias_dead,
        also_allowed=("not_learning",),
        description="Dead units from initialisation: a digits CNN whose conv biases start at -3; no channel "
        "ever fires, no gradient reaches the convolutions, the loss stays at ln 10.",
    ),
    _case(
        name="listings_regression_sentinel_area_kills_units",
        build=build.listings_sentinel,
        expected="dead_units",
        onset_step=proof.LISTING_ONSET,
        proof=proof.listing_sentinels_kill_units,
        also_allowed=("outlier_batches", "exploding_gradients"),
        max_steps=94,
        check_every=10,
        description="Dead units from outlier rows: listings read in date order, three rows' missing area "
        "exported as 299 (standardised column); their batch's gradient spike (step 40) kills most of the "
        "second layer's ReLUs.",
    ),
    _case(
        name="embedding_mlp_sgd_lr_far_too_high_kills_units",
        build=build.embedding_sgd,
        expected="lr_too_high",
        proof=proof.embedding_sgd_lr_kills_units,
        also_allowed=("dead_units", "not_learning"),
        description="Dead units from an LR far too high: an embedding + MLP token classifier, SGD with "
        "momentum at 1.0; early on every hidden ReLU dies and the loss sits near ln 3.",
    ),
    # -- pair 2: non-finite from the data / from the update (finite data)
    _case(
        name="tabular_unguarded_ratio_feature_inf",
        build=build.ratio_feature_inf,
        expected="nonfinite_activations",
        onset_step=proof.INF_ONSET,
        proof=proof.inf_ratio_poisons,
        max_steps=150,
        check_every=10,
        description="Non-finite from the data: a ratio feature a/b computed without a guard, two rows have "
        "b = 0 and carry +-inf; the loss is NaN at their batch (step 60), every weight NaN after.",
    ),
    _case(
        name="digits_handwritten_bce_log_of_zero",
        build=build.naive_bce,
        expected="nonfinite_activations",
        onset_step=proof.NAIVE_BCE_ONSET,
        proof=proof.naive_bce_nan,
        description="Non-finite from the loss, finite data: a zero-vs-rest digits MLP with the binary "
        "cross-entropy written as y log p + (1-y) log(1-p); once a logit passes ~17, p rounds to 1 and "
        "0 * log 0 is NaN (step 198).",
    ),
    _case(
        name="token_classifier_adam_eps_zero",
        build=build.adam_eps_zero,
        expected="nonfinite_activations",
        onset_step=proof.EPS_ONSET,
        proof=proof.adam_eps_zero_nan,
        max_steps=100,
        check_every=10,
        description="Non-finite from the update, finite data: Adam with eps=0; embedding rows of tokens "
        "no batch uses (spare vocabulary rows) get 0/0, NaN weights after the first step.",
    ),
    # -- pair 3: validation loss rising from overfitting / from divergence
    _case(
        name="digits_mlp_thirty_images_overfits",
        build=build.few_digits_mlp,
        expected="overfitting",
        onset_step=proof.OVERFIT_ONSET,
        proof=proof.few_rows_overfit,
        max_epochs=100,
        check_every=15,
        description="A 2x256 MLP on the first 30 digit images (a debug subset left in): training loss to "
        "~1e-5 while the validation loss climbs to over 1.5x its best (epoch 5).",
        max_steps=-1,
    ),
    _case(
        name="regression_warmup_to_ten_times_the_lr_diverges",
        build=build.warmup_too_far,
        expected="lr_too_high",
        onset_step=proof.DIVERGE_ONSET,
        proof=proof.warmup_diverges,
        also_allowed=("exploding_gradients",),
        description="A diverging run: SGD warmed up linearly to 0.3 (meant 0.03) on a regression MLP; the "
        "loss falls while the LR is small, then training and validation loss both rise.",
    ),
    # -- pair 4: loss stuck at its trivial level
    _case(
        name="embedding_mlp_adam_lr_typo_far_too_low",
        build=build.embedding_lr_typo,
        expected="lr_too_low",
        proof=proof.embedding_lr_typo_stuck,
        also_allowed=("not_learning", "loss_plateau"),
        description="Trivial loss from an LR far too low: Adam at 1e-7 (typed for 1e-3) on an embedding + "
        "MLP classifier; updates under 1e-5 of the weights, the loss does not leave ln 3.",
    ),
    _case(
        name="regression_targets_joined_on_wrong_key",
        build=build.regression_join_bug,
        expected="not_learning",
        proof=proof.join_bug_learns_nothing,
        description="Trivial loss from labels that do not match the inputs: targets joined on a renumbered "
        "row id; the loss stays at the target's variance, train and validation.",
    ),
    _case(
        name="digits_cnn_adam_lr_far_too_high_trivial_loss",
        build=build.conv_adam_far_too_high,
        expected="lr_too_high",
        proof=proof.conv_adam_far_too_high,
        also_allowed=("dead_units", "not_learning"),
        description="Trivial loss from an LR far too high for an adaptive optimizer: a digits CNN with Adam "
        "at 0.5; the loss explodes in the first steps, then sits at ln 10.",
    ),
    # -- pair 5: gradient-norm spikes from outlier samples / from the LR; exploding gradients in an RNN
    _case(
        name="regression_wrong_unit_targets_spike",
        build=build.unit_error_targets,
        expected="outlier_batches",
        onset_step=proof.UNIT_ERROR_ONSET,
        proof=proof.unit_error_spikes,
        description="Spikes from outlier samples: four regression targets exported in the wrong unit (x300); "
        "the batches holding one carry every gradient spike (>10x the median), the others train.",
    ),
    _case(
        name="digits_tanh_mlp_sgd_lr_too_high_spikes",
        build=build.digits_tanh_sgd,
        expected="lr_too_high",
        proof=proof.tanh_sgd_lr_spikes,
        also_allowed=("exploding_gradients",),
        description="Spikes from the LR on ordinary batches: a digits tanh MLP with SGD at 0.5 (meant 0.05); "
        "the loss jumps 3x on ~20 ordinary batches and ends 5x above the fixed run's.",
    ),
    _case(
        name="forecast_relu_rnn_recurrent_gain_explodes",
        build=build.forecast_rnn,
        expected="exploding_gradients",
        onset_step=proof.RNN_ONSET,
        proof=proof.rnn_gradients_explode,
        also_allowed=("nonfinite_activations",),
        max_steps=200,
        check_every=10,
        description="A ReLU RNN forecasting a series, recurrent weights orthogonal x 1.45 'to remember "
        "longer': a first gradient >100x the fixed run's, ~1e3-1e4 through 40 steps, NaN after two updates.",
    ),
    # -- and a stall whose cost is in the collate function, not the dataset
    _case(
        name="token_classifier_collate_refetches_vocabulary",
        build=build.slow_collate,
        expected="data_stall",
        proof=proof.collate_stalls,
        max_steps=120,
        check_every=12,
        description="A collate_fn that re-fetches the vocabulary from remote storage (~30 ms) for every "
        "batch in the main process: the loop waits for data most of the time.",
    ),
]

HEALTHY_CASES: list[FieldCase] = [
    _case(
        name="digits_mlp_batch_two_adam",
        build=build.digits_batch2_adam,
        expected=None,
        proof=proof.batch2_trains,
        trainer_kwargs={"val_check_interval": 100},
        description="Batch 2, Adam 3e-3: every step's loss jumps, validation falls at each check.",
    ),
    _case(
        name="digits_cnn_shift_and_noise_augmentation",
        build=build.augmented_cnn,
        expected=None,
        proof=proof.augmented_trains,
        description="Heavy augmentation (shifts, pixel noise 0.3): training loss far above validation loss.",
    ),
    _case(
        name="tabular_sgd_cosine_warm_restarts",
        build=build.warm_restarts,
        expected=None,
        proof=proof.warm_restarts_train,
        description="SGD at 0.2 under cosine warm restarts every 60 steps: the loss bumps at each restart.",
    ),
    _case(
        name="digits_zero_vs_one_solved_then_idles",
        build=build.separable_idles,
        expected=None,
        proof=proof.separable_idles,
        description="0 vs 1 digits: solved in ~50 steps, then idles with tiny loss and gradients.",
    ),
    _case(
        name="noisy_xor_long_plateau_then_drop",
        build=build.xor_plateau,
        expected=None,
        proof=proof.xor_plateau_then_drop,
        description="XOR of two features among eight noise ones, small init: ~200 steps at ln 2, then it "
        "finds the XOR.",
    ),
    _case(
        name="regression_unit_noise_high_floor",
        build=build.noisy_targets,
        expected=None,
        proof=proof.noise_floor,
        description="Targets with unit-variance noise: the loss floors at ~1, the best possible.",
    ),
    _case(
        name="digits_mlp_bf16_mixed_precision",
        build=build.bf16_mixed,
        expected=None,
        proof=proof.bf16_trains,
        trainer_kwargs={"precision": "bf16-mixed"},
        description="bf16 autocast: a coarser, noisier loss and gradient, trains normally.",
    ),
    _case(
        name="digits_classifier_plus_reconstruction_heads",
        build=build.two_heads,
        expected=None,
        proof=proof.two_heads_train,
        description="Two heads on one trunk, cross-entropy + 10 x reconstruction MSE, summed.",
    ),
    _case(
        name="token_mlp_dropout_batch8_accumulated",
        build=build.accumulated_dropout,
        expected=None,
        proof=proof.accumulated_trains,
        max_steps=150,
        check_every=15,
        trainer_kwargs={"accumulate_grad_batches": 4},
        description="Dropout 0.3, batch 8 accumulated over 4 batches, AdamW warmup-cosine.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
