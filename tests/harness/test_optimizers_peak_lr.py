"""``build_optimizers`` builds the module's optimizers at their peak learning rate (issue #24: a OneCycleLR
model's overfit check ran at max_lr / 25 and was failed for "a learning rate too low")."""

from __future__ import annotations

import torch

from lightning_recipes.harness.optimizers import build_optimizers
from lightning_recipes.testing import TinyClassifier


class OneCycle(TinyClassifier):
    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=0.01)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.01, total_steps=100)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class Warmup(TinyClassifier):
    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 100))
        return [optimizer], [scheduler]


def test_one_cycle_is_built_at_its_max_lr_not_its_starting_lr():
    (optimizer,) = build_optimizers(OneCycle()).optimizers
    assert optimizer.param_groups[0]["lr"] == 0.01  # OneCycleLR starts the group at 0.01 / 25


def test_a_warmup_is_built_at_the_lr_it_warms_up_to():
    (optimizer,) = build_optimizers(Warmup()).optimizers
    assert optimizer.param_groups[0]["lr"] == 0.1
