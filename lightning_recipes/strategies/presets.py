"""``preset(name, **overrides)``: Lightning strategies configured right by default, registered as ``recipes_<name>``."""

from __future__ import annotations

import functools
from typing import Any

from lightning.pytorch.strategies import DDPStrategy, Strategy, StrategyRegistry
from torch import nn

from lightning_recipes.strategies._blocks import infer_block_classes

__all__ = ["PRESETS", "preset", "register_presets"]

# name -> (engine, default arguments, one-line description)
PRESETS: dict[str, tuple[str, dict[str, Any], str]] = {
    "ddp": (
        "ddp",
        {"gradient_as_bucket_view": True},
        "DDP; gradients are views into the all-reduce buckets (no second copy)",
    ),
    "ddp_static_graph": (
        "ddp",
        {"gradient_as_bucket_view": True, "static_graph": True},
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


def preset(name: str, *, model: nn.Module | None = None, **overrides: Any) -> Strategy:
    """Build a Lightning strategy from a preset; ``overrides`` are the strategy's own arguments and win.

    =========================  ================================================================================
    name                       strategy
    =========================  ================================================================================
    ``ddp``                    ``DDPStrategy(gradient_as_bucket_view=True)``
    ``ddp_static_graph``       + ``static_graph=True``
    ``fsdp_full_shard``        :class:`RecipesFSDPStrategy` ``FULL_SHARD`` (block auto-wrap + checkpointing,
                               precision from the Trainer, ``use_orig_params``, sharded checkpoints)
    ``fsdp_shard_grad_op``     ... ``SHARD_GRAD_OP``
    ``fsdp_hybrid``            ... ``HYBRID_SHARD`` (mesh ``(num_nodes, devices)``)
    ``fsdp_offload``           ... ``FULL_SHARD`` + ``cpu_offload=True``
    ``fsdp2``                  :class:`RecipesFSDP2Strategy` (``ModelParallelStrategy``, data parallel only)
    ``deepspeed_zero1``        :class:`RecipesDeepSpeedStrategy` ``stage=1``
    ``deepspeed_zero2``        ``stage=2``
    ``deepspeed_zero2_offload``  ``stage=2, offload_optimizer=True``
    ``deepspeed_zero3``        ``stage=3``
    ``deepspeed_zero3_offload``  ``stage=3, offload_optimizer=True, offload_parameters=True``
    =========================  ================================================================================

    Building never looks at the machine (build on a CPU login node, run on the GPU job); what cannot run is
    refused when the Trainer sets the strategy up. Each preset is also registered as ``recipes_<name>``:
    ``Trainer(strategy="recipes_fsdp_full_shard")`` or ``strategy: recipes_ddp`` in LightningCLI YAML, once
    ``lightning_recipes.strategies`` has been imported. Launch with ``devices``/``num_nodes`` as usual; on CPU
    tests pass ``start_method="fork"`` or ``"spawn"`` to the DDP presets.

    Args:
        name: A key of :data:`PRESETS` (a ``recipes_`` prefix is accepted).
        model: FSDP presets only: infer ``block_classes`` from this model now instead of at set-up.
        **overrides: Arguments of the strategy class (e.g. ``block_classes=[Block]``,
            ``activation_checkpointing=False``, ``start_method="fork"``, ``reduce_bucket_size=5e8``,
            ``offload_optimizer_device="nvme"``, ``host_memory_gb=512``).

    Raises:
        ValueError: Unknown name, or ``model`` given to a non-FSDP preset.
        ModuleNotFoundError: A DeepSpeed preset without DeepSpeed installed (with the install hint).

    Example:
        >>> strategy = preset("ddp", start_method="fork")
        >>> type(strategy).__name__, strategy._ddp_kwargs
        ('DDPStrategy', {'gradient_as_bucket_view': True})
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> preset("fsdp_full_shard", model=TinyTransformerLM()).block_classes
        (<class 'lightning_recipes.testing.models.TransformerBlock'>,)
    """
    key = name.removeprefix("recipes_")
    if key not in PRESETS:
        raise ValueError(f"`name` must be one of {sorted(PRESETS)}, got {name!r}.")
    engine, defaults, _ = PRESETS[key]
    kwargs = {**defaults, **overrides}
    if model is not None:
        if engine not in ("fsdp", "fsdp2"):
            raise ValueError(
                f"`model` is only used by the FSDP presets (to infer block classes), got name={name!r}."
            )
        kwargs.setdefault("block_classes", infer_block_classes(model))
    if engine == "ddp":
        return DDPStrategy(**kwargs)
    kwargs.setdefault("preset_name", f"recipes_{key}")
    if engine == "fsdp":
        from lightning_recipes.strategies.fsdp import RecipesFSDPStrategy

        return RecipesFSDPStrategy(**kwargs)
    if engine == "fsdp2":
        from lightning_recipes.strategies.fsdp2 import RecipesFSDP2Strategy

        return RecipesFSDP2Strategy(**kwargs)
    from lightning_recipes.strategies.deepspeed_strategy import RecipesDeepSpeedStrategy

    return RecipesDeepSpeedStrategy(**kwargs)


def register_presets(registry: Any = StrategyRegistry) -> list[str]:
    """Register every preset as ``recipes_<name>`` in Lightning's ``StrategyRegistry`` (idempotent).

    Example:
        >>> "recipes_fsdp2" in register_presets()
        True
    """
    names = []
    for key, (_, _, description) in PRESETS.items():
        name = f"recipes_{key}"
        registry.register(name, functools.partial(preset, key), description=description, override=True)
        names.append(name)
    return names
