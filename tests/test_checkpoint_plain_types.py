"""Checkpoints of runs with our mixins and stateful callbacks hold plain types only and resume."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from lightning_recipes import BatchMixer, OptimizerRecipe, Preflight
from lightning_recipes.callbacks import (
    AdaptiveGradClip,
    EarlyStopping,
    FinetuneSchedule,
    GradNormMonitor,
    HealthMonitor,
    InitLossCheck,
    InputPipelineMonitor,
    RunManifest,
    StabilityGuard,
)
from lightning_recipes.losses import mixed_cross_entropy
from lightning_recipes.mixing import BatchMixingMixin
from lightning_recipes.mixins import OptimizerRecipeMixin
from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
from lightning_recipes.tune import LRRangeTest

# Loads the checkpoint with `lightning_recipes` unimportable (None in sys.modules makes `import` raise), in
# isolated mode (no PYTHONPATH, no user site), and lists any of our modules that got imported anyway.
_LOAD_WITHOUT_US = """
import sys
sys.modules["lightning_recipes"] = None
import torch
checkpoint = torch.load(sys.argv[1], weights_only=True)
ours = sorted(m for m, v in sys.modules.items() if m.startswith("lightning_recipes") and v is not None)
print("loaded", sorted(checkpoint), "ours:", ours)
"""


_PLAIN = (dict, list, tuple, str, int, float, bool, type(None), torch.Tensor, torch.Size, torch.dtype)


def _not_plain(value: Any, where: str) -> list[str]:
    """Where ``value`` holds anything but plain types (exact types: no subclass of ours slips through)."""
    if type(value) not in _PLAIN and not isinstance(value, (torch.Tensor, dict)):
        return [f"{where}: {type(value).__module__}.{type(value).__qualname__}"]
    if isinstance(value, dict):
        return [bad for key, item in value.items() for bad in _not_plain(item, f"{where}[{key!r}]")]
    if isinstance(value, (list, tuple)):
        return [bad for index, item in enumerate(value) for bad in _not_plain(item, f"{where}[{index}]")]
    return []


class PortableModel(OptimizerRecipeMixin, BatchMixingMixin, TinyClassifier):
    def __init__(self, recipe: OptimizerRecipe | None = None, batch_mixer: BatchMixer | None = None) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.recipe = recipe
        self.batch_mixer = batch_mixer

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch  # y: soft targets from the mixer
        return mixed_cross_entropy(self(x), y)


def _callbacks() -> list[Any]:
    return [
        StabilityGuard(check_every_n_steps=2, snapshot_every_n_steps=2, spike_warmup_steps=2),
        EarlyStopping("val_loss", patience=5),
        RunManifest(fingerprint_batches=1),
        HealthMonitor(),
        AdaptiveGradClip(),
        GradNormMonitor(),
        InputPipelineMonitor(),
        FinetuneSchedule(["hidden"], unfreeze_at_step=2),
        InitLossCheck(),
        Preflight(checks=["init_loss"], print_report=False, progress=False),
        LRRangeTest(num_steps=10, print_result=False),
    ]


def _model(**recipe: Any) -> PortableModel:
    """Lion with ``recipe`` (by default, its LR found by a sweep) and a mixer."""
    recipe = recipe or {"lr": "find", "lr_find": {"num_steps": 30}, "warmup_steps": 1}
    mixer = BatchMixer(mixup_alpha=0.4, num_classes=4)
    return PortableModel(OptimizerRecipe(optimizer="lion", **recipe), mixer)


def _fit(model: PortableModel, tmp_path: Path, max_steps: int, ckpt_path: Path | None = None) -> Any:
    settings = {"max_epochs": 10, "default_root_dir": tmp_path, "val_check_interval": 2}
    trainer = fast_trainer(max_steps=max_steps, callbacks=_callbacks(), **settings)
    train = random_classification_loader(num_samples=64, batch_size=8)
    val = random_classification_loader(num_samples=16, batch_size=8)
    trainer.fit(model, train, val, ckpt_path=ckpt_path)
    return trainer


def test_checkpoint_loads_without_lightning_recipes_and_resumes(tmp_path: Path) -> None:
    model = _model()
    trainer = _fit(model, tmp_path, max_steps=4)
    path = tmp_path / "run.ckpt"
    trainer.save_checkpoint(path)

    command = [sys.executable, "-I", "-c", _LOAD_WITHOUT_US, str(path)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "ours: []" in result.stdout

    checkpoint = torch.load(path, weights_only=True)
    assert _not_plain(torch.load(path, weights_only=False), "checkpoint") == []  # no numpy scalar either
    assert checkpoint["hyper_parameters"]["recipe"] == model.recipe.to_dict()
    assert checkpoint["hyper_parameters"]["batch_mixer"] == model.batch_mixer.to_dict()

    resumed = _model()
    _fit(resumed, tmp_path, max_steps=6, ckpt_path=path)
    assert resumed.found_lr == model.found_lr  # the found LR came back: no new sweep
    assert resumed.recipe_summary["lr_find"]["source"] == "restored"
    assert resumed.batch_mixer is not None and resumed.batch_mixer.num_batches == 6

    loaded = PortableModel.load_from_checkpoint(path, weights_only=True)
    assert loaded.recipe == model.recipe  # rebuilt: an OptimizerRecipe again, not a dict
    assert isinstance(loaded.batch_mixer, BatchMixer)
    assert loaded.batch_mixer.to_dict() == model.batch_mixer.to_dict()
    assert loaded.found_lr == model.found_lr


def test_a_checkpoint_that_pickled_the_recipe_and_mixer_still_loads(tmp_path: Path) -> None:
    """Checkpoints that pickled the recipe and mixer objects still load (weights_only=True) and resume."""
    model = _model(lr=1e-3)
    trainer = _fit(model, tmp_path, max_steps=2)
    path = tmp_path / "old.ckpt"
    trainer.save_checkpoint(path)
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["hyper_parameters"] = {"recipe": model.recipe, "batch_mixer": model.batch_mixer}  # old layout
    checkpoint.pop("lightning_recipes/hparams_types")
    torch.save(checkpoint, path)
    loaded = PortableModel.load_from_checkpoint(path, weights_only=True)
    assert loaded.recipe == model.recipe and isinstance(loaded.batch_mixer, BatchMixer)
    resumed = _model(lr=1e-3)
    _fit(resumed, tmp_path, max_steps=3, ckpt_path=path)
    assert resumed.batch_mixer is not None and resumed.batch_mixer.num_batches == 3
