"""Strategy presets (DDP, FSDP, FSDP2, DeepSpeed), a memory estimator and a strategy recommender.

Importing this package registers every preset in Lightning's ``StrategyRegistry`` as ``recipes_<name>``.

Example:
    >>> import lightning.pytorch as pl
    >>> from lightning_recipes.strategies import PRESETS
    >>> trainer = pl.Trainer(strategy="recipes_ddp", accelerator="cpu", devices=1, logger=False)
    >>> type(trainer.strategy).__name__, PRESETS["ddp"].defaults
    ('RecipesDDPStrategy', {'gradient_as_bucket_view': True})
"""

from lightning_recipes.strategies._blocks import LazyBlockPolicy, infer_block_classes
from lightning_recipes.strategies._layout import MemoryLayout
from lightning_recipes.strategies.ddp import RecipesDDPStrategy
from lightning_recipes.strategies.deepspeed_config import (
    DEEPSPEED_INSTALL_HINT,
    deepspeed_available,
    reconcile_deepspeed_config,
    validate_deepspeed_config,
)
from lightning_recipes.strategies.deepspeed_strategy import RecipesDeepSpeedStrategy
from lightning_recipes.strategies.fsdp import RecipesFSDPPrecision, RecipesFSDPStrategy
from lightning_recipes.strategies.fsdp2 import (
    FSDP2Mixin,
    RecipesFSDP2Strategy,
    apply_fsdp2,
    mixed_precision_policy,
)
from lightning_recipes.strategies.memory import MemoryEstimate, estimate_memory
from lightning_recipes.strategies.presets import PRESETS, Preset, preset, register_presets
from lightning_recipes.strategies.recommend import Recommendation, recommend_strategy

register_presets()

__all__ = [
    "DEEPSPEED_INSTALL_HINT",
    "PRESETS",
    "FSDP2Mixin",
    "LazyBlockPolicy",
    "MemoryEstimate",
    "MemoryLayout",
    "Preset",
    "RecipesDDPStrategy",
    "RecipesDeepSpeedStrategy",
    "RecipesFSDP2Strategy",
    "RecipesFSDPPrecision",
    "RecipesFSDPStrategy",
    "Recommendation",
    "apply_fsdp2",
    "deepspeed_available",
    "estimate_memory",
    "infer_block_classes",
    "mixed_precision_policy",
    "preset",
    "recommend_strategy",
    "reconcile_deepspeed_config",
    "register_presets",
    "validate_deepspeed_config",
]
