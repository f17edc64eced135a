"""Lightning's ``DDPStrategy`` whose worker processes destroy the process group before they exit."""

from __future__ import annotations

from lightning.pytorch.strategies import DDPStrategy
from typing_extensions import override

from lightning_recipes._collectives import destroy_process_group_at_exit

__all__ = ["RecipesDDPStrategy"]


class RecipesDDPStrategy(DDPStrategy):
    """``DDPStrategy`` that destroys the default process group at worker exit (a ``ddp_spawn`` worker that
    leaves gloo's group alive may abort with SIGABRT).

    Example:
        >>> strategy = RecipesDDPStrategy(start_method="spawn", gradient_as_bucket_view=True)
        >>> isinstance(strategy, DDPStrategy), strategy.launcher is None  # launcher is made at set-up
        (True, True)
    """

    @override
    def setup_environment(self) -> None:
        super().setup_environment()  # runs in each worker: the process group exists from here on
        destroy_process_group_at_exit()
