"""``lightning-recipes tune``: the run's accelerator, precision and clipping reach the sweep, from flags or
from the LightningCLI config that ``preflight --config`` accepts."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any, ClassVar

import pytest
import torch

from lightning_recipes.testing import DigitsCNN
from lightning_recipes.tune.cli import main


class RecordingCNN(DigitsCNN):
    """Records, in every sweep step, the autocast state, the parameters' device and the clipping settings."""

    steps: ClassVar[list[tuple[bool, torch.dtype, str]]] = []
    clipping: ClassVar[list[tuple[Any, Any]]] = []

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        device = next(self.parameters()).device
        RecordingCNN.steps.append(
            (torch.is_autocast_enabled(device.type), torch.get_autocast_dtype(device.type), device.type)
        )
        return super().training_step(batch, batch_idx)

    def configure_gradient_clipping(
        self, optimizer: Any, gradient_clip_val: Any = None, gradient_clip_algorithm: Any = None
    ) -> None:
        RecordingCNN.clipping.append((gradient_clip_val, gradient_clip_algorithm))
        super().configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)


MODEL = f"{RecordingCNN.__module__}.RecordingCNN"
DATA = "lightning_recipes.data.DigitsDataModule"


def _tune(*args: str) -> tuple[int, str]:
    RecordingCNN.steps.clear()
    RecordingCNN.clipping.clear()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["--num_steps", "30", "--max_lr", "1.0", *args])
    return code, err.getvalue()


def test_accelerator_precision_and_clipping_flags_reach_the_sweep():
    """Before: `tune` had no --accelerator / --precision (exit 2 on the flag) and swept in fp32 unclipped."""
    code, err = _tune(
        "--model", MODEL, "--model.width", "4", "--data", DATA, "--data.batch_size", "32",
        "--accelerator", "cpu", "--precision", "bf16-mixed",
        "--gradient_clip_val", "0.5", "--gradient_clip_algorithm", "value",
    )  # fmt: skip
    assert code == 0, err[-2000:]
    assert len(RecordingCNN.steps) >= 12
    assert all(step == (True, torch.bfloat16, "cpu") for step in RecordingCNN.steps[-12:])
    assert {str(v) for v in RecordingCNN.clipping} == {"(0.5, <GradClipAlgorithmType.VALUE: 'value'>)"}


def test_a_bad_accelerator_or_precision_is_the_trainers_error_exit_2():
    code, err = _tune("--model", MODEL, "--model.width", "4", "--data", DATA, "--accelerator", "quantum")
    assert code == 2 and "accelerator='quantum'" in err and not RecordingCNN.steps
    code, err = _tune("--model", MODEL, "--model.width", "4", "--data", DATA, "--precision", "7-bit")
    assert code == 2 and "7-bit" in err and not RecordingCNN.steps


def _lightning_cli_config(args: str) -> str:
    """The YAML a user's LightningCLI writes with ``fit --print_config`` (a real one, not hand-written)."""
    from lightning.pytorch.cli import LightningCLI

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.suppress(SystemExit):
        LightningCLI(args=["fit", *args.split(), "--print_config"])
    return buffer.getvalue()


def test_tune_accepts_the_lightning_cli_config_preflight_accepts(tmp_path: Path):
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


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_accelerator_gpu_sweeps_on_the_gpu():
    code, err = _tune("--model", MODEL, "--model.width", "4", "--data", DATA, "--accelerator", "gpu")
    assert code == 0, err[-2000:]
    assert {step[2] for step in RecordingCNN.steps} == {"cuda"}
