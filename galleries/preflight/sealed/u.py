"""Sealed gallery T, half ``u``: near-infrared spectroscopy calibration (the content of an analyte from a
mixture's spectrum, with a scatter correction, mixup, shift augmentation and replicate scans per sample),
battery state-of-charge estimation from windows of current and voltage (a GRU), jigsaw puzzles as a
self-supervised pretext (the permutation of a digit's quarters), hourly bike-rental demand (Poisson counts
from calendar-code embeddings), digit recognition served with test-time augmentation, calibration of a
low-cost air-quality sensor against a reference monitor, and valence-arousal regression with a
concordance-correlation loss (and a served weight average). Written blind (see the package docstring);
each bug is proved against its healthy twin in ``test_proofs_u.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

import torch

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _u_data as d
from galleries.preflight.sealed import _u_models as m
from galleries.sealed import gen


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def nir_data(augment=d.small_shift) -> dict[str, Any]:
    """1,500 training spectra (augmented per read by ``augment``) and 300 validation spectra with the
    analyte's content."""
    train = d.Rows(*d.spectra(1500, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.spectra(300, 2)), batch_size=64)


def nir_replicate_data(by_sample: bool = True) -> dict[str, Any]:
    """500 samples scanned three times each (1,500 spectra, shifted a little per read), split 400 / 100
    samples with all their scans on one side; with ``by_sample=False``, the 1,500 scans split at random
    1,200 / 300."""
    x, content = d.spectra(500, 4, scans=3)
    order = torch.arange(1500) if by_sample else torch.randperm(1500, generator=gen(5))
    train, val = order[:1200], order[1200:]
    train_rows = d.Rows(x[train], content[train], transform=d.small_shift)
    return d.loaders(train_rows, d.Rows(x[val], content[val]), batch_size=64)


def soc_data() -> dict[str, Any]:
    """2,000 training windows and 400 validation windows (batch-major: ``(batch, steps, 3)``) with the state
    of charge at their last step."""
    return d.loaders(d.Rows(*d.cell_windows(2000, 1)), d.Rows(*d.cell_windows(400, 2)), batch_size=64)


def jigsaw_data(arrange=d.shuffled) -> dict[str, Any]:
    """The 1,000 training digits as puzzles drawn per read (arranged by ``arrange``) and the 300 validation
    digits in all 24 orders."""
    train = d.Rows(*d.digits("train", (8, 8)), transform=d.random_puzzle(arrange))
    val = d.Rows(*d.all_puzzles("val", arrange))
    return {**d.loaders(train, val, batch_size=64), "num_classes": len(d.PERMUTATIONS)}


def bike_data() -> dict[str, Any]:
    """3,000 training hours and 600 validation hours: codes, temperature and the rentals counted."""
    train, val = d.rentals(3000, 1)[:3], d.rentals(600, 2)[:3]
    return d.loaders(d.Rows(*train), d.Rows(*val), batch_size=64)


def digit_data() -> dict[str, Any]:
    """The 1,000 training digits (8x8, shifted a pixel at random per read) and the 300 validation digits."""
    train = d.Rows(*d.digits("train", (8, 8)), transform=d.random_shift)
    return {**d.loaders(train, d.Rows(*d.digits("val", (8, 8)))), "num_classes": 10}


def air_data() -> dict[str, Any]:
    """3,000 training hours and 600 validation hours of the co-located sensor and reference."""
    return d.loaders(d.Rows(*d.air_quality(3000, 1)), d.Rows(*d.air_quality(600, 2)), batch_size=64)


def affect_data() -> dict[str, Any]:
    """2,000 training rows and 400 validation rows of affect features with valence and arousal."""
    return d.loaders(d.Rows(*d.affect(2000, 1)), d.Rows(*d.affect(400, 2)), batch_size=64)


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SHAPES = "tensors are laid out as the layers and losses read them"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
CONVENTION = "training labels follow the convention the served model is read with"
SPLIT = "validation holds no sample (or copy of one) that training holds"
AVERAGED = "a served weight average follows the weights it averages"
SERVED = "the served prediction is computed the way the model was trained to be read"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "nir_mixup_content_not_mixed",
        "near-infrared spectroscopy calibration (mixup of spectra)",
        m.NIRNetMixupTargetKept,
        nir_data,
        "Mixup mixes each spectrum with another one of the batch but keeps the first one's analyte content "
        "as the target: the calibration learns from mislabelled mixtures and is pulled towards the mean "
        "content.",
        PAIRED,
    ),
    SealedCase(
        "nir_shift_augmentation_moves_bands",
        "near-infrared spectroscopy calibration (shift augmentation)",
        m.NIRNet,
        partial(nir_data, d.wide_shift),
        "The shift augmentation copied from time-series code rolls each spectrum by up to 15 wavelengths and "
        "keeps its content: the analyte's band is moved onto an overlapping component's band and back, so "
        "band position, which tells the components apart, stops meaning anything.",
        PAIRED,
    ),
    SealedCase(
        "nir_replicate_scans_split_apart",
        "near-infrared spectroscopy calibration (replicate scans per sample)",
        m.NIRNet,
        partial(nir_replicate_data, False),
        "Each sample was scanned three times and the scans were split at random for validation: most "
        "validation spectra are a rescan of a training sample with the same content, and the validation "
        "error understates the error on new samples.",
        SPLIT,
    ),
    SealedCase(
        "soc_gru_time_major",
        "battery state-of-charge estimation from current/voltage windows (a GRU)",
        m.SOCNetTimeMajor,
        soc_data,
        "The GRU is built without batch_first=True while the windows are (batch, steps, channels): it "
        "recurs across the batch, and the state read for each window holds only its last step (after the "
        "other windows' last steps), never the rest period that shows the starting charge.",
        SHAPES,
    ),
    SealedCase(
        "jigsaw_quarters_scattered",
        "jigsaw puzzles of digit quarters (self-supervised permutation classification)",
        m.JigsawNet,
        partial(jigsaw_data, d.scattered),
        "The puzzles are built by scattering quarter i to position perm[i] while the label and the served "
        "reassembly read perm[i] as the quarter at position i: for the 14 of 24 permutations that are not "
        "their own inverse, the served reassembly scrambles the digit.",
        CONVENTION,
    ),
    SealedCase(
        "bike_softplus_rate_read_as_log",
        "hourly bike-rental demand (Poisson counts from calendar embeddings)",
        m.BikeNetSoftplusRate,
        bike_data,
        "The head outputs the rate through a softplus but poisson_nll_loss keeps log_input=True: the network "
        "learns the log of the rentals and the served rate is that log (about 3 rentals for 30).",
        TASK_LOSS,
    ),
    SealedCase(
        "bike_hour_embedding_reads_weekday",
        "hourly bike-rental demand (calendar-code embeddings)",
        m.BikeNetHourFromWeekday,
        bike_data,
        "A copy-paste feeds the weekday column into the hour embedding (its codes are valid hours): the hour "
        "of day never reaches the model, and it predicts a day's average at every hour.",
        DEPENDS,
    ),
    SealedCase(
        "tta_mirrored_digits",
        "digit recognition served with test-time augmentation",
        m.DigitTTAMirrored,
        digit_data,
        "The test-time views include the horizontal mirror image (copied from a photo classifier): a "
        "mirrored 3 or 7 is not a digit the model knows, and its confident wrong vote is averaged in.",
        SERVED,
    ),
    SealedCase(
        "airq_decay_stepped_per_batch",
        "low-cost air-quality sensor calibration (exponential learning-rate decay)",
        m.AirQNetDecayPerStep,
        air_data,
        "The decay of 0.7 meant per epoch is scheduled with interval 'step': the learning rate falls below "
        "1% of its start within 13 batches, and the calibration stops improving inside the first epoch.",
        SCHEDULE,
    ),
    SealedCase(
        "affect_pearson_not_concordance",
        "valence-arousal regression (a concordance-correlation loss)",
        m.AffectNetPearson,
        affect_data,
        "The loss is 1 - Pearson's correlation instead of 1 - the concordance correlation: the predictions' "
        "mean and scale are free, and the served valence and arousal are off by an arbitrary offset and "
        "gain.",
        TASK_LOSS,
    ),
    SealedCase(
        "affect_ema_decay_from_long_recipe",
        "valence-arousal regression (served through a weight average)",
        m.AffectNetEMAFromLongRecipe,
        affect_data,
        "The weight average keeps the decay 0.9999 of a million-step recipe on a run of 250 steps: the "
        "average stays 97% its random initialisation, and that is the model served and validated.",
        AVERAGED,
    ),
    SealedCase(
        "affect_concordance_over_targets",
        "valence-arousal regression (a concordance-correlation loss)",
        m.AffectNetCCCOverTargets,
        affect_data,
        "The concordance is taken along dim 1 (each row's valence against its arousal) instead of along the "
        "batch: the loss scores a pair of numbers per row, and neither target's level nor spread is learnt.",
        SHAPES,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "nir_snv_removes_scatter",
            "near-infrared spectroscopy calibration (each spectrum standardised over its wavelengths on "
            "purpose: the absolute level is thrown away; a one-wavelength drift augmentation)",
            m.NIRNet,
            nir_data,
        ),
        (
            "nir_mixup_mixed_contents",
            "near-infrared spectroscopy calibration (mixup of spectra and of their contents: training "
            "batches are blends)",
            m.NIRNetMixup,
            nir_data,
        ),
        (
            "nir_replicate_scans_kept_together",
            "near-infrared spectroscopy calibration (three scans per sample, split by sample: training "
            "rows come in triples with one content each)",
            m.NIRNet,
            nir_replicate_data,
        ),
        (
            "soc_temperature_channel_unused",
            "battery state of charge (a GRU over windows whose temperature channel carries nothing)",
            m.SOCNet,
            soc_data,
        ),
        (
            "jigsaw_digit_class_carried_unused",
            "jigsaw puzzles (labels made by the augmentation; 24 classes; the digit class rides along "
            "unused)",
            m.JigsawNet,
            jigsaw_data,
        ),
        (
            "bike_poisson_loss_below_zero",
            "hourly bike rentals (Poisson negative log-likelihood, far below 0 at its best; a holiday flag "
            "that carries nothing)",
            m.BikeNet,
            bike_data,
        ),
        (
            "tta_shifted_views",
            "digit recognition (served as the mean of three shifted views)",
            m.DigitTTA,
            digit_data,
        ),
        (
            "airq_frozen_hygroscopic_correction",
            "air-quality sensor calibration (a physical humidity correction whose constant is frozen on "
            "purpose; a learned gain and a small residual MLP)",
            m.AirQPhysics,
            air_data,
        ),
        (
            "affect_concordance_loss",
            "valence-arousal regression (1 - the concordance correlation over the batch: about 1 at "
            "initialisation)",
            m.AffectNet,
            affect_data,
        ),
        (
            "affect_ema_served",
            "valence-arousal regression (served and validated through a weight average, decay 0.98; the "
            "averaged copy takes no gradient)",
            m.AffectNetEMA,
            affect_data,
        ),
    )
]
