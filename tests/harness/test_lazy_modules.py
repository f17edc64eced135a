"""A module with lazy parameters (``nn.LazyLinear``) is judged: the harness shapes one copy and copies it."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch
from torch import Tensor, nn
from torch.nn import functional as F

from lightning_recipes.checks import preflight
from lightning_recipes.harness import Harness
from lightning_recipes.testing import random_classification_loader


class LazyHead(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.body, self.head = nn.Linear(16, 32), nn.LazyLinear(4)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-2)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(F.relu(self.body(x)))

    def training_step(self, batch: Any, batch_idx: int) -> Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)


def test_checks_that_copy_a_lazy_module_judge_it_and_leave_the_original_lazy() -> None:
    model = LazyHead()
    checks = ["eval_mode", "optimization", "overfit_batch", "grad_flow", "batch_independence"]
    report = preflight(model, train_dataloaders=random_classification_loader(), checks=checks, num_threads=1)
    assert {r.name: r.status for r in report} == dict.fromkeys(checks, "pass"), report
    assert isinstance(model.head.weight, nn.parameter.UninitializedParameter)  # the user's module untouched


def test_every_copy_of_a_lazy_module_starts_from_the_same_weights() -> None:
    harness = Harness(LazyHead(), random_classification_loader())
    first, second = harness.copy_model(), harness.copy_model()
    assert first is not second and first.head.weight.shape == (4, 32)
    assert all(torch.equal(a, b) for a, b in zip(first.state_dict().values(), second.state_dict().values()))
