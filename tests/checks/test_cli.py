"""``lightning-recipes preflight`` as users run it: LightningCLI-style arguments, a LightningCLI config, the
report on stdout and as JSON, the exit code."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import textwrap
from pathlib import Path

import pytest

from lightning_recipes.checks import CHECKS
from lightning_recipes.cli import main

DIGITS = ["--model=lightning_recipes.testing.DigitsCNN", "--data=lightning_recipes.data.DigitsDataModule"]
TINY = [
    "--model=lightning_recipes.testing.TinyClassifier", "--model.in_features=64", "--model.num_classes=10",
    "--data=lightning_recipes.data.DigitsDataModule", "--data.flatten=true",
]  # fmt: skip


def _preflight(*args: str) -> int:
    return main(["preflight", *args])


def _report(tmp_path: Path, *args: str) -> tuple[int, dict]:
    """The exit code and the JSON report of ``preflight *args``."""
    out = tmp_path / "report.json"
    code = _preflight(*args, "--json", str(out))
    return code, json.loads(out.read_text()) if out.exists() else {}


def test_the_demo_cnn_passes_every_check_and_writes_json(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, data = _report(tmp_path, *DIGITS, "--model.init_args.width", "8", "--data.batch_size", "32")
    captured = capsys.readouterr()
    assert code == 0 and "Preflight OK" in captured.out and "input_independence" in captured.out
    assert data["ok"] and [r["name"] for r in data["results"]] == list(CHECKS)
    assert all(isinstance(r["seconds"], float) for r in data["results"])
    # issue #26: one line per check on stdout; the progress line is drawn only on a terminal
    assert len(captured.out.strip().splitlines()) == 1 + len(CHECKS), captured.out
    assert "preflight [" not in captured.err and "running (budget" not in captured.err


def test_time_budget_and_progress_flags(capsys, caplog):
    args = [*TINY, "--checks=[init_loss]"]
    with caplog.at_level(logging.DEBUG, logger="lightning.pytorch"):  # issue #26: progress lines are DEBUG
        assert _preflight(*args, "--time_budget=2.5") == 0
    assert "preflight [1/1] init_loss: running (budget 2.5 s)" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="lightning.pytorch"):
        assert _preflight(*args, "--time_budget=null", "--progress=false") == 0
    assert "Preflight OK" in capsys.readouterr().out and "preflight [" not in caplog.text


@pytest.fixture
def user_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def write(text: str) -> None:
        (tmp_path / "cli_checks_models.py").write_text(textwrap.dedent(text))

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "cli_checks_models", raising=False)
    return write


def test_a_broken_model_exits_1(user_module, capsys):
    user_module(
        """
        from torch.nn import functional as F
        from lightning_recipes.testing import TinyClassifier

        class ClampedDigits(TinyClassifier):
            def loss(self, logits, target):
                return F.cross_entropy(logits, target).clamp(max=1.0)
        """
    )
    args = [*TINY, "--model=cli_checks_models.ClampedDigits", "--checks=[grad_flow, overfit_batch]"]
    assert _preflight(*args) == 1
    out = capsys.readouterr().out
    assert "Preflight FAILED" in out and "no parameter gets any gradient" in out


def _lightning_cli_config(*args: str) -> str:
    """The YAML a user's LightningCLI writes with ``fit --print_config`` (a real one, not hand-written)."""
    from lightning.pytorch.cli import LightningCLI

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        LightningCLI(*args[:-1], args=["fit", *args[-1].split(), "--print_config"])  # type: ignore[arg-type]
    return buffer.getvalue()


def test_a_lightning_cli_config_in_subclass_mode(tmp_path, capsys):
    text = _lightning_cli_config(
        " ".join(DIGITS) + " --model.width=8 --data.batch_size=32 --trainer.max_epochs=3"
    )
    assert "trainer:" in text and "class_path: lightning_recipes.testing.DigitsCNN" in text
    (tmp_path / "config.yaml").write_text(text)
    code, data = _report(tmp_path, "--config", str(tmp_path / "config.yaml"), "--checks=[data, init_loss]")
    assert code == 0, capsys.readouterr()
    assert [r["name"] for r in data["results"]] == ["data", "init_loss"] and data["ok"]
    assert data["results"][1]["details"]["num_classes"] == 10


def test_a_lightning_cli_config_of_fixed_classes_with_the_classes_given(tmp_path, capsys):
    from lightning_recipes.data import DigitsDataModule
    from lightning_recipes.testing import DigitsCNN

    text = _lightning_cli_config(DigitsCNN, DigitsDataModule, "--model.width=8 --data.batch_size=32")
    assert "class_path" not in text.split("model:")[1].split("data:")[0]  # only the init arguments
    (tmp_path / "config.yaml").write_text(text)
    code, data = _report(tmp_path, f"--config={tmp_path / 'config.yaml'}", *DIGITS, "--checks=[init_loss]")
    assert code == 0, capsys.readouterr()
    assert data["results"][0]["status"] == "pass"


def test_target_and_input_keys_reach_the_checks(user_module, tmp_path, capsys):
    user_module(
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
    args = ["--model=cli_checks_models.DictClassifier", "--data=cli_checks_models.DictData"]
    # no keys: the batch entries the cross_entropy call consumes are found by tracing the loss call
    for keys in ([], ["--input_key=feats", "--target_key=cls"]):
        code, report = _report(tmp_path, *args, "--checks=[init_loss, data]", *keys)
        assert code == 0, capsys.readouterr()
        init_loss, data = report["results"]
        assert init_loss["status"] == "pass" and init_loss["details"]["num_classes"] == 4
        assert "Not checked: labels" not in data["message"] and data["details"]["batches"] >= 1
