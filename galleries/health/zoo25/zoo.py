"""Zoo 25's runs: new tasks (the orientation of a 3-D object from the perspective projection of its points as
sin and cos, jet tagging with a masked deep set over padded constituents, 15-minute speed forecasts on a
ten-sensor road graph, language identification from character-bigram counts, per-pixel edge detection with
8% edge pixels, long-only portfolios trained on a Sharpe-ratio loss), new optimizers and schedules (SGD with
momentum 0.99 and dampening, Adam with a coupled L2 next to AdamW, Adamax, RMSprop, NAdam with
``momentum_decay``, full-batch Rprop; a triangular CyclicLR cycling the momentum, a three-phase OneCycleLR,
CosineAnnealingLR, ConstantLR, a StepLR under ``"frequency": 10``, ``bf16-mixed`` on the CPU with gradient
clipping, manual optimisation with two optimizers), new bugs (blank tracker frames divided by their zero RMS
radius, momentum written as an average without its dampening, a ``.detach()`` left on a deep set's pooled
embedding, a scheduler's ``interval`` left at ``"step"`` under ``"frequency"``, train/validation fractions
swapped, an SGD learning rate hidden behind ConstantLR's warm start, labels shuffled apart from their
documents, a focal-loss prior bias looped over every convolution, a OneCycleLR peak 100x too high, a Dataset
recomputing its scaling per item, "no data" sentinels left in the readings, a portfolio fit to one year),
blind pairs, runs a repair could save, healthy look-alikes.

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
from galleries.health.zoo25 import _builds as build
from galleries.health.zoo25 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair: NaN from a division by a zero norm in the data / from the LR
    case(
        "orientation_blank_frames_scaled_by_zero_radius",
        build.orientation_blank_frames,
        "inputs",
        proof.orientation_blank_nan,
        "NaN from broken input data: orientation from projected points, RMSprop 1e-3; three frames where "
        "the tracker lost the object have every point at (0, 0), and the scale normalisation divides them "
        "by their RMS radius, 0; the first batch holding one (step 49) has a NaN loss whose update makes "
        "every weight NaN.",
        onset_step=proof.BLANK_ONSET,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    case(
        "orientation_sgd_momentum_099_without_dampening",
        build.orientation_sgd_momentum,
        "lr_too_high",
        proof.orientation_momentum_nan,
        "NaN from an effective LR 100x too high on clean inputs: orientation, SGD at 1.0 with momentum 0.99 "
        "meant as an average of the gradients (dampening=0.99) but left at PyTorch's dampening=0, which sums "
        "them; the loss grows a million-fold in a few steps and turns NaN.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
        trainer_kwargs=every(20),
    ),
    # -- blind pair: the loss stays far above the fixed run's from a frozen body / from a collapsed schedule
    case(
        "jets_deep_set_pooled_embedding_detached",
        build.jets_detached,
        "frozen_parameters",
        proof.jets_detached_frozen,
        "Frozen parameters: a deep set tagging jets, Adamax 5e-3; a .detach() left on the pooled embedding "
        "(from caching embeddings) cuts the per-constituent network phi out of the graph, so it never "
        "changes and only the linear readout learns; the validation loss crawls from 0.69 to 0.60 (fixed: "
        "0.26).",
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    case(
        "jets_steplr_frequency_10_in_steps_not_epochs",
        build.jets_step_frequency,
        "lr_too_low",
        proof.jets_lr_collapses,
        "An LR collapsing early: jets, Adamax 5e-3 under StepLR(step_size=1, gamma=0.5) with "
        '{"interval": "step", "frequency": 10}, meant to halve the LR every 10 epochs (75 steps each) but '
        "halving it every 10 steps; below 2% of it from step 60, the loss frozen at 0.58 (fixed: 0.26).",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(25),
    ),
    # -- blind pair: the validation loss rising from overfitting / from an LR released mid-run
    case(
        "langid_train_val_fractions_swapped_overfits",
        build.langid_swapped_split,
        "overfitting",
        proof.langid_overfits,
        "Overfitting: language identification from bigram counts, a 1,000-document corpus split with the "
        "fractions swapped ([0.1, 0.9], meant [0.9, 0.1]): a width-256 MLP memorises the 100 training "
        "documents (2 steps an epoch) while the validation loss climbs past twice its best.",
        onset_step=proof.OVERFIT_ONSET,
        max_steps=120,
    ),
    case(
        "langid_rmsprop_sgd_lr_hidden_by_constantlr",
        build.langid_constant_lr,
        "lr_too_high",
        proof.langid_lr_jumps,
        "An LR too high, released mid-run: language identification, RMSprop at 0.3 (the LR of the SGD recipe "
        "it replaced; meant 3e-3) behind ConstantLR(factor=0.01, total_iters=100), which hides it for 100 "
        "steps; at step 100 the LR jumps to 0.3, the loss to ~log 5 and validation to >3x its best.",
        onset_step=proof.JUMP_ONSET,
        trainer_kwargs=every(20),
    ),
    # -- blind pair: the loss at its trivial level (log 5) from step 0
    case(
        "langid_labels_shuffled_apart_from_documents",
        build.langid_shuffled_labels,
        "not_learning",
        proof.langid_labels_stuck,
        "Trivial loss from a data-pipeline bug: language identification, a linear model, Adamax 1e-2; the "
        "documents and the labels were shuffled with two different permutations, so no label belongs to its "
        "document and validation stays at log 5.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(25),
    ),
    case(
        "langid_adamax_lr_1000x_too_low",
        build.langid_adamax,
        "lr_too_low",
        proof.langid_lr_stuck,
        "Trivial loss from an LR 1000x too low: language identification, a linear model, Adamax at 1e-5 "
        "(meant 1e-2); the labels are right and the inputs reach every weight, validation stays at log 5.",
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    # -- blind pair: every ReLU channel dead, from initialisation / from an LR spike
    case(
        "edges_focal_prior_bias_on_every_conv",
        build.edges_prior_bias,
        "initialisation",
        proof.edges_dead_from_init,
        "Dead units from initialisation: edge detection, NAdam under OneCycleLR(3e-3, three_phase=True); "
        "the focal-loss prior bias -log((1 - 0.08) / 0.08) = -2.4, meant for the last layer, is set in a "
        "loop over every convolution, so every ReLU channel is negative on every pixel and passes no "
        "gradient from step 0.",
        also_allowed=("dead_units", "not_learning"),
        trainer_kwargs=every(25),
    ),
    case(
        "edges_onecycle_three_phase_max_lr_100x",
        build.edges_onecycle,
        "lr_too_high",
        proof.edges_dead_from_lr,
        "Dead units from an LR spike: edge detection, NAdam under OneCycleLR(max_lr=0.3, three_phase=True) "
        "(meant 3e-3); as the LR climbs past ~0.15 the ReLU channels die, all of them by step 52, and the "
        "loss sticks at the constant prediction's, 1.5x the best validation.",
        onset_step=proof.DEAD_ONSET,
        also_allowed=("dead_units", "exploding_gradients"),
        trainer_kwargs=every(25),
    ),
    # -- single causes
    case(
        "traffic_robust_scaling_recomputed_per_window",
        build.traffic_per_item_stats,
        "data_stall",
        proof.traffic_stalls,
        "A data stall: speed forecasts on a road graph from a Dataset whose __getitem__ recomputes the "
        "quantile scaling over the whole training series for every window (meant once, in __init__); the "
        "step waits ~10x longer for its batch of 16 than it computes.",
        max_steps=100,
        trainer_kwargs=every(50),
    ),
    case(
        "traffic_detector_no_data_sentinels_left_in",
        build.traffic_sentinels,
        "inputs",
        proof.traffic_outliers,
        "Broken input data: speed forecasts on a road graph, Adam 1e-3; four readings are the detectors' "
        '"no data" code 6553.5 mph, left in (meant masked), so the batches whose targets hold one have '
        "losses ~1000x the others' and those whose inputs hold one are tens of times larger: outlier "
        "batches all run.",
        onset_step=proof.SENTINEL_ONSET,
        also_allowed=("outlier_batches",),
        trainer_kwargs=every(25),
    ),
    case(
        "portfolio_sharpe_fit_to_one_year_overfits",
        build.portfolio_one_year,
        "overfitting",
        proof.portfolio_overfits,
        "Overfitting (a backtest overfit): a width-256 portfolio network on a Sharpe-ratio loss trained on "
        "the last 250 days only (for recency; 2,200 available), AdamW, 2 steps an epoch; the in-sample "
        "Sharpe passes 30 while the validation Sharpe falls from its best of 1.6.",
        onset_step=proof.PORTFOLIO_ONSET,
        max_steps=150,
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "orientation_blank_frames_scaled_by_zero_radius",
    "jets_steplr_frequency_10_in_steps_not_epochs",
    "langid_train_val_fractions_swapped_overfits",
    "langid_rmsprop_sgd_lr_hidden_by_constantlr",
    "edges_onecycle_three_phase_max_lr_100x",
    "portfolio_sharpe_fit_to_one_year_overfits",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "orientation_sgd_momentum_099_dampened",
        build.orientation_ema_momentum,
        None,
        proof.orientation_ema_trains,
        "SGD at 1.0 with momentum 0.99 and dampening 0.99 (an average of the gradients): a wild first "
        "validation (~1.9) and gradients of a few units, then it settles and trains well.",
        trainer_kwargs=every(20),
    ),
    case(
        "orientation_rprop_full_batch",
        build.orientation_rprop_full_batch,
        None,
        proof.orientation_rprop_trains,
        "Full-batch Rprop (one step an epoch, 800 frames): sign-based steps keep training while the gradient "
        "norm fades 100x with the loss.",
        trainer_kwargs={"check_val_every_n_epoch": 10},
    ),
    case(
        "jets_bf16_mixed_with_gradient_clipping",
        build.jets_bf16,
        None,
        proof.jets_bf16_trains,
        'Jets under precision="bf16-mixed" on the CPU with gradient_clip_val=0.5: bf16-rounded losses, the '
        "clip active on many steps, and a good tagger.",
        trainer_kwargs={**every(25), "precision": "bf16-mixed", "gradient_clip_val": 0.5},
    ),
    case(
        "jets_cosine_annealing_to_zero",
        build.jets_cosine,
        None,
        proof.jets_cosine_trains,
        "Jets under CosineAnnealingLR(T_max=300): the LR reaches 0 at the last step and the loss flattens, "
        "as meant, after it has trained.",
        trainer_kwargs=every(25),
    ),
    case(
        "langid_30pct_weak_labels",
        build.langid_noisy_labels,
        None,
        proof.langid_noisy_trains,
        "Language identification with 30% of the training labels random (weak labels from URLs, the "
        "validation labels clean): the training loss floors near 1.0, the validation loss keeps falling.",
        trainer_kwargs=every(25),
    ),
    case(
        "langid_sgd_triangular_cyclic_lr_with_momentum",
        build.langid_cyclic,
        None,
        proof.langid_cyclic_trains,
        "SGD under a triangular CyclicLR between 0.01 and 0.5 (50 steps each way) cycling the momentum: the "
        "loss and the validation swing with the LR, and it trains.",
        trainer_kwargs=every(25),
    ),
    case(
        "langid_rmsprop_constantlr_warm_start",
        build.langid_warm_start,
        None,
        proof.langid_warm_start_trains,
        "RMSprop at 1e-3 held at a tenth by ConstantLR(0.1, total_iters=100): a slow start, then an LR that "
        "rises 10x at step 100 as meant, and every validation better than the last.",
        trainer_kwargs=every(20),
    ),
    case(
        "edges_imbalanced_validated_on_4_images",
        build.edges_tiny_val,
        None,
        proof.edges_tiny_val_trains,
        "Edge detection with 8% edge pixels under BCE with pos_weight=11 (losses above 1 at first), NAdam "
        "with momentum_decay, validated on 4 images only: it trains.",
        trainer_kwargs=every(25),
    ),
    case(
        "traffic_speeds_in_mph",
        build.traffic_mph,
        None,
        proof.traffic_mph_trains,
        "Speed forecasts with the targets in mph: losses in the tens, gradients in the tens, Adam with a "
        "coupled L2 weight_decay=1e-4; it trains to ~9 mph^2.",
        trainer_kwargs=every(25),
    ),
    case(
        "traffic_manual_optimisation_two_optimizers",
        build.traffic_two_optimizers,
        None,
        proof.traffic_two_optimizers_train,
        "Speed forecasts with manual optimisation and two optimizers (Adam for the graph convolutions, "
        "RMSprop for the readout): two optimizer steps a batch, 200 batches, and it trains.",
        max_steps=400,
        trainer_kwargs=every(25),
    ),
    case(
        "portfolio_negative_sharpe_loss",
        build.portfolio_sharpe,
        None,
        proof.portfolio_sharpe_trains,
        "Portfolios on minus the annualised Sharpe ratio over 2,200 days, AdamW: a negative, noisy loss "
        "(batches of 64 days) that goes further below 0 as the validation Sharpe rises from 1.2 to 2.",
        trainer_kwargs=every(25),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
