"""Zoo 22's runs: new tasks (global optical flow of translated random textures, 4x4 mini-sudoku cell
completion, a zero-inflated rainfall hurdle model, four-digit captcha reading with one head per character, a
Black-Scholes pricing surrogate), new optimizers and schedules (RAdam, Adagrad, SGD with Nesterov momentum,
AdamW under OneCycleLR, CosineAnnealingWarmRestarts, PolynomialLR, LambdaLR warm-ups, gradient clipping and
accumulation set on the Trainer), new bugs (uint8 images floor-divided to zero, a barometer outage left as
NaN, a decay hook given a gamma where it divides, a LambdaLR lambda returning the LR instead of a factor, an
optimizer over the heads only, a rare-event prior bias put on the hidden layers, labels priced by Monte
Carlo in ``__getitem__``, one station's files in hundredths of a mm), blind pairs, runs a repair could
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
from galleries.health.zoo22 import _builds as build
from galleries.health.zoo22 import _proofs as proof

PROBLEM_CASES: list[FieldCase] = [
    # -- blind trio: the loss at its trivial level from step 0
    case(
        "captcha_uint8_images_floor_divided_to_zero",
        build.captcha_floor_division,
        "not_learning",
        proof.captcha_floor_stuck,
        "Trivial loss from a data-pipeline bug: four-digit captchas, RAdam 2e-3; the uint8 images are scaled "
        "with images // 255 (floor division, meant / 255) and no grey level reaches 255, so every input "
        "pixel is 0 and each head's cross-entropy stays at ln 10.",
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(50),
    ),
    case(
        "sudoku_adagrad_lr_1e_5",
        build.sudoku_adagrad,
        "lr_too_low",
        proof.sudoku_lr_stuck,
        "Trivial loss from an LR 3000x too low: 4x4 mini-sudoku cells, Adagrad at 1e-5 (another config's "
        "fine-tuning LR; meant 3e-2); the clues reach every unit, the blank cells' cross-entropy stays at "
        "ln 4.",
        also_allowed=STUCK,
        trainer_kwargs=every(50),
    ),
    case(
        "black_scholes_ten_sigmoid_layers_vanish",
        build.option_deep,
        "vanishing_gradients",
        proof.option_deep_vanishes,
        "Trivial loss from vanishing gradients: a Black-Scholes pricing surrogate built as ten width-32 "
        "sigmoid layers (Xavier init), SGD Nesterov 0.01; the first layer's gradient is ~1e6 times smaller "
        "than the last's and the MSE stays at the price variance (ReLU with He init trains).",
        also_allowed=STUCK,
        trainer_kwargs=every(50),
    ),
    # -- blind pair: NaN from non-finite inputs / from an LR blow-up
    case(
        "rainfall_barometer_outage_left_as_nan",
        build.rain_barometer_outage,
        "inputs",
        proof.rain_outage_nan,
        "NaN from non-finite inputs: a rainfall hurdle model read in date order, AdamW 1e-3; a barometer "
        "outage left five days of the pressure column as NaN (the export's missing value), batch 150's loss "
        "is NaN and its update makes every weight NaN.",
        onset_step=proof.OUTAGE_ONSET,
        also_allowed=("nonfinite_activations",),
        trainer_kwargs=every(20),
    ),
    case(
        "black_scholes_nesterov_lr_100x_nan",
        build.option_nesterov,
        "lr_too_high",
        proof.option_nesterov_nan,
        "NaN from an LR blow-up on clean inputs: the pricing surrogate, SGD Nesterov momentum 0.9 at 1.5 "
        "(meant 0.015); the loss grows 100x in the first steps and is inf then NaN by step 5.",
        also_allowed=LR_BLOWUP,
        max_steps=100,
        check_every=10,
        trainer_kwargs=every(50),
    ),
    # -- blind pair: the validation loss rising from overfitting / from an LR raised mid-run
    case(
        "sudoku_400_puzzle_debug_slice_overfits",
        build.sudoku_debug_subset,
        "overfitting",
        proof.sudoku_overfits,
        "Overfitting: a width-512 MLP for mini-sudoku on the first 400 puzzles (a debug slice left in), "
        "AdamW 3e-3, validated every epoch (4 steps); the training loss falls to ~0 while the validation "
        "loss climbs from its best after epoch 10.",
        onset_step=proof.OVERFIT_ONSET,
    ),
    case(
        "flow_decay_hook_given_gamma_divides_by_0_1",
        build.flow_epoch_decay,
        "lr_too_high",
        proof.flow_decay_diverges,
        "An LR raised 10x every epoch: optical flow of translated textures, SGD Nesterov 0.02 with a "
        "hand-written hook that divides the LR by its decay at each epoch end, given decay=0.1 (a gamma; "
        "meant 10); from step 100 the LR is 0.2 and the loss jumps back to its trivial level, from step "
        "200 (LR 2) it blows up and validation ends NaN.",
        onset_step=proof.DECAY_ONSET,
        also_allowed=LR_BLOWUP,
        trainer_kwargs=every(20),
    ),
    # -- single causes
    case(
        "black_scholes_lambdalr_returns_lr_not_factor",
        build.option_warmup_returns_lr,
        "lr_too_low",
        proof.option_warmup_collapses,
        "An LR collapsing after the warm-up: the pricing surrogate, AdamW 3e-3 under a LambdaLR warm-up over "
        "50 steps whose lambda returns the LR (3e-3) after it where LambdaLR wants a factor (1.0); from step "
        "50 the LR is 9e-6 and the loss freezes 10x above the fixed run's.",
        onset_step=proof.COLLAPSE_ONSET,
        also_allowed=("loss_plateau",),
        trainer_kwargs=every(25),
    ),
    case(
        "captcha_optimizer_over_heads_only",
        build.captcha_heads_only,
        "frozen_parameters",
        proof.captcha_trunk_frozen,
        "A frozen trunk from the optimizer's parameter list: captchas, RAdam 2e-3 over "
        "net.heads.parameters() (a fine-tuning recipe kept, though this trunk is new and random); the "
        "convolutions get gradients and never change, only the four heads learn.",
        trainer_kwargs=every(50),
    ),
    case(
        "flow_pixel_units_saturate_tanh",
        build.flow_raw_tanh,
        "saturated_activations",
        proof.flow_tanh_saturates,
        "Saturated tanh units from unnormalised inputs: optical flow with tanh convolutions fed the frames "
        "in pixel units (0-255, the normalisation step dropped), Adam 1e-3; >90% of the first layer's "
        "outputs sit beyond +-0.99 on every batch.",
        also_allowed=("vanishing_gradients",),
        trainer_kwargs=every(50),
    ),
    case(
        "rainfall_rare_event_prior_on_hidden_biases",
        build.rain_prior_on_body,
        "initialisation",
        proof.rain_prior_kills_units,
        "Dead ReLUs from initialisation: a rainfall hurdle model, Adam 1e-3; the rare-event prior bias "
        "-log(99) meant for the rain logit is applied with net.body.apply, so every hidden unit starts at "
        "-4.6, is zero on every day and gets no gradient; the model stays weather-blind.",
        also_allowed=("dead_units",),
        trainer_kwargs=every(50),
    ),
    case(
        "black_scholes_monte_carlo_labels_in_getitem",
        build.option_monte_carlo,
        "data_stall",
        proof.option_loader_stalls,
        "A data stall: the pricing surrogate, Adam 1e-3, its labels priced by Monte Carlo (40000 paths per "
        "option) in the Dataset's __getitem__ on every read, in the main process; the step waits >4x as long "
        "for its batch as it computes.",
        max_steps=100,
        trainer_kwargs=every(50),
    ),
    case(
        "rainfall_station_logging_hundredths_of_mm",
        build.rain_station_files,
        "outlier_batches",
        proof.rain_station_outliers,
        "Outlier batches from one station's units: rainfall read as station-month files of 32 days, Adam "
        "1e-3; one station in 20 (files 7, 27, ...) logs hundredths of a mm read as mm, its batches' loss "
        ">2x and gradient >5x their neighbours', the validation worse than the fixed run's.",
        onset_step=proof.STATION_ONSET,
        trainer_kwargs=every(50),
    ),
]

REPAIRABLE: tuple[str, ...] = (
    "rainfall_barometer_outage_left_as_nan",
    "sudoku_400_puzzle_debug_slice_overfits",
    "flow_decay_hook_given_gamma_divides_by_0_1",
    "black_scholes_lambdalr_returns_lr_not_factor",
)

HEALTHY_CASES: list[FieldCase] = [
    case(
        "flow_cosine_warm_restarts_every_75",
        build.flow_warm_restarts,
        None,
        proof.flow_restarts_train,
        "Optical flow, AdamW 2e-3 under CosineAnnealingWarmRestarts(T_0=75): the LR falls to ~0 and jumps "
        "back to its top every 75 steps; the loss bumps at each restart and trains.",
        trainer_kwargs=every(25),
    ),
    case(
        "sudoku_onecycle_accumulating_4_batches",
        build.sudoku_onecycle,
        None,
        proof.sudoku_onecycle_trains,
        "Mini-sudoku, AdamW under OneCycleLR(max_lr=1e-2) over 100 optimizer steps, the Trainer accumulating "
        "4 batches per step: the LR rises 25x then falls to ~0; few, big steps that train.",
        max_steps=build.ONECYCLE_STEPS,
        trainer_kwargs={"accumulate_grad_batches": 4},
    ),
    case(
        "black_scholes_prices_in_dollars_clipped",
        build.option_dollars,
        None,
        proof.option_dollars_train,
        "The pricing surrogate on prices in dollars (MSE in the hundreds at first), Adam 3e-3, the Trainer "
        "clipping gradients at norm 5, which bites on nearly every step: it trains to cents.",
        trainer_kwargs={**every(50), "gradient_clip_val": 5.0},
    ),
    case(
        "captcha_30pct_training_characters_relabelled",
        build.captcha_noisy_labels,
        None,
        proof.captcha_noisy_trains,
        "Captchas with 30% of the training characters relabelled at random on purpose (a weak "
        "auto-labeller), RAdam 2e-3: the training loss floors high, the clean validation loss falls well "
        "below ln 10.",
        trainer_kwargs=every(50),
    ),
    case(
        "black_scholes_lambdalr_warmup_100",
        build.option_long_warmup,
        None,
        proof.option_warmup_trains,
        "The pricing surrogate, AdamW 3e-3 under a correct LambdaLR warm-up from 1% over 100 steps: slow at "
        "first, then it trains.",
        trainer_kwargs=every(25),
    ),
    case(
        "rainfall_validated_on_16_days",
        build.rain_tiny_val,
        None,
        proof.rain_tiny_val_trains,
        "A rainfall hurdle model, RAdam 2e-3, validated every 10 steps on 16 days only: a jittery "
        "validation loss, below the training loss, that rises at some checks yet falls overall.",
        trainer_kwargs=every(10),
    ),
    case(
        "sudoku_adagrad_3e_2_slow_and_steady",
        build.sudoku_adagrad_steady,
        None,
        proof.sudoku_adagrad_trains,
        "Mini-sudoku, Adagrad at 3e-2: its effective steps shrink as squared gradients pile up, slow but "
        "steady progress.",
        trainer_kwargs=every(25),
    ),
    case(
        "flow_polynomial_lr_to_zero_at_the_end",
        build.flow_polynomial_to_zero,
        None,
        proof.flow_polynomial_trains,
        "Optical flow, SGD Nesterov 0.02 under PolynomialLR(total_iters=300, power=2): the LR reaches ~0 at "
        "the run's end as planned, the loss flat there.",
        trainer_kwargs=every(25),
    ),
    case(
        "rainfall_nesterov_clipped_every_step",
        build.rain_clipped,
        None,
        proof.rain_clipped_trains,
        "A rainfall hurdle model, SGD Nesterov 0.05, the Trainer clipping gradients at norm 0.5, which bites "
        "on nearly every step: noisy but trains.",
        trainer_kwargs={**every(25), "gradient_clip_val": 0.5},
    ),
]

CASES: list[FieldCase] = PROBLEM_CASES + HEALTHY_CASES
