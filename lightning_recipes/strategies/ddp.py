"""Lightning's ``DDPStrategy`` whose worker processes destroy the process group before they exit."""

from __future__ import annotations

from lightning.pytorch.strategies import DDPStrategy
from typing_extensions import override

from lightning_recipes._collectives import destroy_process_group_at_exit

__all__ = ["RecipesDDPStrategy"]


class RecipesDDPStrategy(DDPStrategy):
    """``DDPStrategy`` (every argument the same) that tears the default process group down at worker exit.

    A ``ddp_spawn`` worker otherwise leaves with gloo's group alive, and gloo's teardown now and then aborts
    it (``terminate called without an active exception``, SIGABRT) after a successful fit. Every process that
    sets the strategy up registers, once, an ``atexit`` handler that destroys the group first.

    Cost: none per step; one ``destroy_process_group`` at process exit.

    Example:
        >>> strategy = RecipesDDPStrategy(start_method="spawn", gradient_as_bucket_view=True)
        >>> isinstance(strategy, DDPStrategy), strategy.launcher is None  # launcher is made at set-up
        (True, True)
    """

    @override
    def setup_environment(self) -> None:
        super().setup_environment()  # runs in each worker: the process group exists from here on
        destroy_process_group_at_exit()
