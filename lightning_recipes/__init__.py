"""lightning_recipes: training know-how for PyTorch Lightning as parts that drop into a Trainer.

Importing the package also registers the strategy presets in Lightning's ``StrategyRegistry``
(``Trainer(strategy="recipes_ddp")``) and makes the short class names usable from LightningCLI.

Example:
    >>> import lightning_recipes
    >>> lightning_recipes.__version__
    '0.3.0'
    >>> from lightning_recipes import GradNormMonitor, LionRecipe, preflight, preset  # the public API
"""

# ruff: noqa: E402  (the imports below come after the command-line fast path)

__version__ = "0.3.0"

# `lightning-recipes --help`, `--version` and a mistake in its arguments are answered here, before torch is
# imported (the command's process only; anywhere else this returns at once)
from lightning_recipes.cli import answer_before_importing_torch

answer_before_importing_torch()

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
from lightning_recipes.checks import (  # every check class of checks.CHECKS (tests/checks/test_exports.py)
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
    TrainingPairsCheck,
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

__all__ = [
    "PRESETS",
    "AdamWRecipe",
    "AdaptiveGradClip",
    "BatchIndependenceCheck",
    "BatchMixer",
    "BatchMixingMixin",
    "CausalityCheck",
    "CharLMDataModule",
    "CheckResult",
    "DataCheck",
    "DigitsDataModule",
    "EarlyStopping",
    "EvalModeCheck",
    "FSDP2Mixin",
    "FinetuneSchedule",
    "GradFlowCheck",
    "GradNormMonitor",
    "HealthMonitor",
    "InitLossCheck",
    "InputIndependenceCheck",
    "InputPipelineMonitor",
    "LRRangeResult",
    "LRRangeTest",
    "Lamb",
    "LambRecipe",
    "LightningRecipesDeprecationWarning",
    "Lion",
    "LionRecipe",
    "LoaderCheck",
    "LossCheck",
    "MemoryEstimate",
    "OptimizationCheck",
    "OptimizerRecipe",
    "OptimizerRecipeMixin",
    "OverfitBatchCheck",
    "PaddingCheck",
    "Preflight",
    "PreflightError",
    "PreflightReport",
    "Preset",
    "RecipesDDPStrategy",
    "RecipesDeepSpeedStrategy",
    "RecipesFSDP2Strategy",
    "RecipesFSDPStrategy",
    "Recommendation",
    "RunManifest",
    "SanityCheck",
    "ScheduleCheck",
    "SpeedTuneResult",
    "SplitOverlapCheck",
    "StabilityGuard",
    "TargetLeakageCheck",
    "TrainingPairsCheck",
    "ValidationPathCheck",
    "__version__",
    "apply_fsdp2",
    "build_optimizer",
    "build_scheduler",
    "estimate_memory",
    "find_lr",
    "lamb_update_",
    "lion_update_",
    "mixed_cross_entropy",
    "param_groups",
    "preflight",
    "preset",
    "recommend_strategy",
    "scale_lr",
    "speed_tune",
    "warmup_constant",
    "warmup_cosine",
    "warmup_linear",
    "warmup_stable_decay",
]
