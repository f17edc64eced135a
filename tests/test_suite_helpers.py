"""The suite's own machinery: the floor-pass selection and its tripwire, the timing tests' virtual clocks."""

from __future__ import annotations

import pytest
from lightning.pytorch import Trainer

from lightning_recipes.callbacks import input_pipeline_monitor
from lightning_recipes.testing import TinyClassifier
from tests.helpers import speed
from tests.helpers.floor import END_TO_END_PATHS, LIGHTNING_FREE, lightning_tripwire
from tests.helpers.health_gallery import StallClock
from tests.helpers.token_tasks import TokenTask


def test_the_tripwire_records_every_lightning_entry_point_and_nothing_else() -> None:
    with pytest.MonkeyPatch.context() as patch, lightning_tripwire(patch) as built:
        assert built == []
        Trainer(logger=False, enable_progress_bar=False, enable_checkpointing=False)
        TinyClassifier()
    assert built == ["Trainer", "LightningModule"]
    Trainer(logger=False, enable_progress_bar=False, enable_checkpointing=False)  # restored: not recorded
    assert built == ["Trainer", "LightningModule"]


def test_a_test_file_is_skipped_at_the_floor_for_one_reason_only() -> None:
    assert not set(LIGHTNING_FREE) & set(END_TO_END_PATHS)
    assert all(reason for reason in {**LIGHTNING_FREE, **END_TO_END_PATHS}.values())


def test_virtual_time_drives_the_step_timer_and_the_sleepy_model(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = speed.virtual_time(monkeypatch)
    start = clock.perf_counter()
    speed.time.sleep(0.25)  # the helper module's `time` is the clock now: no real sleep
    assert clock.perf_counter() - start == pytest.approx(0.25)


def test_stall_clock_counts_stalls_only_while_installed() -> None:
    clock = StallClock()
    real_time = input_pipeline_monitor.time
    with clock.installed():
        assert input_pipeline_monitor.time is clock
        before = clock.perf_counter()
        clock.sleep(5.0)  # counted, not slept
        assert clock.perf_counter() - before >= 5.0
    assert input_pipeline_monitor.time is real_time and not clock.virtual


def test_token_task_rejects_an_unknown_task_naming_it() -> None:
    with pytest.raises(ValueError, match="`task` must be one of"):
        TokenTask(4, seed=0, task="and")
