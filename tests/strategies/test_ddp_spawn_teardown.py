"""`recipes_ddp_spawn`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lightning_recipes.strategies import PRESETS, RecipesDDPStrategy, preset

SCRIPT = Path(__file__).parent / "scripts" / "ddp_spawn_fits.py"


def _run(runs: int, kind: str, timeout: int) -> subprocess.CompletedProcess[str]:
    prefixes = ("MASTER_", "LOCAL_RANK", "RANK", "WORLD_SIZE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    command = [sys.executable, str(SCRIPT), str(runs), kind]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.slow  # starts its own processes: over 20 s on a 2-core CPU
def test_spawned_workers_exit_with_the_process_group_destroyed() -> None:
    # gloo's teardown abort needs a group alive at shutdown: checking none is catches the cause in one fit
    proc = _run(1, "recipes", timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "failures 0 of 1" in proc.stdout
    assert proc.stdout.count("worker exit: process group alive=False") == 2, proc.stdout
    assert "alive=True" not in proc.stdout


def test_ddp_presets_build_the_protected_strategy() -> None:
    for name in ("ddp", "ddp_spawn", "ddp_static_graph"):
        assert isinstance(preset(name), RecipesDDPStrategy)
    assert PRESETS["ddp_spawn"].defaults["start_method"] == "spawn"
