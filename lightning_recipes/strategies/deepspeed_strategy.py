"""Lightning's ``DeepSpeedStrategy`` whose config is reconciled with the Trainer and validated by
DeepSpeed."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.strategies import DeepSpeedStrategy
from typing_extensions import override

from lightning_recipes._validation import check_positive
from lightning_recipes.strategies._host import refuse_offload_without_host_memory, refuse_without_cuda
from lightning_recipes.strategies.deepspeed_config import (
    reconcile_deepspeed_config,
    require_deepspeed,
    validate_deepspeed_config,
)

__all__ = ["RecipesDeepSpeedStrategy"]


class RecipesDeepSpeedStrategy(DeepSpeedStrategy):
    """``DeepSpeedStrategy`` whose config never contradicts the Trainer
    (:func:`~lightning_recipes.strategies.reconcile_deepspeed_config`), validated by DeepSpeed when built and
    at set-up; set-up refuses a non-CUDA accelerator and an offload the host cannot hold.

    Example:
        >>> from lightning_recipes.strategies import PRESETS
        >>> PRESETS["deepspeed_zero2_offload"].defaults  # what the preset passes to this class
        {'stage': 2, 'offload_optimizer': True}
    """

    def __init__(
        self, *, host_memory_gb: float | None = None, preset_name: str = "recipes_deepspeed", **kwargs: Any
    ) -> None:
        if host_memory_gb is not None:
            check_positive("host_memory_gb", host_memory_gb)
        require_deepspeed()
        super().__init__(**kwargs)
        self.host_memory_gb = host_memory_gb
        self.preset_name = preset_name
        assert self.config is not None
        validate_deepspeed_config(self.config)

    @override
    def setup_environment(self) -> None:
        refuse_without_cuda(self.accelerator, preset=self.preset_name, engine="DeepSpeed")
        super().setup_environment()

    @override
    def setup(self, trainer: pl.Trainer) -> None:
        assert self.config is not None and self.lightning_module is not None
        zero = self.config.get("zero_optimization") or {}
        offload = zero.get("offload_optimizer") or zero.get("offload_param")
        if offload:
            layout = f"deepspeed_zero{3 if int(zero.get('stage', 0)) == 3 else 2}_offload"
            refuse_offload_without_host_memory(self, str(trainer.precision), layout)
        # private Lightning probe (no public API): the training loader's batch size, 1 when unknown
        micro_batch_size = self.config.get("train_micro_batch_size_per_gpu") or self._auto_select_batch_size()
        self.config = reconcile_deepspeed_config(
            self.config,
            micro_batch_size=int(micro_batch_size),
            accumulate_grad_batches=trainer.accumulate_grad_batches,
            world_size=self.world_size,
            gradient_clip_val=trainer.gradient_clip_val,  # type: ignore[arg-type]
            gradient_clip_algorithm=trainer.gradient_clip_algorithm,  # type: ignore[arg-type]
            precision=str(trainer.precision),
        )
        validate_deepspeed_config(self.config)
        super().setup(trainer)
