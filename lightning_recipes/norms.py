"""Norms of many tensors on their device, no host-device sync, correct under sharding (DTensor, FSDP1 flat
shards), in total or per group (:func:`update_ratios`: the one update-ratio computation).

Example:
    >>> import torch
    >>> total_norm([torch.tensor([3.0]), torch.tensor([4.0])])
    tensor(5.)
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

__all__ = [
    "ShardKey",
    "check_norm_type",
    "combine_powers",
    "distributed_total_norm",
    "gradients",
    "group_powers",
    "local_group_powers",
    "local_tensor",
    "norm_power",
    "power_to_norm",
    "reduce_power_",
    "split_by_sharding",
    "total_norm",
    "total_norm_from_powers",
    "update_ratios",
]

try:  # torch >= 2.4 public location
    from torch.distributed.tensor import DTensor, Partial, Shard
except ImportError:  # pragma: no cover - older torch
    DTensor = Partial = Shard = None  # type: ignore[assignment,misc]

ShardKey = Hashable | None
"""``None`` for tensors whose values are complete on every rank (single device, DDP, replicated DTensor)."""


def check_norm_type(norm_type: float | str, name: str = "norm_type") -> float:
    """``norm_type`` as a float ``p > 0`` (``float("inf")`` and ``"inf"`` allowed), else a ``ValueError``.

    Example:
        >>> check_norm_type("inf")
        inf
        >>> check_norm_type(0)
        Traceback (most recent call last):
        ...
        ValueError: `norm_type` must be a positive number or float('inf'), got 0.
    """
    try:
        value = float(norm_type)
    except (TypeError, ValueError):
        value = float("nan")
    if isinstance(norm_type, bool) or not (value > 0):
        raise ValueError(f"`{name}` must be a positive number or float('inf'), got {norm_type!r}.")
    return value


def gradients(parameters: Iterable[Tensor]) -> list[Tensor]:
    """The ``.grad`` of every parameter that has one."""
    return [p.grad for p in parameters if p.grad is not None]


def local_tensor(tensor: Tensor) -> Tensor:
    """The tensor itself, or for a DTensor the shard this rank holds, a view (in-place ops change it).

    Example:
        >>> local_tensor(torch.ones(2))
        tensor([1., 1.])
    """
    if DTensor is not None and isinstance(tensor, DTensor):
        return tensor.to_local()
    return tensor


@torch.no_grad()
def norm_power(tensors: Sequence[Tensor], norm_type: float = 2.0) -> Tensor:
    """``sum |x|^p`` over all ``tensors`` (``max |x|`` for ``p = inf``), a 0-dim tensor, no sync: the quantity
    that adds up across shards; float64 when any input is float64, else float32. The kernel depends only on
    the inputs (reproducible clipping). Non-finite values propagate.

    Example:
        >>> norm_power([torch.tensor([3.0]), torch.tensor([4.0])]), norm_power([torch.tensor([-7.0])], 1.0)
        (tensor(25.), tensor(7.))
    """
    if not tensors:
        return torch.zeros((), dtype=torch.float32)
    device = tensors[0].device
    if norm_type == 2.0 and device.type == "cpu" and all(t.dtype in _BLAS_DTYPES for t in tensors):
        return _dot_squares(tensors)
    return _foreach_power(tensors, norm_type)


def _accumulation_dtype(tensors: Sequence[Tensor]) -> torch.dtype:
    return torch.float64 if any(t.dtype == torch.float64 for t in tensors) else torch.float32


def _foreach_power(tensors: Sequence[Tensor], norm_type: float) -> Tensor:
    device = tensors[0].device
    dtype = _accumulation_dtype(tensors)
    low = [t for t in tensors if t.dtype.itemsize < 4]  # fp16/bf16: accumulate in fp32
    full = [t for t in tensors if t.dtype.itemsize >= 4]
    norms = list(torch._foreach_norm(low, norm_type, dtype=torch.float32)) if low else []
    norms += list(torch._foreach_norm(full, norm_type)) if full else []
    stacked = torch.stack([n.to(device, dtype) for n in norms])
    if math.isinf(norm_type):
        return stacked.max()
    return stacked.pow(norm_type).sum()


_BLAS_DTYPES = (torch.float32, torch.float64)
_SMALL_NUMEL = 1 << 16  # below this a tensor's dot is mostly call overhead: batch those into one foreach call


def _dot_squares(tensors: Sequence[Tensor]) -> Tensor:
    """Sum of squares: one BLAS ``dot`` per large tensor, one ``_foreach_norm`` over all the small ones."""
    dtype = _accumulation_dtype(tensors)
    parts = [torch.dot(t.reshape(-1), t.reshape(-1)).to(dtype) for t in tensors if t.numel() >= _SMALL_NUMEL]
    small = [t for t in tensors if t.numel() < _SMALL_NUMEL]
    if small:
        parts.append(torch.stack([n.to(dtype) for n in torch._foreach_norm(small, 2.0)]).square().sum())
    return torch.stack(parts).sum()


def power_to_norm(power: Tensor, norm_type: float = 2.0) -> Tensor:
    """Invert :func:`norm_power`: ``power ** (1/p)`` (identity for ``p = inf``)."""
    if math.isinf(norm_type):
        return power
    return power.sqrt() if norm_type == 2.0 else power.pow(1.0 / norm_type)


@torch.no_grad()
def total_norm(tensors: list[Tensor], norm_type: float = 2.0) -> Tensor:
    """The ``norm_type``-norm of all ``tensors`` together (local values only: for sharded tensors see
    :func:`distributed_total_norm`), a 0-dim tensor on their device; ``tensor(0.)`` when empty.

    Example:
        >>> total_norm([torch.tensor([3.0]), torch.tensor([4.0])])
        tensor(5.)
    """
    return power_to_norm(norm_power(tensors, norm_type), norm_type)


def _shard_key(tensor: Tensor) -> ShardKey:
    if DTensor is None or not isinstance(tensor, DTensor):
        return None
    if any(isinstance(placement, Partial) for placement in tensor.placements):
        raise ValueError(
            "Cannot take the norm of a gradient with a `Partial` placement (its values are not reduced "
            f"yet); got placements {tensor.placements}."
        )
    dims = tuple(dim for dim, placement in enumerate(tensor.placements) if placement.is_shard())
    return (tensor.device_mesh, dims) if dims else None


def split_by_sharding(tensors: Iterable[Tensor], shard_group: Any = None) -> dict[ShardKey, list[Tensor]]:
    """Local tensors grouped by the ranks their values are spread over: DTensors keyed by ``(mesh, sharded
    mesh dims)`` as their local shard, plain tensors by ``shard_group`` (``None``: complete on every rank, as
    under DDP; a process group: FSDP1 flat-parameter shards).

    Example:
        >>> split_by_sharding([torch.ones(2), torch.ones(3)])
        {None: [tensor([1., 1.]), tensor([1., 1., 1.])]}
    """
    groups: dict[ShardKey, list[Tensor]] = {}
    for tensor in tensors:
        key = _shard_key(tensor)
        groups.setdefault(shard_group if key is None else key, []).append(local_tensor(tensor))
    return groups


def reduce_power_(power: Tensor, key: ShardKey, norm_type: float = 2.0) -> Tensor:
    """All-reduce a local :func:`norm_power` (any shape) in place across the ranks named by ``key`` (sum, or
    max for ``inf``; a no-op for ``None``): one collective per sharded mesh dimension, no host sync.
    """
    if key is None:
        return power
    op = dist.ReduceOp.MAX if math.isinf(norm_type) else dist.ReduceOp.SUM
    if isinstance(key, tuple) and len(key) == 2 and isinstance(key[1], tuple):
        mesh, dims = key
        for dim in dims:
            dist.all_reduce(power, op=op, group=mesh.get_group(dim))
    else:  # a process group (FSDP1 flat parameters)
        dist.all_reduce(power, op=op, group=key)
    return power


def combine_powers(powers: Sequence[Tensor], norm_type: float = 2.0) -> Tensor:
    """Combine :func:`norm_power` results of disjoint tensor sets: a sum, or a max for ``inf``."""
    stacked = torch.stack(list(powers))
    return stacked.amax(dim=0) if math.isinf(norm_type) else stacked.sum(dim=0)


@torch.no_grad()
def distributed_total_norm(
    tensors: Iterable[Tensor], norm_type: float = 2.0, shard_group: Any = None
) -> Tensor:
    """The norm of the full, unsharded ``tensors`` (plain ones complete on every rank unless ``shard_group``
    says they are shards): one small all-reduce per shard layout, no host-device sync.

    Example:
        >>> distributed_total_norm([torch.tensor([3.0]), torch.tensor([4.0])])
        tensor(5.)
    """
    groups = split_by_sharding(tensors, shard_group)
    if not groups:
        return torch.zeros((), dtype=torch.float32)
    return total_norm_from_powers(
        {key: norm_power(local, norm_type) for key, local in groups.items()}, norm_type
    )


def total_norm_from_powers(powers: dict[ShardKey, Tensor], norm_type: float = 2.0) -> Tensor:
    """The global norm from local powers per shard layout: reduce each across its ranks, combine, root.

    Example:
        >>> total_norm_from_powers({None: torch.tensor(25.0)})
        tensor(5.)
    """
    reduced = [reduce_power_(power.clone(), key, norm_type) for key, power in powers.items()]
    return power_to_norm(combine_powers(reduced, norm_type), norm_type)


def local_group_powers(
    tensors: Sequence[Tensor],
    group_of: Sequence[int],
    groups: int,
    norm_type: float = 2.0,
    shard_group: Any = None,
) -> dict[ShardKey, Tensor]:
    """This rank's :func:`norm_power` per group (tensor ``i`` in group ``group_of[i]``), a ``[groups]`` tensor
    per shard layout (:func:`split_by_sharding`), not yet reduced across ranks. No sync.

    Example:
        >>> local_group_powers([torch.tensor([3.0]), torch.tensor([4.0])], [0, 1], 2)
        {None: tensor([ 9., 16.])}
    """
    buckets: dict[ShardKey, list[list[Tensor]]] = {}
    for tensor, group in zip(tensors, group_of):
        for key, local in split_by_sharding([tensor], shard_group).items():
            buckets.setdefault(key, [[] for _ in range(groups)])[group].extend(local)
    out = {}
    for key, per_group in buckets.items():
        device = next(t.device for group in per_group for t in group)
        out[key] = torch.stack([norm_power(group, norm_type).to(device) for group in per_group])
    return out


def group_powers(
    tensors: Sequence[Tensor],
    group_of: Sequence[int],
    groups: int,
    norm_type: float = 2.0,
    shard_group: Any = None,
) -> Tensor:
    """The global :func:`norm_power` of each group of the full, unsharded ``tensors``, ``[groups]``: one
    all-reduce per shard layout (none unsharded), no host sync.

    Example:
        >>> group_powers([torch.tensor([3.0]), torch.tensor([4.0]), torch.tensor([1.0])], [0, 1, 1], 2)
        tensor([ 9., 17.])
    """
    powers = local_group_powers(tensors, group_of, groups, norm_type, shard_group)
    if not powers:
        return torch.zeros(groups)
    return combine_powers([reduce_power_(v, k, norm_type) for k, v in powers.items()], norm_type)


def update_ratios(param_powers: Tensor, update_powers: Tensor, norm_type: float = 2.0) -> Tensor:
    """The update-to-weight ratio ``||dW|| / ||W||`` from :func:`group_powers` of the weights before a step
    and of its change (0 where ``||W|| = 0``), no sync: what GradNormMonitor and HealthMonitor use.

    Example:
        >>> update_ratios(torch.tensor([100.0, 0.0]), torch.tensor([1.0, 1.0]))
        tensor([0.1000, 0.0000])
    """
    weights, update = power_to_norm(param_powers, norm_type), power_to_norm(update_powers, norm_type)
    return torch.where(weights > 0, update / weights.clamp(min=torch.finfo(torch.float32).tiny), 0.0)
