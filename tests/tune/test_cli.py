"""``lightning-recipes tune`` end to end, in a subprocess, on a real model and datamodule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml


def test_tune_prints_the_suggestion_and_yaml_and_saves_the_plot(tmp_path: Path):
    plot = tmp_path / "lr.png"
    command = [
        sys.executable, "-m", "lightning_recipes", "tune",
        "--model", "lightning_recipes.testing.DigitsCNN", "--model.width", "4",
        "--data", "lightning_recipes.data.DigitsDataModule",
        "--num_steps", "40", "--yaml_key", "model.init_args.lr", "--plot", str(plot),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    fragment = done.stdout.split("Paste into your LightningCLI config:\n", 1)[1].split("curve saved")[0]
    lr = yaml.safe_load(fragment)["model"]["init_args"]["lr"]
    assert 1e-5 < lr < 1.0 and "AdamW" in done.stdout
    assert plot.stat().st_size > 1000


def test_bad_arguments_exit_2_with_the_reason(tmp_path: Path):
    command = [
        sys.executable, "-m", "lightning_recipes", "tune",
        "--model", "lightning_recipes.testing.DigitsCNN", "--data", "lightning_recipes.data.DigitsDataModule",
        "--num_steps", "3",
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 2 and "`num_steps` must be" in done.stderr
