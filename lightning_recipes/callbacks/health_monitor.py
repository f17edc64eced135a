"""HealthMonitor: name what goes wrong in a training run, and what to do about it, at one sync per check."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor, nn
from torch.optim import Optimizer
from typing_extensions import override

from lightning_recipes._collectives import all_gather_stacked
from lightning_recipes._deprecation import warn_deprecated
from lightning_recipes._jsonable import jsonable
from lightning_recipes._loss_output import loss_of
from lightning_recipes._validation import check_bool, check_int, check_positive
from lightning_recipes.callbacks._health_causes import plain_diagnosis
from lightning_recipes.callbacks._health_collector import (
    LOSS_PIECES,
    ActivationHooks,
    FunctionalSaturation,
    InputFreeLoss,
    Packer,
    RowLiveness,
    StepRecords,
    ValidationBatches,
    batch_samples,
    combine,
    dead_of,
    group_families,
    group_lrs,
    loss_statistics,
    loss_vector,
    means_by_index,
    nonfinite_counts,
    planned_steps,
    sparse_groups,
    squared_norm,
    tracked_parameters,
    unrectified_layers,
    unwrap_optimizer,
    validation_error,
    validation_rows,
    watched_modules,
    weight_and_update_powers,
)
from lightning_recipes.callbacks._health_rules import decide, settle
from lightning_recipes.callbacks._health_window import (
    DEFAULT_THRESHOLDS,
    PROBLEMS,
    Diagnosed,
    Finding,
    History,
    findings_table,
)
from lightning_recipes.callbacks._norms import (
    STEP_POWERS,
    GroupBy,
    compile_group_by,
    flat_shard_group,
    param_groups_of,
)
from lightning_recipes.callbacks._trainer import (
    callback_list,
    check_prefix,
    emit,
    logged_running_mean,
)
from lightning_recipes.callbacks.input_pipeline_monitor import InputPipelineMonitor, WaitClock
from lightning_recipes.norms import update_ratios

if TYPE_CHECKING:
    from lightning_recipes.callbacks._health_repair import HealthRepair

__all__ = ["Finding", "HealthMonitor"]


class HealthMonitor(Callback):
    """Diagnose a run that trains, but badly, while it trains: name the problem, show the numbers, advise.

    Observes only (``StabilityGuard`` can act on its ``lr_too_high`` findings). It keeps each step's loss,
    the interval's last step's per-group norms, update ratios and LRs, the activations of the last
    ``activation_samples`` batches, the validation loss (``val_monitor``) and the wait for data on the
    device; every ``check_every_n_steps`` steps it reads them back in one sync, the rules (``thresholds``
    overrides) judge them against the run's own noise, and each new problem of :attr:`PROBLEMS` becomes a
    :class:`Finding` in :attr:`findings`, passed to ``on_finding`` (``"warn"``, ``"raise"`` or a callable).
    ``group_by`` as in ``GradNormMonitor``. The rules: ``docs/guides/health_monitor.md``.

    ``repair=True`` acts on findings whose named cause has a safe in-process repair (an LR too high, a
    collapsed LR, overfitting, a non-finite update), at most ``max_repairs`` times, each a ``RepairEvent`` in
    :attr:`repairs`; a run with nothing wrong trains bitwise as without it. Logged (``prefix`` first):
    ``health/<problem>`` (1.0 while present) at every check; ``health/repair_step``, ``health/repair_action``,
    ``health/repair_lr_scale``, ``health/repairs`` at a repair.

    Example:
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> monitor = HealthMonitor(check_every_n_steps=4)
        >>> trainer = fast_trainer(max_steps=8, callbacks=[monitor])
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> monitor.findings, monitor.to_dict()["checks"]
        ([], 2)
    """

    PROBLEMS = PROBLEMS

    def __init__(
        self,
        check_every_n_steps: int = 50,
        group_by: GroupBy = None,
        on_finding: Literal["warn", "raise"] | Callable[[Finding], Any] = "warn",
        activation_samples: int = 2,
        thresholds: Mapping[str, float] | None = None,
        val_monitor: str = "val_loss",
        print_report: bool = False,
        prefix: str = "",
        repair: bool = False,
        max_repairs: int = 3,
    ) -> None:
        super().__init__()
        check_int("check_every_n_steps", check_every_n_steps, minimum=1)
        check_bool("repair", repair)
        check_int("max_repairs", max_repairs, minimum=1)
        compile_group_by(group_by)
        if not (callable(on_finding) or on_finding in ("warn", "raise")):
            raise ValueError(f"`on_finding` must be 'warn', 'raise' or a callable, got {on_finding!r}.")
        check_int("activation_samples", activation_samples, minimum=0)
        if activation_samples > check_every_n_steps:
            raise ValueError(
                f"`activation_samples` must be <= `check_every_n_steps` ({check_every_n_steps}), got "
                f"{activation_samples!r}."
            )
        merged = dict(DEFAULT_THRESHOLDS)
        for key, value in dict(thresholds or {}).items():
            if key not in DEFAULT_THRESHOLDS:
                raise ValueError(
                    f"`thresholds` has an unknown key {key!r}; allowed: {tuple(DEFAULT_THRESHOLDS)!r}."
                )
            check_positive(f"thresholds[{key!r}]", value)
            if key == "spike_z":
                warn_deprecated("`thresholds['spike_z']` has no effect: no rule reads loss spikes any more.")
            merged[key] = float(value)
        if not isinstance(val_monitor, str):
            raise ValueError(f"`val_monitor` must be a str, got {val_monitor!r}.")
        check_bool("print_report", print_report)
        check_prefix(prefix)
        self.check_every_n_steps = check_every_n_steps
        self.group_by = group_by
        self.on_finding = on_finding
        self.activation_samples = activation_samples
        self.thresholds = merged
        self.val_monitor = val_monitor
        self.print_report = print_report
        self.prefix = prefix
        self.repair = repair
        self.max_repairs = max_repairs
        self._repair: HealthRepair | None = None
        if repair:
            from lightning_recipes.callbacks._health_repair import HealthRepair  # it imports StabilityGuard

            self._repair = HealthRepair(max_repairs, val_monitor, prefix)

        self.findings: list[Finding] = []
        self.checks = 0
        self._history = History()
        self._active: set[str] = set()
        self._warned: set[str] = set()
        self._records = StepRecords()  # per step: its gradient norm, its batch's largest |input|
        self._reset_run_state()

    def _reset_run_state(self) -> None:
        self._params: list[Tensor] = []
        self._index: dict[int, int] = {}
        self._group_names: list[str] = []
        self._group_of: Tensor | None = None
        self._group_numel: list[int] = []
        self._param_group: list[int] = []  # per tracked parameter, its group
        self._families: list[str] = []  # per group, its optimizer's family
        self._unrectified: set[str] = set()  # row layers ending an nn.Sequential: no dead rows
        self._row_layers: list[tuple[str, nn.Module]] = []
        self._rows = RowLiveness([])
        self._calls = FunctionalSaturation([])  # functional sigmoid/tanh on a Linear/Conv layer's output
        self._input_free = InputFreeLoss()  # the loss of the model's batch-mean prediction, sampled batches
        # the saturation at initialisation: tanh/sigmoid modules and functions on the run's first batch
        self._init_saturation: dict[int, Tensor] = {}
        self._init_calls = FunctionalSaturation([])
        self._init_handles: list[Any] = []
        self._init_measured = False
        self._first_pack = True
        self._sparse_groups: set[str] = set()
        self._model_numel = 0  # every parameter of the module, trained or not (the trained share's whole)
        self._optimizers: list[str] = []
        # the run's first batch, before any update: which units were alive (dead from initialisation)
        self._alive_start: dict[int, Tensor] = {}
        self._rows_start = RowLiveness([])
        self._start_handles: list[Any] = []
        self._start_pending = False
        self._relu: list[tuple[str, nn.Module]] = []
        self._saturating: list[tuple[str, nn.Module]] = []
        self._leaves: list[tuple[str, nn.Module]] = []
        self._handles: list[Any] = []
        self._sampling = False  # hooks or a function mode on (the sampled batches, the run's first batch)
        self._functional = True  # the model calls sigmoid/tanh functions (False: none on the first batch)
        self._step_params: dict[int, tuple[int, list[Tensor]]] = {}  # per optimizer: its tracked parameters
        self._step_at_batch_start: int | None = None
        self._automatic = True  # automatic optimization: the optimizer steps at the batch's start step
        self._clock = WaitClock()
        self._val_batches = ValidationBatches()
        self._planned_steps = math.inf
        self._param_start = torch.tensor(math.nan)  # the weights' squared norm at the start of training
        self._interval_start = 0
        self._clear_interval()

    def _clear_interval(self) -> None:
        self._losses: list[Tensor] = []
        self._loss_batches: list[tuple[int, int, int]] = []  # each loss's (global step, epoch, batch_idx)
        self._lr: Tensor | None = None  # per group, on the sampled step
        self._records.clear()
        self._grad_sq: Tensor | None = None  # per tracked tensor
        self._param_sq: Tensor | None = None
        self._update_sq: Tensor | None = None
        self._before: list[tuple[int, Tensor, Tensor]] = []  # (group, copy, live)
        self._alive: dict[int, Tensor] = {}
        self._rows.clear()
        self._calls.clear()
        self._input_free.clear()
        self._saturation: dict[int, Tensor] = {}
        self._nonfinite: dict[int, tuple[list[Tensor], list[Tensor]]] = {}
        self._act_sampled = 0
        self._validations: list[tuple[int, Tensor, Tensor, Tensor]] = []  # epoch, val, train, [se, count]
        self._epoch_loss: list[Tensor] = [] if not hasattr(self, "_epoch_loss") else self._epoch_loss

    @property
    @override
    def state_key(self) -> str:
        # Lightning reads it at every hook call of every step (its profiler's label): built once per prefix
        cached = self.__dict__.get("_state_key")
        if cached is None or cached[0] != self.prefix:
            cached = self._state_key = (self.prefix, self._generate_state_key(prefix=self.prefix))
        return cached[1]

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._reset_run_state()
        self._interval_start = trainer.global_step
        self._params = tracked_parameters(trainer.optimizers)
        self._index = {id(p): i for i, p in enumerate(self._params)}
        self._group_names, index = param_groups_of(pl_module, self._params, self.group_by)
        device = pl_module.device
        self._group_of = torch.tensor(index, dtype=torch.long, device=device)
        self._param_group = list(index)
        self._group_numel = [0] * len(self._group_names)
        for param, g in zip(self._params, index):
            self._group_numel[g] += param.numel()
        self._families = group_families(trainer.optimizers, self._index, index, len(self._group_names))
        self._planned_steps = planned_steps(trainer)
        self._param_start = squared_norm(self._params, device)
        self._shard_group = flat_shard_group(trainer)
        self._relu, self._saturating, self._leaves, self._row_layers = watched_modules(pl_module)
        self._unrectified = unrectified_layers(pl_module)
        self._rows = RowLiveness([module for _, module in self._row_layers])
        self._calls = FunctionalSaturation([module for _, module in self._row_layers])
        self._init_calls = FunctionalSaturation([module for _, module in self._row_layers])
        self._sparse_groups = sparse_groups(pl_module, self._params, index, self._group_names)
        self._model_numel = sum(p.numel() for p in pl_module.parameters())
        self._optimizers = [type(unwrap_optimizer(o)).__name__ for o in trainer.optimizers]
        self._rows_start = RowLiveness([module for _, module in self._row_layers])
        self._start_pending = trainer.global_step == 0  # a resumed run has no step 0 to measure
        if self._start_pending:  # the schedule's starting LR, part of the peak a collapse is measured from (a
            # decay stepped per batch may be 100x down by the first check)
            lrs = [float(g["lr"]) for o in trainer.optimizers for g in unwrap_optimizer(o).param_groups]
            self._history.start_lr = max(lrs, default=math.nan)
        self._automatic = pl_module.automatic_optimization
        pipeline = next((c for c in callback_list(trainer) if isinstance(c, InputPipelineMonitor)), None)
        self._clock.follow(pipeline)
        if self._repair is not None:
            self._repair.on_train_start(trainer, pl_module, self)

    @override
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._epoch_loss = []
        self._clock.epoch_start()

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._clock.batch_start(self._clock.now())
        step = self._step_at_batch_start = trainer.global_step
        sampled = step % self.check_every_n_steps >= self.check_every_n_steps - self.activation_samples
        if not (sampled or self._start_pending or step == 0):
            return  # between the sampled batches: nothing to attach
        if step == 0 and self.activation_samples and not self._init_measured:
            self._attach_init_hooks()
        if sampled and not self._handles:
            self._input_free.rows = batch_samples(batch)
            self._attach_hooks()
        if self._start_pending and not self._start_handles:
            self._attach_start_hooks()

    @override
    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: Tensor) -> None:
        # the saturation modes watch the forward only (manual optimization may forward again: left on)
        if self._sampling and pl_module.automatic_optimization:
            for mode in (self._input_free, self._calls, self._init_calls, self._calls):  # innermost first
                mode.stop()

    @override
    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Optimizer
    ) -> None:
        step = self._step_at_batch_start
        if step is None or not self._automatic:  # manual optimization may step more than once per batch
            step = trainer.global_step
        if self._handles:  # a sampled batch: which weight rows got a gradient
            self._rows.record_gradients()
        norms = self._record_step_gradient(step, optimizer)
        if self._start_handles:
            self._rows_start.record_gradients()
        if (step + 1) % self.check_every_n_steps or not self._params:
            return
        # The sampled step: per-tensor gradient and parameter norms, and a copy of the parameters.
        device = self._params[0].device
        entries = [
            (self._index[id(p)], p)
            for group in optimizer.param_groups
            for p in group["params"]
            if id(p) in self._index
        ]
        if self._grad_sq is None:
            self._grad_sq = torch.zeros(len(self._params), device=device)
        with_grad = [(i, p) for i, p in entries if p.grad is not None]
        with torch.no_grad():
            if with_grad:
                grads: list[Tensor] = [p.grad for _, p in with_grad]  # type: ignore[misc]
                if len(norms) != len(grads):  # the step's record holds them, unless not recorded
                    norms = list(torch._foreach_norm(grads, 2.0))
                squares = torch.stack(norms).float().to(device).square()
                index = torch.tensor([i for i, _ in with_grad], device=device)
                self._grad_sq.index_copy_(0, index, squares)
                if STEP_POWERS.lookup(grads, 2.0, step) is None:
                    STEP_POWERS.publish(grads, 2.0, step, {None: squares.sum()})
            live = [p for _, p in entries]
            groups = len(self._group_names)
            if live:  # the weights before the step: their norms are taken with the update's, at batch end
                plain = all(type(p) in (Tensor, nn.Parameter) for p in live)  # DTensors: one by one
                copies = torch._foreach_mul(live, 1.0) if plain else [p.clone() for p in live]
                self._before += [(self._param_group[i], c, p) for (i, _), c, p in zip(entries, copies, live)]
        self._lr = group_lrs(optimizer, self._index, self._param_group, groups, device, self._lr)

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._sampling:
            self._detach_hooks()
        step = trainer.global_step
        start = self._step_at_batch_start
        did_step = start is None or step != start  # _trainer.stepped, the step read once
        if self._start_handles and did_step:
            self._detach_start_hooks()
        position = step - self._interval_start - 1
        if did_step and 0 <= position < self.check_every_n_steps:
            self._records.inputs(position, batch, batch_idx)
        if type(outputs) is dict:  # Lightning's own output (automatic optimization): no ABC check
            loss = outputs.get("loss")
            loss = loss if isinstance(loss, Tensor) else None
        else:
            loss = loss_of(outputs)
        if loss is not None:
            if loss.requires_grad:  # Lightning's is detached already: no op
                loss = loss.detach()
            if loss.dtype != torch.float32:
                loss = loss.float()
            self._losses.append(loss)
            self._loss_batches.append((step if start is None else start, trainer.current_epoch, batch_idx))
            self._epoch_loss.append(loss)
        if not did_step:
            self._clock.batch_end(self._clock.now())
            return
        if self._before:  # the sampled step's weights and change, per group (shards reduced: norms.py)
            copies = [c for _, c, _ in self._before]
            with torch.no_grad():
                diffs = torch._foreach_sub([p for _, _, p in self._before], copies)
                self._param_sq, self._update_sq = weight_and_update_powers(
                    copies, diffs, [g for g, _, _ in self._before], len(self._group_names), self._shard_group
                )
            self._before = []
        if step % self.check_every_n_steps == 0:
            self._clock.pause(self._clock.now())  # the check's own time is neither step nor wait
            self._check(trainer, pl_module)
            self._clock.resume(self._clock.now())
        self._clock.batch_end(self._clock.now())

    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._clock.pause(self._clock.now())
        self._val_batches.reset()

    @override
    def on_validation_batch_end(
        self,
        trainer: pl.Trainer,
        pl_module: pl.LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        running = logged_running_mean(trainer, self.val_monitor)
        self._val_batches.batch_end(running, outputs, batch, self.val_monitor)

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._clock.resume(self._clock.now())
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        value = trainer.callback_metrics.get(self.val_monitor)
        if not isinstance(value, Tensor):
            return
        device = pl_module.device
        train = torch.stack(self._epoch_loss).mean() if self._epoch_loss else torch.tensor(math.nan)
        error = validation_error(self._val_batches.values, self._val_batches.sizes, device)
        self._val_batches.reset()
        value = value.detach().float().to(device)
        self._validations.append((trainer.current_epoch, value, train.to(device), error))
        if self._repair is not None:
            self._repair.on_validation_end(trainer, pl_module)

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._detach_hooks()
        if self._losses or self._validations:
            self._check(trainer, pl_module)  # the tail of the run, and the last validations
        if self._repair is not None:
            self._repair.on_train_end(trainer, pl_module)
        if self.print_report and trainer.is_global_zero:
            self.report(print_table=True)

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._detach_hooks()
        self._detach_start_hooks()
        self._before = []
        if self._repair is not None:
            self._repair.teardown()

    @property
    def repairs(self) -> list[Any]:
        """The ``RepairEvent`` of every repair made (``repair=True``), oldest first; empty otherwise."""
        return self._repair.events if self._repair is not None else []

    def to_dict(self) -> dict[str, Any]:
        """The findings and how many checks ran (with ``repair``, the repairs), as plain Python
        (JSON-serialisable)."""
        repairs = {"repairs": [asdict(e) for e in self.repairs]} if self._repair is not None else {}
        return {"checks": self.checks, "findings": [asdict(f) for f in self.findings], **repairs}

    def to_json(self, **kwargs: Any) -> str:
        """:meth:`to_dict` as JSON (``kwargs`` go to ``json.dumps``); non-finite numbers become strings."""
        return json.dumps(jsonable(self.to_dict(), nonfinite_as_str=True), **kwargs)

    def report(self, print_table: bool = True) -> Any:
        """Print a ``rich`` table of the findings (problem, step, epoch, evidence, advice), or return it."""
        return findings_table(self.findings, self.checks, print_table)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {
            "findings": [f.to_dict() for f in self.findings],
            "checks": self.checks,
            "history": self._history.to_dict(),
            "active": sorted(self._active),
            "warned": sorted(self._warned),
            **({"repair": self._repair.state_dict()} if self._repair is not None else {}),
        }

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.findings = [Finding(**f) for f in state_dict.get("findings", [])]
        self.checks = int(state_dict.get("checks", 0))
        self._history = History.from_dict(state_dict.get("history", {}))
        self._active = set(state_dict.get("active", []))
        self._warned = set(state_dict.get("warned", []))
        if self._repair is not None:
            self._repair.load_state_dict(state_dict.get("repair", {}))

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_handles": [], "_before": [], "_init_handles": [], "_start_handles": []}

    def _watched(self) -> tuple[Any, Any, Any, Any]:
        return self._relu, self._saturating, self._leaves, self._row_layers

    def _attach_hooks(self) -> None:
        calls = self._calls if self._functional else None
        hooks = ActivationHooks(self._alive, self._saturation, self._nonfinite, self._rows, calls)
        self._handles += hooks.attach(self._watched())
        if calls is not None:
            calls.start()
        self._input_free.start()  # innermost: pushed last, popped first
        self._act_sampled += 1
        self._sampling = True

    def _held_by_no_optimizer(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> dict[str, int]:
        """Per module, the elements of its parameters that get a gradient (``.grad`` set: host only) though
        no optimizer holds them now (groups added since the start count): no step can move them."""
        held = {id(p) for p in tracked_parameters(trainer.optimizers)}
        found: dict[str, int] = {}
        for name, param in pl_module.named_parameters():
            if param.requires_grad and param.grad is not None and id(param) not in held:
                module = name.rpartition(".")[0] or name
                found[module] = found.get(module, 0) + param.numel()
        return found

    def _record_step_gradient(self, step: int, optimizer: Optimizer) -> list[Tensor]:
        """This step's gradient norms (its optimizer's tracked parameters), kept on the device: outlier
        batches are told from their gradient spikes at the check. Returns the norms, one per tensor."""
        position = step - self._interval_start
        if not 0 <= position < self.check_every_n_steps:
            return []
        groups = optimizer.param_groups
        cached = self._step_params.get(id(optimizer))
        if cached is None or cached[0] != len(groups):  # a group added since: look the parameters up again
            params = [p for g in groups for p in g["params"] if id(p) in self._index]
            cached = self._step_params[id(optimizer)] = (len(groups), params)
        return self._records.gradients(position, [p.grad for p in cached[1] if p.grad is not None])

    def _attach_init_hooks(self) -> None:
        """Saturation hooks on the run's first batch only (the state at initialisation)."""
        hooks = ActivationHooks(saturation=self._init_saturation, rows=None, calls=self._init_calls)
        self._init_handles += hooks.attach(self._watched())
        self._init_handles += self._init_calls.attach()  # the layers' outputs (no RowLiveness here)
        self._init_calls.start()
        self._init_measured = True
        self._sampling = True

    def _detach_init_hooks(self) -> None:
        if self._init_handles:  # the first batch measured: did the model call a sigmoid/tanh function?
            self._functional = self._init_calls.called
        self._init_calls.stop()  # pushed after the sampled batches' mode: popped first
        for handle in self._init_handles:
            handle.remove()
        self._init_handles = []

    def _detach_hooks(self) -> None:
        self._input_free.stop()
        self._detach_init_hooks()
        self._calls.stop()
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._sampling = False

    def _attach_start_hooks(self) -> None:
        hooks = ActivationHooks(alive=self._alive_start, rows=self._rows_start)
        self._start_handles += hooks.attach(self._watched())

    def _detach_start_hooks(self) -> None:
        for handle in self._start_handles:
            handle.remove()
        self._start_handles = []
        self._start_pending = False

    def _pack(self, trainer: pl.Trainer, device: torch.device) -> tuple[Tensor, dict[str, slice]]:
        """Everything the check needs, as one float64 vector with a layout identical on every rank."""
        packer = Packer(device)
        losses = loss_vector(self._losses, device)  # one stack of the interval's losses
        steps = [start - self._interval_start for start, _, _ in self._loss_batches]  # within the interval
        packer.add_block(LOSS_PIECES, loss_statistics(losses, steps, device))
        packer.add("loss_n", float(len(self._losses)))  # a host value: no device op
        packer.add("param_start", self._param_start)
        groups = len(self._group_names)
        sampled = self._grad_sq is not None and self._group_of is not None
        packer.add("grad_sampled", float(sampled))
        grad = torch.zeros(groups, device=device)
        if sampled and self._grad_sq is not None and self._group_of is not None:
            grad.index_add_(0, self._group_of, self._grad_sq.to(device))
        packer.add("grad", grad)
        zeros = torch.zeros(groups, device=device)
        param = self._param_sq if sampled and self._param_sq is not None else zeros
        update = self._update_sq if sampled and self._update_sq is not None else zeros
        packer.add("param", param)
        packer.add("update", update)
        packer.add("update_ratio", update_ratios(param.to(device), update.to(device)))
        packer.add("lr", self._lr if self._lr is not None else [-math.inf] * groups)
        packer.add("act_sampled", float(self._act_sampled))
        relu, saturating, rows = len(self._relu), len(self._saturating), len(self._row_layers)
        # the ReLUs' and the Linear/Conv rows' dead fractions in one segment mean
        alive = {**self._alive, **{relu + i: v for i, v in self._rows.alive.items()}}
        packer.add_block((("dead", relu), ("dead_rows", rows)), dead_of(alive, relu + rows, device))
        packer.add("saturated", means_by_index(self._saturation, saturating, 2, device).reshape(-1))
        packer.add("nonfinite", nonfinite_counts(self._nonfinite, len(self._leaves), device))
        packer.add("saturated_calls", self._calls.pack(device))
        packer.add("input_free", self._input_free.pack(device))
        packer.add("step_records", self._records.pack(self.check_every_n_steps, device))
        if self._first_pack or self._start_pending:  # the run's first batch, read by its first check only
            init = means_by_index(self._init_saturation, saturating, 2, device)
            packer.add("saturated_init", init.reshape(-1))
            packer.add("saturated_init_calls", self._init_calls.pack(device))
            packer.add("dead_start", dead_of(self._alive_start, len(self._relu), device))
            packer.add("dead_rows_start", self._rows_start.dead_fractions(device))
        self._first_pack = False  # the same on every rank: the layout too
        self._init_saturation = {}
        self._init_calls.clear()
        if not self._start_pending:  # measured once: the first check reads it
            self._alive_start = {}
            self._rows_start.clear()
        packer.add("wait", self._clock.take())
        packer.add("validations", validation_rows(self._validations, device))
        return packer.vector(), packer.layout

    def _check(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        device = pl_module.device
        packed, layout = self._pack(trainer, device)
        gathered = all_gather_stacked(trainer, packed)
        rows = gathered.tolist()  # sync: once per check
        data = combine(
            rows,
            layout,
            trainer.global_step,
            trainer.current_epoch,
            (self._group_names, self._group_numel, self._families),
            (
                [n for n, _ in self._relu],
                [n for n, _ in self._saturating],
                [n for n, _ in self._leaves],
                [n for n, _ in self._row_layers],
            ),
            (self._clock.source, self._planned_steps),
        )
        data.sparse_groups = self._sparse_groups
        data.model_numel = self._model_numel
        data.unstepped_params = self._held_by_no_optimizer(trainer, pl_module)
        for dead in (data.dead_rows, data.dead_rows_start):
            for name in self._unrectified & set(dead):
                del dead[name]
        data.optimizers = self._optimizers
        data.plateau_maximises_loss = any(
            isinstance(c.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)
            and c.monitor == self.val_monitor
            and c.scheduler.mode == "max"
            for c in trainer.lr_scheduler_configs
        )
        where = self._loss_batches
        if data.first_nonfinite_step is not None and data.first_nonfinite_step < len(where):
            data.first_nonfinite_step = where[data.first_nonfinite_step][0]
        data.nonfinite_batch_steps = [self._interval_start + k for k in data.nonfinite_batch_steps]
        self._clear_interval()
        self._interval_start = trainer.global_step
        self.checks += 1
        decisions = decide(data, self._history, self.thresholds)
        self._active, new = settle(
            self._active, set(decisions), self._history, int(self.thresholds["persist_checks"])
        )
        metrics = {f"{self.prefix}health/{p}": float(p in decisions) for p in PROBLEMS}
        emit(trainer, pl_module, metrics, own_cadence=True)
        known = len(self.findings)
        for problem in new:
            decision = decisions[problem]
            evidence, advice = decision
            finding = Finding(problem, trainer.global_step, trainer.current_epoch, evidence, advice)
            found = (
                decision.diagnosis
                if isinstance(decision, Diagnosed)
                else plain_diagnosis(problem, trainer.global_step, evidence, advice)
            )
            finding.headline, finding.causes, finding.cause = found.headline, found.causes, found.cause
            finding.action, finding.tell_apart = found.action, found.tell_apart
            self.findings.append(finding)
            self._act(finding)
        if self._repair is not None:  # after every finding of the check: identical on all ranks
            self._repair.after_check(trainer, pl_module, self, set(decisions), self.findings[known:], where)

    def _act(self, finding: Finding) -> None:
        message = f"HealthMonitor: {finding.summary()}"
        if self.on_finding == "raise":
            raise RuntimeError(message)
        if callable(self.on_finding):
            self.on_finding(finding)
            return
        if finding.problem not in self._warned:
            self._warned.add(finding.problem)
            rank_zero_warn(message, category=UserWarning)
