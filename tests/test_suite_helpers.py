"""The suite's own machinery: the floor-pass selection, the gallery proofs' stamp, the timing tests' virtual
clocks."""

from __future__ import annotations

import pytest

from galleries import proofs as gallery_proofs
from lightning_recipes.callbacks import input_pipeline_monitor
from lightning_recipes.testing.token_tasks import TokenTask
from tests.helpers import speed
from tests.helpers.floor import FLOOR_TESTS, integration_points
from tests.helpers.health_gallery import StallClock


def test_every_integration_point_with_lightning_has_a_test_in_the_floor_pass() -> None:
    points = integration_points()
    assert {"HealthMonitor", "SanityCheck", "RecipesDDPStrategy", "DigitsDataModule"} <= set(points)
    missing = sorted(set(points) - set(FLOOR_TESTS))
    assert not missing, f"name a test that drives each through a Trainer in tests/helpers/floor.py: {missing}"
    assert all(FLOOR_TESTS.values())


def test_the_gallery_proofs_are_current() -> None:
    """The galleries (what their proofs import, the pinned torch) are as when every proof last passed."""
    assert gallery_proofs.stamp() == gallery_proofs.sources_hash(), (
        "the galleries changed since their proofs last passed: run `make gallery-proofs` (it rewrites "
        f"{gallery_proofs.STAMP.relative_to(gallery_proofs.ROOT)} when every proof passes); commit the stamp"
    )


def test_the_gallery_proofs_hash_covers_the_galleries_and_no_product_code() -> None:
    covered = {path.relative_to(gallery_proofs.ROOT).as_posix() for path in gallery_proofs.dependencies()}
    assert set(gallery_proofs.PROOF_MODULES) <= covered
    assert "galleries/preflight/stage/loop_stages.py" in covered
    assert "galleries/health/field/_field_models.py" in covered
    assert "lightning_recipes/testing/trainers.py" in covered  # the gallery's trainer
    product = [path for path in covered if path.startswith("lightning_recipes/") and "/testing/" not in path]
    assert product == []


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
