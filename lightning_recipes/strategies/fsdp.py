"""Lightning's ``FSDPStrategy`` (FSDP1) with block auto-wrap, activation checkpointing and set-up checks."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.strategies import FSDPStrategy
from typing_extensions import override

from lightning_recipes.strategies._blocks import BlockSpec, LazyBlockPolicy, resolve_block_classes
from lightning_recipes.strategies._checks import refuse_offload_without_host_memory, refuse_without_cuda

__all__ = ["RecipesFSDPStrategy"]


class RecipesFSDPStrategy(FSDPStrategy):
    """``FSDPStrategy`` that wraps and checkpoints the model's blocks, and refuses what cannot work at set-up.

    Defaults: auto-wrap per block (``block_classes`` given, or inferred at set-up as the repeated submodule type
    holding most parameters, after ``configure_model`` has built the layers), activation checkpointing on the same
    blocks (``activation_checkpointing=False`` to opt out), mixed precision taken from ``Trainer(precision=...)``
    by Lightning's ``FSDPPrecision`` (no ``mixed_precision`` passed), ``use_orig_params=True`` (parameter groups and
    ``self.parameters()`` in ``configure_optimizers`` work) and ``state_dict_type="sharded"`` (each rank writes its
    shard; no rank-0 gather of the full model). Every other ``FSDPStrategy`` argument is accepted and wins.

    Checks at ``setup_environment`` / ``setup`` (before the process group or any model work): a CUDA accelerator
    (Lightning's FSDP1 does not run on CPU; use ``recipes_fsdp2`` there) and, with CPU offload, enough host
    memory for the offloaded shards of every process on the node when that is known. ``HYBRID_SHARD`` without a
    mesh gets ``device_mesh=(num_nodes, devices)``: shard within a node, replicate across nodes.

    Cost: none beyond FSDP; block inference walks the module tree once.

    Args:
        block_classes: Block classes or their import paths (``"pkg.module.Block"``, for YAML); ``None`` = infer.
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
        super().setup(trainer)
