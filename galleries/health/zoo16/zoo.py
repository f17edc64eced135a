"""Zoo 16's runs: new tasks (node classification with a two-layer GCN over a dense generated stochastic-block
graph, listwise learning to rank of query groups with click-through features, scikit-learn's diabetes table),
new optimizers and schedules (Adamax, Adagrad, SGD with Nesterov momentum, AdamW with decoupled weight decay;
OneCycleLR, PolynomialLR, a LinearLR warm-up chained with a decay by SequentialLR; ``gradient_clip_val`` and
``accumulate_grad_batches``), new bugs (an adjacency normalised without self-loops over isolated nodes, an LR
whose exponent lost its minus sign, a click-through rate of never-shown documents, a target vector broadcast
against column predictions, a polynomial decay sized in epochs but stepped per batch, a OneCycle peak copied
from an SGD recipe, a layer left out of name-built parameter groups, a deep sigmoid scorer, a dataset that
scans the whole log for every query, mistyped targets), blind pairs, runs a repair could save, healthy
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
from galleries.health.zoo16 import _builds as build
from galleries.health.zoo16 import _proofs as proof

GRAPH_VAL = {"check_val_every_n_epoch": 10}  # full-batch: one step an epoch, validated every 10 steps

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair (and a third): a NaN loss from broken inputs / from an LR blow-up
    case(
        "gcn_adjacency_normalised_without_self_loops_nan",
        build.gcn_no_self_loops,
        "inputs",
        proof.gcn_no_self_loops_nan,
        "NaN from a broken input graph: a GCN, AdamW 1e-2; the adjacency is normalised D^-1/2 A D^-1/2 "
        "without adding self-loops, and twelve isolated nodes (new accounts) have degree 0, so 0^-1/2 = inf "
        "and inf * 0 = NaN fill the normalised adjacency fed with every batch: the loss is NaN from step 0.",
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=GRAPH_VAL,
    ),
    case(
        "gcn_sgd_nesterov_lr_exponent_sign_lost",
        build.gcn_sgd,
        "lr_too_high",
        proof.gcn_sgd_nan,
        "NaN from an LR blow-up on a clean graph: a GCN, SGD with Nesterov momentum 0.9 at 1e2 (the config's "
        "1e-2 lost its minus sign); the loss grows ~100x a step and is inf by step 17, then NaN.",
        also_allowed=LR_BLOWUP,
        trainer_kwargs=GRAPH_VAL,
    ),
    case(
        "ranking_ctr_of_never_shown_documents_nan",
        build.ranking_ctr,
        "inputs",
        proof.ranking_ctr_nan,
        "NaN from a few bad batches: listwise ranking, Adamax 2e-3, queries read in log order; the "
        "click-through rate is clicks / impressions with no guard, so three documents added after the click "
        "log was taken get 0 / 0 = NaN; batch 30 holds the first, its loss is NaN and its update makes every "
        "weight NaN.",
        onset_step=proof.CTR_ONSET,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    # -- blind pair: the loss at the target's variance from step 0
    case(
        "diabetes_adagrad_lr_from_a_finetuning_config",
        build.diabetes_adagrad,
        "lr_too_low",
        proof.diabetes_adagrad_stuck,
        "Trivial loss from an LR far too low: diabetes progression, Adagrad at 1e-5 (a fine-tuning config's "
        "LR; Adagrad wants ~1e-2, its steps only shrink from there); the weights move ~1e-5 a step and the "
        "MSE stays at the target's variance.",
        also_allowed=STUCK,
        trainer_kwargs=every(10),
    ),
    case(
        "diabetes_target_vector_broadcast_against_column_predictions",
        build.diabetes_broadcast,
        "not_learning",
        proof.diabetes_broadcast_stuck,
        "Trivial loss from a shape bug in the loss: diabetes progression, AdamW 3e-3; the target is a vector "
        "(N,) against (N, 1) predictions, so mse_loss broadcasts to (N, N) and scores every prediction "
        "against every patient: the best the model can do is the batch mean, and the MSE stays at the "
        "target's variance while the weights move normally.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(10),
    ),
    # -- blind pair: the validation loss rising from overfitting / from an LR too high
    case(
        "gcn_dropout_and_weight_decay_left_out_overfits",
        build.gcn_unregularised,
        "overfitting",
        proof.gcn_overfits,
        "Overfitting: a GCN, AdamW 1e-2 with the recipe's dropout 0.5 and weight decay 0.5 both left out; "
        "the training cross-entropy falls to ~0.003 while the validation loss climbs from its best at step "
        "40 to ~1.9x of it.",
        onset_step=proof.OVERFIT_ONSET,
        trainer_kwargs=GRAPH_VAL,
    ),
    case(
        "ranking_onecycle_max_lr_copied_from_sgd",
        build.ranking_onecycle,
        "lr_too_high",
        proof.ranking_onecycle_dies,
        "An LR too high mid-run: listwise ranking, AdamW under OneCycleLR(max_lr=1.0) (an SGD recipe's peak; "
        "meant 1e-2); from its start at 0.04 the LR kills hidden ReLUs (a quarter by step 11, as the fixed "
        "run never has), at ~0.45 (step 49) the loss jumps above its first value, the hidden layer is all "
        "dead and every document gets the same score: training and validation losses sit at log(16).",
        onset_step=proof.ONECYCLE_ONSET,
        also_allowed=("dead_units", "exploding_gradients"),
        trainer_kwargs=every(20),
    ),
    # -- an LR collapsing early
    case(
        "ranking_polynomial_decay_sized_in_epochs_stepped_per_batch",
        build.ranking_warmup_decay,
        "lr_too_low",
        proof.ranking_decay_collapses,
        "An LR collapsed to 0: listwise ranking, AdamW 3e-3 under SequentialLR (a 10-step LinearLR warm-up, "
        "then PolynomialLR with total_iters = max_epochs = 8, stepped every batch; meant 290 steps); the LR "
        "is 0 from step 18 and the loss is frozen far above the fixed run's.",
        onset_step=proof.DECAY_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(20),
    ),
    # -- blind pair: the first layer never moves (left out of the optimizer / gradients vanished)
    case(
        "ranking_encoder_left_out_of_name_built_param_groups",
        build.ranking_param_groups,
        "frozen_parameters",
        proof.ranking_encoder_frozen,
        "A frozen encoder from name-built parameter groups: a compact (width 8) ranking scorer, AdamW 3e-3 "
        "with a decayed group of weights named hidden*/out* (prefixes copied from an older scorer) and a "
        "group of biases; the encoder's weight is in neither, gets gradients and never changes.",
    ),
    case(
        "ranking_deep_sigmoid_scorer_gradients_vanish",
        build.ranking_deep_sigmoid,
        "vanishing_gradients",
        proof.ranking_sigmoid_vanishes,
        "Vanishing gradients from the architecture: a ranking scorer of eight width-32 sigmoid hidden "
        "layers, SGD Nesterov 0.05; the stack maps every document of a query to nearly the same point, the "
        "gradient norm is ~1e-7 and no layer moves, the loss stays at log(16).",
        also_allowed=STUCK,
    ),
    # -- single causes
    case(
        "ranking_dataset_scans_the_whole_log_for_every_query",
        build.ranking_query_log,
        "data_stall",
        proof.ranking_query_log_stalls,
        "A data-loading stall: listwise ranking, AdamW 3e-3, batches of 8 queries from a Dataset that keeps "
        "the click log's CSV lines and finds each query's documents by splitting and scanning all 10240 "
        "lines on every item; the step waits ~10x longer for its batch than it computes.",
        max_steps=100,
    ),
    case(
        "diabetes_two_targets_typed_with_an_extra_zero",
        build.diabetes_mistyped,
        "outlier_batches",
        proof.diabetes_mistyped_spikes,
        "Outlier batches from mistyped targets: diabetes progression, Adamax 2e-3, batches of 16; two "
        "patients' progression was typed with an extra zero (e.g. 1510 for 151), so the one or two batches "
        "an epoch that hold them have losses 10-100x the others'.",
        onset_step=proof.MISTYPED_ONSET,
        trainer_kwargs=every(10),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "ranking_ctr_of_never_shown_documents_nan",
    "diabetes_adagrad_lr_from_a_finetuning_config",
    "gcn_dropout_and_weight_decay_left_out_overfits",
    "ranking_onecycle_max_lr_copied_from_sgd",
    "ranking_polynomial_decay_sized_in_epochs_stepped_per_batch",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "gcn_warmup_from_1pct_then_quadratic_polynomial_decay",
        build.gcn_warmup_polynomial,
        None,
        proof.gcn_warmup_trains,
        "A GCN, AdamW 1e-2 under SequentialLR: a LinearLR warm-up from 1% over 100 steps (nothing moves at "
        "first), then a quadratic PolynomialLR decay to 0 over 200 steps (the LR ends near 0 on purpose).",
        trainer_kwargs=GRAPH_VAL,
    ),
    case(
        "gcn_first_layer_frozen_as_a_random_projection",
        build.gcn_random_projection,
        None,
        proof.gcn_projection_trains,
        "A GCN whose first layer (24 -> 256) is frozen on purpose as a random projection; only the readout "
        "trains, Adamax 1e-2, and well.",
        trainer_kwargs=GRAPH_VAL,
    ),
    case(
        "gcn_validated_on_8_nodes",
        build.gcn_tiny_validation,
        None,
        proof.gcn_tiny_val_trains,
        "A GCN validated on 8 labelled nodes only: a validation loss that rises at some checks, yet falls "
        "~7x overall.",
        trainer_kwargs=GRAPH_VAL,
    ),
    case(
        "diabetes_raw_target_sgd_nesterov_clipped_every_step",
        build.diabetes_raw_clipped,
        None,
        proof.diabetes_clipped_trains,
        "Diabetes with the target in its own units (MSE in the thousands, gradient norms in the hundreds), "
        "SGD Nesterov 0.05 with gradient_clip_val=1.0 clipping every step: it trains to the noise floor.",
        trainer_kwargs={**every(10), "gradient_clip_val": 1.0},
    ),
    case(
        "diabetes_adagrad_at_the_noise_floor",
        build.diabetes_adagrad_floor,
        None,
        proof.diabetes_floor_trains,
        "Diabetes, Adagrad 1e-2: the validation MSE reaches the least-squares fit's within ~50 steps and "
        "then barely moves (a plateau at the noise floor, not a stall).",
        trainer_kwargs=every(10),
    ),
    case(
        "ranking_micro_batches_of_2_accumulated_8x",
        build.ranking_accumulated,
        None,
        proof.ranking_accumulated_trains,
        "Listwise ranking in micro-batches of 2 queries with accumulate_grad_batches=8 (noisy per-batch "
        "losses, scaled by 1/8), AdamW 3e-3: trains as batches of 16 would.",
        trainer_kwargs={"accumulate_grad_batches": 8, "val_check_interval": 160},
    ),
    case(
        "ranking_30pct_of_training_grades_redrawn",
        build.ranking_noisy_grades,
        None,
        proof.ranking_noisy_trains,
        "30% of the training documents' grades redrawn at random (crowd judges): the training loss floors "
        "high, near log(16), while the editors' validation loss is far below log(16).",
        trainer_kwargs=every(20),
    ),
    case(
        "ranking_onecycle_lr_climbing_25x_then_annealed",
        build.ranking_onecycle_peak,
        None,
        proof.ranking_onecycle_peak_trains,
        "Listwise ranking, AdamW under OneCycleLR(max_lr=1e-2): the LR climbs 25x from 4e-4 by step 90, then "
        "anneals to ~0 by step 300 (slow at first, still at the end, on purpose).",
        trainer_kwargs=every(20),
    ),
    case(
        "ranking_whole_training_set_every_step",
        build.ranking_whole_set,
        None,
        proof.ranking_whole_set_trains,
        "Listwise ranking with all 640 training queries in every batch (one step an epoch), Adamax 2e-2: "
        "smooth and fast, flat after ~60 steps at the validation floor.",
        trainer_kwargs={"check_val_every_n_epoch": 20},
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
