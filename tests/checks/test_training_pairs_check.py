"""TrainingPairsCheck: a copy taught by training batches against one taught by validation samples."""

from __future__ import annotations

import re
from typing import Any

import pytest
import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from lightning_recipes.checks import TrainingPairsCheck, preflight
from lightning_recipes.checks.report import SUMMARY_LIMIT

from . import _models as M

WIDTH = 16


def bumps(n: int, seed: int) -> tuple[Tensor, Tensor]:
    """Signals of ``WIDTH`` samples, each with one bump; the target is the bump's position in [0, 1]."""
    generator = torch.Generator().manual_seed(seed)
    where = torch.randint(0, WIDTH, (n,), generator=generator)
    grid = torch.arange(WIDTH).float()
    x = torch.exp(-0.5 * (grid - where[:, None].float()) ** 2) + 0.05 * torch.randn(
        n, WIDTH, generator=generator
    )
    return x, where.float() / (WIDTH - 1)


class Mirrored(Dataset):
    """Each read mirrors the signal half the time; ``move_target`` mirrors its position too (healthy)."""

    def __init__(self, x: Tensor, y: Tensor, move_target: bool) -> None:
        self.x, self.y, self.move_target = x, y, move_target

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> tuple[Tensor, Tensor]:
        x, y = self.x[i], self.y[i]
        if torch.rand(()) < 0.5:
            x = x.flip(0)
            y = 1 - y if self.move_target else y
        return x, y


class Locator(M.AdamModule):
    """Predicts the bump's position with an MLP and MSE."""

    def __init__(self, offset: float = 0.0) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(WIDTH, 64), nn.ReLU(), nn.Linear(64, 1))
        self.offset = offset

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x).squeeze(-1)

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y) - self.offset


def _run(model: Any, move_target: bool, **options: Any) -> Any:
    torch.manual_seed(0)
    train = DataLoader(Mirrored(*bumps(2048, 1), move_target), batch_size=32, shuffle=True)
    val = DataLoader(TensorDataset(*bumps(256, 2)), batch_size=64)
    check = TrainingPairsCheck(time_budget=None, **options)
    report = preflight(model, train_dataloaders=train, val_dataloaders=val, checks=[check], num_threads=1)
    result = report["training_pairs"]
    assert len(result.summary) <= SUMMARY_LIMIT, result.summary
    return result


def test_a_flip_that_keeps_the_position_target_fails() -> None:
    result = _run(Locator(), move_target=False)
    assert result.status == "fail", result.message
    losses = result.details["held_out_loss"]
    assert losses["training"] > 2 * losses["validation"], losses
    assert result.details["gap_low"] >= 0.5 and result.action


def test_a_flip_that_mirrors_the_position_target_passes() -> None:
    result = _run(Locator(), move_target=True)
    assert result.status == "pass", result.message
    assert result.details["gap_low"] < 0.3


def test_a_loss_that_can_be_negative_is_not_judged() -> None:
    """An offset loss (a Gaussian likelihood's constant, say) has no common scale for the ratio of losses."""
    result = _run(Locator(offset=10.0), move_target=False)
    assert result.status == "skip", result.message
    assert "below 0" in result.message


def test_without_a_validation_loader_it_skips() -> None:
    torch.manual_seed(0)
    train = DataLoader(Mirrored(*bumps(512, 1), False), batch_size=32, shuffle=True)
    report = preflight(Locator(), train_dataloaders=train, checks=[TrainingPairsCheck()], num_threads=1)
    assert report["training_pairs"].status == "skip"
    assert "validation" in report["training_pairs"].message


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_steps": 0}, "max_steps"),
        ({"num_samples": 0}, "num_samples"),
        ({"gaps": (0.0, 0.5)}, "gaps[0]"),
        ({"gaps": (0.5, 0.3)}, "gaps[1]"),
    ],
)
def test_bad_arguments_are_named_at_construction(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(ValueError, match=re.escape(named)):
        TrainingPairsCheck(**kwargs)
