"""`OptimizerRecipe(lr="find")` (issue 16)."""

from __future__ import annotations

import json
import logging
import pickle
import warnings
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
import yaml
from lightning.pytorch.core.saving import load_hparams_from_yaml
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import lightning_recipes.tune.lr_find_policy
from lightning_recipes.mixins import LionRecipe
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.sweep_args import SweepArgs
from lightning_recipes.testing import InMemoryLogger, fast_trainer, random_classification_loader
from lightning_recipes.tune import find_lr
from lightning_recipes.tune.lr_find_policy import CHECKPOINT_KEY

SWEEP = {"num_steps": 30}
FIND_NET = "tests.tune.test_lr_find_recipe.FindNet"


class FindNet(LionRecipe, pl.LightningModule):
    """Lion over decay/no-decay groups, with dropout (the RNG stream matters); module level: LightningCLI."""

    def __init__(self, recipe: OptimizerRecipe | None = None, dropout: float = 0.0) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.recipe = recipe
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Dropout(dropout), nn.Linear(32, 4))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.net(x), y))


def _recipe(**overrides: Any) -> OptimizerRecipe:
    fields: dict[str, Any] = {"lr": "find", "warmup_steps": 1, "lr_find": SWEEP, **overrides}
    return OptimizerRecipe(**fields)


def _peak_lrs(trainer: pl.Trainer) -> list[float]:
    return [g["initial_lr"] for g in trainer.optimizers[0].param_groups]


@pytest.fixture
def sweeps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the sweeps the mixin runs (the real `sweep_lr` still runs)."""
    calls: list[int] = []
    real = lightning_recipes.tune.lr_find_policy.sweep_lr

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(lightning_recipes.tune.lr_find_policy, "sweep_lr", counting)
    return calls


@pytest.mark.parametrize(
    ("overrides", "pick"),
    [
        ({}, "peak_lr"),  # cosine after a 1-step warm-up
        ({"schedule": "wsd"}, "peak_lr"),
        ({"schedule": "constant"}, "suggestion"),  # stays at its LR after the warm-up
        ({"warmup_steps": 0}, "suggestion"),  # starts at its LR
    ],
)
def test_the_run_trains_at_find_lr_pick_on_the_same_model_data_and_seed(overrides, pick, caplog):
    loader = random_classification_loader(num_samples=128)
    torch.manual_seed(1)
    model = FindNet(_recipe(**overrides))
    torch.manual_seed(1)
    twin = FindNet(_recipe(**overrides))  # same weights, swept separately by find_lr
    expected = find_lr(twin, train_dataloaders=loader, **SWEEP)
    logger = InMemoryLogger()
    trainer = fast_trainer(max_steps=4, logger=logger)
    with caplog.at_level(logging.INFO):
        trainer.fit(model, loader)
    lr = getattr(expected, pick)
    assert _peak_lrs(trainer) == [lr, lr]  # decay and no_decay groups
    assert model.found_lr == lr and model.lr_find_result is not None
    assert model.lr_find_result.lrs == expected.lrs and model.lr_find_result.losses == expected.losses
    assert model.recipe_summary["peak_lr"] == lr and model.recipe_summary["lr_find"]["choice"] == pick
    assert logger.hyperparams["lr_find/lr"] == lr and logger.hyperparams["lr_find/choice"] == pick
    assert logger.hyperparams["lr_find/suggestion"] == expected.suggestion
    assert logger.hyperparams["lr_find/peak_lr"] == expected.peak_lr
    lines = [r.getMessage() for r in caplog.records if "lr='find' ->" in r.getMessage()]
    assert len(lines) == 1 and f"= {pick} (" in lines[0] and "min_div_10" in lines[0], lines


def test_a_fit_checks_the_sweep_arguments_once(monkeypatch):
    """Issue #23: `lr_find` is validated once, as the recipe's `SweepArgs` (before: 7 times a fit)."""
    built: list[SweepArgs] = []
    check = SweepArgs.__post_init__

    def counting(self: SweepArgs) -> None:
        built.append(self)
        check(self)

    monkeypatch.setattr(SweepArgs, "__post_init__", counting)
    recipe = _recipe()
    model = FindNet(recipe)
    fast_trainer(max_steps=4).fit(model, random_classification_loader(num_samples=128))
    assert model.found_lr is not None and len(model.lr_find_result.lrs) <= SWEEP["num_steps"]
    assert len(built) == 1 and built[0] is recipe.sweep_args
    assert model.resolve_recipe()["lr_find"] is recipe.sweep_args and len(built) == 1


def test_the_sweep_leaves_the_run_as_it_would_be_with_that_lr_written_down():
    """Dropout and the shuffling loader draw from the global RNG: a sweep that moved it would differ."""
    loader = random_classification_loader(num_samples=128, shuffle=True)
    pl.seed_everything(3)
    found = FindNet(_recipe(), dropout=0.3)
    fast_trainer(max_steps=6).fit(found, loader)
    assert found.found_lr is not None
    pl.seed_everything(3)
    written = FindNet(_recipe(lr=found.found_lr, lr_find=None), dropout=0.3)
    fast_trainer(max_steps=6).fit(written, loader)
    for (name, a), b in zip(found.state_dict().items(), written.state_dict().values()):
        torch.testing.assert_close(a, b, rtol=0, atol=0, msg=name)


def test_lightning_cli_yaml_lr_find(tmp_path, monkeypatch):
    from lightning.pytorch.cli import LightningCLI

    monkeypatch.setattr("sys.argv", ["train.py"])
    recipe = {"optimizer": "lion", "lr": "find", "warmup_steps": 1, "lr_find": SWEEP}
    logger = {"class_path": "lightning.pytorch.loggers.CSVLogger", "init_args": {"save_dir": str(tmp_path)}}
    trainer = {"max_steps": 3, "enable_progress_bar": False, "enable_checkpointing": False, "logger": logger}
    config = tmp_path / "config.yaml"
    model = {"class_path": FIND_NET, "init_args": {"recipe": recipe}}
    config.write_text(yaml.safe_dump({"model": model, "trainer": {**trainer, "accelerator": "cpu"}}))
    cli = LightningCLI(args=["--config", str(config)], run=False)
    assert cli.model.recipe == OptimizerRecipe(optimizer="lion", lr="find", warmup_steps=1, lr_find=SWEEP)
    loader = random_classification_loader(num_samples=128)
    cli.trainer.fit(cli.model, loader)
    lr = cli.model.found_lr
    assert lr is not None and _peak_lrs(cli.trainer) == [lr, lr]
    hparams = load_hparams_from_yaml(f"{cli.trainer.logger.log_dir}/hparams.yaml")
    assert hparams["lr_find/lr"] == lr and hparams["recipe"]["lr"] == "find"
    # hparams.yaml feeds LightningCLI again and still means "find"
    init_args = {k: v for k, v in hparams.items() if k in ("recipe", "dropout")}
    again = tmp_path / "again.yaml"
    again.write_text(yaml.safe_dump({"model": {"class_path": FIND_NET, "init_args": init_args}}))
    rebuilt = LightningCLI(args=["--config", str(again), "--trainer.logger=false"], run=False)
    assert rebuilt.model.recipe == cli.model.recipe


def _fit_and_save(model: FindNet, loader: DataLoader, tmp_path: Path, max_steps: int = 3) -> Path:
    trainer = fast_trainer(max_steps=max_steps, max_epochs=None, default_root_dir=tmp_path)
    trainer.fit(model, loader)
    trainer.save_checkpoint(tmp_path / "run.ckpt")
    return tmp_path / "run.ckpt"


def test_resume_reuses_the_found_lr_and_never_sweeps_again(tmp_path, sweeps):
    loader = random_classification_loader(num_samples=128)
    unfitted = FindNet(_recipe())
    fast_trainer().validate(unfitted, loader)  # validate, test and predict never sweep
    assert len(sweeps) == 0 and unfitted.found_lr is None
    model = FindNet(_recipe())
    ckpt = _fit_and_save(model, loader, tmp_path)
    found = model.found_lr
    assert len(sweeps) == 1 and found is not None
    assert torch.load(ckpt, weights_only=True)[CHECKPOINT_KEY]["lr"] == found

    resumed_model = FindNet(_recipe())
    resumed = fast_trainer(max_steps=5, max_epochs=None, default_root_dir=tmp_path)
    resumed.fit(resumed_model, loader, ckpt_path=ckpt)
    assert len(sweeps) == 1 and resumed.global_step == 5
    assert resumed_model.found_lr == found and _peak_lrs(resumed) == [found, found]
    assert resumed_model.recipe_summary["lr_find"]["source"] == "restored"

    loaded = FindNet.load_from_checkpoint(ckpt)
    assert loaded.found_lr == found and loaded.lr_find_result == model.lr_find_result
    fast_trainer().validate(loaded, loader)
    fast_trainer().fit(loaded, loader)  # a second fit of a module that has its LR: no new sweep either
    assert len(sweeps) == 1


def test_a_changed_recipe_sweeps_again_and_a_resume_keeps_the_lr_with_a_warning(tmp_path, sweeps):
    loader = random_classification_loader(num_samples=128)
    model = FindNet(_recipe())  # Lion, cosine after a warm-up: peak_lr
    ckpt = _fit_and_save(model, loader, tmp_path)
    lion_lr = model.found_lr
    saved = torch.load(ckpt, weights_only=True)[CHECKPOINT_KEY]
    assert len(sweeps) == 1 and saved["key"]["optimizer"] == "lion"

    model.recipe = _recipe(optimizer="adamw", schedule="constant")  # another optimizer: its LR is not Lion's
    fast_trainer(max_steps=3, max_epochs=None, default_root_dir=tmp_path).fit(model, loader)
    assert len(sweeps) == 2 and model.recipe_summary["lr_find"]["source"] == "sweep"
    assert model.found_lr != lion_lr and model.lr_find_policy.choice == "suggestion"

    resumed_model = FindNet(_recipe(schedule="constant"))  # resuming the Lion run with another schedule
    resumed = fast_trainer(max_steps=5, max_epochs=None, default_root_dir=tmp_path)
    changed = r"resuming at the LR found before .*schedule 'cosine' -> 'constant'"
    with pytest.warns(UserWarning, match=changed):
        resumed.fit(resumed_model, loader, ckpt_path=ckpt)
    assert len(sweeps) == 2 and resumed_model.found_lr == lion_lr


OLD_CHECKPOINT = Path(__file__).parent / "data" / "lr_find_before_policy.ckpt"


def test_a_checkpoint_written_before_the_policy_left_the_mixin_resumes_without_a_sweep(tmp_path, sweeps):
    """Written by commit 1c012ec (tests/tune/data/write_lr_find_checkpoint.py): loads, resumes, no sweep."""
    saved = torch.load(OLD_CHECKPOINT, weights_only=True)[CHECKPOINT_KEY]
    assert saved["choice"] == "peak_lr" and saved["key"]["optimizer"] == "lion"
    loader = random_classification_loader(num_samples=128)
    model = FindNet(_recipe())
    trainer = fast_trainer(max_steps=5, max_epochs=None, default_root_dir=tmp_path)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*recipe changed since it was found")
        trainer.fit(model, loader, ckpt_path=OLD_CHECKPOINT)
    assert len(sweeps) == 0 and trainer.global_step == 5
    assert model.found_lr == saved["lr"] and _peak_lrs(trainer) == [saved["lr"], saved["lr"]]
    assert model.recipe_summary["lr_find"]["source"] == "restored"
    assert model.recipe_summary["lr_find"]["choice"] == "peak_lr"
    assert model.lr_find_result is not None and model.lr_find_result.to_dict() == saved["result"]

    loaded = FindNet.load_from_checkpoint(OLD_CHECKPOINT)
    assert loaded.found_lr == saved["lr"] and loaded.recipe == model.recipe
    fast_trainer(max_steps=2, max_epochs=None, default_root_dir=tmp_path).fit(loaded, loader)
    assert len(sweeps) == 0 and loaded.recipe_summary["lr_find"]["source"] == "restored"


def test_resuming_a_checkpoint_without_a_found_lr_is_an_error(tmp_path):
    loader = random_classification_loader(num_samples=64)
    ckpt = _fit_and_save(FindNet(OptimizerRecipe(lr=1e-3, warmup_steps=1)), loader, tmp_path, max_steps=2)
    with pytest.raises(ValueError, match=r"resumes from .*run\.ckpt.*holds no LR found by an earlier"):
        fast_trainer(max_steps=4, max_epochs=None).fit(FindNet(_recipe()), loader, ckpt_path=ckpt)


def test_gradient_accumulation_warns_that_the_sweep_steps_on_a_smaller_batch():
    model = FindNet(_recipe())
    trainer = fast_trainer(max_steps=2, max_epochs=None, accumulate_grad_batches=2)
    with pytest.warns(UserWarning, match=r"once per 2 accumulated batches, so the found LR .* 2x smaller"):
        trainer.fit(model, random_classification_loader(num_samples=128))
    assert model.found_lr == model.lr_find_result.peak_lr  # still used as found


def test_manual_optimisation_and_no_training_batch_are_clear_errors():
    manual = FindNet(_recipe())
    manual.automatic_optimization = False  # refused at the start of fit, before a training step
    with pytest.raises(ValueError, match=r"`lr='find'`.*manual optimisation. Set a numeric `lr`"):
        fast_trainer(max_steps=2).fit(manual, random_classification_loader(num_samples=64))
    empty = DataLoader(TensorDataset(torch.zeros(0, 16), torch.zeros(0, dtype=torch.long)), batch_size=4)
    with pytest.raises(ValueError, match=r"`lr='find'` runs an LR range test .*training loader yielded no"):
        fast_trainer(max_steps=2, max_epochs=None).fit(FindNet(_recipe()), empty)


class RecordFoundLR(pl.Callback):
    """Gathers each rank's LR at train start and writes what rank zero saw ."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        mine = torch.tensor([max(_peak_lrs(trainer)), pl_module.found_lr], dtype=torch.float64)
        gathered = pl_module.all_gather(mine)
        record = {"gathered": gathered.tolist(), "steps": len(pl_module.lr_find_result.lrs)}
        (Path(self.folder) / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))


def test_ddp_every_rank_trains_at_the_same_found_lr(tmp_path):
    """Ranks with shards 30x apart agree: the sweep averages gradients and loss every step."""
    assert pickle.loads(pickle.dumps(FindNet(_recipe()))).recipe == _recipe()
    base = random_classification_loader(num_samples=128).dataset
    inputs, labels = base.tensors
    scale = torch.ones(len(labels), 1)
    scale[1::2] = 30.0
    loader = DataLoader(TensorDataset(inputs * scale, labels), batch_size=32)
    model = FindNet(_recipe(lr_find={"num_steps": 30}))
    callbacks = [RecordFoundLR(str(tmp_path))]
    trainer = fast_trainer(max_steps=2, max_epochs=None, strategy="ddp_fork", devices=2, callbacks=callbacks)
    trainer.fit(model, loader)
    records = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert records[0]["gathered"] == records[1]["gathered"]
    (lr0, found0), (lr1, found1) = records[0]["gathered"]
    assert lr0 == lr1 == found0 == found1 > 0
    assert records[0]["steps"] == records[1]["steps"] > 10
