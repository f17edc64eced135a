"""Sealed gallery Z (issue #34, half ``z1``): learning to sort short lists (each element's rank), multi-digit
addition with a GRU over digit tokens (teacher forcing, carries), image registration of digit pairs (the shift
and turn between a digit and its moved copy), a rotation-prediction pretext with an online linear probe on
digits, credit-default scoring on tabular rows (a rare default, weighted or focal losses, oversampling, a
time-ordered split) and heteroscedastic volatility forecasting of GARCH returns (a Gaussian negative
log-likelihood with a predicted variance). Written blind (see the package docstring); each bug is proved
against its healthy twin in ``test_proofs_z1.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _z1_data as d
from galleries.preflight.sealed import _z1_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def sorting_data(target=d.ranks, classes: bool = True) -> dict[str, Any]:
    """3,000 training lists and 500 validation lists of 8 numbers, with targets made by ``target`` (the
    ranks); ``num_classes`` (8 ranks) where the model classifies."""
    train = d.Rows(*d.ranked_lists(3000, 1, target))
    out = d.loaders(train, d.Rows(*d.ranked_lists(500, 2, target)), batch_size=64)
    return {**out, "num_classes": d.LENGTH} if classes else out


def addition_data(target=d.sum_digits, augment=None) -> dict[str, Any]:
    """3,000 training additions (read through ``augment``) and 500 validation additions of two 4-digit
    numbers: digit tokens in, the sum's digits (made by ``target``) out."""
    train = d.Rows(*d.additions(3000, 1, target), transform=augment)
    return {**d.loaders(train, d.Rows(*d.additions(500, 2, target)), batch_size=64), "num_classes": 10}


def registration_data(augment=None, radians=torch.deg2rad) -> dict[str, Any]:
    """A moved copy of each of the 1,000 training digits (read through ``augment``) and two of each of the
    300 validation digits; the turns converted to radians by ``radians``."""
    train = d.Rows(*d.pairs("train", 1, 1, radians), transform=augment)
    return d.loaders(train, d.Rows(*d.pairs("val", 2, radians=radians)), batch_size=64)


def pretext_data(keep: float = 1.0) -> dict[str, Any]:
    """The 1,000 training digits and the 300 validation digits with a ``keep`` share of their labels (the
    rest -1)."""
    train, val = d.few_labels("train", keep, 1), d.few_labels("val", keep, 2)
    return {**d.loaders(d.Rows(*train), d.Rows(*val), batch_size=64), "num_classes": 10}


def credit_data(sampler=None, late_at_outcome: bool = False) -> dict[str, Any]:
    """24 months of applications (2,400) for training, drawn by ``sampler`` (built on the training labels)
    if any, and the 6 months after them (600) for validation."""
    (x, y), val = d.credit_split(1, late_at_outcome)
    extra = {"sampler": sampler(y)} if sampler else {}
    return d.loaders(d.Rows(x, y), d.Rows(*val), batch_size=64, **extra)


def volatility_data(upto: int = 0, scale: float = 1.0) -> dict[str, Any]:
    """3,000 training windows and 500 validation windows of 20 daily returns (in percent, or times
    ``scale``) and the next day's return; ``upto`` moves the window's end (1 takes the next day in)."""
    train, val = d.return_windows(3000, 1, upto, scale), d.return_windows(500, 2, upto, scale)
    return d.loaders(d.Rows(*train[:2]), d.Rows(*val[:2]), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TARGET = "the target encodes what the task asks for, in the convention the model is served with"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
OPTIMISED = "every parameter the served prediction depends on and the loss trains is optimised"
SAMPLED = "the sampler draws the training rows in the proportions it declares"
KNOWN = "the inputs hold only what is known when the prediction is served"
CONVENTION = "the served output is read with the convention the model was trained with"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "sort_target_is_sorting_permutation",
        "learning to sort (each element's rank in its list)",
        m.Ranker,
        partial(sorting_data, d.sorting_order),
        "The targets are made with x.argsort(-1), the sorting permutation (the index of the k-th smallest at "
        "place k), not its inverse x.argsort(-1).argsort(-1): the model learns the permutation and serves it "
        "as the elements' ranks, right only where the permutation is its own inverse.",
        TARGET,
    ),
    SealedCase(
        "sort_cross_entropy_on_element_axis",
        "learning to sort (rank classification per element)",
        m.RankerClassesOnElements,
        sorting_data,
        "The (batch, element, rank) logits go to F.cross_entropy unreshaped: it takes the elements for the "
        "classes and the ranks for positions and, as lists and ranks are both 8 long, trains without "
        "complaint; the served argmax over ranks answers the inverse permutation.",
        TASK_LOSS,
    ),
    SealedCase(
        "addition_decoder_fed_unshifted_targets",
        "multi-digit addition (GRU decoder with teacher forcing)",
        m.AdderUnshifted,
        addition_data,
        "The decoder's teacher-forced inputs are the target digits themselves, not shifted behind the start "
        "token: at each place it reads the digit it must write, copies it (training loss near 0), and served "
        "greedily it copies its own previous guess.",
        KNOWN,
    ),
    SealedCase(
        "addition_places_in_written_order",
        "multi-digit addition (digits as tokens, carries)",
        m.AdderWrittenOrder,
        addition_data,
        "The places are flipped to be read and written most significant first, as numbers are written: the "
        "left-to-right GRU must write each digit before reading the lower places whose carry it needs, and "
        "most sums come out wrong.",
        DEPENDS,
    ),
    SealedCase(
        "addition_final_carry_dropped",
        "multi-digit addition (target digits)",
        m.Adder,
        partial(addition_data, d.sum_digits_operand_width),
        "The sum's digits are written with the operands' helper and width (4 places) and padded with a zero "
        "like the operands: the final carry is dropped, and every sum of 10,000 or more is served 10,000 "
        "short.",
        TARGET,
    ),
    SealedCase(
        "registration_flip_keeps_target",
        "image registration of digit pairs (flip augmentation)",
        m.Registration,
        partial(registration_data, d.mirror_images),
        "The left-right flip copied from a classifier's augmentation mirrors both images but not the target: "
        "on flipped pairs the x shift and the turn have the wrong sign, and the model learns to shrink them "
        "towards 0.",
        PAIRED,
    ),
    SealedCase(
        "registration_turn_in_degrees",
        "image registration of digit pairs (affine warp)",
        m.Registration,
        partial(registration_data, radians=d.in_degrees),
        "The turn is drawn in degrees and handed to torch.cos and torch.sin unconverted: the moving image is "
        "turned by that many radians, which has nothing smooth to do with the target angle, and the model "
        "learns the shifts only.",
        PAIRED,
    ),
    SealedCase(
        "pretext_probe_left_out_of_optimizer",
        "rotation-prediction pretext with an online linear probe (digits)",
        m.RotationPretextProbeNotOptimised,
        pretext_data,
        "configure_optimizers lists the encoder's and the rotation head's parameters by hand and leaves the "
        "probe out: the pretext trains, the probe keeps its random initial weights, and the served classes "
        "are near chance.",
        OPTIMISED,
    ),
    SealedCase(
        "pretext_probe_on_turn_logits",
        "rotation-prediction pretext with an online linear probe (digits)",
        m.RotationPretextProbeOnTurnLogits,
        pretext_data,
        "The probe reads the rotation head's four logits (the pretext model's output) instead of the trunk's "
        "512 features: they say how the digit is turned, little of which digit it is.",
        DEPENDS,
    ),
    SealedCase(
        "credit_sampler_given_class_weights",
        "credit-default scoring on tabular rows (oversampling the defaults)",
        m.CreditScorerPlain,
        partial(credit_data, d.class_weighted_sampler),
        "WeightedRandomSampler is handed the two class weights instead of one weight per row: it draws row 0 "
        "and row 1 only, and the scorer memorises two applications.",
        SAMPLED,
    ),
    SealedCase(
        "credit_arrears_recorded_at_outcome",
        "credit-default scoring on tabular rows (time-ordered split)",
        m.CreditScorer,
        partial(credit_data, late_at_outcome=True),
        "The arrears column comes from the warehouse's current snapshot, taken after the outcome, so "
        "most defaulters' own arrears are in it: the scorer leans on it, and at application time, when the "
        "column holds no such arrears, it ranks applicants worse.",
        KNOWN,
    ),
    SealedCase(
        "volatility_window_includes_target_day",
        "heteroscedastic volatility forecasting (Gaussian NLL)",
        m.VolatilityNet,
        partial(volatility_data, 1),
        "The window is sliced one day late (r[t - 19 : t + 1]), so it ends with the return it forecasts: "
        "the model reads it off and predicts a tiny variance, and served on the 20 days before the target it "
        "takes yesterday's return for today's.",
        KNOWN,
    ),
    SealedCase(
        "volatility_std_passed_as_variance",
        "heteroscedastic volatility forecasting (Gaussian NLL)",
        m.VolatilityNetStdAsVariance,
        volatility_data,
        "The head's standard deviation is passed to gaussian_nll_loss as its var: the head learns the "
        "variance, and the served variance, its square, is the variance squared.",
        CONVENTION,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "sort_rank_regression_l1",
            "learning to sort (ranks regressed as numbers in [0, 1] with an L1 loss, rounded when served)",
            m.RankRegressor,
            partial(sorting_data, classes=False),
        ),
        (
            "addition_operands_swapped",
            "multi-digit addition (the two operands swapped at random: the sum is the same)",
            m.Adder,
            partial(addition_data, augment=d.swap_operands),
        ),
        (
            "addition_written_order_bidirectional",
            "multi-digit addition (places read most significant first by a bidirectional GRU tagger; label "
            "smoothing)",
            m.AdderTagger,
            addition_data,
        ),
        (
            "registration_flip_mirrors_target",
            "image registration (left-right flips of both images with the x shift and the turn negated)",
            m.Registration,
            partial(registration_data, d.mirror_pair),
        ),
        (
            "pretext_probe_few_labels",
            "rotation pretext with a linear probe (three labels in four hidden as -1 and skipped; detached "
            "features)",
            m.RotationPretext,
            partial(pretext_data, 0.25),
        ),
        (
            "credit_focal_loss",
            "credit-default scoring (focal loss: small, slowly falling loss values)",
            m.CreditScorerFocal,
            credit_data,
        ),
        (
            "credit_oversampled_defaults",
            "credit-default scoring (defaults oversampled with replacement to balance the classes; plain "
            "cross-entropy)",
            m.CreditScorerPlain,
            partial(credit_data, d.oversampler),
        ),
        (
            "volatility_raw_units_negative_nll",
            "volatility forecasting (returns as raw fractions; a log-variance head; the full Gaussian NLL, "
            "negative throughout)",
            m.VolatilityNetRawUnits,
            partial(volatility_data, scale=0.01),
        ),
    )
]
