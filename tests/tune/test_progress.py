"""Progress while tuning (issue #26)."""

from __future__ import annotations

import pytest

from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from lightning_recipes.tune import LRRangeTest, find_lr, speed_tune
from tests.helpers.speed import FAST


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTY_COMPATIBLE", "1")  # rich treats the captured stderr as a terminal


def test_find_lr_draws_its_progress_and_nothing_when_off(terminal, capsys) -> None:
    loader = random_classification_loader()
    result = find_lr(TinyClassifier(), train_dataloaders=loader, num_steps=10)
    drawn = capsys.readouterr()
    assert drawn.out == "" and "find_lr" in drawn.err and f"{len(result.lrs)}/10" in drawn.err
    assert "loss " in drawn.err  # the label advances with the sweep: LR and loss
    find_lr(TinyClassifier(), train_dataloaders=loader, num_steps=10, progress=False)
    assert capsys.readouterr() == ("", "")
    with pytest.raises(TypeError, match="`progress`"):
        find_lr(TinyClassifier(), train_dataloaders=loader, progress="yes")  # type: ignore[arg-type]


def test_the_lr_range_test_callback_follows_the_trainers_progress_bar(terminal, capsys) -> None:
    finder = LRRangeTest(num_steps=10, stop=True, print_result=False)
    fast_trainer(max_steps=1, callbacks=[finder]).fit(TinyClassifier(), random_classification_loader())
    assert finder.result is not None and "find_lr" not in capsys.readouterr().err  # enable_progress_bar=False
    forced = LRRangeTest(num_steps=10, stop=True, print_result=False, progress=True)
    fast_trainer(max_steps=1, callbacks=[forced]).fit(TinyClassifier(), random_classification_loader())
    assert "find_lr" in capsys.readouterr().err


def test_speed_tune_draws_its_progress_and_nothing_when_off(terminal, capsys) -> None:
    loader = random_classification_loader()
    speed_tune(TinyClassifier(), train_dataloaders=loader, options=["pin_memory"], **FAST)
    drawn = capsys.readouterr().err
    # pin_memory skips on a CPU-only machine: the baseline is the one run
    assert "speed_tune" in drawn and "1/1" in drawn and "baseline (repeat 1/1)" in drawn
    speed_tune(TinyClassifier(), train_dataloaders=loader, options=["pin_memory"], progress=False, **FAST)
    assert "speed_tune" not in capsys.readouterr().err
