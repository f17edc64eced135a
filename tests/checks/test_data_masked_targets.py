"""``data`` judges what reaches the loss: gaps (NaN) in the targets and unlabelled rows (label -1) that the
step masks are no fault; the same values fed to the loss are. Also: a stored NaN is not a change of the data,
and splits whose batches hold different entries are not compared label by label."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.checks import CheckContext, DataCheck, preflight

from . import _models as M


class MaskedRegressor(M.AdamModule):
    """Regression on targets with gaps: the loss covers the observed cells only (``masked``), or all cells."""

    def __init__(self, masked: bool = True) -> None:
        super().__init__()
        self.net = nn.Linear(M.IN, 3)
        self.masked = masked

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        prediction = self.net(x)
        seen = ~y.isnan() if self.masked else torch.ones_like(y, dtype=torch.bool)
        return F.mse_loss(prediction[seen], y[seen])


class SemiSupervised(M.MLP):
    """Label -1 marks an unlabelled row: cross-entropy on the labelled rows (``masked``), else on every row
    (the -1 labels reach the loss)."""

    def __init__(self, masked: bool = True) -> None:
        super().__init__()
        self.masked = masked

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        logits = self(x)
        if self.masked:
            labelled = y >= 0
            return F.cross_entropy(logits[labelled], y[labelled])
        return F.cross_entropy(logits, y, ignore_index=-5)


def _gappy_targets(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, M.IN, generator=g)
    y = x[:, :3] + 0.1 * torch.randn(n, 3, generator=g)
    y[torch.rand(n, 3, generator=g) < 0.2] = float("nan")
    return TensorDataset(x, y)


def _partly_labelled(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, M.IN, generator=g)
    y = (x @ torch.randn(M.IN, M.C, generator=torch.Generator().manual_seed(9))).argmax(-1)
    y[torch.rand(n, generator=g) < 0.7] = -1  # 70% unlabelled
    return TensorDataset(x, y)


def _data(make: Any) -> dict[str, DataLoader]:
    generator = torch.Generator().manual_seed(0)
    train = DataLoader(make(512, 0), batch_size=64, shuffle=True, generator=generator)
    return {"train_dataloaders": train, "val_dataloaders": DataLoader(make(256, 1), batch_size=64)}


def test_nan_targets_the_step_masks_pass_and_nan_fed_to_the_loss_fails():
    masked = preflight(MaskedRegressor(), **_data(_gappy_targets), checks=["data"], progress=False)["data"]
    assert masked.status == "pass", masked.message
    assert masked.details["nonfinite_targets_masked"] and masked.details["nonfinite_values"] > 0
    assert "purity" not in masked.details  # a stored NaN equals itself: reading did not change the data
    fed = preflight(MaskedRegressor(False), **_data(_gappy_targets), checks=["data"], progress=False)["data"]
    assert fed.status == "fail" and "NaN" in fed.summary
    assert "nonfinite_targets_masked" not in fed.details


def test_unlabelled_rows_the_step_masks_pass_and_unlabelled_rows_in_the_loss_fail():
    data = _data(_partly_labelled)
    masked = preflight(SemiSupervised(), **data, checks=["data"], progress=False)["data"]
    assert masked.status == "pass", masked.message
    assert (
        masked.details["labels_out_of_range"] == 0
        and "masked before the loss" in masked.details["labels_range"]
    )
    assert -1 not in masked.details["train_class_counts"]  # unlabelled rows are no class of the split
    read = DataCheck().run(
        CheckContext(SemiSupervised(False), data["train_dataloaders"], data["val_dataloaders"])
    )
    assert read.status == "fail" and read.details["labels_out_of_range"] > 0, read.message


class EdgeModel(M.AdamModule):
    """Link prediction: training batches are (source, destination) edges, validation batches add a label."""

    def __init__(self) -> None:
        super().__init__()
        self.embedding = nn.Embedding(50, 8)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        source, destination = batch[0], batch[1]
        score = (self.embedding(source) * self.embedding(destination)).sum(-1)
        return F.binary_cross_entropy_with_logits(score, torch.ones_like(score))


def test_splits_with_different_batch_entries_are_not_compared_label_by_label():
    g = torch.Generator().manual_seed(0)
    edges, scored = torch.randint(0, 50, (400, 2), generator=g), torch.randint(0, 50, (200, 2), generator=g)
    train = DataLoader(TensorDataset(edges[:, 0], edges[:, 1]), batch_size=64, shuffle=True, generator=g)
    labels = torch.randint(0, 2, (200,), generator=g)
    val = DataLoader(TensorDataset(scored[:, 0], scored[:, 1], labels), batch_size=64)
    result = DataCheck().run(CheckContext(EdgeModel(), train, val))
    assert result.status != "fail", result.message
    assert "different entries" in result.details["relation"]
    assert "val_unseen_label_fraction" not in result.details
