"""The blind hold-out gallery: planted bugs and healthy models written from issue #14's families only, without
reading the checks' code, docstrings or the other gallery files (and not tuned after running them).

Each bug is one a user could write by mistake; ``check`` is the check a user would expect to flag it. The
healthy models are correct models of shapes the other galleries may not have (wrapped Hugging Face models,
dict outputs, a ViT-like patch model, an LSTM classifier, a regression head with a learned output scale...).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import Case
from . import _holdout_models as H

__all__ = ["BUGS", "HEALTHY"]


def _bug(
    case_id: str,
    family: str,
    shape: str,
    model: Callable[[], Any],
    data: Callable[[], dict[str, Any]],
    check: str,
    status: str = "fail",
) -> Case:
    return Case(case_id, family, shape, model, data, check, status)


BUGS = [
    # ---- future leakage in sequence models
    _bug(
        "ho_lm_attention_mask_forgotten",
        "causality",
        "transformer LM",
        H.NoMaskGPT,
        H.lm_loaders,
        "causality",
    ),
    _bug(
        "ho_lm_mask_convention_flipped",
        "causality",
        "transformer LM",
        H.UpperMaskGPT,
        H.lm_loaders,
        "causality",
    ),
    _bug("ho_bidirectional_gru_lm", "causality", "RNN", H.BiGRULM, H.lm_loaders, "causality"),
    _bug(
        "ho_hf_bert_mlm_as_next_token",
        "causality",
        "HF transformer LM",
        H.HFMaskedLMAsNextToken,
        H.hf_lm_loaders,
        "causality",
    ),
    # ---- target leakage
    _bug(
        "ho_label_column_in_features",
        "target_leakage",
        "MLP",
        lambda: H.TabularMLP(in_features=13),
        H.label_column_loaders,
        "target_leakage",
    ),
    _bug(
        "ho_label_watermark_pixel",
        "target_leakage",
        "CNN",
        H.DigitsConvNet,
        H.watermarked_digits_loaders,
        "target_leakage",
    ),
    _bug(
        "ho_target_encoding_leak",
        "target_leakage",
        "regression",
        lambda: H.Regressor(in_features=13),
        H.target_encoded_loaders,
        "target_leakage",
    ),
    _bug(
        "ho_group_mean_by_label",
        "target_leakage",
        "MLP",
        lambda: H.TabularMLP(in_features=13),
        H.label_normalised_loaders,
        "target_leakage",
    ),
    _bug(
        "ho_lm_targets_not_shifted",
        "target_leakage",
        "transformer LM",
        H.SmallGPT,
        H.unshifted_lm_loaders,
        "target_leakage",
    ),
    _bug(
        "ho_lm_shift_reversed",
        "target_leakage",
        "RNN",
        H.GRULM,
        H.reversed_shift_lm_loaders,
        "target_leakage",
    ),
    _bug(
        "ho_hf_gpt2_manual_loss_unshifted",
        "target_leakage",
        "HF transformer LM",
        H.HFCausalLMUnshiftedLoss,
        H.hf_lm_loaders,
        "target_leakage",
    ),
    _bug(
        "ho_hf_bert_label_in_prompt",
        "target_leakage",
        "HF encoder classifier",
        H.HFSequenceClassifier,
        lambda: H.hf_classifier_loaders(label_token=True),
        "target_leakage",
    ),
    # ---- split overlap
    _bug(
        "ho_val_subset_of_train",
        "split_overlap",
        "MLP",
        H.TabularMLP,
        H.val_from_train_loaders,
        "split_overlap",
    ),
    _bug(
        "ho_val_augmented_train_copies",
        "split_overlap",
        "CNN",
        H.DigitsConvNet,
        H.augmented_val_loaders,
        "split_overlap",
    ),
    _bug(
        "ho_oversampled_before_split",
        "split_overlap",
        "MLP",
        H.TabularMLP,
        H.oversampled_then_split_loaders,
        "split_overlap",
    ),
    # ---- evaluation
    _bug(
        "ho_functional_dropout_in_eval",
        "eval_mode",
        "CNN",
        H.FunctionalDropoutCNN,
        H.digits_loaders,
        "eval_mode",
    ),
    _bug("ho_random_flip_in_forward", "eval_mode", "CNN", H.RandomFlipCNN, H.digits_loaders, "eval_mode"),
    _bug(
        "ho_input_noise_in_eval",
        "eval_mode",
        "regression",
        H.NoisyInputRegressor,
        H.regression_loaders,
        "eval_mode",
    ),
    _bug(
        "ho_running_stats_updated_in_eval",
        "eval_mode",
        "regression",
        H.RunningNormRegressor,
        H.regression_loaders,
        "eval_mode",
    ),
    # ---- data corruption
    _bug("ho_blank_images", "data", "CNN", H.DigitsConvNet, H.blank_images_loaders, "data"),
    _bug(
        "ho_log_of_zero_counts",
        "data",
        "MLP",
        lambda: H.TabularMLP(classes=2),
        H.log_counts_inf_loaders,
        "data",
    ),
    _bug("ho_nan_regression_targets", "data", "regression", H.Regressor, H.nan_targets_loaders, "data"),
    _bug(
        "ho_val_labels_one_indexed",
        "data",
        "MLP",
        lambda: H.DigitsMLP(classes=11),
        H.one_indexed_val_labels_loaders,
        "data",
    ),
    _bug(
        "ho_val_labels_encoded_separately", "data", "MLP", H.TabularMLP, H.permuted_val_labels_loaders, "data"
    ),
    # ---- loss floor
    _bug(
        "ho_softmax_into_cross_entropy",
        "overfit_batch",
        "MLP",
        H.SoftmaxHeadMLP,
        H.tabular_loaders,
        "overfit_batch",
    ),
    _bug(
        "ho_double_sigmoid",
        "overfit_batch",
        "MLP",
        H.DoubleSigmoidBinary,
        H.imbalanced_binary_loaders,
        "overfit_batch",
    ),
    _bug(
        "ho_tanh_clamped_logits", "overfit_batch", "CNN", H.TanhLogitsCNN, H.digits_loaders, "overfit_batch"
    ),
    # ---- init
    _bug("ho_init_std_one", "init_loss", "CNN", H.BigInitCNN, H.digits_loaders, "init_loss"),
    _bug("ho_summed_loss_lstm", "init_loss", "RNN", H.SummedLossLSTM, H.sequence_class_loaders, "init_loss"),
]


def _healthy(case_id: str, shape: str, model: Callable[[], Any], data: Callable[[], dict[str, Any]]) -> Case:
    return Case(case_id, "healthy", shape, model, data)


HEALTHY = [
    _healthy("ho_hf_gpt2_wrapped", "HF transformer LM", H.HFCausalLM, H.hf_lm_loaders),
    _healthy(
        "ho_hf_bert_classifier_wrapped",
        "HF encoder classifier",
        H.HFSequenceClassifier,
        H.hf_classifier_loaders,
    ),
    _healthy(
        "ho_label_smoothing_digits_mlp",
        "MLP",
        lambda: H.DigitsMLP(label_smoothing=0.1),
        lambda: H.digits_loaders(flatten=True),
    ),
    _healthy("ho_dict_outputs_mlp", "MLP", H.DictOutputMLP, H.tabular_loaders),
    _healthy("ho_patch_vit", "ViT", H.PatchViT, H.digits_loaders),
    _healthy("ho_lstm_classifier", "RNN", H.LSTMClassifier, H.sequence_class_loaders),
    _healthy("ho_regression_learned_scale", "regression", H.Regressor, H.regression_loaders),
    _healthy("ho_causal_gru_lm", "RNN", H.GRULM, H.lm_loaders),
    _healthy("ho_small_gpt_tied", "transformer LM", H.SmallGPT, H.lm_loaders),
    _healthy("ho_groupnorm_dropout_cnn", "CNN", H.DigitsConvNet, H.digits_loaders),
    _healthy("ho_prior_bias_bce", "MLP", H.PriorBiasBinary, H.imbalanced_binary_loaders),
]
