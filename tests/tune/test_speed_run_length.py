"""speed_tune ranks by the projected whole-run time: one-off costs against the planned steps (issue 22)."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch.utils.data import DataLoader

from lightning_recipes.harness import preserved_loader_rng
from lightning_recipes.testing import TinyClassifier, random_classification_loader
from lightning_recipes.tune.speed import SpeedOption, planned_steps, speed_tune, timed_loader
from tests.helpers import speed as clock
from tests.helpers.speed import FAST, virtual_time


class CostlyStartClassifier(TinyClassifier):
    """Sleeps ``step_sleep`` every step and ``first_sleep`` once, in its first step: an option that trades a
    one-off cost for a per-step gain (as ``torch.compile`` does), with no change to the loss."""

    def __init__(self) -> None:
        super().__init__()
        self.step_sleep = 0.15
        self.first_sleep = 0.0
        self.steps_done = 0

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        clock.time.sleep(self.step_sleep + (self.first_sleep if self.steps_done == 0 else 0.0))
        self.steps_done += 1
        return super().training_step(batch, batch_idx)


def _pays_later(module: pl.LightningModule) -> pl.LightningModule:
    module.step_sleep, module.first_sleep = 0.01, 1.5  # type: ignore[assignment]  # 140 ms/step for 1.5 s once
    return module


PAYS_LATER = SpeedOption("pays_later", prepare=_pays_later, advice="x")


def test_an_option_whose_one_off_cost_the_run_does_not_repay_is_not_chosen(monkeypatch: Any) -> None:
    """Regression (issue 22): `compile` was chosen for a short fit on its per-step time alone. 1.5 s once
    for 140 ms a step (virtual clock: exact) pays after 11 steps: not for a run of 4, yes for 1000."""
    virtual_time(monkeypatch)
    loader = random_classification_loader()
    short = speed_tune(
        CostlyStartClassifier(), train_dataloaders=loader, options=[PAYS_LATER], run_steps=4, **FAST
    )
    row = short.rows[1]
    assert (row.step_ms, row.baseline_step_ms, row.speedup) == pytest.approx((10.0, 150.0, 15.0))
    assert (row.one_off_s, row.break_even_steps) == (pytest.approx(1.5), 11)
    assert row.run_speedup == pytest.approx(0.6 / 1.54) and row.status.startswith("not faster for this run")
    assert short.best == [] and short.best_run_speedup == 1.0
    long = speed_tune(
        CostlyStartClassifier(), train_dataloaders=loader, options=[PAYS_LATER], run_steps=1000, **FAST
    )
    assert long.rows[1].status == "faster" and long.best == ["pays_later"]
    assert long.best_run_speedup == pytest.approx(150 / 11.5) and long.run_steps == 1000


def test_a_rows_speedup_is_its_step_time_against_the_baseline_of_the_same_repeats(monkeypatch: Any) -> None:
    """Regression (issue 22 audit): the combination row was compared with its own re-measured baseline while
    the table showed another one; every row now carries its baseline and speed-up = baseline / step time."""
    options = [
        SpeedOption("quicker", prepare=lambda m: (setattr(m, "step_sleep", 0.03), m)[1]),
        SpeedOption("also", prepare=lambda m: m, advice="nothing"),
    ]
    virtual_time(monkeypatch)
    result = speed_tune(
        CostlyStartClassifier(), train_dataloaders=random_classification_loader(), options=options, **FAST
    )
    for row in result.rows:
        if row.step_ms is not None:
            assert row.baseline_step_ms is not None
            assert row.speedup == pytest.approx(row.baseline_step_ms / row.step_ms, rel=1e-12), row


def test_run_length_from_the_trainer_or_one_epoch() -> None:
    loader = random_classification_loader()  # 8 batches
    model = TinyClassifier()
    by_epochs = speed_tune(model, train_dataloaders=loader, options=["pin_memory"], **FAST,
                           trainer=pl.Trainer(max_epochs=3, logger=False))  # fmt: skip
    assert (by_epochs.run_steps, by_epochs.run_steps_source) == (24, "the Trainer's max_steps / max_epochs")
    default = speed_tune(model, train_dataloaders=loader, options=["pin_memory"], **FAST)
    assert default.run_steps == 8 and default.run_steps_source.startswith("one epoch")
    assert default.rows[0].run_s is not None


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"max_epochs": 3}, 24),
        ({"max_steps": 5}, 5),
        ({"max_steps": 5, "accumulate_grad_batches": 2}, 10),
        ({"max_epochs": 2, "max_steps": 100}, 16),
        ({"max_epochs": 2, "limit_train_batches": 3}, 6),
        ({"max_epochs": 2, "limit_train_batches": 0.5}, 8),
        ({}, 8000),  # Lightning's default: 1000 epochs
    ],
)
def test_planned_steps_follow_lightnings_stopping_rules(kwargs: dict[str, Any], expected: int) -> None:
    trainer = pl.Trainer(logger=False, enable_progress_bar=False, **kwargs)
    assert planned_steps(trainer, random_classification_loader()) == expected


def test_the_timed_run_ends_with_the_epochs_smaller_last_batch() -> None:
    """A new batch shape costs torch.compile a second compile once per run: the timed steps include it."""
    dataset = random_classification_loader(num_samples=100).dataset  # batches of 32, 32, 32, 4
    generator = torch.Generator().manual_seed(0)
    loader = DataLoader(dataset, batch_size=32, shuffle=True, generator=generator)
    with preserved_loader_rng(loader):
        expected = [y.tolist() for _, y in loader]
    with preserved_loader_rng(loader):
        timed = timed_loader(loader, 3)
    batches = [y.tolist() for _, y in timed]
    assert [len(b) for b in batches] == [32, 32, 4]
    assert batches == expected[:2] + expected[-1:]
    assert timed_loader(loader, 4) is loader  # the whole epoch fits in the timed steps: unchanged


def test_run_steps_is_validated() -> None:
    with pytest.raises(ValueError, match="`run_steps`"):
        speed_tune(TinyClassifier(), train_dataloaders=random_classification_loader(), run_steps=0)
    with pytest.raises(TypeError, match="`trainer`"):
        speed_tune(TinyClassifier(), train_dataloaders=random_classification_loader(), trainer=3)  # type: ignore[arg-type]
