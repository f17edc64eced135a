"""``build_optimizers``: the module's own optimizers at their peak lr, or a record of why AdamW stands in."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lightning_recipes.harness import BuiltOptimizers, Harness, build_optimizers
from lightning_recipes.testing import TinyClassifier


class _Failing(TinyClassifier):
    def configure_optimizers(self):
        raise RuntimeError("needs the trainer")


class _Empty(TinyClassifier):
    def configure_optimizers(self):
        return None


class _WarmUpDict(TinyClassifier):
    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.5)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.0 if step == 0 else 1.0)
        return {"optimizer": optimizer, "lr_scheduler": schedule}


class _WarmUpLists(TinyClassifier):
    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: min(1.0, (step + 1) / 100))
        return [optimizer], [scheduler]


class _OneCycle(TinyClassifier):
    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=0.01)
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=0.01, total_steps=100)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


@pytest.mark.parametrize(
    ("cls", "kind", "peak"),
    [
        (_WarmUpDict, torch.optim.SGD, 0.5),
        (_WarmUpLists, torch.optim.SGD, 0.1),
        (_OneCycle, torch.optim.AdamW, 0.01),
    ],
)
def test_the_modules_own_optimizers_at_peak_lr(cls: type, kind: type, peak: float) -> None:
    built = build_optimizers(cls())
    assert isinstance(built, BuiltOptimizers) and built.from_module and built.error == ""
    assert [type(o) for o in built.optimizers] == [kind]
    assert built.optimizers[0].param_groups[0]["lr"] == peak  # the scheduler's step-0 lr was lower
    note = f"the module's configure_optimizers ({kind.__name__}) at peak lr; schedulers not stepped"
    assert built.note == note
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.from_module = False  # type: ignore[misc]


@pytest.mark.parametrize(
    ("cls", "error", "note"),
    [
        (
            _Failing,
            "RuntimeError: needs the trainer",
            "configure_optimizers failed outside the Trainer (RuntimeError: needs the trainer);"
            " used AdamW(lr=1e-3) instead",
        ),
        (_Empty, "", "configure_optimizers returned no optimizer; used AdamW(lr=1e-3)"),
    ],
)
def test_adamw_stands_in_and_the_record_says_why(cls: type, error: str, note: str) -> None:
    built = Harness(cls()).build_optimizers(cls())
    assert (built.from_module, built.error, built.note) == (False, error, note)
    assert [type(o) for o in built.optimizers] == [torch.optim.AdamW]
