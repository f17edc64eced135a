"""`lightning-recipes memory`: the command the issue asks for (its mistakes: tests/test_cli_mistakes.py)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from lightning_recipes.cli import main as cli_main
from lightning_recipes.cli.memory import main
from lightning_recipes.strategies._host import available_host_memory


def test_model_with_lightning_cli_style_init_args(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["memory", "--model", "lightning_recipes.testing.TinyTransformerLM"]
    argv += ["--model.init_args.n_layers", "24", "--model.d_model=1024"]
    argv += ["--devices", "8", "--gpu-memory", "80"]
    assert cli_main(argv) == 0
    out = capsys.readouterr().out
    assert "302,573,632 params" in out  # 24 blocks of width 1024, built on the meta device
    assert "recommended: recipes_ddp" in out


def test_num_params_and_single_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--num-params", "7B", "--strategy", "deepspeed_zero3", "--devices", "8"]) == 0
    out = capsys.readouterr().out
    assert "deepspeed_zero3: 7,000,000,000 params" in out and "master weights" in out


def test_nothing_fits_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--num-params", "70B", "--devices", "1", "--gpu-memory", "24", "--family", "fsdp2"]) == 1
    assert "nothing fits" in capsys.readouterr().out


def test_ladder_view_says_activations_are_not_counted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--num-params", "7B", "--devices", "8"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich wraps long notes
    assert "activations not counted" in out and "sample_batch=" in out


def test_offload_rows_use_this_machines_host_memory_unless_given(capsys: pytest.CaptureFixture[str]) -> None:
    # 7B over 2 GPUs of 24 GB: only fsdp_offload fits the devices; it needs 104.3 GiB of host memory per node
    argv = ["--num-params", "7B", "--devices", "2", "--gpu-memory", "24"]
    available = available_host_memory()
    assert available is not None  # Linux: /proc/meminfo
    fits = available * 0.85 >= 104.31 * 1024**3
    assert main(argv) == (0 if fits else 1)
    out = " ".join(capsys.readouterr().out.split())
    read = re.search(r"checked against ([0-9.]+) GiB of host memory available on this machine", out)
    assert read is not None, out
    assert float(read.group(1)) == pytest.approx(available / 1024**3, abs=1.0)  # free memory moves a little
    assert ("recommended: recipes_fsdp_offload" in out) == fits
    assert main([*argv, "--host-memory", "256"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "recommended: recipes_fsdp_offload" in out and "available on this machine" not in out


def test_api_says_when_offload_rows_were_not_checked() -> None:
    from lightning_recipes.strategies import recommend_strategy

    rec = recommend_strategy(7_000_000_000, devices=2, device_memory_gb=24)
    assert rec.preset == "fsdp_offload"
    assert any("offload rows not checked against host memory" in note for note in rec.notes())
    checked = recommend_strategy(7_000_000_000, devices=2, device_memory_gb=24, host_memory_gb=256)
    assert not any("not checked" in note for note in checked.notes())


@pytest.mark.parametrize("command", ["memory", "preflight"])
def test_the_console_script_imports_the_model_from_the_current_directory(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`memory --model my_pkg.MyModel` from my_pkg.py's folder, no PYTHONPATH (pip's script adds its own)."""
    (tmp_path / "cli_cwd_pkg.py").write_text(
        "from lightning_recipes.testing import TinyClassifier\n\nclass MyModel(TinyClassifier):\n    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "cli_cwd_pkg", raising=False)
    data = ["--data=lightning_recipes.data.DigitsDataModule", "--data.flatten=true", "--checks=init_loss"]
    flags = {
        "memory": ["--gpu-memory", "80"],
        "preflight": ["--model.in_features=64", "--model.num_classes=10", *data],
    }[command]
    assert cli_main([command, "--model", "cli_cwd_pkg.MyModel", *flags]) == 0, capsys.readouterr().err
    assert str(tmp_path) in sys.path


_RECIPE_MODELS = '''
from lightning_recipes import OptimizerRecipe
from lightning_recipes.mixins import AdamWRecipe, LionRecipe
from lightning_recipes.testing import TinyTransformerLM


class LionLM(LionRecipe, TinyTransformerLM):
    """The field report's model: its recipe trains with Lion."""


class RecipeLM(AdamWRecipe, TinyTransformerLM):
    def __init__(self, n_layers: int = 2, recipe: OptimizerRecipe | None = None) -> None:
        super().__init__(n_layers=n_layers)
        self.recipe = recipe
'''


@pytest.mark.parametrize(
    ("model", "flags", "expected"),
    [
        ("LionLM", [], "lion"),  # the model's recipe (LionRecipe's default)
        ("RecipeLM", [], "adamw"),
        ("RecipeLM", ["--model.recipe.optimizer", "lion"], "lion"),
        ("RecipeLM", ["--model.init_args.recipe.optimizer=lamb"], "lamb"),
        ("RecipeLM", ["--model.init_args.recipe", "{optimizer: lion, lr: 3.0e-4}"], "lion"),
        ("RecipeLM", ["--model.recipe.init_args.optimizer", "lion"], "lion"),
        ("LionLM", ["--optimizer", "sgd"], "sgd"),  # an explicit --optimizer wins, with a note
    ],
)
def test_optimizer_state_is_the_models_own_optimizers(
    model: str,
    flags: list[str],
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Field report #22: a Lion model was estimated as AdamW (2 moments) and the recipe optimizer refused."""
    (tmp_path / "recipe_models.py").write_text(_RECIPE_MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    argv = ["--model", f"recipe_models.{model}", *flags, "--strategy", "ddp", "--precision", "32-true"]
    assert main(argv) == 0, capsys.readouterr().err
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert f"params, {expected}, 32-true" in out
    num_params, state = (
        int(re.search(pattern, out).group(1).replace(",", ""))  # type: ignore[union-attr]
        for pattern in (r"ddp: ([0-9,]+) params", r"optimizer state [0-9.]+ ([0-9,]+)")
    )
    tensors = {"lion": 1, "adamw": 2, "lamb": 2, "sgd": 0}[expected]
    step_bytes = 4 if expected in ("adamw", "lamb") else 0
    n_tensors = 2 + 2 * 12 + 4  # embeddings, 2 blocks of 12 tensors, ln_f + head
    assert state == 4 * tensors * num_params + step_bytes * n_tensors
    if flags and flags[0] == "--optimizer":
        assert "counted for sgd as asked, though the model's recipe says lion" in out
