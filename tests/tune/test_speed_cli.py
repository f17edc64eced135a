"""``lightning-recipes tune --speed`` end to end, in a subprocess, on a real model and datamodule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

BASE = [
    sys.executable, "-m", "lightning_recipes", "tune", "--lr", "false", "--speed", "true",
    "--model", "lightning_recipes.testing.DigitsCNN", "--model.width", "4",
    "--data", "lightning_recipes.data.DigitsDataModule", "--measure_steps", "2", "--repeats", "1",
]  # fmt: skip


def test_tune_speed_prints_the_table_and_yaml(tmp_path: Path):
    command = [*BASE, "--speed_options", "[channels_last, pin_memory]"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "channels_last" in done.stdout and "pin_memory" in done.stdout and "baseline" in done.stdout
    fragment = done.stdout.split("Speed: paste into your LightningCLI config:\n", 1)[1]
    assert "trainer" in yaml.safe_load(fragment)


def test_tune_speed_unknown_option_exits_2_with_the_reason(tmp_path: Path):
    command = [*BASE, "--speed_options", "[turbo]"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2 and "`options` must name options" in done.stderr, done.stderr[-2000:]
