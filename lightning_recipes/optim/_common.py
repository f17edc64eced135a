"""Shared pieces of Lion and Lamb: path choice and dispatch, tensor grouping, ``implementation_used``."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, cast

import torch
from torch import Tensor

from lightning_recipes.optim.names import Implementation, check_implementation

__all__ = [
    "Implementation",
    "ImplementationRecord",
    "check_implementation",
    "foreach_chunks",
    "note_route",
    "run_native",
    "run_update",
    "split_for_native",
]

# foreach chunk sizes (bounded temporaries; accelerator / CPU): benchmarks/RESULTS.md
FOREACH_CHUNK_NUMEL = 1 << 25
FOREACH_CHUNK_NUMEL_CPU = 1 << 18


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
    """Consecutive chunks of parallel lists of at most ``max_numel`` elements (or one tensor) each."""
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
    """The route on ``device``: off CPU ``auto``/``native`` run ``foreach``; on CPU ``auto`` is ``native``
    where the kernels build, else ``for_loop``. ``compiled`` is ``auto``."""
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


# A subclass (FSDP2's DTensor ...) has its own storage: its ``data_ptr`` is not its elements.
_PLAIN_TYPES = (Tensor, torch.nn.Parameter)


def split_for_native(
    *lists: Sequence[Tensor], counters: Sequence[Tensor] | None = None
) -> tuple[list[int], list[int]]:
    """Indices of the rows the native kernels take (plain, strided, contiguous CPU tensors of one kernel
    dtype; with ``counters``, a float32 CPU counter) and of the others. Attribute checks only, no sync."""
    from lightning_recipes.optim._native import NATIVE_DTYPES

    taken: list[int] = []
    others: list[int] = []
    for index, items in enumerate(zip(*lists)):
        dtype = items[0].dtype
        ok = dtype in NATIVE_DTYPES and all(
            type(t) in _PLAIN_TYPES
            and t.dtype is dtype
            and t.layout is torch.strided
            and t.is_cpu
            and t.is_contiguous()
            for t in items
        )
        if ok and counters is not None:
            ok = counters[index].dtype is torch.float32 and counters[index].is_cpu
        (taken if ok else others).append(index)
    return taken, others


def prepare_tensors(
    lists: Sequence[Sequence[Tensor]], *, local_shards: bool
) -> tuple[list[list[Tensor]], list[list[Tensor]]]:
    """Split parallel lists (parameters first) into rows any path may take and rows for the loop only;
    complex tensors become real views, DTensor rows their local shards with ``local_shards``. No sync."""
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


def gather_gradients(
    optimizer: torch.optim.Optimizer,
) -> list[tuple[dict[str, Any], list[Tensor], list[Tensor]]]:
    """Every group with its parameters that have a gradient and those gradients; a sparse one raises."""
    gathered = []
    for group in optimizer.param_groups:
        params = [param for param in group["params"] if param.grad is not None]
        for param in params:
            if param.grad.layout is not torch.strided:
                raise _sparse_error(optimizer, param, param.grad)
        gathered.append((group, params, [param.grad for param in params]))
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


def run_update(
    routes: Mapping[str, Callable[..., None]],
    lists: Sequence[Sequence[Tensor]],
    hyper: NamedTuple,
    implementation: str,
    *,
    local_shards: bool,
) -> None:
    """Dispatch an update: loop-only rows to ``routes["for_loop"]``, the others by device and dtype to the
    route :func:`resolve_device_implementation` picks, each called as ``route(*lists, hyper)``."""
    plain, eager = prepare_tensors(lists, local_shards=local_shards)
    if eager[0]:
        routes["for_loop"](*eager, hyper)
    for group in group_by_device_and_dtype(*plain):
        routes[resolve_device_implementation(implementation, group[0][0].device)](*group, hyper)


def run_native(
    kernel: str,
    loop: Callable[..., None],
    lists: Sequence[Sequence[Tensor]],
    hyper: NamedTuple,
    *,
    counters: bool,
) -> None:
    """The native route: rows the kernels take go to ``kernels.<kernel>`` (versions bumped for what they
    wrote), the others to ``loop``; with ``counters`` the last list holds step counters."""
    from lightning_recipes.optim._native import bump_versions, native_kernels

    kernels = native_kernels()
    taken: list[int] = []
    others = list(range(len(lists[0])))
    if kernels is not None:
        tensors = lists[:-1] if counters else lists
        taken, others = split_for_native(*tensors, counters=lists[-1] if counters else None)
    if kernels is not None and taken:
        rows = [[lst[i] for i in taken] for lst in lists]
        getattr(kernels, kernel)(*rows, **hyper._asdict())  # type: ignore[attr-defined]
        bump_versions([t for k, row in enumerate(rows) if k != 1 for t in row])
        note_route("native")
    if others:
        loop(*([lst[i] for i in others] for lst in lists), hyper)


# The paths, fastest first: a step that used several names them in this order, joined by "+".
ROUTES = ("native", "foreach", "for_loop")
_active = threading.local()


class ImplementationRecord(torch.optim.Optimizer):
    """Base of Lion and Lamb: ``implementation_used`` (``None`` until a step, then the paths that ran); group
    options validated, and back-filled on load."""

    implementation_used: str | None
    #: Group options but ``lr``, with defaults (back-filled on load; the update function's keywords).
    _group_defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, params: Iterable[Any], defaults: dict[str, Any]) -> None:
        if isinstance(defaults.get("betas"), list):
            defaults["betas"] = tuple(defaults["betas"])
        self._validate_group(defaults)
        super().__init__(params, defaults)

    @staticmethod
    def _validate_group(group: dict[str, Any]) -> None:
        """Raise ``ValueError`` for a group option out of range (the subclass's checks)."""

    def _update_group(self, group: dict[str, Any], params: list[Tensor], grads: list[Tensor]) -> None:
        """One group's update (the subclass's)."""
        raise NotImplementedError

    def _update_options(self, group: dict[str, Any]) -> dict[str, Any]:
        """The update function's keyword arguments from a group's options."""
        beta1, beta2 = group["betas"]
        options = {key: group[key] for key in self._group_defaults if key != "betas"}
        return {"lr": group["lr"], "beta1": beta1, "beta2": beta2, **options}

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient; returns ``closure()``'s value if given. Then
        ``implementation_used`` names the paths that ran (``"native"``, ``"native+for_loop"`` ...)."""
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        outer = getattr(_active, "ran", None)
        ran: set[str] = set()
        _active.ran = ran
        try:
            for group, params, grads in gather_gradients(self):
                self._update_group(group, params, grads)
        finally:
            _active.ran = outer
        if ran:
            self.implementation_used = "+".join(name for name in ROUTES if name in ran)
        return loss

    def __getstate__(self) -> dict[str, Any]:
        """Torch's state and ``implementation_used``."""
        state: dict[str, Any] = super().__getstate__()  # type: ignore[misc]
        state["implementation_used"] = self.__dict__.get("implementation_used")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """As torch's, back-filling group options older states lack; keys torch adds are taken back, so a
        loaded optimizer's ``state_dict()`` equals the original's."""
        before = frozenset(state.get("defaults", self.__dict__.get("defaults", {})))
        super().__setstate__(state)
        self.__dict__.setdefault("implementation_used", None)
        defaults = self._group_defaults
        for key in [key for key in self.defaults if key not in before and key not in defaults]:
            del self.defaults[key]
        for key, value in defaults.items():
            self.defaults.setdefault(key, value)
        for group in self.param_groups:
            for key in defaults:
                group.setdefault(key, self.defaults[key])

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """As torch's, with the group's options validated before it joins."""
        self.__dict__.setdefault("implementation_used", None)
        if isinstance(param_group, dict):
            self._validate_group({**self.defaults, **param_group})
        super().add_param_group(param_group)


def note_route(name: str) -> None:
    """Record that path ``name`` ran in the step now running."""
    ran = getattr(_active, "ran", None)
    if ran is not None:
        ran.add(name)
