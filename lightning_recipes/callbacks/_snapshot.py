"""CPU copies of training state (module, optimizers, LR schedulers), restored in place."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

__all__ = ["Snapshot", "copy_to_cpu", "same_state", "synchronize_if_cuda"]


def copy_to_cpu(obj: Any, reuse: Any = None) -> Any:
    """A deep copy of ``obj`` (nested dicts, lists, tuples) with every tensor copied into CPU memory.

    CUDA tensors are copied into pinned buffers with ``non_blocking=True``: the copy is queued on the current
    stream and the call returns at once. Read the result on the host only after
    :func:`synchronize_if_cuda`; copying it back to the device needs no synchronisation (same stream).
    Tensors in ``reuse`` (an earlier result with the same structure, shapes and dtypes) are overwritten
    instead of allocating new buffers. Non-tensor leaves are deep-copied.

    Example:
        >>> state = {"w": torch.ones(2), "meta": [1, {"lr": 0.1}]}
        >>> snap = copy_to_cpu(state)
        >>> state["w"].add_(1.0)
        tensor([2., 2.])
        >>> snap["w"], snap["meta"]
        (tensor([1., 1.]), [1, {'lr': 0.1}])
        >>> copy_to_cpu(state, reuse=snap)["w"] is snap["w"]
        True
    """
    if isinstance(obj, Tensor):
        source = obj.detach()
        reusable = (
            isinstance(reuse, Tensor)
            and reuse.device.type == "cpu"
            and reuse.shape == source.shape
            and reuse.dtype == source.dtype
            and reuse is not source
        )
        if reusable:
            target = reuse
        else:
            target = torch.empty(
                source.shape, dtype=source.dtype, device="cpu", pin_memory=source.device.type == "cuda"
            )
        target.copy_(source, non_blocking=source.device.type == "cuda")
        return target
    if isinstance(obj, dict):
        old = reuse if isinstance(reuse, dict) else {}
        return type(obj)((key, copy_to_cpu(value, old.get(key))) for key, value in obj.items())
    if isinstance(obj, (list, tuple)):
        old_seq = reuse if isinstance(reuse, (list, tuple)) and len(reuse) == len(obj) else [None] * len(obj)
        items = [copy_to_cpu(value, previous) for value, previous in zip(obj, old_seq)]
        return type(obj)(items) if isinstance(obj, list) else tuple(items)
    return copy.deepcopy(obj)


def same_state(a: Any, b: Any) -> bool:
    """Value equality of nested state (dicts, lists, tuples, tensors, plain values): same structure and
    types, tensors of the same shape, dtype and device type with equal elements (NaN equal to NaN).

    Example:
        >>> same_state({"w": torch.tensor([1.0, float("nan")])}, {"w": torch.tensor([1.0, float("nan")])})
        True
        >>> same_state([torch.ones(2)], [torch.ones(2, dtype=torch.float64)])
        False
    """
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        if not (isinstance(a, Tensor) and isinstance(b, Tensor)):
            return False
        if (a.shape, a.dtype, a.device.type) != (b.shape, b.dtype, b.device.type):
            return False
        a, b = a.detach(), b.detach().to(a.device)
        if a.is_floating_point() or a.is_complex():
            return bool(((a == b) | (a.isnan() & b.isnan())).all())  # sync: comparisons only, never per step
        return torch.equal(a, b)
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same_state(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same_state(x, y) for x, y in zip(a, b))
    return bool(a == b)


def synchronize_if_cuda(device: torch.device) -> None:
    """Wait for queued copies on ``device`` (no-op off CUDA): before reading pinned snapshots on the host."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)  # sync: only on rollback / restore paths


class Snapshot:
    """An in-memory CPU copy of training state, restored in place: one object for StabilityGuard's rollback
    and EarlyStopping's best weights.

    :meth:`capture` copies a module's ``state_dict`` and, when given, the ``state_dict`` of optimizers and LR
    schedulers, into CPU memory (pinned, non-blocking on CUDA; by default into the buffers of the previous
    capture, so a refreshed snapshot allocates nothing). :meth:`restore` loads them back in place. ``extra``
    holds anything the owner wants back with the state (kept by reference, not copied). RNG states are not
    captured: a rollback moves on to the next batches instead of replaying the same ones.

    Cost: one device-to-host copy of the captured state and that much CPU memory (about 3x the fp32 model
    size for a module + Adam); on CUDA one sync per ``capture(wait=True)`` and per :meth:`restore`.

    Example:
        >>> model = torch.nn.Linear(2, 1)
        >>> optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        >>> snapshot = Snapshot().capture(model, [optimizer], step=3)
        >>> before = model.weight.detach().clone()
        >>> model(torch.ones(1, 2)).sum().backward(); optimizer.step()
        >>> snapshot.restore(model, [optimizer])
        >>> torch.equal(model.weight, before), optimizer.state_dict()["state"], snapshot.step
        (True, {}, 3)
    """

    def __init__(self) -> None:
        self.step = -1
        self.model: dict[str, Tensor] | None = None
        self.optimizers: list[dict[str, Any]] = []
        self.schedulers: list[dict[str, Any]] = []
        self.extra: Any = None

    def __eq__(self, other: object) -> bool:
        """Value equality: same step, same captured tensors (shape, dtype, elements), same optimizer and
        scheduler states and ``extra`` (so a pickled or deep-copied owner equals the original)."""
        if not isinstance(other, Snapshot):
            return NotImplemented
        return same_state(vars(self), vars(other))

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    @property
    def empty(self) -> bool:
        """Whether nothing was captured yet."""
        return self.model is None

    def capture(
        self,
        module: torch.nn.Module,
        optimizers: Sequence[torch.optim.Optimizer] = (),
        schedulers: Sequence[Any] = (),
        *,
        step: int = -1,
        extra: Any = None,
        reuse_buffers: bool = True,
        wait: bool = False,
    ) -> Snapshot:
        """Copy the state of ``module``, ``optimizers`` and ``schedulers`` (LR schedulers) into this snapshot.

        Args:
            module: Its ``state_dict`` is copied.
            optimizers: Their ``state_dict`` are copied.
            schedulers: Their ``state_dict`` are deep-copied (small, host-side).
            step: A label kept with the state (e.g. ``trainer.global_step``).
            extra: Kept by reference, returned unchanged by :attr:`extra`.
            reuse_buffers: Overwrite the previous capture's buffers instead of allocating new ones. Pass
                ``False`` when the previous copy may still be referenced elsewhere (e.g. by a checkpoint).
            wait: Block until the copy is complete (one sync on CUDA; no-op elsewhere).

        Returns:
            ``self``.
        """
        reuse = reuse_buffers and self.model is not None
        self.model = copy_to_cpu(module.state_dict(), self.model if reuse else None)
        self.optimizers = [
            copy_to_cpu(
                optimizer.state_dict(), self.optimizers[i] if reuse and i < len(self.optimizers) else None
            )
            for i, optimizer in enumerate(optimizers)
        ]
        self.schedulers = [copy.deepcopy(scheduler.state_dict()) for scheduler in schedulers]
        self.step = step
        self.extra = extra
        if wait:
            synchronize_if_cuda(_device_of(module))
        return self

    def restore(
        self,
        module: torch.nn.Module,
        optimizers: Sequence[torch.optim.Optimizer] = (),
        schedulers: Sequence[Any] = (),
    ) -> None:
        """Load the captured state back in place: into ``module`` (strict), ``optimizers``, ``schedulers``.

        Optimizer and scheduler states are deep-copied on the way in, so the snapshot can be restored again.

        Raises:
            RuntimeError: If nothing was captured.
        """
        if self.model is None:
            raise RuntimeError("This Snapshot is empty: call `capture` before `restore`.")
        synchronize_if_cuda(_device_of(module))  # sync: restore paths only; pinned copies must be complete
        module.load_state_dict(self.model, strict=True)
        for optimizer, state in zip(optimizers, self.optimizers):
            optimizer.load_state_dict(copy.deepcopy(state))
        for scheduler, state in zip(schedulers, self.schedulers):
            scheduler.load_state_dict(copy.deepcopy(state))


def _device_of(module: torch.nn.Module) -> torch.device:
    device = getattr(module, "device", None)  # LightningModule
    if isinstance(device, torch.device):
        return device
    first = next(iter(module.parameters()), None)
    return first.device if first is not None else torch.device("cpu")
