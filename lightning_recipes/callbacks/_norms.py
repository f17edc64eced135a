"""The one gradient-norm pass per step the callbacks share (:data:`STEP_POWERS`), the FSDP1 shard group and
the parameter groups of ``group_by``."""

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
    """The local ``norm_power`` per shard layout one callback computed for some gradients this step; valid
    for the same tensors unchanged since (version counters), ``norm_type`` and ``step``. One entry, no sync.

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
    """The process group FSDP1 flat-parameter shards are spread over (after wrapping); ``None``: complete."""
    strategy = trainer.strategy
    if not isinstance(strategy, FSDPStrategy):
        return None
    sharding = str(getattr(strategy, "sharding_strategy", ""))
    if sharding.endswith("NO_SHARD"):
        return None
    return getattr(strategy.model, "process_group", None)


def compile_group_by(group_by: Any) -> list[tuple[re.Pattern[str], str]] | None:
    """Validate ``group_by`` (``None``, an ``int`` depth >= 1, or regex -> group pairs): ``None``, ``[]`` for
    a depth, or the compiled pairs in order.

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
    if isinstance(group_by, int) and not isinstance(group_by, bool):
        if group_by < 1:
            raise ValueError(f"`group_by` as a module depth must be >= 1, got {group_by!r}.")
        return []
    if isinstance(group_by, (bool, str)) or not isinstance(group_by, (Mapping, Sequence)):
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
    """The group of parameter ``name``: its module (``group_by=None``), that module's first ``group_by`` name
    components (an ``int``), or the group of the first regex found in it (else ``"other"``)."""
    module = name.rsplit(".", 1)[0]
    if patterns is None:
        return module
    if not patterns:  # a depth: compile_group_by's [] (pairs are never empty)
        return ".".join(module.split(".")[:group_by])
    return next((group for pattern, group in patterns if pattern.search(name)), "other")


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
