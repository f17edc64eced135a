"""HealthMonitor's repairs (``repair=True``): the in-process repair a finding's named cause calls for,
each a :class:`RepairEvent` (when and why: docs/guides/health_monitor.md, "Repair").

Example:
    >>> finding = Finding("lr_too_high", 120, 0, {"update_ratio": 0.08, "lr": 0.5}, cause="lr_too_high")
    >>> repair_of(finding), lr_factor_of(finding)
    ('rollback_lower_lr', 0.0125)
    >>> repair_of(Finding("dead_units", 40, 0, {}, cause="initialisation")) is None  # advice only
    True
    >>> lr_factor_of(Finding("lr_too_high", 120, 0, {"update_ratio": float("nan"), "lr_vs_healthy": 20.0}))
    0.05
"""

from __future__ import annotations

import logging
import math
from dataclasses import asdict, dataclass, field
from typing import Any

from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.utilities.exceptions import MisconfigurationException
from torch import Tensor

from lightning_recipes._stats import significantly_above, trend
from lightning_recipes.callbacks._health_causes import dying_window
from lightning_recipes.callbacks._health_rules import lower_lr_by
from lightning_recipes.callbacks._health_window import Finding, History
from lightning_recipes.callbacks._rollback import LRScaling, RollbackSnapshot
from lightning_recipes.callbacks._snapshot import Snapshot, set_averages_to_module
from lightning_recipes.callbacks._trainer import callback_list
from lightning_recipes.callbacks.run_manifest import RunManifest

HealthMonitor = Any  # the monitor that owns the repairer (not imported: it imports this module)
Batches = list[tuple[int, int, int]]  # per loss of the interval: (global step, epoch, batch index)
__all__ = ["ACTIONS", "REPAIRS", "HealthRepair", "RepairEvent", "lr_factor_of", "repair_of"]

log = logging.getLogger(__name__)

#: (problem, named cause) -> the repair. ``not_learning`` whose cause is the LR: a diverged run at chance.
REPAIRS: dict[tuple[str, str], str] = {
    ("lr_too_high", "lr_too_high"): "rollback_lower_lr",
    ("lr_too_high", "learning_rate"): "rollback_lower_lr",  # units killed by the LR
    ("not_learning", "lr_too_high"): "rollback_lower_lr",
    ("lr_too_low", "lr_too_low"): "raise_lr",
    ("overfitting", "overfitting"): "stop_restore_best",
    ("nonfinite_activations", "nonfinite_weights"): "rollback_skip_batch",
}
#: Every action an event can record (logged as its 1-based index: ``health/repair_action``); ``"stop"``:
#: ``max_repairs`` reached, training stopped at the last healthy snapshot.
ACTIONS = ("rollback_lower_lr", "raise_lr", "stop_restore_best", "rollback_skip_batch", "stop")
#: An update ratio this far below its family's floor is "far too low" (or the LR collapsed): raised.
FAR_BELOW_FLOOR = 10.0
_NOT_LEARNING_CUT = 10.0  # the factor not_learning's action names for an LR too high


@dataclass
class RepairEvent:
    """One repair: at ``step``, for ``problem`` and its ``cause``, the ``action`` (:data:`ACTIONS`),
    the values ``before`` -> ``after`` and the ``message`` printed.

    Example:
        >>> RepairEvent(120, "lr_too_high", "lr_too_high", "rollback_lower_lr", {"lr_scale": 1.0},
        ...             {"lr_scale": 0.0125}).after
        {'lr_scale': 0.0125}
    """

    step: int
    problem: str
    cause: str
    action: str
    before: dict[str, Any] = field(default_factory=dict)
    after: dict[str, Any] = field(default_factory=dict)
    message: str = ""


def repair_of(finding: Finding) -> str | None:
    """The repair :data:`REPAIRS` lists for ``finding``'s problem and named cause; ``None``: advice only (no
    cause named, no safe repair, or an ``lr_too_low`` that is neither collapsed nor far too low)."""
    if finding.cause is None:
        return None
    if (finding.problem, finding.cause) == ("nonfinite_activations", "inputs"):  # one batch with inf/nan
        named = {"nonfinite_batch_step", "nonfinite_loss_step"} & finding.evidence.keys()
        return "rollback_skip_batch" if named else None  # the batch that wrote them is known
    action = REPAIRS.get((finding.problem, finding.cause))
    if action == "raise_lr" and lr_factor_of(finding) is None and not _reached_zero(finding):
        return None
    return action


def lr_factor_of(finding: Finding) -> float | None:
    """The LR multiplier the finding computed (``None`` when its evidence gives none)."""
    evidence = finding.evidence
    ratio = _number(evidence.get("update_ratio"))
    if finding.problem == "not_learning":
        return 1.0 / _NOT_LEARNING_CUT
    raised = _number(evidence.get("lr_vs_healthy"))
    if finding.problem == "lr_too_high" and math.isfinite(raised) and raised > 1:
        return 1.0 / raised
    if finding.problem == "lr_too_high":
        return 1.0 / (lower_lr_by(ratio) if math.isfinite(ratio) else _NOT_LEARNING_CUT)
    if finding.problem != "lr_too_low":
        return None
    lr, peak, floor = (_number(evidence.get(k)) for k in ("lr", "peak_lr", "floor"))
    if math.isfinite(peak) and math.isfinite(lr) and 0 < lr < peak:
        return peak / lr
    if math.isfinite(floor) and math.isfinite(ratio) and 0 < ratio * FAR_BELOW_FLOOR <= floor:
        return float(max(3, round(floor * 30 / ratio)))
    return None


def _per_group(trainer: Trainer, old: list[list[float]], pick: Any) -> list[list[float]]:
    """Each optimizer's groups' scheduled LR now (host floats: no sync), ``pick``-ed with ``old``'s where it
    has one (``max``: the peaks so far; ``min``: the lowest level cut at)."""
    now = [[float(g["lr"]) for g in o.param_groups] for o in trainer.optimizers]
    return [
        [pick(lr, old[i][j]) if i < len(old) and j < len(old[i]) else lr for j, lr in enumerate(groups)]
        for i, groups in enumerate(now)
    ]


class HealthRepair:
    """Decide and apply repairs from a ``HealthMonitor``'s findings, at most ``max_repairs``,
    from the healthy snapshots it keeps.
    """

    def __init__(self, max_repairs: int, val_monitor: str, prefix: str = "") -> None:
        self.max_repairs = max_repairs
        self.val_monitor = val_monitor
        self.prefix = prefix
        self.events: list[RepairEvent] = []
        self.lr_scale = 1.0
        self.best_val = math.inf
        self._healthy = RollbackSnapshot()  # confirmed: a healthy check came after it
        self._candidate = RollbackSnapshot()  # the latest healthy check's, confirmed by the next
        self._start = RollbackSnapshot()  # the run's start: an LR repair of a run that never learned restarts
        self._best = Snapshot()
        self._best_step = -1
        # bound methods: picklable (ddp_spawn)
        self._scaling = LRScaling(self._lr_factor, self._lr_floors, self._lr_ceilings)
        self.peaks: list[list[float]] = []  # per optimizer, per group: the largest scheduled LR at a check
        self.lr_floors: list[list[float]] | None = None  # a collapsed LR, held at its group's peak
        # an LR cut for being too high: a rising schedule never takes it above where it stood when cut
        self.lr_ceilings: list[list[float]] | None = None
        self._restore_best_at_end = False
        self.snapshots_taken = 0  # healthy-check snapshots copied (the cost with nothing wrong)
        self._resumed = False  # snapshots were loaded from a checkpoint, not yet trained from
        #: an LR-too-high finding held until the run shows it will not fix itself (``None``: none held)
        self.held: Finding | None = None

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule, monitor: HealthMonitor) -> None:
        self._scaling.detach()
        self._scaling.attach(trainer.optimizers)
        self._track_peaks(trainer)
        self._restore_best_at_end = False
        if self._best.empty:  # a checkpoint without the best weights (saved before #36): the next is kept
            self.best_val, self._best_step = math.inf, -1
        if self._resumed:  # the snapshots came with the checkpoint, as they were
            self._resumed = False
            return
        self._candidate.release()
        self._take_healthy(trainer, pl_module, monitor)  # the start is healthy
        self._healthy, self._candidate = self._candidate, self._healthy
        self._start.take(trainer, pl_module, extra=_memory(monitor), wait=False)  # type: ignore[arg-type]

    def on_validation_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        """A copy of the weights at each new best validation loss, agreed on every rank (``EarlyStopping``'s
        way: its ``Snapshot``, restored with ``set_averages_to_module``)."""
        value = trainer.callback_metrics.get(self.val_monitor)
        if trainer.sanity_checking or trainer.state.fn != "fit" or not isinstance(value, Tensor):
            return
        current = float(value)  # sync: once per validation, with repair=True only
        improved = math.isfinite(current) and current < self.best_val
        if trainer.strategy.reduce_boolean_decision(improved, all=True):
            self.best_val, self._best_step = current, trainer.global_step
            # new buffers: a checkpoint being written may still hold the previous best (as EarlyStopping)
            self._best.capture(pl_module, step=trainer.global_step, reuse_buffers=False, wait=True)

    def after_check(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        monitor: HealthMonitor,
        present: set[str],
        new: list[Finding],
        batches: Batches,
    ) -> None:
        """Repair the check's ``new`` findings; with no problem ``present`` (a data stall aside), refresh the
        healthy snapshot. ``batches``: the interval's ``(global step, epoch, batch index)`` per loss."""
        self._track_peaks(trainer)
        acted = False
        held, self.held = self.held, None
        # no later check sees what a rollback does: it only pays where the snapshot is itself better
        futile = _no_check_after(trainer, monitor) and not self._restoring_helps(trainer, monitor)
        if held is not None and not trainer.should_stop:
            verdict = "drop" if futile else self._judge_held(trainer, monitor, present)
            if verdict == "act" and not self._act(trainer, pl_module, monitor, held, batches):
                return
            acted, self.held = verdict == "act", held if verdict == "hold" else None
        for finding in new:
            action = repair_of(finding)
            if action is None or trainer.should_stop or (action == "rollback_lower_lr" and acted):
                continue  # one LR repair per check: the LR was just cut
            if futile and action.startswith("rollback"):
                continue
            if action == "rollback_lower_lr" and not self._sure(trainer, monitor, finding):
                self.held = finding  # not sure yet: the next check says whether the run fixes itself
                continue
            if not self._act(trainer, pl_module, monitor, finding, batches):
                return
            acted = True
        if not acted and not present - {"data_stall"}:
            self._take_healthy(trainer, pl_module, monitor)

    def _act(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        monitor: HealthMonitor,
        finding: Finding,
        batches: Batches,
    ) -> bool:
        """Apply ``finding``'s repair; ``False``: ``max_repairs`` was reached and training stopped."""
        action = repair_of(finding)
        if len(self.events) >= self.max_repairs and action != "stop_restore_best":  # stopping is safe
            self._give_up(trainer, pl_module, monitor, finding)
            return False
        getattr(self, f"_{action}")(trainer, pl_module, monitor, finding, batches)
        return True

    def _judge_held(self, trainer: Trainer, monitor: HealthMonitor, present: set[str]) -> str:
        """A held LR-too-high finding at the next check: ``"act"``, ``"drop"`` (the problem is gone) or
        ``"hold"`` (its loss still clearly below the rollback target's), as the guide's "Repair" says."""
        if self._sure(trainer, monitor, None):
            return "act"
        if not present & {"lr_too_high", "not_learning", "exploding_gradients", "nonfinite_activations"}:
            return "drop"
        now, now_se = _check_loss(trainer, monitor)
        target, target_se = self._target_loss(monitor, now_se)
        learning = significantly_above(target, target_se, now, now_se, monitor.thresholds["confidence_z"])
        return "hold" if learning or _still_falling(monitor) else "act"

    def _sure(self, trainer: Trainer, monitor: HealthMonitor, finding: Finding | None) -> bool:
        """Whether an LR repair cannot make the run worse now (the guide's "Repair")."""
        if finding is not None and finding.cause == "learning_rate":
            return True
        now, now_se = _check_loss(trainer, monitor)
        target, target_se = self._target_loss(monitor, now_se)
        if not (math.isfinite(now) and math.isfinite(target)):
            return True
        z = monitor.thresholds["confidence_z"]
        if self._keeper(monitor, unlearned_to_start=True) is self._start:
            return not significantly_above(target, target_se, now, now_se, z)
        return significantly_above(now, now_se, target, target_se, z)

    def _restoring_helps(self, trainer: Trainer, monitor: HealthMonitor) -> bool:
        """Whether the snapshot a rollback restores is better by itself: this check's loss is not finite, or
        clearly above the snapshot's."""
        now, now_se = _check_loss(trainer, monitor)
        target, target_se = self._target_loss(monitor, now_se)
        z = monitor.thresholds["confidence_z"]
        return not math.isfinite(now) or significantly_above(now, now_se, target, target_se, z)

    def _target_loss(self, monitor: HealthMonitor, fallback_se: float) -> tuple[float, float]:
        """``(mean loss, standard error)`` of the check that took the snapshot to restore."""
        keeper = self._keeper(monitor, unlearned_to_start=True)
        if keeper is self._start:
            keeper = self._healthy
        if keeper is None or keeper.snapshot is None:
            return math.nan, math.nan
        saved = keeper.snapshot.extra[0]
        losses, ses = saved.get("losses", []), saved.get("loss_ses", [])
        if not losses:
            return math.nan, math.nan
        se = float(ses[-1]) if ses else math.nan
        return float(losses[-1]), se if math.isfinite(se) else fallback_se

    def on_train_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        self._scaling.detach()
        if self._restore_best_at_end and not self._best.empty:
            self._best.restore(pl_module)
            set_averages_to_module(trainer, pl_module)
            self._restore_best_at_end = False

    def teardown(self) -> None:
        self._scaling.detach()
        self._healthy.release()
        self._candidate.release()
        self._start.release()

    def _rollback_lower_lr(
        self, trainer: Trainer, pl_module: LightningModule, monitor: HealthMonitor, finding: Finding, _: Any
    ) -> None:
        factor = lr_factor_of(finding) or 1.0 / _NOT_LEARNING_CUT
        before = {"lr": self._effective_lr(trainer), "lr_scale": self.lr_scale, "step": trainer.global_step}
        now, target = _check_loss(trainer, monitor)[0], self._target_loss(monitor, math.nan)[0]
        alive_until = _alive_until(monitor, finding)
        restart = self._keeper(monitor, unlearned_to_start=True, alive_until=alive_until) is self._start
        if now < target and not restart and finding.cause != "learning_rate":  # killed units: never kept
            restored = trainer.global_step  # the snapshot's loss is higher than now's: nothing to regain
            where = f"kept the current weights (loss {now:.4g}; the snapshot's {target:.4g}) and cut"
        else:
            restored = self._roll_back(
                trainer, pl_module, monitor, unlearned_to_start=True, alive_until=alive_until
            )
            where = f"rolled back to the healthy snapshot of step {restored} and cut"
            if alive_until >= 0:  # the snapshot is one without the dead units
                where = (
                    f"rolled back to the healthy snapshot of step {restored} (the units began dying after "
                    f"step {alive_until}) and cut"
                )
        self.lr_scale *= factor
        self.lr_ceilings = _per_group(trainer, self.lr_ceilings or [], min)
        monitor._history.start_lr = math.nan  # the LR is the repair's now: its own cut is no collapse
        after = {"lr": self._effective_lr(trainer), "lr_scale": self.lr_scale, "step": restored}
        text = (
            f"{where} every group's learning rate "
            f"{1 / factor:.3g}x for the rest of the run (the schedule's remaining curve too, never above "
            "where it stood when cut): "
            f"{before['lr']:.3g} -> {after['lr']:.3g}"
        )
        self._record(trainer, finding, "rollback_lower_lr", before, after, text)

    def _raise_lr(
        self, trainer: Trainer, pl_module: LightningModule, monitor: HealthMonitor, finding: Finding, _: Any
    ) -> None:
        factor = lr_factor_of(finding)
        before = {"lr": self._effective_lr(trainer), "lr_scale": self.lr_scale}
        collapsed = "peak_lr" in finding.evidence
        if factor is None or collapsed:  # each group held at its peak: a floor under the schedule
            # a collapsed schedule keeps collapsing: a factor would be undone, and 0 no factor raises
            self.lr_floors = [list(groups) for groups in self.peaks]
        else:  # the monitor reads the effective (scaled) LR: its factor goes on top of ours
            self.lr_scale *= factor
        after = {"lr": self._effective_lr(trainer), "lr_scale": self.lr_scale}
        what = (
            "held at each group's peak (it had reached 0)"
            if factor is None
            else "held at each group's peak (it had collapsed)"
            if collapsed
            else f"raised {factor:.3g}x"
        )
        text = (
            f"the learning rate {what} from the current weights (every group, on top of the schedule): "
            f"{before['lr']:.3g} -> {after['lr']:.3g}"
        )
        self._record(trainer, finding, "raise_lr", before, after, text)

    def _stop_restore_best(
        self, trainer: Trainer, pl_module: LightningModule, monitor: HealthMonitor, finding: Finding, _: Any
    ) -> None:
        trainer.should_stop = True
        self._restore_best_at_end = not self._best.empty
        before = {"val_loss": _number(finding.evidence.get("val_loss")), "step": trainer.global_step}
        after = {"val_loss": self.best_val, "step": self._best_step}
        text = (
            f"stopped training; the weights of the best validation ({self.val_monitor}={self.best_val:.4g} "
            f"at step {self._best_step}) are restored when training ends"
            if self._restore_best_at_end
            else "stopped training (no validation weights were kept to restore)"
        )
        self._record(trainer, finding, "stop_restore_best", before, after, text)

    def _rollback_skip_batch(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        monitor: HealthMonitor,
        finding: Finding,
        batches: Batches,
    ) -> None:
        named_step = finding.evidence.get("nonfinite_loss_step", finding.evidence.get("nonfinite_batch_step"))
        bad = int(number) if math.isfinite(number := _number(named_step)) else -1
        where = next(((e, b) for s, e, b in batches if s == bad), None)
        named = f"step {bad}" if bad >= 0 else "a step since the snapshot"
        if where is not None:
            named += f" (epoch {where[0]}, batch {where[1]})"
        before = {"step": trainer.global_step, "nonfinite_step": bad}
        restored = self._roll_back(trainer, pl_module, monitor, good_until=bad)
        after = {"step": restored}
        text = (
            f"rolled back to the healthy snapshot of step {restored}, skipping the batches since; the "
            f"non-finite update came from the batch of {named}"
        )
        self._record(trainer, finding, "rollback_skip_batch", before, after, text)

    def _give_up(
        self, trainer: Trainer, pl_module: LightningModule, monitor: HealthMonitor, finding: Finding
    ) -> None:
        trainer.should_stop = True
        rollback = repair_of(finding) in ("rollback_lower_lr", "rollback_skip_batch")
        restored = self._roll_back(trainer, pl_module, monitor) if rollback else -1
        history = ", ".join(f"{e.action}@{e.step}" for e in self.events)
        text = (
            f"max_repairs={self.max_repairs} reached ({history}); stopped training"
            + (f" at the healthy snapshot of step {restored}" if restored >= 0 else "")
            + f". The run needs a change the monitor cannot make in process: {finding.advice}"
        )
        self._record(trainer, finding, "stop", {"step": trainer.global_step}, {"step": restored}, text)

    def _take_healthy(self, trainer: Trainer, pl_module: LightningModule, monitor: HealthMonitor) -> None:
        """A healthy check: confirm the previous candidate, this state the new candidate."""
        if self._candidate.snapshot is not None:
            self._healthy, self._candidate = self._candidate, self._healthy
        memory = _memory(monitor)  # the rules' memory goes back too
        self._candidate.take(trainer, pl_module, extra=memory, wait=False)  # type: ignore[arg-type]
        self.snapshots_taken += 1

    def _roll_back(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        monitor: HealthMonitor,
        good_until: int = -1,
        unlearned_to_start: bool = False,
        alive_until: int = -1,
    ) -> int:
        """Restore the snapshot :meth:`_keeper` chooses; returns its step (``-1``: none kept)."""
        keeper = self._keeper(monitor, good_until, unlearned_to_start, alive_until)
        if keeper is None:
            return -1
        if keeper is self._start:  # the snapshots since were taken at the wrong LR: condemned
            _recall(monitor, keeper.restore(trainer, pl_module))
            self._healthy.release()
            self._candidate.release()
            return self._start.step
        _recall(monitor, keeper.restore(trainer, pl_module))
        if keeper is self._candidate:  # now confirmed: the fault came after it
            self._healthy, self._candidate = self._candidate, self._healthy
        self._candidate.release()  # taken after the restored state: condemned with the rest
        return self._healthy.step

    def _keeper(
        self,
        monitor: HealthMonitor,
        good_until: int = -1,
        unlearned_to_start: bool = False,
        alive_until: int = -1,
    ) -> RollbackSnapshot | None:
        """The snapshot :meth:`_roll_back` restores (``None``: none kept)."""
        keeper = self._chosen(monitor, good_until, unlearned_to_start)
        if alive_until >= 0 and (keeper is None or keeper.step > alive_until):  # it holds the dead units
            kept = (self._candidate, self._healthy, self._start)
            undamaged = [k for k in kept if k.snapshot is not None and k.step <= alive_until]
            keeper = max(undamaged, key=lambda k: k.step, default=keeper)
        return keeper

    def _chosen(
        self, monitor: HealthMonitor, good_until: int, unlearned_to_start: bool
    ) -> RollbackSnapshot | None:
        keeper = self._healthy
        if self._candidate.snapshot is not None and 0 <= self._candidate.step <= good_until:
            keeper = self._candidate
        elif unlearned_to_start and self._start.snapshot is not None:
            confirmed = None if keeper.snapshot is None else keeper.snapshot.extra[0]
            band = monitor.thresholds["trivial_band"]
            start = float(confirmed.get("start_loss", math.nan)) if confirmed is not None else math.nan
            if confirmed is None or not _learned(confirmed.get("losses", []), start, band):
                keeper = self._start
        return None if keeper.snapshot is None else keeper

    def _lr_factor(self) -> float:
        return self.lr_scale

    def _lr_floors(self) -> list[list[float]] | None:
        return self.lr_floors

    def _lr_ceilings(self) -> list[list[float]] | None:
        return self.lr_ceilings

    def _track_peaks(self, trainer: Trainer) -> None:
        """Each group's largest scheduled LR at a check so far (host floats: no sync): a zeroed LR's level."""
        self.peaks = _per_group(trainer, self.peaks, max)

    def _effective_lr(self, trainer: Trainer) -> float:
        floors, ceilings = self.lr_floors or [], self.lr_ceilings or []
        lrs = [
            min(
                max(float(g["lr"]), floors[i][j] if i < len(floors) and j < len(floors[i]) else 0.0),
                ceilings[i][j] if i < len(ceilings) and j < len(ceilings[i]) else math.inf,
            )
            for i, o in enumerate(trainer.optimizers)
            for j, g in enumerate(o.param_groups)
        ]
        return max(lrs, default=math.nan) * self.lr_scale

    def _record(
        self,
        trainer: Trainer,
        finding: Finding,
        action: str,
        before: dict[str, Any],
        after: dict[str, Any],
        text: str,
    ) -> None:
        event = RepairEvent(trainer.global_step, finding.problem, str(finding.cause), action, before, after)
        event.message = (
            f"HealthMonitor repair at step {event.step} ({finding.problem}, cause {event.cause}): {text}."
        )
        self.events.append(event)
        metrics = {
            f"{self.prefix}health/repair_step": float(event.step),
            f"{self.prefix}health/repair_action": float(ACTIONS.index(action) + 1),
            f"{self.prefix}health/repair_lr_scale": self.lr_scale,
            f"{self.prefix}health/repairs": float(len(self.events)),
        }
        step = max(trainer.global_step - 1, 0)  # after the optimizer step: the step of this batch's metrics
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=step)
        if trainer.is_global_zero:
            log.warning(event.message)
        for callback in callback_list(trainer):  # the run's record of its repairs
            if isinstance(callback, RunManifest):
                callback.add_record(trainer, "health_repairs", asdict(event))

    def state_dict(self) -> dict[str, Any]:
        """Everything a resumed run needs to repair as one not stopped (CPU tensors, by reference)."""
        keepers = {"healthy": self._healthy, "candidate": self._candidate, "start": self._start}
        snapshots = {name: _saved(keeper.snapshot) for name, keeper in keepers.items() if keeper.snapshot}
        return {
            "events": [asdict(e) for e in self.events],
            "lr_scale": self.lr_scale,
            "best_val": self.best_val,
            "best_step": self._best_step,
            "peaks": [list(groups) for groups in self.peaks],
            **({"lr_floors": [list(groups) for groups in self.lr_floors]} if self.lr_floors else {}),
            **({"lr_ceilings": [list(groups) for groups in self.lr_ceilings]} if self.lr_ceilings else {}),
            **({"best_weights": dict(self._best.model or {})} if not self._best.empty else {}),
            **({"snapshots": snapshots} if snapshots else {}),
            **({"held": self.held.to_dict()} if self.held is not None else {}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.events = [RepairEvent(**e) for e in state.get("events", [])]
        self.lr_scale = float(state.get("lr_scale", 1.0))
        self.best_val = float(state.get("best_val", math.inf))
        self._best_step = int(state.get("best_step", -1))
        self.peaks = [[float(v) for v in groups] for groups in state.get("peaks", [])]
        floors = state.get("lr_floors")
        self.lr_floors = [[float(v) for v in groups] for groups in floors] if floors else None
        ceilings = state.get("lr_ceilings")
        self.lr_ceilings = [[float(v) for v in groups] for groups in ceilings] if ceilings else None
        self._best = Snapshot()
        if state.get("best_weights") is not None:
            self._best.model, self._best.step = dict(state["best_weights"]), self._best_step
        keepers = {"healthy": self._healthy, "candidate": self._candidate, "start": self._start}
        for name, keeper in keepers.items():
            keeper.release()
            saved = state.get("snapshots", {}).get(name)
            keeper.snapshot = None if saved is None else _loaded(saved)
        self._resumed = "snapshots" in state
        self.held = Finding(**state["held"]) if state.get("held") else None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_best": Snapshot()}


Memory = tuple[dict[str, Any], list[str]]  # the monitor's history (its checkpoint form) and active problems


def _memory(monitor: HealthMonitor) -> Memory:
    """The rules' memory a rollback puts back, in the form the monitor checkpoints it (list copies: cheaper
    than a deep copy, and saved with the snapshot as it is)."""
    return monitor._history.to_dict(), sorted(monitor._active)


def _recall(monitor: HealthMonitor, memory: Memory) -> None:
    monitor._history, monitor._active = History.from_dict(memory[0]), set(memory[1])


def _saved(snapshot: Snapshot) -> dict[str, Any]:
    """A snapshot in plain types (a checkpoint loads with ``weights_only=True``)."""
    fields = ("step", "optimizers", "schedulers")
    plain = {name: getattr(snapshot, name) for name in fields}
    return {**plain, "model": dict(snapshot.model or {}), "memory": list(snapshot.extra)}


def _loaded(saved: dict[str, Any]) -> Snapshot:
    snapshot = Snapshot()
    snapshot.step, snapshot.model = int(saved["step"]), dict(saved["model"])
    snapshot.optimizers, snapshot.schedulers = list(saved["optimizers"]), list(saved["schedulers"])
    history, active = saved["memory"]
    snapshot.extra = (dict(history), list(active))
    return snapshot


def _alive_until(monitor: HealthMonitor, finding: Finding) -> int:
    """The latest step a snapshot without units the LR killed can have (``-1``: none)."""
    history = monitor._history
    if finding.cause != "learning_rate" or not history.dead_seen:
        return -1
    return dying_window(history, monitor.thresholds)[0]


def _reached_zero(finding: Finding) -> bool:
    """An ``lr_too_low`` whose LR collapsed to exactly 0 from a positive peak (no factor raises it)."""
    lr, peak = (_number(finding.evidence.get(k)) for k in ("lr", "peak_lr"))
    return finding.problem == "lr_too_low" and lr == 0.0 and math.isfinite(peak) and peak > 0


def _learned(losses: list[float], start: float, band: float) -> bool:
    """Whether the last check's mean loss is more than ``band`` below the loss at initialisation ``start``
    (NaN: not known, then the first check's), every loss finite.

    Example:
        >>> _learned([1.2, 0.9], 1.39, 0.1), _learned([300.0, 103.0], 1.39, 0.1), _learned([], 1.39, 0.1)
        (True, False, False)
    """
    reference = start if math.isfinite(start) else losses[0] if losses else math.nan
    finite = all(math.isfinite(v) for v in losses)
    return finite and bool(losses) and losses[-1] < (1.0 - band) * reference


def _still_falling(monitor: HealthMonitor) -> bool:
    """The loss's trend over the last ``plateau_checks`` checks falls beyond noise (the rules' own test,
    ``Evidence.falls``): a run that is fixing itself."""
    history, t = monitor._history, monitor.thresholds
    k = int(t["plateau_checks"])
    if len(history.losses) < k:
        return False
    slope, slope_se = trend(history.loss_steps[-k:], history.losses[-k:], history.loss_ses[-k:])
    return slope < -t["confidence_z"] * slope_se


def _no_check_after(trainer: Trainer, monitor: HealthMonitor) -> bool:
    """Whether training ends before the next check (``Trainer.estimated_stepping_batches``; unknown: no)."""
    try:
        total = float(trainer.estimated_stepping_batches)
    except MisconfigurationException:  # an accumulation schedule that changes by epoch: length not known
        return False
    return 0 <= total - trainer.global_step < monitor.check_every_n_steps


def _check_loss(trainer: Trainer, monitor: HealthMonitor) -> tuple[float, float]:
    """``(mean loss, standard error)`` of the check just made (NaN: its loss was not finite)."""
    history = monitor._history
    if not history.losses or history.loss_steps[-1] != trainer.global_step:
        return math.nan, math.nan
    return float(history.losses[-1]), float(history.loss_ses[-1])


def _number(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan
