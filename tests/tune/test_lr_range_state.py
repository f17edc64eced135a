"""``LRRangeTest`` state round-trips through a checkpoint: every field of the result, and a resumed fit
trains as the uninterrupted one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from lightning_recipes.mixins import AdamWRecipe
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from lightning_recipes.tune import LRRangeTest


class AdamWClassifier(AdamWRecipe, TinyClassifier):
    """TinyClassifier with the recipe's AdamW (decay / no-decay groups) and warm-up cosine schedule."""


def _finder() -> LRRangeTest:
    return LRRangeTest(num_steps=15, max_lr=1.0, apply=True, print_result=False)


class TrainedLR(pl.Callback):
    def __init__(self) -> None:
        self.lrs: list[list[float]] = []

    def on_before_optimizer_step(self, trainer: pl.Trainer, module: Any, optimizer: Any) -> None:
        self.lrs.append([float(g["lr"]) for g in optimizer.param_groups])


def _fit(root: Path, ckpt_path: str | None = None) -> tuple[LRRangeTest, TrainedLR, pl.LightningModule]:
    """8 steps with the sweep applied; a checkpoint every 4 steps in ``root``."""
    torch.manual_seed(0)
    model = AdamWClassifier(lr=1e-3)
    finder, trained = _finder(), TrainedLR()
    every_4 = ModelCheckpoint(dirpath=root, filename="{step}", every_n_train_steps=4, save_top_k=-1)
    trainer = fast_trainer(
        max_steps=8, max_epochs=-1, callbacks=[finder, trained, every_4], enable_checkpointing=True
    )
    trainer.fit(model, random_classification_loader(num_samples=128), ckpt_path=ckpt_path)
    return finder, trained, model


def test_state_dict_after_load_equals_the_original_key_for_key(tmp_path: Path):
    """Before: load_state_dict dropped `group_scales` (and any field it did not list by hand)."""
    finder, _, _ = _fit(tmp_path)
    assert finder.result is not None and finder.result.group_scales
    state = finder.state_dict()
    restored = _finder()
    restored.load_state_dict(state)
    again = restored.state_dict()
    assert again.keys() == state.keys()
    assert again["result"].keys() == state["result"].keys()
    for key in state["result"]:
        assert again["result"][key] == state["result"][key], key
    assert restored.result == finder.result


def test_a_resumed_fit_trains_as_the_uninterrupted_one(tmp_path: Path):
    full, full_lrs, full_model = _fit(tmp_path / "full")
    resumed, resumed_lrs, resumed_model = _fit(tmp_path / "resumed", str(tmp_path / "full" / "step=4.ckpt"))
    assert resumed.result == full.result  # restored, not swept again on trained weights
    assert len(resumed_lrs.lrs) == 4
    for resumed_step, full_step in zip(resumed_lrs.lrs, full_lrs.lrs[4:]):
        assert resumed_step == pytest.approx(full_step, rel=1e-6)
    for key, value in full_model.state_dict().items():
        assert torch.allclose(value, resumed_model.state_dict()[key], atol=1e-6), key
