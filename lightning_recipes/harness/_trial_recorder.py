"""What a trial fit sees, recorded from hooks: backward passes, gradient contributions, optimizer steps,
the losses of both paths, the modules and inputs each path runs. Used by :mod:`.trial_fit` only."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.utils.hooks import RemovableHandle
from typing_extensions import override

from lightning_recipes._loss_output import loss_of
from lightning_recipes.harness.forward_capture import first_tensor

__all__ = ["StepRecord", "TrialRecorder", "batchnorm_momenta"]

_INPUT_DEPTH = 2  # module inputs kept for the root, its children and grandchildren


@dataclass
class StepRecord:
    """One ``optimizer.step()`` of a trial fit, measured over the parameters of that optimizer.

    Attributes:
        optimizer: Index of the optimizer in ``trainer.optimizers``.
        batch: Index of the training batch the step ran in.
        backwards: Backward passes that reached this optimizer's parameters since its previous step.
        grad_norm: ``|g|``, the gradients the step used (read right after it; ``None`` grads count as 0).
        contribution_norm: ``|c|``, what the backward passes since the previous step contributed.
        residual_norm: ``|g - c|``.
        previous_norm: ``|g_prev|``, the gradients the previous step of this optimizer used.
        carried: ``<g - c, g_prev> / |g_prev|^2``: the share of the previous step's gradients still in
            ``g`` (1: never cleared; 0: cleared).
        carried_residual: ``|g - c - g_prev| / |g_prev|``: how exactly ``g = c + g_prev`` holds.
        scale: ``<g, c> / |c|^2`` (1: the step used exactly the contributions; < 1: clipped or unscaled).
        changed: Parameters whose value the step changed.
        with_grad: Parameters with a non-zero gradient at the step.
        lr: The largest learning rate of the optimizer's groups at the step.
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
    """The AMP loss scale the backward passes since the last step used (16-mixed's ``GradScaler``, read inside
    its ``step``, before ``update``), 1.0 without one: the recorded contributions are the scaled gradients,
    the step sees them unscaled."""
    plugin = getattr(getattr(model, "_trainer", None), "precision_plugin", None)
    scaler = getattr(plugin, "scaler", None)
    if scaler is None or not scaler.is_enabled():
        return 1.0
    return float(scaler.get_scale())  # sync: once per trial step, on a 16-mixed run only


class TrialRecorder(Callback):
    """Hooks on a copy of the model (and, from ``on_train_start``, on its optimizers) that record a trial fit.

    Cost while active: one Python call per module forward, per parameter per backward (a clone or an add of
    its gradient), and per optimizer step a pass over its parameters (norms, dot products, one clone of
    params and grads; one host sync). Memory: about four copies of the trainable parameters.
    """

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
        self.owner: dict[int, int] = {}
        self.opt_params: list[list[Tensor]] = []
        self.contrib: dict[int, Tensor] = {}
        self.prev_grad: dict[int, Tensor] = {}
        self.before: dict[int, list[Tensor]] = {}
        self.reached: dict[int, set[int]] = {}
        self.received: set[int] = set()
        self.with_grad_at_lr: set[int] = set()  # non-zero grad at a step with lr > 0
        self.ever_changed: set[int] = set()
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

    # ---------------------------------------------------------------- model hooks
    def _set_up(self) -> None:
        """Snapshot and hook the model once its hooks ran (``setup``, ``configure_model``, ``on_fit_start``
        may add modules, an averaged copy say): at the sanity check, else at ``on_train_start``."""
        if self._ready:
            return
        self._ready = True
        self.names = {id(p): name for name, p in self.model.named_parameters()}
        self.params = {id(p): p for _, p in self.model.named_parameters()}
        self.initial = {pid: p.detach().clone() for pid, p in self.params.items()}
        self.min_batches = _min_batches(self.model)
        trainable = [p for p in self.params.values() if p.requires_grad]
        if trainable:
            self.handles.append(
                torch.autograd.graph.register_multi_grad_hook(trainable, self._new_backward, mode="any")
            )
        for p in trainable:
            self.handles.append(p.register_hook(partial(self._contribution, id(p))))
        for name, module in self.model.named_modules():
            depth = 0 if name == "" else name.count(".") + 1
            self.handles.append(module.register_forward_pre_hook(partial(self._module_ran, name, depth)))

    def remove(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles.clear()

    def _new_backward(self, _grad: Any) -> None:
        self.backward_id += 1

    def _contribution(self, pid: int, grad: Tensor) -> None:
        grad = grad.detach()
        if grad.is_sparse:
            grad = grad.to_dense()
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

    # ---------------------------------------------------------------- validation (wraps validation_step)
    def wrap_validation_step(self, step: Callable[..., Any]) -> Callable[..., Any]:
        """``step`` (the copy's ``validation_step``) recording its loss, modules and inputs: phase
        ``"before"`` during Lightning's sanity check, ``"after"`` later."""
        from lightning_recipes.harness.loss_calls import LossRecorder

        @functools.wraps(step)  # Lightning reads its signature (whether to pass `dataloader_idx`)
        def validation_step(*args: Any, **kwargs: Any) -> Any:
            phase = "before" if self.model.trainer.sanity_checking else "after"
            view = self.val.setdefault(phase, _ValView())
            if phase == "after":  # the weights validation sees (an averaging callback swaps them in first)
                self.val_weights = {pid: p.detach().clone() for pid, p in self.params.items()}
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

    # ---------------------------------------------------------------- training
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
            self.handles.append(optimizer.register_step_pre_hook(partial(self._pre_step, index)))
            self.handles.append(optimizer.register_step_post_hook(partial(self._post_step, index)))
        # contributions that arrived before the optimizers existed belong to no optimizer yet
        self.reached = {self.owner.get(pid, -1): set() for pid in self.owner}

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, idx: int
    ) -> None:
        self.batch_index += 1
        self._batch_backward_losses = []
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
        if len(losses) < self.min_batches or not self.train_losses or not math.isfinite(self.train_losses[0]):
            return False
        first = self.train_losses[0]
        return first - losses[-1] >= self.fit_ratio * abs(first) and first - losses[
            -2
        ] >= self.fit_ratio * abs(first)

    @override
    def on_sanity_check_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.logged["before"] = _scalars(trainer.callback_metrics)

    @override
    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self._metrics_before_val = _scalars(trainer.callback_metrics)  # what training logged
        if not self.trained:  # before anything swaps weights in
            self.trained = {pid: p.detach().clone() for pid, p in self.params.items()}

    @override
    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not trainer.sanity_checking:  # what validation logged: new keys, or keys it changed
            known = self._metrics_before_val
            metrics = _scalars(trainer.callback_metrics)
            self.logged["after"] = {k: v for k, v in metrics.items() if known.get(k) != v}

    @override
    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if not self.trained:
            self.trained = {pid: p.detach().clone() for pid, p in self.params.items()}

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
            if g.is_sparse:
                g = g.to_dense()
            c = self.contrib.pop(id(p), None)
            c = torch.zeros_like(g) if c is None else (c if scale == 1.0 else c / scale)
            prev = self.prev_grad.get(id(p))
            prev = torch.zeros_like(g) if prev is None else prev
            r = g - c
            changed = torch.zeros((), device=g.device) if before is None else (p.detach() != before[i]).any()
            sums.append(
                torch.stack(
                    [
                        g.double().square().sum(),
                        c.double().square().sum(),
                        r.double().square().sum(),
                        prev.double().square().sum(),
                        (r.double() * prev.double()).sum(),
                        (r - prev).double().square().sum(),
                        (g.double() * c.double()).sum(),
                        changed.double(),
                        (g != 0).any().double(),
                    ]
                )
            )
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

    # ---------------------------------------------------------------- summaries
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
    """Batches before a trial may stop early: 12, or until the running statistics of every BatchNorm layer
    hold at most 10 % of their initial values (``(1 - momentum) ** n <= 0.1``: 22 at the default 0.1)."""
    momenta = [m for m in batchnorm_momenta(model) if 0 < m < 1]
    return max([12] + [math.ceil(math.log(0.1) / math.log(1 - m)) for m in momenta])


def _scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The scalar metrics of ``trainer.callback_metrics`` as floats (one host sync each)."""
    return {
        str(k): float(v)
        for k, v in metrics.items()
        if isinstance(v, (int, float)) or (isinstance(v, Tensor) and v.numel() == 1)
    }
