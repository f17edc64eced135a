"""The one gradient-norm pass per step that GradNormMonitor, AdaptiveGradClip and StabilityGuard share: the
first reader publishes ``sum |g|^p`` in :data:`STEP_POWERS`, later readers reuse it while the gradients are
unchanged; also :func:`flat_shard_group` (FSDP1) and :func:`param_groups_of` (``group_by``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.strategies import FSDPStrategy
from torch import Tensor

from lightning_recipes.norms import ShardKey, local_tensor

__all__ = ["STEP_POWERS", "GroupBy", "PowerCache", "compile_group_by", "flat_shard_group", "param_groups_of"]

GroupBy = int | Mapping[str, str] | Sequence[tuple[str, str]] | None


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


def compile_group_by(group_by: Any) -> list[tuple[re.Pattern[str], str]] | None:
    """Validate ``group_by`` (``None``, an ``int`` depth >= 1, or regex -> group pairs); compile its regexes.

    ``None`` gives ``None``; a depth gives ``[]``; pairs give their compiled patterns, in order.

    Example:
        >>> compile_group_by(2), compile_group_by(None)
        ([], None)
        >>> compile_group_by(0)
        Traceback (most recent call last):
        ...
        ValueError: `group_by` as a module depth must be >= 1, got 0.
    """
    if group_by is None:
        return None
    if isinstance(group_by, bool):
        raise ValueError(f"`group_by` must be None, an int >= 1 or regex -> group pairs, got {group_by!r}.")
    if isinstance(group_by, int):
        if group_by < 1:
            raise ValueError(f"`group_by` as a module depth must be >= 1, got {group_by!r}.")
        return []
    if not isinstance(group_by, (Mapping, Sequence)) or isinstance(group_by, str):
        raise ValueError(f"`group_by` must be None, an int >= 1 or regex -> group pairs, got {group_by!r}.")
    pairs = list(group_by.items()) if isinstance(group_by, Mapping) else list(group_by)
    if not pairs:
        raise ValueError(f"`group_by` must name at least one (regex, group) pair, got {group_by!r}.")
    compiled = []
    for pair in pairs:
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(s, str) for s in pair)):
            raise ValueError(f"`group_by` entries must be (regex, group) string pairs, got {pair!r}.")
        try:
            compiled.append((re.compile(pair[0]), pair[1]))
        except re.error as err:
            raise ValueError(f"`group_by` pattern {pair[0]!r} is not a valid regex: {err}.") from None
    return compiled


def group_of(name: str, group_by: Any, patterns: list[tuple[re.Pattern[str], str]] | None) -> str:
    """The group of parameter ``name``: its owning module (``group_by=None``), the first ``group_by``
    components of that module's name (an ``int``), or the group of the first regex found in it (else
    ``"other"``)."""
    module = name.rsplit(".", 1)[0] if "." in name else name
    if patterns is None:
        return module
    if isinstance(group_by, int) and not isinstance(group_by, bool):
        return ".".join(module.split(".")[:group_by])
    for pattern, group in patterns:
        if pattern.search(name):
            return group
    return "other"


def param_groups_of(
    module: torch.nn.Module, params: Sequence[Tensor], group_by: Any
) -> tuple[list[str], list[int]]:
    """Group names (in order of first appearance: roughly forward order) and each parameter's group index.

    Example:
        >>> net = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
        >>> param_groups_of(net, list(net.parameters()), None)
        (['0', '2'], [0, 0, 1, 1])
        >>> param_groups_of(net, list(net.parameters()), {"^0": "first"})
        (['first', 'other'], [0, 0, 1, 1])
    """
    patterns = compile_group_by(group_by)
    names = {id(p): name for name, p in module.named_parameters()}
    groups: list[str] = []
    index: list[int] = []
    for i, param in enumerate(params):
        label = group_of(names.get(id(param), f"param_{i}"), group_by, patterns)
        if label not in groups:
            groups.append(label)
        index.append(groups.index(label))
    return groups, index
