"""StabilityGuard's repairs besides the rollback itself: the learning-rate cut (a cooldown after a rollback,
a permanent one per ``lr_too_high`` finding), applied inside every optimizer step, reading which
``HealthMonitor`` findings are new and repairable, and whether validation held (a give-up's veto)."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor

from lightning_recipes._collectives import gather_rows
from lightning_recipes.callbacks._stability_event import FINDING_CAUSES, StabilityEvent, widen_message
from lightning_recipes.callbacks._trainer import callback_list
from lightning_recipes.callbacks.health_monitor import Finding, HealthMonitor

__all__ = ["FindingsReader", "LRScaling", "SpikeVeto", "finding_event", "warn_if_before_monitor"]


class LRScaling:
    """Multiplies every param group's learning rate by ``factor()`` for the duration of each optimizer step
    (a pre-hook scales, a post-hook restores), on top of any scheduler, which never sees the change.

    Example:
        >>> param = torch.nn.Parameter(torch.ones(1))
        >>> optimizer = torch.optim.SGD([param], lr=1.0)
        >>> scaling = LRScaling(lambda: 0.5)
        >>> scaling.attach([optimizer])
        >>> param.grad = torch.ones(1)
        >>> optimizer.step()
        >>> param.item(), optimizer.param_groups[0]["lr"]  # a step of 0.5, the rate itself untouched
        (0.5, 1.0)
        >>> scaling.detach()
    """

    def __init__(self, factor: Any) -> None:
        self._factor = factor  # () -> float, read at every step
        self._saved: dict[int, list[Any]] = {}
        self._handles: list[Any] = []

    def attach(self, optimizers: list[torch.optim.Optimizer]) -> None:
        for optimizer in optimizers:
            self._handles.append(optimizer.register_step_pre_hook(self._scale))
            self._handles.append(optimizer.register_step_post_hook(self._unscale))

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_handles": [], "_saved": {}}

    def _scale(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        factor = self._factor()
        if factor == 1.0:
            return
        self._saved[id(optimizer)] = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * factor

    def _unscale(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        saved = self._saved.pop(id(optimizer), None)
        if saved is not None:
            for group, lr in zip(optimizer.param_groups, saved):
                group["lr"] = lr


class FindingsReader:
    """The repairable findings (``lr_too_high``) that every ``HealthMonitor`` in the Trainer added since the
    last read. The findings are identical on all ranks (the monitor all-gathers): no collective, host-side
    list reads only."""

    def __init__(self) -> None:
        self._seen: dict[int, int] = {}  # id(monitor) -> findings already read

    def new(self, trainer: pl.Trainer) -> list[Finding]:
        found: list[Finding] = []
        for callback in callback_list(trainer):
            if not isinstance(callback, HealthMonitor):
                continue
            seen = self._seen.get(id(callback), 0)
            self._seen[id(callback)] = len(callback.findings)
            found += [f for f in callback.findings[seen:] if f.problem in FINDING_CAUSES]
        return found


class SpikeVeto:
    """The veto of a give-up over loss spikes while the validation loss ``monitor`` (lower is better) holds,
    and the spike floor its vetoes raised. Validations are kept as device tensors (no sync); they are read on
    the fault path only.

    Example:
        >>> from lightning_recipes.testing import fast_trainer
        >>> veto = SpikeVeto("val_loss")
        >>> veto.values = [(10, torch.tensor(0.5)), (20, torch.tensor(0.3)), (30, torch.tensor(0.2))]
        >>> veto.held_since(fast_trainer(), 25)  # (the last value at or before step 25, the latest)
        (0.3, 0.2)
        >>> veto.values[-1] = (30, torch.tensor(0.6))
        >>> veto.held_since(fast_trainer(), 25) is None
        True
    """

    def __init__(self, monitor: str | None) -> None:
        self.monitor = monitor
        self.values: list[tuple[int, Tensor]] = []  # (global_step, value), the last 100 validations
        self.floor = 0.0  # what spikes must exceed the level by since the last veto, in loss units

    def record(self, trainer: pl.Trainer) -> None:
        value = trainer.callback_metrics.get(self.monitor or "")
        if trainer.sanity_checking or trainer.state.fn != "fit" or not isinstance(value, Tensor):
            return
        self.values = [*self.values[-99:], (trainer.global_step, value.detach().float().reshape(()))]

    def held_since(self, trainer: pl.Trainer, step: int) -> tuple[float, float] | None:
        """``(before, latest)`` when, on every rank, the latest validation is no worse than the last one at or
        before ``step`` (or, with none, the first); ``None`` otherwise or with fewer than two. One sync and
        one all-gather: call it on every rank together."""
        values = [(s, float(v)) for s, v in self.values]  # sync: fault path only
        held = None
        if len(values) >= 2:
            before = next((v for s, v in reversed(values[:-1]) if s <= step), values[0][1])
            held = (before, values[-1][1]) if values[-1][1] <= before else None
        every = all(row[0] > 0 for row in gather_rows(trainer, [float(held is not None)]))
        return held if every else None

    def veto(self, trainer: pl.Trainer, event: StabilityEvent, since: int, level: Tensor) -> bool:
        """At a would-be give-up over ``event``: if it is a spike and validation held since step ``since``,
        raise :attr:`floor` to twice its excess over ``level``, mark it ``"widen"`` and warn (fault path)."""
        held = self.held_since(trainer, since) if event.cause == "loss_spike" else None
        if held is None:
            return False
        self.floor = max(self.floor, 2.0 * (event.value - float(level)))
        event.action = "widen"
        rank_zero_warn(widen_message(event, self.monitor, held, self.floor), category=UserWarning)
        return True

    def state_dict(self) -> dict[str, Any]:
        return {"floor": self.floor, "validations": [[step, float(v)] for step, v in self.values]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.floor = float(state.get("floor", 0.0))
        self.values = [(int(step), torch.tensor(float(v))) for step, v in state.get("validations", [])]


def finding_event(finding: Finding, detected_at_step: int) -> StabilityEvent:
    """The event of a repaired finding (action ``"scale_lr"`` until a rollback makes it ``"rollback"``).

    Example:
        >>> finding_event(Finding("lr_too_high", 40, 0, {"update_ratio": 0.2}), 41).value
        0.2
    """
    return StabilityEvent(
        step=finding.step,
        cause=finding.problem,
        value=float(
            finding.evidence.get("update_ratio", math.nan)
        ),  # the key the rule writes (_health_loss_rules)
        rank=0,
        detected_at_step=detected_at_step,
        action="scale_lr",
    )


def warn_if_before_monitor(trainer: pl.Trainer, guard: Any) -> None:
    """Warn when the acting ``guard`` precedes a ``HealthMonitor`` (it would act a batch late)."""
    callbacks = callback_list(trainer)
    monitors = [i for i, c in enumerate(callbacks) if isinstance(c, HealthMonitor)]
    if monitors and guard in callbacks and monitors[-1] > callbacks.index(guard):
        rank_zero_warn(
            "`StabilityGuard` is placed before a `HealthMonitor` in `callbacks`: it may snapshot a step "
            "that the monitor's check then condemns, and roll back only to it. Place the guard after the "
            "monitor.",
            category=UserWarning,
        )
