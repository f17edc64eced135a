"""Zoo 21's runs: new tasks (extractive span question answering with a tiny hand-written transformer
encoder, fitted Q-learning on a ten-state ring MDP, next-basket multi-hot prediction, colourisation of
synthetic shapes with a small CNN, selective classification with an abstain output, balanced-bracket
recognition with a GRU), new optimizers and schedules (AdamW under a LambdaLR warm-up, RMSprop, Adagrad, SGD
under MultiStepLR, Adam under CyclicLR, Adadelta and plain SGD), new bugs (a decay lambda missing its
``/ 100``, a tokenizer-style attention mask handed to ``masked_fill``, a per-image standardisation without
epsilon, an LR typo 100x, an optimizer built from the decoder alone, sigmoids between convolutions, a debug
subset left in, the rare-label bias trick applied to every layer, Adagrad at 1.0, a triangular2 ``scale_fn``
written upside down, a Dataset that rebuilds its shard per row, a logger's ``-999`` sentinel rewards, the
Adam LR carried over to Adadelta, labels left unshuffled), blind pairs, runs a repair could save, healthy
look-alikes.

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
from galleries.health.zoo21 import _builds as build
from galleries.health.zoo21 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind trio: NaN from the attention's mask / from a non-finite input / from an LR blow-up
    case(
        "span_qa_attention_mask_convention_inverted",
        build.qa_mask_convention,
        "nonfinite_activations",
        proof.qa_mask_nan,
        "NaN made inside the network: span QA with a hand-written attention, AdamW 3e-3 with a linear "
        "warm-up; the tokenizer-style mask (True at real tokens) is passed where masked_fill wants True at "
        "the keys to ignore, so the first context with no padding has every key masked, its softmax is "
        "0/0 and the loss NaN, on finite token ids, finite weights and a normal LR.",
        onset_step=build.QA_FULL_BATCH,
        max_steps=100,
        trainer_kwargs=every(25),
    ),
    case(
        "colourise_blank_canvas_standardised_without_eps",
        build.colour_no_eps,
        "inputs",
        proof.colour_blank_nan,
        "NaN from broken inputs: colourisation of shapes, SGD momentum 0.9 at 0.2 under MultiStepLR, read "
        "in order; the per-image standardisation divides by the std with no epsilon and two canvases are "
        "blank (std 0), so batch 150's inputs are non-finite (x / 0) and its update makes every weight NaN.",
        onset_step=build.BLANK_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(32),
    ),
    case(
        "colourise_sgd_lr_100x_typo",
        build.colour_lr_typo,
        "lr_too_high",
        proof.colour_lr_nan,
        "NaN from an LR blow-up on clean inputs: colourisation of shapes, SGD momentum 0.9 at 20 (meant "
        "0.2); the loss grows >100x within a few steps and turns non-finite.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        trainer_kwargs=every(32),
    ),
    # -- blind pair (+1): the validation loss rising from overfitting / an LR grown past its maximum /
    #    poisoned targets
    case(
        "next_basket_wide_mlp_on_128_shoppers_overfits",
        build.basket_few_shoppers,
        "overfitting",
        proof.basket_overfits,
        "Overfitting: next-basket prediction by a width-1024 two-hidden-layer MLP, Adagrad 0.05, on the 128 "
        "shoppers of a debug sample left in (4 steps an epoch), validated every epoch; the training BCE "
        "falls to ~0 while the validation BCE climbs from its best to twice it.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "selective_cyclic_scale_fn_doubles_each_cycle",
        build.selective_doubling,
        "lr_too_high",
        proof.selective_doubling_diverges,
        "An LR growing past its maximum: selective classification with an abstain output, Adam under "
        "CyclicLR(1e-4, 5e-3) with a scale_fn meant to halve the amplitude each cycle (1 / 2 ** (x - 1)) "
        "written 2 ** (x - 1); from the second cycle the LR exceeds max_lr, doubling each cycle, the "
        "validation loss climbs and the network collapses to abstaining on everything.",
        onset_step=build.DOUBLING_ONSET,
        also_allowed=("dead_units", "loss_plateau"),
        max_steps=200,
        trainer_kwargs=every(10),
    ),
    case(
        "fitted_q_logger_sentinel_rewards_minus_999",
        build.q_sentinel_rewards,
        "inputs",
        proof.q_sentinel_outliers,
        "Broken input data: fitted Q-learning on a ring MDP, RMSprop 1e-3; six truncated steps of the "
        "transition log carry the logger's missing-value sentinel -999 as their reward, so the batches "
        "holding them have losses ~1e5x the others and drag the Q values away: the validation error "
        "against Q* rises instead of falling.",
        onset_step=build.SENTINEL_BATCH,
        also_allowed=("outlier_batches",),
        trainer_kwargs=every(32),
    ),
    # -- blind pair: dead ReLUs from an initialisation / from an LR too high
    case(
        "next_basket_rare_label_bias_on_every_layer",
        build.basket_prior_bias,
        "initialisation",
        proof.basket_prior_dead,
        "Dead units from initialisation: next-basket MLP, Adagrad 0.05; the rare-label bias trick "
        "(bias = -log((1 - p) / p) ~ -1.9) is applied with model.apply to every Linear layer, not just the "
        "output, so every hidden ReLU is negative on every basket from step 0 and the loss stays at the "
        "items' base rates.",
        also_allowed=("dead_units", "not_learning", "loss_plateau"),
        trainer_kwargs=every(50),
    ),
    case(
        "next_basket_adagrad_lr_1",
        build.basket_adagrad_lr,
        "lr_too_high",
        proof.basket_lr_kills,
        "Dead units from an LR too high: next-basket MLP, Adagrad at 1.0 (meant 0.05); Adagrad's first "
        "step moves every weight by ~1, which leaves ~70% of the hidden ReLUs dead for good and the "
        "validation BCE well above the fixed run's.",
        also_allowed=("dead_units",),
        trainer_kwargs=every(50),
    ),
    # -- blind pair: the loss stuck at its trivial level from an LR / from labels
    case(
        "brackets_gru_adadelta_lr_copied_from_adam",
        build.brackets_adadelta_lr,
        "lr_too_low",
        proof.brackets_lr_stuck,
        "Loss stuck near ln 2 from an LR 1000x too low: balanced-bracket recognition with a GRU, Adadelta "
        "at lr=1e-3 (the Adam value carried over; Adadelta's own LR is 1.0); the labels are right, the "
        "updates ~1000x too small.",
        also_allowed=STUCK,
        trainer_kwargs=every(32),
    ),
    case(
        "brackets_gru_labels_kept_in_old_order",
        build.brackets_labels_before_shuffle,
        "not_learning",
        proof.brackets_labels_stuck,
        "Loss stuck at ln 2 from the labels: balanced-bracket recognition with a GRU, Adadelta 1.0; the "
        "pipeline shuffles the strings and keeps the labels in their old order, so the labels carry no "
        "information about the inputs; the updates are normal in size.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(32),
    ),
    # -- single causes
    case(
        "span_qa_decay_lambda_halves_every_step",
        build.qa_decay,
        "lr_too_low",
        proof.qa_decay_collapses,
        "An LR collapsed after warm-up: span QA, AdamW 3e-3 under a LambdaLR whose decay, meant to halve "
        "the LR every 100 steps, is written 0.5 ** (step - 30) (the / 100 left out); from step 37 the LR "
        "is below 1% of its peak and the loss freezes far above the fixed run's.",
        onset_step=build.QA_COLLAPSE,
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    case(
        "colourise_optimizer_built_from_decoder_only",
        build.colour_decoder_only,
        "frozen_parameters",
        proof.colour_encoder_frozen,
        "A frozen encoder from a leftover line: colourisation of shapes, SGD momentum 0.9 at 0.2 built from "
        "net.decoder.parameters() (copied from a fine-tuning script); the encoder gets gradients and never "
        "changes, the validation error stays ~6x the fixed run's.",
        trainer_kwargs=every(32),
    ),
    case(
        "colourise_sigmoid_between_every_conv",
        build.colour_sigmoid,
        "vanishing_gradients",
        proof.colour_vanishes,
        "Vanishing gradients from the architecture: colourisation of shapes, SGD momentum 0.9 at 0.2, with "
        'the config\'s activation="sigmoid" (meant for the output) between every convolution; the first '
        "convolution's gradient is <1/1000 of the last one's and the loss barely moves off the mean colour.",
        also_allowed=("not_learning", "loss_plateau"),
        trainer_kwargs=every(32),
    ),
    case(
        "selective_dataset_rebuilds_shard_per_row",
        build.selective_rebuilt_table,
        "data_stall",
        proof.selective_stalls,
        "A slow data pipeline: selective classification, Adam under CyclicLR; the Dataset keeps the table "
        "as Python lists and, for every row it returns, re-materialises and re-standardises that row's "
        "512-row shard, so each batch waits several times longer than its step.",
        max_steps=150,
        trainer_kwargs=every(20),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "colourise_blank_canvas_standardised_without_eps",
    "next_basket_wide_mlp_on_128_shoppers_overfits",
    "selective_cyclic_scale_fn_doubles_each_cycle",
    "span_qa_decay_lambda_halves_every_step",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "span_qa_linear_warmup_150_steps",
        build.qa_long_warmup,
        None,
        proof.qa_warmup_trains,
        "Span QA, AdamW 3e-3 with a LambdaLR linear warm-up from ~0 over 150 steps: nothing moves at first, "
        "then it learns to pick the asked span.",
        trainer_kwargs=every(25),
    ),
    case(
        "span_qa_validated_on_8_questions",
        build.qa_tiny_val,
        None,
        proof.qa_tiny_val_trains,
        "Span QA validated on 8 questions only: a validation loss from so few questions that it rises at a "
        "check, yet falls >10x overall.",
        trainer_kwargs=every(25),
    ),
    case(
        "colourise_lr_divided_by_4_at_150_and_250",
        build.colour_step_decays,
        None,
        proof.colour_decays_train,
        "Colourisation of shapes, SGD momentum 0.9 at 0.2 under MultiStepLR([150, 250], 0.25): step decays, "
        "a loss that keeps falling.",
        trainer_kwargs=every(32),
    ),
    case(
        "colourise_first_conv_fixed_filter_bank",
        build.colour_fixed_filters,
        None,
        proof.colour_fixed_filters_train,
        "Colourisation whose first convolution is a fixed bank of identity, Sobel, Laplacian and blur "
        "filters, frozen on purpose (not handed to the optimizer); the rest trains well.",
        trainer_kwargs=every(32),
    ),
    case(
        "next_basket_batches_of_1024",
        build.basket_big_batch,
        None,
        proof.basket_big_batch_trains,
        "Next-basket prediction in batches of 1024 (16 steps an epoch), Adagrad 0.05: few, smooth steps "
        "to a BCE well below the items' base rates, then flat at the data's floor.",
    ),
    case(
        "selective_35pct_labels_random_on_purpose",
        build.selective_ambiguous,
        None,
        proof.selective_ambiguous_trains,
        "Selective classification with 35% of the labels random on purpose (unknowable points the abstain "
        "output should take): a high training floor, a falling validation loss.",
        trainer_kwargs=every(20),
    ),
    case(
        "selective_cyclic_triangular2",
        build.selective_triangular2,
        None,
        proof.selective_triangular2_trains,
        "Selective classification, Adam under CyclicLR with the amplitude halved each cycle (triangular2 "
        "written by hand): LR bumps that shrink, a steady fall.",
        trainer_kwargs=every(20),
    ),
    case(
        "selective_cyclic_triangular_bumps",
        build.selective_cycles,
        None,
        proof.selective_cycles_train,
        "Selective classification, Adam under a plain triangular CyclicLR(1e-4, 5e-3): every 20 steps "
        "the LR peaks and the loss is set back a little, yet it falls.",
        trainer_kwargs=every(20),
    ),
    case(
        "fitted_q_rewards_in_raw_points",
        build.q_raw_rewards,
        None,
        proof.q_raw_trains,
        "Fitted Q-learning with the reward in the game's raw points (20 per goal): squared errors in the "
        "tens and thousands, gradients in the tens, RMSprop 1e-2 fits Q* to ~1% of its initial error.",
        trainer_kwargs=every(32),
    ),
    case(
        "fitted_q_target_synced_every_50_steps",
        build.q_slow_sync,
        None,
        proof.q_slow_sync_trains,
        "Fitted Q-learning whose target network is refreshed only every 50 steps: the TD loss jumps at "
        "most refreshes, the error against Q* falls.",
        trainer_kwargs=every(32),
    ),
    case(
        "brackets_gru_plain_sgd_with_spikes",
        build.brackets_sgd,
        None,
        proof.brackets_sgd_trains,
        "Balanced brackets with a GRU under plain SGD 0.5: loss spikes to >5x the recent level (one above "
        "the initial loss) along the way, then near perfect.",
        trainer_kwargs=every(32),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
