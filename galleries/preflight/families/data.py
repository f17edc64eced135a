"""The ``data`` gallery: blank, repeated and non-finite samples, label sets that disagree between the splits,
and healthy data of the same shapes."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from . import Case
from . import _data_models as D


def blank_images() -> dict[str, Any]:
    """12% of the training digits are all-zero (files that failed to decode)."""
    x_train, y_train, x_val, y_val = D.digits()
    blank = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(3))[
        : len(x_train) * 12 // 100
    ]
    x_train[blank] = 0.0
    return D.loaders(x_train, y_train, x_val, y_val)


def padding_only_sequences() -> dict[str, Any]:
    """Token LM: 20% of the training sequences are padding only (token 0 everywhere)."""
    x_train, y_train, x_val, y_val = D.tokens(256, 64)
    x_train[::5] = 0
    return D.loaders(x_train, y_train, x_val, y_val, batch_size=16)


def labels_remapped() -> dict[str, Any]:
    """Validation labels shifted by one class (a label encoder fit per split)."""
    x_train, y_train, x_val, y_val = D.digits()
    return D.loaders(x_train, y_train, x_val, (y_val + 1) % 10)


def disjoint_labels() -> dict[str, Any]:
    """A split by class: training digits 0-4, validation digits 5-9."""
    x_train, y_train, x_val, y_val = D.digits()
    x, y = torch.cat([x_train, x_val]).flatten(1), torch.cat([y_train, y_val])
    low = y < 5
    return D.loaders(x[low], y[low], x[~low], y[~low])


def inf_inputs() -> dict[str, Any]:
    """A feature computed as 1 / 0 for a few rows."""
    x_train, y_train = D.gaussian(256, 0)
    x_train[::16, 3] = float("inf")
    return D.loaders(x_train, y_train, *D.gaussian(128, 1))


def nan_regression_targets() -> dict[str, Any]:
    """Regression targets with missing values read as NaN."""
    x_train, y_train = D.regression(256, 0)
    y_train[::10] = float("nan")
    return D.loaders(x_train, y_train, *D.regression(128, 1))


def getitem_ignores_index() -> dict[str, Any]:
    """``__getitem__`` drops the index's low bits: runs of 4 identical samples."""
    x_train, y_train, x_val, y_val = D.digits()
    train = DataLoader(
        D.IgnoresIndex(x_train, y_train),
        batch_size=64,
        shuffle=True,
        generator=torch.Generator().manual_seed(0),
    )
    return {
        "train_dataloaders": train,
        "val_dataloaders": DataLoader(TensorDataset(x_val, y_val), batch_size=256),
    }


def skewed_validation_labels() -> dict[str, Any]:
    """Balanced-ish training labels, a validation set that is 80% class 0 (drawn from one source)."""
    x_train, y_train = D.gaussian(512, 0)
    x_pool, y_pool = D.gaussian(2048, 1)
    zeros = torch.nonzero(y_pool == 0).flatten()[:160]
    others = torch.nonzero(y_pool != 0).flatten()[:40]
    pick = torch.cat([zeros, others])
    return D.loaders(x_train, y_train, x_pool[pick], y_pool[pick])


def gaussian_split() -> dict[str, Any]:
    return D.loaders(*D.gaussian(512, 0), *D.gaussian(256, 1))


def regression_split() -> dict[str, Any]:
    return D.loaders(*D.regression(256, 0), *D.regression(128, 1))


def lm_split() -> dict[str, Any]:
    return D.loaders(*D.tokens(256, 64), batch_size=16)


def _digits_mlp() -> D.MLP:
    return D.MLP(in_features=64, classes=10)


BUGS: list[Case] = [
    Case(
        "blank-images-cnn",
        "data",
        "CNN",
        D.DigitsCNN,
        blank_images,
        "data",
        "fail",
        ("are blank", "all zero"),
    ),
    Case(
        "padding-only-sequences-lm",
        "data",
        "transformer LM",
        D.SmallLM,
        padding_only_sequences,
        "data",
        "fail",
        ("are blank", "padding-only"),
    ),
    Case(
        "labels-remapped-between-splits-cnn",
        "data",
        "CNN",
        D.DigitsCNN,
        labels_remapped,
        "data",
        "fail",
        ("remapped between the splits", "val 1 looks like train 0"),
    ),
    Case(
        "disjoint-label-sets-mlp",
        "data",
        "MLP",
        _digits_mlp,
        disjoint_labels,
        "data",
        "fail",
        ("disjoint", "{0, 1, 2, 3, 4}", "{5, 6, 7, 8, 9}"),
    ),
    Case("inf-inputs-mlp", "data", "MLP", D.MLP, inf_inputs, "data", "fail", ("Inf value(s) in the inputs",)),
    Case(
        "nan-regression-targets",
        "data",
        "regression",
        D.Regressor,
        nan_regression_targets,
        "data",
        "fail",
        ("NaN value(s) in the targets", "regression targets"),
    ),
    Case(
        "getitem-ignores-index-cnn",
        "data",
        "CNN",
        D.DigitsCNN,
        getitem_ignores_index,
        "data",
        "fail",
        ("identical copies", "__getitem__"),
    ),
    Case(
        "skewed-validation-labels-mlp",
        "data",
        "MLP",
        D.MLP,
        skewed_validation_labels,
        "data",
        "warn",
        ("label distribution differs", "0: 80%"),
    ),
]

HEALTHY: list[Case] = [
    Case("digits-split-cnn", "data", "CNN", D.DigitsCNN, D.digits_split),
    Case("digits-split-mlp", "data", "MLP", _digits_mlp, D.digits_flat_split),
    Case("gaussian-split-mlp", "data", "MLP", D.MLP, gaussian_split),
    Case("regression-split", "data", "regression", D.Regressor, regression_split),
    Case("token-lm-split", "data", "transformer LM", D.SmallLM, lm_split),
]
