"""OptimizerRecipe: every field checked at construction, `warmup_steps` / `warmup_ratio`, hparams.yaml as
plain data, the one table of names."""

from __future__ import annotations

import pickle
import typing
import warnings
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
import yaml
from lightning.pytorch.core.saving import load_hparams_from_yaml
from lightning.pytorch.loggers import CSVLogger, TensorBoardLogger
from torch import nn
from torch.nn import functional as F

from lightning_recipes import LightningRecipesDeprecationWarning
from lightning_recipes.callbacks.finetune_schedule import FinetuneSchedule
from lightning_recipes.mixins import LionRecipe, OptimizerRecipeMixin
from lightning_recipes.optim import Lion, build_optimizer, build_scheduler, warmup_cosine, warmup_stable_decay
from lightning_recipes.optim.names import (
    OPTIMIZERS,
    RECIPE_OPTIMIZERS,
    SCHEDULES,
    OptimizerName,
    ScheduleName,
)
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.testing import fast_trainer, random_classification_loader


class SavedNet(LionRecipe, pl.LightningModule):
    """The README pattern: `recipe: OptimizerRecipe | None` + `save_hyperparameters()` (module level)."""

    def __init__(self, recipe: OptimizerRecipe | None = None, width: int = 8) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.recipe = recipe
        self.net = nn.Sequential(nn.Linear(16, width), nn.ReLU(), nn.Linear(width, 4))

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.net(x), y)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"optimizer": "sgd"}, "optimizer"),
        ({"lr": -1.0}, "lr"),
        ({"lr": 0}, "lr"),
        ({"lr": float("nan")}, "lr"),
        ({"lr": True}, "lr"),
        ({"weight_decay": -0.1}, "weight_decay"),
        ({"betas": (0.9, 1.0)}, "betas[1]"),
        ({"betas": (0.9,)}, "betas"),
        ({"eps": 0.0}, "eps"),
        ({"warmup_steps": -1}, "warmup_steps"),
        ({"warmup_steps": "10"}, "warmup_steps"),
        ({"warmup_ratio": 1.0}, "warmup_ratio"),
        ({"warmup_steps": 10, "warmup_ratio": 0.1}, "warmup_ratio"),
        ({"warmup_steps": 1.5}, "warmup_steps"),
        ({"schedule": "step"}, "schedule"),
        ({"min_lr_ratio": 1.5}, "min_lr_ratio"),
        ({"scale_lr": "cube"}, "scale_lr"),
        ({"base_batch_size": 0}, "base_batch_size"),
        ({"batch_size": 2.5}, "batch_size"),
        ({"layer_decay": 0}, "layer_decay"),
        ({"lr_scale": {"(": 0.1}}, "lr_scale"),
        ({"block_classes": "no_such.Block"}, "block_classes"),
        ({"implementation": "cuda"}, "implementation"),
        # lr="find" and its sweep arguments
        ({"lr": "Find"}, "lr"),
        ({"lr": float("inf")}, "lr"),
        ({"lr": "find", "scale_lr": "linear", "base_batch_size": 256}, "scale_lr='linear'"),
        ({"lr": 1e-3, "lr_find": {"num_steps": 50}}, "lr_find"),
        ({"lr": "find", "lr_find": {"steps": 50}}, "lr_find"),
        ({"lr": "find", "lr_find": {"num_steps": 5}}, "num_steps"),
        ({"lr": "find", "lr_find": {"rule": "valley"}}, "rule"),
        ({"lr": "find", "lr_find": [50]}, "lr_find"),
    ],
)
def test_every_field_is_checked_at_construction(kwargs, field):
    """The error names the field (the wording is the validators')."""
    with pytest.raises(ValueError) as error:
        OptimizerRecipe(**kwargs)
    assert f"`{field}`" in str(error.value)


def test_valid_recipes_construct_and_warmup_vs_total_stays_at_fit():
    OptimizerRecipe("lamb", 1e-3, 0.0, (0.0, 0.999), 1e-6, 10, None, "wsd", 1.0, "sqrt", 256, 32, "foreach")
    recipe = OptimizerRecipe(warmup_steps=50)  # more than this run's 2 steps: only fit can know
    model = SavedNet(recipe)
    with pytest.raises(ValueError, match="`warmup_steps`"):
        fast_trainer(max_steps=2, max_epochs=None).fit(model, random_classification_loader(num_samples=32))


def test_hparams_values_are_checked_when_resolved():
    class Net(OptimizerRecipeMixin, pl.LightningModule):
        def __init__(self, lr: float = -3.0) -> None:
            super().__init__()
            self.save_hyperparameters()

    with pytest.raises(ValueError, match="`lr`"):
        Net().resolve_recipe()
    with pytest.raises(ValueError, match=r"`recipe` has unknown field\(s\) \['learning_rate'\]"):
        SavedNet({"learning_rate": 0.1}).resolve_recipe()  # type: ignore[arg-type]


def test_a_recipe_pickled_before_warmup_ratio_existed_still_resolves():
    """A pickled pre-``warmup_ratio`` recipe (float ``warmup_steps``) resolves to the new spelling."""
    old = object.__new__(OptimizerRecipe)
    fields = {name: None for name in OptimizerRecipe.field_names() if name != "warmup_ratio"}
    old.__dict__.update(fields, warmup_steps=0.25, optimizer="lamb")
    loaded = pickle.loads(pickle.dumps(old))
    with pytest.warns(LightningRecipesDeprecationWarning, match="use `warmup_ratio=0.25`"):
        resolved = SavedNet(loaded).resolve_recipe()
    assert (resolved["optimizer"], resolved["warmup_steps"], resolved["warmup_ratio"]) == ("lamb", None, 0.25)


def test_float_warmup_steps_still_works_with_a_deprecation_warning_naming_warmup_ratio():
    with pytest.warns(LightningRecipesDeprecationWarning, match=r"use `warmup_ratio=0.1`") as record:
        old = OptimizerRecipe(warmup_steps=0.1)
    assert record[0].filename == __file__  # points at the caller's line
    assert old == OptimizerRecipe(warmup_ratio=0.1)
    assert (old.warmup_steps, old.warmup_ratio) == (None, 0.1)
    optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
    with pytest.warns(LightningRecipesDeprecationWarning, match="use `warmup_ratio=0.25`") as record:
        scheduler = warmup_cosine(optimizer, 0.25, 8)
    assert record[0].filename == __file__
    new = warmup_cosine(optimizer, total_steps=8, warmup_ratio=0.25)
    assert [scheduler.lr_lambdas[0](s) for s in range(9)] == [new.lr_lambdas[0](s) for s in range(9)]


class HparamsWarmupNet(OptimizerRecipeMixin, pl.LightningModule):
    """The deprecated float `warmup_steps` in the module's own hyperparameters (no recipe)."""

    def __init__(self, warmup_steps: float = 0.25) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Linear(16, 4)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.net(x), y)


def test_the_float_warmup_steps_deprecation_is_said_once_per_module_not_per_resolution(tmp_path):
    """Issue 32: each resolution (configure_optimizers, summary, the checks' copies) warned: 4 per fit."""
    model = HparamsWarmupNet()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert model.resolve_recipe()["warmup_ratio"] == 0.25  # what a preflight check reads first
        fast_trainer(max_steps=2, default_root_dir=tmp_path).fit(model, random_classification_loader())
    said = [w for w in caught if issubclass(w.category, LightningRecipesDeprecationWarning)]
    assert len(said) == 1 and "use `warmup_ratio=0.25`" in str(said[0].message), said


def test_warmup_steps_int_and_warmup_ratio_give_the_steps_they_say():
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # neither spelling warns
        optimizer = torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0)
        by_steps = warmup_stable_decay(optimizer, 3, 10)
        by_ratio = warmup_stable_decay(optimizer, total_steps=10, warmup_ratio=0.3)
    assert [by_steps.lr_lambdas[0](s) for s in range(4)] == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
    assert [by_ratio.lr_lambdas[0](s) for s in range(11)] == [by_steps.lr_lambdas[0](s) for s in range(11)]
    with pytest.raises(ValueError, match="Give `warmup_steps` or `warmup_ratio`, not both"):
        warmup_cosine(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=1.0), 3, 10, warmup_ratio=0.3)


@pytest.mark.parametrize(
    ("recipe", "expected_warmup"),
    [(OptimizerRecipe(warmup_steps=3), 3), (OptimizerRecipe(warmup_ratio=0.5), 4), (OptimizerRecipe(), 1)],
)
def test_mixin_warmup_from_steps_or_ratio(recipe, expected_warmup):
    model = SavedNet(recipe)
    fast_trainer(max_steps=8, max_epochs=None).fit(model, random_classification_loader(num_samples=256))
    assert model.recipe_summary["warmup_steps"] == expected_warmup  # default: ceil(0.05 * 8) = 1


RECIPE = OptimizerRecipe(optimizer="lamb", lr=2e-3, betas=(0.8, 0.95), warmup_ratio=0.25, schedule="wsd")


@pytest.mark.parametrize("logger_cls", [CSVLogger, TensorBoardLogger])
def test_hparams_yaml_round_trips_through_lightning_loaders(tmp_path, logger_cls):
    model = SavedNet(RECIPE, width=12)
    logger = logger_cls(tmp_path, name="run")
    trainer = fast_trainer(max_steps=4, max_epochs=None, logger=logger, default_root_dir=tmp_path)
    trainer.fit(model, random_classification_loader(num_samples=64))
    ckpt = tmp_path / "last.ckpt"
    trainer.save_checkpoint(ckpt)

    hparams_file = f"{logger.log_dir}/hparams.yaml"
    text = Path(hparams_file).read_text()
    assert "!!python" not in text, text
    # any YAML reader, not only PyYAML's full loader
    assert yaml.safe_load(text)["recipe"] == RECIPE.to_dict()
    hparams = load_hparams_from_yaml(hparams_file)
    assert hparams == {"recipe": RECIPE.to_dict(), "width": 12}
    assert OptimizerRecipe(**hparams["recipe"]) == RECIPE

    resolved = model.resolve_recipe()
    from_ckpt = SavedNet.load_from_checkpoint(ckpt)  # torch.load(weights_only=True)
    assert from_ckpt.recipe == RECIPE and from_ckpt.resolve_recipe() == resolved
    from_yaml = SavedNet.load_from_checkpoint(ckpt, hparams_file=hparams_file)
    # the recipe comes back as an OptimizerRecipe (the checkpoint names its type), from YAML too
    assert from_yaml.recipe == RECIPE and from_yaml.resolve_recipe() == resolved
    for a, b in zip(model.parameters(), from_yaml.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    resumed = fast_trainer(max_steps=6, max_epochs=None, logger=False, default_root_dir=tmp_path)
    resumed.fit(from_yaml, random_classification_loader(num_samples=64), ckpt_path=ckpt)
    assert type(resumed.optimizers[0]).__name__ == "Lamb" and resumed.global_step == 6


@pytest.fixture
def cli(tmp_path, monkeypatch):
    """``cli(config, *args)``: LightningCLI (``run=False``) of a YAML file written with ``config``."""
    from lightning.pytorch.cli import LightningCLI

    monkeypatch.setattr("sys.argv", ["train.py"])

    def build(config: dict, *args: str, name: str = "input.yaml") -> LightningCLI:
        (tmp_path / name).write_text(yaml.safe_dump(config))
        return LightningCLI(args=["--config", str(tmp_path / name), *args], run=False)

    return build


def test_lightning_cli_yaml_round_trip(tmp_path, cli):
    recipe = dict(optimizer="lion", lr=3e-4, betas=[0.9, 0.98], warmup_steps=1, schedule="linear")
    logger = {"class_path": "lightning.pytorch.loggers.CSVLogger", "init_args": {"save_dir": str(tmp_path)}}
    trainer = {"max_steps": 3, "accelerator": "cpu", "enable_progress_bar": False, "logger": logger}
    model = {"class_path": "tests.test_recipe.SavedNet", "init_args": {"recipe": recipe}}
    config = {"model": model, "trainer": {**trainer, "default_root_dir": str(tmp_path)}}
    built = cli(config)
    built.trainer.fit(built.model, random_classification_loader(num_samples=64))
    expected = OptimizerRecipe(**{**recipe, "betas": (0.9, 0.98)})
    assert built.model.recipe == expected
    optimizer = built.trainer.optimizers[0]
    assert type(optimizer) is Lion and optimizer.param_groups[0]["betas"] == (0.9, 0.98)
    summary = built.model.recipe_summary
    assert summary["warmup_steps"] == 1 and summary["schedule"] == "linear"
    override = cli(config, "--model.init_args.recipe.optimizer=lamb")
    assert override.model.recipe.optimizer == "lamb" and override.model.recipe.lr == 3e-4
    with pytest.raises(SystemExit):  # jsonargparse rejects an unknown optimizer name before anything runs
        cli(config, "--model.init_args.recipe.optimizer=sgd")
    hparams = load_hparams_from_yaml(f"{built.trainer.logger.log_dir}/hparams.yaml")
    assert hparams["recipe"] == expected.to_dict()
    # the hparams read back feed LightningCLI again (as YAML) and rebuild the same recipe
    init_args = {k: v for k, v in hparams.items() if not k.startswith("_")}  # `_instantiator`: Lightning's
    again = {"model": {**model, "init_args": init_args}}
    assert cli(again, "--trainer.logger=false", name="again.yaml").model.recipe == expected


def test_the_recipe_builder_and_defaults_read_the_one_table_of_names():
    # the fields are typed with the table's Literals (lightning_recipes/_names.py): LightningCLI parses them
    fields = typing.get_type_hints(OptimizerRecipe)
    assert set(typing.get_args(fields["optimizer"])) == {OptimizerName, type(None)}
    assert set(typing.get_args(fields["schedule"])) == {ScheduleName, type(None)}
    params = [nn.Parameter(torch.zeros(1))]
    for name in OPTIMIZERS:  # the recipe takes exactly the table's recipe optimizers, with their defaults
        if name in RECIPE_OPTIMIZERS:
            resolved = SavedNet(OptimizerRecipe(optimizer=name)).resolve_recipe()  # type: ignore[arg-type]
            assert {key: resolved[key] for key in OPTIMIZERS[name].defaults} == OPTIMIZERS[name].defaults
        else:
            with pytest.raises(ValueError, match="`optimizer`"):
                build_optimizer(name, params, lr=1e-3, weight_decay=0.0, betas=(0.9, 0.99))
    for schedule in SCHEDULES:
        OptimizerRecipe(schedule=schedule)  # type: ignore[arg-type]
        built = build_scheduler(schedule, torch.optim.SGD(params, lr=1.0), warmup_steps=1, total_steps=10)
        assert (built is None) == (schedule == "none")


class BlockLM(LionRecipe, pl.LightningModule):
    """embed -> 2 blocks -> head, for layer_decay / lr_scale / FinetuneSchedule from LightningCLI YAML."""

    def __init__(self, recipe: OptimizerRecipe | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.recipe = recipe
        self.embed = nn.Linear(16, 8)
        self.blocks = nn.ModuleList(nn.Sequential(nn.LayerNorm(8), nn.Linear(8, 8)) for _ in range(2))
        self.head = nn.Linear(8, 4)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self(x), y)


def test_lightning_cli_yaml_layer_decay_lr_scale_and_finetune_schedule(tmp_path, cli):
    recipe = {"lr": 0.001, "schedule": "constant", "warmup_steps": 0, "layer_decay": 0.5}
    recipe.update(lr_scale={"head": 2.0}, block_classes="torch.nn.Sequential")
    schedule = {"class_path": "lightning_recipes.callbacks.finetune_schedule.FinetuneSchedule",
                "init_args": {"modules": ["embed"], "unfreeze_at_step": 2, "warmup_steps": 2}}  # fmt: skip
    trainer = {"max_steps": 4, "accelerator": "cpu", "enable_progress_bar": False, "logger": False}
    trainer.update(default_root_dir=str(tmp_path), callbacks=[schedule])
    model = {"class_path": "tests.test_recipe.BlockLM", "init_args": {"recipe": recipe}}
    built = cli({"model": model, "trainer": trainer})
    assert built.model.recipe == OptimizerRecipe(**recipe)
    built.trainer.fit(built.model, random_classification_loader(num_samples=64))
    groups = {g["name"]: g for g in built.trainer.optimizers[0].param_groups}
    parts = ["embed/embed/", "block_0/", "block_1/", "head/head/"]
    assert list(groups) == [f"{part}{kind}" for part in parts for kind in ("decay", "no_decay")]
    assert groups["embed/embed/decay"]["lr"] == pytest.approx(1e-3 * 0.125)  # unfrozen, warm-up done
    assert groups["block_0/decay"]["lr"] == pytest.approx(1e-3 * 0.25)
    assert groups["head/head/decay"]["lr"] == pytest.approx(1e-3 * 2.0)
    (schedule,) = [cb for cb in built.trainer.callbacks if isinstance(cb, FinetuneSchedule)]
    assert schedule.unfrozen_at == 2 and schedule.warmup_steps == 2


def test_lr_find_accepts_find_and_sweep_arguments_and_round_trips():
    recipe = OptimizerRecipe(optimizer="lion", lr="find", lr_find={"num_steps": 50, "max_lr": 1.0})
    assert recipe.lr == "find" and recipe.lr_find == {"num_steps": 50, "max_lr": 1.0}
    assert OptimizerRecipe(**recipe.to_dict()) == recipe
    assert OptimizerRecipe(**yaml.safe_load(yaml.safe_dump(recipe))) == recipe
    assert pickle.loads(pickle.dumps(recipe)) == recipe


def test_lr_find_and_scale_lr_from_different_sources_is_caught_when_resolved():
    class Net(OptimizerRecipeMixin, pl.LightningModule):
        def __init__(self, scale_lr: str = "sqrt", base_batch_size: int = 64) -> None:
            super().__init__()
            self.save_hyperparameters()

    model = Net()
    model.recipe = OptimizerRecipe(lr="find")
    with pytest.raises(ValueError, match=r"`scale_lr='sqrt'` cannot be combined with `lr='find'`"):
        model.resolve_recipe()
