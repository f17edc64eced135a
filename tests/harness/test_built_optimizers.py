"""``build_optimizers`` returns a typed record: were the module's own optimizers built, and if not, why."""

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


class _WarmUp(TinyClassifier):
    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.5)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.0 if step == 0 else 1.0)
        return {"optimizer": optimizer, "lr_scheduler": schedule}


def test_the_modules_own_optimizers_at_peak_lr():
    built = build_optimizers(_WarmUp())
    assert built.from_module and built.error == ""
    assert [type(o) for o in built.optimizers] == [torch.optim.SGD]
    assert built.optimizers[0].param_groups[0]["lr"] == 0.5  # the scheduler's step-0 lr was 0
    assert built.note == "the module's configure_optimizers (SGD) at peak lr; schedulers not stepped"


def test_a_failing_configure_optimizers_is_a_field_not_prose():
    built = Harness(_Failing()).build_optimizers(_Failing())
    assert not built.from_module
    assert built.error == "RuntimeError: needs the trainer"
    assert [type(o) for o in built.optimizers] == [torch.optim.AdamW]
    assert built.note == (
        "configure_optimizers failed outside the Trainer (RuntimeError: needs the trainer); "
        "used AdamW(lr=1e-3) instead"
    )


def test_no_optimizer_returned():
    built = build_optimizers(_Empty())
    assert (built.from_module, built.error) == (False, "")
    assert built.note == "configure_optimizers returned no optimizer; used AdamW(lr=1e-3)"


def test_the_record_is_frozen():
    built = build_optimizers(TinyClassifier())
    assert isinstance(built, BuiltOptimizers)
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.from_module = False  # type: ignore[misc]
