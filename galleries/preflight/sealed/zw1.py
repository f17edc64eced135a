"""Sealed gallery ZW1 (issue #34, half ``zw1``): optical flow on synthetic translated textures (two frames in,
one displacement out), completing 4 x 4 mini-sudoku grids (a digit per cell), zero-inflated daily rainfall (a
hurdle model: the chance of rain times the wet-day amount), reading captchas of 3-4 digits (four character
heads over one image) and a Black-Scholes option-pricing surrogate (monotone in spot; put-call parity).
Written blind (see the package docstring); each bug is proved against its healthy twin in
``test_proofs_zw1.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zw1_data as d
from galleries.preflight.sealed import _zw1_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def flow_data(augment=None) -> dict[str, Any]:
    """2,000 training frame pairs (augmented per read by ``augment``) and 400 validation pairs."""
    train = d.Rows(*d.frame_pairs(2000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.frame_pairs(400, 2)), batch_size=64)


def sudoku_data(encode=d.encode, val_encode=d.encode) -> dict[str, Any]:
    """2,000 training puzzles read through ``encode`` (augmentation and target encoding) and 400 validation
    puzzles read through ``val_encode``."""
    train = d.Rows(*d.puzzles(2000, 1), transform=encode)
    val = d.Rows(*d.puzzles(400, 2), transform=val_encode)
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.DIGITS}


def rain_data(balanced: bool = False) -> dict[str, Any]:
    """3,000 training days (drawn wet and dry equally often with ``balanced``) and 600 validation days."""
    x, rain = d.rainfall(3000, 1)
    sampler = {"sampler": d.balanced_sampler(rain)} if balanced else {}
    return d.loaders(d.Rows(x, rain), d.Rows(*d.rainfall(600, 2)), batch_size=64, **sampler)


def prior_corrected_hurdle() -> m.HurdlePriorCorrected:
    """The prior-corrected hurdle model, told the training set's dry-to-wet odds."""
    return m.HurdlePriorCorrected(d.dry_to_wet_odds(d.rainfall(3000, 1)[1]))


def captcha_data(augment=None) -> dict[str, Any]:
    """2,000 training captchas of the training digits (augmented per read by ``augment``) and 400 of the
    validation digits."""
    train = d.Rows(*d.captchas(2000, 1, "train"), transform=augment)
    val = d.Rows(*d.captchas(400, 2, "val"))
    return {**d.loaders(train, val, batch_size=64), "num_classes": d.NONE + 1}


def option_data() -> dict[str, Any]:
    """3,000 training call quotes and 600 validation ones."""
    return d.loaders(d.Rows(*d.calls(3000, 1)), d.Rows(*d.calls(600, 2)), batch_size=64)


def parity_data(convert=d.as_call) -> dict[str, Any]:
    """3,000 training quotes and 600 validation ones, half of them puts, each turned into a call price by
    ``convert`` (put-call parity)."""
    train = d.Rows(*d.mixed_quotes(3000, 1), transform=convert)
    val = d.Rows(*d.mixed_quotes(600, 2), transform=convert)
    return d.loaders(train, val, batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SAMPLING = "training rows are drawn as the task's distribution draws them, or the difference is corrected"
TRAINED = "every parameter meant to learn is updated by the optimiser"
CONVENTION = "the served output is read with the convention the model was trained with"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "flow_flip_keeps_dx",
        "optical flow on translated textures (flip augmentation)",
        m.FlowNet,
        partial(flow_data, d.flip_frames),
        "The left-right flip from the image-classification recipe mirrors both frames but leaves the target "
        "alone: in half the pairs the horizontal motion is reversed while dx is not, and the served dx "
        "shrinks towards 0.",
        PAIRED,
    ),
    SealedCase(
        "flow_frames_greyscaled",
        "optical flow on translated textures (input preprocessing)",
        m.FlowNetGreyscale,
        flow_data,
        "A to-greyscale step averages dimension 1, which holds the two frames rather than colours: the "
        "network sees one blurred frame, the same for a motion and its opposite, and cannot tell the "
        "direction of the motion.",
        DEPENDS,
    ),
    SealedCase(
        "sudoku_loss_on_givens",
        "4 x 4 mini-sudoku completion (masked cross-entropy)",
        m.SudokuNetGivensOnly,
        sudoku_data,
        "The loss mask is written puzzle != 0, the given cells, where the blanks were meant: the network "
        "learns to copy the givens and its answers for the cells it has to fill are near chance.",
        TASK_LOSS,
    ),
    SealedCase(
        "sudoku_relabel_puzzle_only",
        "4 x 4 mini-sudoku completion (digit-renaming augmentation)",
        m.SudokuNet,
        partial(sudoku_data, d.relabel_puzzle_only),
        "The random renaming of the digits is applied to the puzzle only, as an input transform: the "
        "solution keeps the old names, which the renamed puzzle no longer tells.",
        PAIRED,
    ),
    SealedCase(
        "sudoku_target_mod4",
        "4 x 4 mini-sudoku completion (target encoding)",
        m.SudokuNet,
        partial(sudoku_data, d.encode_mod4, d.encode_mod4),
        "The digits 1..4 are encoded as classes by digit % 4 while the served digit is the class + 1: every "
        "cell whose answer is 4 is trained as class 0 and served as a 1, and 1..3 are served one too high.",
        CONVENTION,
    ),
    SealedCase(
        "rain_double_sigmoid",
        "zero-inflated rainfall (hurdle model, rain/no-rain term)",
        m.HurdleDoubleSigmoid,
        rain_data,
        "The rain term passes sigmoid(logit) to binary_cross_entropy_with_logits, which applies a sigmoid "
        "again: the chance of rain the model serves is pushed to 0 or 1 and the expected rainfall is off on "
        "every uncertain day.",
        TASK_LOSS,
    ),
    SealedCase(
        "rain_amount_on_dry_days",
        "zero-inflated rainfall (hurdle model, amount term)",
        m.HurdleAmountOnAllDays,
        rain_data,
        "The amount's squared error is averaged over all days, dry days' zeros included: the amount head "
        "learns P(rain) x amount, and the served P(rain) x amount counts the chance of rain twice.",
        TASK_LOSS,
    ),
    SealedCase(
        "rain_balanced_sampler_uncorrected",
        "zero-inflated rainfall (balanced sampler)",
        m.Hurdle,
        partial(rain_data, True),
        "A sampler draws wet and dry days equally often and nothing corrects for it: the model learns a "
        "chance of rain inflated by the dry-to-wet odds and serves too much rain on every day.",
        SAMPLING,
    ),
    SealedCase(
        "captcha_heads_share_one_layer",
        "multi-character captcha reading (one head per position)",
        m.CaptchaNetSharedHeads,
        captcha_data,
        "The heads are built as nn.ModuleList([nn.Linear(128, 11)] * 4), one layer repeated: all four "
        "positions share its weights and read the same character.",
        DEPENDS,
    ),
    SealedCase(
        "captcha_none_ignored",
        "multi-character captcha reading (3- and 4-digit captchas)",
        m.CaptchaNetIgnoresNone,
        captcha_data,
        "The loss passes ignore_index=10 to skip the empty fourth position of 3-digit captchas: the 'none' "
        "class is never taught, and every 3-digit captcha is read with a fourth digit.",
        TASK_LOSS,
    ),
    SealedCase(
        "captcha_ema_updated_per_epoch",
        "multi-character captcha reading (served weight average)",
        m.CaptchaNetEMAPerEpoch,
        captcha_data,
        "The served moving average of the weights is updated in on_train_epoch_end with the per-step decay "
        "0.95: after 8 updates it is still mostly the random initial weights.",
        TRAINED,
    ),
    SealedCase(
        "option_optimizer_on_head_only",
        "Black-Scholes option-pricing surrogate (optimiser set-up)",
        m.OptionNetHeadOnly,
        option_data,
        "configure_optimizers passes self.head.parameters() (kept from a fine-tuning recipe): the randomly "
        "initialised body never trains and only the last layer is fitted.",
        TRAINED,
    ),
    SealedCase(
        "option_parity_strike_compounded",
        "Black-Scholes option-pricing surrogate (put quotes through put-call parity)",
        m.OptionNet,
        partial(parity_data, d.as_call_compounded),
        "The put quotes are turned into calls with C = P + S - K exp(+rT), the strike compounded instead of "
        "discounted: half the training targets are too low by K (exp(rT) - exp(-rT)).",
        PAIRED,
    ),
    SealedCase(
        "option_monotone_penalty_sign",
        "Black-Scholes option-pricing surrogate (monotone-in-spot penalty)",
        m.OptionNetMonotoneSignFlipped,
        option_data,
        "The monotonicity penalty is relu(slope) where relu(-slope) was meant: it charges every rise of the "
        "call price with spot, and the served prices are flattened in spot.",
        TASK_LOSS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "flow_flip_negates_dx",
            "optical flow (left-right flip of both frames with dx negated)",
            m.FlowNet,
            partial(flow_data, d.flip_and_negate),
        ),
        (
            "flow_played_backwards_charbonnier",
            "optical flow (frames swapped at random with the displacement negated; Charbonnier loss)",
            m.FlowNetCharbonnier,
            partial(flow_data, d.swap_and_negate),
        ),
        (
            "sudoku_blanks_only",
            "4 x 4 mini-sudoku (the loss masked to the blank cells: the givens are not scored)",
            m.SudokuNetBlanksOnly,
            sudoku_data,
        ),
        (
            "sudoku_relabel_digits",
            "4 x 4 mini-sudoku (the digits renamed at random in the puzzle and the solution alike)",
            m.SudokuNet,
            partial(sudoku_data, d.relabel_digits),
        ),
        (
            "sudoku_constraint_penalty",
            "4 x 4 mini-sudoku (cross-entropy plus a penalty on the row, column and box constraints)",
            m.SudokuNetConstraint,
            sudoku_data,
        ),
        (
            "rain_balanced_prior_corrected",
            "zero-inflated rainfall (wet and dry days drawn equally often; served with the prior correction)",
            prior_corrected_hurdle,
            partial(rain_data, True),
        ),
        (
            "rain_lognormal_likelihood",
            "zero-inflated rainfall (log-normal likelihood of wet-day amounts: a negative loss)",
            m.HurdleLogNormal,
            rain_data,
        ),
        (
            "captcha_label_smoothing_nudged",
            "multi-character captcha (label smoothing, so the loss keeps a floor; captchas moved a pixel up "
            "or down)",
            m.CaptchaNetSmoothed,
            partial(captcha_data, d.nudge),
        ),
        (
            "captcha_ema_per_step",
            "multi-character captcha (a moving average of the weights served, updated after every step)",
            m.CaptchaNetEMA,
            captcha_data,
        ),
        (
            "option_parity_puts",
            "option-pricing surrogate (half the quotes are puts, turned into calls by put-call parity)",
            m.OptionNet,
            parity_data,
        ),
        (
            "option_frozen_random_features",
            "option-pricing surrogate (frozen random Fourier features on purpose; only the head trains)",
            m.OptionNetRandomFeatures,
            option_data,
        ),
        (
            "option_monotone_penalty",
            "option-pricing surrogate (a finite-difference penalty on a call price falling with spot)",
            m.OptionNetMonotone,
            option_data,
        ),
    )
]
