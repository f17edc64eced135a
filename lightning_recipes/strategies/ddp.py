"""Lightning's ``DDPStrategy`` whose worker processes destroy the process group before they exit."""

from __future__ import annotations

import atexit

import torch.distributed as dist
from lightning.pytorch.strategies import DDPStrategy
from typing_extensions import override

__all__ = ["RecipesDDPStrategy"]

_REGISTERED = False


class RecipesDDPStrategy(DDPStrategy):
    """``DDPStrategy`` (every argument the same) that tears the default process group down at worker exit.

    A ``ddp_spawn`` worker that finished ``fit`` leaves through the interpreter's normal shutdown with gloo's
    process group still alive; now and then gloo's teardown then aborts the process (``terminate called
    without an active exception``, SIGABRT) and Lightning reports a successful run as failed. Here every
    process that sets the strategy up (spawned workers included) registers, once, an ``atexit`` handler that
    destroys the default group first. Forked workers leave with ``os._exit`` and never run it; nothing changes
    while training.

    Cost: none per step; one ``destroy_process_group`` at process exit.

    Example:
        >>> strategy = RecipesDDPStrategy(start_method="spawn", gradient_as_bucket_view=True)
        >>> isinstance(strategy, DDPStrategy), strategy.launcher is None  # launcher is made at set-up
        (True, True)
    """

    @override
    def setup_environment(self) -> None:
        super().setup_environment()  # runs in each worker: the process group exists from here on
        _destroy_process_group_at_exit()


def _destroy_process_group_at_exit() -> None:
    global _REGISTERED
    if not _REGISTERED:
        atexit.register(_destroy_default_process_group)
        _REGISTERED = True


def _destroy_default_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
