"""Lightning's ``FSDPStrategy`` (FSDP1) with block auto-wrap, activation checkpointing and set-up checks."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.plugins.precision import FSDPPrecision
from lightning.pytorch.strategies import FSDPStrategy
from torch import nn
from torch.optim import Optimizer
from typing_extensions import override

from lightning_recipes._blocks import BlockSpec, resolve_block_classes
from lightning_recipes._validation import check_bool, check_positive
from lightning_recipes.strategies._host import refuse_offload_without_host_memory, refuse_without_cuda
from lightning_recipes.strategies._wrap_policy import LazyBlockPolicy

__all__ = ["RecipesFSDPPrecision", "RecipesFSDPStrategy"]


class RecipesFSDPStrategy(FSDPStrategy):
    """``FSDPStrategy`` that wraps and checkpoints the model's blocks, and refuses what cannot work at set-up.

    Defaults: auto-wrap per block (``block_classes`` given, or inferred at set-up by
    :func:`infer_block_classes`: every stack's layers, after ``configure_model`` has built the layers),
    activation checkpointing on the same blocks (``activation_checkpointing=False`` to opt out), mixed
    precision taken from ``Trainer(precision=...)`` by Lightning's ``FSDPPrecision`` (no ``mixed_precision``
    passed), ``use_orig_params=True`` (parameter groups and ``self.parameters()`` in ``configure_optimizers``
    work) and ``state_dict_type="sharded"`` (each rank writes its shard; no rank-0 gather of the full model).
    Every other ``FSDPStrategy`` argument is accepted and wins. ``Trainer(gradient_clip_val=...,
    gradient_clip_algorithm="norm")`` works: the norm is computed over all shards by the root module's
    ``clip_grad_norm_`` (Lightning's own FSDP plugin refuses norm clipping, #19235).

    Checks at ``setup_environment`` / ``setup`` (before the process group or any model work): a CUDA
    accelerator (Lightning's FSDP1 does not run on CPU; use ``recipes_fsdp2`` there) and, with CPU offload,
    enough host memory for the offloaded shards of every process on the node when that is known.
    ``HYBRID_SHARD`` without a mesh gets ``device_mesh=(num_nodes, devices)``: shard within a node, replicate
    across nodes.

    Cost: none beyond FSDP; block inference walks the module tree once.

    Args:
        block_classes: Block classes or their import paths (``"pkg.module.Block"``, for YAML); ``None`` =
            infer.
        activation_checkpointing: Checkpoint the blocks (recompute their activations in backward).
        host_memory_gb: Host memory per node for the offload check; ``None`` = read it from the machine.
        preset_name: Name used in messages.
        **kwargs: Any :class:`~lightning.pytorch.strategies.FSDPStrategy` argument.

    Raises:
        RuntimeError: At set-up, without CUDA or without enough host memory for offload.
        ValueError: For a bad ``block_classes``.

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
            assert self.lightning_module is not None
            refuse_offload_without_host_memory(
                self.lightning_module,
                preset=self.preset_name,
                strategy="fsdp_offload",
                precision=str(trainer.precision),
                devices=self.num_processes,
                num_nodes=self.num_nodes,
                host_memory_gb=self.host_memory_gb,
            )
        if (
            type(self.precision_plugin) is FSDPPrecision
        ):  # the Trainer's own plugin: same precision, + norm clipping
            self.precision_plugin = RecipesFSDPPrecision(self.precision_plugin.precision)
        super().setup(trainer)
        if isinstance(self.precision_plugin, RecipesFSDPPrecision) and self.model is not None:
            self.precision_plugin.fsdp_module = self.model


class RecipesFSDPPrecision(FSDPPrecision):
    """``FSDPPrecision`` that clips gradients by their global norm over all shards (FSDP1's
    ``clip_grad_norm_``).

    ``torch.nn.utils.clip_grad_norm_`` on a rank's shards would use a local norm; the root FSDP module's
    ``clip_grad_norm_`` all-reduces the shard norms first. :class:`RecipesFSDPStrategy` installs this plugin
    and gives it the root module at set-up. Cost: one all-reduce of a scalar per clipping step.

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
