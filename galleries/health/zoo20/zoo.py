"""Zoo 20's runs: new tasks (a RealNVP-style flow of affine couplings fitted by NLL to two moons,
prototypical networks on few-shot digit episodes, behaviour cloning of a gridworld's shortest-path expert,
domain-adversarial training with a gradient-reversal domain head, corner heatmaps from a small fully
convolutional net, a loan table with a categorical embedding), new optimizers and schedules (Adamax, SGD with
momentum under OneCycleLR, AdamW under CosineAnnealingWarmRestarts, Adam, NAdam, RAdam under StepLR), new bugs
(an ``e-2`` dropped from an Adamax LR, two exported rows with a missing coordinate read in order, a OneCycle
peak 25x too high, query labels built with ``repeat`` for ``repeat_interleave``, one-hots written with
``==``, AdamW's LR and weight decay swapped, an expert planned per sample in ``__getitem__``, an optimizer
built over the heads only, NAdam at 0.1, RetinaNet's prior bias applied to every hidden conv, a
train/validation split unpacked the wrong way round, an epoch StepLR scheduled per step), blind pairs, runs a
repair could save, healthy look-alikes.

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
from galleries.health.zoo20 import _builds as build
from galleries.health.zoo20 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair: NaN after a stretch of healthy training
    case(
        "flow_two_rows_missing_a_coordinate_read_in_order",
        build.flow_missing_rows,
        "inputs",
        proof.flow_missing_rows_nan,
        "NaN from two broken input rows: an affine-coupling flow on two moons, Adamax 5e-3, rows read in "
        "the export's order; two rows lost their second coordinate (NaN) in export, batch 45's NLL is NaN "
        "and its update makes every weight NaN after 45 healthy steps.",
        onset_step=proof.BAD_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(32),
    ),
    case(
        "protonet_onecycle_max_lr_25x_diverges_in_warmup",
        build.proto_onecycle,
        "lr_too_high",
        proof.proto_onecycle_diverges,
        "NaN from an LR blow-up on clean episodes: prototypical networks on 5-way 5-shot digit episodes, SGD "
        "momentum 0.9 under OneCycleLR with max_lr 0.5 (meant 0.02); it learns while the warm-up LR is low, "
        "then from step 49 (LR ~0.3) the loss climbs and turns NaN.",
        onset_step=proof.ONECYCLE_ONSET,
        also_allowed=LR_BLOWUP,
        trainer_kwargs=every(30),
    ),
    # -- blind pair: the training loss pinned at its trivial level from step 0
    case(
        "gridworld_bc_one_hots_written_with_double_equals",
        build.bc_zero_states,
        "inputs",
        proof.bc_zero_states_stuck,
        "A trivial loss from broken inputs: behaviour cloning of a gridworld's shortest-path expert, AdamW "
        "3e-3 with warm restarts; the state encoder writes its one-hots with `state[i] == 1.0` (a "
        "comparison), so every state is all zeros and the policy can only learn the action marginal.",
        also_allowed=("not_learning", "loss_plateau"),
    ),
    case(
        "gridworld_bc_adamw_lr_and_weight_decay_swapped",
        build.bc_lr_weight_decay_swapped,
        "lr_too_low",
        proof.bc_lr_stuck,
        "A trivial loss from an LR far too low: behaviour cloning, AdamW(lr=cfg.weight_decay, "
        "weight_decay=cfg.lr), so the policy trains at 1e-6 (meant 3e-3) on intact states; the loss stays at "
        "ln 4.",
        also_allowed=STUCK,
    ),
    # -- blind pair: every hidden ReLU dead and the heatmap a constant
    case(
        "keypoint_heatmaps_nadam_lr_0_1_kills_relus",
        build.keypoint_nadam,
        "lr_too_high",
        proof.keypoint_lr_kills_units,
        "Dead ReLUs from an LR too high: a corner-heatmap CNN, NAdam at 0.1 (meant 2e-3); the first update "
        "blows the loss up 1000x and within 10 steps every hidden ReLU is dead, the heatmap a constant.",
        also_allowed=("dead_units", "exploding_gradients"),
        trainer_kwargs=every(25),
    ),
    case(
        "keypoint_heatmaps_focal_prior_bias_on_every_conv",
        build.keypoint_prior_bias,
        "initialisation",
        proof.keypoint_prior_dead,
        "Dead ReLUs from initialisation: a corner-heatmap CNN, NAdam 2e-3; RetinaNet's prior bias (-4.6, "
        "meant for a detection head's classifier) applied by an init loop to every hidden conv, so every "
        "ReLU is dead from step 0 and only the head's bias learns.",
        also_allowed=("dead_units",),
        trainer_kwargs=every(25),
    ),
    # -- the loan table: a validation loss climbing from its best, an LR collapsing at once
    case(
        "loans_train_val_split_unpacked_backwards_overfits",
        build.tabular_split_swapped,
        "overfitting",
        proof.tabular_overfits,
        "Overfitting: a width-512 loan classifier, RAdam 3e-3 with StepLR per epoch; `val, train = "
        "train_test_split(..., test_size=0.1)` unpacked the wrong way round, so it trains on 330 rows (10 "
        "steps an epoch); the training loss falls toward 0 while the validation loss climbs from epoch 9.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "loans_epoch_steplr_scheduled_per_step",
        build.tabular_steplr,
        "lr_too_low",
        proof.tabular_lr_collapses,
        "An LR collapsing at once: a loan classifier, RAdam 1e-2 under StepLR(step_size=2, gamma=0.5) "
        "written for epochs but scheduled with interval='step'; the LR is below 1% of its start at step 14 "
        "and the loss never leaves ln 3.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=STUCK,
    ),
    # -- single causes
    case(
        "flow_adamax_lr_0_3_dropped_exponent",
        build.flow_adamax,
        "lr_too_high",
        proof.flow_lr_blows_up,
        "An LR 100x too high: the affine-coupling flow, Adamax at 0.3 (meant 3e-3); the first updates throw "
        "the NLL up to 1e3-1e7 and the gradient norm to 1e5-1e8, and the flow settles ~5x worse than "
        "untrained.",
        also_allowed=LR_BLOWUP,
        trainer_kwargs=every(32),
    ),
    case(
        "protonet_query_labels_repeat_not_repeat_interleave",
        build.proto_interleaved_labels,
        "not_learning",
        proof.proto_labels_stuck,
        "A loss at chance from misaligned labels: prototypical networks, OneCycleLR to 0.02; queries are "
        "stacked class by class but labelled with arange(ways).repeat(queries) (meant repeat_interleave), so "
        "the query labels carry no information and the loss stays at ln 5.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(30),
    ),
    case(
        "gridworld_bc_expert_replanned_per_sample",
        build.bc_planned_per_sample,
        "data_stall",
        proof.bc_loader_stalls,
        "A loader stall: behaviour cloning whose Dataset plans the expert's action per sample in __getitem__ "
        "by a pure-Python value iteration over the grid (meant once per goal, cached); each step waits ~10x "
        "its compute for its batch.",
        max_steps=100,
    ),
    case(
        "dann_optimizer_built_over_heads_only",
        build.dann_optimizer_heads_only,
        "frozen_parameters",
        proof.dann_features_frozen,
        "Frozen features from an optimizer missing them: domain-adversarial training (gradient-reversal "
        "domain head), Adam over label_head and domain_head only; the shared feature extractor gets "
        "gradients and never moves.",
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "flow_two_rows_missing_a_coordinate_read_in_order",
    "protonet_onecycle_max_lr_25x_diverges_in_warmup",
    "loans_train_val_split_unpacked_backwards_overfits",
    "loans_epoch_steplr_scheduled_per_step",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "flow_adamax_2e_3_slow_and_steady",
        build.flow_adamax_slow,
        None,
        proof.flow_slow_trains,
        "The affine-coupling flow with Adamax at 2e-3: slow, the NLL falling a little at each check.",
        trainer_kwargs=every(32),
    ),
    case(
        "flow_moons_in_raw_units",
        build.flow_raw_units,
        None,
        proof.flow_raw_trains,
        "The flow on moons in raw units (a spread of ~25): a first NLL of ~700 and gradient norm ~4e4, then "
        "NLLs ~9-11 nats that fall.",
        trainer_kwargs=every(32),
    ),
    case(
        "protonet_onecycle_warmup_from_8e_4",
        build.proto_warmup,
        None,
        proof.proto_warmup_trains,
        "Prototypical networks under OneCycleLR to 0.02: the LR starts at 8e-4 and the loss sits still for "
        "the first steps, then falls to ~0.",
        trainer_kwargs=every(30),
    ),
    case(
        "gridworld_bc_warm_restart_every_60_steps",
        build.bc_warm_restarts,
        None,
        proof.bc_restarts_train,
        "Behaviour cloning, AdamW 3e-3 with CosineAnnealingWarmRestarts every 60 steps: the LR jumps from ~0 "
        "back to 3e-3 four times, the loss with it, and the validation loss falls at every check.",
    ),
    case(
        "gridworld_bc_30pct_exploration_noise_on_purpose",
        build.bc_noisy_expert,
        None,
        proof.bc_noisy_trains,
        "Behaviour cloning on demonstrations with 30% random actions on purpose: the training loss floors "
        "near 0.75, the clean validation loss falls.",
    ),
    case(
        "dann_full_reversal_domain_loss_held_at_ln2",
        build.dann_full_reversal,
        None,
        proof.dann_trains,
        "Domain-adversarial training at full reversal weight: the domain head's loss is held near ln 2 by "
        "design, so the training loss plateaus above 0.6 while the validation loss (held-out source rows) "
        "falls to ~0.02.",
    ),
    case(
        "keypoint_heatmaps_per_pixel_mean_mse",
        build.keypoint_mean_mse,
        None,
        proof.keypoint_mean_trains,
        "Corner heatmaps with the per-pixel mean MSE: losses ~1e-3 and gradient norms ~1e-2, and it trains.",
        trainer_kwargs=every(25),
    ),
    case(
        "keypoint_heatmaps_validated_on_4_images",
        build.keypoint_tiny_val,
        None,
        proof.keypoint_tiny_val_trains,
        "Corner heatmaps validated on 4 images: a validation loss that rises at some checks, yet falls 30x.",
        trainer_kwargs=every(25),
    ),
    case(
        "loans_radam_lr_halved_every_two_epochs",
        build.tabular_step_decay,
        None,
        proof.tabular_step_decay_trains,
        "A loan classifier, RAdam 1e-2 under StepLR(2, 0.5) per epoch: an LR halved every 94 steps.",
    ),
    case(
        "loans_region_embedding_frozen_on_purpose",
        build.tabular_frozen_region_embedding,
        None,
        proof.tabular_frozen_embedding_trains,
        "A loan classifier whose region embedding comes from last year's model, frozen on purpose: only the "
        "MLP trains, and well.",
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
