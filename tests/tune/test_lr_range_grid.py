"""The evidence for ``peak_lr``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
import pytest

from lightning_recipes.data import CharLMDataModule, DigitsDataModule
from lightning_recipes.mixins import AdamWRecipe, LionRecipe
from lightning_recipes.testing import DigitsCNN, TinyTransformerLM, fast_trainer
from lightning_recipes.tune import find_lr

GRID = [10 ** (exponent / 2) for exponent in range(-8, -1)]  # 1e-4 .. 1e-1


class AdamWCNN(AdamWRecipe, DigitsCNN):
    pass


class LionCNN(LionRecipe, DigitsCNN):
    pass


class AdamWLM(AdamWRecipe, TinyTransformerLM):
    pass


class LionLM(LionRecipe, TinyTransformerLM):
    pass


def _char_vocab() -> int:
    return CharLMDataModule(max_chars=1).vocab_size


SETUPS: dict[str, tuple[Callable[[str, float], pl.LightningModule], Callable[[], Any], int]] = {
    "digits_cnn": (
        lambda opt, lr: (AdamWCNN if opt == "adamw" else LionCNN)(lr=lr, width=8),
        DigitsDataModule,
        2,
    ),
    "char_lm": (
        lambda opt, lr: (AdamWLM if opt == "adamw" else LionLM)(
            vocab_size=_char_vocab(), d_model=32, n_heads=2, n_layers=1, lr=lr
        ),
        lambda: CharLMDataModule(seq_len=32, batch_size=32, max_chars=200_000),
        1,
    ),
}


def _val_loss(name: str, optimizer: str, lr: float) -> float:
    make, data, epochs = SETUPS[name]
    pl.seed_everything(0, verbose=False)
    trainer = fast_trainer(max_epochs=epochs, num_sanity_val_steps=0)
    trainer.fit(make(optimizer, lr), data())
    return float(trainer.callback_metrics["val_loss"])


@pytest.mark.slow
@pytest.mark.parametrize("optimizer", ["adamw", "lion"])
@pytest.mark.parametrize("name", list(SETUPS))
def test_peak_lr_is_within_3x_of_the_best_lr_of_a_grid_of_trainings(name: str, optimizer: str):
    losses = {lr: _val_loss(name, optimizer, lr) for lr in GRID}
    best = min(losses, key=losses.__getitem__)
    make, data, _ = SETUPS[name]
    pl.seed_everything(0, verbose=False)
    result = find_lr(make(optimizer, 1e-3), datamodule=data(), seed=0)
    table = {f"{lr:.2g}": round(loss, 3) for lr, loss in losses.items()}
    assert best / 3 <= result.peak_lr <= best * 3, (result.peak_lr, best, table)
