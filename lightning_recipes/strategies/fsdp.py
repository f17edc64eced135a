"""Lightning's ``FSDPStrategy`` (FSDP1) with block auto-wrap (:class:`LazyBlockPolicy`), activation
checkpointing and set-up checks."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.plugins.precision import FSDPPrecision
from lightning.pytorch.strategies import FSDPStrategy
from torch import nn
from torch.optim import Optimizer
from typing_extensions import override

from lightning_recipes._blocks import BlockSpec, infer_block_classes, resolve_block_classes
from lightning_recipes._validation import check_bool, check_positive
from lightning_recipes.strategies._host import refuse_offload_without_host_memory, refuse_without_cuda

__all__ = ["LazyBlockPolicy", "RecipesFSDPPrecision", "RecipesFSDPStrategy"]


class RecipesFSDPStrategy(FSDPStrategy):
    """``FSDPStrategy`` that wraps and checkpoints the model's blocks (``block_classes``, inferred at set-up),
    with ``use_orig_params=True``, ``state_dict_type="sharded"`` and norm clipping over all shards (any
    ``kwargs`` win); set-up refuses a non-CUDA accelerator and an offload the host cannot hold.

    Example:
        >>> from lightning_recipes.testing import TransformerBlock
        >>> strategy = RecipesFSDPStrategy(block_classes=[TransformerBlock])
        >>> strategy.sharding_strategy.name, strategy.kwargs["use_orig_params"], strategy.block_classes
        ('FULL_SHARD', True, (<class 'lightning_recipes.testing.models.TransformerBlock'>,))
    """

    def __init__(
        self,
        *,
        block_classes: BlockSpec | None = None,
        activation_checkpointing: bool = True,
        host_memory_gb: float | None = None,
        preset_name: str = "recipes_fsdp_full_shard",
        **kwargs: Any,
    ) -> None:
        check_bool("activation_checkpointing", activation_checkpointing)
        if host_memory_gb is not None:
            check_positive("host_memory_gb", host_memory_gb)
        classes = resolve_block_classes(block_classes)
        policy: Any = set(classes) if classes else LazyBlockPolicy()
        kwargs.setdefault("auto_wrap_policy", policy)
        if activation_checkpointing and "activation_checkpointing" not in kwargs:
            kwargs.setdefault("activation_checkpointing_policy", policy)
        kwargs.setdefault("use_orig_params", True)
        kwargs.setdefault("state_dict_type", "sharded")
        super().__init__(**kwargs)
        self.block_classes = classes
        self.host_memory_gb = host_memory_gb
        self.preset_name = preset_name

    @override
    def setup_environment(self) -> None:
        refuse_without_cuda(
            self.accelerator, preset=self.preset_name, engine="Lightning's FSDPStrategy (FSDP1)"
        )
        hybrid = "HYBRID" in self.sharding_strategy.name
        if hybrid and self.kwargs.get("device_mesh") is None and self.kwargs.get("process_group") is None:
            self.kwargs["device_mesh"] = (self.num_nodes, self.num_processes)
        super().setup_environment()

    @override
    def setup(self, trainer: pl.Trainer) -> None:
        if self.cpu_offload is not None and self.cpu_offload.offload_params:
            refuse_offload_without_host_memory(self, str(trainer.precision), "fsdp_offload")
        if type(self.precision_plugin) is FSDPPrecision:
            self.precision_plugin = RecipesFSDPPrecision(self.precision_plugin.precision)
        super().setup(trainer)
        if isinstance(self.precision_plugin, RecipesFSDPPrecision) and self.model is not None:
            self.precision_plugin.fsdp_module = self.model


class RecipesFSDPPrecision(FSDPPrecision):
    """``FSDPPrecision`` that clips gradients by their global norm over all shards (one all-reduce).

    Example:
        >>> RecipesFSDPPrecision("bf16-mixed").mixed_precision_config.param_dtype
        torch.bfloat16
    """

    def __init__(self, precision: Any, scaler: Any = None) -> None:
        super().__init__(precision, scaler)
        self.fsdp_module: nn.Module | None = None

    @override
    def clip_grad_by_norm(self, optimizer: Optimizer, clip_val: int | float) -> None:  # type: ignore[override]
        clip = getattr(self.fsdp_module, "clip_grad_norm_", None)
        if clip is None:
            super().clip_grad_by_norm(optimizer, clip_val)
            return
        clip(clip_val)


class LazyBlockPolicy:
    """An FSDP1 ``auto_wrap_policy`` that infers the block classes from the first (root) module it sees.

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> policy, model = LazyBlockPolicy(), TinyTransformerLM()
        >>> policy(model, True, 0), policy(model.blocks[0], recurse=False, nonwrapped_numel=0)
        (True, True)
    """

    def __init__(self, block_classes: tuple[type[nn.Module], ...] | None = None) -> None:
        self.block_classes = block_classes

    def __call__(self, module: nn.Module, recurse: bool, nonwrapped_numel: int) -> bool:
        if self.block_classes is None:
            self.block_classes = infer_block_classes(_unwrap(module))
        if recurse:
            return True
        return isinstance(module, self.block_classes)

    def __repr__(self) -> str:
        names = (
            "inferred at setup" if self.block_classes is None else [c.__name__ for c in self.block_classes]
        )
        return f"{type(self).__name__}({names})"


def _unwrap(module: nn.Module) -> nn.Module:
    # FSDP1 hands the policy the root it wraps; activation checkpointing may hand it an FSDP wrapper.
    inner = getattr(module, "_fsdp_wrapped_module", None)
    return inner if isinstance(inner, nn.Module) else module
