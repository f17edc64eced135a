"""Zoo 8's runs: new tasks (attention-based multiple-instance learning on bags of digits, a mixture density
network on a multi-valued inverse problem), new optimizers and schedules (Adam with AMSGrad, OneCycleLR,
ReduceLROnPlateau, per-group LambdaLR unfreezing, LinearLR warm-up), blind pairs, runs a repair could save,
healthy look-alikes.

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
from galleries.health.zoo8 import _builds as build
from galleries.health.zoo8 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind trio: a bag classifier's loss stays at the prior's entropy (BCE ~0.69)
    case(
        "mil_bag_labels_shuffled_separately_from_bags",
        build.mil_labels_apart,
        "not_learning",
        proof.mil_apart_stuck,
        "Trivial loss from labels shuffled apart from their inputs: attention-based multiple-instance "
        "learning on bags of eight digits (is there a 7?), Adam 1e-3; the bag labels went through a second, "
        "separate randperm, so no label belongs to its bag and the BCE stays at the prior's entropy.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(25),
    ),
    case(
        "mil_amsgrad_lr_2e7_exponent_typo",
        build.mil_amsgrad,
        "lr_too_low",
        proof.mil_lr_stuck,
        "Trivial loss from an LR 10000x too low: the same bag classifier, Adam with AMSGrad at 2e-7 (meant "
        "2e-3); the weights barely move and the BCE stays at the prior's entropy.",
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    case(
        "mil_encoder_unfreeze_step_counted_in_samples",
        build.mil_unfreeze,
        "frozen_parameters",
        proof.mil_encoder_frozen,
        "A frozen encoder from a unit bug: the bag classifier's encoder group is held at LR 0 by a per-group "
        "LambdaLR for a one-epoch head warm-up, its unfreezing step computed as len(dataset) = 2000 (meant "
        "len(loader) = 125); the encoder gets gradients and never moves, the BCE stays at the prior's "
        "entropy.",
        onset_step=build.UNFREEZE_MEANT,
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    # -- the MDN's loss frozen at its starting level / rising with the LR (both repairable)
    case(
        "mdn_reduce_on_plateau_patience_0_stepped_per_batch",
        build.mdn_plateau,
        "lr_too_low",
        proof.mdn_plateau_collapses,
        "An LR collapsing to ~0 within a few steps: a mixture density network (five Gaussians) on an inverse "
        "sine problem, Adam 3e-3 under ReduceLROnPlateau(factor 0.1, patience 0) stepped every batch on the "
        "noisy training loss (meant every epoch on val_loss); the NLL stays at its starting level.",
        onset_step=proof.PLATEAU_ONSET,
        also_allowed=STUCK,
        trainer_kwargs=every(25),
    ),
    case(
        "mdn_onecycle_max_lr_100x",
        build.mdn_onecycle,
        "lr_too_high",
        proof.mdn_onecycle_rises,
        "An LR 100x too high at its peak: the MDN, Adam under OneCycleLR with max_lr 0.3 (meant 3e-3); the "
        "NLL falls while the LR is small, rises as it climbs to the peak (step 90) and ends ~0.9 nats worse "
        "than the fixed run.",
        onset_step=proof.ONECYCLE_ONSET,
        trainer_kwargs=every(25),
    ),
    # -- blind pair: the MDN's weights NaN from batch 60 on, from an overflowing finite target / a NaN input;
    # then spikes from outlier targets
    case(
        "mdn_one_target_holds_flt_max_missing_marker",
        build.mdn_sentinel,
        "nonfinite_activations",
        proof.mdn_sentinel_nan,
        "One non-finite update from one bad row: the MDN read in order, Adam with AMSGrad 2e-3; one target "
        "holds the export's missing-value marker FLT_MAX (3.4e38), its squared error overflows to inf in "
        "batch 60 and every weight is NaN after.",
        onset_step=build.SENTINEL_ROW // 32,
        also_allowed=("outlier_batches",),
        trainer_kwargs=every(25),
    ),
    case(
        "mdn_one_input_reading_stored_as_nan",
        build.mdn_nan_reading,
        "inputs",
        proof.mdn_nan_reading_poisons,
        "NaN from non-finite data: the MDN read in order, Adam with AMSGrad 2e-3; one input x is NaN (a "
        "failed reading the export wrote as NaN) in batch 60, its loss and gradient are NaN and every weight "
        "is NaN after.",
        onset_step=build.SENTINEL_ROW // 32,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(25),
    ),
    case(
        "mdn_two_targets_logged_in_per_mille",
        build.mdn_percent,
        "outlier_batches",
        proof.mdn_percent_spikes,
        "Spikes from outlier rows: the MDN read in order, AdamW 2e-3; two rows' targets were logged in "
        "per-mille (x1000) where the rest are fractions; their batches (20, 70 of each 94) carry gradients "
        ">300x the median.",
        onset_step=build.PERCENT_ROWS[0] // 32,
        trainer_kwargs=every(25),
    ),
    # -- single causes
    case(
        "mil_wide_encoder_24_bags_overfits",
        build.mil_few_bags,
        "overfitting",
        proof.mil_overfits,
        "Overfitting: a width-256 bag classifier on 24 bags (a debug subset left in), Adam 3e-3, batches of 8"
        " validated every epoch (3 steps); the training BCE falls to ~1e-4 while the validation BCE climbs to"
        " ~4x its best.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "mil_tanh_encoder_init_std_3",
        build.mil_tanh_init,
        "initialisation",
        proof.mil_tanh_saturates,
        "Saturated units from initialisation: the bag classifier's tanh encoder initialised normal_(std=3) "
        "(a gain of 3 meant to multiply 1/sqrt(fan_in)); most encoder units sit at +-1 from step 0 and the "
        "run learns far slower than with the default init.",
        also_allowed=("saturated_activations", "vanishing_gradients"),
        trainer_kwargs=every(25),
    ),
    case(
        "mil_bags_decoded_on_every_read_stall",
        build.mil_slow_reads,
        "data_stall",
        proof.mil_stall,
        "A loader that decodes each bag's eight images again on every read (3 ms a bag, 16 a batch, no cache,"
        " no workers): the loop waits for data most of the time.",
        max_steps=120,
        check_every=12,
        trainer_kwargs=every(25),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "mdn_reduce_on_plateau_patience_0_stepped_per_batch",
    "mdn_onecycle_max_lr_100x",
    "mdn_one_target_holds_flt_max_missing_marker",
    "mdn_one_input_reading_stored_as_nan",
    "mil_wide_encoder_24_bags_overfits",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "mdn_nll_falls_below_zero",
        build.mdn_negative_nll,
        None,
        proof.mdn_negative_trains,
        "The MDN with Adam (AMSGrad) 3e-3: a density's NLL that falls through zero and stays negative.",
        trainer_kwargs=every(25),
    ),
    case(
        "mil_bce_summed_over_bags",
        build.mil_summed_bce,
        None,
        proof.mil_summed_trains,
        "The bag classifier's training BCE summed over the 16 bags of a batch (~11 at first), Adam 1e-3.",
        trainer_kwargs=every(25),
    ),
    case(
        "mil_30pct_bag_labels_flipped",
        build.mil_noisy_labels,
        None,
        proof.mil_noisy_trains,
        "30% of the bag labels flipped (train and validation): the BCE floors high, near the prior's.",
        trainer_kwargs=every(25),
    ),
    case(
        "mil_validated_on_12_bags",
        build.mil_tiny_validation,
        None,
        proof.mil_tiny_validation_trains,
        "The bag classifier validated on 12 bags: a validation loss that jitters from check to check.",
        trainer_kwargs=every(25),
    ),
    case(
        "mdn_onecycle_peak_1e2",
        build.mdn_onecycle_in_range,
        None,
        proof.mdn_onecycle_trains,
        "The MDN under OneCycleLR to 1e-2 with Adam: an aggressive but stable peak.",
        trainer_kwargs=every(25),
    ),
    case(
        "mdn_sharp_initial_scales_huge_first_gradient",
        build.mdn_sharp_start,
        None,
        proof.mdn_sharp_trains,
        "The MDN's scales started at ~8e-3 (bias -5): a first NLL in the thousands and a first gradient "
        ">500x the median, which Adam absorbs; it trains.",
        trainer_kwargs=every(25),
    ),
    case(
        "mil_linear_warmup_150_steps",
        build.mil_long_warmup,
        None,
        proof.mil_warmup_trains,
        "The bag classifier, AdamW 3e-3 after a linear warm-up from 1% over 150 steps: the BCE sits at the "
        "prior's entropy for ~80 steps, then falls.",
        trainer_kwargs=every(25),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
