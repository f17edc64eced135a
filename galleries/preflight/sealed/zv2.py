"""Sealed gallery ZV (issue #34, half ``zv2``): 2-D object orientation from unordered point sets (the
heading regressed as a (cos, sin) pair or as soft bins; turn and mirror augmentation), particle-jet tagging
from variable-size sets of constituents (padding, a padding mask, Deep Sets pooling), traffic forecasting on
a small road graph (each sensor's next readings from its past and its upstream neighbours'), language
identification of short strings from character n-gram counts (imbalanced languages), edge detection in small
synthetic images (per-pixel binary with heavy class imbalance) and portfolio weights trained on a
Sharpe-ratio objective over generated returns. Written blind (see the package docstring); each bug is proved
against its healthy twin in ``test_proofs_zv2.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _zv2_data as d
from galleries.preflight.sealed import _zv2_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def orientation_data(augment=None) -> dict[str, Any]:
    """1,500 training arrows (augmented per read by ``augment``) and 300 validation arrows."""
    train = d.Rows(*d.arrows(1500, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.arrows(300, 2)))


def jet_data(augment=None) -> dict[str, Any]:
    """1,500 training jets (augmented per read by ``augment``) and 400 validation jets, padded per batch to
    its longest jet (dict batches: ``parts``, ``padding``, ``label``)."""
    train = d.Rows(*d.jets(1500, 1), transform=augment)
    val = d.Rows(*d.jets(400, 2))
    return {**d.loaders(train, val, collate=d.pad_jets), "input_key": "parts", "target_key": "label"}


def traffic_data(offset: int = 1, lost: float = 0.0) -> dict[str, Any]:
    """Windows of the first 2,000 steps of a series for training and of the next 400 for validation, the
    targets starting ``offset`` steps after each window (a share ``lost`` of the readings lost, as 0)."""
    series = d.lose_readings(d.speeds(2400, 1), lost, 5)
    return d.loaders(d.Windows(series[:2000], offset), d.Windows(series[2000:], offset))


def language_data(balance: str | None = None, read=d.counted) -> dict[str, Any]:
    """3,000 training strings (n-gram counted per read by ``read``; drawn by a balancing sampler with
    ``balance``: "per string", or "per class", handing it the class weights) and 600 validation strings."""
    train = d.Rows(*d.strings(3000, 1), transform=read)
    val = d.Rows(*d.counts_matrix(600, 2))
    kwargs = {"sampler": d.language_sampler(train.columns[1], balance == "per class")} if balance else {}
    return {**d.loaders(train, val, **kwargs), "num_classes": d.LANGUAGES}


def edge_data(augment=None) -> dict[str, Any]:
    """1,000 training images (augmented per read by ``augment``) and 300 validation images."""
    train = d.Rows(*d.shapes(1000, 1), transform=augment)
    return d.loaders(train, d.Rows(*d.shapes(300, 2)))


def portfolio_data(lag: int = 1) -> dict[str, Any]:
    """2,000 training days and 500 validation days, each day's features paired with the returns ``lag`` days
    later (1: the next day's)."""
    return d.loaders(d.Rows(*d.trading_days(2000, 1, lag)), d.Rows(*d.trading_days(500, 2, lag)))


PAIRED = "each input is paired with its own target through sampling, collation and augmentation"
TASK_LOSS = "the loss scores the target the task declares"
DEPENDS = "the output depends on what the task says it depends on"
SCHEDULE = "the loop's state machines (schedulers, accumulation, optimisation steps) advance as declared"
CONVENTION = "the served output is read with the convention the model was trained with"
SAMPLED = "every training example can be drawn, at the rates the sampler declares"


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        "orientation_raw_angle_regressed",
        "2-D orientation from point sets (angle regression)",
        m.OrientationNetRawAngle,
        orientation_data,
        "The heading is regressed as one number in radians with squared error instead of as (cos, sin): the "
        "loss has a seam at 0 / 2 pi, and arrows pointing near 0 degrees are served headings near 180.",
        TASK_LOSS,
    ),
    SealedCase(
        "orientation_atan2_arguments_swapped",
        "2-D orientation from point sets (serving the angle)",
        m.OrientationNetAtan2Swapped,
        orientation_data,
        "The served heading is atan2(cos, sin) instead of atan2(sin, cos): every arrow is served pi/2 minus "
        "its heading.",
        CONVENTION,
    ),
    SealedCase(
        "orientation_mirror_in_step_keeps_angle",
        "2-D orientation from point sets (mirror augmentation in the training step)",
        m.OrientationNetMirrorInStep,
        orientation_data,
        "The training step mirrors half of each batch (y -> -y) without negating those arrows' headings: the "
        "mirrored arrows teach theta for what looks like -theta, and the served headings collapse towards 0 "
        "and 180 degrees.",
        PAIRED,
    ),
    SealedCase(
        "jet_padding_mask_read_as_keep",
        "particle-jet tagging (Deep Sets over padded constituents)",
        m.JetTaggerMaskAsKeep,
        jet_data,
        "The collate's padding mask (True on padded slots) is used as a keep mask in the pooling: the tagger "
        "averages the padding and ignores every real constituent, seeing only the jet's length.",
        DEPENDS,
    ),
    SealedCase(
        "jet_rotation_augmentation_wrong_columns",
        "particle-jet tagging (rotation augmentation about the jet axis)",
        m.JetTagger,
        partial(jet_data, d.turn_jet_columns_0_1),
        "The random rotation about the jet axis is applied to feature columns 0:2 (log pT fraction, d eta) "
        "instead of 1:3 (d eta, d phi): the pT leaks into d eta at random angles, and d phi is never turned.",
        PAIRED,
    ),
    SealedCase(
        "traffic_adjacency_transposed",
        "traffic forecasting on a road graph (graph layers)",
        m.TrafficGNNDownstream,
        traffic_data,
        "The adjacency matrix is applied transposed: each sensor aggregates the sensor downstream of it, "
        "which echoes the past, instead of the upstream one whose disturbance arrives next.",
        DEPENDS,
    ),
    SealedCase(
        "traffic_target_window_off_by_one",
        "traffic forecasting on a road graph (windowing)",
        m.TrafficGNN,
        partial(traffic_data, 0),
        "The target window starts at the window's last reading (series[i + past - 1 :]) instead of the one "
        "after it: the first 'forecast' is a copy of the present, and every horizon is served a step short.",
        PAIRED,
    ),
    SealedCase(
        "traffic_warmup_counted_in_epochs",
        "traffic forecasting on a road graph (learning-rate warm-up)",
        m.TrafficGNNWarmupPerEpoch,
        traffic_data,
        "The 200-step linear warm-up (a LambdaLR) is returned without 'interval': 'step', so it advances "
        "once per epoch and the learning rate stays below 3% of its peak for the whole run.",
        SCHEDULE,
    ),
    SealedCase(
        "language_sampler_given_class_weights",
        "language identification from character n-gram counts (balancing sampler)",
        m.LanguageID,
        partial(language_data, "per class"),
        "The WeightedRandomSampler is handed the five class weights instead of one weight per string: it "
        "draws only strings 0 to 4, and the model learns five strings by heart.",
        SAMPLED,
    ),
    SealedCase(
        "language_letters_shuffled_augmentation",
        "language identification from character n-gram counts (augmentation)",
        m.LanguageIDWeighted,
        partial(language_data, read=d.shuffled_letters),
        "The augmentation shuffles each string's letters ('n-gram counts are a bag'): the letter counts "
        "survive, but the bigram counts that tell the languages apart are scrambled.",
        PAIRED,
    ),
    SealedCase(
        "language_class_weights_upside_down",
        "language identification from character n-gram counts (class-weighted loss)",
        m.LanguageIDWeightedByCount,
        language_data,
        "The cross-entropy's class weights are the languages' shares instead of their inverses: the common "
        "language is weighted up, and the rare ones are served almost never.",
        TASK_LOSS,
    ),
    SealedCase(
        "edge_pos_weight_inverted",
        "edge detection in small images (class-balanced loss)",
        m.EdgeNetWeightInverted,
        edge_data,
        "pos_weight is the edges' share over the non-edges' (about 1/4) instead of its inverse: the rare "
        "edge pixels are weighted down, and the served edge maps are broken and thin.",
        TASK_LOSS,
    ),
    SealedCase(
        "edge_probability_thresholded_at_zero",
        "edge detection in small images (serving the map)",
        m.EdgeNetThresholdAtZero,
        edge_data,
        "The served map thresholds the sigmoid's output at 0, a logit's threshold: every pixel is served as "
        "an edge.",
        CONVENTION,
    ),
    SealedCase(
        "portfolio_returns_same_day",
        "portfolio weights from a Sharpe-ratio objective (aligning features and returns)",
        m.Portfolio,
        partial(portfolio_data, 0),
        "Each day's features are paired with the same day's returns (already among the features) instead of "
        "the next day's: the weights learn to chase the day's winners, which next day revert.",
        PAIRED,
    ),
    SealedCase(
        "portfolio_sharpe_not_negated",
        "portfolio weights from a Sharpe-ratio objective (the loss)",
        m.PortfolioSharpeNotNegated,
        portfolio_data,
        "The loss is the Sharpe ratio, not its negative: minimised, it teaches the weights to pick the "
        "assets that will do worst.",
        TASK_LOSS,
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(*row)
    for row in (
        (
            "orientation_sin_cos",
            "2-D orientation (the heading as a (cos, sin) pair, unordered points, squared error)",
            m.OrientationNet,
            orientation_data,
        ),
        (
            "orientation_soft_bins_turned_and_mirrored",
            "2-D orientation (36 bins with wrapped Gaussian soft labels; every set turned at random and "
            "mirrored half the time, the heading turned and reflected with it)",
            m.OrientationBins,
            partial(orientation_data, d.turn_and_mirror),
        ),
        (
            "jet_turned_about_axis",
            "particle-jet tagging (padded sets with a padding mask; constituents rotated and reflected about "
            "the jet axis at random)",
            m.JetTagger,
            partial(jet_data, d.turn_jet),
        ),
        (
            "traffic_residual_horizon_weighted",
            "traffic forecasting (a residual on the last reading; loss weighted up with the horizon)",
            m.TrafficGNNResidual,
            traffic_data,
        ),
        (
            "traffic_missing_readings_masked",
            "traffic forecasting (a tenth of the readings lost as zeros: a seen-indicator input, lost "
            "targets masked out of the loss)",
            m.TrafficGNNMissing,
            partial(traffic_data, lost=0.1),
        ),
        (
            "language_balanced_sampler_windows",
            "language identification (a balancing sampler, with replacement; random windows of the strings)",
            m.LanguageID,
            partial(language_data, "per string", d.random_window),
        ),
        (
            "language_inverse_frequency_weights",
            "language identification (cross-entropy weighted by inverse language frequency)",
            m.LanguageIDWeighted,
            language_data,
        ),
        (
            "edge_photometric_augmentation",
            "edge detection (class-balanced loss; grey levels inverted, contrast and brightness jittered)",
            m.EdgeNet,
            partial(edge_data, d.photometric),
        ),
        (
            "portfolio_long_short_sharpe",
            "portfolio weights (market-neutral long-short; the negative Sharpe ratio, below zero, as the "
            "loss)",
            m.PortfolioLongShort,
            portfolio_data,
        ),
    )
]
