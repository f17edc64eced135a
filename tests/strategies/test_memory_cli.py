"""`lightning-recipes memory`: the command the issue asks for, through the package's own CLI dispatcher."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lightning_recipes.cli import main as cli_main
from lightning_recipes.strategies._host import available_host_memory
from lightning_recipes.strategies.memory_cli import main


def test_model_with_lightning_cli_style_init_args(capsys: pytest.CaptureFixture[str]) -> None:
    argv = [
        "memory",
        "--model",
        "lightning_recipes.testing.TinyTransformerLM",
        "--model.init_args.n_layers",
        "24",
        "--model.d_model=1024",
        "--devices",
        "8",
        "--gpu-memory",
        "80",
    ]
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


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num-params", "lots"], "--num-params must be a count like 7B"),
        (["--model", "NoDots"], "full import path"),
        (["--model", "lightning_recipes.testing.NoSuchModel"], "has no attribute 'NoSuchModel'"),
        (["--num-params", "1B", "--model.n_layers", "2"], "need --model"),
        (
            ["--model", "lightning_recipes.testing.TinyTransformerLM", "--model.bogus", "1"],
            "unexpected keyword",
        ),
    ],
)
def test_bad_arguments_exit_2_with_a_message(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


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


def test_console_script_imports_the_model_from_the_current_directory(tmp_path: Path) -> None:
    """`lightning-recipes memory --model my_pkg.MyModel` run where my_pkg.py lies, no PYTHONPATH."""
    work, bin_dir = tmp_path / "work", tmp_path / "bin"
    work.mkdir()
    bin_dir.mkdir()
    (work / "my_pkg.py").write_text(
        "from lightning_recipes.testing import TinyClassifier\n\nclass MyModel(TinyClassifier):\n    pass\n"
    )
    repo = Path(__file__).resolve().parents[2]
    launcher = bin_dir / "lightning-recipes"  # what pip writes: sys.path[0] is the script's folder
    launcher.write_text(
        f"import sys\nsys.path.insert(1, {str(repo)!r})\nfrom lightning_recipes.cli import main\n"
        "sys.exit(main())\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(COLUMNS="200")
    command = [sys.executable, str(launcher), "memory", "--model", "my_pkg.MyModel", "--gpu-memory", "80"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=240, env=env, cwd=work)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ddp" in result.stdout
