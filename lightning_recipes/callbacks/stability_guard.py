"""StabilityGuard: detect non-finite losses/gradients and loss spikes on the device, roll back in place."""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor
from typing_extensions import override

from lightning_recipes._collectives import all_reduce_sum_, gather_rows
from lightning_recipes._deprecation import warn_deprecated
from lightning_recipes._loss_output import loss_of
from lightning_recipes._stats import robust_scale
from lightning_recipes._validation import (
    check_bool,
    check_choice,
    check_in_range,
    check_int,
    check_non_negative,
    check_positive,
)
from lightning_recipes.callbacks._norms import STEP_POWERS
from lightning_recipes.callbacks._rollback import LRScaling, RollbackSnapshot  # shared with HealthMonitor
from lightning_recipes.callbacks._trainer import callback_list
from lightning_recipes.callbacks.health_monitor import HealthMonitor
from lightning_recipes.norms import (
    local_tensor,
    norm_power,
    power_to_norm,
    total_norm,
    total_norm_from_powers,
)

__all__ = ["StabilityEvent", "StabilityGuard"]

log = logging.getLogger(__name__)

_MODES = ("raise", "skip_step", "rollback")
FINDING_CAUSES = {"lr_too_high": 5}  # HealthMonitor findings the guard repairs, and their logged cause code
_ACTING_DEPRECATED = (  # the guard's own LR cut on findings; HealthMonitor(repair=True) is the one path
    "`StabilityGuard(act_on_findings=True)`, the default, is deprecated: set it False; use `HealthMonitor("
    "repair=True)`, the one repair path (it rolls back and cuts the LR by the factor the finding computed)."
)
Pending = list[tuple[int, Tensor | None, Tensor | None]]  # (step, loss, grad norm) unchecked; None: none


@dataclass
class StabilityEvent:
    """One detected fault and what the guard did about it.

    ``cause``: ``"nonfinite_loss"``, ``"nonfinite_grad_norm"``, ``"loss_spike"``, ``"nonfinite_weights"`` or
    ``"lr_too_high"``; ``value``: the offending loss, norm or update ratio; ``rank``: who saw it; ``action``:
    ``"rollback"``, ``"skip_step"``, ``"raise"``, ``"give_up"``, ``"logged"``, ``"scale_lr"`` or ``"widen"``;
    ``restored_step``: the restored snapshot's step (``-1``: none).
    """

    step: int
    cause: str
    value: float
    rank: int
    detected_at_step: int
    action: str
    restored_step: int = -1


class StabilityGuard(Callback):
    r"""Detect a non-finite loss or gradient norm or a loss spike and recover without restarting.

    Losses and gradient norms stay on the device and are checked every ``check_every_n_steps`` steps (one
    sync), agreed across ranks; a spike exceeds the run's own loss noise (``exceeds_noise``).
    ``mode="rollback"`` restores the last verified in-memory snapshot and trains on, at ``lr_factor`` for
    ``cooldown_steps``; past ``max_rollbacks`` within ``rollback_window_steps`` it writes an emergency
    checkpoint (to ``checkpoint_dir``) and raises, unless they were spikes and ``val_monitor`` held.
    ``mode="skip_step"`` drops steps with a non-finite gradient norm; ``"raise"`` stops at the first fault.
    ``act_on_findings`` is deprecated (``HealthMonitor(repair=True)`` is the one path). Every argument, the
    spike rule and the snapshot spacing: ``docs/guides/stability_guard.md``.

    Logged keys (at an event only, straight to ``trainer.loggers``): ``stability/event_step``,
    ``stability/event_cause`` (1 non-finite loss, 2 grad norm, 3 spike, 4 weights, 5 ``lr_too_high``),
    ``stability/event_value``, ``stability/rollbacks``, ``stability/skipped_steps``.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> guard = StabilityGuard(check_every_n_steps=2)
        >>> trainer = fast_trainer(max_steps=6, callbacks=[guard])
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> guard.events, guard.rollbacks, guard.snapshot_interval % 2  # adaptive: whole checks
        ([], 0, 0)
    """

    def __init__(
        self,
        mode: Literal["rollback", "skip_step", "raise"] = "rollback",
        check_every_n_steps: int = 10,
        snapshot_every_n_steps: int | None = None,
        spike_k: float | None = 6.0,
        spike_rtol: float | None = None,
        spike_window: int = 100,
        spike_warmup_steps: int = 20,
        check_grad_norm: bool = True,
        lr_factor: float = 1.0,
        cooldown_steps: int = 0,
        max_rollbacks: int = 3,
        rollback_window_steps: int = 1000,
        checkpoint_dir: str | os.PathLike[str] | None = None,
        verbose: bool = True,
        snapshot_overhead: float = 0.01,
        act_on_findings: bool = True,
        finding_lr_factor: float = 0.5,
        spike_min_rise: float = 0.5,
        spike_floor: float = 0.25,
        val_monitor: str | None = "val_loss",
    ) -> None:
        super().__init__()
        self.mode = mode
        self.check_every_n_steps = check_every_n_steps
        self.snapshot_every_n_steps = snapshot_every_n_steps
        self.spike_k = spike_k
        self.spike_rtol = spike_rtol
        self.spike_window = spike_window
        self.spike_warmup_steps = spike_warmup_steps
        self.check_grad_norm = check_grad_norm
        self.lr_factor = lr_factor
        self.cooldown_steps = cooldown_steps
        self.max_rollbacks = max_rollbacks
        self.rollback_window_steps = rollback_window_steps
        if checkpoint_dir is not None and not isinstance(checkpoint_dir, (str, os.PathLike)):
            raise TypeError(
                f"`checkpoint_dir` must be a path (str or os.PathLike) or None, got {checkpoint_dir!r}."
            )
        self.checkpoint_dir = None if checkpoint_dir is None else os.fspath(checkpoint_dir)
        self.verbose = verbose
        self.snapshot_overhead = snapshot_overhead
        self.act_on_findings = act_on_findings
        self.finding_lr_factor = finding_lr_factor
        self.spike_min_rise = spike_min_rise
        self.spike_floor = spike_floor
        self.val_monitor = val_monitor
        self._validate()
        self.events: list[StabilityEvent] = []
        self.rollbacks = self.skipped_steps = 0
        self.emergency_checkpoint_path: str | None = None
        self._rollback_steps: list[int] = []
        self._cooldown_left = 0
        self._window = torch.zeros(0)  # good step losses, oldest first, on the module's device
        self._reference = torch.zeros(())  # the highest median of the window so far (the spike floor's unit)
        self._pending: Pending = []  # (step, loss, grad norm), not yet checked
        self._micro_losses: list[Tensor] = []
        self._grad_norm: Tensor | None = None
        self._seen_step = 0
        self._snapshot_step = -1
        self._lr_scale = 1.0  # permanent, from lr_too_high findings
        self._snapshots = RollbackSnapshot()  # the last verified state and the timings that space snapshots
        self._skipped = False  # this batch's optimizer step was dropped (mode="skip_step")
        self._lr_scaling = LRScaling(self._lr_factor_now)
        self._findings_seen: dict[int, int] = {}  # id(HealthMonitor) -> its findings already read
        self._veto = SpikeVeto(val_monitor)

    def _validate(self) -> None:
        check_choice("mode", self.mode, _MODES)
        for name in ("check_every_n_steps", "spike_window"):
            check_int(name, getattr(self, name), minimum=1)
        check_int("snapshot_every_n_steps", self.snapshot_every_n_steps, minimum=1, optional=True)
        check_in_range("snapshot_overhead", self.snapshot_overhead, 0.0, 1.0, low_open=True, high_open=True)
        check_in_range("finding_lr_factor", self.finding_lr_factor, 0.0, 1.0, low_open=True)
        for name in ("spike_warmup_steps", "cooldown_steps", "max_rollbacks", "rollback_window_steps"):
            check_int(name, getattr(self, name), minimum=0)
        check_positive("spike_k", self.spike_k, optional=True)
        check_in_range(
            "spike_rtol", self.spike_rtol, 1.0, math.inf, low_open=True, high_open=True, optional=True
        )
        check_in_range("lr_factor", self.lr_factor, 0.0, 1.0, low_open=True)
        for name in ("spike_min_rise", "spike_floor"):
            check_non_negative(name, getattr(self, name))
        if self.val_monitor is not None and not isinstance(self.val_monitor, str):
            raise TypeError(f"`val_monitor` must be a str or None, got {self.val_monitor!r}.")
        for name in ("act_on_findings", "check_grad_norm", "verbose"):
            check_bool(name, getattr(self, name))

    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(mode=self.mode)

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        from lightning.pytorch.strategies import DeepSpeedStrategy, FSDPStrategy, ModelParallelStrategy

        sharded = isinstance(trainer.strategy, (DeepSpeedStrategy, FSDPStrategy, ModelParallelStrategy))
        if stage == "fit" and self.mode == "rollback" and sharded:
            raise ValueError(
                f"`StabilityGuard(mode='rollback')` does not support sharded strategies, got "
                f"{type(trainer.strategy).__name__}. Use mode='raise' or mode='skip_step' with this strategy."
            )

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        device = pl_module.device
        self._window = self._window.to(device)
        self._reference = self._reference.to(device)
        self._pending = [(s, _to(loss, device), _to(norm, device)) for s, loss, norm in self._pending]
        self._micro_losses = [loss.to(device) for loss in self._micro_losses]
        self._seen_step = trainer.global_step
        self._lr_scaling.attach(trainer.optimizers)
        if self.mode == "rollback" and not self._pending:
            # Nothing unchecked: the current state (initial or resumed) is good by definition.
            self._take_snapshot(trainer, pl_module)
        self._snapshots.start_timing(trainer.global_step)
        callbacks = callback_list(trainer)
        monitors = [i for i, c in enumerate(callbacks) if isinstance(c, HealthMonitor)]
        late = bool(monitors) and self in callbacks and monitors[-1] > callbacks.index(self)
        if self.act_on_findings and self.mode == "rollback" and late:
            rank_zero_warn(
                "`StabilityGuard` is before a `HealthMonitor` in `callbacks`: it may snapshot a step the "
                "monitor's check then condemns, and roll back only to it. Place the guard after the monitor.",
                category=UserWarning,
            )

    @override
    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        scaler = getattr(trainer.precision_plugin, "scaler", None)  # its overflow skips are normal
        if not (self.check_grad_norm or self.mode == "skip_step") or (
            scaler is not None and scaler.is_enabled()
        ):
            return
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if not grads:
            return
        norm = step_grad_norm(grads, trainer.global_step)
        if self.mode != "skip_step":
            self._grad_norm = norm if self._grad_norm is None else torch.hypot(self._grad_norm, norm)
            return
        local_bad = not bool(torch.isfinite(norm))  # sync: once per optimizer step, skip_step mode only
        if trainer.strategy.reduce_boolean_decision(local_bad, all=False):  # drop the step on every rank
            optimizer.zero_grad(set_to_none=True)
            self._skipped = True
            self.skipped_steps += 1
            cause, value = (2, float(norm)) if local_bad else (0, 0.0)
            event = self._agree_on_event(trainer, cause, trainer.global_step, value)
            event.action = "skip_step"
            self._record(trainer, pl_module, event)

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = loss_of(outputs)
        if loss is not None:
            self._micro_losses.append(loss.detach())
        if trainer.global_step == self._seen_step:
            return  # still accumulating gradients: no optimizer step on this batch
        self._seen_step = trainer.global_step
        if self._cooldown_left > 0:
            self._cooldown_left -= 1
        micro = self._micro_losses  # the step's loss: the sum over accumulated micro-batches
        loss = (micro[0] if len(micro) == 1 else torch.stack(micro).sum()) if micro else None
        if self._skipped:  # handled before the optimizer step: not checked, not in statistics
            loss, self._skipped = None, False
        self._pending.append((trainer.global_step - 1, loss, self._grad_norm))
        self._micro_losses = []
        self._grad_norm = None
        if self.act_on_findings:  # before the check: its snapshot must not capture what the finding condemns
            self._act_on_findings(trainer, pl_module)
        if len(self._pending) >= self.check_every_n_steps:
            self._check(trainer, pl_module)

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._veto.record(trainer)

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._lr_scaling.detach()

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._lr_scaling.detach()
        self._snapshots.release()

    @override
    def state_dict(self) -> dict[str, Any]:
        # sync: converting the pending device scalars happens only when a checkpoint is written.
        return {
            "events": [asdict(event) for event in self.events],
            "rollbacks": self.rollbacks,
            "skipped_steps": self.skipped_steps,
            "rollback_steps": list(self._rollback_steps),
            "cooldown_left": self._cooldown_left,
            "window": self._window.detach().cpu().tolist(),
            "pending": [(step, _float(loss), _float(norm)) for step, loss, norm in self._pending],
            "micro_losses": [float(loss) for loss in self._micro_losses],
            "snapshot_step": self._snapshot_step,
            "lr_scale": self._lr_scale,
            "reference": float(self._reference),
            "veto": self._veto.state_dict(),
        }

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.events = [StabilityEvent(**event) for event in state_dict.get("events", [])]
        self.rollbacks = int(state_dict.get("rollbacks", 0))
        self.skipped_steps = int(state_dict.get("skipped_steps", 0))
        self._rollback_steps = [int(step) for step in state_dict.get("rollback_steps", [])]
        self._cooldown_left = int(state_dict.get("cooldown_left", 0))
        self._window = torch.tensor(state_dict.get("window", []), dtype=torch.float32)
        self._pending = [
            (int(s), _tensor(loss), _tensor(norm)) for s, loss, norm in state_dict.get("pending", [])
        ]
        self._micro_losses = [
            torch.tensor(v, dtype=torch.float32) for v in state_dict.get("micro_losses", [])
        ]
        self._snapshot_step = int(state_dict.get("snapshot_step", -1))
        self._lr_scale = float(state_dict.get("lr_scale", 1.0))
        self._reference = torch.tensor(float(state_dict.get("reference", 0.0)))
        self._veto.load_state_dict(state_dict.get("veto", {}))

    def _check(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Classify the pending steps on the device (``fault_causes``), agree across ranks, act."""
        pending, self._pending = self._pending, []
        device = pl_module.device
        zero = torch.zeros((), device=device)
        losses = torch.stack([(zero if loss is None else loss).float() for _, loss, _ in pending])
        norms = torch.stack([(zero if norm is None else norm).float() for _, _, norm in pending])
        loss_mask = [loss is not None for _, loss, _ in pending]
        self._snapshots.measure_step_time(trainer.global_step)
        snapshot_due = (
            self.mode == "rollback" and trainer.global_step - self._snapshot_step >= self.snapshot_interval
        )
        # Never snapshot poisoned weights (an unchecked NaN gradient shows in no loss yet): blame the last.
        weights_norm = (
            total_norm([p.detach() for p in pl_module.parameters()]).to(device) if snapshot_due else None
        )
        causes = fault_causes(
            losses,
            norms,
            spike=self._spikes(losses),
            loss_mask=None if all(loss_mask) else torch.tensor(loss_mask, device=device),
            weights_norm=weights_norm,
        )
        record = fault_record(causes)
        global_faults = all_reduce_sum_(trainer, record[:1].clone())
        summary = torch.cat([global_faults, record[1:]]).tolist()  # sync: once per check
        faults, local_cause, local_index = (int(v) for v in summary)
        if faults == 0:
            if all(loss_mask):
                self._window = torch.cat([self._window, losses])[-self.spike_window :]
                self._reference = torch.maximum(self._reference, self._window.median())
            if snapshot_due:
                self._take_snapshot(trainer, pl_module)
            return
        value = 0.0  # the host value of this rank's fault (fault path only: a sync is free)
        if local_cause in (1, 3) and any(loss_mask):
            value = float(losses[local_index])
        elif local_cause == 2:
            value = float(norms[local_index])
        elif local_cause == 4 and weights_norm is not None:
            value = float(weights_norm)
        step = pending[local_index][0] if local_cause else trainer.global_step
        event = self._agree_on_event(trainer, local_cause, step, value)
        self._act(trainer, pl_module, event)

    def _spikes(self, losses: Tensor) -> Tensor | None:
        """Which ``losses`` exceed the run's loss noise (``None`` while it is being learned). No sync."""
        judged = self.spike_k is not None or self.spike_rtol is not None
        if not judged or self._window.numel() < max(self.spike_warmup_steps, 1):
            return None
        floor = (self.spike_floor * self._reference).clamp_min(self._veto.floor)
        rise, rtol = self.spike_min_rise, self.spike_rtol
        return exceeds_noise(losses, self._window, k=self.spike_k, min_rise=rise, rtol=rtol, floor=floor)

    def _agree_on_event(self, trainer: pl.Trainer, cause: int, step: int, value: float) -> StabilityEvent:
        """Every rank's first fault, gathered (fault path only); all act on the one ``choose_event`` picks."""
        rows = gather_rows(trainer, [float(cause), float(step), value, float(trainer.global_rank)])
        best = choose_event(rows)
        assert best is not None  # the all-reduced fault count was > 0: some rank has a fault
        code, at, worst, rank = best
        return StabilityEvent(int(at), CAUSES[int(code)], worst, int(rank), trainer.global_step, self.mode)

    def _act(self, trainer: pl.Trainer, pl_module: pl.LightningModule, event: StabilityEvent) -> None:
        if self.mode == "raise":
            event.action = "raise"
            self._record(trainer, pl_module, event)
            raise RuntimeError(f"StabilityGuard(mode='raise'): {describe(event)}.")
        if self.mode == "skip_step":
            event.action = "logged"  # the update already happened; skip_step only drops non-finite gradients
            self._record(trainer, pl_module, event)
            return
        recent = self._recent_rollbacks(event.step)
        if self._snapshots.snapshot is None or len(recent) >= self.max_rollbacks:
            if recent and self._veto.veto(trainer, event, recent[0], self._window.median()):
                self._rollback_steps = []  # trains on without a rollback, the floor above this spike
                self._record(trainer, pl_module, event)
                return
            event.action = "give_up"
            restored = self._snapshots.snapshot is not None
            if restored:
                self._restore(trainer, pl_module)
            self._record(trainer, pl_module, event)
            path = None
            if restored:
                path = emergency_checkpoint(trainer, self.checkpoint_dir, event.detected_at_step)
                self.emergency_checkpoint_path = path or self.emergency_checkpoint_path
            why = None if not restored else (recent, self.rollback_window_steps, self.max_rollbacks)
            raise RuntimeError(give_up_message(event, why, self.events, path))
        self._roll_back(trainer, pl_module, event.step)
        if self.lr_factor != 1.0 and self.cooldown_steps > 0:
            self._cooldown_left = self.cooldown_steps
        self._record(trainer, pl_module, event)

    @property
    def snapshot_interval(self) -> int:
        """Optimizer steps between snapshots now: ``snapshot_every_n_steps``, or the adaptive choice (the
        fewest whole checks whose measured time makes a snapshot cost ``snapshot_overhead`` of it)."""
        if self.snapshot_every_n_steps is not None:
            return self.snapshot_every_n_steps
        return self._snapshots.interval(self.check_every_n_steps, self.snapshot_overhead)

    def _take_snapshot(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # (the window is replaced, never modified in place: a reference is a copy)
        self._snapshots.take(trainer, pl_module, self._window, wait=self.snapshot_every_n_steps is None)
        self._snapshot_step = trainer.global_step

    def _act_on_findings(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Deprecated (``HealthMonitor(repair=True)`` is the one path): on each new ``lr_too_high`` of a
        ``HealthMonitor`` without ``repair``, cut the LR by ``finding_lr_factor`` and roll back."""
        monitors = [c for c in callback_list(trainer) if isinstance(c, HealthMonitor) and not c.repair]
        for monitor in monitors:  # findings are identical on all ranks: no collective
            seen = self._findings_seen.get(id(monitor), 0)
            self._findings_seen[id(monitor)] = len(monitor.findings)
            for finding in [f for f in monitor.findings[seen:] if f.problem in FINDING_CAUSES]:
                warn_deprecated(_ACTING_DEPRECATED)
                ratio = float(finding.evidence.get("update_ratio", math.nan))  # the key the rule writes
                event = StabilityEvent(
                    finding.step, finding.problem, ratio, 0, trainer.global_step, "scale_lr"
                )
                self._lr_scale *= self.finding_lr_factor
                room = len(self._recent_rollbacks(event.step)) < self.max_rollbacks
                if self.mode == "rollback" and self._snapshots.snapshot is not None and room:
                    self._pending = []
                    self._roll_back(trainer, pl_module, event.step)
                    event.action = "rollback"
                self._record(trainer, pl_module, event)

    def _recent_rollbacks(self, step: int) -> list[int]:
        return [s for s in self._rollback_steps if s > step - self.rollback_window_steps]

    def _roll_back(self, trainer: pl.Trainer, pl_module: pl.LightningModule, step: int) -> None:
        self._restore(trainer, pl_module)
        self._rollback_steps.append(step)
        self.rollbacks += 1

    def _restore(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._window = self._snapshots.restore(trainer, pl_module)
        self._micro_losses = []
        self._grad_norm = None

    def _record(self, trainer: pl.Trainer, pl_module: pl.LightningModule, event: StabilityEvent) -> None:
        if event.action in ("rollback", "give_up") and self._snapshots.snapshot is not None:
            event.restored_step = self._snapshots.step
        self.events.append(event)
        metrics = {
            "stability/event_step": float(event.step),
            "stability/event_cause": float(CAUSE_CODES.get(event.cause, FINDING_CAUSES.get(event.cause, 0))),
            "stability/event_value": event.value,
            "stability/rollbacks": float(self.rollbacks),
            "stability/skipped_steps": float(self.skipped_steps),
        }
        # straight to the loggers, at the step of this batch's metrics (one less after the optimizer step)
        step = trainer.global_step if event.action == "skip_step" else max(trainer.global_step - 1, 0)
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)
        if self.verbose and trainer.is_global_zero:
            did = outcome(event, self._lr_scale, self.lr_factor, self._cooldown_left)
            log.warning(f"StabilityGuard: {describe(event)}; action: {did}.")

    def _lr_factor_now(self) -> float:
        """The learning-rate multiplier for this optimizer step: findings' cut times any cooldown."""
        return self._lr_scale * (self.lr_factor if self._cooldown_left > 0 else 1.0)


class SpikeVeto:
    """Vetoes a give-up over loss spikes while the validation loss ``monitor`` (lower is better) holds.

    Example:
        >>> from lightning_recipes.testing import fast_trainer
        >>> veto = SpikeVeto("val_loss")
        >>> veto.values = [(10, torch.tensor(0.5)), (20, torch.tensor(0.3)), (30, torch.tensor(0.2))]
        >>> veto.held_since(fast_trainer(), 25)  # (the last value at or before step 25, the latest)
        (0.3, 0.2)
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
        """``(before, latest)`` when on every rank validation has not worsened since ``step``, else ``None``.

        One sync, one all-gather: all ranks call it."""
        values = [(s, float(v)) for s, v in self.values]  # sync: fault path only
        held = None
        if len(values) >= 2:
            before = next((v for s, v in reversed(values[:-1]) if s <= step), values[0][1])
            held = (before, values[-1][1]) if values[-1][1] <= before else None
        every = all(row[0] > 0 for row in gather_rows(trainer, [float(held is not None)]))
        return held if every else None

    def veto(self, trainer: pl.Trainer, event: StabilityEvent, since: int, level: Tensor) -> bool:
        """If validation held since ``since``, raise :attr:`floor` above this spike, mark it ``"widen"``."""
        held = self.held_since(trainer, since) if event.cause == "loss_spike" else None
        if held is None:
            return False
        self.floor = max(self.floor, 2.0 * (event.value - float(level)))
        event.action = "widen"
        rank_zero_warn(
            f"StabilityGuard: {describe(event)}, but `{self.monitor}` has not worsened since the first of "
            f"the last rollbacks ({held[0]:.6g} -> {held[1]:.6g}): spikes this size are this run's noise. "
            f"Not giving up: spikes must now exceed the level by {self.floor:.4g} (NaN, larger spikes still "
            "caught); no rollback.",
            category=UserWarning,
        )
        return True

    def state_dict(self) -> dict[str, Any]:
        return {"floor": self.floor, "validations": [[step, float(v)] for step, v in self.values]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.floor = float(state.get("floor", 0.0))
        self.values = [(int(step), torch.tensor(float(v))) for step, v in state.get("validations", [])]


def step_grad_norm(grads: list[Tensor], step: int) -> Tensor:
    """The local 2-norm of ``grads`` (no sync), shared with the other callbacks through ``STEP_POWERS``.

    Example:
        >>> step_grad_norm([torch.tensor([3.0]), torch.tensor([4.0])], step=-1)
        tensor(5.)
    """
    cached = STEP_POWERS.lookup(grads, 2.0, step)
    if cached is not None and set(cached) == {None}:
        return total_norm_from_powers(cached, 2.0)
    locals_ = [local_tensor(g) for g in grads]
    power = norm_power(locals_, 2.0)
    if all(local is grad for local, grad in zip(locals_, grads)):  # plain tensors: one shard layout (None)
        STEP_POWERS.publish(grads, 2.0, step, {None: power})
    return power_to_norm(power, 2.0)


#: Fault codes. A step with several faults gets one, first in this order: non-finite loss (1), loss spike (3),
#: non-finite gradient norm (2), non-finite weights (4).
CAUSES = {1: "nonfinite_loss", 2: "nonfinite_grad_norm", 3: "loss_spike", 4: "nonfinite_weights"}
CAUSE_CODES = {name: code for code, name in CAUSES.items()}


def exceeds_noise(
    losses: Tensor,
    window: Tensor,
    *,
    k: float | None,
    min_rise: float = 0.0,
    rtol: float | None = None,
    floor: Tensor | float = 0.0,
) -> Tensor:
    """The spike rule: which ``losses`` exceed the loss noise of ``window`` (recent good losses). No sync.

    Above the level by ``k`` robust spreads and ``min_rise`` (log space when all positive), or by ``rtol`` x
    the level, and always by more than ``floor``; NaN never exceeds (``docs/guides/stability_guard.md``).
    """
    window, losses = window.float(), losses.float()
    log_space = (window > 0).all()
    tiny = torch.finfo(torch.float32).tiny
    level, spread = robust_scale(torch.where(log_space, window.clamp_min(tiny).log(), window))
    spike = torch.zeros_like(losses, dtype=torch.bool)
    linear_level = torch.where(log_space, level.exp(), level)
    if k is not None:
        values = torch.where(log_space, losses.clamp_min(tiny).log(), losses)
        rise = torch.where(log_space, math.log1p(min_rise), min_rise * level.abs())
        spike |= values > level + torch.maximum(k * spread, rise)
    if rtol is not None:
        spike |= losses > rtol * linear_level
    return spike & (losses - linear_level > floor)


def fault_causes(
    losses: Tensor,
    norms: Tensor,
    *,
    spike: Tensor | None = None,
    loss_mask: Tensor | None = None,
    weights_norm: Tensor | None = None,
) -> Tensor:
    """The fault code of each step (``0``: good; :data:`CAUSES`), int64, no host sync; first match wins.

    ``1`` non-finite loss (where ``loss_mask``), ``3`` ``spike``, ``2`` non-finite norm, ``4`` (last step
    only) a non-finite ``weights_norm``.
    """
    causes = torch.zeros(losses.shape, dtype=torch.int64, device=losses.device)
    bad_loss = ~torch.isfinite(losses)
    if loss_mask is not None:
        bad_loss &= loss_mask
    causes = torch.where(bad_loss, 1, causes)
    if spike is not None:
        if loss_mask is not None:
            spike = spike & loss_mask
        causes = torch.where((causes == 0) & spike, 3, causes)
    causes = torch.where((causes == 0) & ~torch.isfinite(norms), 2, causes)
    if weights_norm is not None:
        last_bad = (causes[-1:] == 0) & ~torch.isfinite(weights_norm.reshape(1))
        causes = torch.cat([causes[:-1], torch.where(last_bad, 4, causes[-1:])])
    return causes


def fault_record(causes: Tensor) -> Tensor:
    """``[number of faulty steps, code of the first, index of the first]`` on the device, with no sync."""
    first = torch.argmax((causes > 0).to(torch.uint8)).reshape(1)
    return torch.cat([(causes > 0).sum().reshape(1), causes.gather(0, first), first])


def choose_event(rows: Sequence[Sequence[float]]) -> Sequence[float] | None:
    """Among every rank's first fault ``(code, step, value, rank)`` (code 0: none), the one all ranks act on:
    the earliest step, then the lowest code (the root cause), then the lowest rank; ``None`` when none."""
    return min((row for row in rows if row[0] > 0), key=lambda row: (row[1], row[0], row[3]), default=None)


_NAMES = {
    "nonfinite_loss": "non-finite loss",
    "nonfinite_grad_norm": "non-finite gradient norm",
    "loss_spike": "loss spike",
    "nonfinite_weights": "non-finite weights",
    "lr_too_high": "HealthMonitor: learning rate too high",
}
_QUANTITIES = {"nonfinite_grad_norm": "gradient norm", "nonfinite_weights": "weight norm"}


def describe(event: StabilityEvent) -> str:
    """One line naming the fault, the quantity and its value, where and when it was seen."""
    quantity = _QUANTITIES.get(
        event.cause, "update/parameter ratio" if event.cause in FINDING_CAUSES else "loss"
    )
    return (
        f"{_NAMES[event.cause]} ({quantity} {event.value:.6g}) at step {event.step} on rank {event.rank}, "
        f"detected at step {event.detected_at_step}"
    )


def give_up_message(
    event: StabilityEvent,
    why: tuple[list[int], int, int] | None,
    events: list[StabilityEvent],
    path: str | None,
) -> str:
    """Why the guard gave up: ``why`` is ``(recent rollback steps, window, max_rollbacks)`` or ``None`` (no
    snapshot yet); ``path`` the emergency checkpoint."""
    where = f" Emergency checkpoint (last good state, step {event.restored_step}): {path}." if path else ""
    reason = "no verified snapshot exists yet (resumed with unchecked steps)"
    if why is not None:
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


def outcome(event: StabilityEvent, lr_scale: float, lr_factor: float, cooldown_left: int) -> str:
    """What the guard did, for the log line."""
    detail = f" to the snapshot of step {event.restored_step}" if event.action == "rollback" else ""
    if event.cause in FINDING_CAUSES:
        detail += f", learning rate x{lr_scale:g} from now on"
    elif event.action == "widen":
        detail = " the spike floor (validation held), no rollback"
    elif event.action == "rollback" and cooldown_left > 0:
        detail += f", learning rate x{lr_factor} for {cooldown_left} steps"
    return f"{event.action}{detail}"


def emergency_checkpoint(trainer: pl.Trainer, directory: str | None, detected_at_step: int) -> str | None:
    """Save the restored state to ``directory`` (default: ``ModelCheckpoint``'s); its path. Collective."""
    if directory is None and trainer.checkpoint_callback is not None:
        directory = getattr(trainer.checkpoint_callback, "dirpath", None)
    if directory is None:
        return None
    path = os.path.join(directory, f"stability-guard-emergency-step={detected_at_step}.ckpt")
    trainer.save_checkpoint(path)
    return path


def _to(value: Tensor | None, device: torch.device) -> Tensor | None:
    return None if value is None else value.to(device)


def _float(value: Tensor | None) -> float | None:
    return None if value is None else float(value)  # sync: only when a checkpoint is written


def _tensor(value: float | None) -> Tensor | None:
    return None if value is None else torch.tensor(value, dtype=torch.float32)
