"""Causality gallery: next-token models that read the future (bugs), and sequence models that must not be
flagged (causal LMs, and bidirectional models whose task allows it)."""

from __future__ import annotations

from functools import partial

from . import Case
from . import _leakage_models as M

FAMILY = "causality"
_FUTURE = ("depends on input position", "later ones too", "is_causal=True")
_SHIFT = ("depends on input position", "off-by-one")

BUGS: list[Case] = [
    Case(
        "lm_no_causal_mask",
        FAMILY,
        "transformer LM",
        partial(M.SequenceLM, "full_attention"),
        M.lm_data,
        "causality",
        "fail",
        _FUTURE,
    ),
    Case(
        "lm_bidirectional_gru",
        FAMILY,
        "RNN LM",
        partial(M.SequenceLM, "bigru"),
        M.lm_data,
        "causality",
        "fail",
        _FUTURE,
    ),
    Case(
        "lm_centered_conv",
        FAMILY,
        "CNN LM",
        partial(M.SequenceLM, "centered_conv"),
        M.lm_data,
        "causality",
        "fail",
        _SHIFT,
    ),
    Case(
        "lm_inputs_rolled",
        FAMILY,
        "transformer LM",
        partial(M.SequenceLM, "rolled"),
        M.lm_data,
        "causality",
        "fail",
        _SHIFT,
    ),
    Case(
        "forecaster_bidirectional_lstm",
        FAMILY,
        "regression",
        partial(M.Forecaster, True),
        M.forecast_data,
        "causality",
        "fail",
        _FUTURE,
    ),
    Case(
        "hf_bert_used_as_causal_lm",
        FAMILY,
        "transformer LM (Hugging Face)",
        partial(M.HFWrapped, "bert_lm"),
        M.hf_lm_data,
        "causality",
        "fail",
        _FUTURE,
    ),
    Case(
        "lightning_demo_transformer_encoder_unmasked",
        FAMILY,
        "transformer LM (encoder-decoder)",
        M.demo_transformer,
        M.lm_data,
        "causality",
        "fail",
        _FUTURE,
    ),
]

HEALTHY: list[Case] = [
    Case(
        "lightning_demo_transformer_fixed",
        FAMILY,
        "transformer LM (encoder-decoder, teacher forcing)",
        M.FixedDemoTransformer,
        M.lm_data,
    ),
    Case(
        "lm_causal_attention", FAMILY, "transformer LM", partial(M.SequenceLM, "causal_attention"), M.lm_data
    ),
    Case("tiny_transformer_lm", FAMILY, "transformer LM", M.tiny_lm, M.token_lm_data),
    Case("lm_gru", FAMILY, "RNN LM", partial(M.SequenceLM, "gru"), M.lm_data),
    Case("lm_causal_conv", FAMILY, "CNN LM", partial(M.SequenceLM, "causal_conv"), M.lm_data),
    Case("forecaster_lstm", FAMILY, "regression", M.Forecaster, M.forecast_data),
    Case("bigru_tagger", FAMILY, "tagger", M.Tagger, M.tagging_data),
    Case(
        "encoder_classifier",
        FAMILY,
        "encoder classifier",
        M.EncoderClassifier,
        M.sequence_classification_data,
    ),
    Case("hf_gpt2", FAMILY, "transformer LM (Hugging Face)", partial(M.HFWrapped, "gpt2"), M.hf_lm_data),
    Case(
        "hf_bert_classifier",
        FAMILY,
        "encoder classifier (Hugging Face)",
        partial(M.HFWrapped, "bert_cls"),
        partial(M.sequence_classification_data, hf=True),
    ),
]
