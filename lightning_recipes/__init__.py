"""lightning_recipes: training know-how for PyTorch Lightning as parts that drop into a Trainer.

Importing the package registers the strategy presets in Lightning's ``StrategyRegistry``
(``Trainer(strategy="recipes_ddp")``) and imports the callbacks, optimizers and data modules, so that their
short class names are usable from LightningCLI. Every other public name is imported on first use (PEP 562).

Example:
    >>> import lightning_recipes
    >>> lightning_recipes.__version__
    '0.3.0'
    >>> from lightning_recipes import GradNormMonitor, LionRecipe, preflight, preset  # the public API
"""

# ruff: noqa: F401  (the TYPE_CHECKING imports at the end are the names of `__all__`)

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

__version__ = "0.3.0"

# `lightning-recipes --help`, `--version` and a mistake in its arguments are answered here, before torch is
# imported (the command's process only; anywhere else this returns at once)
from lightning_recipes.cli import answer_before_importing_torch

answer_before_importing_torch()


def _public_names() -> dict[str, str]:
    """Every public name -> its wing: the ``if TYPE_CHECKING:`` imports at the end of this file, read from its
    source (one list, for mypy and for the lazy ``__getattr__`` below)."""
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    block = next(
        node for node in tree.body if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING"
    )
    return {
        alias.name: node.module
        for node in block.body
        if isinstance(node, ast.ImportFrom) and node.module
        for alias in node.names
    }


_HOME = _public_names()
__all__ = sorted(["__version__", *_HOME], key=lambda name: (not name.isupper(), name))

# imported now, for their side effects: the presets' registration, LightningCLI's short class names
for _wing in ("strategies", "callbacks", "optim", "data"):
    importlib.import_module(f"lightning_recipes.{_wing}")
del _wing


def __getattr__(name: str) -> Any:
    """A public name's object, its wing imported on first use (PEP 562)."""
    if name not in _HOME:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME[name]), name)
    globals()[name] = value  # the next read is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:  # the public names, their wings: for mypy, and read by `_HOME` above
    from lightning_recipes._deprecation import LightningRecipesDeprecationWarning
    from lightning_recipes.callbacks import (
        AdaptiveGradClip,
        EarlyStopping,
        FinetuneSchedule,
        GradNormMonitor,
        HealthMonitor,
        InputPipelineMonitor,
        RunManifest,
        StabilityGuard,
    )
    from lightning_recipes.checks import (  # every class of checks.CHECKS (tests/checks/test_exports.py)
        BatchIndependenceCheck,
        CausalityCheck,
        CheckResult,
        DataCheck,
        EvalModeCheck,
        GradFlowCheck,
        InitLossCheck,
        InputIndependenceCheck,
        LoaderCheck,
        LossCheck,
        OptimizationCheck,
        OverfitBatchCheck,
        PaddingCheck,
        Preflight,
        PreflightError,
        PreflightReport,
        SanityCheck,
        ScheduleCheck,
        SplitOverlapCheck,
        TargetLeakageCheck,
        ValidationPathCheck,
        preflight,
    )
    from lightning_recipes.data import CharLMDataModule, DigitsDataModule
    from lightning_recipes.losses import mixed_cross_entropy
    from lightning_recipes.mixing import BatchMixer, BatchMixingMixin
    from lightning_recipes.mixins import AdamWRecipe, LambRecipe, LionRecipe, OptimizerRecipeMixin
    from lightning_recipes.optim import (
        Lamb,
        Lion,
        build_optimizer,
        build_scheduler,
        lamb_update_,
        lion_update_,
        param_groups,
        scale_lr,
        warmup_constant,
        warmup_cosine,
        warmup_linear,
        warmup_stable_decay,
    )
    from lightning_recipes.recipe import OptimizerRecipe
    from lightning_recipes.strategies import (
        PRESETS,
        FSDP2Mixin,
        MemoryEstimate,
        Preset,
        RecipesDDPStrategy,
        RecipesDeepSpeedStrategy,
        RecipesFSDP2Strategy,
        RecipesFSDPStrategy,
        Recommendation,
        apply_fsdp2,
        estimate_memory,
        preset,
        recommend_strategy,
    )
    from lightning_recipes.tune import LRRangeResult, LRRangeTest, SpeedTuneResult, find_lr, speed_tune
