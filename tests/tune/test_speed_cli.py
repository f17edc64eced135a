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


def test_tune_speed_weighs_one_off_costs_against_the_runs_length_from_trainer_flags(tmp_path: Path):
    """The run length reaches speed_tune (before: the CLI always planned one epoch, whatever the run)."""
    command = [*BASE, "--speed_options", "[channels_last]", "--max_steps", "7"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "a run of 7 steps" in done.stdout and "max_steps / max_epochs" in done.stdout, done.stdout[-2000:]


def test_tune_speed_reads_the_run_length_from_a_lightning_cli_config(tmp_path: Path):
    config = tmp_path / "config.yaml"
    config.write_text(
        "trainer:\n  max_steps: 9\n  max_epochs: 50\n  log_every_n_steps: 5\n"
        "model:\n  class_path: lightning_recipes.testing.DigitsCNN\n  init_args:\n    width: 4\n"
        "data:\n  class_path: lightning_recipes.data.DigitsDataModule\n"
    )
    command = [
        sys.executable, "-m", "lightning_recipes", "tune", "--config", str(config), "--lr", "false",
        "--speed", "true", "--speed_options", "[channels_last]", "--measure_steps", "2", "--repeats", "1",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "a run of 9 steps" in done.stdout, done.stdout[-2000:]
