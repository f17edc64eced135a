"""CPU copies of training state (module, optimizers, LR schedulers, weight averages), restored in place:
the one snapshot mechanism of EarlyStopping's best weights and StabilityGuard's rollback."""

from __future__ import annotations

import copy
import logging
from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import WeightAveraging
from torch import Tensor

from lightning_recipes.callbacks._trainer import callback_list

__all__ = [
    "Snapshot",
    "averaging_callbacks",
    "capture_averages",
    "copy_to_cpu",
    "load_average",
    "same_state",
    "set_averages_to_module",
    "synchronize_if_cuda",
]


def copy_to_cpu(obj: Any, reuse: Any = None) -> Any:
    """A deep copy of ``obj`` (nested dicts, lists, tuples) with every tensor copied into CPU memory.

    CUDA tensors go into pinned buffers with ``non_blocking=True`` (read them on the host only after
    :func:`synchronize_if_cuda`). Tensors of ``reuse`` (an earlier result of the same structure, shapes and
    dtypes) are overwritten instead of allocating new buffers. Non-tensor leaves are deep-copied.

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
        source, cuda = obj.detach(), obj.device.type == "cuda"
        layout = (source.shape, source.dtype, "cpu")
        if not isinstance(reuse, Tensor) or (reuse.shape, reuse.dtype, reuse.device.type) != layout:
            reuse = torch.empty(source.shape, dtype=source.dtype, device="cpu", pin_memory=cuda)
        return reuse.copy_(source, non_blocking=cuda)
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
    """An in-memory CPU copy of a module's, optimizers' and schedulers' ``state_dict`` (refreshed into the
    last capture's buffers by default), restored in place; ``extra`` kept by reference; RNG states not
    captured (a rollback moves on to the next batches). On CUDA one sync per ``capture(wait=True)`` and per
    :meth:`restore`.
    """

    def __init__(self) -> None:
        self.step = -1
        self.model: dict[str, Tensor] | None = None
        self.optimizers: list[dict[str, Any]] = []
        self.schedulers: list[dict[str, Any]] = []
        self.extra: Any = None

    def __eq__(self, other: object) -> bool:
        """Value equality of everything captured (:func:`same_state`)."""
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
        """Copy the ``state_dict`` of ``module``, ``optimizers`` and ``schedulers`` into this snapshot;
        returns ``self``. ``step`` labels it; ``reuse_buffers=False`` when the previous copy may still be
        referenced (e.g. by a checkpoint); ``wait`` blocks until the copy is complete (one sync on CUDA)."""
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
        """Load the captured state back in place (``module`` strictly); it can be restored again.

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


# The logger of Lightning's `rank_zero_info`, which `WeightAveraging.on_load_checkpoint` uses.
_RANK_ZERO_LOG = logging.getLogger("lightning.pytorch.utilities.rank_zero")


def averaging_callbacks(trainer: pl.Trainer) -> list[Any]:
    """The Trainer's weight-averaging callbacks (they swap their average in for every validation run)."""
    return [callback for callback in callback_list(trainer) if isinstance(callback, WeightAveraging)]


def _saved_averages(trainer: pl.Trainer, pl_module: pl.LightningModule) -> list[tuple[Any, dict[str, Any]]]:
    """Each weight-averaging callback holding an average (none outside fit), with its checkpoint entries."""
    saved = []
    for callback in averaging_callbacks(trainer):
        checkpoint: dict[str, Any] = {"state_dict": {}}
        callback.on_save_checkpoint(trainer, pl_module, checkpoint)
        if "averaging_state" in checkpoint:
            saved.append((callback, checkpoint))
    return saved


def capture_averages(trainer: pl.Trainer, pl_module: pl.LightningModule) -> list[tuple[Any, Any]]:
    """A CPU copy of every weight-averaging callback's average, for :func:`load_average`."""
    return [
        (callback, copy_to_cpu({key: saved[key] for key in ("state_dict", "averaging_state")}))
        for callback, saved in _saved_averages(trainer, pl_module)
    ]


def load_average(trainer: pl.Trainer, pl_module: pl.LightningModule, callback: Any, state: Any) -> None:
    """Load ``state`` (``state_dict`` and ``averaging_state``) into ``callback`` by its checkpoint hook, its
    "Found current_model_state" note muted."""
    checkpoint = {**state, "current_model_state": pl_module.state_dict()}
    _RANK_ZERO_LOG.addFilter(_mute_found_state)
    try:
        callback.on_load_checkpoint(trainer, pl_module, checkpoint)
    finally:
        _RANK_ZERO_LOG.removeFilter(_mute_found_state)


def _mute_found_state(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Found current_model_state in the checkpoint")


def set_averages_to_module(trainer: pl.Trainer, pl_module: pl.LightningModule) -> int:
    """Make every weight-averaging callback's average equal to ``pl_module``'s weights; returns how many.

    Example:
        >>> from lightning.pytorch.callbacks import EMAWeightAveraging
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> trainer = fast_trainer(max_steps=2, callbacks=[EMAWeightAveraging()])
        >>> model = TinyClassifier()
        >>> trainer.fit(model, random_classification_loader(batch_size=16))
        >>> set_averages_to_module(trainer, model)
        1
    """
    saved = _saved_averages(trainer, pl_module)
    for callback, checkpoint in saved:
        state = {"state_dict": pl_module.state_dict(), "averaging_state": checkpoint["averaging_state"]}
        load_average(trainer, pl_module, callback, state)
    return len(saved)
