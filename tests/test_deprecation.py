"""Our deprecations are seen (issue #26): ``LightningRecipesDeprecationWarning`` is a ``FutureWarning``, shown
by Python's default filters in plain code and when the deprecated value comes from LightningCLI YAML (a
``DeprecationWarning`` showed nothing in either place), once per use.

One real process with no warning options (pytest's own filters would hide what a user sees): the deprecated
spelling once in plain code, once from a LightningCLI config file.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from lightning_recipes import LightningRecipesDeprecationWarning
from lightning_recipes.optim.schedules import warmup_fields

ROOT = Path(__file__).resolve().parents[1]
PLAIN = "`warmup_steps=0.2` as a fraction of the run is deprecated: use `warmup_ratio=0.2`"
FROM_YAML = "`warmup_steps=0.1` as a fraction of the run is deprecated: use `warmup_ratio=0.1`"

SCRIPT = textwrap.dedent(
    """
    import lightning.pytorch as pl
    from lightning.pytorch.cli import LightningCLI
    from torch import nn

    from lightning_recipes import LionRecipe, OptimizerRecipe


    class Net(LionRecipe, pl.LightningModule):
        def __init__(self, recipe: OptimizerRecipe | None = None) -> None:
            super().__init__()
            self.recipe = recipe
            self.net = nn.Linear(4, 2)


    if __name__ == "__main__":
        assert OptimizerRecipe(warmup_steps=0.2).warmup_ratio == 0.2  # plain code
        cli = LightningCLI(Net, run=False, save_config_callback=None)  # the recipe from config.yaml
        print("warmup_ratio", cli.model.recipe.warmup_ratio)
    """
)


@pytest.mark.lightning_free  # the subprocess builds the LightningCLI, not this process
def test_the_deprecation_is_shown_by_default_in_plain_code_and_from_lightning_cli_yaml(tmp_path: Path):
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "config.yaml").write_text(
        "model:\n  recipe: {warmup_steps: 0.1}\n"
        "trainer: {accelerator: cpu, logger: false, enable_checkpointing: false}\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"}  # Python's default filters
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    result = subprocess.run(
        [sys.executable, "train.py", "--config", "config.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "warmup_ratio 0.1" in result.stdout
    assert result.stderr.count(PLAIN) == 1, result.stderr
    assert result.stderr.count(FROM_YAML) == 1, result.stderr
    assert result.stderr.count("LightningRecipesDeprecationWarning") == 2, result.stderr


def test_the_category_is_ours_and_a_future_warning_that_filters_can_silence_or_escalate() -> None:
    assert issubclass(LightningRecipesDeprecationWarning, FutureWarning)
    assert not issubclass(LightningRecipesDeprecationWarning, DeprecationWarning)  # hidden by default
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # anything else would raise
        warnings.simplefilter("ignore", LightningRecipesDeprecationWarning)  # (the later filter wins)
        assert warmup_fields(0.5, None) == (None, 0.5)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LightningRecipesDeprecationWarning)
        with pytest.raises(LightningRecipesDeprecationWarning, match=r"use `warmup_ratio=0\.5`"):
            warmup_fields(0.5, None)
