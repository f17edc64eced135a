"""Blind stage gallery, part A: silent bugs in the loaders and sampler, the splits, the forward pass and the
loss, and healthy look-alikes that a naive check would flag. Written from issue #24's stage contract only.

Every bug trains (its loss falls, nothing crashes) yet ends measurably worse than its healthy twin; the proof
is ``galleries/preflight/stage/test_twins_data.py``. ``check``: the check a user would expect to flag it.

Example:
    >>> len(BUGS) >= 11 and len(HEALTHY) >= 5
    True
"""

from __future__ import annotations

from functools import partial

from . import Case
from . import _data_stage_data as D
from . import _data_stage_models as M

BUGS: list[Case] = [
    # ---------------------------------------------------------------- loaders and sampler
    Case(
        "st_drop_last_empty_loader",
        "loaders",
        "MLP",
        M.DigitsMLP,
        D.drop_last_empty,
        "loader",
    ),
    Case(
        "st_sampler_weights_by_frequency",
        "loaders",
        "MLP",
        M.DigitsMLP,
        D.sampler_frequency_weights,
        "loader",
    ),
    Case(
        "st_subset_sampler_skips_last_classes",
        "loaders",
        "MLP",
        M.DigitsMLP,
        D.subset_sampler_first_rows,
        "loader",
    ),
    Case(
        "st_unshuffled_class_sorted_loader",
        "loaders",
        "MLP",
        M.DigitsMLP,
        D.unshuffled_sorted,
        "loader",
    ),
    # ---------------------------------------------------------------- splits
    Case(
        "st_repeat_measurements_split_by_row",
        "splits",
        "MLP",
        M.SubjectMLP,
        D.repeat_measurements_split,
        "split_overlap",
    ),
    Case(
        "st_scanner_column_shortcut_train_only",
        "splits",
        "MLP",
        partial(M.DigitsMLP, in_features=65),
        D.shortcut_column,
        "data",
    ),
    Case(
        "st_train_images_transposed",
        "splits",
        "CNN",
        M.DigitsCNN,
        D.transposed_train_images,
        "data",
    ),
    Case(
        "st_val_pipeline_skips_standardisation",
        "splits",
        "MLP",
        M.DigitsMLP,
        D.val_skips_standardisation,
        "data",
    ),
    # ---------------------------------------------------------------- forward
    Case(
        "st_batch_statistics_in_eval",
        "forward",
        "MLP",
        M.BatchStatsMLP,
        D.digits_loaders,
        "batch_independence",
    ),
    Case(
        "st_positions_indexed_by_batch_slot",
        "forward",
        "transformer encoder classifier",
        M.PositionTransformer,
        D.first_token_loaders,
        "batch_independence",
    ),
    Case(
        "st_frame_mean_includes_padding",
        "forward",
        "frame-averaging classifier",
        M.FrameMeanClassifier,
        D.loudness_loaders,
        "padding",
    ),
    # ---------------------------------------------------------------- loss
    Case(
        "st_ignore_index_drops_class_zero",
        "loss",
        "MLP",
        partial(M.DigitsMLP, ignore_index=0),
        D.digits_loaders,
        "loss",
    ),
    Case(
        "st_regression_targets_raw_units",
        "loss",
        "regression",
        M.Regressor,
        D.raw_unit_regression,
        "loss",
    ),
    Case(
        "st_nll_loss_on_raw_logits",
        "loss",
        "MLP",
        M.NllOnLogitsMLP,
        D.digits_loaders,
        "loss",
    ),
    Case(
        "st_sigmoid_head_on_rating_targets",
        "loss",
        "regression",
        M.RatingRegressor,
        D.star_rating_loaders,
        "loss",
    ),
    Case(
        "st_gaussian_nll_log_precision_sign",
        "loss",
        "regression",
        M.GaussianRegressor,
        D.heteroscedastic_loaders,
        "loss",
    ),
]

HEALTHY: list[Case] = [
    Case(
        "st_ok_inverse_frequency_sampler",
        "loaders",
        "MLP",
        M.DigitsMLP,
        partial(D.sampler_frequency_weights, fixed=True),
    ),
    Case(
        "st_ok_repeat_measurements_split_by_subject",
        "splits",
        "MLP",
        M.SubjectMLP,
        partial(D.repeat_measurements_split, fixed=True),
    ),
    Case(
        "st_ok_batchnorm_running_stats",
        "forward",
        "MLP",
        partial(M.BatchStatsMLP, batch_stats=False),
        D.digits_loaders,
    ),
    Case(
        "st_ok_packed_gru_lengths",
        "forward",
        "GRU classifier",
        M.LastStepGRU,
        D.last_token_loaders,
    ),
    Case(
        "st_ok_masked_mean_dict_batch",
        "forward",
        "token classifier",
        M.MaskedMeanClassifier,
        D.masked_mean_loaders,
    ),
    Case("st_ok_lm_ignore_index_pad", "loss", "GRU LM", M.GRULM, D.lm_loaders),
    Case("st_ok_multilabel_bce_logits", "loss", "MLP", M.MultiLabelMLP, D.multilabel_loaders),
    Case("st_ok_prior_bias_imbalanced", "loss", "MLP", M.PriorBiasMLP, D.imbalanced_loaders),
    Case("st_ok_mixup_soft_targets", "loss", "MLP", M.MixupMLP, D.digits_loaders),
    Case(
        "st_ok_regression_scaled_targets",
        "loss",
        "regression",
        partial(M.Regressor, target_scale=1000.0),
        D.raw_unit_regression,
    ),
]
