"""Strategy presets (DDP, FSDP, FSDP2, DeepSpeed), registered as ``recipes_<name>`` in Lightning's
``StrategyRegistry``, a memory estimator and a strategy recommender.

Example:
    >>> import lightning.pytorch as pl
    >>> trainer = pl.Trainer(strategy="recipes_ddp", accelerator="cpu", devices=1, logger=False)
    >>> type(trainer.strategy).__name__
    'RecipesDDPStrategy'
"""

from lightning_recipes._blocks import (
    describe_blocks,
    find_blocks,
    infer_block_classes,
    outermost_blocks,
    resolve_block_classes,
)
from lightning_recipes.strategies._host import available_host_memory
from lightning_recipes.strategies._layout import MemoryLayout
from lightning_recipes.strategies.activation_checkpointing import (
    ActivationCheckpointingMixin,
    checkpoint_blocks,
    checkpointed_blocks,
    disable_hf_kv_cache,
)
from lightning_recipes.strategies.ddp import RecipesDDPStrategy
from lightning_recipes.strategies.deepspeed_config import (
    DEEPSPEED_INSTALL_HINT,
    deepspeed_available,
    reconcile_deepspeed_config,
    validate_deepspeed_config,
)
from lightning_recipes.strategies.deepspeed_strategy import RecipesDeepSpeedStrategy
from lightning_recipes.strategies.fsdp import LazyBlockPolicy, RecipesFSDPPrecision, RecipesFSDPStrategy
from lightning_recipes.strategies.fsdp2 import (
    FSDP2Mixin,
    RecipesFSDP2Strategy,
    apply_fsdp2,
    mixed_precision_policy,
)
from lightning_recipes.strategies.memory import (
    MemoryEstimate,
    StepMemory,
    estimate_memory,
    measure_step_memory,
)
from lightning_recipes.strategies.presets import PRESETS, Preset, preset, register_presets
from lightning_recipes.strategies.recommend import Recommendation, recommend_strategy

register_presets()

__all__ = [
    "DEEPSPEED_INSTALL_HINT",
    "PRESETS",
    "ActivationCheckpointingMixin",
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
    "StepMemory",
    "apply_fsdp2",
    "available_host_memory",
    "checkpoint_blocks",
    "checkpointed_blocks",
    "deepspeed_available",
    "describe_blocks",
    "disable_hf_kv_cache",
    "estimate_memory",
    "find_blocks",
    "infer_block_classes",
    "measure_step_memory",
    "mixed_precision_policy",
    "outermost_blocks",
    "preset",
    "recommend_strategy",
    "reconcile_deepspeed_config",
    "register_presets",
    "resolve_block_classes",
    "validate_deepspeed_config",
]
