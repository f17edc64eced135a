"""Clip the total gradient norm at a running percentile of recent norms, entirely on the device."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.strategies import DeepSpeedStrategy
from lightning.pytorch.utilities import rank_zero_warn
from torch import Tensor
from torch.optim import Optimizer
from typing_extensions import override

from lightning_recipes._validation import check_in_range, check_int, check_positive
from lightning_recipes.callbacks._norms import STEP_POWERS, flat_shard_group
from lightning_recipes.callbacks._trainer import check_prefix, emit, lightning_will_log, optimizer_index
from lightning_recipes.norms import (
    check_norm_type,
    distributed_total_norm,
    local_tensor,
    total_norm_from_powers,
)

__all__ = ["AdaptiveGradClip", "autoclip_factor"]


class AdaptiveGradClip(Callback):
    """Clip gradients at the ``percentile``-th percentile of the last ``window`` total norms (AutoClip).

    AutoClip (Seetharaman et al., 2020): clipping starts after ``warmup_steps``; ``max_norm`` caps the
    threshold from the first step; non-finite norms are neither recorded nor clipped. Runs on the device with
    no sync on non-logging steps (works under FSDP/FSDP2; under DeepSpeed use its ``gradient_clipping``).
    Warns, at most once per ``window`` steps, when more than ``warn_clipped_fraction`` of the recent steps
    were clipped.

    Logged keys (``prefix`` prepended; ``grad_clip/optimizer_<i>/...`` with several optimizers):
    ``grad_clip/threshold`` (``inf`` before any), ``grad_clip/clipped_fraction`` (since the last log),
    ``grad_clip/scale`` (the factor at the logging step).

    Example:
        >>> from lightning_recipes.testing import InMemoryLogger, TinyClassifier, fast_trainer
        >>> from lightning_recipes.testing import random_classification_loader
        >>> logger = InMemoryLogger()
        >>> clip = AdaptiveGradClip(percentile=50, window=8, warmup_steps=2)
        >>> trainer = fast_trainer(max_steps=6, logger=logger, log_every_n_steps=3, callbacks=[clip])
        >>> trainer.fit(TinyClassifier(), random_classification_loader())
        >>> [step for step, _ in logger.history("grad_clip/clipped_fraction")]
        [2, 5]
    """

    def __init__(
        self,
        percentile: float = 90.0,
        window: int = 1000,
        warmup_steps: int = 100,
        max_norm: float | None = None,
        norm_type: float | str = 2.0,
        warn_clipped_fraction: float | None = 0.5,
        prefix: str = "",
    ) -> None:
        super().__init__()
        check_in_range("percentile", percentile, 0, 100, low_open=True)
        check_int("window", window, minimum=1)
        check_int("warmup_steps", warmup_steps, minimum=0)
        check_positive("max_norm", max_norm, optional=True)
        p = check_norm_type(norm_type)
        check_in_range("warn_clipped_fraction", warn_clipped_fraction, 0, 1, low_open=True, optional=True)
        check_prefix(prefix)
        self.percentile = float(percentile)
        self.window = window
        self.warmup_steps = warmup_steps
        self.max_norm = None if max_norm is None else float(max_norm)
        self.norm_type = p
        self.warn_clipped_fraction = warn_clipped_fraction
        self.prefix = prefix
        self._states: dict[int, _ClipState] = {}
        self._shard_group: Any = None

    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(percentile=self.percentile, window=self.window, prefix=self.prefix)

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if trainer.gradient_clip_val:
            raise ValueError(
                "`AdaptiveGradClip` clips the gradients itself, but the Trainer also clips them "
                f"(`Trainer(gradient_clip_val={trainer.gradient_clip_val!r})`): that would clip twice. "
                "Remove `gradient_clip_val` from the Trainer, or remove `AdaptiveGradClip` from the "
                "callbacks."
            )
        if isinstance(trainer.strategy, DeepSpeedStrategy):
            raise ValueError(
                "`AdaptiveGradClip` cannot reach the gradients under DeepSpeed (the engine owns and clips "
                "them): set `gradient_clipping` in the DeepSpeed config, or "
                "`Trainer(gradient_clip_val=...)`, instead."
            )

    @override
    def on_before_optimizer_step(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, optimizer: Optimizer
    ) -> None:
        grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
        if not grads:
            return
        index = optimizer_index(trainer, optimizer)
        state = self._states.get(index) or self._states.setdefault(index, _ClipState(self.window))
        if self._shard_group is None:  # the FSDP1 wrapper exists only after setup: look it up here
            self._shard_group = flat_shard_group(trainer)
        cached = STEP_POWERS.lookup(grads, self.norm_type, trainer.global_step)  # GradNormMonitor ran first
        norm = (
            distributed_total_norm(grads, self.norm_type, self._shard_group)
            if cached is None
            else total_norm_from_powers(cached, self.norm_type)
        )
        factor = state.step(norm, self)
        torch._foreach_mul_([local_tensor(g) for g in grads], factor)
        if lightning_will_log(trainer):
            self._log(trainer, pl_module, index, state)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"states": {index: state.state_dict() for index, state in self._states.items()}}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._states = {}
        for index, saved in state_dict.get("states", {}).items():
            state = _ClipState(self.window)
            state.load_state_dict(saved)
            self._states[int(index)] = state

    def _log(self, trainer: pl.Trainer, pl_module: pl.LightningModule, index: int, state: _ClipState) -> None:
        values = state.interval_values()
        threshold, fraction, scale, recent_fraction = values.tolist()  # sync: once per logging step
        infix = f"optimizer_{index}/" if len(trainer.optimizers) > 1 else ""
        metrics = {
            f"{self.prefix}grad_clip/{infix}threshold": threshold,
            f"{self.prefix}grad_clip/{infix}clipped_fraction": fraction,
            f"{self.prefix}grad_clip/{infix}scale": scale,
        }
        emit(trainer, pl_module, metrics, own_cadence=False)
        limit = self.warn_clipped_fraction
        recorded = min(state.steps, self.window)
        if (
            limit is not None
            and recent_fraction > limit
            and recorded >= min(self.window, 10)
            and state.steps - state.last_warned_step >= self.window
        ):
            state.last_warned_step = state.steps
            rank_zero_warn(
                f"`AdaptiveGradClip`: {recent_fraction:.0%} of the last {recorded} optimizer steps were "
                f"clipped (threshold {threshold:.4g}, more than `warn_clipped_fraction={limit}`). Clipping "
                "fires constantly: the learning rate, loss scale or data is likely wrong.",
                category=UserWarning,
            )


@torch.no_grad()
def autoclip_factor(
    history: Tensor, norm: Tensor, percentile: float, *, clipping: bool = True, max_norm: float | None = None
) -> tuple[Tensor, Tensor]:
    """AutoClip's ``(threshold, factor)``, 0-dim device tensors, no sync: the ``percentile`` of ``history``
    (NaN: empty; ``inf`` in warm-up) capped at ``max_norm``; ``threshold / norm`` for a finite norm above it.

    Example:
        >>> history = torch.tensor([1.0, 2.0, 3.0, 4.0, float("nan")])
        >>> autoclip_factor(history, torch.tensor(4.0), 50.0)
        (tensor(2.5000), tensor(0.6250))
    """
    threshold = torch.full((), math.inf, device=norm.device)
    if clipping:
        quantile = torch.nanquantile(history.to(norm.device).float(), percentile / 100.0)
        threshold = torch.where(torch.isnan(quantile), threshold, quantile)
    if max_norm is not None:
        threshold = threshold.clamp(max=max_norm)
    clip = torch.isfinite(norm) & (norm > threshold)
    factor = torch.where(clip, threshold / norm, 1.0)
    return threshold, factor


class _ClipState:
    """Ring buffers of recent norms and clip flags, on the device; counters on the host (no sync to read)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.history: Tensor | None = None  # [window] float32, NaN where empty or non-finite
        self.clipped: Tensor | None = None  # [window] float32 0/1, NaN where empty
        self.position = 0
        self.steps = 0
        self.last_warned_step = -(10**12)
        self.interval_steps = 0
        self.interval_clipped: Tensor | None = None
        self.threshold: Tensor | None = None
        self.scale: Tensor | None = None

    @torch.no_grad()
    def step(self, norm: Tensor, config: AdaptiveGradClip) -> Tensor:
        """Record ``norm``, return the factor to scale the gradients by (all on the device)."""
        if self.history is None:
            self.history = torch.full((self.window,), math.nan)
        if self.clipped is None:
            self.clipped = torch.full((self.window,), math.nan)
        self.history, self.clipped = self.history.to(norm.device), self.clipped.to(norm.device)  # no-op there
        finite = torch.isfinite(norm)
        self.history[self.position] = torch.where(finite, norm, math.nan)
        self.steps += 1
        threshold, factor = autoclip_factor(
            self.history,
            norm,
            config.percentile,
            clipping=self.steps > config.warmup_steps,
            max_norm=config.max_norm,
        )
        clip = finite & (norm > threshold)
        self.clipped[self.position] = clip.float()
        self.position = (self.position + 1) % self.window
        self.interval_clipped = (
            clip.float() if self.interval_clipped is None else self.interval_clipped + clip
        )
        self.interval_steps += 1
        self.threshold, self.scale = threshold, factor
        return factor

    def interval_values(self) -> Tensor:
        """``[threshold, clipped fraction since last log, scale, clipped fraction in the window]``; resets."""
        assert self.clipped is not None and self.interval_clipped is not None
        assert self.threshold is not None and self.scale is not None
        values = torch.stack(
            [
                self.threshold.float(),
                self.interval_clipped / max(self.interval_steps, 1),
                self.scale.float(),
                torch.nanmean(self.clipped),
            ]
        )
        self.interval_clipped = None
        self.interval_steps = 0
        return values

    def state_dict(self) -> dict[str, Any]:
        return {
            "history": None if self.history is None else self.history.detach().cpu().clone(),
            "clipped": None if self.clipped is None else self.clipped.detach().cpu().clone(),
            "position": self.position,
            "steps": self.steps,
            "last_warned_step": self.last_warned_step,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        position = int(state.get("position", 0))
        history, clipped = state.get("history"), state.get("clipped")
        if history is not None:
            self.history, self.position = _resize_ring(history, position, self.window)
        if clipped is not None:
            self.clipped, _ = _resize_ring(clipped, position, self.window)
        self.steps = int(state.get("steps", 0))
        self.last_warned_step = int(state.get("last_warned_step", self.last_warned_step))


def _resize_ring(ring: Tensor, position: int, window: int) -> tuple[Tensor, int]:
    """Re-lay a saved ring buffer for a (possibly different) ``window``: the newest entries, oldest first."""
    ring = ring.detach().float().cpu()
    if ring.numel() == window:
        return ring.clone(), position % window
    ordered = torch.roll(ring, -(position % max(ring.numel(), 1)))  # oldest ... newest
    kept = ordered[-window:]
    out = torch.full((window,), math.nan)
    out[: kept.numel()] = kept
    return out, kept.numel() % window
