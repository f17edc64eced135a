"""Shared pieces of the optimizers: argument checks, implementation choice, tensor grouping."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Any, Literal, cast

import torch
from torch import Tensor

from lightning_recipes._deprecation import warn_deprecated
from lightning_recipes._validation import (
    check_beta,
    check_betas,
    check_choice,
    check_non_negative,
    check_positive,
)

__all__ = [
    "FOREACH_CHUNK_NUMEL",
    "FOREACH_CHUNK_NUMEL_CPU",
    "IMPLEMENTATIONS",
    "Implementation",
    "backfill_group_options",
    "check_beta",
    "check_betas",
    "check_implementation",
    "check_non_negative",
    "check_positive",
    "defaults_keys",
    "foreach_chunks",
    "gather_gradients",
    "group_by_device_and_dtype",
    "is_plain",
    "prepare_tensors",
    "split_for_native",
]

Implementation = Literal["auto", "for_loop", "foreach", "native", "compiled"]
IMPLEMENTATIONS: tuple[str, ...] = ("auto", "for_loop", "foreach", "native")
# The foreach path works on chunks of at most this many elements, so that its temporaries (two chunk-sized
# lists) stay bounded: 32M elements on accelerators (few launches per step even for a 350M model), 256K on
# CPU (small chunks stay in cache). Measurements: benchmarks/RESULTS.md.
FOREACH_CHUNK_NUMEL = 1 << 25
FOREACH_CHUNK_NUMEL_CPU = 1 << 18


def check_implementation(implementation: Any) -> None:
    """Raise for an unknown implementation; warn for the removed ``"compiled"`` (it runs as ``"auto"``)."""
    if implementation == "compiled":
        warn_deprecated(
            "implementation='compiled' is deprecated and runs as 'auto' (the torch.compile path was never "
            "the fastest: benchmarks/RESULTS.md); pass 'auto', 'native', 'foreach' or 'for_loop'.",
            stacklevel=4,
        )
        return
    check_choice("implementation", implementation, IMPLEMENTATIONS)


def group_by_device_and_dtype(*lists: Sequence[Tensor]) -> Iterator[tuple[list[Tensor], ...]]:
    """Split parallel lists into sub-lists whose first tensors share device and dtype (foreach needs that)."""
    buckets: dict[tuple[torch.device, torch.dtype], tuple[list[Tensor], ...]] = {}
    for items in zip(*lists):
        key = (items[0].device, items[0].dtype)
        bucket = buckets.setdefault(key, tuple([] for _ in lists))
        for target, item in zip(bucket, items):
            target.append(item)
    yield from buckets.values()


def foreach_chunks(
    *lists: Sequence[Tensor], max_numel: int | None = None
) -> Iterator[tuple[list[Tensor], ...]]:
    """Consecutive chunks of parallel lists, each with at most ``max_numel`` elements (or one tensor);
    ``None``: the device's default (``FOREACH_CHUNK_NUMEL_CPU`` on CPU, else ``FOREACH_CHUNK_NUMEL``)."""
    count = len(lists[0])
    if count == 0:
        return
    if max_numel is None:
        max_numel = FOREACH_CHUNK_NUMEL_CPU if lists[0][0].device.type == "cpu" else FOREACH_CHUNK_NUMEL
    start, total = 0, 0
    for index in range(count):
        numel = lists[0][index].numel()
        if index > start and total + numel > max_numel:
            yield tuple(list(items[start:index]) for items in lists)
            start, total = index, 0
        total += numel
    if start < count:
        yield tuple(list(items[start:]) for items in lists)


def resolve_device_implementation(implementation: str, device: torch.device) -> str:
    """The route on ``device``: off CPU ``auto`` and ``native`` are ``foreach``; on CPU ``auto`` is ``native``
    where the native kernels build, else ``for_loop`` (torch's own CPU default). ``compiled`` is ``auto``."""
    if implementation == "compiled":
        implementation = "auto"
    if device.type != "cpu":
        return "foreach" if implementation in ("auto", "native") else implementation
    if implementation == "native" and not torch.compiler.is_compiling():
        from lightning_recipes.optim._native import warn_if_native_missing

        warn_if_native_missing()  # once per process: what runs instead, and the fix
    if implementation != "auto":
        return implementation
    if not torch.compiler.is_compiling():
        from lightning_recipes.optim._native import native_available

        if native_available():
            return "native"
    return "for_loop"


# The only tensor types the native kernels may see: a subclass (FSDP2's DTensor, a tensor subclass of a
# quantisation library ...) has its own storage semantics, and its ``data_ptr`` is not its elements.
_PLAIN_TYPES = (Tensor, torch.nn.Parameter)


def is_plain(tensor: Tensor) -> bool:
    """``tensor`` is a ``torch.Tensor`` or ``nn.Parameter`` itself, not a subclass (DTensor ...)."""
    return type(tensor) in _PLAIN_TYPES


def split_for_native(*lists: Sequence[Tensor]) -> tuple[list[int], list[int]]:
    """Indices of the tensors the native kernels take and of the others.

    Taken: every list's tensor is a plain ``Tensor`` / ``Parameter`` (no subclass such as DTensor), strided,
    on the CPU (so never ``meta``), contiguous (so never expanded, channels-last or a strided view) and of the
    first list's dtype, one of the kernels' (so never complex). Disjoint views of one storage are fine (the
    kernels write each element of each tensor once); tensors that overlap one another are not detected.
    Cost: attribute checks only, no sync.
    """
    from lightning_recipes.optim._native import NATIVE_DTYPES

    taken: list[int] = []
    others: list[int] = []
    plain = _PLAIN_TYPES
    strided = torch.strided
    for index, items in enumerate(zip(*lists)):  # every step: plain loops and attribute checks
        dtype = items[0].dtype
        ok = dtype in NATIVE_DTYPES
        for item in items if ok else ():
            if (
                type(item) not in plain
                or item.dtype is not dtype
                or item.layout is not strided
                or not item.is_cpu
                or not item.is_contiguous()
            ):
                ok = False
                break
        (taken if ok else others).append(index)
    return taken, others


def prepare_tensors(
    lists: Sequence[Sequence[Tensor]], *, local_shards: bool
) -> tuple[list[list[Tensor]], list[list[Tensor]]]:
    """Split parallel lists (parameters first) into the rows every path may take and the rows only the
    eager per-tensor loop may take, with complex tensors replaced by their real views.

    - Complex tensors become ``torch.view_as_real`` views (as torch's optimizers do): the update is the one
      of the real and imaginary parts as separate reals, and norms over the view are the complex norms.
    - Tensor subclasses (FSDP2's DTensor ...) never reach the multi-tensor or native paths. With
      ``local_shards`` (elementwise updates such as Lion's) a row of DTensors that share the parameter's
      mesh and placements is replaced by its local shards, updated in place; every other subclass row goes to
      the loop, where DTensor ops compute what needs the whole tensor (LAMB's norms, all-reduced).

    Cost: one type and dtype check per parameter when every parameter is a plain real tensor (the common case,
    which returns the lists as they are); no sync.
    """
    params = lists[0]
    if all(type(p) in _PLAIN_TYPES and not p.is_complex() for p in params):
        return [list(items) for items in lists], [[] for _ in lists]
    plain: list[list[Tensor]] = [[] for _ in lists]
    eager: list[list[Tensor]] = [[] for _ in lists]
    for row in zip(*lists):
        target = plain
        if type(row[0]) not in _PLAIN_TYPES:
            local = _local_shards(row) if local_shards else None
            if local is None:
                target = eager
            else:
                row = local
        for out, item in zip(target, row):
            out.append(torch.view_as_real(item) if item.is_complex() else item)
    return plain, eager


def _local_shards(row: Sequence[Tensor]) -> tuple[Tensor, ...] | None:
    """The local shards of a row of DTensors laid out alike (same mesh and placements), else ``None``."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # torch built without distributed: no DTensor can exist
        return None

    first = row[0]
    if not isinstance(first, DTensor):
        return None
    for item in row:
        if (
            not isinstance(item, DTensor)
            or item.device_mesh != first.device_mesh
            or item.placements != first.placements
        ):
            return None
    return tuple(cast(DTensor, item).to_local() for item in row)


def backfill_group_options(
    optimizer: torch.optim.Optimizer, defaults: dict[str, Any], defaults_before: Collection[str]
) -> None:
    """After ``Optimizer.__setstate__``: ``setdefault`` the class's own options (``defaults``) in
    ``optimizer.defaults`` and in every group, so that groups saved before an option existed load and step,
    and take back the keys torch's ``__setstate__`` added to ``optimizer.defaults`` that the class does not
    own (``differentiable``), which ``defaults_before`` (the keys before the call) tells apart.

    Only the class's own options are back-filled: a loaded or unpickled optimizer's ``state_dict()`` and
    ``defaults`` equal the original's key for key (torch's state-dict determinism and pickle invariants).
    A group option missing from a saved group takes the optimizer's own default (its constructor argument).
    """
    for key in [key for key in optimizer.defaults if key not in defaults_before and key not in defaults]:
        del optimizer.defaults[key]
    for key, value in defaults.items():
        optimizer.defaults.setdefault(key, value)
    for group in optimizer.param_groups:
        for key in defaults:
            group.setdefault(key, optimizer.defaults[key])


def defaults_keys(optimizer: torch.optim.Optimizer, state: dict[str, Any]) -> frozenset[str]:
    """The keys of the ``defaults`` an ``__setstate__(state)`` call will leave before torch adds its own: the
    pickled ones when unpickling, else (``load_state_dict``) the optimizer's current ones."""
    defaults = state.get("defaults", optimizer.__dict__.get("defaults", {}))
    return frozenset(defaults)


def gather_gradients(
    optimizer: torch.optim.Optimizer,
) -> list[tuple[dict[str, Any], list[Tensor], list[Tensor]]]:
    """Every group with its parameters that have a gradient and those gradients, checked for sparse layouts
    before the step changes anything (a sparse gradient raises, naming the parameter). One pass over the
    parameters, no sync."""
    strided = torch.strided
    gathered = []
    for group in optimizer.param_groups:
        params: list[Tensor] = []
        grads: list[Tensor] = []
        for param in group["params"]:
            grad = param.grad
            if grad is None:
                continue
            if grad.layout is not strided:
                raise _sparse_error(optimizer, param, grad)
            params.append(param)
            grads.append(grad)
        gathered.append((group, params, grads))
    return gathered


def _sparse_error(optimizer: torch.optim.Optimizer, param: Tensor, grad: Tensor) -> RuntimeError:
    where = next(
        f"param_groups[{g}]['params'][{i}]"
        for g, group in enumerate(optimizer.param_groups)
        for i, other in enumerate(group["params"])
        if other is param
    )
    return RuntimeError(
        f"{type(optimizer).__name__} does not support sparse gradients, got a {grad.layout} gradient for "
        f"{where} (shape {tuple(param.shape)}); nothing was updated. Use dense gradients (e.g. "
        "`nn.Embedding(..., sparse=False)`)."
    )
