"""Zoo 23's runs: new tasks (board-position evaluation on synthetic 8x8 chess-like boards, chord recognition
from 12-bin chroma vectors, a learned vector field integrated over irregularly sampled pendulum trajectories,
two-view sensor fusion with a missing-view mask, shortest-path lengths of small grid mazes), new optimizers
and schedules (Adadelta, ASGD, NAdam with decoupled weight decay, Adamax, SGD under MultiStepLR,
ReduceLROnPlateau on ``val_loss``, SequentialLR warm-up then exponential decay, manual optimisation, bf16
autocast on the CPU), new bugs (labels shuffled apart from their inputs, Adam's LR given to Adadelta, a
prior-probability bias put on every layer, ten sigmoid layers, duplicated timestamps under a loss divided by
the gap, a warm-start from a diverged checkpoint, a warm-up to a peak LR 10x too high, ReduceLROnPlateau in
``mode="max"``, a LambdaLR that manual optimisation never steps, sensor counts not converted to volts before
tanh units, a file re-split for every item, shards recorded in millimetres), blind groups, runs a repair could
save, healthy look-alikes.

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
from galleries.health.zoo23 import _builds as build
from galleries.health.zoo23 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind group: the chord loss at ln 48 (a uniform guess) from step 0, four different causes
    case(
        "chords_labels_shuffled_apart_from_chroma",
        build.chords_shuffled_apart,
        "not_learning",
        proof.chords_shuffled_stuck,
        "Trivial loss from a data-pipeline bug: chord recognition, NAdam 3e-3 with decoupled weight decay; "
        "the training chroma rows and their labels were shuffled by two different permutations, so no label "
        "matches its input and the cross-entropy stays at ln 48 although the network is alive and moving.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(20),
    ),
    case(
        "chords_adadelta_given_adams_lr",
        build.chords_adadelta,
        "lr_too_low",
        proof.chords_adadelta_stuck,
        "Trivial loss from an LR 1000x too low: chord recognition with Adadelta at 1e-3 (Adam's LR copied "
        "in; Adadelta's LR is a multiplier meant ~1.0); the inputs and units are fine, no weight moves.",
        also_allowed=STUCK,
        trainer_kwargs=every(20),
    ),
    case(
        "chords_prior_bias_set_on_every_layer",
        build.chords_prior_bias,
        "dead_units",
        proof.chords_prior_bias_dead,
        "Dead ReLUs from initialisation: chord recognition, Adam 3e-3; an init loop copied from a "
        "multi-label note detector sets the prior bias -log(99) ~ -4.6 on every nn.Linear (meant the output "
        "layer only), so on chroma in [0, 1] every hidden unit is dead on every input from step 0 and the "
        "loss stays at ln 48.",
        also_allowed=STUCK,
        trainer_kwargs=every(20),
    ),
    case(
        "chords_ten_sigmoid_layers_vanish",
        build.chords_deep_sigmoid,
        "vanishing_gradients",
        proof.chords_sigmoid_vanishes,
        "Vanishing gradients from the architecture: chord recognition with a ten-hidden-layer sigmoid MLP "
        "(an old recipe), ASGD 0.05; the first layer's updates are ~1/1000 of the last one's and the loss "
        "stays at ln 48 (ReLU with He init, same depth and optimizer, trains).",
        also_allowed=STUCK,
        trainer_kwargs=every(50),
    ),
    # -- blind group: NaN from broken data / from an LR blow-up / from NaN weights loaded before step 0
    case(
        "trajectories_duplicate_timestamps_divide_by_zero",
        build.flow_duplicate_timestamps,
        "inputs",
        proof.flow_duplicates_nan,
        "NaN from broken input data: a vector field fit to pendulum trajectories read in time order, Adam "
        "3e-3, the error divided by each sample's gap; two samples were logged twice when two loggers were "
        "merged (dt = 0, same state), so batch 60's loss is 0/0 and its update makes every weight NaN.",
        onset_step=proof.BAD_BATCH,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    case(
        "boards_asgd_lr_100x_blows_up",
        build.board_asgd,
        "lr_too_high",
        proof.board_asgd_blows_up,
        "NaN from an LR blow-up on clean data: board evaluation, ASGD at 10.0 (meant 0.1); the loss grows "
        "~10^18-fold in three steps, then is inf and NaN.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
        trainer_kwargs=every(50),
    ),
    case(
        "boards_resumed_from_diverged_checkpoint",
        build.board_resumed,
        "nonfinite_weights",
        proof.board_nan_checkpoint,
        "NaN weights before the first step: board evaluation, Adamax 2e-3, warm-started from the last "
        "checkpoint of an earlier run saved after it diverged; three rows of the first layer's weight hold "
        "NaN, so every output and loss is NaN from step 0 (the boards are clean).",
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(50),
    ),
    # -- blind pair: the validation loss rising from overfitting / from a warm-up to a peak LR 10x too high
    case(
        "chords_debug_subset_of_96_overfits",
        build.chords_debug_subset,
        "overfitting",
        proof.chords_subset_overfits,
        "Overfitting: a width-512 two-hidden-layer MLP on 96 chords (a debug subset left in), Adamax 2e-3, "
        "validated every 5 epochs (10 steps); the training loss falls to ~0 while the validation loss climbs "
        "at every check after its best at step 50.",
        onset_step=proof.OVERFIT_ONSET,
        trainer_kwargs={"check_val_every_n_epoch": 5},
    ),
    case(
        "chords_warmup_to_peak_lr_10x",
        build.chords_warmup_peak,
        "lr_too_high",
        proof.chords_peak_diverges,
        "An LR too high reached by a warm-up: chord recognition, SGD momentum 0.9 under SequentialLR "
        "(LinearLR from 1% over 50 steps, then ExponentialLR 0.995) to a peak of 1.0 (meant 0.1); the loss "
        "falls until the LR nears the peak, then jumps back and the ReLUs die; validation ends >3x its best.",
        onset_step=proof.PEAK_ONSET,
        also_allowed=("exploding_gradients", "dead_units"),
        trainer_kwargs=every(20),
    ),
    # -- LR collapse, frozen parts, saturation
    case(
        "fusion_reduce_on_plateau_mode_max",
        build.fusion_plateau,
        "lr_too_low",
        proof.fusion_plateau_collapses,
        "An LR collapsing from a scheduler set-up bug: two-view fusion, NAdam 3e-3 with decoupled weight "
        "decay under ReduceLROnPlateau(factor 0.1, patience 1) on val_loss with mode='max' (meant 'min'): "
        "every improvement counts as bad, the LR is 1/100 by step 100 and 1e-6 by the end, validation "
        "frozen.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(20),
    ),
    case(
        "fusion_manual_optimisation_never_steps_scheduler",
        build.fusion_manual,
        "frozen_parameters",
        proof.fusion_view_b_frozen,
        "A frozen encoder from a manual-optimisation bug: two-view fusion with automatic_optimization=False, "
        "Adamax with view B's encoder in its own group ramped from LR 0 by a LambdaLR warm-up; the "
        "training_step never calls sch.step() (Lightning steps no scheduler in manual mode), so encoder B "
        "gets gradients and never changes.",
        trainer_kwargs=every(20),
    ),
    case(
        "fusion_sensor_a_in_raw_adc_counts_into_tanh",
        build.fusion_adc_counts,
        "saturated_activations",
        proof.fusion_counts_saturate,
        "Saturated tanh units from unconverted inputs: two-view fusion with a tanh network, Adam 3e-3; "
        "sensor A is logged in raw 12-bit ADC counts (0-4095) and the conversion to volts was skipped, so "
        ">80% of encoder A's first-layer units sit beyond +-0.99 on every batch from step 0.",
        also_allowed=("vanishing_gradients",),
        trainer_kwargs=every(50),
    ),
    # -- data loading, outlier batches
    case(
        "mazes_file_resplit_for_every_item",
        build.maze_file,
        "data_stall",
        proof.maze_file_stalls,
        "A data stall from a loading bug: maze path lengths, a small CNN, Adam 3e-3; the dataset's "
        "__getitem__ splits the whole maze file's text (9600 mazes) again for every maze it returns, so the "
        "loop waits ~10x longer on each batch than it computes.",
        max_steps=150,
        trainer_kwargs=every(50),
    ),
    case(
        "fusion_sensor_b_shards_in_millimetres",
        build.fusion_millimetres,
        "outlier_batches",
        proof.fusion_mm_outliers,
        "Outlier batches from broken inputs: two-view fusion from 100 stored shards of 32 rows, shuffled by "
        "shard, Adamax 2e-3; three shards came from a sensor-B unit reporting millimetres (1000x), so once "
        "an epoch each gives a finite loss spike ~6-20x the median and training ends far behind.",
        onset_step=proof.MM_ONSET,
        also_allowed=("inputs",),
        trainer_kwargs=every(50),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "trajectories_duplicate_timestamps_divide_by_zero",
    "chords_debug_subset_of_96_overfits",
    "chords_warmup_to_peak_lr_10x",
    "fusion_reduce_on_plateau_mode_max",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "boards_evaluation_in_centipawns",
        build.board_centipawns,
        None,
        proof.board_centipawns_trains,
        "Board evaluation with the target in centipawns (spread ~1100): MSE around a million, gradients in "
        "the hundreds, Adamax 1e-2 trains.",
        trainer_kwargs=every(50),
    ),
    case(
        "chords_annotator_labels_30pct_wrong",
        build.chords_noisy_labels,
        None,
        proof.chords_noisy_trains,
        "30% of the training chords labelled wrongly by an automatic annotator: the training loss stays "
        "above 1.5 (the wrong labels put its floor near 1.7), the hand-checked validation loss falls.",
        trainer_kwargs=every(50),
    ),
    case(
        "trajectories_warmup_then_exponential_decay",
        build.flow_warmup_decay,
        None,
        proof.flow_warmup_trains,
        "A pendulum vector field under SequentialLR (LinearLR from 1% over 50 steps, then ExponentialLR "
        "0.99): small moves at first, an LR ~1/12 of its peak at the end; it trains.",
        trainer_kwargs=every(20),
    ),
    case(
        "fusion_view_b_encoder_frozen_on_purpose",
        build.fusion_view_b_frozen,
        None,
        proof.fusion_frozen_trains,
        "View B's encoder frozen on purpose (requires_grad False, a fixed random-feature encoder): only "
        "encoder A and the head train, and well enough.",
        trainer_kwargs=every(50),
    ),
    case(
        "mazes_validated_on_16",
        build.maze_tiny_val,
        None,
        proof.maze_tiny_val_trains,
        "Maze path lengths validated on 16 mazes only: a validation loss that rises at some checks, yet "
        "falls overall (after a slow start).",
        trainer_kwargs=every(25),
    ),
    case(
        "chords_asgd_slow_and_steady",
        build.chords_asgd_slow,
        None,
        proof.chords_slow_trains,
        "Chord recognition with ASGD 0.1: barely moving for ~60 steps, then every validation better than the "
        "last.",
        trainer_kwargs=every(20),
    ),
    case(
        "boards_sgd_multistep_decay",
        build.board_sgd_steps,
        None,
        proof.board_steps_train,
        "Board evaluation, SGD momentum 0.9 at 0.05 under MultiStepLR([200, 260], gamma 0.1): two step "
        "decays, the loss settling after each.",
        trainer_kwargs=every(20),
    ),
    case(
        "fusion_bf16_autocast_on_cpu",
        build.fusion_bf16,
        None,
        proof.fusion_bf16_trains,
        "Two-view fusion trained under precision='bf16-mixed' (bfloat16 autocast on the CPU), Adam 3e-3: "
        "coarser activations, it trains.",
        trainer_kwargs={**every(50), "precision": "bf16-mixed"},
    ),
    case(
        "trajectories_adadelta_batches_of_1024",
        build.flow_adadelta_big_batch,
        None,
        proof.flow_adadelta_trains,
        "A pendulum vector field with Adadelta at its default LR 1.0 and batches of 1024 (seven steps an "
        "epoch), validated every 5 epochs: slow per step, steady.",
        trainer_kwargs={"check_val_every_n_epoch": 5},
    ),
    case(
        "fusion_reduce_on_plateau_mode_min",
        build.fusion_plateau_min,
        None,
        proof.fusion_plateau_min_trains,
        "Two-view fusion under ReduceLROnPlateau on val_loss in mode='min': the LR is cut 10x once or twice "
        "when validation stalls; it trains.",
        trainer_kwargs=every(20),
    ),
    case(
        "mazes_parsed_on_first_use_and_memoised",
        build.maze_memo,
        None,
        proof.maze_memo_trains,
        "Mazes parsed lazily and memoised: the first epoch waits on the parsing (a few ms a batch), the "
        "later ones do not; it trains.",
        trainer_kwargs=every(50),
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
