"""Target-leakage gallery: the label readable from the inputs without learning (bugs), and models that must
not be flagged (next-token LMs, Hugging Face LMs fed ``labels == input_ids``, strongly but not perfectly
predictive features, label copies the model never reads)."""

from __future__ import annotations

from functools import partial

from . import Case
from . import _leakage_models as M

FAMILY = "target_leakage"
_COPY = ("toward the input token at the same position", "not shifted", "Try:")
_TRY = ("Try: remove",)

BUGS: list[Case] = [
    Case(
        "lm_unshifted_targets",
        FAMILY,
        "transformer LM",
        M.tiny_lm,
        M.unshifted_lm_data,
        "target_leakage",
        "fail",
        _COPY,
    ),
    Case(
        "hf_gpt2_own_head_without_shift",
        FAMILY,
        "transformer LM (Hugging Face)",
        M.GPT2CustomHead,
        M.hf_lm_data,
        "target_leakage",
        "fail",
        _COPY,
    ),
    Case(
        "cnn_label_in_pixel",
        FAMILY,
        "CNN",
        M.digits_cnn,
        partial(M.digits_data, leak=True),
        "target_leakage",
        "fail",
        ("inputs[:, 0, 0, 0]", "an input feature determines the label", *_TRY),
    ),
    Case(
        "mlp_label_column",
        FAMILY,
        "MLP",
        partial(M.MLP, M.IN + 1),
        M.label_column_data,
        "target_leakage",
        "fail",
        (f"inputs[:, {M.IN}]", "100.0%", *_TRY),
    ),
    Case(
        "dict_label_copy_read",
        FAMILY,
        "MLP (dict batch)",
        M.LabelCopyReader,
        M.label_copy_data,
        "target_leakage",
        "fail",
        ("batch['label_copy']", "the model reads", *_TRY),
    ),
    Case(
        "regression_target_as_feature",
        FAMILY,
        "regression",
        partial(M.Regressor, M.IN + 1),
        partial(M.regression_data, leak=True),
        "target_leakage",
        "fail",
        (f"inputs[:, {M.IN}]", "correlates with the regression target", *_TRY),
    ),
    Case(
        "encoder_label_token",
        FAMILY,
        "encoder classifier",
        M.EncoderClassifier,
        partial(M.sequence_classification_data, leak_position=5),
        "target_leakage",
        "fail",
        ("inputs[:, 5]", *_TRY),
    ),
    Case(
        "lightning_demo_transformer_reads_target",
        FAMILY,
        "transformer LM (encoder-decoder)",
        M.demo_transformer,
        M.lm_data,
        "target_leakage",
        "fail",
        ("output at position 0 changes when only the target", "the target is fed to the model", "Try:"),
    ),
    Case(
        "mlp_label_fed_to_forward",
        FAMILY,
        "MLP",
        M.LabelFedToForward,
        M.plain_features_data,
        "target_leakage",
        "fail",
        ("changes when only the target (batch[1])", "the label reaches the model", "Try:"),
    ),
    Case(
        "mlp_onehot_label_columns",
        FAMILY,
        "MLP",
        partial(M.MLP, M.IN + M.C),
        M.onehot_label_data,
        "target_leakage",
        "warn",
        ("held-out loss", "after only", "of ln 4", "Try:"),
    ),
]

HEALTHY: list[Case] = [
    # the label sits in pixel (0, 0), but the autoencoder's loss never reads the label: nothing leaks
    Case(
        "autoencoder_ignoring_labels",
        FAMILY,
        "autoencoder",
        M.DigitsAutoencoder,
        partial(M.digits_data, leak=True),
    ),
    Case(
        "lightning_demo_transformer_fixed",
        FAMILY,
        "transformer LM (encoder-decoder, teacher forcing)",
        M.FixedDemoTransformer,
        M.lm_data,
    ),
    Case("tiny_transformer_lm", FAMILY, "transformer LM", M.tiny_lm, M.token_lm_data),
    Case(
        "lm_causal_attention", FAMILY, "transformer LM", partial(M.SequenceLM, "causal_attention"), M.lm_data
    ),
    Case(
        "hf_gpt2_labels_equal_input_ids",
        FAMILY,
        "transformer LM (Hugging Face)",
        partial(M.HFWrapped, "gpt2"),
        M.hf_lm_data,
    ),
    Case(
        "hf_bert_classifier",
        FAMILY,
        "encoder classifier (Hugging Face)",
        partial(M.HFWrapped, "bert_cls"),
        partial(M.sequence_classification_data, hf=True),
    ),
    Case(
        "encoder_classifier",
        FAMILY,
        "encoder classifier",
        M.EncoderClassifier,
        M.sequence_classification_data,
    ),
    Case("bigru_tagger", FAMILY, "tagger", M.Tagger, M.tagging_data),
    Case("mlp_strong_feature", FAMILY, "MLP", M.MLP, M.strong_feature_data),
    Case("mlp_plain", FAMILY, "MLP", M.MLP, M.plain_features_data),
    Case("unread_label_copy", FAMILY, "MLP (dict batch)", M.DictMLP, M.unread_label_copy_data),
    Case("regression", FAMILY, "regression", M.Regressor, M.regression_data),
    Case("digits_cnn", FAMILY, "CNN", M.digits_cnn, M.digits_data),
]
