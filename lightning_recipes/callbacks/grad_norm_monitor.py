"""Gradient-norm monitoring that is correct under DDP/FSDP/DeepSpeed and free on non-logging steps."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.strategies import DeepSpeedStrategy
from torch import Tensor
from torch.optim import Optimizer
from typing_extensions import override

from lightning_recipes._validation import check_bool, check_int
from lightning_recipes.callbacks._norms import (
    STEP_POWERS,
    GroupBy,
    compile_group_by,
    flat_shard_group,
    group_of,
)
from lightning_recipes.callbacks._trainer import (
    check_prefix,
    emit,
    lightning_log_step,
    lightning_will_log,
    optimizer_index,
    stepped,
)
from lightning_recipes.norms import (
    ShardKey,
    check_norm_type,
    combine_powers,
    group_powers,
    local_group_powers,
    power_to_norm,
    reduce_power_,
    update_ratios,
)

__all__ = ["GradNormMonitor"]

_FOLD_EVERY = 256  # pending per-step powers are reduced at least this often (bounded memory, rare collective)


class GradNormMonitor(Callback):
    """Log the total gradient norm every logging step, computed on the device each optimizer step for free.

    Reads the gradients the optimizer will use (accumulated, AMP-unscaled, before clipping), keeps ``sum
    |g|^p`` per group on the device and, on logging steps only, reduces across shards once (DDP, FSDP1,
    FSDP2/DTensor; DeepSpeed: the engine's norm) and reads back in one transfer. ``group_by``: ``None`` (total
    only), an ``int`` ``d`` (the first ``d`` components of the module name) or ``{regex: group}`` / ``(regex,
    group)`` pairs (unmatched: ``other``). ``log_every_n_steps=None`` logs with the Trainer through
    ``LightningModule.log``; an ``int`` logs straight to ``trainer.loggers`` on rank zero.

    Logged keys (``prefix`` prepended; ``grad_norm/optimizer_<i>/...`` with several optimizers):
    ``grad_norm/total``, ``grad_norm/total_mean`` and ``grad_norm/total_max`` (finite norms since the last
    log), ``grad_norm/nonfinite_steps``, ``grad_norm/<group>``, ``param_norm/total`` and
    ``param_norm/<group>`` (``log_param_norm``), ``update_ratio/total`` and ``update_ratio/<group>``
    (``log_update_ratio``).

    Example:
        >>> from lightning_recipes.testing import InMemoryLogger, TinyClassifier, fast_trainer
        >>> from lightning_recipes.testing import random_classification_loader
        >>> logger = InMemoryLogger()
        >>> trainer = fast_trainer(max_steps=4, logger=logger, log_every_n_steps=2,
        ...                        callbacks=[GradNormMonitor(group_by=1)])
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> [step for step, _ in logger.history("grad_norm/total")], logger.last("grad_norm/head") > 0
        ([1, 3], True)
    """

    def __init__(
        self,
        norm_type: float | str = 2.0,
        group_by: GroupBy = None,
        log_param_norm: bool = False,
        log_update_ratio: bool = False,
        log_every_n_steps: int | None = None,
        prefix: str = "",
    ) -> None:
        super().__init__()
        self.norm_type = check_norm_type(norm_type)
        self.group_by = group_by
        self._patterns = compile_group_by(group_by)
        check_bool("log_param_norm", log_param_norm)
        check_bool("log_update_ratio", log_update_ratio)
        self.log_param_norm = log_param_norm
        self.log_update_ratio = log_update_ratio
        check_int("log_every_n_steps", log_every_n_steps, minimum=1, optional=True)
        self.log_every_n_steps = log_every_n_steps
        check_prefix(prefix)
        self.prefix = prefix
        self._reset_run_state()

    def _reset_run_state(self) -> None:
        self._tracks: dict[int, _Track] = {}
        self._shard_group: Any = None
        self._deepspeed = False
        self._step_at_batch_start: int | None = None

    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(norm_type=self.norm_type, prefix=self.prefix)

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._reset_run_state()
        strategy = trainer.strategy
        self._deepspeed = isinstance(strategy, DeepSpeedStrategy)
        if self._deepspeed and (self._patterns is not None or self.norm_type != 2.0 or self.log_update_ratio):
            raise ValueError(
                "Under DeepSpeed `GradNormMonitor` logs the engine's global 2-norm only: it needs "
                "`norm_type=2.0`, `group_by=None` and `log_update_ratio=False` (got "
                f"norm_type={self.norm_type}, group_by={self.group_by!r}, "
                f"log_update_ratio={self.log_update_ratio})."
            )

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._step_at_batch_start = trainer.global_step

    @override
    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Optimizer
    ) -> None:
        if self._deepspeed:
            return  # the engine's norm exists only after its step: read in on_train_batch_end
        if self._shard_group is None:
            self._shard_group = flat_shard_group(trainer)
        index = optimizer_index(trainer, optimizer)
        track = self._track(index, pl_module, optimizer)
        track.append_step(self.norm_type, self._shard_group, trainer.global_step)
        if track.pending_steps >= _FOLD_EVERY:
            track.fold(self.norm_type)
        if self._logging_now(trainer, did_step=True) and (self.log_param_norm or self.log_update_ratio):
            track.snapshot_params(self.norm_type, self._shard_group, copy=self.log_update_ratio)

    @override
    def on_train_batch_end(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        did_step = stepped(trainer, self._step_at_batch_start)
        if self._deepspeed and did_step:
            self._read_deepspeed_norm(trainer)
        if not self._logging_now(trainer, did_step):
            return
        several = len(self._tracks) > 1 or len(trainer.optimizers) > 1
        names, values = [], []
        for index, track in sorted(self._tracks.items()):
            infix = f"optimizer_{index}/" if several else ""
            for kind, name, value in track.metrics(self.norm_type):
                names.append(f"{self.prefix}{kind}/{infix}{name}")
                values.append(value)
        if not values:
            return
        device = values[0].device
        # float64 norms (of float64 gradients) may exceed the float32 range: read them back as float64
        dtype = torch.float64 if any(v.dtype == torch.float64 for v in values) else torch.float32
        floats = torch.stack([v.to(device, dtype) for v in values]).tolist()  # sync: once per logging step
        emit(trainer, pl_module, dict(zip(names, floats)), own_cadence=self.log_every_n_steps is not None)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"norm_type": self.norm_type, "prefix": self.prefix}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        return None  # interval statistics restart after a resume; the configuration is __init__'s

    def _logging_now(self, trainer: pl.Trainer, did_step: bool) -> bool:
        if self.log_every_n_steps is None:
            return lightning_will_log(trainer, did_step)
        if trainer.lightning_module.automatic_optimization and not did_step:
            return False  # an accumulating batch: the optimizer step, and so the log, comes later
        return (lightning_log_step(trainer) + 1) % self.log_every_n_steps == 0

    def _track(self, index: int, pl_module: pl.LightningModule, optimizer: Optimizer) -> _Track:
        params = [p for group in optimizer.param_groups for p in group["params"]]
        track = self._tracks.get(index)
        if track is None or list(map(id, track.params)) != list(map(id, params)):
            names = {id(p): name for name, p in pl_module.named_parameters()}
            labels = [  # group_by=None: one group, the total
                "total"
                if self._patterns is None
                else group_of(names.get(id(p), f"param_{i}"), self.group_by, self._patterns)
                for i, p in enumerate(params)
            ]
            track = _Track(params, labels, grouped=self._patterns is not None)
            self._tracks[index] = track
        return track

    def _read_deepspeed_norm(self, trainer: pl.Trainer) -> None:
        engine = getattr(trainer.strategy, "deepspeed_engine", None)
        norm = None if engine is None else engine.get_global_grad_norm()
        if norm is None:
            return
        norm_t = norm.detach().float() if isinstance(norm, Tensor) else torch.tensor(float(norm))
        track = self._tracks.get(0)
        if track is None:
            track = self._tracks[0] = _Track([], [], grouped=False)
        track.append_power(norm_t.square().reshape(1))


class _Track:
    """One optimizer's parameters, their groups and the interval's device-side statistics."""

    def __init__(self, params: list[Tensor], labels: list[str], grouped: bool) -> None:
        self.params = params
        self.group_names: list[str] = sorted(set(labels)) if labels else ["total"]
        position = {name: i for i, name in enumerate(self.group_names)}
        self.group_of = [position[label] for label in labels]
        self.grouped = grouped
        self.pending: dict[ShardKey, list[Tensor]] = {}
        self.pending_steps = 0
        self.interval_steps = 0
        self.stats: Tensor | None = None  # [sum of finite norms, finite count, non-finite count]
        self.peak: Tensor | None = None  # the largest finite norm
        self.last_groups: Tensor | None = None
        self.last_total: Tensor | None = None
        self.param_powers: Tensor | None = None
        self.snapshot: list[Tensor] | None = None  # the parameters before the step
        self.shard_group: Any = None

    def append_step(self, norm_type: float, shard_group: Any, step: int) -> None:
        grads = [(i, p.grad) for i, p in enumerate(self.params) if p.grad is not None]
        if not grads:
            return
        totals = {}
        groups = [self.group_of[i] for i, _ in grads]
        local = local_group_powers(
            [g for _, g in grads], groups, len(self.group_names), norm_type, shard_group
        )
        for key, powers in local.items():
            self.pending.setdefault(key, []).append(powers)
            totals[key] = powers.amax() if math.isinf(norm_type) else powers.sum()
        self.pending_steps += 1
        # AdaptiveGradClip placed after this callback reuses these instead of reading the gradients again
        STEP_POWERS.publish([g for _, g in grads], norm_type, step, totals)

    def append_power(self, powers: Tensor) -> None:
        self.pending.setdefault(None, []).append(powers)
        self.pending_steps += 1

    def fold(self, norm_type: float) -> None:
        """Reduce the pending per-step powers across shards (one collective per layout) into the stats."""
        if not self.pending_steps:
            return
        per_key = []
        for key, rows in self.pending.items():
            if len(rows) != self.pending_steps:  # a layout without gradients on some steps: pad with zeros
                rows = rows + [torch.zeros_like(rows[0])] * (self.pending_steps - len(rows))
            per_key.append(reduce_power_(torch.stack(rows), key, norm_type))
        step_powers = combine_powers(per_key, norm_type)  # [T, G]
        totals = power_to_norm(combine_powers(list(step_powers.unbind(1)), norm_type), norm_type)  # [T]
        finite = torch.isfinite(totals)
        sums = torch.stack([torch.where(finite, totals, 0.0).sum(), finite.sum(), (~finite).sum()])
        peak = torch.where(finite, totals, -math.inf).max()
        self.stats = sums if self.stats is None else self.stats + sums
        self.peak = peak if self.peak is None else torch.maximum(self.peak, peak)
        self.last_groups = power_to_norm(step_powers[-1], norm_type)
        self.last_total = totals[-1]
        self.interval_steps += self.pending_steps
        self.pending = {}
        self.pending_steps = 0

    def snapshot_params(self, norm_type: float, shard_group: Any, copy: bool) -> None:
        params = [p.detach() for p in self.params]
        self.param_powers = group_powers(params, self.group_of, len(self.group_names), norm_type, shard_group)
        self.shard_group = shard_group
        if copy:
            self.snapshot = [p.clone() for p in params]

    def metrics(self, norm_type: float) -> list[tuple[str, str, Tensor]]:
        """``(kind, name, value)`` of the interval, then a reset."""
        self.fold(norm_type)
        out: list[tuple[str, str, Tensor]] = []

        def add(kind: str, totals: dict[str, Tensor], groups: Tensor | None) -> None:
            out.extend((kind, name, value) for name, value in totals.items())
            if self.grouped and groups is not None:
                out.extend((kind, name, value) for name, value in zip(self.group_names, groups.unbind(0)))

        if self.interval_steps:
            assert self.stats is not None and self.peak is not None and self.last_total is not None
            mean = self.stats[0] / self.stats[1].clamp(min=1.0)
            totals = {"total": self.last_total, "total_mean": mean, "total_max": self.peak}
            add("grad_norm", {**totals, "nonfinite_steps": self.stats[2]}, self.last_groups)
        if self.param_powers is not None:
            param_total = combine_powers(list(self.param_powers.unbind(0)), norm_type)
            param_norms = power_to_norm(self.param_powers, norm_type)
            add("param_norm", {"total": power_to_norm(param_total, norm_type)}, param_norms)
            if self.snapshot is not None:
                changes = torch._foreach_sub([p.detach() for p in self.params], self.snapshot)
                diff = group_powers(
                    changes, self.group_of, len(self.group_names), norm_type, self.shard_group
                )
                ratio = update_ratios(param_total, combine_powers(list(diff.unbind(0)), norm_type), norm_type)
                groups = update_ratios(self.param_powers, diff, norm_type) if self.grouped else None
                add("update_ratio", {"total": ratio}, groups)
        self.stats = self.peak = self.last_groups = self.last_total = None
        self.param_powers = self.snapshot = None
        self.interval_steps = 0
        return out
