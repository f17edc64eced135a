"""Activation checkpointing of a model's repeated blocks with torch's composable ``checkpoint``."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch import nn

from lightning_recipes._blocks import BlockSpec, block_classes_for, outermost_blocks
from lightning_recipes._validation import check_bool

__all__ = [
    "ActivationCheckpointingMixin",
    "checkpoint_blocks",
    "checkpointed_blocks",
    "disable_hf_kv_cache",
]

# The marker torch's composable API leaves on a module it manages (public state registry of `_composable`).
_CHECKPOINT_NAME = "checkpoint"


def checkpointed_blocks(module: nn.Module) -> list[str]:
    """The names of the submodules of ``module`` that are activation-checkpointed (composable API).

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> checkpointed_blocks(TinyTransformerLM())
        []
    """
    from torch.distributed._composable.contract import _get_registry

    names = []
    for name, child in module.named_modules():
        registry = _get_registry(child)
        if registry is not None and _CHECKPOINT_NAME in registry:
            names.append(name)
    return names


def checkpoint_blocks(
    module: nn.Module, block_classes: BlockSpec | None = None, *, disable_kv_cache: bool = True
) -> list[str]:
    """Checkpoint every outermost repeated block of ``module`` in place; returns their names. Idempotent;
    Hugging Face ``use_cache`` is switched off with a warning (``disable_kv_cache``).

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> checkpoint_blocks(TinyTransformerLM(n_layers=2))
        ['blocks.0', 'blocks.1']
    """
    from torch.distributed._composable import checkpoint

    classes = block_classes_for(module, block_classes)
    blocks = outermost_blocks(module, classes)
    if not blocks:
        wanted = ", ".join(cls.__name__ for cls in classes)
        raise ValueError(
            f"`block_classes` ({wanted}) has no instance in {type(module).__name__}: nothing to checkpoint."
        )
    done = set(checkpointed_blocks(module))
    if disable_kv_cache:
        disable_hf_kv_cache(module)
    names = {id(child): name for name, child in module.named_modules()}
    for block in blocks:
        if names[id(block)] not in done:
            checkpoint(block)
    return [names[id(block)] for block in blocks]


def disable_hf_kv_cache(module: nn.Module) -> list[str]:
    """Set ``use_cache=False`` on every Hugging Face config in ``module`` (with a warning); the names changed.

    Example:
        >>> disable_hf_kv_cache(nn.Linear(2, 2))
        []
    """
    owners: dict[int, tuple[str, Any]] = {}
    for name, child in module.named_modules():
        config = getattr(child, "config", None)
        if getattr(config, "use_cache", False) is True:
            owners.setdefault(id(config), (name or type(module).__name__, config))
    for _, config in owners.values():
        config.use_cache = False
    if owners:
        names = ", ".join(f"`{name}.config`" for name, _ in owners.values())
        rank_zero_warn(
            f"Activation checkpointing recomputes each block in backward, which a key/value cache breaks: set"
            f" `use_cache=False` on {names} for training. Set it back to True before generating, or pass"
            " `activation_checkpointing=False` to keep the cache (`disable_kv_cache=False` to"
            " `checkpoint_blocks`).",
            category=UserWarning,
        )
    return [name for name, _ in owners.values()]


class ActivationCheckpointingMixin:
    """LightningModule mixin whose ``configure_model`` runs :func:`checkpoint_blocks` (not under FSDP, which
    checkpoints itself). Put it first in the bases.

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM, fast_trainer, random_token_loader
        >>> class CheckpointedLM(ActivationCheckpointingMixin, TinyTransformerLM):
        ...     pass
        >>> model = CheckpointedLM(n_layers=2)
        >>> fast_trainer(max_steps=1).fit(model, random_token_loader())
        >>> checkpointed_blocks(model)
        ['blocks.0', 'blocks.1']
    """

    activation_checkpointing: bool = True
    checkpoint_block_classes: BlockSpec | None = None
    checkpoint_disable_kv_cache: bool = True

    def configure_model(self) -> None:
        super().configure_model()  # type: ignore[misc]
        check_bool("activation_checkpointing", self.activation_checkpointing)
        check_bool("checkpoint_disable_kv_cache", self.checkpoint_disable_kv_cache)
        if not self.activation_checkpointing:
            return
        assert isinstance(self, nn.Module)
        owner = _sharded_by(self)
        if owner is not None:
            rank_zero_info(
                f"`{type(self).__name__}`: activation checkpointing is left to {owner} (its"
                " `activation_checkpointing` setting); `ActivationCheckpointingMixin` does nothing here."
            )
            return
        checkpoint_blocks(
            self, self.checkpoint_block_classes, disable_kv_cache=self.checkpoint_disable_kv_cache
        )


def _sharded_by(module: nn.Module) -> str | None:
    """Who checkpoints ``module``'s blocks instead of the mixin, or ``None``."""
    from lightning.fabric.strategies import FSDPStrategy as FabricFSDP
    from lightning.fabric.strategies import ModelParallelStrategy as FabricModelParallel
    from lightning.pytorch.strategies import FSDPStrategy, ModelParallelStrategy
    from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointWrapper
    from torch.distributed.fsdp import FSDPModule, FullyShardedDataParallel

    try:
        strategy = module.trainer.strategy if isinstance(module, pl.LightningModule) else None
    except (RuntimeError, AttributeError):  # attached to no Trainer
        strategy = None
    if isinstance(strategy, (FSDPStrategy, ModelParallelStrategy, FabricFSDP, FabricModelParallel)):
        return f"the strategy ({type(strategy).__name__})"
    for child in module.modules():
        if isinstance(child, (FSDPModule, FullyShardedDataParallel, CheckpointWrapper)):
            return f"{type(child).__name__} (already in the model)"
    return None
