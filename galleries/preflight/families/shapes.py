"""Real-world model shapes (issue 14): healthy modules that wrap ``self.model`` without ``forward``, read dict
batches with several tensors, return dicts, or reconstruct their input; and bugs that only show in these
shapes (before issue 14 the batch-level checks skipped them with "missing forward")."""

from __future__ import annotations

from typing import Any

from . import Case
from . import _shapes_models as S

__all__ = ["BUGS", "HEALTHY"]


def _healthy(case_id: str, shape: str, model: Any, data: Any) -> Case:
    return Case(case_id, "shapes", shape, model, data)


BUGS = [
    Case(
        "wrapped_cnn_transpose_mixes_batch",
        "shapes",
        "CNN",
        lambda: S.WrappedCNN(mix_batch=True),
        S.digits_loaders,
        "batch_independence",
        "fail",
        ("samples mix across the batch",),
    ),
    Case(
        "wrapped_bert_transposed_input_ids",
        "shapes",
        "encoder classifier",
        lambda: S.HFClassifier(transpose_bug=True),
        S.token_classification_loaders,
        "batch_independence",
        "fail",
        ("samples mix across the batch",),
    ),
    Case(
        "dict_batch_backbone_head_shuffled_labels",
        "shapes",
        "MLP",
        S.BackboneHead,
        lambda: S.digits_loaders(as_dict=True, shuffle_labels=True),
        "input_independence",
        "fail",
        ("does not use its inputs",),
    ),
    Case(
        "wrapped_bert_shuffled_labels",
        "shapes",
        "encoder classifier",
        S.HFClassifier,
        lambda: S.token_classification_loaders(shuffle_labels=True),
        "input_independence",
        "fail",
        ("does not use its inputs",),
    ),
    Case(
        "autoencoder_decoder_ignores_code",
        "shapes",
        "autoencoder",
        lambda: S.LitAutoEncoder(ignore_input=True),
        S.mnist_like_loaders,
        "input_independence",
        "fail",
        ("does not use its inputs",),
    ),
]

HEALTHY = [
    _healthy("wrapped_cnn_returns_dict", "CNN", S.WrappedCNN, S.digits_loaders),
    _healthy("backbone_head_dict_batch", "MLP", S.BackboneHead, lambda: S.digits_loaders(as_dict=True)),
    _healthy("unconventional_dict_keys", "MLP", S.UnconventionalKeys, S.unconventional_loaders),
    _healthy("tuple_x_mask_lengths_y", "encoder classifier", S.WrappedTupleClassifier, S.tuple_token_loaders),
    _healthy(
        "tuple_x_y_sample_weight",
        "encoder classifier",
        lambda: S.WrappedTupleClassifier("x_y_weight"),
        lambda: S.tuple_token_loaders("x_y_weight"),
    ),
    _healthy("hf_gpt2_causal_lm", "transformer LM", S.HFCausalLM, S.lm_loaders),
    _healthy(
        "hf_gpt2_labels_from_input_ids",
        "transformer LM",
        lambda: S.HFCausalLM(labels_from_inputs=True),
        lambda: S.lm_loaders(labels=False),
    ),
    _healthy("hf_bert_classifier", "encoder classifier", S.HFClassifier, S.token_classification_loaders),
    _healthy("lightning_autoencoder", "autoencoder", S.LitAutoEncoder, S.mnist_like_loaders),
    _healthy("denoiser_noise_in_step", "CNN", S.Denoiser, S.digits_loaders),
    _healthy("masked_autoencoder", "autoencoder", S.MaskedAutoencoder, S.digits_loaders),
]
