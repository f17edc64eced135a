"""The first gallery (sessions 1-3): the planted bugs of ``test_broken_models.py`` and the healthy models of
``test_healthy_models.py``, as :class:`Case` records for the precision / recall table."""

from __future__ import annotations

from typing import Any

from lightning_recipes.data import CharLMDataModule, DigitsDataModule
from lightning_recipes.testing import DigitsCNN, TinyClassifier, TinyTransformerLM, random_token_loader
from tests.checks import _models as M

from . import Case

__all__ = ["BUGS", "HEALTHY"]


def _loader(factory: Any) -> Any:
    return lambda: {"train_dataloaders": factory()}


def _char_vocab() -> int:
    return CharLMDataModule(max_chars=1).vocab_size


def _bug(case_id: str, model: Any, loader: Any, check: str, status: str, *words: str) -> Case:
    return Case(case_id, check, "MLP", model, _loader(loader), check, status, words)


BUGS = [
    _bug("bad_init", M.BadInit, M.loader, "init_loss", "fail", "too high"),
    _bug("sum_reduction", M.SumReduction, M.loader, "init_loss", "fail", "summed instead of averaged"),
    _bug("loss_on_own_predictions", M.SelfTargetLoss, M.loader, "init_loss", "fail", "suspiciously low"),
    _bug("shuffled_labels", M.MLP, M.shuffled_labels_loader, "input_independence", "fail", "labels shuffled"),
    _bug("batch_mixing_reshape", M.BatchMixing, M.loader, "batch_independence", "fail", "mix across"),
    _bug("detached_branch", M.DetachedBranch, M.loader, "grad_flow", "fail", "branch.weight"),
    _bug("frozen_layer", M.FrozenLayer, M.loader, "grad_flow", "warn", "frozen"),
    _bug("clamped_loss_grad", M.ClampedLoss, M.loader, "grad_flow", "fail", "no parameter gets any gradient"),
    _bug("missing_from_optimizer", M.MissingFromOptimizer, M.loader, "grad_flow", "fail", "not in any"),
    _bug("nonfinite_grad", M.NonFiniteGrad, M.loader, "grad_flow", "fail", "non-finite gradients"),
    _bug("nan_in_data", M.MLP, M.nan_loader, "data", "fail", "NaN"),
    _bug("labels_out_of_range", M.MLP, M.out_of_range_loader, "data", "fail", "outside [0, 4)"),
    _bug("sorted_unshuffled_loader", M.MLP, M.sorted_unshuffled_loader, "data", "fail", "does not shuffle"),
    _bug("constant_inputs", M.MLP, M.constant_input_loader, "data", "fail", "constant"),
    Case(
        "mixing_lm",
        "batch_independence",
        "transformer LM",
        M.MixingLM,
        _loader(lambda: random_token_loader(vocab_size=16, seq_len=8, shuffle=True)),
        "batch_independence",
        "fail",
    ),
]

HEALTHY = [
    Case("mlp_default_init", "healthy", "MLP", M.MLP, _loader(M.loader)),
    Case("zero_init_mlp", "healthy", "MLP", lambda: TinyClassifier(num_classes=4, lr=0.5), _loader(M.loader)),
    Case("digits_cnn", "healthy", "CNN", DigitsCNN, lambda: {"datamodule": DigitsDataModule()}),
    Case(
        "causal_transformer_lm",
        "healthy",
        "transformer LM",
        lambda: TinyTransformerLM(vocab_size=32, d_model=32, n_heads=2, n_layers=1),
        _loader(lambda: random_token_loader(vocab_size=32, seq_len=16, shuffle=True)),
    ),
    Case(
        "char_transformer_lm",
        "healthy",
        "transformer LM",
        lambda: TinyTransformerLM(vocab_size=_char_vocab(), d_model=32, n_layers=1),
        lambda: {"datamodule": CharLMDataModule(seq_len=32, batch_size=16, max_chars=40_000)},
    ),
    Case("regression_mse", "healthy", "regression", M.Regressor, _loader(M.regression_loader)),
    Case(
        "label_smoothing_mlp",
        "healthy",
        "MLP",
        lambda: M.MLP(classes=10, label_smoothing=0.1, in_features=64),
        lambda: {"datamodule": DigitsDataModule(batch_size=32, flatten=True)},
    ),
]
