"""The training demo, run as the command (accuracy, summary, output before training; its help:
tests/test_cli_help.py), its argument errors, where it says the logs are."""

import os
import re
import subprocess
import sys

import pytest

from lightning_recipes.demos.training import build_parser, run_demo


def test_demo_command_reaches_accuracy_and_prints_summary(tmp_path):
    """``python -m lightning_recipes demo``, 5 epochs: val accuracy over target, summary, plots, output."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "80"}  # stdout and stderr in the order written
    command = ["-m", "lightning_recipes", "demo", "--output-dir", str(tmp_path)]
    command += ["--epochs", "5", "--threads", "1"]
    output = {"stdout": subprocess.PIPE, "stderr": subprocess.STDOUT, "text": True}
    result = subprocess.run([sys.executable, *command], **output, timeout=300, env=env)
    output = result.stdout
    assert result.returncode == 0, output
    accuracy = re.search(r"final val accuracy\s+: (\d\.\d+)", output)
    steps = re.search(r"optimizer steps\s+: (\d+) in", output)
    assert accuracy and float(accuracy.group(1)) >= 0.95, output[-2000:]
    assert steps and int(steps.group(1)) > 0, output[-2000:]
    assert (tmp_path / "demo_history.png").exists()
    assert "effective batch size : 64" in output
    assert "on 1 torch thread(s)" in output
    # issue #26: with every check passing, at most 25 lines before training starts (the optimizer recipe's
    # one-line summary is the first thing the fit prints)
    assert "Preflight OK" in output and "preflight            : 15 pass, 2 skip\n" in output
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("lightning_recipes: AdamW"))
    assert start + 1 <= 25, "\n".join(lines[: start + 1])


@pytest.mark.parametrize("flag", ["--epochs", "--threads"])
def test_demo_rejects_a_count_below_one(tmp_path, flag):
    args = build_parser().parse_args(["--output-dir", str(tmp_path), flag, "0"])
    with pytest.raises(ValueError, match=f"`{flag}` must be >= 1, got 0"):
        run_demo(args)


@pytest.mark.slow  # starting a wandb run (offline) takes 5-20 s
def test_the_summary_names_the_files_each_logger_wrote(tmp_path):
    """Issue 32: `demo --logger wandb-offline` names the offline run folder, not a `metrics.csv`."""
    from lightning.pytorch.loggers import CSVLogger, WandbLogger

    from lightning_recipes.callbacks import RunManifest
    from lightning_recipes.demos.training import _where_the_logs_are

    manifest = RunManifest()
    wandb = WandbLogger(project="p", save_dir=str(tmp_path), offline=True)
    try:
        text = _where_the_logs_are(wandb, manifest)
    finally:
        wandb.experiment.finish()
    assert "metrics.csv" not in text and "wandb sync" in text
    run_dir = text.split(" (")[0]
    assert os.path.isdir(run_dir) and os.path.basename(run_dir).startswith("offline-run-"), text
    assert "metrics.csv" in _where_the_logs_are(CSVLogger(str(tmp_path)), manifest)
