"""A real-Trainer trial fit on a copy of the model (:func:`trial_fit`), for what ``training_step`` without a
Trainer cannot show (``docs/guides/harness.md``)."""

from __future__ import annotations

import functools
import itertools
import math
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.utils.hooks import RemovableHandle
from typing_extensions import override

from lightning_recipes._loss_output import loss_of
from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.harness.batches import batch_size_of
from lightning_recipes.harness.forward_capture import first_tensor
from lightning_recipes.harness.harness import Harness
from lightning_recipes.harness.isolation import CannotRunOnCopy, preserved_rng, quiet_trial
from lightning_recipes.harness.loss_calls import LossRecorder
from lightning_recipes.harness.silent_trainer import silent_trainer

__all__ = ["StepRecord", "TrialFit", "ValidationView", "trial_fit"]

_INPUT_DEPTH = 2  # module inputs kept for the root, its children and grandchildren


@dataclass
class StepRecord:
    """One ``optimizer.step()`` of a trial fit, over that optimizer's parameters: the ``optimizer`` index, the
    ``batch``, the ``backwards`` that reached it since its last step; norms of the gradients it used
    (``grad_norm``, ``|g|``), of what those backward passes contributed (``contribution_norm``, ``|c|``), of
    ``g - c`` (``residual_norm``) and of the previous step's ``g_prev`` (``previous_norm``); ``carried``
    (``<g - c, g_prev> / |g_prev|^2``: 1 never cleared, 0 cleared), ``carried_residual`` (``|g - c - g_prev| /
    |g_prev|``), ``scale`` (``<g, c> / |c|^2``: < 1 clipped or unscaled); the parameters it ``changed``, those
    ``with_grad``, and its largest ``lr``.
    """

    optimizer: int
    batch: int
    backwards: int
    grad_norm: float
    contribution_norm: float
    residual_norm: float
    previous_norm: float
    carried: float
    carried_residual: float
    scale: float
    changed: int
    with_grad: int
    lr: float


@dataclass
class _ValView:
    """What one validation batch saw."""

    returned: float | None = None
    loss_call: float | None = None
    loss_call_name: str = ""
    modules: set[str] = field(default_factory=set)
    inputs: dict[str, Tensor] = field(default_factory=dict)


def _loss_scale(model: pl.LightningModule) -> float:
    """The AMP loss scale (16-mixed's ``GradScaler``) of the backward passes since the last step, else 1.0:
    the recorded contributions are scaled, the step sees them unscaled."""
    plugin = getattr(getattr(model, "_trainer", None), "precision_plugin", None)
    scaler = getattr(plugin, "scaler", None)
    if scaler is None or not scaler.is_enabled():
        return 1.0
    return float(scaler.get_scale())  # sync: once per trial step, on a 16-mixed run only


class TrialRecorder(Callback):
    """Hooks on a copy of the model (and, from ``on_train_start``, on its optimizers) that record a trial fit;
    about four copies of the trainable parameters, one host sync per step."""

    def __init__(self, model: pl.LightningModule, should_stop: Callable[[], bool], fit_ratio: float) -> None:
        self.model = model
        self.should_stop = should_stop
        self.fit_ratio = fit_ratio
        self.names: dict[int, str] = {}
        self.params: dict[int, Tensor] = {}
        self.initial: dict[int, Tensor] = {}
        self.trained: dict[int, Tensor] = {}
        self.val_weights: dict[int, Tensor] = {}
        self.handles: list[RemovableHandle] = []
        self.hooked: set[int] = set()
        self._grad_hooks: list[RemovableHandle] = []
        self.owner: dict[int, int] = {}
        self.opt_params: list[list[Tensor]] = []
        self.contrib: dict[int, Tensor] = {}
        self.prev_grad: dict[int, Tensor] = {}
        self.before: dict[int, list[Tensor]] = {}
        self.reached: dict[int, set[int]] = {}
        self.received: set[int] = set()
        self.with_grad_at_lr: set[int] = set()  # non-zero grad at a step with lr > 0
        self.ever_changed: set[int] = set()
        self.epoch_end: dict[int, Tensor] = {}  # the trained parameters when an epoch ended
        self.rewritten: set[int] = set()  # trained parameters changed between epochs, outside any step
        self.lr_positive = False
        self.backward_id = 0
        self.steps: list[StepRecord] = []
        self.train_losses: list[float] = []
        self.batch_index = -1
        self._batch_backward_losses: list[Tensor] = []
        self.train_modules: set[str] = set()
        self.train_inputs: dict[str, Tensor] = {}  # the last training batch's
        self.first_train_inputs: dict[str, Tensor] = {}
        self.phase: str | None = None
        self.val: dict[str, _ValView] = {}
        self.logged: dict[str, dict[str, float]] = {}
        self._metrics_before_val: dict[str, float] = {}
        self.stopped = ""
        self.optimizer_names: list[str] = []
        self.min_batches = 12
        self._ready = False
        self.batch_statistics = False  # a last validation with BatchNorm normalising by the batch

    def _set_up(self) -> None:
        """Snapshot and hook the model once its own hooks may have added modules (an averaged copy): at the
        sanity check, else at ``on_train_start``."""
        if self._ready:
            return
        self._ready = True
        self.names = {id(p): name for name, p in self.model.named_parameters()}
        self.params = {id(p): p for _, p in self.model.named_parameters()}
        self.initial = self._snapshot()
        self.min_batches = _min_batches(self.model)
        self._hook_trainable()
        for name, module in self.model.named_modules():
            depth = 0 if name == "" else name.count(".") + 1
            self.handles.append(
                module.register_forward_pre_hook(functools.partial(self._module_ran, name, depth))
            )

    def _hook_trainable(self) -> None:
        """Hook the parameters that require grad (again when more do: ones unfrozen in training). One backward
        counter over them all, registered before their gradient hooks so that it fires first on each."""
        if not (new := {pid for pid, p in self.params.items() if p.requires_grad} - self.hooked):
            return
        self.hooked |= new
        for handle in self._grad_hooks:
            handle.remove()
        hooked = [self.params[pid] for pid in self.hooked]
        self._grad_hooks = [
            torch.autograd.graph.register_multi_grad_hook(hooked, self._new_backward, mode="any")
        ]
        self._grad_hooks += [p.register_hook(functools.partial(self._contribution, id(p))) for p in hooked]

    def _snapshot(self) -> dict[int, Tensor]:
        return {pid: p.detach().clone() for pid, p in self.params.items()}

    def remove(self) -> None:
        for handle in self.handles + self._grad_hooks:
            handle.remove()
        self.handles.clear()
        self._grad_hooks.clear()

    def _new_backward(self, _grad: Any) -> None:
        self.backward_id += 1

    def _contribution(self, pid: int, grad: Tensor) -> None:
        grad = grad.detach().to_dense() if grad.is_sparse else grad.detach()
        held = self.contrib.get(pid)
        self.contrib[pid] = grad.clone() if held is None else held.add_(grad)
        self.received.add(pid)
        self.reached.setdefault(self.owner.get(pid, -1), set()).add(self.backward_id)

    def _module_ran(self, name: str, depth: int, _module: nn.Module, args: Any) -> None:
        if self.phase is None:
            return
        if self.phase == "train":
            modules, inputs = self.train_modules, self.train_inputs
        else:
            view = self.val[self.phase]
            modules, inputs = view.modules, view.inputs
        modules.add(name)
        if depth <= _INPUT_DEPTH and name not in inputs:
            tensor = first_tensor(args[0]) if args else None
            if tensor is not None and tensor.is_floating_point():
                inputs[name] = tensor.detach().clone()

    def wrap_validation_step(self, step: Callable[..., Any]) -> Callable[..., Any]:
        """``step`` (the copy's ``validation_step``) recording its loss, modules and inputs: phase
        ``"before"`` during Lightning's sanity check, ``"after"`` later."""

        @functools.wraps(step)  # Lightning reads its signature (whether to pass `dataloader_idx`)
        def validation_step(*args: Any, **kwargs: Any) -> Any:
            phase = "before" if self.model.trainer.sanity_checking else "after"
            phase = "batch_statistics" if self.batch_statistics else phase
            view = self.val.setdefault(phase, _ValView())
            if phase == "after":  # the weights validation sees (an averaging callback swaps them in first)
                self.val_weights = self._snapshot()
            self.phase = phase
            try:
                with LossRecorder() as recorder:
                    output = step(*args, **kwargs)
            finally:
                self.phase = None
            loss = loss_of(output)
            if loss is None and isinstance(output, dict):
                loss = next(
                    (v for k, v in output.items() if "loss" in str(k) and isinstance(v, Tensor)), None
                )
            if loss is not None and loss.numel() == 1:
                view.returned = float(loss.detach())  # sync: once per validation batch
            call = next((c for c in recorder.calls if c.loss is not None and c.loss.numel() == 1), None)
            if call is not None and call.loss is not None:
                view.loss_call = float(call.loss.detach())  # sync: once per validation batch
                view.loss_call_name = call.function
            return output

        return validation_step

    @override
    def on_sanity_check_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._set_up()

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._set_up()
        for index, optimizer in enumerate(trainer.optimizers):
            self.optimizer_names.append(type(optimizer).__name__)
            params = [p for group in optimizer.param_groups for p in group["params"]]
            self.opt_params.append(params)
            for p in params:
                self.owner.setdefault(id(p), index)
            self.handles.append(optimizer.register_step_pre_hook(functools.partial(self._pre_step, index)))
            self.handles.append(optimizer.register_step_post_hook(functools.partial(self._post_step, index)))
        # contributions that arrived before the optimizers existed belong to no optimizer yet
        self.reached = {self.owner.get(pid, -1): set() for pid in self.owner}

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, idx: int
    ) -> None:
        self.batch_index += 1
        self._batch_backward_losses = []
        self._hook_trainable()
        for pid, value in self.epoch_end.items():  # the epoch hooks between have run
            if not torch.equal(self.params[pid].detach(), value):
                self.rewritten.add(pid)
        self.epoch_end = {}
        if self.batch_index == 1:
            self.first_train_inputs = self.train_inputs
        self.train_inputs = {}
        self.phase = "train"

    @override
    def on_before_backward(self, trainer: pl.Trainer, pl_module: pl.LightningModule, loss: Tensor) -> None:
        if loss.numel() == 1:
            self._batch_backward_losses.append(loss.detach().reshape(()))

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, idx: int
    ) -> None:
        self.phase = None
        loss = loss_of(outputs)
        if loss is not None and loss.numel() == 1:
            value = float(loss.detach())  # sync: once per trial batch
        elif self._batch_backward_losses:
            value = float(torch.stack(self._batch_backward_losses).sum())  # sync: once per trial batch
        else:
            value = math.nan
        self.train_losses.append(value)
        if self.should_stop():
            self.stopped = "budget"
            trainer.should_stop = True
        elif self._fitted():
            self.stopped = "fitted"
            trainer.should_stop = True

    def _fitted(self) -> bool:
        losses = [v for v in self.train_losses if math.isfinite(v)]
        first = self.train_losses[0] if self.train_losses else math.nan
        if len(losses) < self.min_batches or not math.isfinite(first):
            return False
        return all(first - v >= self.fit_ratio * abs(first) for v in losses[-2:])

    @override
    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.epoch_end = {pid: self.params[pid].detach().clone() for pid in self.owner if pid in self.params}

    @override
    def on_sanity_check_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.logged["before"] = _scalars(trainer.callback_metrics)

    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        if self.batch_statistics:  # as in training, and the same batch: BatchNorm's running statistics apart
            for module in pl_module.modules():
                if isinstance(module, nn.modules.batchnorm._BatchNorm):
                    module.train()
            return
        self._metrics_before_val = _scalars(trainer.callback_metrics)  # what training logged
        if not self.trained:  # before anything swaps weights in
            self.trained = self._snapshot()

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:  # what validation logged: new keys, or keys it changed
            metrics = _scalars(trainer.callback_metrics).items()
            phase = "batch_statistics" if self.batch_statistics else "after"
            self.logged[phase] = {k: v for k, v in metrics if self._metrics_before_val.get(k) != v}

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.trained:
            self.trained = self._snapshot()

    def _pre_step(self, index: int, optimizer: Optimizer, args: Any, kwargs: Any) -> None:
        self.before[index] = [p.detach().clone() for p in self.opt_params[index]]

    def _post_step(self, index: int, optimizer: Optimizer, args: Any, kwargs: Any) -> None:
        params = self.opt_params[index]
        before = self.before.pop(index, None)
        lrs = {
            id(p): float(group.get("lr", 0.0)) for group in optimizer.param_groups for p in group["params"]
        }
        sums = []
        scale = _loss_scale(self.model)
        for i, p in enumerate(params):
            g = p.grad.detach() if p.grad is not None else torch.zeros_like(p)
            g = g.to_dense() if g.is_sparse else g
            c = self.contrib.pop(id(p), None)
            c = torch.zeros_like(g) if c is None else (c if scale == 1.0 else c / scale)
            prev = self.prev_grad.get(id(p))
            prev = torch.zeros_like(g) if prev is None else prev
            r = g - c
            changed = torch.zeros((), device=g.device) if before is None else (p.detach() != before[i]).any()
            g64, c64, r64, prev64 = g.double(), c.double(), r.double(), prev.double()
            norms = [t.square().sum() for t in (g64, c64, r64, prev64)]  # |g|^2, |c|^2, |r|^2, |g_prev|^2
            dots = [(r64 * prev64).sum(), (r - prev).double().square().sum(), (g64 * c64).sum()]
            sums.append(torch.stack([*norms, *dots, changed.double(), (g != 0).any().double()]))
            self.prev_grad[id(p)] = g.clone()
        rows = torch.stack(sums).cpu().tolist() if sums else []  # sync: once per trial step
        totals = [sum(row[k] for row in rows) for k in range(7)]
        g2, c2, r2, p2, rp, rmp2, gc = totals
        for p, row in zip(params, rows):
            if row[8] and lrs.get(id(p), 0.0) > 0:
                self.with_grad_at_lr.add(id(p))
            if row[7]:
                self.ever_changed.add(id(p))
        lr = max(lrs.values(), default=0.0)
        self.lr_positive = self.lr_positive or lr > 0
        self.steps.append(
            StepRecord(
                optimizer=index,
                batch=self.batch_index,
                backwards=len(self.reached.get(index, ())),
                grad_norm=math.sqrt(g2),
                contribution_norm=math.sqrt(c2),
                residual_norm=math.sqrt(r2),
                previous_norm=math.sqrt(p2),
                carried=rp / p2 if p2 > 0 else 0.0,
                carried_residual=math.sqrt(rmp2 / p2) if p2 > 0 else math.inf,
                scale=gc / c2 if c2 > 0 else 0.0,
                changed=int(sum(row[7] for row in rows)),
                with_grad=int(sum(row[8] for row in rows)),
                lr=lr,
            )
        )
        self.reached[index] = set()

    def param_names(self, pids: set[int] | list[int]) -> list[str]:
        return sorted(self.names[pid] for pid in pids if pid in self.names)


def batchnorm_momenta(model: nn.Module, modules: set[str] | None = None) -> list[float]:
    """The momenta of the BatchNorm layers (those named in ``modules`` when given) that track statistics."""
    return [
        float(m.momentum)
        for name, m in model.named_modules()
        if isinstance(m, nn.modules.batchnorm._BatchNorm)
        and m.track_running_stats
        and m.momentum is not None
        and (modules is None or name in modules)
    ]


def _min_batches(model: nn.Module) -> int:
    """Batches before a trial may stop early: 12, or until every BatchNorm layer's running statistics hold at
    most 10 % of their initial values (``(1 - momentum) ** n <= 0.1``)."""
    momenta = [m for m in batchnorm_momenta(model) if 0 < m < 1]
    return max([12] + [math.ceil(math.log(0.1) / math.log(1 - m)) for m in momenta])


def _scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The scalar metrics of ``trainer.callback_metrics`` as floats (one host sync each)."""
    return {
        str(k): float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) or (isinstance(v, Tensor) and v.numel() == 1)
    }


_CACHE: weakref.WeakKeyDictionary[Harness, dict[tuple[int, int], TrialFit]] = weakref.WeakKeyDictionary()


@dataclass
class ValidationView:
    """What ``validation_step`` saw on the training batch, before and after the fit: its loss (``None``: none
    found) read from ``source`` (``"returned"``, ``"logged 'val_loss'"``, ``"loss call cross_entropy"``); the
    metrics ``logged`` after the fit (new or changed); ``val_only_modules`` (with parameters no
    ``training_step`` ran); ``stale`` parameters (still at their start value though training changed them or
    never ran them); ``averaged`` ones (unlike start and trained), ``lag`` behind (``|w_val - w_trained| /
    |w_start - w_trained|``); the first module both paths ran (``input_module``) and its ``input_difference``
    (``|x_val - x_train| / |x_train|``) unless ``input_varies`` during training; the ``batchnorm_lag``
    (share of the initial values left in the running statistics of the BatchNorm layers validation ran), and
    the loss ``after_batch_statistics``: validated again with BatchNorm normalising by the batch, as training.
    """

    before: float | None = None
    after: float | None = None
    source: str = ""
    logged: dict[str, float] = field(default_factory=dict)
    val_only_modules: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    averaged: list[str] = field(default_factory=list)
    lag: float | None = None
    input_module: str = ""
    input_difference: float | None = None
    input_varies: bool = False
    batchnorm_lag: float = 0.0
    after_batch_statistics: float | None = None


@dataclass
class TrialFit:
    """What :func:`trial_fit` recorded: ``automatic`` (``automatic_optimization``), the ``optimizers``' class
    names, every ``steps`` (:class:`StepRecord`), ``train_losses`` per batch (returned, else the sum passed to
    ``manual_backward``, else ``nan``), the parameters that ``received_grad``, those ``not_in_optimizer``,
    those ``never_changed`` though they had a gradient at a step with ``lr > 0``, those ``rewritten`` between
    two epochs (``epochs``: repeats of ``steps / epochs`` batches) outside any step, ``lr_positive``,
    ``samples``, why it ``stopped`` (``"budget"``, ``"fitted"``, ``""``), the ``validation`` view (``None``:
    no ``validation_step``) and the wall ``seconds``."""

    automatic: bool
    optimizers: list[str]
    steps: list[StepRecord]
    train_losses: list[float]
    received_grad: list[str]
    not_in_optimizer: list[str]
    never_changed: list[str]
    rewritten: list[str]
    lr_positive: bool
    samples: int | None
    stopped: str
    validation: ValidationView | None
    seconds: float


def trial_fit(
    harness: Harness,
    *,
    steps: int = 30,
    max_samples: int = 64,
    fit_ratio: float = 0.5,
    epochs: int = 1,
    should_stop: Callable[[], bool] | None = None,
    cache: bool = True,
    validate: bool = True,
) -> TrialFit:
    """Fit a deep copy of ``harness.model`` with a real, silent ``Trainer`` on one fixed training batch (its
    first ``max_samples`` samples) ``steps`` times, validated before and after on the same batch
    (``docs/guides/harness.md``). Stops early when ``should_stop()`` or the loss fell by ``fit_ratio``;
    ``cache``: reuse a finished trial of the same harness and sizes; ``validate=False``: the training loop
    alone (not cached). ``CannotRunOnCopy`` without data, an uncopyable model, or in a multi-process run.

    Example:
        >>> from lightning_recipes.harness import Harness
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> fit = trial_fit(Harness(TinyClassifier(lr=0.5), random_classification_loader()), steps=10)
        >>> len(fit.steps), fit.steps[0].backwards, fit.train_losses[-1] < fit.train_losses[0]
        (10, 1, True)
        >>> fit.validation.source, fit.validation.after < fit.validation.before
        ("logged 'val_loss'", True)
    """
    check_int("steps", steps, minimum=1)
    check_int("max_samples", max_samples, minimum=1)
    check_int("epochs", epochs, minimum=1)
    check_in_range("fit_ratio", fit_ratio, 0, 1, low_open=True)
    key, cache = (steps, max_samples), cache and validate and epochs == 1
    cached = _CACHE.get(harness, {}).get(key) if cache else None
    if cached is not None:
        return cached
    trainer = harness.trainer
    if trainer is not None and trainer.world_size > 1:
        raise CannotRunOnCopy(
            f"a trial fit needs its own Trainer, which cannot run inside a {trainer.world_size}-process run; "
            "run `preflight(model, ...)` before `trainer.fit` instead."
        )
    started = time.perf_counter()
    with preserved_rng():
        torch.manual_seed(harness.seed)
        batch = harness.read_raw_batches(1, max_samples)[0]
        model = harness.copy_model()
        recorder = TrialRecorder(model, should_stop or (lambda: False), fit_ratio)
        view = _fit(harness, model, batch, recorder, steps, validate, epochs)
    received, in_optimizer = recorder.received, set(recorder.owner)
    result = TrialFit(
        automatic=model.automatic_optimization,
        optimizers=recorder.optimizer_names,
        steps=recorder.steps,
        train_losses=recorder.train_losses,
        received_grad=recorder.param_names(received),
        not_in_optimizer=recorder.param_names(received - in_optimizer),
        never_changed=recorder.param_names(recorder.with_grad_at_lr - recorder.ever_changed),
        rewritten=recorder.param_names(recorder.rewritten),
        lr_positive=recorder.lr_positive,
        samples=batch_size_of(batch, harness.input_key),
        stopped=recorder.stopped,
        validation=view,
        seconds=time.perf_counter() - started,
    )
    if cache and result.stopped != "budget":
        _CACHE.setdefault(harness, {})[key] = result
    return result


def _fit(
    harness: Harness,
    model: pl.LightningModule,
    batch: Any,
    recorder: TrialRecorder,
    steps: int,
    validate: bool,
    epochs: int = 1,
) -> ValidationView | None:
    """Fit ``model`` on ``batch`` under ``recorder``; the validation view (``None``: no validation)."""
    has_validation = validate and is_overridden("validation_step", model, pl.LightningModule)
    precision = getattr(harness.trainer, "precision", None)  # the run's, inside fit
    try:
        with quiet_trial(), tempfile.TemporaryDirectory(prefix="lightning_recipes_trial_") as root:
            trainer = silent_trainer(
                default_root_dir=root,
                max_steps=steps,
                max_epochs=epochs,
                # validation of the batch before training (Lightning's sanity check, after `on_fit_start`,
                # as in a real run) and after it (the end of the epoch, or the early stop)
                limit_val_batches=1.0 if has_validation else 0,
                num_sanity_val_steps=1 if has_validation else 0,
                callbacks=[recorder],
                device=harness.device,
                **({"precision": precision} if isinstance(precision, str) else {}),
            )
            per_epoch = _Repeated(batch, math.ceil(steps / epochs))
            if not has_validation:
                trainer.fit(model, train_dataloaders=per_epoch)
                return None
            model.validation_step = recorder.wrap_validation_step(model.validation_step)  # type: ignore[method-assign]
            trainer.fit(model, train_dataloaders=per_epoch, val_dataloaders=_Repeated(batch, 1))
            if "after" not in recorder.val:  # the fit ended without validating: validate once more
                trainer.validate(model, dataloaders=_Repeated(batch, 1), verbose=False)
            if batchnorm_momenta(model):  # its running statistics lag weights that moved fast: once more
                recorder.batch_statistics = True
                trainer.validate(model, dataloaders=_Repeated(batch, 1), verbose=False)
            return _validation_view(recorder)
    finally:
        recorder.remove()
        if "validation_step" in vars(model):
            del model.validation_step  # the instance attribute; the class's method shows again


@dataclass(eq=False)
class _Repeated:
    """A loader of ``count`` copies of one batch (a list would be read as a list of loaders)."""

    batch: Any
    count: int

    def __iter__(self) -> Iterator[Any]:
        return iter([self.batch] * self.count)

    def __len__(self) -> int:
        return self.count


def _validation_view(recorder: TrialRecorder) -> ValidationView:
    before, after = recorder.val.get("before"), recorder.val.get("after")
    logged_before, logged = recorder.logged.get("before", {}), recorder.logged.get("after", {})
    view = ValidationView(logged=logged)
    if before is None or after is None:
        return view
    key = _loss_key(logged)
    if before.returned is not None and after.returned is not None:
        view.before, view.after, view.source = before.returned, after.returned, "returned"
    elif key is not None and key in logged_before:
        view.before, view.after, view.source = logged_before[key], logged[key], f"logged {key!r}"
    elif before.loss_call is not None and after.loss_call is not None:
        view.before, view.after = before.loss_call, after.loss_call
        view.source = f"loss call {after.loss_call_name}"
    again = recorder.val.get("batch_statistics")
    if again is not None and view.source == "returned":
        view.after_batch_statistics = again.returned
    elif again is not None and view.source.startswith("logged"):
        view.after_batch_statistics = recorder.logged.get("batch_statistics", {}).get(key or "")
    elif again is not None:
        view.after_batch_statistics = again.loss_call
    _compare_weights(recorder, after.modules, view)
    _compare_inputs(recorder, after.inputs, view)
    batches = len(recorder.train_losses)
    view.batchnorm_lag = max(
        ((1.0 - m) ** batches for m in batchnorm_momenta(recorder.model, after.modules)), default=0.0
    )
    return view


def _loss_key(logged: dict[str, float]) -> str | None:
    """The logged key that is the validation loss: one with "loss" in it, those with "val" first."""
    keys = [k for k in logged if "loss" in k.lower()]
    keys.sort(key=lambda k: (not any(w in k.lower() for w in ("val", "valid")), len(k)))
    return keys[0] if keys else None


def _compare_weights(recorder: TrialRecorder, modules: set[str], view: ValidationView) -> None:
    """Which parameters validation read, and whether they hold the start, the trained or averaged values (one
    only validation read is compared with the trained one of its shape and longest name ending)."""
    named = dict(recorder.model.named_modules())
    train_modules = recorder.train_modules
    view.val_only_modules = sorted(
        name
        for name in modules - train_modules
        if name in named and any(True for _ in named[name].parameters(recurse=False))
    )
    read = {id(p) for name in modules if name in named for p in named[name].parameters(recurse=False)}
    trained_ids = {
        id(p) for name in train_modules if name in named for p in named[name].parameters(recurse=False)
    }
    weights, initial, trained = recorder.val_weights, recorder.initial, recorder.trained
    moved = {pid for pid in trained_ids if pid in trained and not torch.equal(initial[pid], trained[pid])}
    far_num = far_den = 0.0
    for pid in read:
        seen, start, end = weights.get(pid), initial.get(pid), trained.get(pid)
        if seen is None or start is None or end is None:
            continue
        name = recorder.names[pid]
        if pid in trained_ids and (pid not in moved or torch.equal(seen, end)):
            continue  # what training used
        if torch.equal(seen, start):
            view.stale.append(name)
            continue
        view.averaged.append(name)
        twin = pid if pid in trained_ids else _counterpart(recorder, name, seen.shape, moved)
        if twin is not None:
            far_num += float((seen - trained[twin]).double().square().sum())  # sync: once per parameter
            far_den += float((start - trained[twin]).double().square().sum())
    view.stale.sort()
    view.averaged.sort()
    if view.averaged and far_den > 0:
        view.lag = math.sqrt(far_num / far_den)


def _counterpart(recorder: TrialRecorder, name: str, shape: torch.Size, moved: set[int]) -> int | None:
    """The trained parameter of this shape whose name shares the longest ending with ``name``."""

    def ending(pid: int) -> int:  # how many trailing name parts it shares with `name`
        pairs = zip(reversed(name.split(".")), reversed(recorder.names[pid].split(".")))
        return sum(1 for _ in itertools.takewhile(lambda pair: pair[0] == pair[1], pairs))

    same_shape = [pid for pid in moved if recorder.params[pid].shape == shape and ending(pid) > 0]
    return max(same_shape, key=ending, default=None)


def _compare_inputs(recorder: TrialRecorder, val: dict[str, torch.Tensor], view: ValidationView) -> None:
    """The first module both paths ran: its first input in validation vs in the last training batch, when
    training gave it the same input at its first and last batch (no augmentation, no weights before it)."""
    first, last = recorder.first_train_inputs or recorder.train_inputs, recorder.train_inputs
    for name, x_val in val.items():
        x_last, x_first = last.get(name), first.get(name)
        if x_last is None or x_first is None:
            continue
        view.input_module = name or "<the module itself>"
        if x_first.shape != x_last.shape or not torch.equal(x_first, x_last):
            view.input_varies = True
        elif x_val.shape == x_last.shape:
            norm = float(x_last.double().norm())  # sync: once
            view.input_difference = float((x_val.double() - x_last.double()).norm()) / max(norm, 1e-12)
        return
