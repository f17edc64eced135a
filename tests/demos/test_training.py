import os
import subprocess
import sys

import pytest

from lightning_recipes.demos.training import build_parser, run_demo


def test_demo_reaches_accuracy_target(tmp_path):
    args = build_parser().parse_args(["--output-dir", str(tmp_path), "--epochs", "12"])
    summary = run_demo(args)
    assert summary["val_acc"] >= 0.95
    assert summary["optimizer_steps"] > 0
    assert (tmp_path / "demo_history.png").exists()


def test_demo_cli_runs_as_module_and_prints_summary(tmp_path):
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "80"}  # stdout and stderr in the order written
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "lightning_recipes",
            "demo",
            "--output-dir",
            str(tmp_path),
            "--epochs",
            "2",
            "--threads",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=300,
        env=env,
    )
    output = result.stdout
    assert result.returncode == 0, output
    assert "final val accuracy" in output
    assert "effective batch size : 64" in output
    assert "on 1 torch thread(s)" in output
    # issue #26: with every check passing, at most 25 lines before training starts (the optimizer recipe's
    # one-line summary is the first thing the fit prints)
    assert "Preflight OK" in output and "preflight            : 14 pass, 2 skip\n" in output
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("lightning_recipes: AdamW"))
    assert start + 1 <= 25, "\n".join(lines[: start + 1])


def test_demo_help_documents_options():
    result = subprocess.run(
        [sys.executable, "-m", "lightning_recipes", "demo", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0
    for option in (
        "--epochs",
        "--optimizer",
        "--seed",
        "--output_dir",
        "--logger",
        "--threads",
    ):  # snake: issue 26
        assert option in result.stdout


def test_unknown_command_exits_2():
    result = subprocess.run(
        [sys.executable, "-m", "lightning_recipes", "nope"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2
    assert "unknown command 'nope'" in result.stderr


def test_demo_rejects_bad_epochs(tmp_path):
    import pytest

    args = build_parser().parse_args(["--output-dir", str(tmp_path), "--epochs", "0"])
    with pytest.raises(ValueError, match="`--epochs` must be >= 1, got 0"):
        run_demo(args)


def test_demo_rejects_bad_threads(tmp_path):
    args = build_parser().parse_args(["--output-dir", str(tmp_path), "--threads", "0"])
    with pytest.raises(ValueError, match="`--threads` must be >= 1, got 0"):
        run_demo(args)
