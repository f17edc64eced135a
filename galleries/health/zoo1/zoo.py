"""The sealed zoo's runs: 13 users' training problems and 8 healthy runs that look unusual.

Each problem run holds one bug a user could have written; its ``expected`` names the cause a careful engineer
would accept, ``onset_step`` the first optimizer step at which the problem exists (measured from the plain
recording, see the proofs), ``also_allowed`` only symptoms of that same cause.
"""

from __future__ import annotations

from galleries.health.field._case import FieldCase
from galleries.health.sealed_zoo import case as _case
from galleries.health.zoo1 import _builds as build
from galleries.health.zoo1 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    _case(
        name="tabular_mlp_adam_lr_typo_far_too_high",
        build=build.tabular_adam,
        expected="lr_too_high",
        proof=proof.tabular_lr_far_too_high,
        also_allowed=("dead_units", "not_learning"),
        max_steps=240,
        description="Adam at 3e-1 (meant 3e-4) on a 4-class tabular MLP: the loss blows up in the first "
        "steps, the ReLUs die and it ends at the prior, ln 4.",
    ),
    _case(
        name="digits_cnn_sgd_lr_far_too_low",
        build=build.digits_cnn_sgd,
        expected="lr_too_low",
        proof=proof.digits_lr_far_too_low,
        also_allowed=("not_learning", "loss_plateau"),
        check_every=25,
        description="SGD with momentum at an Adam-sized LR (2e-5) on a digits CNN: updates of ~1e-6 of the "
        "weights, the loss does not leave ln 10.",
    ),
    _case(
        name="gru_cosine_sized_for_one_epoch_lr_collapses",
        build=build.gru_schedule,
        expected="lr_too_low",
        onset_step=proof.GRU_ONSET,
        proof=proof.gru_schedule_collapse,
        also_allowed=("loss_plateau",),
        description="A GRU counting tokens, Adam with warmup-cosine whose length is len(train_loader) (one "
        "epoch) in a three-epoch run: the LR reaches zero at step 100 and the loss stops at ~0.35.",
    ),
    _case(
        name="regression_mlp_negative_bias_init_dead",
        build=build.regression_bias_init,
        expected="dead_units",
        proof=proof.bias_init_dead,
        also_allowed=("not_learning",),
        description="A regression MLP whose hidden biases start at -1 'for sparsity': the second layer never "
        "fires, no gradient reaches either layer, the loss stays at the target's variance.",
    ),
    _case(
        name="sensor_log_sentinel_rows_kill_units",
        build=build.sensor_log,
        expected="dead_units",
        onset_step=proof.SENSOR_ONSET,
        proof=proof.sentinel_rows_kill_units,
        also_allowed=("exploding_gradients",),
        max_steps=140,
        check_every=10,
        description="A sensor log in time order with four rows whose dropped-out reading was exported as "
        "-99: their batch's gradient spike kills most of the second layer's ReLUs at step 30.",
    ),
    _case(
        name="wide_mlp_240_rows_overfits",
        build=build.wide_mlp_few_rows,
        expected="overfitting",
        onset_step=proof.OVERFIT_ONSET,
        proof=proof.wide_mlp_overfits,
        max_epochs=30,
        check_every=16,
        description="A 2x256 MLP on 240 noisy tabular rows: training loss to ~0.01 while validation loss "
        "rises by half from its best (epoch 6).",
        max_steps=-1,
    ),
    _case(
        name="irnn_adding_problem_unclipped_gradients_explode",
        build=build.irnn_adding,
        expected="exploding_gradients",
        onset_step=proof.IRNN_ONSET,
        proof=proof.irnn_explodes,
        also_allowed=("dead_units", "not_learning"),
        max_steps=200,
        check_every=10,
        description="An identity-initialised ReLU RNN on the 60-step adding problem without the gradient "
        "clipping its recipe uses: gradient norms of ~1e8, the loss jumps to ~1e5.",
    ),
    _case(
        name="deep_sigmoid_mlp_gradients_vanish",
        build=build.deep_sigmoid,
        expected="vanishing_gradients",
        proof=proof.deep_sigmoid_vanishes,
        also_allowed=("not_learning", "loss_plateau"),
        max_steps=240,
        description="Twelve sigmoid layers on digits with SGD: the first layer's updates are ~1e-12 of its "
        "weights against ~1e-2 at the head, the loss stays at ln 10.",
    ),
    _case(
        name="tanh_mlp_raw_unscaled_features_saturate",
        build=build.unscaled_tanh,
        expected="saturated_activations",
        proof=proof.unscaled_inputs_saturate,
        also_allowed=("vanishing_gradients", "not_learning"),
        max_steps=240,
        description="A tanh MLP fed raw amounts in the hundreds and thousands (not standardised): the first "
        "layer outputs +-1, its gradient is zero, and the loss stays at ln 4.",
    ),
    _case(
        name="digits_inputs_and_labels_shuffled_apart",
        build=build.shuffled_apart,
        expected="not_learning",
        proof=proof.shuffled_apart_learns_nothing,
        description="A split that shuffles images and labels with two independent permutations: the loss "
        "sits at ln 10 and the validation accuracy at chance.",
    ),
    _case(
        name="transformer_lm_empty_line_nan_step",
        build=build.lm_per_line_mean,
        expected="nonfinite_activations",
        onset_step=proof.LM_ONSET,
        proof=proof.empty_line_nan,
        max_steps=150,
        check_every=10,
        description="A tiny transformer LM whose loss averages each line's tokens; one empty line gives 0/0 "
        "at step 70, the NaN update makes every weight NaN.",
    ),
    _case(
        name="tabular_cache_misses_stall_the_loader",
        build=build.slow_cache,
        expected="data_stall",
        proof=proof.cache_misses_stall,
        max_steps=150,
        check_every=15,
        description="Rows read through a cache where one row in ten misses and reads from storage (~12 ms), "
        "in the main process: the step waits for data most of the time.",
    ),
    _case(
        name="transformer_classifier_adamw_lr_too_high",
        build=build.transformer_classifier_adamw,
        expected="lr_too_high",
        proof=proof.transformer_lr_too_high,
        also_allowed=("not_learning",),
        max_steps=160,
        check_every=16,
        description="A tiny transformer classifier, AdamW at 5e-2 with no warmup: updates ~10x the healthy "
        "size, the loss bounces and ends several times above the same model's at 1e-3.",
    ),
]

HEALTHY_CASES: list[FieldCase] = [
    _case(
        name="tabular_large_batch_adamw_warmup_cosine",
        build=build.large_batch_warmup_cosine,
        expected=None,
        proof=proof.large_batch_trains,
        max_steps=160,
        check_every=16,
        trainer_kwargs={"check_val_every_n_epoch": 2},
        description="Batch 1024, AdamW warmed up over 16 steps then cosine: few, smooth steps.",
    ),
    _case(
        name="digits_cnn_heavy_dropout_onecycle",
        build=build.heavy_dropout_onecycle,
        expected=None,
        proof=proof.heavy_dropout_trains,
        max_steps=264,
        check_every=22,
        description="Dropout 0.5 before the head, SGD under OneCycle: training loss above validation loss.",
    ),
    _case(
        name="transformer_lm_high_peak_warmup",
        build=build.lm_warmup,
        expected=None,
        proof=proof.lm_warmup_trains,
        max_steps=240,
        description="A tiny transformer LM warmed up to a high peak LR (1e-2) then cosine.",
    ),
    _case(
        name="digits_mlp_label_smoothing_high_floor",
        build=build.label_smoothing,
        expected=None,
        proof=proof.label_smoothing_trains,
        description="Label smoothing 0.3: the training loss floors near 1.3, validation CE keeps falling.",
    ),
    _case(
        name="regression_batch4_plain_sgd_noisy",
        build=build.small_batch_sgd,
        expected=None,
        proof=proof.small_batch_trains,
        max_steps=600,
        check_every=50,
        description="Batch 4, plain SGD: each step's loss swings by 2x, the trend goes down.",
    ),
    _case(
        name="gru_plateau_at_prior_then_drop",
        build=build.gru_plateau_then_drop,
        expected=None,
        proof=proof.gru_plateau_then_drop,
        max_steps=240,
        description="A GRU counting tokens sits near the prior for ~80 steps, then learns.",
    ),
    _case(
        name="digits_autoencoder_converged_keeps_training",
        build=build.autoencoder_converged,
        expected=None,
        proof=proof.autoencoder_converged,
        max_steps=400,
        check_every=25,
        description="A digits autoencoder at a constant LR trained on into its slow tail: from step 250 "
        "on the loss gains under a quarter.",
    ),
    _case(
        name="digits_frozen_backbone_new_head",
        build=build.frozen_backbone,
        expected=None,
        proof=proof.frozen_backbone_trains,
        max_steps=200,
        description="A backbone pretrained on 700 digits, frozen; a new head on 700 others, SGD + cosine.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
