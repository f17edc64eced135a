"""Recipe mixins through real Trainers: optimizer choice and precedence, schedule stepping and exact resume,
LR scaling, rank-zero summary, DDP global batch, LightningCLI YAML."""

from __future__ import annotations

import logging

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, LearningRateMonitor
from torch import nn
from torch.nn import functional as F

from lightning_recipes import preflight
from lightning_recipes.mixins import AdamWRecipe, LambRecipe, LionRecipe, OptimizerRecipeMixin
from lightning_recipes.optim import Lamb, Lion
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.testing import (
    InMemoryLogger,
    TinyClassifier,
    fast_trainer,
    random_classification_loader,
)


class RecipeNet(OptimizerRecipeMixin, pl.LightningModule):
    """A small classifier configured only through its recipe (module level: LightningCLI imports it)."""

    def __init__(self, recipe: OptimizerRecipe | None = None, width: int = 16) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.recipe = recipe
        self.net = nn.Sequential(nn.Linear(16, width), nn.LayerNorm(width), nn.ReLU(), nn.Linear(width, 4))

    def forward(self, x):
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss)
        return loss


class _LrRecorder(Callback):
    def __init__(self, stop_at: int | None = None) -> None:
        self.lrs: list[float] = []
        self.stop_at = stop_at

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.lrs.append(trainer.optimizers[0].param_groups[0]["lr"])

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if self.stop_at is not None and trainer.global_step == self.stop_at:
            trainer.should_stop = True


def _loader():
    return random_classification_loader(num_samples=96, batch_size=32)  # 3 batches per epoch


def test_precedence_recipe_over_hparams_over_defaults():
    model = RecipeNet()
    model.save_hyperparameters({"lr": 0.02, "weight_decay": 0.3, "optimizer": "lamb"})

    def pick(resolved, *keys):
        return tuple(resolved[key] for key in keys)

    assert pick(model.resolve_recipe(), "optimizer", "lr", "weight_decay", "eps") == ("lamb", 0.02, 0.3, 1e-6)
    model.recipe = OptimizerRecipe(optimizer="lion", weight_decay=1.0)
    resolved = model.resolve_recipe()
    assert pick(resolved, "optimizer", "lr", "weight_decay", "betas") == ("lion", 0.02, 1.0, (0.9, 0.99))
    model.recipe = {"lr": 0.5}  # a dict (e.g. from a checkpoint's hparams) works too
    assert model.resolve_recipe()["lr"] == 0.5
    defaults = RecipeNet().resolve_recipe()
    assert pick(defaults, "optimizer", "lr", "schedule", "warmup_ratio") == ("adamw", 1e-3, "cosine", 0.05)
    assert defaults["warmup_steps"] is None  # issue 13: the fraction is `warmup_ratio` now


@pytest.mark.parametrize(
    ("mixin", "expected"), [(AdamWRecipe, torch.optim.AdamW), (LionRecipe, Lion), (LambRecipe, Lamb)]
)
def test_each_mixin_trains_with_its_optimizer_and_a_step_schedule(mixin, expected, caplog):
    class Net(mixin, RecipeNet):  # type: ignore[misc, valid-type]
        pass

    logger = InMemoryLogger()
    model = Net(recipe=OptimizerRecipe(warmup_steps=2, min_lr_ratio=0.1))
    callbacks = [LearningRateMonitor("step")]
    trainer = fast_trainer(max_steps=6, max_epochs=2, logger=logger, log_every_n_steps=1, callbacks=callbacks)
    with caplog.at_level(logging.INFO):
        trainer.fit(model, _loader())
    optimizer = trainer.optimizers[0]
    assert type(optimizer) is expected
    if expected is torch.optim.AdamW:
        assert optimizer.defaults["fused"] is True
    assert [g["name"] for g in optimizer.param_groups] == ["decay", "no_decay"]
    assert trainer.lr_scheduler_configs[0].interval == "step"
    name = expected.__name__
    peak = model.recipe_summary["peak_lr"]
    assert logger.values(f"lr-{name}/decay")[:3] == pytest.approx([0.0, peak / 2, peak])
    assert logger.values(f"lr-{name}/no_decay") == logger.values(f"lr-{name}/decay")
    summary = model.recipe_summary  # what the one log line says
    assert (summary["global_batch_size"], summary["warmup_steps"], summary["total_steps"]) == (32, 2, 6)
    groups = [(g["name"], g["params"], g["tensors"], g["weight_decay"] > 0) for g in summary["groups"]]
    assert groups == [("decay", 320, 2, True), ("no_decay", 52, 4, False)]
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("lightning_recipes:")]
    assert len(lines) == 1 and lines[0].startswith(f"lightning_recipes: {name} (") and "320" in lines[0]


@pytest.mark.parametrize("optimizer", ["adamw", "lamb"])
def test_fit_then_resume_continues_the_schedule_exactly(tmp_path, optimizer):
    recipe = OptimizerRecipe(optimizer=optimizer, lr=0.01, warmup_steps=3, min_lr_ratio=0.1)

    def trainer_with(callback):
        return fast_trainer(max_epochs=4, callbacks=[callback], default_root_dir=tmp_path)

    torch.manual_seed(0)
    full_model, full = RecipeNet(recipe), _LrRecorder()
    trainer_with(full).fit(full_model, _loader())
    assert len(full.lrs) == 12

    torch.manual_seed(0)
    first_model, first = RecipeNet(recipe), _LrRecorder(stop_at=6)
    interrupted = trainer_with(first)
    interrupted.fit(first_model, _loader())
    interrupted.save_checkpoint(tmp_path / "stop.ckpt")
    assert interrupted.global_step == 6

    torch.manual_seed(1)  # different initial weights: everything must come from the checkpoint
    resumed_model, resumed = RecipeNet(recipe), _LrRecorder()
    resumed_trainer = trainer_with(resumed)
    resumed_trainer.fit(resumed_model, _loader(), ckpt_path=tmp_path / "stop.ckpt")
    assert resumed_trainer.lr_scheduler_configs[0].scheduler.last_epoch == 12
    assert first.lrs + resumed.lrs == full.lrs
    for a, b in zip(full_model.parameters(), resumed_model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


@pytest.mark.parametrize(("rule", "peak_lr"), [("linear", 0.04), ("sqrt", 0.02)])
def test_scale_lr_uses_the_global_batch_with_accumulation(rule, peak_lr):
    """64 = 32 x 2 accumulated; under DDP the processes count too (tests/test_recipe_batch_size.py)."""
    model = RecipeNet(OptimizerRecipe(lr=0.01, scale_lr=rule, base_batch_size=16, schedule="none"))
    trainer = fast_trainer(max_steps=2, accumulate_grad_batches=2)
    trainer.fit(model, _loader())
    assert model.recipe_summary["global_batch_size"] == 64
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(peak_lr)
    assert trainer.lr_scheduler_configs == []


@pytest.mark.parametrize(
    ("recipe", "trainer_kwargs", "error", "match"),
    [
        (OptimizerRecipe(), {"max_steps": -1, "max_epochs": -1}, ValueError, "needs a finite run"),
        (OptimizerRecipe(scale_lr="linear"), {"max_steps": 2}, ValueError, "`base_batch_size`"),
        ({"lr": -1.0}, {"max_steps": 2}, ValueError, "`lr`"),  # a dict recipe (hparams.yaml) is checked
        (OptimizerRecipe(warmup_steps=5), {"max_steps": 2}, ValueError, r"total_steps=2\]"),
        ("lion", {"max_steps": 2}, TypeError, "`recipe`"),
    ],
)
def test_configuration_errors_are_clear(recipe, trainer_kwargs, error, match):
    model = RecipeNet()
    model.recipe = recipe  # type: ignore[assignment]
    with pytest.raises(error, match=match):
        fast_trainer(**trainer_kwargs).fit(model, _loader())


class LionClassifier(LionRecipe, TinyClassifier):
    pass


def test_configure_optimizers_outside_a_trainer_returns_the_recipe_optimizer_at_peak_lr():
    model = LionClassifier()
    model.recipe = OptimizerRecipe(lr=2e-4, weight_decay=0.3)
    optimizer = model.configure_optimizers()
    assert isinstance(optimizer, Lion)
    assert [g["name"] for g in optimizer.param_groups] == ["decay", "no_decay"]
    assert [g["lr"] for g in optimizer.param_groups] == [2e-4, 2e-4]
    assert [g["weight_decay"] for g in optimizer.param_groups] == [0.3, 0.0]


def test_preflight_uses_the_recipe_optimizer():
    loader = random_classification_loader()
    report = preflight(LionClassifier(lr=1e-3), train_dataloaders=loader, checks=["overfit_batch"])
    assert report["overfit_batch"].details["optimizer"] == ["Lion"], report["overfit_batch"].details


@pytest.mark.parametrize(
    ("mixin", "recipe", "hparams", "warns"),
    [
        (LionRecipe, OptimizerRecipe(optimizer="adamw"), {}, "recipe sets `optimizer='adamw'`"),
        (LambRecipe, None, {"optimizer": "lion"}, "LambRecipe but its hparams sets `optimizer='lion'`"),
        (AdamWRecipe, OptimizerRecipe(optimizer="lamb"), {}, "trains Lamb, not AdamW"),
        (LionRecipe, OptimizerRecipe(optimizer="lion"), {}, None),  # says what the class says
        (OptimizerRecipeMixin, OptimizerRecipe(optimizer="lion"), {}, None),  # names none: free choice
    ],
)
def test_a_named_mixin_told_another_optimizer_trains_it_and_says_so(mixin, recipe, hparams, warns, recwarn):
    from lightning_recipes import _warn_once

    _warn_once._SAID.clear()
    model = type("Net", (mixin, pl.LightningModule), {})()
    model.recipe = recipe
    model.save_hyperparameters(hparams)
    resolved = model.resolve_recipe()
    messages = [str(w.message) for w in recwarn if "derive from OptimizerRecipeMixin" in str(w.message)]
    assert len(messages) == (warns is not None)  # once, and only when the class's name is overridden
    if warns is not None:
        assert warns in messages[0] and resolved["optimizer"] != mixin.default_optimizer
