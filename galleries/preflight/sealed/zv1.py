"""Sealed gallery ZV1 (issue #34, half ``zv1``): DNA binding-site detection from one-hot windows (a 1-D CNN,
reverse-complement augmentation), photometric redshift from five magnitudes (colours, a log target, a
heteroscedastic Gaussian), tic-tac-toe move prediction (the expert's move under a legal-move mask, symmetry
augmentation), the insurance pure premium (Tweedie on exposure; frequency x severity) and 1-D deblurring of a
known motion blur (residual CNN, warm-up, an averaged model served). Written blind (see the package
docstring); each bug is proved against its healthy twin in ``test_proofs_zv1.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zv1_data as d
from galleries.preflight.sealed import _zv1_models as m
from galleries.sealed import gen


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def binding_data(augment=d.rc_half, scan=d.scan_both_strands) -> dict[str, Any]:
    """2,000 training windows (augmented per read by ``augment``) and 500 validation windows, labelled by
    ``scan``."""
    train = d.Rows(*d.sequences(2000, 1, scan), transform=augment)
    return d.loaders(train, d.Rows(*d.sequences(500, 2, scan)), batch_size=64)


def photoz_data(shuffle: bool = True, augment=None) -> dict[str, Any]:
    """A catalogue of 3,000 galaxies (in redshift order, as it comes), shuffled with ``shuffle`` and split
    into its first 2,000 for training (augmented per read by ``augment``) and the last 1,000 for
    validation."""
    mags, z, error = d.sorted_catalogue(3000, 1)
    if shuffle:
        order = torch.randperm(len(z), generator=gen(1))
        mags, z, error = mags[order], z[order], error[order]
    train = d.Rows(mags[:2000], z[:2000], error[:2000], transform=augment)
    return d.loaders(train, d.Rows(mags[2000:], z[2000:], error[2000:]), batch_size=64)


def tictactoe_data(augment=d.rotate, root_for_x: bool = False) -> dict[str, Any]:
    """The 2,800 training positions (turned per read by ``augment``) and 600 validation positions, with the
    expert's moves (``root_for_x``: an expert that picks O's moves as if it were X)."""
    train = d.Rows(*d.tictactoe("train", root_for_x), transform=augment)
    val = d.Rows(*d.tictactoe("val", root_for_x))
    return {**d.loaders(train, val, batch_size=64), "num_classes": 9}


def claims_data(per_year: bool = False, claimants_only: bool = False) -> dict[str, Any]:
    """4,000 training policies and 1,000 validation policies as (features, exposure, claim count, amount)
    (see :func:`_zv1_data.claim_rows`)."""
    train = d.Rows(*d.claim_rows(4000, 1, per_year, claimants_only))
    return d.loaders(train, d.Rows(*d.claim_rows(1000, 2, per_year, claimants_only)), batch_size=64)


def deblur_data(degrade=d.degrade) -> dict[str, Any]:
    """2,000 clean training signals, degraded afresh on every read by ``degrade``, and 400 fixed observed
    validation signals with their clean ones."""
    train = d.Rows(d.signals(2000, 1), transform=degrade)
    return d.loaders(train, d.Rows(*d.observed_pairs(400, 2)), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TARGET = "the target is the quantity the task declares, encoded as the task defines it"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
DISTRIBUTION = "the training data are drawn from the distribution the model is served on"
CONVENTION = "the served output is read with the convention the model was trained with"
SERVED = "the served model is the one training produced"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "binding_reverse_not_complemented",
        "DNA binding-site detection (reverse-complement augmentation)",
        m.BindingCNN,
        partial(binding_data, d.reverse_half),
        "The strand augmentation reverses the window along its length but does not complement the bases: "
        "the bound site becomes its reversed mirror (a near-miss the negatives carry) and a negative's "
        "mirror becomes the true site, so half the augmented windows teach the wrong label.",
        PAIRED,
    ),
    SealedCase(
        "binding_view_not_transpose",
        "DNA binding-site detection (1-D CNN over one-hot windows)",
        m.BindingCNNViewed,
        binding_data,
        "The (length, 4) one-hot windows are made channels-first with x.view(batch, 4, length) instead of a "
        "transpose: the channels are quarters of the window with the bases interleaved, and the filters "
        "cannot see the 8-base site.",
        DEPENDS,
    ),
    SealedCase(
        "binding_labels_forward_strand_only",
        "DNA binding-site detection (labels from a motif scan)",
        m.BindingCNN,
        partial(binding_data, scan=d.scan_forward_strand),
        "The labels come from a motif scan of the given strand only: windows whose site lies on the reverse "
        "strand are labelled unbound, and the reverse-complement augmentation then gives the same site both "
        "labels.",
        TARGET,
    ),
    SealedCase(
        "photoz_served_with_exp",
        "photometric redshift (log(1 + z) target)",
        m.PhotoZServedExp,
        photoz_data,
        "The model is trained on log(1 + z) but served with exp instead of expm1: every served redshift is "
        "too high by 1.",
        CONVENTION,
    ),
    SealedCase(
        "photoz_sigma_as_variance",
        "photometric redshift (heteroscedastic Gaussian negative log-likelihood)",
        m.PhotoZSigmaAsVariance,
        photoz_data,
        "The Gaussian NLL divides the squared residual by sigma instead of sigma squared: sigma is fitted to "
        "half the squared residual, and the served 68% intervals hold only a few percent of the true "
        "redshifts.",
        TASK_LOSS,
    ),
    SealedCase(
        "photoz_split_of_sorted_catalogue",
        "photometric redshift (train/validation split)",
        m.PhotoZ,
        partial(photoz_data, False),
        "The spectroscopic catalogue, ordered by redshift, is split by slicing without shuffling: the model "
        "trains only on z below about 0.68, validates on the rest, and serves every distant galaxy too near.",
        DISTRIBUTION,
    ),
    SealedCase(
        "tictactoe_mask_not_served",
        "tic-tac-toe move prediction (legal-move mask)",
        m.MovePickerUnmaskedServing,
        tictactoe_data,
        "The legal-move mask is applied in training only: predict takes the argmax of the raw logits, and "
        "often serves a cell that is already taken.",
        CONVENTION,
    ),
    SealedCase(
        "tictactoe_move_turned_the_other_way",
        "tic-tac-toe move prediction (rotation augmentation)",
        m.MovePicker,
        partial(tictactoe_data, d.rotate_move_clockwise),
        "The board is turned with torch.rot90 (counter-clockwise) but the expert's move with a hand-written "
        "clockwise map: for a quarter or three-quarter turn the target is the cell opposite the right one.",
        PAIRED,
    ),
    SealedCase(
        "tictactoe_expert_maximises_for_x",
        "tic-tac-toe move prediction (the expert's move as the target)",
        m.MovePicker,
        partial(tictactoe_data, root_for_x=True),
        "The expert's root always maximises X's value, also on O's turns: the target for O is its worst "
        "move, and the model learns to lose with O.",
        TARGET,
    ),
    SealedCase(
        "claims_log_target_mse",
        "insurance pure premium (log target instead of Tweedie)",
        m.PurePremiumLogTarget,
        claims_data,
        "The premium is fitted by squared error on log1p(amount / exposure) and served with expm1: with most "
        "policies claim-free, the mean of the log is far below the log of the mean and the premiums come out "
        "a fraction of the true ones.",
        TASK_LOSS,
    ),
    SealedCase(
        "claims_exposure_applied_twice",
        "insurance pure premium (Tweedie with a log-exposure offset)",
        m.PurePremium,
        partial(claims_data, True),
        "The claim amounts are already divided by the exposure in the data pipeline, and the model's offset "
        "multiplies its prediction by the exposure again: the fitted premium is inflated by about one over "
        "the mean exposure.",
        TARGET,
    ),
    SealedCase(
        "claims_step_drops_claim_free_rows",
        "insurance pure premium (Tweedie training step)",
        m.PurePremiumClaimsOnly,
        claims_data,
        "The training step keeps only the rows with a claim (a filter copied from the severity model's "
        "step): the premium is fitted to the policies that claimed and comes out several times too high.",
        DISTRIBUTION,
    ),
    SealedCase(
        "claims_plateau_mode_max",
        "insurance pure premium (ReduceLROnPlateau on the training loss)",
        m.PurePremiumPlateauMax,
        claims_data,
        "ReduceLROnPlateau watches the training loss with mode='max': each epoch the loss falls counts as a "
        "plateau and the learning rate is cut tenfold, from the second epoch on.",
        SCHEDULE,
    ),
    SealedCase(
        "deblur_blur_simulated_as_correlation",
        "1-D deblurring (training pairs simulated with the known kernel)",
        m.Deblurrer,
        partial(deblur_data, d.degrade_correlated),
        "The training blur is simulated with F.conv1d and the kernel unflipped, a cross-correlation: the "
        "simulated trail runs ahead of each sample while the sensor's runs behind, and the model undoes the "
        "wrong blur.",
        DISTRIBUTION,
    ),
    SealedCase(
        "deblur_average_decay_too_slow",
        "1-D deblurring (an exponential moving average of the weights served)",
        m.DeblurrerSlowAverage,
        deblur_data,
        "The served moving average of the weights decays at 0.999 per step (a 100,000-step recipe's value): "
        "after a run of a few hundred steps it is still mostly the random initialisation.",
        SERVED,
    ),
    SealedCase(
        "deblur_warmup_per_epoch",
        "1-D deblurring (linear learning-rate warm-up)",
        m.DeblurrerWarmupPerEpoch,
        deblur_data,
        "The 100-step warm-up is returned as ([optimizer], [scheduler]), whose interval defaults to 'epoch': "
        "the learning rate stays at a few hundredths of its peak for the whole run.",
        SCHEDULE,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "binding_reverse_complement",
            "DNA binding-site detection (reverse-complement augmentation; negatives carrying the site's "
            "mirror images)",
            m.BindingCNN,
            binding_data,
        ),
        (
            "binding_both_strands",
            "DNA binding-site detection (a strand-symmetric CNN reading every window and its reverse "
            "complement; no augmentation)",
            m.BindingCNNBothStrands,
            partial(binding_data, None),
        ),
        (
            "photoz_gaussian_nll",
            "photometric redshift (heteroscedastic Gaussian NLL on log(1 + z): the loss goes below zero)",
            m.PhotoZGaussian,
            photoz_data,
        ),
        (
            "photoz_point_renoised",
            "photometric redshift (plain regression on log(1 + z); the photometric noise redrawn per read)",
            m.PhotoZ,
            partial(photoz_data, augment=d.renoise),
        ),
        (
            "tictactoe_rotated",
            "tic-tac-toe move prediction (masked logits; board and move turned together)",
            m.MovePicker,
            tictactoe_data,
        ),
        (
            "tictactoe_all_best_moves",
            "tic-tac-toe move prediction (soft targets spread over every best move)",
            m.MovePickerAllBestMoves,
            partial(tictactoe_data, None),
        ),
        (
            "claims_tweedie_offset",
            "insurance pure premium (Tweedie NLL below zero; log-exposure offset; mostly zero targets)",
            m.PurePremium,
            claims_data,
        ),
        (
            "claims_frequency_severity",
            "insurance pure premium (Poisson frequency on every policy, gamma severity on claimants only)",
            m.FrequencySeverity,
            claims_data,
        ),
        (
            "deblur_averaged",
            "1-D deblurring (residual CNN; warm-up per step; the served weights a moving average, not the "
            "trained ones)",
            m.Deblurrer,
            deblur_data,
        ),
        (
            "deblur_spectral_loss",
            "1-D deblurring (squared error in the frequency domain; noise level drawn per read)",
            m.DeblurrerSpectralLoss,
            partial(deblur_data, d.degrade_any_noise),
        ),
        (
            "deblur_wiener_frozen",
            "1-D deblurring (a frozen Wiener deconvolution before the CNN)",
            m.WienerDeblurrer,
            deblur_data,
        ),
    )
]
