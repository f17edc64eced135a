"""The one gradient-norm pass per step that GradNormMonitor, AdaptiveGradClip and StabilityGuard share.

The coupling between the three training-time callbacks that read the gradients lives here and nowhere else.
Each of them needs ``sum |g|^p`` of the same gradients in ``on_before_optimizer_step``; reading every gradient
three times per step would triple the cost, so the first reader publishes what it computed in the process-wide
:data:`STEP_POWERS` and the later ones look it up:

* **who writes**: ``GradNormMonitor`` (its per-shard-layout total power, every optimizer step) and
  ``StabilityGuard`` (the 2-norm power when it computed one itself). Each publish replaces the single entry.
* **who reads**: ``AdaptiveGradClip`` and ``StabilityGuard``, placed after a writer in the callbacks list. A
  reader that finds no valid entry computes the norm itself (same value, one more read of the gradients).
* **when it is invalid**: :meth:`PowerCache.lookup` answers only for the very same gradient tensors (ids),
  unchanged since the publish (their version counters: an in-place change such as clipping invalidates it),
  the same ``norm_type`` and the same ``trainer.global_step``. So ``AdaptiveGradClip`` scaling the gradients
  makes a later ``StabilityGuard`` read them again, and nothing survives into the next step.

Also here: :func:`flat_shard_group`, the process group FSDP1 flat-parameter shards span (the ``shard_group``
that :func:`lightning_recipes.norms.distributed_total_norm` needs under FSDP1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.strategies import FSDPStrategy
from torch import Tensor

from lightning_recipes.norms import ShardKey, local_tensor

__all__ = ["STEP_POWERS", "PowerCache", "flat_shard_group"]


class PowerCache:
    """The local ``norm_power`` per shard layout that one callback computed for a set of gradients this step.

    Valid only for the same tensors (ids), unchanged since (their version counters: any in-place change, such
    as clipping, invalidates it), the same ``norm_type`` and ``step``. Holds one entry. No host-device sync.

    Example:
        >>> import torch
        >>> cache, grads = PowerCache(), [torch.ones(2)]
        >>> cache.publish(grads, 2.0, step=0, powers={None: torch.tensor(2.0)})
        >>> cache.lookup(grads, 2.0, step=0)
        {None: tensor(2.)}
        >>> _ = grads[0].mul_(3)  # changed in place: stale
        >>> cache.lookup(grads, 2.0, step=0) is None
        True
    """

    def __init__(self) -> None:
        self._token: tuple | None = None
        self._powers: dict[ShardKey, Tensor] | None = None

    @staticmethod
    def _make_token(grads: Sequence[Tensor], norm_type: float, step: int) -> tuple:
        locals_ = [local_tensor(g) for g in grads]
        return (norm_type, step, tuple(id(t) for t in locals_), tuple(t._version for t in locals_))

    def publish(
        self, grads: Sequence[Tensor], norm_type: float, step: int, powers: dict[ShardKey, Tensor]
    ) -> None:
        """Record ``powers`` (local power per shard layout) as those of ``grads`` at ``step``."""
        self._token = self._make_token(grads, norm_type, step)
        self._powers = powers

    def lookup(self, grads: Sequence[Tensor], norm_type: float, step: int) -> dict[ShardKey, Tensor] | None:
        """The published powers if they are still those of ``grads`` at ``step``, else ``None``."""
        if self._token is None or self._token != self._make_token(grads, norm_type, step):
            return None
        return self._powers


STEP_POWERS = PowerCache()
"""Process-wide cache shared by the callbacks (one entry: the last published step)."""


def flat_shard_group(trainer: pl.Trainer) -> Any:
    """The process group FSDP1 flat-parameter shards are spread over; ``None`` when gradients are complete.

    Read once the strategy has wrapped the model (``strategy.model`` is the root FSDP module).
    """
    strategy = trainer.strategy
    if not isinstance(strategy, FSDPStrategy):
        return None
    sharding = str(getattr(strategy, "sharding_strategy", ""))
    if sharding.endswith("NO_SHARD"):
        return None
    return getattr(strategy.model, "process_group", None)
