"""Shared pieces of Lion and Lamb: argument checks, the choice and dispatch of the execution path, tensor
grouping, and the record of which path ran (``optimizer.implementation_used``).
"""

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

# The foreach path works on chunks of at most this many elements, so that its temporaries (two chunk-sized
# lists) stay bounded: 32M elements on accelerators (few launches per step even for a 350M model), 256K on
# CPU (small chunks stay in cache). Measurements: benchmarks/RESULTS.md.
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


def split_for_native(
    *lists: Sequence[Tensor], counters: Sequence[Tensor] | None = None
) -> tuple[list[int], list[int]]:
    """Indices of the rows the native kernels take (every tensor a plain ``Tensor`` / ``Parameter``,
    strided, CPU, contiguous, of the first list's dtype, one of the kernels'; with ``counters``, a float32 CPU
    counter) and of the others. Disjoint views of one storage are fine; overlapping tensors are not detected.
    Cost: attribute checks only, no sync."""
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
        if ok and counters is not None:
            ok = counters[index].dtype is torch.float32 and counters[index].is_cpu
        (taken if ok else others).append(index)
    return taken, others


def prepare_tensors(
    lists: Sequence[Sequence[Tensor]], *, local_shards: bool
) -> tuple[list[list[Tensor]], list[list[Tensor]]]:
    """Split parallel lists (parameters first) into rows every path may take and rows only the per-tensor loop
    may take; complex tensors become real views. DTensor rows laid out alike become their local shards with
    ``local_shards`` (elementwise Lion); other subclass rows go to the loop (whole-tensor norms, LAMB). No
    sync.
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


def gather_gradients(
    optimizer: torch.optim.Optimizer,
) -> list[tuple[dict[str, Any], list[Tensor], list[Tensor]]]:
    """Every group with its parameters that have a gradient and those gradients; a sparse gradient raises,
    naming the parameter, before anything changes. One pass, no sync."""
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


def run_update(
    routes: Mapping[str, Callable[..., None]],
    lists: Sequence[Sequence[Tensor]],
    hyper: NamedTuple,
    implementation: str,
    *,
    local_shards: bool,
) -> None:
    """The one dispatch of Lion's and Lamb's update functions: subclass rows (see :func:`prepare_tensors`)
    take ``routes["for_loop"]``; the others, grouped by device and dtype, the route
    :func:`resolve_device_implementation` picks. Every route is called as ``route(*lists, hyper)``."""
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
    """The native route of Lion and Lamb: the rows the kernels take (:func:`split_for_native`; with
    ``counters`` the last list holds step counters) go to ``kernels.<kernel>(*lists, **hyper)``, with
    autograd's versions bumped for what they wrote (all but the gradients); the other rows to ``loop``."""
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


# The paths, fastest first: a step that used several (the native kernels for float32 tensors and the loop for
# complex ones) names them in this order, joined by "+".
ROUTES = ("native", "foreach", "for_loop")
_active = threading.local()


class ImplementationRecord(torch.optim.Optimizer):
    """Base of our optimizers: ``implementation_used`` (a plain attribute, so optimizer wrappers read it live)
    is ``None`` until a step, then the path(s) that ran; group options are validated and back-filled on load.
    """

    implementation_used: str | None
    #: Every group option but ``lr`` and its default, back-filled into groups saved before an option existed;
    #: also the keyword arguments (``betas`` as ``beta1``, ``beta2``) of the update function.
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
        """One group's update: its state created on first use, then the update function (the subclass's)."""
        raise NotImplementedError

    def _update_options(self, group: dict[str, Any]) -> dict[str, Any]:
        """The update function's keyword arguments from a group's options."""
        beta1, beta2 = group["betas"]
        options = {key: group[key] for key in self._group_defaults if key != "betas"}
        return {"lr": group["lr"], "beta1": beta1, "beta2": beta2, **options}

    @torch.no_grad()
    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Update every parameter that has a gradient (a sparse one raises before anything changes);
        returns ``closure()``'s value if one was given. Then ``implementation_used`` names the paths that ran
        (``"native"``, ``"for_loop"``, ``"native+for_loop"`` ...); a step that updated nothing leaves it."""
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
        """Torch's state and ``implementation_used``: a pickled or deep-copied optimizer says what its
        original last ran."""
        state: dict[str, Any] = super().__getstate__()  # type: ignore[misc]
        state["implementation_used"] = self.__dict__.get("implementation_used")
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """As torch's (``load_state_dict`` calls it too), back-filling group options a state saved before they
        existed lacks, and ``implementation_used`` (``None``); the keys torch adds are taken back, so that a
        loaded optimizer's ``state_dict()`` equals the original's."""
        # the defaults' keys before torch adds its own: the pickled ones, else (load_state_dict) the current
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
        """As torch's, with the group's options (the defaults filled in) validated before it joins;
        ``Optimizer.__init__`` calls it, so ``implementation_used`` exists from construction on."""
        self.__dict__.setdefault("implementation_used", None)
        if isinstance(param_group, dict):
            self._validate_group({**self.defaults, **param_group})
        super().add_param_group(param_group)


def note_route(name: str) -> None:
    """Record that path ``name`` updated tensors in the step now running (nothing outside a step)."""
    ran = getattr(_active, "ran", None)
    if ran is not None:
        ran.add(name)
