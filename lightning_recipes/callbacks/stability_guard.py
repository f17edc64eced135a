"""StabilityGuard: detect non-finite losses/gradients and loss spikes on the device, roll back in place."""

from __future__ import annotations

import logging
import math
import os
from dataclasses import asdict
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor
from typing_extensions import override

from lightning_recipes._collectives import all_reduce_sum_, gather_rows
from lightning_recipes._loss_output import loss_of
from lightning_recipes._validation import (
    check_bool,
    check_choice,
    check_in_range,
    check_int,
    check_non_negative,
    check_positive,
)
from lightning_recipes.callbacks._faults import (
    CAUSES,
    choose_event,
    exceeds_noise,
    fault_causes,
    fault_record,
)
from lightning_recipes.callbacks._pending_steps import (
    Pending,
    offending_value,
    pending_from_plain,
    pending_to_device,
    pending_to_plain,
    stack,
    step_loss,
)
from lightning_recipes.callbacks._rollback_snapshot import RollbackSnapshot, check_rollback_supported
from lightning_recipes.callbacks._stability_event import (
    StabilityEvent,
    describe,
    emergency_checkpoint,
    event_metrics,
    give_up_message,
    outcome,
)
from lightning_recipes.callbacks._stability_repair import (
    FindingsReader,
    LRScaling,
    SpikeVeto,
    finding_event,
    warn_if_before_monitor,
)
from lightning_recipes.callbacks._step_skipping import StepSkipper, optimizer_grad_norm, scaler_enabled
from lightning_recipes.callbacks.health_monitor import Finding
from lightning_recipes.norms import total_norm

__all__ = ["StabilityEvent", "StabilityGuard"]

log = logging.getLogger(__name__)

_MODES = ("raise", "skip_step", "rollback")


class StabilityGuard(Callback):
    r"""Detect a non-finite loss, a non-finite gradient norm or a loss spike and recover without restarting.

    It keeps each step's loss and gradient norm on the device and checks them every ``check_every_n_steps``
    steps, agreed across ranks, for a non-finite loss or gradient norm, a loss spike (above the run's own
    loss noise: ``spike_k`` robust std **and** ``1 + spike_min_rise`` x the level, or ``spike_rtol`` x it;
    always by more than ``spike_floor`` x its starting loss, a near-zero loss's noise), or non-finite
    weights before a snapshot. ``mode="rollback"`` restores the last verified in-memory snapshot (model,
    optimizers, schedulers, weight averages) and trains on; after ``max_rollbacks`` within
    ``rollback_window_steps`` it writes an emergency checkpoint and raises, unless they were spikes and the
    validation loss ``val_monitor`` held since the first (then it warns, widens its spike floor, trains on).
    ``mode="skip_step"`` drops a step whose gradient norm is non-finite on any rank; ``mode="raise"`` stops
    at the first fault. ``act_on_findings`` repairs a ``HealthMonitor``'s ``lr_too_high`` findings (place
    it after the monitor). Long form: ``docs/guides/stability_guard.md``.

    Cost:
        Per step: one read of the gradients for their norm (reused from a ``GradNormMonitor`` placed before
        the guard), no sync. Per check: **one sync** and, under DDP, one all-reduce of one integer
        (``mode="skip_step"``: per step). Per snapshot: one device-to-host copy of model + optimizer state and
        that much CPU memory (~3x the fp32 model for Adam), spaced to cost ``snapshot_overhead`` of the
        training time. Measured figures: ``benchmarks/RESULTS.md``.

    Args:
        mode: ``"rollback"``, ``"skip_step"`` or ``"raise"``.
        check_every_n_steps: Optimizer steps between checks (each check syncs once).
        snapshot_every_n_steps: Minimum optimizer steps between snapshots (at passing checks, and once at the
            start); ``None`` (default): adaptive, see above.
        snapshot_overhead: The fraction of training time adaptive snapshots may take, in ``(0, 1)``.
        spike_k: Spike threshold in robust standard deviations above the level, ``> 0``; ``None``: off.
        spike_rtol: Spike threshold as a multiple of the loss level (median), ``> 1``; ``None`` disables it.
        spike_window: Number of recent good steps in the running statistics.
        spike_warmup_steps: Good steps needed before spikes are detected (non-finite values: from the start).
        check_grad_norm: Whether to check the gradient norm (always on for ``mode="skip_step"``).
        lr_factor: Learning-rate multiplier applied after a rollback, in ``(0, 1]``.
        cooldown_steps: Optimizer steps the ``lr_factor`` lasts.
        max_rollbacks: Rollbacks allowed within ``rollback_window_steps`` before giving up.
        rollback_window_steps: Window, in optimizer steps, for ``max_rollbacks``.
        checkpoint_dir: Where to write the emergency checkpoint; default: the ``ModelCheckpoint`` directory.
        verbose: Log each event on rank zero (``logging.WARNING``).
        act_on_findings: Repair ``HealthMonitor``'s ``lr_too_high`` findings (see above).
        finding_lr_factor: Learning-rate multiplier for the rest of the run per finding, in ``(0, 1]``.
        spike_min_rise: The ``spike_k`` rule also needs the loss above ``1 + spike_min_rise`` x it, ``>= 0``.
        spike_floor: Every spike must also exceed the level by this fraction of the run's reference loss (its
            highest level: the starting loss), ``>= 0``; what one hard sample adds to a loss near zero.
        val_monitor: The logged validation loss that vetoes a give-up over spikes (``None``: never).

    Raises:
        ValueError: On an invalid argument (at construction) or a sharded strategy with ``mode="rollback"``.
        TypeError: If ``check_grad_norm`` or ``verbose`` is not a bool, or ``checkpoint_dir`` not a path.
        RuntimeError: In ``mode="raise"`` at the first fault, or in ``mode="rollback"`` when
            ``max_rollbacks`` is exceeded or no good snapshot exists; on every rank, naming cause and steps.

    Logged keys (only when an event happens, straight to ``trainer.loggers`` at the step Lightning uses for
    that batch, so an event never waits for ``log_every_n_steps``):

    ====================================  ==========================================================
    Key                                   Value
    ====================================  ==========================================================
    ``stability/event_step``              step of the bad training step
    ``stability/event_cause``             1 non-finite loss, 2 grad norm, 3 spike, 4 weights,
                                          5 ``lr_too_high`` (HealthMonitor)
    ``stability/event_value``             the offending loss or gradient norm
    ``stability/rollbacks``               rollbacks so far
    ``stability/skipped_steps``           steps dropped in ``mode="skip_step"`` so far
    ====================================  ==========================================================

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> guard = StabilityGuard(check_every_n_steps=2)
        >>> trainer = fast_trainer(max_steps=6, callbacks=[guard])
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> guard.events, guard.rollbacks
        ([], 0)
        >>> guard.snapshot_interval % 2  # adaptive (measured): whole checks between snapshots
        0
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
        self.rollbacks = 0
        self.skipped_steps = 0
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
        self._skipper = StepSkipper()
        self._lr_scaling = LRScaling(self._lr_factor_now)
        self._findings = FindingsReader()
        self._veto = SpikeVeto(val_monitor)

    def _validate(self) -> None:
        check_choice("mode", self.mode, _MODES)
        for name in ("check_every_n_steps", "spike_window"):
            check_int(name, getattr(self, name), minimum=1)
        if self.snapshot_every_n_steps is not None:  # None: adaptive
            check_int("snapshot_every_n_steps", self.snapshot_every_n_steps, minimum=1)
        check_in_range("snapshot_overhead", self.snapshot_overhead, 0.0, 1.0, low_open=True, high_open=True)
        check_bool("act_on_findings", self.act_on_findings)
        check_in_range("finding_lr_factor", self.finding_lr_factor, 0.0, 1.0, low_open=True)
        for name in ("spike_warmup_steps", "cooldown_steps", "max_rollbacks", "rollback_window_steps"):
            check_int(name, getattr(self, name), minimum=0)
        if self.spike_k is not None:  # None disables the rule
            check_positive("spike_k", self.spike_k)
        if self.spike_rtol is not None:  # None disables the rule
            check_in_range("spike_rtol", self.spike_rtol, 1.0, math.inf, low_open=True, high_open=True)
        check_in_range("lr_factor", self.lr_factor, 0.0, 1.0, low_open=True)
        check_non_negative("spike_min_rise", self.spike_min_rise)
        check_non_negative("spike_floor", self.spike_floor)
        if self.val_monitor is not None and not isinstance(self.val_monitor, str):
            raise TypeError(f"`val_monitor` must be a str or None, got {self.val_monitor!r}.")
        check_bool("check_grad_norm", self.check_grad_norm)
        check_bool("verbose", self.verbose)

    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(mode=self.mode)

    # ------------------------------------------------------------------ hooks, in training order

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit" and self.mode == "rollback":
            check_rollback_supported(trainer)

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        device = pl_module.device
        self._window = self._window.to(device)
        self._reference = self._reference.to(device)
        self._pending = pending_to_device(self._pending, device)
        self._micro_losses = [loss.to(device) for loss in self._micro_losses]
        self._seen_step = trainer.global_step
        self._lr_scaling.attach(trainer.optimizers)
        if self.mode == "rollback" and not self._pending:
            # Nothing unchecked: the current state (initial or resumed) is good by definition.
            self._take_snapshot(trainer, pl_module)
        self._snapshots.start_timing(trainer.global_step)
        if self.act_on_findings and self.mode == "rollback":
            warn_if_before_monitor(trainer, self)

    @override
    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        if not (self.check_grad_norm or self.mode == "skip_step") or scaler_enabled(trainer):
            return
        norm = optimizer_grad_norm(optimizer, trainer.global_step)
        if norm is None:
            return
        if self.mode != "skip_step":
            self._grad_norm = norm if self._grad_norm is None else torch.hypot(self._grad_norm, norm)
            return
        skipped = self._skipper.maybe_skip(trainer, optimizer, norm)
        if skipped is not None:
            self.skipped_steps += 1
            event = self._agree_on_event(trainer, skipped[0], trainer.global_step, skipped[1])
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
        loss = step_loss(self._micro_losses)
        if self._skipper.take_skipped():  # handled before the optimizer step: not checked, not in statistics
            loss = None
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

    # ------------------------------------------------------------------ state

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
            "pending": pending_to_plain(self._pending),
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
        self._pending = pending_from_plain(state_dict.get("pending", []))
        self._micro_losses = [
            torch.tensor(v, dtype=torch.float32) for v in state_dict.get("micro_losses", [])
        ]
        self._snapshot_step = int(state_dict.get("snapshot_step", -1))
        self._lr_scale = float(state_dict.get("lr_scale", 1.0))
        self._reference = torch.tensor(float(state_dict.get("reference", 0.0)))
        self._veto.load_state_dict(state_dict.get("veto", {}))

    # ------------------------------------------------------------------ helpers

    def _check(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Classify the pending steps on the device (``fault_causes``), agree across ranks, act."""
        pending, self._pending = self._pending, []
        device = pl_module.device
        losses, norms, loss_mask = stack(pending, device)
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
        value = offending_value(local_cause, local_index, losses, norms, loss_mask, weights_norm)
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
        recent = [s for s in self._rollback_steps if s > event.step - self.rollback_window_steps]
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
        self._restore(trainer, pl_module)
        self._rollback_steps.append(event.step)
        self.rollbacks += 1
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
        """Repair new ``lr_too_high`` findings of every ``HealthMonitor`` in the Trainer."""
        for finding in self._findings.new(trainer):
            self._repair_lr_too_high(trainer, pl_module, finding)

    def _repair_lr_too_high(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, finding: Finding
    ) -> None:
        event = finding_event(finding, trainer.global_step)
        self._lr_scale *= self.finding_lr_factor
        if self.mode == "rollback" and self._snapshots.snapshot is not None:
            recent = [s for s in self._rollback_steps if s > event.step - self.rollback_window_steps]
            if len(recent) < self.max_rollbacks:
                self._restore(trainer, pl_module)
                self._pending = []
                self._rollback_steps.append(event.step)
                self.rollbacks += 1
                event.action = "rollback"
        self._record(trainer, pl_module, event)

    def _restore(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._window = self._snapshots.restore(trainer, pl_module)
        self._micro_losses = []
        self._grad_norm = None

    def _record(self, trainer: pl.Trainer, pl_module: pl.LightningModule, event: StabilityEvent) -> None:
        if event.action in ("rollback", "give_up") and self._snapshots.snapshot is not None:
            event.restored_step = self._snapshots.step
        self.events.append(event)
        metrics = event_metrics(event, self.rollbacks, self.skipped_steps)
        # Straight to the loggers (an event must not wait for `log_every_n_steps`), at the step Lightning uses
        # for this batch's metrics: before the optimizer step that is `global_step`, after it one less.
        step = trainer.global_step if event.action == "skip_step" else max(trainer.global_step - 1, 0)
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)
        if self.verbose and trainer.is_global_zero:
            did = outcome(event, self._lr_scale, self.lr_factor, self._cooldown_left)
            log.warning(f"StabilityGuard: {describe(event)}; action: {did}.")

    def _lr_factor_now(self) -> float:
        """The learning-rate multiplier for this optimizer step: findings' cut times any cooldown."""
        return self._lr_scale * (self.lr_factor if self._cooldown_left > 0 else 1.0)
