"""StabilityGuard's record of one fault (``StabilityEvent``), its description and its logged codes."""

from __future__ import annotations

import os
from dataclasses import dataclass

import lightning.pytorch as pl

from lightning_recipes.callbacks._faults import CAUSE_CODES

__all__ = [
    "FINDING_CAUSES",
    "StabilityEvent",
    "cause_code",
    "describe",
    "emergency_checkpoint",
    "event_metrics",
    "give_up_message",
    "outcome",
    "widen_message",
]

FINDING_CAUSES = {"lr_too_high": 5}  # HealthMonitor findings the guard repairs, and their logged cause code

_NAMES = {
    "nonfinite_loss": "non-finite loss",
    "nonfinite_grad_norm": "non-finite gradient norm",
    "loss_spike": "loss spike",
    "nonfinite_weights": "non-finite weights",
    "lr_too_high": "HealthMonitor: learning rate too high",
}
_QUANTITIES = {"nonfinite_grad_norm": "gradient norm", "nonfinite_weights": "weight norm"}


@dataclass
class StabilityEvent:
    """One detected fault and what the guard did about it.

    Attributes:
        step: ``trainer.global_step`` during the training step whose loss or gradient was bad (the number
            of optimizer steps completed before it).
        cause: ``"nonfinite_loss"``, ``"nonfinite_grad_norm"``, ``"loss_spike"``, ``"nonfinite_weights"`` or
            ``"lr_too_high"`` (a ``HealthMonitor`` finding).
        value: The offending loss or gradient norm.
        rank: The global rank that saw it (earliest step, then cause in the order above, then lowest rank).
        detected_at_step: ``trainer.global_step`` when the check ran (at most ``check_every_n_steps - 1``
            steps after ``step``).
        action: ``"rollback"``, ``"skip_step"``, ``"raise"``, ``"give_up"``, ``"logged"``, ``"scale_lr"`` or
            ``"widen"`` (a give-up over spikes vetoed by a validation loss that held: no rollback).
        restored_step: The step of the snapshot that was restored (``-1`` if none).
    """

    step: int
    cause: str
    value: float
    rank: int
    detected_at_step: int
    action: str
    restored_step: int = -1


def cause_code(cause: str) -> int:
    """The number logged as ``stability/event_cause`` (0 for an unknown cause).

    Example:
        >>> cause_code("nonfinite_loss"), cause_code("lr_too_high")
        (1, 5)
    """
    return CAUSE_CODES.get(cause, FINDING_CAUSES.get(cause, 0))


def describe(event: StabilityEvent) -> str:
    """One line naming the fault, the quantity and its value, where and when it was seen.

    Example:
        >>> describe(StabilityEvent(3, "loss_spike", 9.5, 1, 5, "rollback"))
        'loss spike (loss 9.5) at step 3 on rank 1, detected at step 5'
        >>> describe(StabilityEvent(3, "nonfinite_loss", float("nan"), 0, 5, "rollback"))
        'non-finite loss (loss nan) at step 3 on rank 0, detected at step 5'
    """
    quantity = _QUANTITIES.get(
        event.cause, "update/parameter ratio" if event.cause in FINDING_CAUSES else "loss"
    )
    return (
        f"{_NAMES[event.cause]} ({quantity} {event.value:.6g}) at step {event.step} on rank {event.rank}, "
        f"detected at step {event.detected_at_step}"
    )


def event_metrics(event: StabilityEvent, rollbacks: int, skipped_steps: int) -> dict[str, float]:
    """The logged keys of one event (the table in ``StabilityGuard``'s docstring).

    Example:
        >>> event = StabilityEvent(3, "nonfinite_loss", 1e9, 0, 5, "rollback")
        >>> event_metrics(event, rollbacks=1, skipped_steps=0)["stability/event_cause"]
        1.0
    """
    return {
        "stability/event_step": float(event.step),
        "stability/event_cause": float(cause_code(event.cause)),
        "stability/event_value": event.value,
        "stability/rollbacks": float(rollbacks),
        "stability/skipped_steps": float(skipped_steps),
    }


def give_up_message(
    event: StabilityEvent,
    why: tuple[list[int], int, int] | None,
    events: list[StabilityEvent],
    path: str | None,
) -> str:
    """Why the guard gave up: ``why`` is ``(recent rollback steps, window, max_rollbacks)``, or ``None``
    when no verified snapshot exists yet; ``path`` the emergency checkpoint, if one was written."""
    where = f" Emergency checkpoint (last good state, step {event.restored_step}): {path}." if path else ""
    if why is None:
        reason = "no verified snapshot exists yet (resumed with unchecked steps)"
    else:
        recent, window, max_rollbacks = why
        reason = (
            f"{len(recent)} rollbacks within {window} steps already "
            f"(max_rollbacks={max_rollbacks}) at steps {recent}"
        )
    history = ", ".join(f"{e.cause}@{e.step}" for e in events)
    return (
        f"StabilityGuard gave up: {describe(event)}; {reason}. Events so far: [{history}].{where}"
        " Lower the learning rate, inspect the batches at those steps, or raise `max_rollbacks`."
    )


def widen_message(event: StabilityEvent, monitor: str | None, held: tuple[float, float], floor: float) -> str:
    """Why the guard did not give up over spikes: the validation loss ``monitor`` held (``held``: before,
    now), so spikes must now exceed the level by ``floor``."""
    return (
        f"StabilityGuard: {describe(event)}, but `{monitor}` has not worsened since the first of the last "
        f"rollbacks ({held[0]:.6g} -> {held[1]:.6g}): spikes this size are this run's noise. Not giving up: "
        f"spikes must now exceed the level by {floor:.4g} (NaN, larger spikes still caught); no rollback."
    )


def emergency_checkpoint(trainer: pl.Trainer, directory: str | None, detected_at_step: int) -> str | None:
    """Save the restored state to ``directory`` (default: the ``ModelCheckpoint`` directory); its path, or
    ``None`` without a directory. Collective: every rank calls it together."""
    if directory is None and trainer.checkpoint_callback is not None:
        directory = getattr(trainer.checkpoint_callback, "dirpath", None)
    if directory is None:
        return None
    path = os.path.join(directory, f"stability-guard-emergency-step={detected_at_step}.ckpt")
    trainer.save_checkpoint(path)
    return path


def outcome(event: StabilityEvent, lr_scale: float, lr_factor: float, cooldown_left: int) -> str:
    """What the guard did, for the log line: the action, the snapshot restored and any learning-rate cut.

    Example:
        >>> outcome(StabilityEvent(3, "loss_spike", 9.5, 0, 5, "rollback", 2), 1.0, 0.5, 10)
        'rollback to the snapshot of step 2, learning rate x0.5 for 10 steps'
    """
    detail = ""
    if event.cause in FINDING_CAUSES:
        detail = (
            f" to the snapshot of step {event.restored_step}" if event.action == "rollback" else ""
        ) + f", learning rate x{lr_scale:g} from now on"
    elif event.action == "widen":
        detail = " the spike floor (validation held), no rollback"
    elif event.action == "rollback":
        detail = f" to the snapshot of step {event.restored_step}"
        if cooldown_left > 0:
            detail += f", learning rate x{lr_factor} for {cooldown_left} steps"
    return f"{event.action}{detail}"
