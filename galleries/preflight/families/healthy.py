"""Healthy models of shapes the first preflight never saw: every check must give them no ``fail``."""

from __future__ import annotations

from functools import partial

from . import Case
from . import _existing_models as M

BUGS: list[Case] = []

HEALTHY: list[Case] = [
    Case("bce_binary", "healthy", "MLP", M.BinaryBCE, M.binary_data),
    Case("bce_prior_bias_1_to_9", "healthy", "MLP", M.PriorBiasBCE, partial(M.binary_data, 0.1)),
    Case("softmax_prior_bias", "healthy", "MLP", M.PriorBiasClassifier, M.imbalanced_data),
    Case("multi_label_bce", "healthy", "MLP", M.MultiLabel, M.multilabel_data),
    Case("per_pixel_segmentation", "healthy", "CNN", M.TinySegmenter, M.segmentation_data),
    Case("groupnorm_layernorm_cnn", "healthy", "CNN", M.NormCNN, M.image_data),
    Case("tied_embedding_lm", "healthy", "transformer LM", M.TiedLM, M.token_data),
    Case("lora_frozen_base", "healthy", "MLP", M.LoRAClassifier, M.classification_data),
    Case("dict_batches", "healthy", "MLP", M.DictBatchClassifier, M.dict_data),
    Case("training_step_returns_dict", "healthy", "MLP", M.DictStepClassifier, M.classification_data),
    Case("heavy_dropout", "healthy", "MLP", M.HeavyDropout, M.classification_data),
    Case("sgd_momentum", "healthy", "MLP", partial(M.SGDClassifier, lr=0.1), M.classification_data),
]
