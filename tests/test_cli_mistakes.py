"""Ordinary mistakes on the command line end in one line on stderr that names the fix, and exit code 2 (issue
26): no traceback. Each call runs ``main([...])`` in this process; a subprocess only where an extra must be
missing from the whole process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lightning_recipes._cli_demo_args import parse_demo_args
from lightning_recipes._cli_errors import TRACEBACK_ENV, UsageError
from lightning_recipes._cli_preflight_args import build_preflight_parser, preflight_front
from lightning_recipes._cli_tune_args import build_tune_parser, tune_front
from lightning_recipes.cli import check_arguments, main

DATA = "lightning_recipes.data.DigitsDataModule"
USER_MODELS = """
from __future__ import annotations
from lightning_recipes.mixins import OptimizerRecipeMixin
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.testing import DigitsCNN

class RecipeNet(OptimizerRecipeMixin, DigitsCNN):
    def __init__(self, recipe: OptimizerRecipe | None = None, width: int = 4) -> None:
        super().__init__(width=width)
        self.recipe = recipe

class StrictNet(DigitsCNN):
    # checks its own argument types, as transformers' strict configs do (an error class of their own)
    def __init__(self, width: int = 4) -> None:
        if not isinstance(width, int):
            raise RuntimeError(f"width expected int, got {width!r}")
        super().__init__(width=width)

class BuggyNet(DigitsCNN):
    def __init__(self, width: int = 4) -> None:
        super().__init__(width=width)
        len(None)  # a bug in the user's code: keeps its traceback
"""


def _error_line(capsys: pytest.CaptureFixture[str], command: str, *fix: str) -> str:
    """The one line on stderr, checked: ours, naming each part of ``fix``, no traceback."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"lightning-recipes {command}: error: "), err
    assert "Traceback" not in err
    for part in fix:
        assert part in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def user_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "cli_user_models.py").write_text(USER_MODELS)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize("command", ["preflight", "tune"])
def test_no_arguments(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([command]) == 2
    _error_line(capsys, command, "--model my_pkg.MyModel", "--config")


def test_a_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preflight", "--config", str(tmp_path / "nope.yaml")]) == 2
    _error_line(capsys, "preflight", "nope.yaml: no such file")


def test_a_malformed_yaml_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("model:\n  class_path: [a,\n")
    assert main(["tune", "--config", str(config)]) == 2
    _error_line(capsys, "tune", "config.yaml is not valid YAML at line", "fix the file")


@pytest.mark.parametrize(
    ("model", "fix"),
    [
        ("no_such_pkg.MyModel", "no module named 'no_such_pkg'"),
        ("cli_user_models.NoSuchNet", "module 'cli_user_models' has no class 'NoSuchNet'"),
    ],
)
def test_an_unknown_model_class_path(
    model: str, fix: str, user_models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["preflight", "--model", model, "--data", DATA]) == 2
    _error_line(capsys, "preflight", f"--model {model}", fix)


def test_an_unknown_model_class_path_in_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("model:\n  class_path: no_such_pkg.MyModel\n")
    assert main(["preflight", "--config", str(config)]) == 2
    _error_line(capsys, "preflight", "--model: ", "'no_such_pkg.MyModel'", "No module named 'no_such_pkg'")


def test_a_logger_extra_not_installed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb fails, as without the extra
    assert main(["demo", "--logger", "wandb-offline"]) == 2
    _error_line(capsys, "demo", 'pip install "lightning-recipes[wandb]"')


def test_a_plotting_extra_not_installed_fails_before_the_sweep(
    user_models: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    argv = ["tune", "--model", "cli_user_models.RecipeNet", "--data", DATA, "--plot", "curve.png"]
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert "LR range test" not in captured.out  # no sweep ran
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and 'pip install "lightning-recipes[plots]"' in lines[0], captured.err


def test_the_demo_on_a_base_install_without_scikit_learn(tmp_path: Path) -> None:
    # the [data] extra missing from the whole process: a sitecustomize makes `import sklearn` fail
    (tmp_path / "sitecustomize.py").write_text("import sys\nsys.modules['sklearn'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    result = subprocess.run(
        [sys.executable, "-m", "lightning_recipes", "demo", "--epochs", "1"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=tmp_path,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        "lightning-recipes demo: error: the demo (scikit-learn's digits) needs scikit-learn, which is not "
        'installed: pip install "lightning-recipes[data]"'
    )


@pytest.mark.parametrize(
    ("flag", "fix"),
    [
        (
            "--model.recipe.optimizer=lion2",
            "--model.recipe.optimizer: expected one of 'adamw', 'lion', 'lamb'",
        ),
        ("--model.recipe.lr=-1", "`lr` must be a finite number > 0, got -1.0"),
    ],
)
def test_a_bad_recipe_value(
    flag: str, fix: str, user_models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["preflight", "--model", "cli_user_models.RecipeNet", flag, "--data", DATA]) == 2
    _error_line(capsys, "preflight", fix)


def test_a_bad_choice_names_the_choices(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--optimizer", "sgd"]) == 2
    _error_line(
        capsys, "demo", "invalid choice: 'sgd'", "'adamw', 'lamb', 'lion'", "lightning-recipes demo --help"
    )


def test_an_unknown_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["nope"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "lightning-recipes: error: unknown command 'nope'; choose one of demo, preflight, memory, tune "
        "(see `lightning-recipes --help`)"
    ]


def test_a_bug_in_the_users_model_keeps_its_traceback(user_models: Path) -> None:
    with pytest.raises(ValueError) as raised:  # jsonargparse's, caused by the user's TypeError
        main(["preflight", "--model", "cli_user_models.BuggyNet", "--data", DATA])
    assert isinstance(raised.value.__cause__, TypeError) and "has no len" in str(raised.value.__cause__)


def test_the_traceback_is_shown_on_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRACEBACK_ENV, "1")
    with pytest.raises(UsageError, match="no model given"):
        main(["preflight"])


# --- issue 32: the command-line paper cuts


def test_one_check_name_needs_no_list_and_a_check_named_twice_is_one_line(
    user_models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["preflight", "--model", "cli_user_models.RecipeNet", "--data", DATA, "--progress=false"]
    assert main([*argv, "--checks", "loss"]) == 0  # was: "Expected a <class 'list'>"
    assert "PASS loss" in capsys.readouterr().out
    assert main([*argv, "--checks", "[loss,loss]"]) == 2  # was: a traceback
    _error_line(capsys, "preflight", "names each check at most once", "['loss']")


def test_a_run_length_of_zero_is_one_line(user_models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--model", "cli_user_models.RecipeNet", "--max_epochs", "0"]) == 2  # a traceback
    _error_line(capsys, "tune", "`max_epochs` must be an integer >= 1, got 0")


def test_a_model_argument_of_the_wrong_type_is_one_line_in_memory(
    user_models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["memory", "--model", "cli_user_models.StrictNet", "--model.width", "two"]) == 2
    _error_line(capsys, "memory", "--model.width", "int", "two")  # was: the model's own traceback


def test_a_bad_parameter_count_is_answered_before_torch_is_imported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # check_arguments is the torch-free step the console script runs before the package imports torch
    assert check_arguments(["memory", "--num_params", "7X"]) == 2
    _error_line(capsys, "memory", "--num_params must be a count like 7B", "'7X'")


def test_preflight_reads_the_run_length_from_a_lightning_cli_config_as_tune_does(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(
        "trainer: {max_epochs: 6, max_steps: -1, precision: bf16-mixed}\nmodel: {class_path: pkg.Net}\n"
    )
    for front in (preflight_front, tune_front):
        read = yaml.safe_load(front(["--config", str(config)])[1])
        assert read["max_epochs"] == 6 and "max_steps" not in read  # -1: Lightning's "unset"


@pytest.mark.parametrize(("value", "expected"), [([], True), (["true"], True), (["false"], False)])
def test_every_boolean_option_takes_both_forms(value: list[str], expected: bool) -> None:
    """A flag alone means true, and true/false may follow it, in every command (was: --verbose and demo's
    --skip_preflight flags only, --strict, --progress, --lr and --speed values only)."""
    preflight = build_preflight_parser(fast=True)
    for name in ("verbose", "strict", "progress"):
        assert preflight.parse_args([f"--{name}", *value])[name] is expected
    tune = build_tune_parser(fast=True)
    for name in ("lr", "speed", "progress"):
        assert tune.parse_args([f"--{name}", *value])[name] is expected
    assert parse_demo_args(["--skip_preflight", *value]).skip_preflight is expected
