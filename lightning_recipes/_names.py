"""The names users choose from (optimizers, schedules, precisions, strategy presets and their ladders) and
the preflight's default time budget, written once, without torch (the command line reads them before it).

Example:
    >>> OPTIMIZERS["lion"].state_tensors, RECIPE_OPTIMIZERS, LADDERS["fsdp2"]
    (1, ('adamw', 'lion', 'lamb'), ('ddp', 'fsdp2'))
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, get_args

__all__ = [
    "DEFAULT_TIME_BUDGET",
    "LADDERS",
    "OPTIMIZERS",
    "PRECISIONS",
    "PRESET_ROWS",
    "RECIPE_OPTIMIZERS",
    "SCHEDULES",
    "OptimizerName",
    "OptimizerSpec",
    "ScheduleName",
]

#: The optimizers :class:`~lightning_recipes.OptimizerRecipe` and ``build_optimizer`` accept.
OptimizerName = Literal["adamw", "lion", "lamb"]
#: The schedules ``OptimizerRecipe(schedule=...)`` and ``build_scheduler`` accept.
ScheduleName = Literal["cosine", "linear", "constant", "wsd", "none"]
#: The values of :data:`OptimizerName`, in display order.
RECIPE_OPTIMIZERS: tuple[str, ...] = get_args(OptimizerName)
#: The values of :data:`ScheduleName`.
SCHEDULES: tuple[str, ...] = get_args(ScheduleName)


@dataclass(frozen=True)
class OptimizerSpec:
    """One optimizer: the ``name`` users write, the ``class_name`` built, the ``state_tensors``
    (parameter-shaped) and ``step_bytes`` (scalar state) kept per tensor, the recipe's ``defaults``."""

    name: str
    class_name: str
    state_tensors: int
    step_bytes: int
    defaults: Mapping[str, Any] = field(default_factory=dict)

    @property
    def in_recipe(self) -> bool:
        """Whether :class:`~lightning_recipes.OptimizerRecipe` and ``build_optimizer`` accept this name."""
        return self.name in RECIPE_OPTIMIZERS


def _spec(name: str, class_name: str, states: int, step_bytes: int, **defaults: Any) -> OptimizerSpec:
    return OptimizerSpec(name, class_name, states, step_bytes, MappingProxyType(defaults))


# Lion: lr 10x lower, weight decay 10x higher than AdamW's (Chen et al. 2023, section 5); Lamb: BERT's.
#: Every optimizer name -> its :class:`OptimizerSpec`: the recipe's three, then the memory estimator's.
OPTIMIZERS: Mapping[str, OptimizerSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            _spec("adamw", "AdamW", 2, 4, lr=1e-3, weight_decay=0.05, betas=(0.9, 0.999), eps=1e-8),
            _spec("lion", "Lion", 1, 0, lr=1e-4, weight_decay=0.5, betas=(0.9, 0.99), eps=None),
            _spec("lamb", "Lamb", 2, 4, lr=1e-3, weight_decay=0.01, betas=(0.9, 0.999), eps=1e-6),
            # the memory estimator's only: torch.optim's, as their `state` holds them after a step
            _spec("adam", "Adam", 2, 4),
            _spec("sgd_momentum", "SGD", 1, 0),
            _spec("sgd", "SGD", 0, 0),
            _spec("rmsprop", "RMSprop", 1, 4),
            _spec("rmsprop_momentum", "RMSprop", 2, 4),  # momentum > 0 or centered=True: a second tensor
            _spec("adagrad", "Adagrad", 1, 4),
            _spec("adadelta", "Adadelta", 2, 4),
            _spec("adamax", "Adamax", 2, 4),
            _spec("nadam", "NAdam", 2, 8),  # step + mu_product
            _spec("radam", "RAdam", 2, 4),
            _spec("asgd", "ASGD", 1, 12),  # step, eta, mu
        )
    }
)

#: Lightning's precision values the memory estimator knows.
PRECISIONS = ("32-true", "32", "64-true", "16-mixed", "bf16-mixed", "16-true", "bf16-true")

#: Each strategy family's ladder of presets, simplest first: what ``recommend_strategy`` climbs.
LADDERS: dict[str, tuple[str, ...]] = {
    "fsdp": ("ddp", "fsdp_shard_grad_op", "fsdp_hybrid", "fsdp_full_shard", "fsdp_offload"),
    "fsdp2": ("ddp", "fsdp2"),
    "deepspeed": (
        "ddp",
        "deepspeed_zero1",
        "deepspeed_zero2",
        "deepspeed_zero3",
        "deepspeed_zero2_offload",
        "deepspeed_zero3_offload",
    ),
}

#: The strategy presets, name -> (engine, the strategy's default arguments, description): the rows
#: ``strategies.PRESETS`` is built from.
PRESET_ROWS: dict[str, tuple[str, dict[str, Any], str]] = {
    "ddp": ("ddp", {}, "DDP; gradients are views into the all-reduce buckets (no second copy)"),
    "ddp_spawn": (
        "ddp",
        {"start_method": "spawn"},
        "DDP in spawned worker processes (CPU scripts); workers destroy the gloo group before they exit",
    ),
    "ddp_static_graph": (
        "ddp",
        {"static_graph": True},
        "DDP with static_graph=True (same graph every step: faster, allows reentrant checkpointing)",
    ),
    "fsdp_full_shard": (
        "fsdp",
        {"sharding_strategy": "FULL_SHARD"},
        "FSDP1 ZeRO-3: parameters, gradients, optimizer state sharded; blocks wrapped and checkpointed",
    ),
    "fsdp_shard_grad_op": (
        "fsdp",
        {"sharding_strategy": "SHARD_GRAD_OP"},
        "FSDP1 ZeRO-2: gradients and optimizer state sharded, parameters kept between forward and backward",
    ),
    "fsdp_hybrid": (
        "fsdp",
        {"sharding_strategy": "HYBRID_SHARD"},
        "FSDP1 hybrid: full shard within a node, replicated across nodes (less inter-node traffic)",
    ),
    "fsdp_offload": (
        "fsdp",
        {"sharding_strategy": "FULL_SHARD", "cpu_offload": True},
        "FSDP1 full shard with parameters, gradients and the optimizer step offloaded to CPU",
    ),
    "fsdp2": (
        "fsdp2",
        {},
        "FSDP2 (fully_shard per block, then root) via ModelParallelStrategy; also runs on CPU",
    ),
    "deepspeed_zero1": ("deepspeed", {"stage": 1}, "DeepSpeed ZeRO-1: optimizer state sharded"),
    "deepspeed_zero2": ("deepspeed", {"stage": 2}, "DeepSpeed ZeRO-2: optimizer state and gradients sharded"),
    "deepspeed_zero2_offload": (
        "deepspeed",
        {"stage": 2, "offload_optimizer": True},
        "DeepSpeed ZeRO-2 with the optimizer (state, fp32 master, step) on CPU",
    ),
    "deepspeed_zero3": ("deepspeed", {"stage": 3}, "DeepSpeed ZeRO-3: parameters too"),
    "deepspeed_zero3_offload": (
        "deepspeed",
        {"stage": 3, "offload_optimizer": True, "offload_parameters": True},
        "DeepSpeed ZeRO-3 with parameters and optimizer on CPU",
    ),
}

DEFAULT_TIME_BUDGET = 30.0
"""The safety cap per check in seconds unless told otherwise, far above what a check takes on the gallery's
models (``benchmarks/RESULTS.md``, "Per-check cost")."""
