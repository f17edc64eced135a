"""Zoo 24's runs: new tasks (transcription-factor binding sites in one-hot DNA with a 1-D CNN, photometric
redshifts from five-band magnitudes, tic-tac-toe moves under a legal-move mask, insurance pure premium with a
Tweedie loss and an exposure offset, 1-D signal deblurring), new optimizers and schedules (Rprop, LBFGS
through Lightning's closure, Adam with AMSGrad, centred RMSprop, SGD with a large weight decay, Adagrad with
``lr_decay``, CosineAnnealingLR, LinearLR to zero, ExponentialLR, StepLR stepped per step, Lightning's
StochasticWeightAveraging, value clipping, gradient accumulation), new bugs (a lower-case FASTA through an
upper-case encoder, an optimizer built from the head alone, zero-exposure policies under a log offset,
``swa_lrs`` read as a factor, magnitudes left unscaled before ReLUs, a LinearLR meant in epochs stepped per
step, a deep sigmoid MLP, a data set that transforms its whole table per item, ADC glitches in three
recordings), blind pairs, runs a repair could save, healthy look-alikes.

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
from galleries.health.zoo24 import _builds as build
from galleries.health.zoo24 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind pair (and a third): the loss at its trivial level (ln 2) from step 0
    case(
        "dna_lowercase_fasta_encodes_every_base_as_zeros",
        build.dna_lowercase,
        "inputs",
        proof.dna_lowercase_stuck,
        "Trivial loss from broken inputs: binding-site detection, Adam 3e-3; the sequences were exported in "
        "lower case and the one-hot encoder maps only 'ACGT' (anything else to zeros, as for N), so every "
        "input is all zeros and the BCE stays at ln 2.",
        also_allowed=STUCK,
    ),
    case(
        "dna_amsgrad_lr_1000x_too_low",
        build.dna_amsgrad,
        "lr_too_low",
        proof.dna_amsgrad_stuck,
        "Trivial loss from an LR 1000x too low: binding-site detection, Adam with AMSGrad at 3e-6 (meant "
        "3e-3, the exponent mistyped); the one-hot inputs are fine and reach the filters, the BCE stays at "
        "ln 2.",
        also_allowed=STUCK,
    ),
    case(
        "dna_optimizer_built_from_the_head_only",
        build.dna_head_only,
        "frozen_parameters",
        proof.dna_head_only_frozen,
        "Frozen filters from an optimizer set-up bug: binding-site detection, Adam 3e-3 built from "
        "net.head.parameters() (copied from a fine-tuning script); the convolution filters get gradients "
        "and never move, the linear read-out over random filters stays near ln 2.",
        also_allowed=STUCK,
    ),
    # -- blind pair: NaN from the data / from an LR blow-up
    case(
        "insurance_zero_exposure_policies_log_offset_nan",
        build.insurance_zero_exposure,
        "inputs",
        proof.insurance_zero_exposure_nan,
        "NaN from the data: pure premium with a Tweedie loss and offset log(exposure), Adam with AMSGrad "
        "1e-3; three policies cancelled on their start date (exposure 0) were kept, so the offset is -inf, "
        "the loss of the first batch holding one is NaN and its update makes every weight NaN.",
        onset_step=proof.ZERO_EXPOSURE_ONSET,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(10),
    ),
    case(
        "insurance_sgd_lr_100x_nan",
        build.insurance_sgd,
        "lr_too_high",
        proof.insurance_sgd_nan,
        "NaN from an LR blow-up on clean data: pure premium, SGD momentum 0.9 at 5.0 (meant 0.05); the "
        "Tweedie loss grows ~15x in two steps, overflows and turns NaN.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
        trainer_kwargs=every(10),
    ),
    # -- blind pair: the validation loss rising from overfitting / from a schedule that raises the LR
    case(
        "tictactoe_300_positions_debug_subset_overfits",
        build.ttt_few_positions,
        "overfitting",
        proof.ttt_overfits,
        "Overfitting: move prediction by a width-512 MLP trained on 300 of the 3600 positions (a debug "
        "subset left in), validated every epoch (6 steps); the training loss falls to ~0 while the "
        "validation loss climbs from its best.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "photoz_swa_lrs_1_read_as_a_factor",
        build.photoz_swa,
        "lr_too_high",
        proof.photoz_swa_diverges,
        "An LR raised 1000x by a schedule: photo-z, Adam 1e-3 with StochasticWeightAveraging(swa_lrs=1.0, "
        "swa_epoch_start=3, annealing_epochs=1), 1.0 meant as 'keep the LR' but it is the LR itself; from "
        "the fourth epoch (step 189) the loss spikes and validation stays far above its best.",
        onset_step=proof.SWA_ONSET,
        also_allowed=("exploding_gradients", "outlier_batches"),
        max_steps=-1,
        max_epochs=5,
        trainer_kwargs=every(21),
    ),
    # -- blind pair: dead ReLUs from unscaled inputs / from an LR blow-up
    case(
        "photoz_raw_magnitudes_kill_half_the_relus",
        build.photoz_raw_magnitudes,
        "dead_units",
        proof.photoz_raw_dead,
        "Dead units from unscaled inputs: photo-z with the StandardScaler left out (all five magnitudes "
        "~17-26), a ReLU MLP, Adam 1e-3; every first-layer unit's sign is fixed by its weights' sum, so "
        "over half of them are off on every galaxy from step 0 and stay dead.",
        trainer_kwargs=every(21),
    ),
    case(
        "photoz_centred_rmsprop_lr_100x",
        build.photoz_rmsprop,
        "lr_too_high",
        proof.photoz_rmsprop_blows_up,
        "An LR 100x too high: photo-z, RMSprop(centered=True) at 0.1 (the replaced SGD recipe's LR; meant "
        "1e-3); the first update throws the loss up ~1e7x and kills a third of the first layer's ReLUs.",
        also_allowed=("dead_units", "exploding_gradients", "outlier_batches"),
        trainer_kwargs=every(21),
    ),
    # -- single causes
    case(
        "tictactoe_linearlr_epochs_stepped_per_step",
        build.ttt_linear_to_zero,
        "lr_too_low",
        proof.ttt_linear_collapses,
        "An LR collapsed to zero: move prediction, Adam 3e-3 under LinearLR(1 -> 0, total_iters=30) meant "
        "in epochs but stepped per step; the LR is 0 from step 30 and the weights never move again.",
        onset_step=build.LINEAR_ITERS,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(19),
    ),
    case(
        "photoz_six_sigmoid_layers_vanish",
        build.photoz_deep_sigmoid,
        "vanishing_gradients",
        proof.photoz_sigmoid_vanishes,
        "Vanishing gradients: photo-z by an MLP of six sigmoid hidden layers, SGD momentum 0.9 at 0.03; "
        "the first layer's updates are ~1e-5 of the read-out's and the MSE stays at the redshift's "
        "variance (a ReLU MLP, same depth, trains).",
        also_allowed=STUCK,
        trainer_kwargs=every(21),
    ),
    case(
        "deblur_dataset_blurs_the_whole_table_per_item",
        build.deblur_whole_table,
        "data_stall",
        proof.deblur_stalls,
        "A data-loading stall: deblurring, Adam 1e-3; the data set's __getitem__ blurs all 2000 signals "
        "and picks its row (meant: blur the one row), so each batch of 32 waits ~50 ms for data against "
        "~8 ms of compute.",
        max_steps=100,
        trainer_kwargs=every(25),
    ),
    case(
        "deblur_three_recordings_with_adc_glitches",
        build.deblur_glitches,
        "outlier_batches",
        proof.deblur_glitch_spikes,
        "Outlier batches from three bad rows: deblurring, Adam 1e-3; three recordings carry an ADC glitch "
        "(one sample at full scale, ~100x the signals' std), so each batch holding one has a loss ~100x "
        "the others' and a gradient to match.",
        onset_step=proof.GLITCH_ONSET,
        also_allowed=("exploding_gradients", "inputs"),
        trainer_kwargs=every(21),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "insurance_zero_exposure_policies_log_offset_nan",
    "tictactoe_300_positions_debug_subset_overfits",
    "photoz_swa_lrs_1_read_as_a_factor",
    "tictactoe_linearlr_epochs_stepped_per_step",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "dna_rprop_on_batches_of_250",
        build.dna_rprop_big_batches,
        None,
        proof.dna_rprop_trains,
        "Binding sites with Rprop on batches of 250 (8 steps an epoch): sign-based steps, a loss that "
        "reaches its floor in two epochs and sits there.",
    ),
    case(
        "dna_steplr_every_100_steps",
        build.dna_steplr,
        None,
        proof.dna_steplr_trains,
        "Binding sites, Adam 1e-2 under StepLR(100, gamma=0.2) stepped per step, as meant: the LR drops 5x "
        "twice.",
    ),
    case(
        "dna_known_motif_filters_frozen_on_purpose",
        build.dna_known_motif_filters,
        None,
        proof.dna_known_motif_trains,
        "Binding sites with the filters set from the known CRE site and frozen on purpose "
        "(requires_grad=False): only the read-out trains, and well.",
    ),
    case(
        "photoz_lbfgs_full_batch",
        build.photoz_lbfgs,
        None,
        proof.photoz_lbfgs_trains,
        "Photo-z by LBFGS with a strong Wolfe line search on the whole training set: 30 optimizer steps, "
        "several loss evaluations (closures) in each, big early drops.",
        max_steps=build.LBFGS_STEPS,
    ),
    case(
        "photoz_swa_at_half_the_lr",
        build.photoz_swa_healthy,
        None,
        proof.photoz_swa_trains,
        "Photo-z, Adam 1e-3 with StochasticWeightAveraging(swa_lrs=5e-4) from epoch 3: a constant LR after "
        "the switch, a flat noisy loss, fine.",
        max_steps=-1,
        max_epochs=5,
        trainer_kwargs=every(21),
    ),
    case(
        "photoz_validated_on_16_galaxies",
        build.photoz_tiny_val,
        None,
        proof.photoz_tiny_val_trains,
        "Photo-z validated on 16 galaxies only: a validation loss that jumps up at some checks, yet falls "
        "4x overall.",
        trainer_kwargs=every(21),
    ),
    case(
        "insurance_claims_in_dollars_clipped_by_value",
        build.insurance_dollars,
        None,
        proof.insurance_dollars_trains,
        "Pure premium in dollars: Tweedie losses ~45 and gradients ~10 (raw units), clipped by value "
        "(gradient_clip_algorithm='value'), Adam 1e-3 trains.",
        trainer_kwargs={**every(20), "gradient_clip_val": 5.0, "gradient_clip_algorithm": "value"},
    ),
    case(
        "insurance_sgd_weight_decay_005",
        build.insurance_sgd_weight_decay,
        None,
        proof.insurance_weight_decay_trains,
        "Pure premium, SGD momentum 0.9 with a large weight decay (0.05) and ExponentialLR(0.995) per step: "
        "a noisy Tweedie loss, shrinking weights and LR, a validation loss below the constant model's.",
        trainer_kwargs=every(20),
    ),
    case(
        "tictactoe_30pct_exploration_moves_as_targets",
        build.ttt_noisy_moves,
        None,
        proof.ttt_noisy_trains,
        "Move prediction with 30% of the training targets replaced by random legal moves on purpose: a "
        "high training-loss floor, a clean validation loss that falls.",
        trainer_kwargs=every(19),
    ),
    case(
        "tictactoe_adagrad_lr_decay",
        build.ttt_adagrad_decay,
        None,
        proof.ttt_adagrad_trains,
        "Move prediction, Adagrad 0.1 with lr_decay=1e-2: an effective LR that shrinks every step, steady "
        "progress.",
        trainer_kwargs=every(19),
    ),
    case(
        "tictactoe_linearlr_to_zero_over_the_run",
        build.ttt_linear_decay_whole_run,
        None,
        proof.ttt_linear_whole_run_trains,
        "Move prediction, Adam 3e-3 under LinearLR(1 -> 0) over the run's 300 steps, as meant: the LR "
        "reaches 0 at the end and the loss flattens.",
        trainer_kwargs=every(19),
    ),
    case(
        "deblur_cosine_annealing_to_zero",
        build.deblur_cosine,
        None,
        proof.deblur_cosine_trains,
        "Deblurring, Adam 2e-3 under CosineAnnealingLR(T_max=300, eta_min=0): an LR that fades to ~0, "
        "small losses (MSE ~0.01) that fall.",
        trainer_kwargs=every(21),
    ),
    case(
        "deblur_accumulate_8_batches",
        build.deblur_accumulated,
        None,
        proof.deblur_accumulated_trains,
        "Deblurring with accumulate_grad_batches=8 on batches of 16: one optimizer step every 8 batches, "
        "the losses of the batches between reported divided by 8.",
        max_steps=build.ACCUMULATE_STEPS,
        trainer_kwargs={"accumulate_grad_batches": build.ACCUMULATE, "val_check_interval": 0.25},
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
