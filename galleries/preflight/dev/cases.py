"""The development gallery's cases: :data:`BUGS` (real, silent bugs, each proved against its healthy twin in
``galleries/preflight/dev/test_proofs.py``), :data:`HEALTHY` (unusual but correct look-alikes) and
:data:`FIXED_TWINS` (each bug's healthy twin: the same model and data with the bug fixed; a check that flags
a bug AND its twin has not found the bug).

Example:
    >>> ids = [case.id for case in BUGS + HEALTHY]
    >>> len(ids) == len(set(ids))
    True
"""

from __future__ import annotations

from functools import partial

from . import SealedCase
from . import _data as D
from . import _models as M

BUGS: list[SealedCase] = [
    SealedCase(
        id="shuffled_labels",
        task="image classification",
        model=M.DigitsCNN,
        data=D.shuffled_labels,
        bug="The training labels are read through an independent permutation: no image keeps its own label.",
        invariant="data is paired: each input is served with its own target",
    ),
    SealedCase(
        id="hflip_position_target",
        task="keypoint regression",
        model=M.BlobLocator,
        data=D.hflip_position_target,
        bug="The augmentation flips the image left-right at random but does not mirror the x target.",
        invariant="data is paired: augmentation keeps each input with its own target",
    ),
    SealedCase(
        id="siamese_partners_reshuffled_in_collate",
        task="contrastive (siamese pairs)",
        model=M.SiameseDigits,
        data=D.siamese_pairs,
        bug="A collate meant to add in-batch negatives re-draws every pair's partner, so pairs no longer "
        "match their same/different labels.",
        invariant="data is paired: collation keeps each input with its own target",
    ),
    SealedCase(
        id="denoising_noise_added_in_place",
        task="denoising autoencoder",
        model=M.DenoisingAE,
        data=D.denoising,
        bug="The dataset adds the noise in place to the stored clean digit: the target is the noisy input "
        "itself and the stored data degrades at every read.",
        invariant="reading the data does not change the data",
    ),
    SealedCase(
        id="multitask_loss_weight_key_typo",
        task="multi-task",
        model=M.DigitAndParity,
        data=D.multitask,
        bug="The task-weight dict misspells 'parity', so the parity loss gets weight 0: its head and its "
        "batch field never reach the gradient.",
        invariant="every batch field moves the loss; every parameter that shapes an output gets a gradient",
    ),
    SealedCase(
        id="tagging_tags_padded_left",
        task="token tagging",
        model=M.BiGRUTagger,
        data=D.tagging,
        bug="The collate pads the tokens on the right but the tags on the left, so every shorter sentence's "
        "tags are shifted against its tokens.",
        invariant="data is paired: collation keeps each token with its own tag",
    ),
    SealedCase(
        id="segmentation_crop_offset_drawn_twice",
        task="segmentation",
        model=M.TinyFCN,
        data=D.segmentation,
        bug="The random crop draws its offset separately for the image and the mask, so masks do not line "
        "up with their images.",
        invariant="data is paired: augmentation keeps each input with its own target",
    ),
    SealedCase(
        id="forecast_window_ends_at_target",
        task="forecasting",
        model=M.WindowForecaster,
        data=D.forecast,
        bug="The training windows are off by one: each input window ends with the very step it must "
        "forecast.",
        invariant="the output depends on nothing from the future (the target is not in the input)",
    ),
    SealedCase(
        id="batch_statistics_at_eval",
        task="tabular classification",
        model=M.SensorClassifier,
        data=D.sensor_loaders,
        bug="The input standardisation uses the statistics of the current batch at eval too, so a sample's "
        "prediction depends on the other samples served with it.",
        invariant="the output of a sample depends on its own sample only",
    ),
    SealedCase(
        id="validation_step_skips_normalisation",
        task="tabular classification",
        model=M.NormalisedSensorClassifier,
        data=D.sensor_loaders,
        bug="validation_step calls the network on raw readings (it forgot the normalisation training "
        "applies), so validation reports a different model from the one trained.",
        invariant="what validation reports is what the model does",
    ),
    SealedCase(
        id="split_shares_patients",
        task="classification with repeated measurements",
        model=M.PatientMLP,
        data=D.patient_split,
        bug="Scans are split into training and validation at random by scan, so every validation patient "
        "also has scans in training and validation overstates accuracy on new patients.",
        invariant="splits do not share subjects",
    ),
    SealedCase(
        id="scheduler_stepped_every_batch",
        task="image classification",
        model=M.StepLRDigitsMLP,
        data=D.digits_flat,
        bug="A StepLR declared per epoch is also stepped by hand in training_step, so the learning rate "
        "decays 16 times per epoch and training stalls.",
        invariant="schedulers advance as declared",
    ),
    SealedCase(
        id="rezero_gate_not_a_parameter",
        task="regression",
        model=M.ReZeroRegressor,
        data=D.wavy_loaders,
        bug="The ReZero gate is a plain tensor, not an nn.Parameter: never stepped, it stays 0 and the "
        "residual block never gets a gradient, leaving a linear model.",
        invariant="every trained parameter is stepped; every parameter that shapes the output gets a "
        "gradient",
    ),
    SealedCase(
        id="metadata_input_never_used",
        task="two-input matching",
        model=M.CodeMatcher,
        data=D.code_matching,
        bug="A typo concatenates the image features twice, so the claimed code never reaches the output.",
        invariant="every part of the input the task reads moves the output",
    ),
    SealedCase(
        id="categorical_codes_per_file",
        task="tabular with categorical codes",
        model=M.StoreSales,
        data=D.store_codes,
        bug="The training data's two files were each encoded with their own factorize, so a store code "
        "means a different store in each half of the training data.",
        invariant="data is paired: each input means the same thing in every part of the data",
    ),
    SealedCase(
        id="masked_lm_labels_read_after_masking",
        task="masked LM",
        model=M.MaskedLM,
        data=D.masked_lm_labels_after_masking,
        bug="The collate reads the labels from the already-masked inputs, so most targets are [MASK] itself "
        "and the model learns to copy its input.",
        invariant="the target cannot be read from the input: learning is not trivial",
    ),
]

HEALTHY: list[SealedCase] = [
    SealedCase(
        id="distillation_t2_kl",
        task="distillation",
        model=M.DistilledStudent,
        data=D.distillation,
    ),
    SealedCase(
        id="seq2seq_packing_raises_on_zero_length",
        task="seq2seq",
        model=M.ReverseSeq2Seq,
        data=D.seq2seq_reverse,
    ),
    SealedCase(
        id="quantile_regression_pinball",
        task="quantile regression",
        model=M.QuantileMLP,
        data=D.quantile_regression,
    ),
    SealedCase(
        id="tagging_ignore_index_padding",
        task="token tagging",
        model=M.BiGRUTagger,
        data=partial(D.tagging, fixed=True),
    ),
    SealedCase(
        id="masked_lm_80_10_10",
        task="masked LM",
        model=M.MaskedLM,
        data=D.masked_lm,
    ),
    SealedCase(
        id="vae_target_is_input",
        task="VAE",
        model=M.DigitsVAE,
        data=D.digits_only,
    ),
    SealedCase(
        id="simclr_in_batch_negatives",
        task="contrastive (SimCLR)",
        model=M.SimCLRDigits,
        data=D.two_views,
    ),
    SealedCase(
        id="segmentation_paired_crop_and_flip",
        task="segmentation",
        model=M.TinyFCN,
        data=D.segmentation_paired_flip,
    ),
    SealedCase(
        id="forecast_known_future_weekday",
        task="forecasting",
        model=M.CalendarForecaster,
        data=D.forecast_with_calendar,
    ),
    SealedCase(
        id="tabular_store_embeddings",
        task="tabular with categorical codes",
        model=M.StoreSales,
        data=partial(D.store_codes, fixed=True),
    ),
    SealedCase(
        id="manual_optimisation_cosine_per_step",
        task="image classification (manual optimisation)",
        model=M.ManualCosineDigitsMLP,
        data=D.digits_flat,
    ),
]


def fixed_twin(case: SealedCase) -> SealedCase:
    """``case`` with its bug fixed (its model and data built with ``fixed=True``), id ``<id>__fixed``."""
    return SealedCase(
        id=f"{case.id}__fixed",
        task=case.task,
        model=partial(case.model, fixed=True),
        data=partial(case.data, fixed=True),
    )


FIXED_TWINS: list[SealedCase] = [fixed_twin(case) for case in BUGS]
