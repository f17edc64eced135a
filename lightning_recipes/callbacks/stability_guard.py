"""StabilityGuard: detect non-finite losses/gradients and loss spikes on the device, roll back in place."""

from __future__ import annotations

import logging
import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor
from typing_extensions import override

from lightning_recipes._collectives import all_reduce_sum_, gather_rows
from lightning_recipes._validation import (
    check_bool,
    check_choice,
    check_in_range,
    check_int,
    check_non_negative,
    check_positive,
)
from lightning_recipes.callbacks._faults import CAUSE_CODES, CAUSES, choose_event, fault_causes, fault_record
from lightning_recipes.callbacks._loss_noise import exceeds_noise
from lightning_recipes.callbacks._loss_output import loss_of
from lightning_recipes.callbacks._norms import STEP_POWERS
from lightning_recipes.callbacks._snapshot import Snapshot, copy_to_cpu
from lightning_recipes.callbacks._trainer import callback_list
from lightning_recipes.callbacks.health_monitor import Finding, HealthMonitor
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
_FINDING_CAUSES = {"lr_too_high": 5}  # HealthMonitor findings the guard repairs, and their logged cause code


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
        action: ``"rollback"``, ``"skip_step"``, ``"raise"``, ``"give_up"``, ``"logged"`` or ``"scale_lr"``.
        restored_step: The step of the snapshot that was restored (``-1`` if none).
    """

    step: int
    cause: str
    value: float
    rank: int
    detected_at_step: int
    action: str
    restored_step: int = -1


class StabilityGuard(Callback):
    r"""Detect a non-finite loss, a non-finite gradient norm or a loss spike and recover without restarting.

    Every optimizer step the guard keeps a reference to the step's loss and computes the total gradient
    norm, both on the device, with no host-device synchronisation. Every ``check_every_n_steps`` steps it
    evaluates the pending steps at once, still on the device, and copies one 3-integer record to the host
    (**the one sync per check**) after a single all-reduce of one integer (under DDP) so that all ranks
    agree: a fault on any rank is a fault on every rank. A step is faulty when

    * its loss (the mean over accumulated micro-batches) is NaN or infinite;
    * its total gradient 2-norm is NaN or infinite (not checked while a ``GradScaler`` is active, see below);
    * after ``spike_warmup_steps`` good steps (which only teach it the loss's noise), its loss is a spike:
      above the run's own noise, measured on the last ``spike_window`` good steps as of the previous check
      (``callbacks/_loss_noise.py``): higher than their level (median) by more than ``spike_k`` robust
      standard deviations (1.4826 x the median absolute deviation) **and** by a factor of more than
      ``1 + spike_min_rise`` (in log space when the losses are positive: loss noise is multiplicative;
      linearly, ``spike_min_rise * |level|``, otherwise); or, with ``spike_rtol``, above ``spike_rtol``
      times the level. The defaults (6 robust std and 1.5x) leave healthy fine-tuning alone: a plateau's
      +3-6% wobbles are many standard deviations but not 1.5x, the heavy-tailed late-phase batches are 2-3x
      but within 6 standard deviations of log-loss noise; a blow-up is both (false-rollback and detection
      rates in ``benchmarks/RESULTS.md``, ``python -m benchmarks.stability_false_alarms``);
    * at a check that would take a snapshot, the weights are not finite (an update from an unchecked
      non-finite gradient that no loss has shown yet; blamed on the last step before the check).

    With ``mode="rollback"`` (default) the guard keeps an in-memory snapshot of the model, every optimizer,
    every LR scheduler and its own statistics, copied to CPU memory (pinned, non-blocking on CUDA), refreshed
    only from a step whose check passed: by default (``snapshot_every_n_steps=None``) at every passing check
    while a snapshot costs at most ``snapshot_overhead`` (1%) of the training time between snapshots, and
    less often, in whole checks, when the model is so large that it costs more (both times measured on the
    host: the snapshot's copy, waited for, and the steps between checks), so a rollback on a small model
    loses at most one check of progress and the overhead on a large one stays near ``snapshot_overhead``;
    an ``int`` fixes the interval. On a fault it restores
    the snapshot in place on every rank, optionally multiplies the learning rate by ``lr_factor`` for the
    next ``cooldown_steps`` optimizer steps, logs the event and trains on with the next batches: the bad
    batches are skipped by construction (``global_step`` and the data stream keep going forward; the LR
    schedule resumes from the snapshot). If a fault would be the ``max_rollbacks + 1``-th rollback within
    ``rollback_window_steps`` steps, it restores the last good snapshot, writes an emergency checkpoint
    (into ``checkpoint_dir``, or the ``ModelCheckpoint`` directory if there is one) and raises.
    ``mode="raise"`` raises at the first fault on every rank; ``mode="skip_step"`` checks the gradient norm
    before every optimizer step and, when it is not finite on any rank, sets all gradients to ``None`` so
    no parameter or optimizer state moves (loss faults are only logged in this mode).

    Cost:
        Per optimizer step: one read of the gradients for their norm (none when ``GradNormMonitor``, placed
        before the guard, already read them this step: its result is reused) and list appends; no sync.
        Per check: one all-reduce of one integer (DDP only) and one device-to-host copy of two integers; the
        loss-noise statistics (two medians of the ``spike_window`` losses) stay on the device, in that copy.
        ``check_every_n_steps=1`` therefore syncs every step. The gradient read is most of the per-step cost;
        ``check_grad_norm=False`` drops it (a NaN gradient is then caught one step later through the loss it
        poisons, or by the weight check before the next snapshot); measured figures are in
        ``benchmarks/RESULTS.md`` (``python -m benchmarks.stability_overhead``). Detection lags the fault by
        at most ``check_every_n_steps - 1`` steps. ``mode="skip_step"`` syncs and all-reduces once per
        optimizer step. Snapshots (``callbacks/_snapshot.py``) cost one
        device-to-host copy of model + optimizer state per snapshot (plus, with the adaptive default, one
        sync to time it) and that much CPU memory (≈ 3x the fp32 model size for Adam). Next to a
        ``WeightAveraging`` callback (``EMAWeightAveraging``) each snapshot also copies the average (one more
        model-sized copy), so a rollback puts the average back too.

    Acting on ``HealthMonitor`` findings (``act_on_findings=True``, mode ``"rollback"``):
        When a ``HealthMonitor`` in the same Trainer finds ``lr_too_high`` (update/parameter ratio far
        above ~1e-3 while the loss rises), the guard restores its last snapshot and multiplies the learning
        rate by ``finding_lr_factor`` for the rest of the run (the rate itself is the fault, so the cut is
        permanent, applied inside every optimizer step on top of any scheduler). The guard reads the
        monitor's findings rather than detecting the signal itself: they are already identical on every rank
        (one all-gather per check), so acting on them needs no extra collective, and the rule lives in one
        place. Place the guard after the monitor in ``callbacks`` (it warns otherwise): it then acts in the
        same batch, before its own check could snapshot the condemned state. It counts as a rollback for
        ``max_rollbacks``. Other findings are advice only:
        ``vanishing_gradients``, ``dead_units`` and ``saturated_activations`` need a change of architecture
        or initialisation that cannot be made safely mid-run; raising the rate on ``lr_too_low`` risks the
        divergence this guard exists to prevent; a ``loss_plateau`` has several causes; ``overfitting`` is
        ``EarlyStopping``'s job; a ``data_stall`` is fixed in the DataLoader; non-finite values are already
        rolled back by the guard's own checks.

    Mixed precision:
        With ``precision="16-mixed"`` Lightning's ``GradScaler`` already skips every step whose scaled
        gradients overflow and lowers its scale; those overflows are normal and must not trigger a rollback,
        so the gradient-norm check is off while a scaler is enabled. The loss checks still run on the
        unscaled loss, so a run that keeps producing NaN losses (which the scaler would answer by shrinking
        its scale forever) is still caught. The scaler's own state is never restored. ``bf16-mixed`` has no
        scaler: all checks run.

    Strategies:
        Single device and DDP-family strategies (``ddp``, ``ddp_spawn``, ``ddp_fork``). Each rank checks its
        own loss and keeps statistics of it; the event details are gathered across ranks only when a fault
        is found. Rollback of sharded state (FSDP, DeepSpeed, ``ModelParallelStrategy``) is not supported and
        raises at setup; use ``mode="raise"`` or ``"skip_step"`` there.

    Resuming:
        Events, counters, the cooldown, the statistics and the not-yet-checked steps are in ``state_dict``
        (a checkpoint holds rank 0's statistics). The in-memory snapshot is not: after a resume the first
        snapshot is the restored state, or, if the checkpoint was written between checks, the state at the
        first passing check (a fault before that raises, as there is nothing verified to roll back to).

    Args:
        mode: ``"rollback"``, ``"skip_step"`` or ``"raise"``.
        check_every_n_steps: Optimizer steps between checks (each check syncs once).
        snapshot_every_n_steps: Minimum optimizer steps between snapshots (taken at the first passing check
            at least this many steps after the previous snapshot, and once at the start of training).
            ``None`` (default): adaptive, see above.
        snapshot_overhead: With ``snapshot_every_n_steps=None``, the fraction of training time snapshots may
            take, in ``(0, 1)``.
        spike_k: Spike threshold in robust standard deviations of the loss noise above its level, ``> 0``;
            ``None`` disables the noise rule.
        spike_rtol: Spike threshold as a multiple of the loss level (median), ``> 1``; ``None`` disables it.
        spike_window: Number of recent good steps in the running statistics.
        spike_warmup_steps: Good steps needed before spikes are detected (the noise is only learned meanwhile;
            non-finite values are caught from the first step).
        check_grad_norm: Whether to check the gradient norm (always on for ``mode="skip_step"``).
        lr_factor: Learning-rate multiplier applied after a rollback, in ``(0, 1]``.
        cooldown_steps: Optimizer steps the ``lr_factor`` lasts.
        max_rollbacks: Rollbacks allowed within ``rollback_window_steps`` before giving up.
        rollback_window_steps: Window, in optimizer steps, for ``max_rollbacks``.
        checkpoint_dir: Where to write the emergency checkpoint; default: the ``ModelCheckpoint`` directory.
        verbose: Log each event on rank zero (``logging.WARNING``).
        act_on_findings: Repair ``HealthMonitor``'s ``lr_too_high`` findings (see above).
        finding_lr_factor: The learning-rate multiplier applied, for the rest of the run, at each
            ``lr_too_high`` finding, in ``(0, 1]``.
        spike_min_rise: The noise rule also needs the loss above ``(1 + spike_min_rise)`` x its level,
            ``>= 0`` (``0``: the ``spike_k`` test alone).

    Raises:
        ValueError: On an invalid argument value (at construction, naming it) or a sharded strategy with
            ``mode="rollback"``.
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
        self._validate()

        self.events: list[StabilityEvent] = []
        self.rollbacks = 0
        self.skipped_steps = 0
        self.emergency_checkpoint_path: str | None = None
        self._rollback_steps: list[int] = []
        self._cooldown_left = 0
        self._window = torch.zeros(0)  # good step losses, oldest first, on the module's device
        self._pending: list[tuple[int, Tensor | None, Tensor | None]] = []  # (step, loss, grad norm)
        self._micro_losses: list[Tensor] = []
        self._grad_norm: Tensor | None = None
        self._step_skipped = False
        self._seen_step = 0
        self._snapshot: Snapshot | None = None  # the last verified state (None: none yet)
        self._averages: list[tuple[Callback, Any]] = []  # WeightAveraging averages taken with the snapshot
        self._snapshot_step = -1
        self._saved_lrs: dict[int, list[Any]] = {}
        self._hook_handles: list[Any] = []
        self._lr_scale = 1.0  # permanent, from lr_too_high findings
        self._findings_seen: dict[int, int] = {}  # id(monitor) -> findings already acted on
        self._snapshot_s: float | None = None  # host seconds a snapshot takes (median of the last 3 timed)
        self._snapshot_times: list[float] = []
        self._step_s: float | None = None  # host seconds per optimizer step, measured between checks
        self._last_check: tuple[float, int] | None = None  # (perf_counter, global_step)
        self._snapshot_s_since_check = 0.0

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
        check_bool("check_grad_norm", self.check_grad_norm)
        check_bool("verbose", self.verbose)

    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(mode=self.mode)

    # ------------------------------------------------------------------ hooks, in training order

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit" or self.mode != "rollback":
            return
        from lightning.pytorch.strategies import DeepSpeedStrategy, FSDPStrategy, ModelParallelStrategy

        if isinstance(trainer.strategy, (DeepSpeedStrategy, FSDPStrategy, ModelParallelStrategy)):
            raise ValueError(
                f"`StabilityGuard(mode='rollback')` does not support sharded strategies, got "
                f"{type(trainer.strategy).__name__}. Use mode='raise' or mode='skip_step' with this strategy."
            )

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        device = pl_module.device
        self._window = self._window.to(device)
        self._pending = [
            (step, None if loss is None else loss.to(device), None if norm is None else norm.to(device))
            for step, loss, norm in self._pending
        ]
        self._micro_losses = [loss.to(device) for loss in self._micro_losses]
        self._seen_step = trainer.global_step
        for optimizer in trainer.optimizers:
            self._hook_handles.append(optimizer.register_step_pre_hook(self._scale_lr_pre_hook))
            self._hook_handles.append(optimizer.register_step_post_hook(self._restore_lr_post_hook))
        if self.mode == "rollback" and not self._pending:
            # Nothing unchecked: the current state (initial or resumed) is good by definition.
            self._take_snapshot(trainer, pl_module)
        self._last_check = (time.perf_counter(), trainer.global_step)
        self._snapshot_s_since_check = 0.0
        callbacks = callback_list(trainer)
        monitors = [i for i, c in enumerate(callbacks) if isinstance(c, HealthMonitor)]
        acting = self.act_on_findings and self.mode == "rollback" and monitors and self in callbacks
        if acting and monitors[-1] > callbacks.index(self):
            rank_zero_warn(
                "`StabilityGuard` is placed before a `HealthMonitor` in `callbacks`: it may snapshot a step "
                "that the monitor's check then condemns, and roll back only to it. Place the guard after the "
                "monitor.",
                category=UserWarning,
            )

    @override
    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: torch.optim.Optimizer
    ) -> None:
        if not (self.check_grad_norm or self.mode == "skip_step") or _scaler_enabled(trainer):
            return
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if not grads:
            return
        norm = _step_grad_norm(grads, trainer.global_step)
        if self.mode != "skip_step":
            self._grad_norm = norm if self._grad_norm is None else torch.hypot(self._grad_norm, norm)
            return
        local_bad = not bool(torch.isfinite(norm))  # sync: once per optimizer step, skip_step mode only
        if trainer.strategy.reduce_boolean_decision(local_bad, all=False):
            optimizer.zero_grad(set_to_none=True)
            self.skipped_steps += 1
            self._step_skipped = True
            event = self._agree_on_event(
                trainer, 2 if local_bad else 0, trainer.global_step, float(norm) if local_bad else 0.0
            )
            event.action = "skip_step"
            self._record(trainer, pl_module, event)

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        loss = loss_of(outputs)
        if loss is not None:
            self._micro_losses.append(loss)
        if trainer.global_step == self._seen_step:
            return  # still accumulating gradients: no optimizer step on this batch
        self._seen_step = trainer.global_step
        if self._cooldown_left > 0:
            self._cooldown_left -= 1
        step_loss: Tensor | None = None
        if len(self._micro_losses) == 1:
            step_loss = self._micro_losses[0]
        elif self._micro_losses:
            step_loss = torch.stack(self._micro_losses).sum()
        if self._step_skipped:  # already handled before the optimizer step: neither checked nor in statistics
            step_loss = None
        self._pending.append((trainer.global_step - 1, step_loss, self._grad_norm))
        self._micro_losses = []
        self._grad_norm = None
        self._step_skipped = False
        if self.act_on_findings:  # before the check: its snapshot must not capture what the finding condemns
            self._act_on_findings(trainer, pl_module)
        if len(self._pending) >= self.check_every_n_steps:
            self._check(trainer, pl_module)

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._remove_hooks()

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._remove_hooks()
        self._snapshot = None

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
            "pending": [
                (step, None if loss is None else float(loss), None if norm is None else float(norm))
                for step, loss, norm in self._pending
            ],
            "micro_losses": [float(loss) for loss in self._micro_losses],
            "snapshot_step": self._snapshot_step,
            "lr_scale": self._lr_scale,
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
            (
                int(step),
                None if loss is None else torch.tensor(loss, dtype=torch.float32),
                None if norm is None else torch.tensor(norm, dtype=torch.float32),
            )
            for step, loss, norm in state_dict.get("pending", [])
        ]
        self._micro_losses = [
            torch.tensor(v, dtype=torch.float32) for v in state_dict.get("micro_losses", [])
        ]
        self._snapshot_step = int(state_dict.get("snapshot_step", -1))
        self._lr_scale = float(state_dict.get("lr_scale", 1.0))

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_hook_handles"] = []
        state["_snapshot"] = None
        return state

    # ------------------------------------------------------------------ helpers

    def _check(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Classify the pending steps on the device (``fault_causes``), agree across ranks, act."""
        pending, self._pending = self._pending, []
        device = pl_module.device
        loss_mask = [loss is not None for _, loss, _ in pending]
        zero = torch.zeros((), device=device)
        losses = torch.stack([(zero if loss is None else loss).float() for _, loss, _ in pending])
        norms = torch.stack([(zero if norm is None else norm).float() for _, _, norm in pending])
        self._measure_step_time(trainer)
        snapshot_due = (
            self.mode == "rollback" and trainer.global_step - self._snapshot_step >= self.snapshot_interval
        )
        # Never snapshot poisoned weights: an update from a non-finite gradient that was not checked
        # (check_grad_norm=False) has not shown in any loss yet. Blamed on the last pending step.
        weights_norm = (
            total_norm([p.detach() for p in pl_module.parameters()]).to(device) if snapshot_due else None
        )
        causes = fault_causes(
            losses,
            norms,
            self._window,
            spike_k=None,
            spike_rtol=None,
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
            if snapshot_due:
                self._take_snapshot(trainer, pl_module)
            return
        value = 0.0  # fault path only: host reads of the offending value are free of the hot path
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
        if (self.spike_k is None and self.spike_rtol is None) or self._window.numel() < max(
            self.spike_warmup_steps, 1
        ):
            return None
        return exceeds_noise(
            losses, self._window, k=self.spike_k, min_rise=self.spike_min_rise, rtol=self.spike_rtol
        )

    def _agree_on_event(self, trainer: pl.Trainer, cause: int, step: int, value: float) -> StabilityEvent:
        """Every rank's first fault, gathered (fault path only); all act on the one ``choose_event`` picks."""
        rows = gather_rows(trainer, [float(cause), float(step), value, float(trainer.global_rank)])
        best = choose_event(rows)
        assert best is not None  # the all-reduced fault count was > 0: some rank has a fault
        return StabilityEvent(
            step=int(best[1]),
            cause=CAUSES[int(best[0])],
            value=float(best[2]),
            rank=int(best[3]),
            detected_at_step=trainer.global_step,
            action=self.mode,
        )

    def _act(self, trainer: pl.Trainer, pl_module: pl.LightningModule, event: StabilityEvent) -> None:
        if self.mode == "raise":
            event.action = "raise"
            self._record(trainer, pl_module, event)
            raise RuntimeError(f"StabilityGuard(mode='raise'): {_describe(event)}.")
        if self.mode == "skip_step":
            event.action = "logged"  # the update already happened; skip_step only drops non-finite gradients
            self._record(trainer, pl_module, event)
            return
        recent = [s for s in self._rollback_steps if s > event.step - self.rollback_window_steps]
        if self._snapshot is None or len(recent) >= self.max_rollbacks:
            event.action = "give_up"
            restored = self._snapshot is not None
            if restored:
                self._restore(trainer, pl_module)
            self._record(trainer, pl_module, event)
            path = self._emergency_checkpoint(trainer, event) if restored else None
            where = (
                f" Emergency checkpoint (last good state, step {event.restored_step}): {path}."
                if path
                else ""
            )
            if self._snapshot is None:
                why = "no verified snapshot exists yet (resumed with unchecked steps)"
            else:
                why = (
                    f"{len(recent)} rollbacks within {self.rollback_window_steps} steps already "
                    f"(max_rollbacks={self.max_rollbacks}) at steps {recent}"
                )
            history = ", ".join(f"{e.cause}@{e.step}" for e in self.events)
            raise RuntimeError(
                f"StabilityGuard gave up: {_describe(event)}; {why}. Events so far: [{history}].{where}"
                " Lower the learning rate, inspect the batches at those steps, or raise `max_rollbacks`."
            )
        self._restore(trainer, pl_module)
        self._rollback_steps.append(event.step)
        self.rollbacks += 1
        if self.lr_factor != 1.0 and self.cooldown_steps > 0:
            self._cooldown_left = self.cooldown_steps
        self._record(trainer, pl_module, event)

    @property
    def snapshot_interval(self) -> int:
        """Optimizer steps between snapshots now: ``snapshot_every_n_steps``, or the adaptive choice.

        Adaptive: the fewest whole checks whose measured training time makes one measured snapshot cost at
        most ``snapshot_overhead`` of it; one check until both times are known (the first snapshot, which
        allocates the CPU buffers, is not timed; then the median of the last three snapshots counts).
        """
        if self.snapshot_every_n_steps is not None:
            return self.snapshot_every_n_steps
        return adaptive_snapshot_interval(
            self.check_every_n_steps, self._snapshot_s, self._step_s, self.snapshot_overhead
        )

    def _measure_step_time(self, trainer: pl.Trainer) -> None:
        """Host seconds per optimizer step since the last check, the snapshot taken meanwhile left out."""
        now = time.perf_counter()
        if self._last_check is not None and trainer.global_step > self._last_check[1]:
            elapsed = now - self._last_check[0] - self._snapshot_s_since_check
            self._step_s = max(elapsed, 0.0) / (trainer.global_step - self._last_check[1])
        self._last_check = (now, trainer.global_step)
        self._snapshot_s_since_check = 0.0

    def _take_snapshot(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        snapshot = self._snapshot if self._snapshot is not None else Snapshot()
        timed = self._snapshot is not None  # the first capture allocates its buffers: not representative
        start = time.perf_counter()
        self._snapshot = snapshot.capture(
            pl_module,
            trainer.optimizers,
            [config.scheduler for config in trainer.lr_scheduler_configs],
            step=trainer.global_step,
            extra=self._window,  # replaced, never modified in place: a reference is a copy
            wait=self.snapshot_every_n_steps is None,  # sync: per snapshot, to time it (adaptive only)
        )
        self._averages = _capture_averages(trainer, pl_module)
        elapsed = time.perf_counter() - start
        self._snapshot_s_since_check += elapsed
        if timed:  # the median of the last three damps a preempted copy on a busy machine
            self._snapshot_times = [*self._snapshot_times[-2:], elapsed]
            self._snapshot_s = sorted(self._snapshot_times)[len(self._snapshot_times) // 2]
        self._snapshot_step = trainer.global_step

    def _act_on_findings(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Repair new ``lr_too_high`` findings of every ``HealthMonitor`` in the Trainer (identical on all
        ranks: no collective). Host-side list reads only."""
        for callback in callback_list(trainer):
            if not isinstance(callback, HealthMonitor):
                continue
            seen = self._findings_seen.get(id(callback), 0)
            self._findings_seen[id(callback)] = len(callback.findings)
            for finding in callback.findings[seen:]:
                if finding.problem in _FINDING_CAUSES:
                    self._repair_lr_too_high(trainer, pl_module, finding)

    def _repair_lr_too_high(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, finding: Finding
    ) -> None:
        event = StabilityEvent(
            step=finding.step,
            cause=finding.problem,
            value=float(finding.evidence.get("median_update_ratio", math.nan)),
            rank=0,
            detected_at_step=trainer.global_step,
            action="scale_lr",
        )
        self._lr_scale *= self.finding_lr_factor
        if self.mode == "rollback" and self._snapshot is not None:
            recent = [s for s in self._rollback_steps if s > event.step - self.rollback_window_steps]
            if len(recent) < self.max_rollbacks:
                self._restore(trainer, pl_module)
                self._pending = []
                self._rollback_steps.append(event.step)
                self.rollbacks += 1
                event.action = "rollback"
        self._record(trainer, pl_module, event)

    def _restore(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        snapshot = self._snapshot
        assert snapshot is not None  # callers check
        snapshot.restore(
            pl_module, trainer.optimizers, [config.scheduler for config in trainer.lr_scheduler_configs]
        )
        for callback, kept in self._averages:
            # the weight average goes back too: the bad steps were averaged into it (EMAWeightAveraging)
            checkpoint = {**copy_to_cpu(kept), "current_model_state": pl_module.state_dict()}
            callback.on_load_checkpoint(trainer, pl_module, checkpoint)
        for optimizer in trainer.optimizers:
            optimizer.zero_grad(set_to_none=True)
        self._window = snapshot.extra
        self._micro_losses = []
        self._grad_norm = None

    def _record(self, trainer: pl.Trainer, pl_module: pl.LightningModule, event: StabilityEvent) -> None:
        if event.action in ("rollback", "give_up") and self._snapshot is not None:
            event.restored_step = self._snapshot.step
        self.events.append(event)
        cause_code = CAUSE_CODES.get(event.cause, _FINDING_CAUSES.get(event.cause, 0))
        metrics = {
            "stability/event_step": float(event.step),
            "stability/event_cause": float(cause_code),
            "stability/event_value": event.value,
            "stability/rollbacks": float(self.rollbacks),
            "stability/skipped_steps": float(self.skipped_steps),
        }
        # Straight to the loggers (an event must not wait for `log_every_n_steps`), at the step Lightning uses
        # for this batch's metrics: before the optimizer step that is `global_step`, after it one less.
        step = trainer.global_step if event.action == "skip_step" else max(trainer.global_step - 1, 0)
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)
        if self.verbose and trainer.is_global_zero:
            detail = ""
            if event.cause in _FINDING_CAUSES:
                detail = (
                    f" to the snapshot of step {event.restored_step}" if event.action == "rollback" else ""
                ) + f", learning rate x{self._lr_scale:g} from now on"
            elif event.action == "rollback":
                detail = f" to the snapshot of step {event.restored_step}"
                if self._cooldown_left > 0:
                    detail += f", learning rate x{self.lr_factor} for {self._cooldown_left} steps"
            log.warning(f"StabilityGuard: {_describe(event)}; action: {event.action}{detail}.")

    def _emergency_checkpoint(self, trainer: pl.Trainer, event: StabilityEvent) -> str | None:
        directory = self.checkpoint_dir
        if directory is None and trainer.checkpoint_callback is not None:
            directory = getattr(trainer.checkpoint_callback, "dirpath", None)
        if directory is None:
            return None
        path = os.path.join(directory, f"stability-guard-emergency-step={event.detected_at_step}.ckpt")
        trainer.save_checkpoint(path)  # collective: every rank reaches this point together
        self.emergency_checkpoint_path = path
        return path

    def _scale_lr_pre_hook(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        factor = self._lr_scale * (self.lr_factor if self._cooldown_left > 0 else 1.0)
        if factor == 1.0:
            return
        self._saved_lrs[id(optimizer)] = [group["lr"] for group in optimizer.param_groups]
        for group in optimizer.param_groups:
            group["lr"] = group["lr"] * factor

    def _restore_lr_post_hook(self, optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
        saved = self._saved_lrs.pop(id(optimizer), None)
        if saved is not None:
            for group, lr in zip(optimizer.param_groups, saved):
                group["lr"] = lr

    def _remove_hooks(self) -> None:
        for handle in self._hook_handles:
            handle.remove()
        self._hook_handles = []


def adaptive_snapshot_interval(
    check_every_n_steps: int, snapshot_s: float | None, step_s: float | None, overhead: float
) -> int:
    """Steps between snapshots: the fewest whole checks over which one snapshot costs at most ``overhead``.

    Example:
        >>> adaptive_snapshot_interval(10, snapshot_s=0.001, step_s=0.05, overhead=0.01)  # 0.2% per check
        10
        >>> adaptive_snapshot_interval(10, snapshot_s=0.5, step_s=0.05, overhead=0.01)  # needs 1000 steps
        1000
        >>> adaptive_snapshot_interval(10, snapshot_s=None, step_s=0.05, overhead=0.01)  # not measured yet
        10
    """
    if snapshot_s is None or step_s is None or step_s <= 0:
        return check_every_n_steps
    steps = snapshot_s / (overhead * step_s)
    return max(1, math.ceil(steps / check_every_n_steps - 1e-9)) * check_every_n_steps


def _step_grad_norm(grads: list[Tensor], step: int) -> Tensor:
    """The local 2-norm of ``grads`` (no sync), shared with ``GradNormMonitor`` / ``AdaptiveGradClip``.

    If one of them already read these very gradients this step (``STEP_POWERS``), reuse its result instead of
    reading every gradient again; otherwise compute it and publish it for them. Sharded (DTensor) gradients
    use their local shards: a non-finite value anywhere is non-finite on some rank, and the check is
    reduced over ranks.
    """
    cached = STEP_POWERS.lookup(grads, 2.0, step)
    if cached is not None and set(cached) == {None}:
        return total_norm_from_powers(cached, 2.0)
    locals_ = [local_tensor(g) for g in grads]
    power = norm_power(locals_, 2.0)
    if all(local is grad for local, grad in zip(locals_, grads)):  # plain tensors: one shard layout (None)
        STEP_POWERS.publish(grads, 2.0, step, {None: power})
    return power_to_norm(power, 2.0)


# ------------------------------------------------------------------ cross-rank agreement (every collective)
# Per check: `all_reduce_sum_` (one all-reduce of one integer). Fault path only: `gather_rows`.
# Per optimizer step in mode="skip_step" only: `trainer.strategy.reduce_boolean_decision` (in the hook).


def _scaler_enabled(trainer: pl.Trainer) -> bool:
    scaler = getattr(trainer.precision_plugin, "scaler", None)
    return scaler is not None and bool(scaler.is_enabled())


def _describe(event: StabilityEvent) -> str:
    names = {
        "nonfinite_loss": "non-finite loss",
        "nonfinite_grad_norm": "non-finite gradient norm",
        "loss_spike": "loss spike",
        "nonfinite_weights": "non-finite weights",
        "lr_too_high": "HealthMonitor: learning rate too high (update/parameter ratio)",
    }
    return (
        f"{names[event.cause]} ({event.value:.6g}) at step {event.step} on rank {event.rank}, "
        f"detected at step {event.detected_at_step}"
    )


def _capture_averages(trainer: pl.Trainer, pl_module: pl.LightningModule) -> list[tuple[Callback, Any]]:
    """A copy of every ``WeightAveraging`` callback's average (Lightning's ``EMAWeightAveraging`` and
    friends), taken through its public checkpoint hook, so a rollback can put the average back with the
    weights. Empty when Lightning has no ``WeightAveraging`` or none is in the Trainer."""
    from lightning.pytorch import callbacks as pl_callbacks

    averaging = getattr(pl_callbacks, "WeightAveraging", None)
    if averaging is None:
        return []
    kept: list[tuple[Callback, Any]] = []
    for callback in callback_list(trainer):
        if isinstance(callback, averaging):
            checkpoint: dict[str, Any] = {"state_dict": {}}
            callback.on_save_checkpoint(trainer, pl_module, checkpoint)
            state = {key: checkpoint[key] for key in ("state_dict", "averaging_state") if key in checkpoint}
            kept.append((callback, copy_to_cpu(state)))
    return kept
