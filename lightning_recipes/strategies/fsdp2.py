"""FSDP2 (``fully_shard``) per block then on the root, for Lightning's ``ModelParallelStrategy``."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import ModelParallelStrategy
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from typing_extensions import override

from lightning_recipes._blocks import BlockSpec, block_classes_for, outermost_blocks, resolve_block_classes
from lightning_recipes._validation import check_bool
from lightning_recipes.strategies._layout import autocast_dtype
from lightning_recipes.strategies.activation_checkpointing import checkpoint_blocks

__all__ = ["FSDP2Mixin", "RecipesFSDP2Strategy", "apply_fsdp2", "mixed_precision_policy"]

_DEFAULT_TIMEOUT = timedelta(minutes=30)


def mixed_precision_policy(precision: str | int | None) -> MixedPrecisionPolicy | None:
    """The FSDP2 policy matching ``Trainer(precision=...)``: compute in 16-bit, reduce in fp32 (``None`` for
    ``*-true``).

    Example:
        >>> mixed_precision_policy("bf16-mixed").param_dtype, mixed_precision_policy("32-true")
        (torch.bfloat16, None)
    """
    dtype = autocast_dtype(precision)
    return None if dtype is None else MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)


def apply_fsdp2(
    module: nn.Module,
    mesh: DeviceMesh | None = None,
    *,
    block_classes: BlockSpec | None = None,
    activation_checkpointing: bool = True,
    mp_policy: MixedPrecisionPolicy | None = None,
    reshard_after_forward: bool = True,
) -> nn.Module:
    """Shard ``module`` with FSDP2 over ``mesh``: ``fully_shard`` on every block (``block_classes``, default
    inferred) then on the root, the blocks checkpointed with ``activation_checkpointing``. Idempotent.

    Example:
        >>> import torch.distributed as dist
        >>> from lightning_recipes.testing import TinyTransformerLM
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> model = apply_fsdp2(TinyTransformerLM())
        >>> type(model.blocks[0]).__name__, type(model.blocks[0].qkv.weight).__name__
        ('FSDPTransformerBlock', 'DTensor')
        >>> dist.destroy_process_group()
    """
    if isinstance(module, FSDPModule):
        return module
    blocks = block_classes_for(module, block_classes)
    outermost = outermost_blocks(module, blocks)
    if activation_checkpointing:
        checkpoint_blocks(module, blocks)
    kwargs: dict[str, Any] = {"mesh": mesh}
    if mp_policy is not None:
        kwargs["mp_policy"] = mp_policy
    for block in outermost:
        fully_shard(block, reshard_after_forward=reshard_after_forward, **kwargs)
    fully_shard(module, **kwargs)
    return module


class RecipesFSDP2Strategy(ModelParallelStrategy):
    """Lightning's ``ModelParallelStrategy`` as data-parallel FSDP2 (CPU and CUDA); the model applies the
    settings in ``configure_model`` with :class:`FSDP2Mixin` (or :func:`apply_fsdp2`).

    Example:
        >>> strategy = RecipesFSDP2Strategy(activation_checkpointing=False)
        >>> strategy.fsdp2_settings
        {'block_classes': None, 'activation_checkpointing': False, 'reshard_after_forward': True}
    """

    def __init__(
        self,
        *,
        block_classes: BlockSpec | None = None,
        activation_checkpointing: bool = True,
        reshard_after_forward: bool = True,
        save_distributed_checkpoint: bool = True,
        process_group_backend: str | None = None,
        timeout: timedelta | None = _DEFAULT_TIMEOUT,
        preset_name: str = "recipes_fsdp2",
    ) -> None:
        check_bool("activation_checkpointing", activation_checkpointing)
        check_bool("reshard_after_forward", reshard_after_forward)
        check_bool("save_distributed_checkpoint", save_distributed_checkpoint)
        super().__init__(
            data_parallel_size="auto",
            tensor_parallel_size=1,
            save_distributed_checkpoint=save_distributed_checkpoint,
            process_group_backend=process_group_backend,
            timeout=timeout,
        )
        self.block_classes = resolve_block_classes(block_classes)
        self.activation_checkpointing = activation_checkpointing
        self.reshard_after_forward = reshard_after_forward
        self.preset_name = preset_name

    @property
    def fsdp2_settings(self) -> dict[str, Any]:
        """Keyword arguments for :func:`apply_fsdp2`."""
        return {
            "block_classes": self.block_classes,
            "activation_checkpointing": self.activation_checkpointing,
            "reshard_after_forward": self.reshard_after_forward,
        }

    @override
    def setup_environment(self) -> None:
        # private: data parallelism over every process (Lightning's "auto" is one group per node)
        self._data_parallel_size = self.num_nodes * self.num_processes
        super().setup_environment()

    @override
    def setup(self, trainer: pl.Trainer) -> None:
        module = self.lightning_module
        if module is not None and not any(isinstance(m, FSDPModule) for m in module.modules()):
            raise TypeError(
                f"`{self.preset_name}` found no FSDP2-sharded module after `configure_model`. Inherit"
                " `lightning_recipes.strategies.FSDP2Mixin` first in your LightningModule"
                " (`class MyModel(FSDP2Mixin, LightningModule)`), or call"
                " `apply_fsdp2(self, self.device_mesh['data_parallel'])` in your `configure_model`."
            )
        super().setup(trainer)


class FSDP2Mixin:
    """LightningModule mixin whose ``configure_model`` shards the model with FSDP2 under
    ``ModelParallelStrategy`` (without a mesh it does nothing). Put it first in the bases.

    Example:
        >>> from lightning_recipes.testing import TinyTransformerLM, fast_trainer, random_token_loader
        >>> class ShardedLM(FSDP2Mixin, TinyTransformerLM):
        ...     pass
        >>> fast_trainer(max_steps=1).fit(ShardedLM(), random_token_loader())  # no mesh: plain training
    """

    def configure_model(self) -> None:
        super().configure_model()  # type: ignore[misc]
        # public LightningModule API; ModelParallelStrategy sets the mesh before configure_model
        mesh = self.device_mesh if isinstance(self, pl.LightningModule) else None
        if mesh is None:
            return
        trainer = getattr(self, "trainer", None)
        strategy = trainer.strategy if trainer is not None else None
        settings = strategy.fsdp2_settings if isinstance(strategy, RecipesFSDP2Strategy) else {}
        precision = trainer.precision if trainer is not None else None
        assert isinstance(self, nn.Module)
        apply_fsdp2(self, mesh["data_parallel"], mp_policy=mixed_precision_policy(precision), **settings)
