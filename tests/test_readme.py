"""The README's Python snippets run as written (with a real model and data standing in for the user's)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def _python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


@pytest.mark.parametrize(
    "marker",
    ["trainer.fit(model, datamodule=dm)", "class MyModel(LionRecipe", "preflight(model, datamodule=dm"],
)
def test_readme_snippet_runs(marker, tmp_path, monkeypatch):
    """Each tour snippet is in exactly one block of the README, and runs."""
    from lightning_recipes.data import DigitsDataModule
    from lightning_recipes.testing import DigitsCNN

    monkeypatch.chdir(tmp_path)  # the snippet's Trainer writes lightning_logs/ into the working directory
    (block,) = [b for b in _python_blocks() if marker in b]
    namespace = {"model": DigitsCNN(width=8), "dm": DigitsDataModule(batch_size=64)}
    if marker.startswith("class MyModel"):
        block = "import lightning.pytorch as pl\n" + block + "\nmodel = MyModel()\n"
    exec(compile(block, str(README), "exec"), namespace)
    if marker.startswith("trainer.fit"):
        trainer = namespace["trainer"]
        from lightning_recipes import EarlyStopping, Preflight

        assert trainer.current_epoch >= 1 and trainer.global_step > 0
        (preflight,) = [c for c in trainer.callbacks if isinstance(c, Preflight)]
        assert preflight.report.ok
        (stopper,) = [c for c in trainer.callbacks if isinstance(c, EarlyStopping)]
        assert stopper.best_score.isfinite()
    if marker.startswith("class MyModel"):
        assert namespace["model"].resolve_recipe()["optimizer"] == "lion"
    if marker.startswith("preflight"):
        assert namespace["report"].ok


def _where_things_live() -> str:
    section = README.read_text().split("## Where things live", 1)[1]
    return re.search(r"```\n(.*?)```", section, flags=re.S).group(1)


def test_where_things_live_names_every_package_and_only_files_that_exist():
    package = README.parent / "lightning_recipes"
    tree = _where_things_live()
    listed = set(re.findall(r"(?<![\w*])(\w+)/", tree))
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")}
    assert subpackages <= listed, f"packages missing from README's tree: {sorted(subpackages - listed)}"
    files = set(re.findall(r"(?<![\w*])(\w+\.py)\b", tree))
    existing = {p.name for p in package.rglob("*.py")}
    assert files <= existing, f"README's tree names files that do not exist: {sorted(files - existing)}"
