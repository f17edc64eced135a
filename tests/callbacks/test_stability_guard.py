"""StabilityGuard on real Trainers (fault injection: NaN loss, NaN gradient, 100x spike; DDP, modes, state),
and its parts on their own (the LR cut, the rollback snapshot, the event messages)."""

from __future__ import annotations

import copy
import logging
import math
import pickle
import statistics
import warnings
from datetime import timedelta
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.plugins.precision import MixedPrecision
from torch.utils._python_dispatch import TorchDispatchMode

from lightning_recipes._deprecation import LightningRecipesDeprecationWarning
from lightning_recipes.callbacks import Finding, HealthMonitor, StabilityGuard
from lightning_recipes.callbacks import _rollback as rollback_module
from lightning_recipes.callbacks.grad_norm_monitor import GradNormMonitor
from lightning_recipes.callbacks.stability_guard import (
    LRScaling,
    RollbackSnapshot,
    StabilityEvent,
    give_up_message,
    outcome,
)
from lightning_recipes.testing import (
    InMemoryLogger,
    TinyClassifier,
    fast_trainer,
    random_classification_loader,
)
from tests.callbacks._shared import DumpPerRank, callback_of, counted, per_rank
from tests.helpers.loss_recorder import LossRecorder
from tests.helpers.speed import VirtualTime
from tests.helpers.weights import same, weights


class FaultyClassifier(TinyClassifier):
    """Injects ``fault`` at step ``fault_step`` (on ``fault_rank``; every step on with ``persistent``):
    ``"nan_loss"``, ``"nan_grad"`` (after DDP's all-reduce), ``"spike"`` (x100), ``"skip"`` (no update)."""

    def __init__(
        self,
        fault: str | None = None,
        fault_step: int = 5,
        fault_rank: int | None = None,
        persistent: bool = False,
        momentum: float = 0.0,
        lr: float = 0.1,
    ) -> None:
        super().__init__(lr=lr)
        self.fault = fault
        self.fault_step = fault_step
        self.fault_rank = fault_rank
        self.persistent = persistent
        self.momentum = momentum

    def _faulty(self, kind: str) -> bool:
        if self.fault != kind:
            return False
        if self.fault_rank is not None and self.global_rank != self.fault_rank:
            return False
        step = self.trainer.global_step
        return step >= self.fault_step if self.persistent else step == self.fault_step

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        loss = super().training_step(batch, batch_idx)
        if self._faulty("skip"):
            return None
        if self._faulty("nan_loss"):
            return loss * float("nan")
        if self._faulty("spike"):
            return loss * 100.0
        return loss

    def on_after_backward(self) -> None:
        if self._faulty("nan_grad"):
            self.hidden.weight.grad[0, 0] = float("nan")

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams["lr"], momentum=self.momentum)


class RecordingGuard(StabilityGuard):
    """Saves each rank's error from its check; a barrier proves every rank raised at the same check."""

    def __init__(self, directory: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.directory = directory

    def on_train_batch_end(self, trainer: pl.Trainer, *args: Any) -> None:
        try:
            super().on_train_batch_end(trainer, *args)
        except RuntimeError as error:
            torch.save({"exception": str(error)}, Path(self.directory, f"rank{trainer.global_rank}.pt"))
            torch.distributed.monitored_barrier(timeout=timedelta(seconds=60))
            raise


def _fit(
    model: pl.LightningModule, guard: StabilityGuard | None, max_steps: int = 16, **kwargs: Any
) -> pl.Trainer:
    callbacks = kwargs.pop("callbacks", [])
    trainer = fast_trainer(
        max_steps=max_steps, max_epochs=-1, callbacks=([guard] if guard else []) + callbacks, **kwargs
    )
    trainer.fit(model, random_classification_loader())
    return trainer


@pytest.mark.parametrize(
    ("mode", "fault", "every", "step", "event"),
    [
        ("rollback", "nan_loss", 1, 5, (5, "nonfinite_loss", "rollback", 5)),
        ("rollback", "nan_grad", 1, 5, (5, "nonfinite_grad_norm", "rollback", 5)),
        ("skip_step", "nan_grad", 4, 3, (3, "nonfinite_grad_norm", "skip_step", -1)),
    ],
)
def test_dropping_the_bad_batch_is_bitwise_the_run_without_it(
    mode: str, fault: str, every: int, step: int, event: tuple
) -> None:
    """Momentum SGD: the optimizer state is restored too."""
    guard = StabilityGuard(
        mode=mode, check_every_n_steps=every, snapshot_every_n_steps=every, spike_k=None, verbose=False
    )
    models = []
    for kind, callback in ((fault, guard), ("skip", None)):
        torch.manual_seed(0)
        models.append(FaultyClassifier(fault=kind, fault_step=step, momentum=0.9))
        _fit(models[-1], callback, max_steps=step + 5)
    assert same(weights(models[0]), weights(models[1]))
    assert [(e.step, e.cause, e.action, e.restored_step) for e in guard.events] == [event]
    assert (guard.rollbacks, guard.skipped_steps) == ((1, 0) if mode == "rollback" else (0, 1))


@pytest.mark.parametrize(
    ("fault", "cause"),
    [("nan_loss", "nonfinite_loss"), ("nan_grad", "nonfinite_grad_norm"), ("spike", "loss_spike")],
)
def test_fault_injection_rolls_back_and_logs_the_right_step(fault: str, cause: str) -> None:
    logger = InMemoryLogger()
    guard = StabilityGuard(
        check_every_n_steps=3, snapshot_every_n_steps=3, spike_warmup_steps=4, spike_window=50, verbose=False
    )
    model = FaultyClassifier(fault=fault, fault_step=7)
    trainer = _fit(model, guard, max_steps=16, logger=logger, log_every_n_steps=1)

    assert trainer.global_step == 16  # the run finished
    assert all(torch.isfinite(p).all() for p in model.parameters())
    # checks after steps 2, 5, 8 (global_step 3, 6, 9); snapshot from the passed check at 6
    assert [(e.step, e.cause, e.detected_at_step, e.restored_step) for e in guard.events] == [
        (7, cause, 9, 6)
    ]
    assert guard.rollbacks == 1
    assert logger.history("stability/event_step") == [(8, 7.0)]  # with the metrics of the batch at step 8
    steps = [step for step, _ in logger.records]
    assert steps == sorted(steps)  # never behind the trainer's own logging step (wandb drops such records)
    codes = {"nonfinite_loss": 1, "nonfinite_grad_norm": 2, "loss_spike": 3}
    assert logger.last("stability/event_cause") == codes[cause]
    value = logger.last("stability/event_value")
    if fault == "spike":
        assert value > 50.0  # ~100x the loss at init (ln 4)
    else:
        assert math.isnan(value)


class GradientReads(TorchDispatchMode):
    """Counts the kernels that read whole gradients (norm / dot products) while active."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        name = str(func)
        if "norm" in name or name.startswith("aten.dot"):
            self.count += 1
        return func(*args, **(kwargs or {}))


SyncCountingGuard = counted(StabilityGuard, ("on_before_optimizer_step", "on_train_batch_end"))
ReadCountingGuard = counted(StabilityGuard, ("on_before_optimizer_step",), "reads", GradientReads)


@pytest.mark.parametrize("with_monitor", [False, True])
def test_gradient_norm_is_shared_with_grad_norm_monitor(with_monitor: bool) -> None:
    """After GradNormMonitor read the gradients the guard reuses its norm and still detects the NaN."""
    guard = ReadCountingGuard(check_every_n_steps=2, snapshot_every_n_steps=2, verbose=False)
    monitor = [GradNormMonitor()] if with_monitor else []
    _fit(FaultyClassifier(fault="nan_grad", fault_step=5), None, max_steps=8, callbacks=[*monitor, guard])
    if with_monitor:
        assert guard.reads == [0] * 8
    else:
        assert all(count > 0 for count in guard.reads) and len(guard.reads) == 8
    assert [(e.step, e.cause) for e in guard.events] == [(5, "nonfinite_grad_norm")]


@pytest.mark.parametrize("every", [1, 4])
def test_a_clean_run_has_no_event_and_one_sync_per_check_and_none_between(every: int) -> None:
    guard = SyncCountingGuard(check_every_n_steps=every, snapshot_every_n_steps=4, spike_warmup_steps=4)
    trainer = _fit(FaultyClassifier(), guard, max_steps=12)
    assert guard.syncs == [1 if (step + 1) % every == 0 else 0 for step in range(12)]
    assert guard.events == [] and trainer.global_step == 12
    assert guard._window.numel() == 12  # every step passed its check and entered the statistics
    assert guard._snapshots.snapshot is None  # released at teardown


def test_cooldown_scales_lr_only_inside_optimizer_steps_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = StabilityGuard(check_every_n_steps=1, snapshot_every_n_steps=1, lr_factor=0.25, cooldown_steps=3)
    hook = LrHook()
    with caplog.at_level(logging.WARNING):
        trainer = _fit(
            FaultyClassifier(fault="nan_loss", fault_step=4), guard, max_steps=10, callbacks=[hook]
        )
    assert hook.lrs == [0.1] * 5 + [0.025] * 3 + [0.1] * 2
    assert trainer.optimizers[0].param_groups[0]["lr"] == 0.1
    assert "non-finite loss (loss nan) at step 4 on rank 0, detected at step 5" in caplog.text


def test_scheduler_state_is_restored() -> None:
    class Scheduled(FaultyClassifier):
        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
            return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    guard = StabilityGuard(check_every_n_steps=2, snapshot_every_n_steps=2, verbose=False)
    model = Scheduled(fault="nan_loss", fault_step=4)
    trainer = _fit(model, guard, max_steps=8)
    # 8 steps, but the scheduler was rewound from 6 to 4 at the rollback: it stepped 8 - 2 times.
    assert trainer.lr_scheduler_configs[0].scheduler.last_epoch == 6
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**6)


def test_gradient_accumulation_names_the_optimizer_step() -> None:
    guard = StabilityGuard(check_every_n_steps=2, snapshot_every_n_steps=2, spike_k=None, verbose=False)

    class MicroFault(FaultyClassifier):
        def training_step(self, batch: Any, batch_idx: int) -> Any:
            loss = TinyClassifier.training_step(self, batch, batch_idx)
            # second micro-batch of optimizer step 3 (batches 6 and 7 form step 3)
            return loss * float("nan") if (self.current_epoch, batch_idx) == (0, 7) else loss

    model = MicroFault()
    trainer = _fit(model, guard, max_steps=8, accumulate_grad_batches=2)
    assert trainer.global_step == 8
    assert [(e.step, e.cause, e.detected_at_step) for e in guard.events] == [(3, "nonfinite_loss", 4)]
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_raise_mode_raises_at_the_first_fault() -> None:
    guard = StabilityGuard(mode="raise", check_every_n_steps=2, verbose=False)
    with pytest.raises(RuntimeError, match="StabilityGuard"):
        _fit(FaultyClassifier(fault="nan_loss", fault_step=3), guard, max_steps=8)
    assert [(e.step, e.cause, e.rank, e.detected_at_step, e.action) for e in guard.events] == [
        (3, "nonfinite_loss", 0, 4, "raise")
    ]


def test_max_rollbacks_exceeded_writes_emergency_checkpoint_and_raises(tmp_path: Path) -> None:
    guard = StabilityGuard(check_every_n_steps=2, snapshot_every_n_steps=2, max_rollbacks=2, verbose=False)
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpts", save_top_k=0)
    model = FaultyClassifier(fault="nan_loss", fault_step=4, persistent=True)
    with pytest.raises(
        RuntimeError, match=r"gave up: non-finite loss .* at step 8 .*2 rollbacks within 1000 steps"
    ):
        _fit(model, guard, max_steps=20, callbacks=[checkpoint], enable_checkpointing=True)
    assert [(e.step, e.action) for e in guard.events] == [(4, "rollback"), (6, "rollback"), (8, "give_up")]
    path = Path(guard.emergency_checkpoint_path or "")
    assert path == tmp_path / "ckpts" / "stability-guard-emergency-step=10.ckpt" and path.is_file()
    state = torch.load(path, weights_only=False)
    assert state["global_step"] == 10
    assert all(torch.isfinite(v).all() for v in state["state_dict"].values())
    # the emergency checkpoint and the in-memory model hold the last good snapshot (step 4)
    assert same(state["state_dict"], weights(model))


@pytest.mark.parametrize(
    ("snapshot_every", "expected"),
    [
        # check at 6 would snapshot: the weights check catches the poisoned update of step 5 (no loss shows it
        # yet)
        (2, (5, "nonfinite_weights", 4)),
        # check at 6 takes no snapshot and passes; step 6's loss is NaN, caught at the check at 8
        (4, (6, "nonfinite_loss", 4)),
    ],
)
def test_without_grad_norm_a_nan_gradient_is_caught_and_never_snapshotted(
    snapshot_every: int, expected: tuple[int, str, int]
) -> None:
    guard = StabilityGuard(
        check_every_n_steps=2, snapshot_every_n_steps=snapshot_every, check_grad_norm=False, verbose=False
    )
    model = FaultyClassifier(fault="nan_grad", fault_step=5)
    trainer = _fit(model, guard, max_steps=10)
    assert [(e.step, e.cause, e.restored_step) for e in guard.events] == [expected]
    assert trainer.global_step == 10
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_resumed_with_unchecked_steps_has_no_snapshot_until_a_check_passes() -> None:
    guard = StabilityGuard(check_every_n_steps=2, verbose=False)
    guard.load_state_dict({"pending": [(41, 1.3, 0.5)]})  # a checkpoint written between two checks
    with pytest.raises(RuntimeError, match="no verified snapshot exists yet"):
        _fit(FaultyClassifier(fault="nan_loss", fault_step=0), guard, max_steps=4)
    assert [(e.step, e.action, e.restored_step) for e in guard.events] == [(0, "give_up", -1)]


@pytest.mark.parametrize(("fault", "events"), [("nan_grad", []), ("nan_loss", [(3, "nonfinite_loss")])])
def test_fp16_gradscaler_overflow_is_left_to_the_scaler(fault: str, events: list) -> None:
    """An inf gradient under a GradScaler is the scaler's business; a NaN loss is still caught."""
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8)
    guard = StabilityGuard(check_every_n_steps=2, snapshot_every_n_steps=2, spike_k=None, verbose=False)
    model = FaultyClassifier(fault=fault, fault_step=3)
    trainer = _fit(model, guard, max_steps=8, plugins=[MixedPrecision("16-mixed", "cpu", scaler=scaler)])
    assert [(e.step, e.cause) for e in guard.events] == events and trainer.global_step == 8
    if not events:
        assert scaler.get_scale() < 2.0**8  # the scaler saw the overflow and backed off


def test_state_dict_round_trip_and_pickle() -> None:
    guard = StabilityGuard(
        check_every_n_steps=3, snapshot_every_n_steps=3, verbose=False, lr_factor=0.5, cooldown_steps=50
    )
    _fit(FaultyClassifier(fault="nan_loss", fault_step=4), guard, max_steps=10)
    state = guard.state_dict()
    assert state["rollbacks"] == 1 and state["cooldown_left"] > 0 and len(state["pending"]) == 1
    restored = StabilityGuard(check_every_n_steps=3)
    restored.load_state_dict(pickle.loads(pickle.dumps(state)))
    assert repr(restored.state_dict()) == repr(state)  # repr: the event value is NaN (NaN != NaN)
    [event] = restored.events
    assert event == StabilityEvent(4, "nonfinite_loss", event.value, 0, 6, "rollback", 3) and math.isnan(
        event.value
    )
    StabilityGuard().load_state_dict({})  # tolerant of old / empty state
    clone = pickle.loads(pickle.dumps(guard))
    assert clone.rollbacks == 1 and clone._snapshots.snapshot is None and clone._lr_scaling._handles == []


def test_rollback_refuses_sharded_strategies() -> None:
    from lightning.pytorch.strategies import FSDPStrategy

    guard = StabilityGuard()
    trainer = fast_trainer(max_steps=1)
    trainer.strategy.__class__ = type("FakeFSDP", (FSDPStrategy,), {})  # only the type check matters here
    with pytest.raises(ValueError, match="does not support sharded strategies, got FakeFSDP"):
        guard.setup(trainer, TinyClassifier(), "fit")


@pytest.mark.parametrize(
    ("fault", "cause", "mode"),
    [
        ("nan_loss", "nonfinite_loss", "rollback"),
        ("nan_grad", "nonfinite_grad_norm", "rollback"),
        ("spike", "loss_spike", "rollback"),
        ("nan_grad", "nonfinite_grad_norm", "skip_step"),
    ],
)
def test_ddp_fault_on_one_rank_acts_on_every_rank(tmp_path: Path, fault: str, cause: str, mode: str) -> None:
    """The ranks run a pickled copy of the guard, as ddp_spawn's would (forked: no fresh interpreters)."""
    guard = StabilityGuard(mode=mode, check_every_n_steps=3, snapshot_every_n_steps=3, spike_warmup_steps=4)
    model = FaultyClassifier(fault=fault, fault_step=7, fault_rank=1)
    dump = DumpPerRank(
        tmp_path, lambda t, m: (callback_of(t, StabilityGuard).events, weights(m), t.global_step)
    )
    callbacks = [pickle.loads(pickle.dumps(guard)), dump]
    _fit(model, None, max_steps=12, strategy="ddp_fork", devices=2, callbacks=callbacks)
    results = per_rank(tmp_path)
    restored = 6 if mode == "rollback" else -1
    for events, final, step in results:
        assert step == 12
        # a NaN loss on rank 1 also makes rank 0's all-reduced gradient NaN: the event names the root cause
        got = [(e.step, e.rank, e.cause, e.action, e.restored_step) for e in events]
        assert got == [(7, 1, cause, mode, restored)]
        assert all(torch.isfinite(v).all() for v in final.values())
    assert same(results[0][1], results[1][1])


def test_ddp_raise_mode_raises_on_every_rank(tmp_path: Path) -> None:
    guard = RecordingGuard(str(tmp_path), mode="raise", check_every_n_steps=2, verbose=False)
    model = FaultyClassifier(fault="nan_grad", fault_step=3, fault_rank=0)
    with pytest.raises(Exception, match="StabilityGuard"):
        _fit(model, guard, max_steps=8, strategy="ddp_fork", devices=2)
    for result in per_rank(tmp_path):  # every rank raised, at the same check (RecordingGuard's barrier)
        assert "StabilityGuard(mode='raise')" in result["exception"]


class StrictCudaGuard(StabilityGuard):
    """Turns CUDA sync debugging to "error" inside the hooks that must never sync (all but the check)."""

    def on_before_optimizer_step(self, *args: Any) -> None:
        torch.cuda.set_sync_debug_mode("error")
        try:
            super().on_before_optimizer_step(*args)
        finally:
            torch.cuda.set_sync_debug_mode("default")

    def on_train_batch_end(self, *args: Any) -> None:
        check_now = len(self._pending) + 1 >= self.check_every_n_steps
        torch.cuda.set_sync_debug_mode("default" if check_now else "error")
        try:
            super().on_train_batch_end(*args)
        finally:
            torch.cuda.set_sync_debug_mode("default")


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["32-true", "16-mixed", "bf16-mixed"])
def test_cuda_rollback_pinned_snapshots_no_sync_between_checks(precision: str) -> None:
    guard = StrictCudaGuard(check_every_n_steps=4, snapshot_every_n_steps=4, spike_k=None, verbose=False)
    model = FaultyClassifier(fault="nan_loss", fault_step=5, momentum=0.9)
    trainer = _fit(model, guard, max_steps=16, accelerator="cuda", precision=precision)
    assert trainer.global_step == 16
    assert [(e.step, e.cause, e.restored_step) for e in guard.events] == [(5, "nonfinite_loss", 4)]
    assert all(torch.isfinite(p).all() for p in model.parameters())


class SteadyStepClassifier(FaultyClassifier):
    """Each step takes 5 ms on the virtual clock; snapshots take none (the interval is then one check)."""

    clock: VirtualTime

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        self.clock.sleep(0.005)
        return super().training_step(batch, batch_idx)


@pytest.mark.parametrize("every", [None, 100])
def test_snapshot_interval_adaptive_by_default_or_as_given(every: int | None, monkeypatch) -> None:
    """Adaptive (default): a NaN at step 57 rolls back one check (free snapshots, 5 ms virtual steps)."""
    clock = VirtualTime()
    monkeypatch.setattr(rollback_module, "time", clock)  # the snapshot timings
    guard = StabilityGuard(check_every_n_steps=5, snapshot_every_n_steps=every, verbose=False)
    model = SteadyStepClassifier(fault="nan_loss", fault_step=57)
    model.clock = clock
    _fit(model, guard, max_steps=62)
    [event] = guard.events
    assert (event.step, event.cause) == (57, "nonfinite_loss")
    assert (event.restored_step, guard.snapshot_interval) == ((55, 5) if every is None else (0, 100))


class HeavyStateClassifier(FaultyClassifier):
    """Cheap steps but a large state to snapshot (a 16M-float buffer, 64 MB): snapshots must thin out."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("table", torch.zeros(16_000_000))


def test_snapshots_thin_out_when_they_cost_more_than_the_overhead_budget() -> None:
    guard = StabilityGuard(check_every_n_steps=2, verbose=False)
    _fit(HeavyStateClassifier(), guard, max_steps=12)
    assert guard._snapshots.snapshot_s is not None and guard._snapshots.step_s is not None
    # measured: one snapshot costs more than 1% of 2 steps, so the interval is the fewest whole checks that
    # bring it under 1%; it is far above one check (copying 64 MB vs a millisecond-scale step)
    needed = guard._snapshots.snapshot_s / (0.01 * guard._snapshots.step_s)
    assert guard.snapshot_interval >= needed and guard.snapshot_interval - 2 < needed
    assert guard.snapshot_interval >= 20


class LrHook(Callback):
    """Records the learning rate the optimizer really uses (a step pre-hook registered after the guard's)."""

    def __init__(self) -> None:
        self.lrs: list[float] = []

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        trainer.optimizers[0].register_step_pre_hook(
            lambda opt, args, kwargs: self.lrs.append(opt.param_groups[0]["lr"])
        )


def _fit_lr_jump(*callbacks: Callback) -> None:
    """An MLP whose LR jumps x50 at step 100, under a HealthMonitor that finds it too high."""
    from tests.helpers.health_gallery import MLP, classification, loader

    trainer = fast_trainer(max_steps=160, max_epochs=-1, limit_val_batches=0, callbacks=list(callbacks))
    torch.manual_seed(0)
    trainer.fit(MLP(act="gelu", optimizer="adam", lr=1e-3, lr_jump=(100, 50.0)), loader(classification()))


def test_lr_too_high_finding_rolls_back_and_cuts_the_lr() -> None:
    monitor = HealthMonitor(check_every_n_steps=20, on_finding=lambda f: None)
    # spike_k=None: only the finding acts (the guard's own spike rule would catch this jump first)
    guard = StabilityGuard(check_every_n_steps=20, snapshot_every_n_steps=20, spike_k=None, verbose=False)
    hook = LrHook()
    with pytest.warns(LightningRecipesDeprecationWarning, match=r"HealthMonitor\(repair=True\)"):
        _fit_lr_jump(monitor, guard, hook)
    assert [f.problem for f in monitor.findings] == ["lr_too_high"]
    # found at the check of step 120, repaired in the same batch, back to the last good check (100)
    assert [(e.cause, e.step, e.action, e.restored_step, e.detected_at_step) for e in guard.events] == [
        ("lr_too_high", 120, "rollback", 100, 120)
    ]
    assert guard._lr_scale == 0.5 and guard.rollbacks == 1
    # issue 32: the event carries the finding's update ratio (it read a key the finding never has: "(nan)")
    assert guard.events[0].value == monitor.findings[0].evidence["update_ratio"] > 0.01
    assert hook.lrs[99] == pytest.approx(1e-3) and hook.lrs[110] == pytest.approx(0.05)
    assert hook.lrs[-1] == pytest.approx(0.05 * 0.5)  # the scheduler's 0.05, cut in half inside each step
    clone = StabilityGuard(check_every_n_steps=20)
    clone.load_state_dict(guard.state_dict())
    assert clone._lr_scale == 0.5


def test_a_repairing_monitor_is_the_one_path_the_guard_leaves_its_findings_to() -> None:
    """Issue 36: the guard's deprecated finding path stands aside (no warning, no event)."""
    monitor = HealthMonitor(check_every_n_steps=20, on_finding=lambda f: None, repair=True)
    guard = StabilityGuard(check_every_n_steps=20, snapshot_every_n_steps=20, spike_k=None, verbose=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LightningRecipesDeprecationWarning)
        _fit_lr_jump(monitor, guard)
    assert [f.problem for f in monitor.findings][:1] == ["lr_too_high"]
    assert [e.action for e in monitor.repairs][:1] == ["rollback_lower_lr"]
    assert guard.events == [] and guard._lr_scale == 1.0 and guard.rollbacks == 0


def test_guard_placed_before_the_monitor_warns() -> None:
    guard = StabilityGuard(check_every_n_steps=2, verbose=False)
    with pytest.warns(UserWarning, match="Place the guard after the monitor"):
        _fit(FaultyClassifier(), guard, max_steps=2, callbacks=[HealthMonitor(check_every_n_steps=2)])


WOBBLY_SEEDS = (2, 13, 14)  # the old default rolled 2 and 14 back; 13 wobbles most (+6.4%)


@pytest.mark.parametrize(
    "seed", [s if s in WOBBLY_SEEDS else pytest.param(s, marks=pytest.mark.slow) for s in range(20)]
)
def test_default_guard_and_monitor_leave_healthy_bert_finetuning_alone(seed: int) -> None:
    """A tiny BERT's plateau at ln 2 and its +0.5-6% wobbles out of it are no spike (issues 22, 25), no
    finding and no repair."""
    pytest.importorskip("transformers")
    from tests.helpers.finetune_models import TinyBertFinetune, loader, text_classification

    torch.manual_seed(seed)
    findings: list[Finding] = []
    monitor = HealthMonitor(check_every_n_steps=10, on_finding=findings.append, repair=True)
    guard = StabilityGuard(verbose=False)  # the defaults under test
    recorder = LossRecorder()
    trainer = fast_trainer(max_steps=60, max_epochs=-1, callbacks=[recorder, monitor, guard])
    trainer.fit(TinyBertFinetune(lr=3e-4, dropout=0.0), loader(text_classification(seed=seed), 32, seed))
    assert guard.events == [] and guard.rollbacks == 0 and [(f.problem, f.step) for f in findings] == []
    assert monitor.repairs == []
    losses = recorder.losses
    assert len(losses) == 60
    if seed in WOBBLY_SEEDS:
        assert abs(statistics.median(losses[:20]) - math.log(2)) < 0.01  # the plateau
        rises = [losses[i] / statistics.median(losses[i - 20 : i]) - 1 for i in range(20, 60)]
        assert max(rises) > 0.003  # it does wobble out of the plateau: bumps above the running level


def test_default_guard_still_catches_a_blow_up_after_its_warm_up() -> None:
    """The defaults (check every 10 steps, 20 warm-up steps) still roll back a 100x loss."""
    guard = StabilityGuard(snapshot_every_n_steps=10, verbose=False)
    _fit(FaultyClassifier(fault="spike", fault_step=35), guard, max_steps=45)
    assert [(e.step, e.cause, e.detected_at_step, e.restored_step) for e in guard.events] == [
        (35, "loss_spike", 40, 30)
    ]


class _Factor:
    def __init__(self, value: float) -> None:
        self.value = value

    def __call__(self) -> float:
        return self.value


def test_lr_scaling_cuts_each_step_and_restores_the_rate_and_pickles_without_hooks() -> None:
    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.SGD([param], lr=1.0)
    factor = _Factor(0.25)
    scaling = LRScaling(factor)
    scaling.attach([optimizer])
    param.grad = torch.ones(1)
    optimizer.step()
    assert param.item() == pytest.approx(-0.25) and optimizer.param_groups[0]["lr"] == 1.0
    factor.value = 1.0
    optimizer.step()
    assert param.item() == pytest.approx(-1.25)
    floored = torch.nn.Parameter(torch.zeros(1))
    zeroed = torch.optim.SGD([floored], lr=0.0)
    lifted = LRScaling(lambda: 0.5, lambda: [[0.2]])  # a rate of 0 raised to its floor, then the factor
    lifted.attach([zeroed])
    floored.grad = torch.ones(1)
    zeroed.step()
    assert floored.item() == pytest.approx(-0.1) and zeroed.param_groups[0]["lr"] == 0.0
    lifted.detach()
    clone = pickle.loads(pickle.dumps(scaling))  # ddp_spawn pickles the guard with its collaborators
    assert clone._handles == [] and clone._factor() == 1.0
    scaling.detach()
    factor.value = 0.5
    optimizer.step()
    assert param.item() == pytest.approx(-2.25)  # detached: the full rate


def test_rollback_snapshot_restores_weights_and_a_copy_keeps_timings_but_not_the_snapshot() -> None:
    model = TinyClassifier()
    trainer = fast_trainer(max_steps=2)
    trainer.fit(model, random_classification_loader())
    keeper = RollbackSnapshot()
    window = torch.tensor([1.0, 2.0])
    keeper.take(trainer, model, window, wait=True)
    keeper.take(trainer, model, window, wait=True)  # the second one is timed
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for p in model.parameters():
            p.add_(1.0)
    assert keeper.restore(trainer, model) is window
    assert all(torch.equal(model.state_dict()[k], before[k]) for k in before)
    assert keeper.step == 2 and keeper.snapshot_s is not None
    clone = copy.deepcopy(keeper)
    assert clone.snapshot is None and clone.step == -1 and clone.snapshot_s == keeper.snapshot_s
    keeper.release()
    assert keeper.snapshot is None and keeper.snapshot_s is not None


def test_event_messages_name_the_reason() -> None:
    event = StabilityEvent(7, "nonfinite_grad_norm", math.inf, 1, 9, "give_up", 5)
    assert give_up_message(event, None, [event], None).startswith(
        "StabilityGuard gave up: non-finite gradient norm (gradient norm inf) at step 7 on rank 1, "
        "detected at step 9; "
        "no verified snapshot exists yet"
    )
    message = give_up_message(event, ([2, 4], 100, 2), [event], "/tmp/x.ckpt")
    assert "2 rollbacks within 100 steps already (max_rollbacks=2) at steps [2, 4]" in message
    assert "Emergency checkpoint (last good state, step 5): /tmp/x.ckpt." in message
    finding = StabilityEvent(7, "lr_too_high", 0.2, 0, 9, "scale_lr")
    assert outcome(finding, 0.25, 1.0, 0) == "scale_lr, learning rate x0.25 from now on"
