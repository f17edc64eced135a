"""``lightning-recipes tune`` on a real model and datamodule."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch
import yaml

from lightning_recipes.cli import main
from lightning_recipes.testing import DigitsCNN


class RecordingCNN(DigitsCNN):
    """Records, in every sweep step, the autocast state, the parameters' device and the clipping settings."""

    steps: ClassVar[list[tuple[bool, torch.dtype, str]]] = []
    clipping: ClassVar[list[tuple[Any, Any]]] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        device = next(self.parameters()).device
        autocast = torch.is_autocast_enabled(device.type), torch.get_autocast_dtype(device.type)
        RecordingCNN.steps.append((*autocast, device.type))
        return super().training_step(batch, batch_idx)

    def configure_gradient_clipping(
        self, optimizer: Any, gradient_clip_val: Any = None, gradient_clip_algorithm: Any = None
    ) -> None:
        RecordingCNN.clipping.append((gradient_clip_val, gradient_clip_algorithm))
        super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)


MODEL = f"{RecordingCNN.__module__}.RecordingCNN"
DATA = "lightning_recipes.data.DigitsDataModule"
NET = ["--model", MODEL, "--model.width", "4", "--data", DATA]
SPEED = ["--lr", "false", "--speed", "true", "--measure_steps", "2", "--repeats", "1"]


def _tune(*args: str) -> tuple[int, str]:
    RecordingCNN.steps.clear()
    RecordingCNN.clipping.clear()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["tune", "--num_steps", "30", "--max_lr", "1.0", *args])
    return code, err.getvalue()


def test_tune_prints_the_suggestion_and_yaml_and_saves_the_plot(tmp_path: Path, capsys) -> None:
    plot = tmp_path / "lr.png"
    code, err = _tune(*NET, "--num_steps", "40", "--yaml_key", "model.init_args.lr", "--plot", str(plot))
    out = capsys.readouterr().out
    assert code == 0, err[-2000:]
    fragment = out.split("Paste into your LightningCLI config:\n", 1)[1].split("curve saved")[0]
    assert 1e-5 < yaml.safe_load(fragment)["model"]["init_args"]["lr"] < 1.0 and "AdamW" in out
    assert plot.stat().st_size > 1000


def test_accelerator_precision_and_clipping_flags_reach_the_sweep() -> None:
    """Before: `tune` had no --accelerator / --precision (exit 2 on the flag) and swept in fp32 unclipped."""
    code, err = _tune(
        *NET, "--data.batch_size", "32", "--accelerator", "cpu", "--precision", "bf16-mixed",
        "--gradient_clip_val", "0.5", "--gradient_clip_algorithm", "value",
    )  # fmt: skip
    assert code == 0, err[-2000:]
    assert len(RecordingCNN.steps) >= 12
    assert all(step == (True, torch.bfloat16, "cpu") for step in RecordingCNN.steps[-12:])
    assert {str(v) for v in RecordingCNN.clipping} == {"(0.5, <GradClipAlgorithmType.VALUE: 'value'>)"}


@pytest.mark.parametrize(("flag", "value"), [("--accelerator", "quantum"), ("--precision", "7-bit")])
def test_a_bad_accelerator_or_precision_is_the_trainers_error_exit_2(flag: str, value: str) -> None:
    code, err = _tune(*NET, flag, value)
    assert code == 2 and value in err and not RecordingCNN.steps


def _lightning_cli_config(args: str) -> str:
    """The YAML a user's LightningCLI writes with ``fit --print_config`` (a real one, not hand-written)."""
    from lightning.pytorch.cli import LightningCLI

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        LightningCLI(args=["fit", *args.split(), "--print_config"])
    return buffer.getvalue()


def test_tune_accepts_the_lightning_cli_config_preflight_accepts(tmp_path: Path) -> None:
    """Before: `tune --config` refused the file (`trainer`, `seed_everything`, ... are no tune keys)."""
    text = _lightning_cli_config(
        f"--model={MODEL} --model.width=4 --data={DATA} --data.batch_size=32 --trainer.max_epochs=3 "
        "--trainer.accelerator=cpu --trainer.precision=bf16-mixed --trainer.gradient_clip_val=0.25"
    )
    assert "trainer:" in text and "seed_everything" in text and "precision: bf16-mixed" in text
    config = tmp_path / "config.yaml"
    config.write_text(text)
    code, err = _tune("--config", str(config))
    assert code == 0, err[-2000:]
    assert all(step == (True, torch.bfloat16, "cpu") for step in RecordingCNN.steps[-12:])
    assert {v[0] for v in RecordingCNN.clipping} == {0.25}
    code, err = _tune("--config", str(config), "--precision", "32-true")  # a flag after it wins
    assert code == 0 and not any(step[0] for step in RecordingCNN.steps[-12:])


def test_tune_speed_prints_the_table_and_yaml_for_the_runs_length(capsys) -> None:
    """The run length reaches speed_tune (before: the CLI always planned one epoch, whatever the run)."""
    code, err = _tune(*NET, *SPEED, "--speed_options", "[channels_last, pin_memory]", "--max_steps", "7")
    out = capsys.readouterr().out
    assert code == 0, err[-2000:]
    assert "channels_last" in out and "pin_memory" in out and "baseline" in out
    assert "a run of 7 steps" in out and "max_steps / max_epochs" in out, out[-2000:]
    assert "trainer" in yaml.safe_load(out.split("Speed: paste into your LightningCLI config:\n", 1)[1])


def test_tune_speed_reads_the_run_length_from_a_lightning_cli_config(tmp_path: Path, capsys) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "trainer:\n  max_steps: 9\n  max_epochs: 50\n  log_every_n_steps: 5\n"
        "model:\n  class_path: lightning_recipes.testing.DigitsCNN\n  init_args:\n    width: 4\n"
        f"data:\n  class_path: {DATA}\n"
    )
    code, err = _tune("--config", str(config), *SPEED, "--speed_options", "[channels_last]")
    assert code == 0, err[-2000:]
    assert "a run of 9 steps" in capsys.readouterr().out


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_accelerator_gpu_sweeps_on_the_gpu() -> None:
    code, err = _tune(*NET, "--accelerator", "gpu")
    assert code == 0, err[-2000:]
    assert {step[2] for step in RecordingCNN.steps} == {"cuda"}
