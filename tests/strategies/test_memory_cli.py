"""`lightning-recipes memory`: the command the issue asks for, through the package's own CLI dispatcher."""

from __future__ import annotations

import pytest

from lightning_recipes.cli import main as cli_main
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
