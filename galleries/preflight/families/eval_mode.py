"""The ``eval_mode`` gallery: models whose evaluation is random or changes their state, and healthy models
whose behaviour legitimately differs between train() and eval()."""

from __future__ import annotations

from lightning_recipes.testing import random_token_loader

from . import Case
from . import _data_models as D


def _gaussian() -> dict:
    return D.loaders(*D.gaussian(256, 0), *D.gaussian(128, 1))


def _regression() -> dict:
    return D.loaders(*D.regression(256, 0), *D.regression(128, 1))


def _tokens() -> dict:
    return D.loaders(*D.tokens(128, 64), batch_size=16)


BUGS: list[Case] = [
    Case(
        "functional-dropout-mlp",
        "eval_mode",
        "MLP",
        D.FunctionalDropoutMLP,
        _gaussian,
        "eval_mode",
        "fail",
        ("different results", "training=self.training", "net.3"),
    ),
    Case(
        "noise-at-eval-cnn",
        "eval_mode",
        "CNN",
        D.NoisyCNN,
        D.digits_split,
        "eval_mode",
        "fail",
        ("different results", "`noise` (GaussianNoise)"),
    ),
    Case(
        "bn-stats-updated-in-eval-cnn",
        "eval_mode",
        "CNN",
        D.StatsUpdatedInEvalCNN,
        D.digits_split,
        "eval_mode",
        "fail",
        ("changed the model's state", "features.1.running_mean"),
    ),
    Case(
        "token-dropout-at-eval-lm",
        "eval_mode",
        "transformer LM",
        D.TokenDropLM,
        _tokens,
        "eval_mode",
        "fail",
        ("different results", "own forward"),
    ),
    Case(
        "call-counter-buffer-regression",
        "eval_mode",
        "regression",
        D.CallCountingRegressor,
        _regression,
        "eval_mode",
        "fail",
        ("changed the model's state", "`calls`"),
    ),
]

HEALTHY: list[Case] = [
    Case("heavy-dropout-mlp", "eval_mode", "MLP", D.HeavyDropoutMLP, _gaussian),
    Case("groupnorm-layernorm-cnn", "eval_mode", "CNN", D.NormCNN, D.digits_split),
    Case("batchnorm-dropout-digits-cnn", "eval_mode", "CNN", D.DigitsCNN, D.digits_split),
    Case(
        "tiny-transformer-lm",
        "eval_mode",
        "transformer LM",
        D.TinyTransformerLM,
        lambda: {"train_dataloaders": random_token_loader(), "val_dataloaders": random_token_loader(seed=1)},
    ),
    Case("regression-mlp", "eval_mode", "regression", D.Regressor, _regression),
]
