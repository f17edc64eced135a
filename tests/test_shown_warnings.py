"""The warnings a user must see are shown under Python's default filters, in one real process: the deprecation
(plain code, LightningCLI YAML) and ``implementation="native"`` with no C compiler."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLAIN = "`warmup_steps=0.2` as a fraction of the run is deprecated: use `warmup_ratio=0.2`"
FROM_YAML = "`warmup_steps=0.1` as a fraction of the run is deprecated: use `warmup_ratio=0.1`"

SCRIPT = textwrap.dedent(
    """
    import lightning.pytorch as pl
    import torch
    from lightning.pytorch.cli import LightningCLI
    from torch import nn

    from lightning_recipes import LionRecipe, OptimizerRecipe
    from lightning_recipes.optim import Lamb, Lion


    class Net(LionRecipe, pl.LightningModule):
        def __init__(self, recipe: OptimizerRecipe | None = None) -> None:
            super().__init__()
            self.recipe = recipe
            self.net = nn.Linear(4, 2)


    if __name__ == "__main__":
        assert OptimizerRecipe(warmup_steps=0.2).warmup_ratio == 0.2  # plain code
        cli = LightningCLI(Net, run=False, save_config_callback=None)  # the recipe from config.yaml
        print("warmup_ratio", cli.model.recipe.warmup_ratio)
        for cls in (Lion, Lamb, Lion):  # three optimizers, two steps each: one warning in all
            model = nn.Linear(4, 2)
            optimizer = cls(model.parameters(), implementation="native")
            for _ in range(2):
                model(torch.randn(3, 4)).sum().backward()
                optimizer.step()
            print(cls.__name__, optimizer.implementation_used)
    """
)


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess:
    folder = tmp_path_factory.mktemp("shown")
    (folder / "train.py").write_text(SCRIPT)
    trainer = "trainer: {accelerator: cpu, logger: false, enable_checkpointing: false}\n"
    (folder / "config.yaml").write_text("model:\n  recipe: {warmup_steps: 0.1}\n" + trainer)
    empty = folder / "bin"
    empty.mkdir()
    # no PYTHONWARNINGS (default filters), no compiler: Python runs from its absolute path
    env = {"HOME": str(folder), "PATH": str(empty), "CC": "/nonexistent/cc", "PYTHONPATH": str(ROOT)}
    env.update({k: v for k, v in os.environ.items() if k.startswith(("LD_", "OMP_", "WANDB_"))})
    command = [sys.executable, "train.py", "--config", "config.yaml"]
    result = subprocess.run(command, cwd=folder, env=env, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


@pytest.mark.lightning_free  # the subprocess builds the LightningCLI, not this process
def test_the_deprecation_is_shown_once_in_plain_code_and_once_from_lightning_cli_yaml(shown) -> None:
    assert "warmup_ratio 0.1" in shown.stdout
    assert shown.stderr.count(PLAIN) == 1, shown.stderr
    assert shown.stderr.count(FROM_YAML) == 1, shown.stderr
    assert shown.stderr.count("LightningRecipesDeprecationWarning") == 2, shown.stderr


@pytest.mark.lightning_free
def test_native_without_a_compiler_warns_once_naming_the_fallback_and_the_fix(shown) -> None:
    ran = shown.stdout.split()[2:]
    assert ran == ["Lion", "for_loop", "Lamb", "for_loop", "Lion", "for_loop"], shown.stdout
    assert shown.stderr.count("implementation='native' was asked for") == 1, shown.stderr
    assert "no C compiler was found" in shown.stderr
    assert "run their 'for_loop' path instead" in shown.stderr
    assert "install gcc or clang" in shown.stderr and "implementation='foreach'" in shown.stderr
