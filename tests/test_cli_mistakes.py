"""A mistake on the command line ends in one line on stderr that names the fix, and exit code 2."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from lightning_recipes.cli import check_arguments, demo, main, preflight, tune
from lightning_recipes.cli._args import TRACEBACK_ENV, UsageError

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
CONFIGS = {
    "malformed.yaml": "model:\n  class_path: [a,\n",
    "unknown_class.yaml": "model:\n  class_path: no_such_pkg.MyModel\n",
    "fixed_class.yaml": "model:\n  width: 8\ndata:\n  batch_size: 32\n",  # LightningCLI(MyModel) writes this
}
NET = ["--model", "cli_user_models.RecipeNet", "--data", DATA]


def _error_line(capsys: pytest.CaptureFixture[str], command: str, *fix: str) -> None:
    """The one line on stderr, checked: ours, naming each part of ``fix``, no traceback."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"lightning-recipes {command}: error: "), err
    assert all(part in lines[0] for part in fix), lines[0]


@pytest.fixture
def user_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "cli_user_models.py").write_text(USER_MODELS)
    for name, text in CONFIGS.items():
        (tmp_path / name).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("argv", "fix"),
    [
        (["preflight"], ["--model my_pkg.MyModel", "--config"]),
        (["tune"], ["--model my_pkg.MyModel", "--config"]),
        (["preflight", "--config", "nope.yaml"], ["nope.yaml: no such file"]),
        (["tune", "--config", "malformed.yaml"], ["malformed.yaml is not valid YAML at line", "fix the"]),
        (["preflight", "--model", "no_such_pkg.MyModel"], ["--model no_such_pkg.MyModel", "'no_such_pkg'"]),
        (["preflight", "--model", "cli_user_models.NoSuchNet"], ["has no class 'NoSuchNet'"]),
        (["preflight", "--config", "unknown_class.yaml"], ["--model: ", "No module named 'no_such_pkg'"]),
        (["preflight", "--config=fixed_class.yaml"], ["`model` section of", "`--model my_pkg.MyClass`"]),
        (["preflight", *NET, "--model.recipe.optimizer=lion2"], ["expected one of 'adamw', 'lion', 'lamb'"]),
        (["preflight", *NET, "--model.recipe.lr=-1"], ["`lr` must be a finite number > 0, got -1.0"]),
        (["tune", *NET, "--model.recipe.lr=-1", "--print_config"], ["`lr` must be a finite number > 0"]),
        (["preflight", *NET, "--checks", "[nope]"], ["unknown check(s) ['nope']"]),
        (["preflight", *NET, "--checks", "[loss,loss]"], ["names each check at most once", "['loss']"]),
        (["preflight", *NET, "--time_budget", "0"], ["`--time_budget` must be a number of seconds > 0"]),
        (["tune", *NET, "--max_epochs", "0"], ["`max_epochs` must be an integer >= 1, got 0"]),
        (["tune", *NET, "--num_steps", "3"], ["`num_steps` must be"]),
        (["tune", *NET, "--lr", "false"], ["nothing to do"]),
        (["tune", *NET, "--lr=false", "--speed", "--speed_options", "[turbo]"], ["`options` must name"]),
        (["demo", "--optimizer", "sgd"], ["invalid choice: 'sgd'", "'adamw', 'lamb', 'lion'", "demo --help"]),
        (["demo", "--finetune", "--finetune_epochs", "2"], ["`--finetune_epochs` must be >= 3"]),
        (["memory", "--model", "cli_user_models.StrictNet", "--model.width", "two"], ["--model.width"]),
        (["memory", "--model", "cli_user_models.RecipeNet", "--model.recipe.optimizer", "adagrad"],
         ["--model.recipe.optimizer: expected one of 'adamw', 'lion', 'lamb'"]),
        (["memory", "--num-params", "lots"], ["--num_params must be a count like 7B"]),
        (["memory", "--model", "NoDots"], ["full import path"]),
        (["memory", "--model", "lightning_recipes.testing.NoSuchModel"], ["has no class 'NoSuchModel'"]),
        (["memory", "--num-params", "1B", "--model.n_layers", "2"], ["need --model"]),
        (["memory", "--model", "lightning_recipes.testing.TinyTransformerLM", "--model.bogus", "1"],
         ["does not accept option 'bogus'"]),  # checked against the signature first
    ],
)  # fmt: skip
def test_a_mistake_is_one_line_and_exit_2(
    argv: list[str], fix: list[str], user_models: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    _error_line(capsys, argv[0], *fix)


@pytest.mark.parametrize(
    ("module", "extra", "argv", "needs"),
    [
        ("wandb", "wandb", ["demo", "--logger", "wandb-offline"], "--logger wandb-offline needs wandb"),
        ("sklearn", "data", ["demo", "--epochs", "1"], "the demo (scikit-learn's digits) needs scikit-learn"),
        ("matplotlib", "plots", ["tune", *NET, "--plot", "curve.png"], "--plot curve.png needs matplotlib"),
    ],
)  # fmt: skip
def test_an_extra_not_installed_is_named_before_any_work(
    module: str, extra: str, argv: list[str], needs: str, user_models: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import fails, as without the extra
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.err == (
        f"lightning-recipes {argv[0]}: error: {needs}, which is not installed: "
        f'pip install "lightning-recipes[{extra}]"\n'
    )
    assert "LR range test" not in captured.out  # no sweep ran


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


def test_one_check_name_needs_no_list(user_models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["preflight", *NET, "--progress=false", "--checks", "loss"]) == 0
    assert "PASS loss" in capsys.readouterr().out


def test_print_config_prints_what_would_run(user_models: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", *NET, "--model.recipe.lr=0.01", "--print_config"]) == 0
    config = yaml.safe_load(capsys.readouterr().out)
    assert config["model"]["init_args"]["recipe"]["lr"] == 0.01 and config["num_steps"] > 0


def test_a_bad_parameter_count_is_answered_before_torch_is_imported(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # check_arguments is the torch-free step the console script runs before the package imports torch
    assert check_arguments(["memory", "--num_params", "7X"]) == 2
    _error_line(capsys, "memory", "--num_params must be a count like 7B", "'7X'")


def test_preflight_reads_the_run_length_from_a_lightning_cli_config_as_tune_does(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    trainer = "trainer: {max_epochs: 6, max_steps: -1, precision: bf16-mixed}\n"
    config.write_text(trainer + "model: {class_path: pkg.Net}\n")
    for parse in (preflight.parse, tune.parse):
        read = yaml.safe_load(parse(["--config", str(config)])[1])
        assert read["max_epochs"] == 6 and "max_steps" not in read  # -1: Lightning's "unset"


@pytest.mark.parametrize(("value", "expected"), [([], True), (["true"], True), (["false"], False)])
def test_every_boolean_option_takes_both_forms(value: list[str], expected: bool) -> None:
    """A flag alone means true, and true/false may follow it, in every command."""
    for build, names in ((preflight.build_parser, ("verbose", "strict", "progress")),
                         (tune.build_parser, ("lr", "speed", "progress"))):  # fmt: skip
        for name in names:
            assert build(fast=True).parse_args([f"--{name}", *value])[name] is expected
    assert demo.parse(["--skip_preflight", *value]).skip_preflight is expected
