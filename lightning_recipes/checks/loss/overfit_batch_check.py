"""Check that the model can memorise one small batch."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
import torch
from torch.optim import Optimizer
from typing_extensions import Unpack, override

from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.loss._expected_loss import (
    KnownFloor,
    known_floor,
    loss_call_for,
    record_loss_calls,
)
from lightning_recipes.checks.loss._loss_probe import LossFloor, input_bounds, loss_floor
from lightning_recipes.checks.report import CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import batch_size_of, slice_batch

__all__ = ["OverfitBatchCheck"]

_UNTRAINED_SHARE = 0.1  # a fit short of its target with this share of the weights untrained: said so
_MIN_FALL = 1e-3  # a loss of unknown floor that fell less than this share of its start did not fall at all
_ACTION = "Check the learning rate (too high diverges, too low crawls) and param_groups; run grad_flow."


class OverfitBatchCheck(SanityCheck):
    """Train a copy on one fixed small batch for at most ``max_steps`` steps: the loss must fall
    ``1 - target_ratio`` of its way from the initial value to its floor, judged only where that floor is
    known (:func:`known_floor`: 0 for class indices and regression, the targets' entropy for probability
    targets and label smoothing, summed over a plain sum of such losses).

    A loss whose floor is not known (hand-written, rescaled, offset) passes when it falls by
    ``1 - target_ratio`` of its magnitude and fails only when it did not fall at all (by less than 0.1% of
    its start); between the two the check is ``inconclusive`` (it cannot tell a fit short of the floor from
    a floor it does not know). The verdicts are in the guide; logged as ``preflight/overfit_batch`` (best /
    initial loss). Cost: up to ``max_steps`` steps on a small batch.

    Args:
        max_steps: Step budget.
        target_ratio: Pass when the loss falls to this fraction of its initial value, in (0, 1).
        num_samples: Samples taken from the first batch (``None``: the whole batch).

    Raises:
        ValueError: If ``max_steps < 1``, ``target_ratio`` is outside (0, 1) or ``num_samples < 1``.

    Example:
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> report = preflight(
        ...     TinyClassifier(lr=0.5), train_dataloaders=random_classification_loader(),
        ...     checks=[OverfitBatchCheck(max_steps=100)], num_threads=1,
        ... )
        >>> result = report["overfit_batch"]
        >>> result.status, result.details["best"] < 0.3 * result.details["initial"]
        ('pass', True)
    """

    name = "overfit_batch"

    def __init__(
        self,
        max_steps: int = 150,
        target_ratio: float = 0.3,
        num_samples: int | None = 16,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("max_steps", max_steps, minimum=1)
        check_in_range("target_ratio", target_ratio, 0, 1, low_open=True, high_open=True)
        if num_samples is not None:
            check_int("num_samples", num_samples, minimum=1)
        self.max_steps = max_steps
        self.target_ratio = target_ratio
        self.num_samples = num_samples

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        context.require_automatic_optimization(model)
        batch = context.train_batches(1)[0]
        size = batch_size_of(batch, context.input_key)
        if size is not None and self.num_samples is not None and size > self.num_samples:
            batch, size = slice_batch(batch, self.num_samples, size), self.num_samples
        built = context.build_optimizers(model)
        values, target, floor, known = self._train(context, model, built.optimizers, batch)
        initial, steps = values[0], len(values)
        finite = [v for v in values if math.isfinite(v)]
        best = min(finite) if finite else math.nan
        details: dict[str, Any] = {"initial": initial, "best": best, "final": values[-1], "target": target}
        details |= {
            "steps": steps,
            "samples": size,
            "curve": [round(v, 5) for v in values],
            "optimizer": built.note,
        }
        if floor is not None and floor.bounded:
            details |= {"floor": floor.value, "floor_from": floor.how}
        elif known is not None:
            details |= {"floor": known.value, "floor_from": known.how}
        if initial != 0 and math.isfinite(best):
            details["measured"] = best / initial
        fell = f"loss {initial:.4g} -> best {best:.4g} in {steps} steps on {size or 'one batch of'} samples"
        if floor is not None and floor.bounded and target is not None and floor.value > target:
            summary = (
                f"the loss floor {floor.value:.4g} lies above the overfit target {target:.4g}: it cannot fit"
            )
            action = (
                floor.fix or "Return raw logits, let the loss apply the softmax/sigmoid; drop the clamp/tanh."
            )
            return self.verdict("fail", summary, details, action=action)
        if len(finite) < len(values):
            bad = next(i for i, v in enumerate(values) if not math.isfinite(v))
            summary = (
                f"the loss became {values[bad]} at step {bad} while fitting {size or 'one batch of'} samples"
            )
            return CheckResult(
                self.name, "fail", summary, details, action="Lower the learning rate; " + _ACTION
            )
        assert target is not None
        if best <= target:
            return self.verdict("pass", f"{fell} (target {target:.4g}): it can fit data", details)
        fall = initial - best
        if known is None and fall > _MIN_FALL * abs(initial):
            details["floor"] = None
            share_fell = f" ({fall / abs(initial):.0%} down)" if initial else ""
            summary = f"{fell}{share_fell}: not judged, the loss's floor is unknown"
            action = "Compare details['curve'] with the lowest value your loss can take."
            return self.verdict("inconclusive", summary, details, action=action)
        moved = max(finite) != min(finite)
        share, untrained = _untrained(context, model, built.optimizers, batch) if moved else (0.0, [])
        if share >= _UNTRAINED_SHARE:
            details |= {"untrained_share": share, "untrained": untrained}
            summary = f"{fell}, short of {target:.4g} with {share:.0%} of the weights untrained"
            action = (
                "Unfreeze what should learn, put it in the optimizer; if planned (fine-tuning), ignore this."
            )
            return self.verdict("warn", summary, details, action=action)
        if known is not None and best <= initial - 0.5 * (initial - target):
            action = "Give it more steps (OverfitBatchCheck(max_steps=...)) or a larger learning rate."
            return self.verdict("warn", f"{fell}: half way to {target:.4g}", details, action=action)
        details["never_moved"] = not moved
        summary = f"{fell}: " + (
            "the loss never moved, it cannot memorise them"
            if not moved
            else f"it cannot memorise them ({target:.4g})"
            if known is not None
            else f"it fell under {_MIN_FALL:.1%} of its start, it cannot learn them"
        )
        return self.verdict("fail", summary, details, action=_ACTION)

    def _train(
        self, context: CheckContext, model: pl.LightningModule, optimizers: list[Optimizer], batch: Any
    ) -> tuple[list[float], float | None, LossFloor | None, KnownFloor | None]:
        """Up to ``max_steps`` steps on ``batch`` (stops at the target or a non-finite loss): the loss curve,
        the target (``target_ratio`` of the way from the initial loss to its known floor, else to 0), the
        floor an input bound proves, and the loss's own floor where known."""
        curve: list[torch.Tensor] = []
        target, floor, known = None, None, None
        for step in range(self.max_steps):
            if step == 0:
                with record_loss_calls(input_bounds) as calls:
                    loss = context.optimization_step(model, optimizers, batch)
                call = loss_call_for(calls, loss)
                floor = None if call is None else loss_floor(call)
                initial = float(loss)  # sync: once
                if not math.isfinite(initial):
                    return [initial], None, floor, None
                known = known_floor(calls, loss)
                target = initial - (1 - self.target_ratio) * abs(initial)
                if known is not None:
                    target = known.value + self.target_ratio * (initial - known.value)
                curve.append(loss.float())
                if floor is not None and floor.bounded and floor.value > target:
                    break  # provably unreachable: no need to train
                continue
            curve.append(context.optimization_step(model, optimizers, batch).float())
            if step % 5 == 4:  # sync: every 5 steps
                lowest = float(torch.stack(curve).nan_to_num(nan=math.inf).min())
                if lowest <= (-math.inf if target is None else target) or not math.isfinite(float(curve[-1])):
                    break
        return torch.stack(curve).tolist(), target, floor, known


def _untrained(
    context: CheckContext, model: pl.LightningModule, optimizers: list[Optimizer], batch: Any
) -> tuple[float, list[str]]:
    """The share of the weights of the modules ``training_step`` runs that no step can change
    (``requires_grad=False``, or in no optimizer group with ``lr > 0``), and their names."""
    ran: set[int] = set()
    handles = [m.register_forward_pre_hook(lambda module, _: ran.add(id(module))) for m in model.modules()]
    try:
        with torch.no_grad():
            context.training_loss(model, batch)
    finally:
        for handle in handles:
            handle.remove()
    stepped = {id(p) for o in optimizers for g in o.param_groups if g.get("lr", 1) != 0 for p in g["params"]}
    used = {
        id(p): (f"{prefix}.{name}".lstrip("."), p)
        for prefix, module in model.named_modules()
        if id(module) in ran
        for name, p in module.named_parameters(recurse=False)
    }
    idle = [(name, p.numel()) for name, p in used.values() if not p.requires_grad or id(p) not in stepped]
    total = sum(p.numel() for _, p in used.values())
    return (sum(n for _, n in idle) / total if total else 0.0), [name for name, _ in idle]
