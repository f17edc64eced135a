"""StabilityGuard's per-step gradient read and ``mode="skip_step"``: drop an optimizer step whose gradient
norm is non-finite on any rank, before it moves a parameter or the optimizer state."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from torch import Tensor

from lightning_recipes.callbacks._norms import STEP_POWERS
from lightning_recipes.norms import local_tensor, norm_power, power_to_norm, total_norm_from_powers

__all__ = ["StepSkipper", "optimizer_grad_norm", "scaler_enabled", "step_grad_norm"]


class StepSkipper:
    """Decides, before each optimizer step, whether to drop it; remembers it until the batch ends.

    Cost: one host read of the norm's finiteness and one ``reduce_boolean_decision`` per optimizer step.

    Example:
        >>> from lightning_recipes.testing import fast_trainer
        >>> skipper, optimizer = StepSkipper(), torch.optim.SGD([torch.nn.Parameter(torch.ones(2))], lr=0.1)
        >>> skipper.maybe_skip(fast_trainer(), optimizer, torch.tensor(float("nan")))
        (2, nan)
        >>> skipper.skipped, skipper.take_skipped(), skipper.skipped
        (True, True, False)
    """

    def __init__(self) -> None:
        self.skipped = False  # the optimizer step of the current batch was dropped

    def maybe_skip(
        self, trainer: pl.Trainer, optimizer: torch.optim.Optimizer, norm: Tensor
    ) -> tuple[int, float] | None:
        """Drop the step (every gradient to ``None``) when ``norm`` is non-finite on any rank.

        Returns ``None`` when the step stands, else this rank's ``(cause code, value)`` for the event (``(0,
        0.0)`` on a rank whose own norm was finite).
        """
        local_bad = not bool(torch.isfinite(norm))  # sync: once per optimizer step, skip_step mode only
        if not trainer.strategy.reduce_boolean_decision(local_bad, all=False):
            return None
        optimizer.zero_grad(set_to_none=True)
        self.skipped = True
        return (2, float(norm)) if local_bad else (0, 0.0)

    def take_skipped(self) -> bool:
        """Whether this batch's step was dropped; resets for the next batch."""
        skipped, self.skipped = self.skipped, False
        return skipped


def optimizer_grad_norm(optimizer: torch.optim.Optimizer, step: int) -> Tensor | None:
    """The local 2-norm of ``optimizer``'s gradients (:func:`step_grad_norm`), ``None`` without any."""
    grads = [p.grad for group in optimizer.param_groups for p in group["params"] if p.grad is not None]
    return step_grad_norm(grads, step) if grads else None


def step_grad_norm(grads: list[Tensor], step: int) -> Tensor:
    """The local 2-norm of ``grads`` (no sync), shared with ``GradNormMonitor`` / ``AdaptiveGradClip``.

    If one of them already read these very gradients this step (``STEP_POWERS``), reuse its result instead of
    reading every gradient again; otherwise compute it and publish it for them. Sharded (DTensor) gradients
    use their local shards: a non-finite value anywhere is non-finite on some rank, and the check is
    reduced over ranks.

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


def scaler_enabled(trainer: pl.Trainer) -> bool:
    """Whether a ``GradScaler`` is active (its overflow skips are normal: no gradient-norm check then)."""
    scaler = getattr(trainer.precision_plugin, "scaler", None)
    return scaler is not None and bool(scaler.is_enabled())
