"""Sealed gallery F's "understand or abstain" rules (issue #34), on tiny real modules: a module that keeps
statistics of its batches by hand is judged like BatchNorm, and a target that is the same for every sample
leaves no pair for ``input_independence`` to break."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_recipes.checks import (
    BatchIndependenceCheck,
    CheckContext,
    InputIndependenceCheck,
    ValidationPathCheck,
    preflight,
)


class RunningNormaliser(nn.Module):
    """Standardises with the batch's statistics in training and keeps running ones for eval, by hand."""

    def __init__(self, width: int, momentum: float = 0.01) -> None:
        super().__init__()
        self.momentum = momentum
        self.register_buffer("mean", torch.zeros(width))
        self.register_buffer("var", torch.ones(width))

    def forward(self, x: Tensor) -> Tensor:
        if not self.training:
            return (x - self.mean) / (self.var + 1e-5).sqrt()
        mean, var = x.mean(0), x.var(0)
        with torch.no_grad():
            self.mean.lerp_(mean, self.momentum)
            self.var.lerp_(var, self.momentum)
        return (x - mean) / (var + 1e-5).sqrt()


class Regressor(pl.LightningModule):
    def __init__(self, normaliser: nn.Module, mix: bool = False) -> None:
        super().__init__()
        self.net = nn.Sequential(normaliser, nn.Linear(6, 32), nn.ReLU(), nn.Linear(32, 1))
        self.mix = mix

    def forward(self, x: Tensor) -> Tensor:
        out = self.net(x).squeeze(-1)
        return out - out.mean() if self.mix else out  # mix: every output moves with every sample, in eval too

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.mse_loss(self(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.mse_loss(self(x), y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def _sensors(n: int = 256) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, 6, generator=g) * 40 + 50  # raw units: far from standardised
    y = (x[:, 0] - 50) / 40 + 0.5 * ((x[:, 1] - 50) / 40) ** 2
    return DataLoader(TensorDataset(x, y), batch_size=32)


def test_a_running_normaliser_written_by_hand_runs_in_eval_like_batchnorm():
    passed = BatchIndependenceCheck().run(CheckContext(Regressor(RunningNormaliser(6)), _sensors()))
    assert passed.status == "pass", passed.message
    assert float(passed.details["max_cross_effect"]) == 0.0
    # the positive control: an output that mixes the batch in eval as well still fails
    mixed = BatchIndependenceCheck().run(CheckContext(Regressor(RunningNormaliser(6), mix=True), _sensors()))
    assert mixed.status == "fail", mixed.message


def test_validation_reading_statistics_kept_by_hand_is_not_judged():
    loader = _sensors()
    report = preflight(
        Regressor(RunningNormaliser(6, momentum=0.001)),
        train_dataloaders=loader,
        val_dataloaders=loader,
        checks=[ValidationPathCheck()],
        num_threads=1,
        progress=False,
    )
    result = report["validation_path"]
    # the running statistics (momentum 0.001) still hold almost all of their start: validation lags the fit
    assert result.status == "inconclusive", result.message
    assert "running statistics kept by net.0" in result.summary


class Preference(pl.LightningModule):
    """A Bradley-Terry reward model on (chosen, rejected) pairs: the target, "the first wins", is always 1."""

    def __init__(self) -> None:
        super().__init__()
        self.reward = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 1))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        chosen, rejected, first_wins = batch
        margin = (self.reward(chosen) - self.reward(rejected)).squeeze(-1)
        return F.binary_cross_entropy_with_logits(margin, first_wins)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-2)


def _preferences(shuffled_target: bool = False, n: int = 512) -> DataLoader:
    g = torch.Generator().manual_seed(0)
    a, b = torch.randn(n, 8, generator=g), torch.randn(n, 8, generator=g)
    a_wins = a[:, 0] > b[:, 0]
    chosen = torch.where(a_wins[:, None], a, b)
    rejected = torch.where(a_wins[:, None], b, a)
    target = torch.ones(n)
    if shuffled_target:  # the pairs stored as (a, b) with a label that is not theirs
        chosen, rejected, target = a, b, a_wins.float()[torch.randperm(n, generator=g)]
    return DataLoader(TensorDataset(chosen, rejected, target), batch_size=32)


def test_one_target_for_every_sample_leaves_no_pair_to_break():
    result = InputIndependenceCheck().run(CheckContext(Preference(), _preferences()))
    assert result.status == "skip", result.message
    assert "every sample has the same target" in result.summary
    # the positive control: labels that vary but were shuffled apart from their pairs still fail
    shuffled = InputIndependenceCheck().run(CheckContext(Preference(), _preferences(shuffled_target=True)))
    assert shuffled.status == "fail", shuffled.message
