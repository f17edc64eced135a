"""Callbacks from LightningCLI YAML: the full class path picks ours; the short `EarlyStopping` is refused."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import lightning_recipes
from lightning_recipes.callbacks import EarlyStopping, GradNormMonitor


def _cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, callbacks: list[dict]):
    from lightning.pytorch.cli import LightningCLI

    monkeypatch.setattr("sys.argv", ["train.py"])
    config = tmp_path / "config.yaml"
    trainer = {"accelerator": "cpu", "max_steps": 1, "logger": False, "enable_checkpointing": False}
    trainer.update(enable_progress_bar=False, default_root_dir=str(tmp_path), callbacks=callbacks)
    model = {"class_path": "lightning_recipes.testing.TinyClassifier"}
    config.write_text(yaml.safe_dump({"model": model, "trainer": trainer}))
    return LightningCLI(args=["--config", str(config)], run=False, save_config_callback=None)


def test_full_class_path_selects_our_early_stopping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = {"monitor": "train_loss", "patience": 2, "restore_best_weights": True}
    ours = {"class_path": "lightning_recipes.callbacks.EarlyStopping", "init_args": settings}
    cli = _cli(tmp_path, monkeypatch, [ours, {"class_path": "lightning_recipes.GradNormMonitor"}])
    ours = [c for c in cli.trainer.callbacks if isinstance(c, EarlyStopping)]
    assert len(ours) == 1 and ours[0].restore_best_weights and ours[0].patience == 2
    assert any(isinstance(c, GradNormMonitor) for c in cli.trainer.callbacks)
    assert lightning_recipes.EarlyStopping is EarlyStopping


def test_short_name_early_stopping_is_refused_as_ambiguous(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's warning: the bare name matches Lightning's class and ours; LightningCLI refuses it."""
    with pytest.raises((ValueError, SystemExit)) as error:
        _cli(tmp_path, monkeypatch, [{"class_path": "EarlyStopping", "init_args": {"monitor": "train_loss"}}])
    said = str(error.value) + capsys.readouterr().err
    assert "Multiple subclasses with name EarlyStopping" in said and "lightning_recipes.EarlyStopping" in said
