"""How long the planned run is (:class:`RunLength`), and the stand-in Trainer (:class:`PlannedTrainer`) that a
copy's ``configure_optimizers`` reads when there is no real one."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl

from lightning_recipes._validation import check_int

__all__ = ["PlannedTrainer", "RunLength", "check_run_length"]


def check_run_length(max_epochs: Any, max_steps: Any) -> None:
    """``ValueError`` unless ``max_epochs`` and ``max_steps`` are ``None`` or integers >= 1.

    Example:
        >>> check_run_length(10, None)
        >>> check_run_length(None, 0)
        Traceback (most recent call last):
        ...
        ValueError: `max_steps` must be an integer >= 1, got 0.
    """
    check_int("max_epochs", max_epochs, minimum=1, optional=True)
    check_int("max_steps", max_steps, minimum=1, optional=True)


@dataclass(frozen=True)
class RunLength:
    """The planned run in optimizer steps, as far as it is known: ``total_steps`` (``None``: unknown),
    ``batches_per_epoch`` (``None``: no loader length), ``accumulate_grad_batches``, the planned
    ``max_epochs`` and ``max_steps``, and the ``source`` of the numbers (for messages).

    Example:
        >>> run = RunLength.planned(max_epochs=3, max_steps=None, batches_per_epoch=10)
        >>> run.total_steps, run.steps_per_epoch, run.source
        (30, 10, 'max_epochs=3 x 10 batch(es) per epoch')
        >>> RunLength.planned(None, None, 10).total_steps is None
        True
    """

    total_steps: int | None
    batches_per_epoch: int | None
    accumulate_grad_batches: int = 1
    max_epochs: int | None = None
    max_steps: int | None = None
    source: str = "unknown"

    @property
    def steps_per_epoch(self) -> int | None:
        """Optimizer steps per epoch (the last, partial accumulation window steps too, as in Lightning)."""
        if self.batches_per_epoch is None:
            return None
        return max(1, math.ceil(self.batches_per_epoch / self.accumulate_grad_batches))

    @classmethod
    def planned(
        cls, max_epochs: int | None, max_steps: int | None, batches_per_epoch: int | None
    ) -> RunLength:
        """The length ``Trainer(max_epochs=, max_steps=)`` gives (the smaller of the two) with
        ``batches_per_epoch`` and no accumulation."""
        candidates = [(max_steps, f"max_steps={max_steps}")] if max_steps is not None else []
        if max_epochs is not None and batches_per_epoch is not None:
            epochs = f"max_epochs={max_epochs} x {batches_per_epoch} batch(es) per epoch"
            candidates.append((max_epochs * batches_per_epoch, epochs))
        total, source = min(candidates) if candidates else (None, "unknown")
        return cls(total, batches_per_epoch, 1, max_epochs, max_steps, source)

    @classmethod
    def from_trainer(cls, trainer: pl.Trainer) -> RunLength:
        """The Trainer's own plan, read at ``on_train_start`` (``estimated_stepping_batches``, ...)."""
        accumulate = int(getattr(trainer, "accumulate_grad_batches", 1) or 1)
        batches = _finite_int(getattr(trainer, "num_training_batches", None))
        try:
            total = _finite_int(trainer.estimated_stepping_batches)
        except Exception:  # no loader length, or read before the Trainer set up its data
            total = None
        epochs = _finite_int(getattr(trainer, "max_epochs", None), positive=True)
        steps = _finite_int(getattr(trainer, "max_steps", None), positive=True)
        source = f"the Trainer's estimated_stepping_batches={total}" if total is not None else "unknown"
        return cls(total, batches, accumulate, epochs, steps, source)


def _finite_int(value: Any, positive: bool = False) -> int | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return None if positive and int(value) <= 0 else int(value)


class PlannedTrainer:
    """What a ``configure_optimizers`` commonly reads of ``self.trainer``, for the planned run, on a copy when
    there is no real Trainer: the run's length and the state of a run not started (one process); anything
    else raises ``AttributeError`` naming it (never a made-up value).

    Example:
        >>> trainer = PlannedTrainer(RunLength.planned(max_epochs=2, max_steps=None, batches_per_epoch=5))
        >>> trainer.estimated_stepping_batches, trainer.max_epochs, trainer.max_steps
        (10, 2, -1)
    """

    current_epoch = global_step = global_rank = local_rank = 0
    world_size = num_devices = num_nodes = 1
    is_global_zero = True
    sanity_checking = False
    training = True

    def __init__(self, run: RunLength, train_dataloader: Any = None) -> None:
        if run.total_steps is None:
            raise ValueError("a PlannedTrainer needs a run of known length (`total_steps` is None).")
        self.run = run
        self.train_dataloader = train_dataloader  # the loader the run will train on (its batch size)
        self.callbacks: list[Any] = []  # a preflight outside fit knows none of the Trainer's callbacks
        self.estimated_stepping_batches = run.total_steps
        self.max_epochs = run.max_epochs if run.max_epochs is not None else -1
        self.max_steps = run.max_steps if run.max_steps is not None else -1
        self.num_training_batches = (
            run.batches_per_epoch if run.batches_per_epoch is not None else float("inf")
        )
        self.accumulate_grad_batches = run.accumulate_grad_batches

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"`self.trainer.{name}` is not available on a copy checked outside `trainer.fit` (the stand-in "
            "for the planned run answers estimated_stepping_batches, max_epochs, max_steps, "
            "num_training_batches, accumulate_grad_batches, train_dataloader, num_devices, num_nodes and "
            "callbacks, empty)."
        )
