"""The commands' help: answered without torch, the options of the parser that runs, one spelling; -V."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import torch

from lightning_recipes.checks.preflight import CHECKS
from lightning_recipes.checks.preflight import preflight as run_preflight
from lightning_recipes.cli import demo, main, memory, normalise_flags, preflight, tune
from lightning_recipes.demos.training import DEMO_SETTINGS
from lightning_recipes.optim import build_optimizer
from lightning_recipes.optim.names import OPTIMIZERS
from lightning_recipes.recipe import OptimizerRecipe


def _options(parser) -> list[str]:
    return sorted(s for action in parser._actions for s in action.option_strings)


@pytest.mark.parametrize("build", [preflight.build_parser, tune.build_parser])
def test_the_fast_help_lists_the_options_of_the_parser_that_runs(build) -> None:
    assert _options(build(fast=True)) == _options(build())
    fast, real = build(fast=True).format_help(), build().format_help()
    assert fast.split("options:")[0] == real.split("options:")[0]  # usage and description


def _summary(cls: type) -> str:
    return re.sub(r"``|\*\*", "", inspect.getdoc(cls).split("\n\n")[0].replace("\n", " "))


def test_the_check_summaries_read_from_source_are_the_registrys() -> None:
    # read from the checks' source (no torch): the registry's, in its order
    assert preflight.check_summaries() == [(name, _summary(cls)) for name, cls in CHECKS.items()]


def _choices(parser, dest: str) -> list[str]:
    return list(next(action for action in parser._actions if action.dest == dest).choices or ())


def test_every_choice_the_memory_command_offers_runs(capsys: pytest.CaptureFixture[str]) -> None:
    """Every choice of the torch-free parser (_names.py) runs to a verdict, never a usage error (exit 2)."""
    parser = memory.build_parser()
    for flag in ("optimizer", "precision", "family", "strategy"):
        choices = _choices(parser, flag)
        assert choices, flag
        for choice in choices:
            argv = ["--num_params", "10M", "--devices", "2", "--host_memory", "64", f"--{flag}", choice]
            assert memory.main(argv) in (0, 1), (flag, choice, capsys.readouterr().err)


def test_every_optimizer_the_demo_offers_builds_with_its_settings() -> None:
    """``run_demo``'s ``--optimizer`` choices: a recipe of their settings builds the optimizer."""
    model = torch.nn.Linear(2, 2)
    for name in _choices(demo.build_parser(), "optimizer"):
        OptimizerRecipe(optimizer=name, **DEMO_SETTINGS[name])  # type: ignore[arg-type]
        optimizer = build_optimizer(
            name, model.parameters(), **{**OPTIMIZERS[name].defaults, **DEMO_SETTINGS[name]}
        )
        assert optimizer.param_groups[0]["lr"] == DEMO_SETTINGS[name]["lr"]


def test_the_preflight_help_states_the_budget_preflight_runs_with() -> None:
    default = inspect.signature(run_preflight).parameters["time_budget"].default
    assert f"(default: {default:g})" in " ".join(preflight.build_parser(fast=True).format_help().split())


# what a command's help shows beside the common parts
HELP_SHOWS = {
    "demo": ["--epochs", "--optimizer", "--seed", "--output_dir", "--logger", "--threads"],
    "demo --finetune": ["--shots", "--pretrain_epochs", "--finetune_epochs"],
}


@pytest.mark.parametrize("command", ["demo", "demo --finetune", "preflight", "memory", "tune"])
def test_the_help_holds_only_our_text(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*command.split(), "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: lightning-recipes {command} ")
    assert all(option in out for option in HELP_SHOWS.get(command, [])), out
    assert "<class '" not in out and "standardizes" not in out  # no header from a Lightning class docstring
    assert "LIGHTNING_RECIPES_TRACEBACK=1" in out
    flags = re.findall(r"(?<![\w.])--[a-z][\w-]*", out)
    assert flags and not [f for f in flags if "-" in f[2:]], "help spells a flag in kebab-case"
    if command == "preflight":  # every check, in order, with its summary
        assert f"The {len(CHECKS)} checks, in the order they run" in out
        assert re.findall(r"^  (\w+): \w", out, re.MULTILINE) == list(CHECKS)


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["demo", "--help"], ["memory", "-h"], ["preflight", "--help"], ["tune", "--help"],
     ["demo", "--finetune", "-h"], ["tune", "-V"]],
)  # fmt: skip
def test_help_and_version_answer_without_importing_torch(argv: list[str], tmp_path: Path) -> None:
    blocker = "import sys\nfor name in ('torch', 'lightning'):\n    sys.modules[name] = None\n"
    (tmp_path / "sitecustomize.py").write_text(blocker)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    command = [sys.executable, "-m", "lightning_recipes", *argv]
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(("usage: lightning-recipes", "lightning-recipes "))


@pytest.mark.parametrize(
    "argv", [["--version"], ["-V"], ["demo", "--version"], ["memory", "-V"], ["preflight", "--version"]]
)
def test_version(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 0
    assert capsys.readouterr().out.strip() == f"lightning-recipes {version('lightning-recipes')}"


def test_kebab_and_snake_spellings_parse_alike() -> None:
    flags = normalise_flags(["--num-params=7B", "--gpu_memory", "80", "--output-dir", "a-b", "--", "--x-y"])
    assert flags == ["--num_params=7B", "--gpu_memory", "80", "--output_dir", "a-b", "--", "--x-y"]
    flags = normalise_flags(["--model.init_args.n-layers=2", "--print-config"])
    assert flags == ["--model.init_args.n-layers=2", "--print_config"]
    kebab = demo.parse(["--batch-size", "8", "--output-dir", "out", "--skip-preflight"])
    assert kebab == demo.parse(["--batch_size", "8", "--output_dir", "out", "--skip_preflight"])
    args, _ = memory.parse(["--num-params", "7B", "--gpu-memory", "24"])
    assert (args.num_params, args.gpu_memory) == ("7B", 24.0)
    args = preflight.parse(["--model", "pkg.Net", "--time-budget", "2", "--num-classes=3"])
    assert args == ["--model", "pkg.Net", "--time_budget", "2", "--num_classes=3"]
