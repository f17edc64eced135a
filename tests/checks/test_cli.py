"""``lightning-recipes preflight`` as users run it: a real subprocess, LightningCLI-style arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from lightning_recipes.checks.cli import main

REPO = Path(__file__).resolve().parents[2]


def _run(*args: str, tmp_path: Path) -> subprocess.CompletedProcess:
    # one OpenMP thread: two per process oversubscribe a shared 2-core machine (see conftest.py)
    env = {
        **os.environ,
        "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}",
        "COLUMNS": "200",
        "OMP_NUM_THREADS": "1",
    }
    return subprocess.run(
        [sys.executable, "-m", "lightning_recipes", "preflight", *args],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=tmp_path,
    )


def test_cli_demo_cnn_passes_and_writes_json(tmp_path):
    out = tmp_path / "report.json"
    result = _run(
        "--model",
        "lightning_recipes.demo.DigitsCNN",
        "--data",
        "lightning_recipes.data.DigitsDataModule",
        "--model.init_args.width",
        "8",
        "--data.batch_size",
        "32",
        "--json",
        str(out),
        tmp_path=tmp_path,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Preflight OK" in result.stdout and "input_independence" in result.stdout
    data = json.loads(out.read_text())
    assert data["ok"] and len(data["results"]) == 6


def test_cli_broken_model_exits_non_zero(tmp_path):
    (tmp_path / "user_models.py").write_text(
        textwrap.dedent(
            """
            from torch.nn import functional as F
            from lightning_recipes.testing import TinyClassifier

            class ClampedDigits(TinyClassifier):
                def loss(self, logits, target):
                    return F.cross_entropy(logits, target).clamp(max=1.0)
            """
        )
    )
    result = _run(
        "--model=user_models.ClampedDigits",
        "--model.in_features=64",
        "--model.num_classes=10",
        "--data=lightning_recipes.data.DigitsDataModule",
        "--data.flatten=true",
        "--checks=[grad_flow, overfit_batch]",
        tmp_path=tmp_path,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "Preflight FAILED" in result.stdout and "no parameter gets any gradient" in result.stdout


def test_cli_bad_arguments_exit_2(capsys):
    assert main(["--model", "lightning_recipes.demo.DigitsCNN", "--checks", "[nope]"]) == 2
    assert "unknown check(s) ['nope']" in capsys.readouterr().err
    assert main(["--model", "no.such.Model"]) == 2
