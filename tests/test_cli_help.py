"""The commands' help (issue 26): answered without importing torch, listing the same options as the parser
that runs, all the preflight's checks, nothing from a Lightning docstring; one flag spelling; --version."""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from lightning_recipes.checks._budget import DEFAULT_TIME_BUDGET
from lightning_recipes.checks.preflight import CHECKS
from lightning_recipes.cli import demo, main, memory, normalise_flags, preflight, tune
from lightning_recipes.demos.training import DEMO_SETTINGS
from lightning_recipes.strategies.memory import _PRECISIONS, OPTIMIZER_STATES
from lightning_recipes.strategies.presets import PRESETS
from lightning_recipes.strategies.recommend import LADDERS


def _options(parser) -> list[str]:
    return sorted(s for action in parser._actions for s in action.option_strings)


@pytest.mark.parametrize("build", [preflight.build_parser, tune.build_parser])
def test_the_fast_help_lists_the_options_of_the_parser_that_runs(build) -> None:
    assert _options(build(fast=True)) == _options(build())
    fast, real = build(fast=True).format_help(), build().format_help()
    assert fast.split("options:")[0] == real.split("options:")[0]  # usage and description


def _summary(cls: type) -> str:
    return re.sub(r"``|\*\*", "", inspect.getdoc(cls).split("\n\n")[0].replace("\n", " "))


def test_the_tables_written_for_the_fast_parsers_are_the_registries() -> None:
    # the check summaries are read from the checks' source (no torch): the registry's, in its order
    assert preflight.check_summaries() == [(name, _summary(cls)) for name, cls in CHECKS.items()]
    assert preflight.DEFAULT_TIME_BUDGET == DEFAULT_TIME_BUDGET
    assert tuple(sorted(OPTIMIZER_STATES)) == memory.OPTIMIZERS
    assert tuple(_PRECISIONS) == memory.PRECISIONS
    assert tuple(sorted(LADDERS)) == memory.FAMILIES
    assert tuple(sorted(PRESETS)) == memory.PRESET_NAMES
    assert tuple(sorted(DEMO_SETTINGS)) == demo.DEMO_OPTIMIZERS


@pytest.mark.parametrize("command", ["demo", "preflight", "memory", "tune"])
def test_the_help_holds_only_our_text(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
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
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nfor name in ('torch', 'lightning'):\n    sys.modules[name] = None\n"
    )
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
    assert normalise_flags(
        ["--num-params=7B", "--gpu_memory", "80", "--output-dir", "a-b", "--", "--x-y"]
    ) == ["--num_params=7B", "--gpu_memory", "80", "--output_dir", "a-b", "--", "--x-y"]
    assert normalise_flags(["--model.init_args.n-layers=2", "--print-config"]) == [
        "--model.init_args.n-layers=2",
        "--print_config",
    ]
    kebab = demo.parse(["--batch-size", "8", "--output-dir", "out", "--skip-preflight"])
    assert kebab == demo.parse(["--batch_size", "8", "--output_dir", "out", "--skip_preflight"])
    args, _ = memory.parse(["--num-params", "7B", "--gpu-memory", "24"])
    assert (args.num_params, args.gpu_memory) == ("7B", 24.0)
    args = preflight.parse(["--model", "pkg.Net", "--time-budget", "2", "--num-classes=3"])
    assert args == ["--model", "pkg.Net", "--time_budget", "2", "--num_classes=3"]
