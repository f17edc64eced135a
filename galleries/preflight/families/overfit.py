"""The ``overfit_batch`` family: losses with a provable floor above the target, and learning rates that
diverge or make no progress (told apart from a model that cannot fit by the LR probe)."""

from __future__ import annotations

from functools import partial

from . import Case
from . import _existing_models as M

_FLOOR = ("floor", "target", "Try:")

BUGS: list[Case] = [
    Case(
        "softmax_then_cross_entropy",
        "overfit_batch",
        "MLP",
        M.SoftmaxThenCE,
        M.classification_data,
        "overfit_batch",
        "fail",
        (*_FLOOR, "softmax"),
    ),
    Case(
        "softmax_then_cross_entropy_lm",
        "overfit_batch",
        "transformer LM",
        M.SoftmaxTransformerLM,
        M.transformer_token_data,
        "overfit_batch",
        "fail",
        (*_FLOOR, "softmax"),
    ),
    Case(
        "double_sigmoid",
        "overfit_batch",
        "MLP",
        M.DoubleSigmoid,
        M.binary_data,
        "overfit_batch",
        "fail",
        (*_FLOOR, "sigmoid"),
    ),
    Case(
        "double_sigmoid_multilabel",
        "overfit_batch",
        "MLP",
        M.DoubleSigmoidMultiLabel,
        M.multilabel_data,
        "overfit_batch",
        "fail",
        (*_FLOOR, "sigmoid"),
    ),
    Case(
        "clamped_logits",
        "overfit_batch",
        "MLP",
        M.ClampedLogits,
        partial(M.classification_data, 10),
        "overfit_batch",
        "fail",
        (*_FLOOR, "clamp to [-1, 1]"),
    ),
    Case(
        "tanh_squashed_segmentation_logits",
        "overfit_batch",
        "CNN",
        M.TanhSquashedSegmenter,
        partial(M.segmentation_data, 10),
        "overfit_batch",
        "fail",
        (*_FLOOR, "tanh"),
    ),
    Case(
        "lr_100x_too_high",
        "overfit_batch",
        "MLP",
        partial(M.SGDClassifier, lr=10.0),
        M.classification_data,
        "overfit_batch",
        "fail",
        ("diverges", "memorise the batch", "LRs in ["),
    ),
    Case(
        "lr_1000x_too_low",
        "overfit_batch",
        "MLP",
        partial(M.SGDClassifier, lr=1e-4),
        M.classification_data,
        "overfit_batch",
        "fail",
        ("is too low", "memorise the batch", "LRs in ["),
    ),
    Case(
        "lm_lr_100x_too_high",
        "overfit_batch",
        "transformer LM",
        partial(M.SGDTiedLM, lr=50.0),
        M.token_data,
        "overfit_batch",
        "fail",
        ("diverges", "LRs in ["),
    ),
]

HEALTHY: list[Case] = []
