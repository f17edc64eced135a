"""Our callbacks from LightningCLI YAML: the full class path picks ours; the short name `EarlyStopping` is
ambiguous with Lightning's and refused (the README says to write the full path)."""

from __future__ import annotations

from pathlib import Path

import pytest

import lightning_recipes
from lightning_recipes.callbacks import EarlyStopping, GradNormMonitor


def _cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, callbacks_yaml: str):
    from lightning.pytorch.cli import LightningCLI

    monkeypatch.setattr("sys.argv", ["train.py"])
    config = tmp_path / "config.yaml"
    config.write_text(
        "model:\n"
        "  class_path: lightning_recipes.testing.TinyClassifier\n"
        "trainer:\n"
        "  accelerator: cpu\n"
        "  max_steps: 1\n"
        "  logger: false\n"
        "  enable_checkpointing: false\n"
        "  enable_progress_bar: false\n"
        f"  default_root_dir: {tmp_path}\n"
        "  callbacks:\n" + callbacks_yaml
    )
    return LightningCLI(args=["--config", str(config)], run=False, save_config_callback=None)


def test_full_class_path_selects_our_early_stopping(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cli = _cli(
        tmp_path,
        monkeypatch,
        "    - class_path: lightning_recipes.callbacks.EarlyStopping\n"
        "      init_args: {monitor: train_loss, patience: 2, restore_best_weights: true}\n"
        "    - class_path: lightning_recipes.GradNormMonitor\n",
    )
    ours = [c for c in cli.trainer.callbacks if isinstance(c, EarlyStopping)]
    assert len(ours) == 1 and ours[0].restore_best_weights and ours[0].patience == 2
    assert any(isinstance(c, GradNormMonitor) for c in cli.trainer.callbacks)
    assert lightning_recipes.EarlyStopping is EarlyStopping


def test_short_name_early_stopping_is_refused_as_ambiguous(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the README warns about: the bare name matches Lightning's class and ours, and LightningCLI refuses
    it."""
    with pytest.raises((ValueError, SystemExit)) as error:
        _cli(
            tmp_path, monkeypatch, "    - class_path: EarlyStopping\n      init_args: {monitor: train_loss}\n"
        )
    said = str(error.value) + capsys.readouterr().err
    assert "Multiple subclasses with name EarlyStopping" in said and "lightning_recipes.EarlyStopping" in said
