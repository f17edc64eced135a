"""The ``split_overlap`` gallery: validation data that repeats training data (exact, near, by index), and
healthy splits, one of them with many genuine chance duplicates."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset, random_split

from lightning_recipes.testing import random_token_loader

from . import Case
from . import _data_models as D


def val_subset_of_train() -> dict[str, Any]:
    """Validation = 300 samples drawn from the training set."""
    x_train, y_train, _, _ = D.digits()
    pick = torch.randperm(len(x_train), generator=torch.Generator().manual_seed(5))[:300]
    return D.loaders(x_train, y_train, x_train[pick], y_train[pick])


def augmented_copies_in_val() -> dict[str, Any]:
    """Validation = brightness-jittered, noisy copies of 300 training digits (augmented before splitting)."""
    x_train, y_train, _, _ = D.digits()
    x_train = x_train.flatten(1)
    g = torch.Generator().manual_seed(6)
    pick = torch.randperm(len(x_train), generator=g)[:300]
    copies = 1.1 * x_train[pick] + 0.02 * torch.randn(300, 64, generator=g)
    return D.loaders(x_train, y_train, copies, y_train[pick])


def lm_val_from_train() -> dict[str, Any]:
    """Token LM: the validation sequences are the first 64 training sequences."""
    x, y, _, _ = D.tokens(256, 0)
    return D.loaders(x, y, x[:64], y[:64], batch_size=16)


def regression_val_jittered_train() -> dict[str, Any]:
    """Regression: validation = training rows with 1e-3 jitter (a 'new' split made by adding noise)."""
    x, y = D.regression(256, 0)
    g = torch.Generator().manual_seed(7)
    return D.loaders(x, y, x[:128] + 1e-3 * torch.randn(128, D.IN, generator=g), y[:128])


def two_random_splits() -> dict[str, Any]:
    """``random_split`` called twice with different seeds: the two Subsets overlap by about half."""
    dataset = TensorDataset(*D.gaussian(512, 0))
    train, _ = random_split(dataset, [0.8, 0.2], generator=torch.Generator().manual_seed(0))
    _, val = random_split(dataset, [0.8, 0.2], generator=torch.Generator().manual_seed(1))
    return {
        "train_dataloaders": DataLoader(train, batch_size=32, shuffle=True),
        "val_dataloaders": DataLoader(val, batch_size=64),
    }


def one_random_split() -> dict[str, Any]:
    dataset = TensorDataset(*D.gaussian(512, 0))
    train, val = random_split(dataset, [0.8, 0.2], generator=torch.Generator().manual_seed(0))
    return {
        "train_dataloaders": DataLoader(train, batch_size=32, shuffle=True),
        "val_dataloaders": DataLoader(val, batch_size=64),
    }


def low_diversity_tokens() -> dict[str, Any]:
    """64 possible sequences: train and val share most of them by chance, as does train with itself."""
    return {"train_dataloaders": random_token_loader(), "val_dataloaders": random_token_loader(seed=1)}


def regression_split() -> dict[str, Any]:
    return D.loaders(*D.regression(256, 0), *D.regression(128, 1))


def lm_split() -> dict[str, Any]:
    return D.loaders(*D.tokens(256, 64), batch_size=16)


BUGS: list[Case] = [
    Case(
        "digits-val-subset-of-train",
        "split_overlap",
        "CNN",
        D.DigitsCNN,
        val_subset_of_train,
        "split_overlap",
        "fail",
        ("overlaps the training data", "exact)", "drawn from"),
    ),
    Case(
        "digits-augmented-copies-in-val",
        "split_overlap",
        "MLP",
        lambda: D.MLP(in_features=64, classes=10),
        augmented_copies_in_val,
        "split_overlap",
        "fail",
        ("overlaps the training data", "(0 exact)", "augmented copies"),
    ),
    Case(
        "lm-val-sequences-from-train",
        "split_overlap",
        "transformer LM",
        D.SmallLM,
        lm_val_from_train,
        "split_overlap",
        "fail",
        ("overlaps the training data", "64 exact"),
    ),
    Case(
        "regression-val-jittered-train",
        "split_overlap",
        "regression",
        D.Regressor,
        regression_val_jittered_train,
        "split_overlap",
        "fail",
        ("overlaps the training data", "128 of 128"),
    ),
    Case(
        "two-random-splits-overlap",
        "split_overlap",
        "MLP",
        D.MLP,
        two_random_splits,
        "split_overlap",
        "fail",
        ("Subsets of the same dataset share", "random_split"),
    ),
]

HEALTHY: list[Case] = [
    Case("digits-proper-split-cnn", "split_overlap", "CNN", D.DigitsCNN, D.digits_split),
    Case("one-random-split-mlp", "split_overlap", "MLP", D.MLP, one_random_split),
    Case(
        "low-diversity-tokens-lm",
        "split_overlap",
        "transformer LM",
        D.TinyTransformerLM,
        low_diversity_tokens,
    ),
    Case("lm-split", "split_overlap", "transformer LM", D.SmallLM, lm_split),
    Case("regression-split", "split_overlap", "regression", D.Regressor, regression_split),
]
