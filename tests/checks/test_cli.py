"""``lightning-recipes preflight`` as users run it: a real subprocess, LightningCLI-style arguments."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from lightning_recipes.checks import CHECKS
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
        "lightning_recipes.testing.DigitsCNN",
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
    assert data["ok"] and len(data["results"]) == len(CHECKS)
    # issue #26: one line per check on stdout; the progress line is drawn only on a terminal, so a pipe gets
    # none of it (the per-check lines are DEBUG log records); seconds in the JSON
    report_lines = result.stdout.strip().splitlines()
    assert len(report_lines) == 1 + len(CHECKS), result.stdout
    assert "preflight [" not in result.stderr and "running (budget" not in result.stderr
    assert all(isinstance(r["seconds"], float) for r in data["results"])


def test_cli_time_budget_and_progress_flags(capsys, caplog):
    args = [
        "--model=lightning_recipes.testing.TinyClassifier",
        "--data=lightning_recipes.data.DigitsDataModule",
        "--model.in_features=64",
        "--model.num_classes=10",
        "--data.flatten=true",
        "--checks=[init_loss]",
    ]
    with caplog.at_level(logging.DEBUG, logger="lightning.pytorch"):  # issue #26: progress lines are DEBUG
        assert main([*args, "--time_budget=2.5"]) == 0
    assert "preflight [1/1] init_loss: running (budget 2.5 s)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="lightning.pytorch"):
        assert main([*args, "--time_budget=null", "--progress=false"]) == 0
    assert "Preflight OK" in capsys.readouterr().out and "preflight [" not in caplog.text


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
    assert main(["--model", "lightning_recipes.testing.DigitsCNN", "--checks", "[nope]"]) == 2
    assert "unknown check(s) ['nope']" in capsys.readouterr().err
    assert main(["--model", "no.such.Model"]) == 2
    assert main(["--model", "lightning_recipes.testing.DigitsCNN", "--time_budget", "0"]) == 2
    assert (
        "`--time_budget` must be a number of seconds > 0 or null (unlimited), got 0.0"
        in capsys.readouterr().err
    )


# ---------------------------------------------------------------- issue 12, item 12


def _lightning_cli_config(*args: str) -> str:
    """The YAML a user's LightningCLI writes with ``fit --print_config`` (a real one, not hand-written)."""
    import contextlib
    import io

    from lightning.pytorch.cli import LightningCLI

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        LightningCLI(*args[:-1], args=["fit", *args[-1].split(), "--print_config"])  # type: ignore[arg-type]
    return buffer.getvalue()


def test_cli_accepts_a_lightning_cli_config_in_subclass_mode(tmp_path, capsys):
    text = _lightning_cli_config(
        "--model=lightning_recipes.testing.DigitsCNN --model.width=8 "
        "--data=lightning_recipes.data.DigitsDataModule --data.batch_size=32 --trainer.max_epochs=3"
    )
    assert "trainer:" in text and "class_path: lightning_recipes.testing.DigitsCNN" in text
    (tmp_path / "config.yaml").write_text(text)
    out = tmp_path / "report.json"
    code = main(["--config", str(tmp_path / "config.yaml"), "--checks=[data, init_loss]", "--json", str(out)])
    assert code == 0, capsys.readouterr()
    data = json.loads(out.read_text())
    assert [r["name"] for r in data["results"]] == ["data", "init_loss"] and data["ok"]
    assert data["results"][1]["details"]["num_classes"] == 10


def test_cli_accepts_a_lightning_cli_config_of_fixed_classes_with_the_class_given(tmp_path, capsys):
    from lightning_recipes.data import DigitsDataModule
    from lightning_recipes.testing import DigitsCNN

    text = _lightning_cli_config(DigitsCNN, DigitsDataModule, "--model.width=8 --data.batch_size=32")
    assert "class_path" not in text.split("model:")[1].split("data:")[0]  # only the init arguments
    (tmp_path / "config.yaml").write_text(text)
    config = str(tmp_path / "config.yaml")
    assert main([f"--config={config}", "--checks=[init_loss]"]) == 2
    err = capsys.readouterr().err
    assert (
        "the `model` section of" in err and "has no `class_path`" in err and "`--model my_pkg.MyClass`" in err
    )
    out = tmp_path / "report.json"
    args = [
        "--model",
        "lightning_recipes.testing.DigitsCNN",
        "--data",
        "lightning_recipes.data.DigitsDataModule",
    ]
    code = main([f"--config={config}", *args, "--checks=[init_loss]", "--json", str(out)])
    assert code == 0, capsys.readouterr()
    assert json.loads(out.read_text())["results"][0]["status"] == "pass"


def test_cli_target_and_input_keys_reach_the_checks(tmp_path, capsys):
    (tmp_path / "dict_models.py").write_text(
        textwrap.dedent(
            """
            import lightning.pytorch as pl
            import torch
            from torch.nn import functional as F
            from torch.utils.data import DataLoader

            from lightning_recipes.testing import TinyClassifier

            class DictData(pl.LightningDataModule):
                def train_dataloader(self):
                    g = torch.Generator().manual_seed(0)
                    rows = [{"feats": torch.randn(16, generator=g), "cls": int(i % 4)} for i in range(64)]
                    return DataLoader(rows, batch_size=16)

            class DictClassifier(TinyClassifier):
                def training_step(self, batch, batch_idx):
                    return F.cross_entropy(self(batch["feats"]), batch["cls"])
            """
        )
    )
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        out = tmp_path / "report.json"
        args = [
            "--model=dict_models.DictClassifier", "--data=dict_models.DictData", "--checks=[init_loss, data]"
        ]  # fmt: skip
        assert main([*args, "--json", str(out)]) == 0
        init_loss, data = json.loads(out.read_text())["results"]
        # no keys: the batch entries the cross_entropy call consumes are found by tracing the loss call
        assert init_loss["status"] == "pass" and init_loss["details"]["num_classes"] == 4
        assert "Not checked: labels" not in data["message"] and data["details"]["batches"] >= 1
        code = main([*args, "--input_key=feats", "--target_key=cls", "--json", str(out)])
        assert code == 0, capsys.readouterr()
        init_loss, data = json.loads(out.read_text())["results"]
        assert init_loss["status"] == "pass" and init_loss["details"]["num_classes"] == 4
        assert "Not checked: labels" not in data["message"] and data["details"]["batches"] >= 1
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("dict_models", None)


def test_console_script_imports_modules_from_the_current_directory_without_pythonpath(tmp_path):
    work, bin_dir = tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_dir.mkdir()
    (work / "my_pkg.py").write_text(
        "from lightning_recipes.testing import TinyClassifier\n\nclass MyModel(TinyClassifier):\n    pass\n"
    )
    # What pip writes for `lightning-recipes` (sys.path[0] is the script's folder, not the current directory),
    # with this checkout standing in for the installed package.
    launcher = bin_dir / "lightning-recipes"
    launcher.write_text(
        f"import sys\nsys.path.insert(1, {str(REPO)!r})\nfrom lightning_recipes.cli import main\n"
        "sys.exit(main())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(COLUMNS="200", OMP_NUM_THREADS="1")
    result = subprocess.run(
        [
            sys.executable,
            str(launcher),
            "preflight",
            "--model=my_pkg.MyModel",
            "--model.in_features=64",
            "--model.num_classes=10",
            "--data=lightning_recipes.data.DigitsDataModule",
            "--data.flatten=true",
            "--checks=[init_loss]",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
        cwd=work,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Preflight OK" in result.stdout and "init_loss" in result.stdout


def test_the_preflight_command_runs_the_checks_cli():
    from lightning_recipes.cli import COMMANDS

    assert COMMANDS["preflight"][0] == "lightning_recipes.checks.cli:main"
