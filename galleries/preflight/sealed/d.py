"""Sealed gallery D: object counting from images, sequence-to-one regression with a GRU, ordinal
regression, censored survival times, multi-output regression with per-output scaling, mixtures of experts,
a variational autoencoder, forecasting with a lookback window, text classification with a bag of
embeddings, semi-supervised pseudo-labels and hierarchical labels. Written blind (see the package
docstring); each bug is proved against its healthy twin in ``test_proofs_d.py``."""

from __future__ import annotations

from functools import partial
from typing import Any

from torch.utils.data import TensorDataset, WeightedRandomSampler

from galleries.preflight.sealed import SealedCase
from galleries.preflight.sealed import _d_data as d
from galleries.preflight.sealed import _d_models as m


# --- data builders (each returns preflight's data keyword arguments) ----------------------------------------
def pair_data(make, train_seed: int = 1, n: int = 1000, transform=None, **kw) -> dict[str, Any]:
    """``make(n, seed)`` -> (x, y) for training (through ``transform`` per read, if given) and
    ``make(300, 2)`` for validation."""
    x, y = make(n, train_seed)
    train = d.Augmented(x, y, transform) if transform else TensorDataset(x, y)
    return d.loaders(train, TensorDataset(*make(300, 2)), **kw)


def counting_data(transform=None) -> dict[str, Any]:
    return pair_data(d.dots, transform=transform)


def small_counting_data(val_seed: int = 2) -> dict[str, Any]:
    """150 training images, ``d.dots(150, 1)``, and 150 validation images, ``d.dots(150, val_seed)``: the BUG,
    with the training seed 1, regenerates the training images themselves."""
    return d.loaders(TensorDataset(*d.dots(150, 1)), TensorDataset(*d.dots(150, val_seed)), batch_size=16)


def ordinal_data(num_samples: int | None = None) -> dict[str, Any]:
    """Ordinal rows; with ``num_samples``, a level-balancing sampler drawing that many rows per epoch (the
    BUG: 32, the batch size, so an epoch is one batch)."""
    if num_samples is None:
        return pair_data(d.ordinal_rows)
    y = d.ordinal_rows(1000, 1)[1]
    sampler = WeightedRandomSampler(d.level_weights(y), num_samples=num_samples)
    return pair_data(d.ordinal_rows, sampler=sampler)


def survival_data(censored: float = 0.5, flag_is_censoring: bool = False) -> dict[str, Any]:
    """(features, observed log time, event flag). The BUG (``flag_is_censoring``): the export's flag is
    1 = censored, where the loss reads 1 = event seen."""

    def dataset(n: int, seed: int) -> TensorDataset:
        x, time, event, _ = d.survival(n, seed, censored)
        return TensorDataset(x, time, 1 - event if flag_is_censoring else event)

    return d.loaders(dataset(1000, 1), dataset(300, 2))


def forecast_data(with_future: bool = False) -> dict[str, Any]:
    """Scaled (lookback, next 4 steps) windows; the BUG (``with_future``) scales each window with statistics
    that include its 4 future steps."""

    def dataset(n: int, seed: int) -> TensorDataset:
        return TensorDataset(*d.scale_windows(d.series(n, seed), with_future))

    return d.loaders(dataset(1000, 1), dataset(300, 2))


def text_data(pad: int = d.WORDS) -> dict[str, Any]:
    return pair_data(partial(d.documents, pad=pad))


def digit_data(train=None) -> dict[str, Any]:
    x, y = train if train is not None else d.digits("train")
    return {**d.loaders(TensorDataset(x, y), TensorDataset(*d.digits("val"))), "num_classes": 10}


def semi_supervised_data(missing: int = -1) -> dict[str, Any]:
    """150 labelled training digits and 850 unlabelled ones marked ``missing`` (the BUG: 0, from a fill of
    missing values, which is also a class)."""
    return digit_data(d.partly_labelled(missing))


def pairs_data(same_is_one: bool = True) -> dict[str, Any]:
    """Digit pairs with a flag; the BUG (``same_is_one=False``): the pairs file flags *different* pairs with
    1, while the contrastive loss reads 1 = same."""

    def dataset(part: str, n: int, seed: int) -> TensorDataset:
        a, b, same = d.digit_pairs(part, n, seed)
        return TensorDataset(a, b, same if same_is_one else 1 - same)

    return d.loaders(dataset("train", 2000, 1), dataset("val", 500, 2))


counting = partial(counting_data, d.random_flips)
sequence_data = partial(pair_data, d.level_sequences)
three_scale_data = partial(pair_data, d.three_scales, n=1200)
regime_data = partial(pair_data, d.regimes)
vae_data = lambda: d.loaders(TensorDataset(d.digits("train")[0]), TensorDataset(d.digits("val")[0]))  # noqa: E731


# --- the cases ----------------------------------------------------------------------------------------------
BUGS: list[SealedCase] = [
    SealedCase(
        id="counting_crop_augmentation_keeps_count",
        task="object counting from images (augmentation)",
        model=m.DotCounter,
        data=partial(counting_data, d.random_border_crop),
        bug="A random border crop blanks a strip of the image but the target still counts the dots that were "
        "there, so the counter learns to overcount whole images.",
        invariant="augmentation keeps each input paired with its own (still true) target",
    ),
    SealedCase(
        id="counting_global_max_pool",
        task="object counting from images",
        model=m.DotCounterMaxPool,
        data=counting,
        bug="The counter pools its feature maps with a global max (from a classifier template), which keeps "
        "the brightest dot only, so the count cannot be read from it.",
        invariant="the output depends on what the task reads (every object, not the strongest)",
    ),
    SealedCase(
        id="counting_val_images_from_train_seed",
        task="object counting from images (validation)",
        model=m.DotCounterMLP,
        data=partial(small_counting_data, val_seed=1),
        bug="The validation images are generated with the training seed, so validation re-scores the 150 "
        "memorised training images and overstates the counter on new images.",
        invariant="training and validation share no sample",
    ),
    SealedCase(
        id="gru_regressor_reads_first_step",
        task="sequence-to-one regression (GRU)",
        model=m.SequenceRegressorFirstStep,
        data=sequence_data,
        bug="The summary is outputs[:, 0], the GRU's output after the first step, so the prediction uses one "
        "step of twenty and the level and slope are guessed from it.",
        invariant="the output depends on every part of the input the task reads",
    ),
    SealedCase(
        id="gru_one_cycle_stepped_per_epoch",
        task="sequence-to-one regression (GRU, learning-rate schedule)",
        model=m.OneCycleSequenceRegressorPerEpoch,
        data=sequence_data,
        bug="configure_optimizers returns ([optimizer], [OneCycleLR]), so the per-batch cycle is stepped "
        "once an epoch and the rate stays near its starting max/25 for the whole run.",
        invariant="the scheduler advances as declared",
    ),
    SealedCase(
        id="gru_each_sequence_standardised",
        task="sequence-to-one regression (GRU)",
        model=m.SequenceRegressorPerSequenceScaled,
        data=sequence_data,
        bug="Each sequence is standardised over its own steps before the GRU, which erases its level, "
        "half of what the target is, so the regressor cannot predict it.",
        invariant="preprocessing keeps the information the target depends on",
    ),
    SealedCase(
        id="ordinal_cumulative_targets_from_zero",
        task="ordinal regression (cumulative logits)",
        model=m.OrdinalNetEncodedFromZero,
        data=ordinal_data,
        bug="The cumulative targets are y >= k for k = 0..3 instead of y > k, so the first threshold is "
        "always passed and every predicted level is one too high.",
        invariant="each output is scored against its own target",
    ),
    SealedCase(
        id="ordinal_sampler_epoch_is_one_batch",
        task="ordinal regression with a balancing sampler (weighted sampling)",
        model=m.OrdinalNet,
        data=partial(ordinal_data, num_samples=32),
        bug="WeightedRandomSampler gets num_samples=32 (the batch size) where it wants the epoch's length, "
        "so every epoch is one batch and the model sees ~30x fewer rows than planned.",
        invariant="the loader serves an epoch of the dataset",
    ),
    SealedCase(
        id="survival_censored_rows_fitted_as_events",
        task="survival regression with censored targets",
        model=m.SurvivalNetCensoredAsEvents,
        data=survival_data,
        bug="A plain MSE on the observed times treats the censoring time of half the rows as their event "
        "time, so predicted event times are biased short.",
        invariant="the loss matches the target's structure (censored times are lower bounds)",
    ),
    SealedCase(
        id="survival_event_flag_means_censored",
        task="survival regression with censored targets",
        model=m.SurvivalNet,
        data=partial(survival_data, flag_is_censoring=True),
        bug="The export's flag is 1 = censored while the loss reads 1 = event, so seen events are treated as "
        "lower bounds and censored rows as events: the times are learnt from the wrong rows.",
        invariant="each input is paired with its own target (its flag means what the loss reads)",
    ),
    SealedCase(
        id="multi_output_unscaled_in_reverse_order",
        task="multi-output regression with per-output scaling",
        model=m.ThreeScaleRegressorReversedUnscale,
        data=three_scale_data,
        bug="Predictions are mapped back to units with the per-output statistics in reverse column order, so "
        "the scaled validation loss is fine while the predictions in units are off by ~100x.",
        invariant="what validation reports is what the model serves",
    ),
    SealedCase(
        id="multi_output_loss_in_raw_units",
        task="multi-output regression with per-output scaling",
        model=partial(m.ThreeScaleRegressor, standardise=False),
        data=three_scale_data,
        bug="The MSE is taken on the raw targets (units ~1, ~100 and ~0.01), so the loss is all the second "
        "output and the other two are barely fitted.",
        invariant="every output moves the loss",
    ),
    SealedCase(
        id="moe_gate_softmax_over_batch",
        task="mixture-of-experts regression",
        model=m.MixtureOfExpertsGateOverBatch,
        data=regime_data,
        bug="The gate's softmax runs over dim=0, the batch, so a sample's expert weights depend on its "
        "batch-mates and shrink with the batch size when the model is served.",
        invariant="each sample's output depends on that sample only",
    ),
    SealedCase(
        id="moe_experts_are_one_module",
        task="mixture-of-experts regression",
        model=m.MixtureOfExpertsOneExpert,
        data=regime_data,
        bug="The experts are built as ModuleList([Linear] * 4), four references to one layer, so the "
        "mixture is a single linear model and cannot follow the four regimes.",
        invariant="distinct parts have distinct parameters (no accidental tying)",
    ),
    SealedCase(
        id="moe_gate_optimizer_never_stepped",
        task="mixture-of-experts regression (manual optimisation, two optimizers)",
        model=m.TwoOptimizerMixtureGateNeverStepped,
        data=regime_data,
        bug="In manual optimisation only the experts' optimizer is stepped; the gate's gets gradients and "
        "zero_grad but no step, so it stays at its zero start and mixes the experts evenly everywhere.",
        invariant="every trained parameter is stepped",
    ),
    SealedCase(
        id="vae_recon_averaged_kl_summed_over_batch",
        task="variational autoencoder",
        model=m.DigitVAEMeanRecon,
        data=vae_data,
        bug="The reconstruction term is averaged over pixels and batch while the KL is summed over the "
        "batch, so the KL dominates, the posterior collapses and every digit decodes to the mean digit.",
        invariant="the loss's terms are on the scales they are declared on",
    ),
    SealedCase(
        id="vae_decoder_left_out_of_optimizer",
        task="variational autoencoder",
        model=m.DigitVAEDecoderNotOptimised,
        data=vae_data,
        bug="configure_optimizers passes only the encoder's parameters, so the decoder keeps its random "
        "weights and the reconstructions stay poor while the KL term falls.",
        invariant="every parameter that shapes the output is stepped",
    ),
    SealedCase(
        id="forecast_window_scaled_with_its_future",
        task="time-series forecasting with a lookback window",
        model=m.Forecaster,
        data=partial(forecast_data, with_future=True),
        bug="Each window is scaled with the mean and std of lookback and horizon together, so the scaled "
        "input carries the future's level; forecasts from the lookback alone (as served) are worse.",
        invariant="no input carries the target (nothing from the future where the task is causal)",
    ),
    SealedCase(
        id="distillation_student_frozen_not_teacher",
        task="knowledge distillation (frozen teacher)",
        model=m.DistilledStudentFrozen,
        data=digit_data,
        bug="requires_grad_(False) is applied to the student instead of the teacher, so the teacher drifts "
        "towards the random student, the KL falls, and the served student never learns.",
        invariant="frozen parts are the ones declared frozen; the served parameters are stepped",
    ),
    SealedCase(
        id="text_padding_id_is_a_word_id",
        task="text classification with a bag of embeddings",
        model=partial(m.BagOfWords, pad=0),
        data=partial(text_data, pad=0),
        bug="Documents are padded with id 0 and the embedding has padding_idx=0, but 0 is also the id of a "
        "word (an opinion word), which is therefore always read as nothing.",
        invariant="everything supplied is used (a real token is not mistaken for padding)",
    ),
    SealedCase(
        id="pseudo_label_unlabelled_filled_with_zero",
        task="semi-supervised classification with pseudo-labels",
        model=m.PseudoLabelNet,
        data=partial(semi_supervised_data, missing=0),
        bug="The 850 unlabelled digits get label 0 (a fill of missing values) instead of the ignore index "
        "-1, so they train as zeros and the model predicts 0 for most digits.",
        invariant="each input is paired with its own target (a missing label is not a class)",
    ),
    SealedCase(
        id="siamese_pair_flag_means_different",
        task="siamese similarity (contrastive loss on digit pairs)",
        model=m.SiameseNet,
        data=partial(pairs_data, same_is_one=False),
        bug="The pairs are flagged 1 = different while the contrastive loss reads 1 = same, so the loss "
        "falls as the embedding pulls different digits together and pushes same ones apart.",
        invariant="each input is paired with its own target (the flag means what the loss reads)",
    ),
    SealedCase(
        id="hierarchical_coarse_loss_on_fine_logits",
        task="hierarchical labels (digit and digit >= 5)",
        model=m.HierarchicalNetCoarseFromFine,
        data=digit_data,
        bug="The coarse loss is computed on fine[:, :2] instead of the coarse head's logits, so the coarse "
        "head never gets a gradient and its predictions stay random.",
        invariant="every parameter that shapes the output gets a gradient",
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(
        id="counting_random_flips",
        task="object counting from images (augmentation)",
        model=m.DotCounter,
        data=counting,
    ),
    SealedCase(
        id="counting_poisson_log_rate",
        task="object counting from images (Poisson likelihood)",
        model=m.PoissonDotCounter,
        data=counting,
    ),
    SealedCase(
        id="counting_frozen_random_encoder",
        task="object counting from images (frozen part)",
        model=partial(m.DotCounter, frozen_encoder=True),
        data=counting,
    ),
    SealedCase(
        id="gru_regressor_heavy_dropout",
        task="sequence-to-one regression (GRU)",
        model=partial(m.SequenceRegressor, dropout=0.5),
        data=sequence_data,
    ),
    SealedCase(
        id="gru_one_cycle_per_step",
        task="sequence-to-one regression (GRU, learning-rate schedule)",
        model=m.OneCycleSequenceRegressor,
        data=sequence_data,
    ),
    SealedCase(
        id="ordinal_cumulative_logits",
        task="ordinal regression (cumulative logits)",
        model=m.OrdinalNet,
        data=ordinal_data,
    ),
    SealedCase(
        id="ordinal_level_balancing_sampler",
        task="ordinal regression with a balancing sampler (weighted sampling)",
        model=m.OrdinalNet,
        data=partial(ordinal_data, num_samples=1000),
    ),
    SealedCase(
        id="survival_heavily_censored_likelihood",
        task="survival regression with censored targets",
        model=m.SurvivalNet,
        data=partial(survival_data, censored=0.7),
    ),
    SealedCase(
        id="multi_output_standardised_per_output",
        task="multi-output regression with per-output scaling",
        model=m.ThreeScaleRegressor,
        data=three_scale_data,
    ),
    SealedCase(
        id="moe_softmax_gate",
        task="mixture-of-experts regression",
        model=m.MixtureOfExperts,
        data=regime_data,
    ),
    SealedCase(
        id="moe_two_optimizers_manual",
        task="mixture-of-experts regression (manual optimisation, two optimizers)",
        model=m.TwoOptimizerMixture,
        data=regime_data,
    ),
    SealedCase(
        id="vae_elbo_per_sample",
        task="variational autoencoder",
        model=m.DigitVAE,
        data=vae_data,
    ),
    SealedCase(
        id="forecast_window_scaled_by_lookback",
        task="time-series forecasting with a lookback window",
        model=m.Forecaster,
        data=forecast_data,
    ),
    SealedCase(
        id="distillation_frozen_teacher",
        task="knowledge distillation (frozen teacher, T^2-scaled KL)",
        model=m.DistilledStudent,
        data=digit_data,
    ),
    SealedCase(
        id="text_padding_id_reserved",
        task="text classification with a bag of embeddings",
        model=m.BagOfWords,
        data=text_data,
    ),
    SealedCase(
        id="pseudo_label_unlabelled_ignored",
        task="semi-supervised classification with pseudo-labels (ignore_index)",
        model=m.PseudoLabelNet,
        data=semi_supervised_data,
    ),
    SealedCase(
        id="siamese_contrastive_pairs",
        task="siamese similarity (contrastive loss on digit pairs)",
        model=m.SiameseNet,
        data=pairs_data,
    ),
    SealedCase(
        id="hierarchical_two_heads",
        task="hierarchical labels (digit and digit >= 5)",
        model=m.HierarchicalNet,
        data=digit_data,
    ),
]
