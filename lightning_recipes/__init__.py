"""lightning_recipes: training know-how for PyTorch Lightning as parts that drop into a Trainer.

Importing the package also registers the strategy presets in Lightning's ``StrategyRegistry``
(``Trainer(strategy="recipes_ddp")``) and makes the short class names usable from LightningCLI.

Example:
    >>> import lightning_recipes
    >>> lightning_recipes.__version__
    '0.1.0'
    >>> from lightning_recipes import GradNormMonitor, LionRecipe, preflight, preset  # the public API
"""

from lightning_recipes.callbacks import (
    AdaptiveGradClip,
    BatchIndependenceCheck,
    DataCheck,
    EarlyStopping,
    GradFlowCheck,
    GradNormMonitor,
    InitLossCheck,
    InputIndependenceCheck,
    InputPipelineMonitor,
    OverfitBatchCheck,
    Preflight,
    RunManifest,
    StabilityGuard,
)
from lightning_recipes.data import CharLMDataModule, DigitsDataModule
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
from lightning_recipes.preflight import CheckResult, PreflightError, PreflightReport, preflight
from lightning_recipes.recipe import OptimizerRecipe
from lightning_recipes.strategies import (
    FSDP2Mixin,
    MemoryEstimate,
    RecipesDeepSpeedStrategy,
    RecipesFSDP2Strategy,
    RecipesFSDPStrategy,
    Recommendation,
    apply_fsdp2,
    estimate_memory,
    preset,
    recommend_strategy,
)

__version__ = "0.1.0"

__all__ = [
    "AdamWRecipe",
    "AdaptiveGradClip",
    "BatchIndependenceCheck",
    "CharLMDataModule",
    "CheckResult",
    "DataCheck",
    "DigitsDataModule",
    "EarlyStopping",
    "FSDP2Mixin",
    "GradFlowCheck",
    "GradNormMonitor",
    "InitLossCheck",
    "InputIndependenceCheck",
    "InputPipelineMonitor",
    "Lamb",
    "LambRecipe",
    "Lion",
    "LionRecipe",
    "MemoryEstimate",
    "OptimizerRecipe",
    "OptimizerRecipeMixin",
    "OverfitBatchCheck",
    "Preflight",
    "PreflightError",
    "PreflightReport",
    "RecipesDeepSpeedStrategy",
    "RecipesFSDP2Strategy",
    "RecipesFSDPStrategy",
    "Recommendation",
    "RunManifest",
    "StabilityGuard",
    "__version__",
    "apply_fsdp2",
    "build_optimizer",
    "build_scheduler",
    "estimate_memory",
    "lamb_update_",
    "lion_update_",
    "param_groups",
    "preflight",
    "preset",
    "recommend_strategy",
    "scale_lr",
    "warmup_constant",
    "warmup_cosine",
    "warmup_linear",
    "warmup_stable_decay",
]
