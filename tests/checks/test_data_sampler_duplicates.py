"""``data`` judges repeats on distinct indices: a sampler drawing with replacement is not repeated data."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset, WeightedRandomSampler

from lightning_recipes.checks import preflight
from lightning_recipes.checks.data.data_check import DataCheck
from lightning_recipes.testing import TinyClassifier


def balanced_loader(x: torch.Tensor, y: torch.Tensor) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    weights = 1.0 / torch.bincount(y).float()[y]
    sampler = WeightedRandomSampler(weights, num_samples=len(y), generator=generator)
    return DataLoader(TensorDataset(x, y), batch_size=32, sampler=sampler)


def data_result(loader: DataLoader):
    return preflight(TinyClassifier(), train_dataloaders=loader, checks=[DataCheck()], progress=False)["data"]


def test_a_balanced_weighted_sampler_over_distinct_samples_is_not_duplicate_data():
    # 20 rare samples drawn ~100 times in 200: repeated indices, not identical copies
    y = torch.tensor([0] * 180 + [1] * 20)
    x = torch.randn(200, 16, generator=torch.Generator().manual_seed(1))
    result = data_result(balanced_loader(x, y))
    assert result.status == "pass", result.message
    assert "duplicate_samples" not in result.details
    assert result.details["samples_judged_on_distinct_indices"] > 0


def test_rows_really_duplicated_in_the_dataset_are_still_flagged_under_the_same_sampler():
    y = torch.tensor([0] * 180 + [1] * 20)
    x = torch.randn(200, 16, generator=torch.Generator().manual_seed(1))
    x[100:] = x[:100]  # the second half copies the first: oversampling by copying rows
    result = data_result(balanced_loader(x, y))
    assert result.status in ("warn", "fail"), result.message
    assert result.details["duplicate_samples"] >= 10
    assert "identical copies" in result.message


def test_a_sampler_without_replacement_reads_the_batches_as_before():
    y = torch.tensor([0] * 180 + [1] * 20)
    x = torch.randn(200, 16, generator=torch.Generator().manual_seed(1))
    result = data_result(DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True))
    assert result.status == "pass", result.message
    assert "samples_judged_on_distinct_indices" not in result.details
