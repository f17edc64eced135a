"""Zoo 18's runs: new tasks (heteroscedastic regression with a Gaussian NLL over a predicted log-variance,
link prediction on a stochastic-block-model graph with negative sampling, attention-pooling multiple-instance
learning over bags of 8x8 digits, a character-level GRU language model of a generated text, a small patch
transformer of 8x8 digits), new optimizers and schedules (RAdam, NAdam, Adamax, Adagrad, SGD with Nesterov
momentum; OneCycleLR, triangular CyclicLR, PolynomialLR, CosineAnnealingWarmRestarts, none), new bugs (a
sensor dropout stored as NaN, negatives drawn as the reordered positives, hidden biases initialised to -1,
an Adadelta ``lr=1.0`` kept for RAdam, a CyclicLR ``max_lr`` that lost its exponent, a linear-probe
optimizer over the head alone, PolynomialLR epochs taken as steps, ``batch_first`` left out of a
transformer, a compressed archive decompressed for every image), blind pairs, runs a repair could save,
healthy look-alikes.

Written blind (without reading HealthMonitor's rules or any other zoo), each run different in task or bug
from the sealed zoos before it. Each problem run holds one bug a user could have written; ``expected`` names
the cause a careful engineer would accept (the description names the root cause), ``onset_step`` the first
optimizer step at which the problem exists (measured from the plain recording by the proofs),
``also_allowed`` only symptoms of that same cause. :data:`REPAIRABLE` names the runs a repair callback can
save in process: their proofs measure the final and the best validation loss.
"""

from __future__ import annotations

from galleries.health.field._case import FieldCase
from galleries.health.sealed_zoo import LR_BLOWUP, STUCK, case, every
from galleries.health.zoo18 import _builds as build
from galleries.health.zoo18 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair: a heteroscedastic NLL that turns NaN, from one bad input / from an LR blow-up
    case(
        "hetero_sensor_dropout_stored_as_nan",
        build.hetero_sensor_gap,
        "inputs",
        proof.hetero_gap_nan,
        "NaN from one non-finite input: heteroscedastic regression read in recording order, NAdam 2e-3; a "
        "sensor dropout was stored as NaN instead of the row being dropped, so batch 45's loss is NaN and "
        "its update makes every weight NaN.",
        onset_step=proof.GAP_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    case(
        "hetero_sgd_nesterov_lr_10x_nan",
        build.hetero_sgd,
        "lr_too_high",
        proof.hetero_sgd_nan,
        "NaN from an LR blow-up on clean inputs: heteroscedastic regression, SGD with Nesterov momentum at "
        "0.3 (meant 0.03); the Gaussian NLL grows 15x within six steps, is inf at step 9 and NaN from then "
        "on.",
        also_allowed=LR_BLOWUP,
        trainer_kwargs=every(20),
    ),
    # -- blind pair: dead ReLUs, the NLL stuck at the best constant prediction's
    case(
        "hetero_hidden_biases_initialised_to_minus_one",
        build.hetero_negative_bias,
        "initialisation",
        proof.hetero_bias_dead,
        "Dead ReLUs from initialisation: heteroscedastic regression, NAdam 2e-3, every hidden bias set to -1 "
        "by an init helper meant for sparse codes; no second-layer unit fires for any row from step 0, no "
        "gradient reaches the hidden layers and the NLL sits at the constant prediction's.",
        also_allowed=("dead_units", "not_learning"),
        trainer_kwargs=every(20),
    ),
    case(
        "hetero_radam_lr_1_from_an_adadelta_config",
        build.hetero_radam,
        "lr_too_high",
        proof.hetero_radam_dead,
        "Dead ReLUs from an LR 1000x too high: heteroscedastic regression, RAdam at 1.0 (the lr=1.0 of an "
        "Adadelta config kept when the optimizer was swapped; meant 1e-3); the units are alive at step 0, "
        "the oversized steps kill them one by one until the NLL sits at the constant prediction's.",
        also_allowed=("dead_units",),
        trainer_kwargs=every(20),
    ),
    # -- blind pair: link prediction's BCE stuck at ln 2 from step 0
    case(
        "link_negatives_sampled_as_reordered_positives",
        build.link_negatives,
        "not_learning",
        proof.link_negatives_stuck,
        "Trivial loss from a sampling bug: link prediction on a block-model graph, Adagrad 0.1; the "
        "negatives are edges[randperm] (the batch's positive edges reordered; meant: the destinations "
        "permuted), so every pair is labelled 1 and 0 and the model learns to score every pair 0: the BCE "
        "sits at ln 2.",
        also_allowed=("loss_plateau",),
    ),
    case(
        "link_adagrad_lr_1e_4_not_1e_1",
        build.link_adagrad,
        "lr_too_low",
        proof.link_lr_stuck,
        "Trivial loss from an LR 1000x too low: link prediction on a block-model graph, Adagrad at 1e-4 "
        "(meant 1e-1); the negatives are right and the gradients flow, but the embeddings barely move and "
        "the BCE sits at ln 2.",
        also_allowed=STUCK,
    ),
    # -- blind pair: the validation loss rising from its best mid-run
    case(
        "link_embeddings_weight_decay_read_as_zero_overfit",
        build.link_no_decay,
        "overfitting",
        proof.link_overfits,
        "Overfitting: link prediction with 32-d node embeddings, Adagrad 0.2, the config's weight_decay read "
        "as 0 (meant 3e-4); the embeddings memorise the training graph, the training BCE keeps falling while "
        "the held-out BCE climbs 60% from its best after epoch 2.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "char_gru_cyclic_max_lr_3_not_3e_2",
        build.char_cyclic,
        "lr_too_high",
        proof.char_cyclic_diverges,
        "An LR climbing far too high: a character GRU language model, RAdam under a triangular CyclicLR from "
        "1e-3 to max_lr=3.0 (meant 3e-2) over 250 steps; it learns while the LR is small, then from the LR "
        "~0.9 (step 75) on the loss stays above 1.5x its best and the validation loss climbs 20x.",
        onset_step=proof.CYCLIC_ONSET,
        also_allowed=("exploding_gradients",),
        trainer_kwargs=every(20),
    ),
    # -- single causes
    case(
        "char_gru_optimizer_over_the_head_only",
        build.char_head_only,
        "frozen_parameters",
        proof.char_body_frozen,
        "A frozen body: a character GRU language model whose Adamax is built over "
        "model.net.head.parameters() (a linear-probe script's line kept); the embedding and the GRU get "
        "gradients and never change, only the readout learns, slowly, on random features.",
        max_steps=200,
        trainer_kwargs=every(20),
    ),
    case(
        "mil_polynomial_lr_epochs_taken_as_steps",
        build.mil_polynomial,
        "lr_too_low",
        proof.mil_lr_collapses,
        "An LR collapsed to zero: attention multiple-instance learning over bags of digits, NAdam 3e-3 under "
        "PolynomialLR(total_iters=30) meant in epochs (600 steps) but stepped per batch; the LR is exactly 0 "
        "from step 30 and the model is frozen far above the fixed run's loss.",
        onset_step=proof.POLY_ONSET,
        also_allowed=("loss_plateau", "not_learning"),
    ),
    case(
        "patch_transformer_batch_first_left_out",
        build.patch_batch_first,
        "not_learning",
        proof.patch_blind,
        "Trivial loss from an architecture bug: a patch transformer of 8x8 digits, NAdam 2e-3, its encoder "
        "layers built without batch_first=True though fed (batch, tokens, dim); attention mixes the batch's "
        "images, the class token never sees its own patches and the loss sits at ln 10.",
        also_allowed=("loss_plateau",),
    ),
    case(
        "patch_transformer_archive_decompressed_per_image",
        build.patch_archive_per_item,
        "data_stall",
        proof.patch_stalls,
        "A data stall: a patch transformer of 8x8 digits whose Dataset keeps the compressed .npz archive and "
        "decompresses all of it in __getitem__ for every image (meant: once, in __init__); each batch of 32 "
        "waits several times as long as its training step.",
        max_steps=100,
        check_every=10,
        trainer_kwargs=every(22),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "hetero_sensor_dropout_stored_as_nan",
    "link_adagrad_lr_1e_4_not_1e_1",
    "link_embeddings_weight_decay_read_as_zero_overfit",
    "char_gru_cyclic_max_lr_3_not_3e_2",
    "mil_polynomial_lr_epochs_taken_as_steps",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "hetero_onecycle_adamax_starting_1000x_low",
        build.hetero_onecycle_warmup,
        None,
        proof.hetero_onecycle_trains,
        "Heteroscedastic regression under OneCycleLR from 2e-5 up to 2e-2 over 90 steps (div_factor 1000), "
        "Adamax: nothing moves at first, then it learns and anneals.",
        trainer_kwargs=every(20),
    ),
    case(
        "hetero_nadam_cosine_warm_restarts",
        build.hetero_warm_restarts,
        None,
        proof.hetero_restarts_train,
        "Heteroscedastic regression, NAdam under CosineAnnealingWarmRestarts(T_0=50, T_mult=2): the LR jumps "
        "from ~0 back to 3e-3 at steps 50 and 150, with bumps in the loss, and it trains.",
        trainer_kwargs=every(20),
    ),
    case(
        "link_two_big_batches_an_epoch",
        build.link_big_batches,
        None,
        proof.link_big_batches_train,
        "Link prediction in batches of 950 edges and 950 negatives (two steps an epoch), Adagrad 0.1 with "
        "weight decay, validated every 10 epochs: few, smooth steps that train.",
        trainer_kwargs={"check_val_every_n_epoch": 10},
    ),
    case(
        "link_sgd_nesterov_slow_start",
        build.link_sgd_slow,
        None,
        proof.link_slow_trains,
        "Link prediction, SGD with Nesterov momentum at 2.0 from small embeddings: the BCE sits near ln 2 "
        "for the first epochs, then falls steadily.",
    ),
    case(
        "mil_20pct_bag_labels_flipped",
        build.mil_flipped_labels,
        None,
        proof.mil_flipped_trains,
        "Multiple-instance learning with 20% of the training bag labels flipped (a noisy weak-label source): "
        "the training loss floors near H(0.2), the exactly-labelled validation loss falls.",
    ),
    case(
        "mil_polynomial_lr_to_zero_over_the_run",
        build.mil_polynomial_over_run,
        None,
        proof.mil_polynomial_trains,
        "Multiple-instance learning, NAdam 3e-3 under PolynomialLR(total_iters=300, power=2): the LR reaches "
        "~0 at the end by design, after the model has learned.",
    ),
    case(
        "char_gru_cyclic_lr_to_3e_2",
        build.char_cyclic_sane,
        None,
        proof.char_cyclic_trains,
        "A character GRU, RAdam under a triangular CyclicLR from 1e-3 to 3e-2 over 250 steps: a 30x LR ramp "
        "that it tolerates.",
        trainer_kwargs=every(20),
    ),
    case(
        "char_gru_one_hot_embedding_frozen_on_purpose",
        build.char_frozen_one_hot,
        None,
        proof.char_one_hot_trains,
        "A character GRU reading fixed one-hot codes (its embedding an identity matrix, frozen on purpose), "
        "NAdam 3e-3: it trains.",
        trainer_kwargs=every(20),
    ),
    case(
        "patch_transformer_validated_on_24_digits",
        build.patch_tiny_validation,
        None,
        proof.patch_tiny_val_trains,
        "A patch transformer of 8x8 digits validated on 24 digits only: a validation loss that rises at some "
        "checks, yet falls 10x overall.",
    ),
    case(
        "patch_transformer_sgd_nesterov_no_schedule",
        build.patch_sgd_nesterov,
        None,
        proof.patch_sgd_trains,
        "A patch transformer of 8x8 digits, SGD with Nesterov momentum at 0.05 and no schedule: it trains.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
