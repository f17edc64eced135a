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
    LossFloor,
    known_floor,
    loss_call_for,
    record_loss_calls,
)
from lightning_recipes.checks.loss._loss_probe import input_bounds, loss_floor, modules_run
from lightning_recipes.checks.report import CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import batch_size_of
from lightning_recipes.harness.isolation import preserved_rng
from lightning_recipes.harness.trial_fit import trial_fit

__all__ = ["OverfitBatchCheck"]

_UNTRAINED_SHARE = 0.1  # a fit short of its target with this share of the weights untrained: said so
_MIN_FALL = 1e-3  # a loss of unknown floor that fell less than this share of its start did not fall at all
_WARM = 0.5  # a fit short of its target whose schedule kept the lr under this share of its peak: not judged
_ACTION = "Check the learning rate (too high diverges, too low crawls) and param_groups; run grad_flow."


class OverfitBatchCheck(SanityCheck):
    """Train a copy on one small batch with a real ``Trainer``: the loss must fall toward its floor.
    Logged as ``preflight/overfit_batch`` (best / initial loss). Cost: up to ``max_steps`` steps.

    Args:
        max_steps: Step budget.
        target_ratio: Pass when the loss falls to this fraction of its initial value, in (0, 1).
        num_samples: Samples taken from the first batch (``None``: the whole batch).

    Example:
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> report = preflight(TinyClassifier(lr=0.5), train_dataloaders=random_classification_loader(),
        ...                    checks=[OverfitBatchCheck(max_steps=100)], num_threads=1)
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
        check_int("num_samples", num_samples, minimum=1, optional=True)
        self.max_steps, self.target_ratio, self.num_samples = max_steps, target_ratio, num_samples

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        context.require_automatic_optimization(model)
        built = context.build_optimizers(model)  # first: configure_optimizers may set what the step reads
        samples = self.num_samples or 2**31 - 1
        with preserved_rng():  # the batch the trial fits (read as trial_fit reads it), its loss and floor
            torch.manual_seed(context.seed)
            batch, *other = context.read_train_batches(2, samples)
            with record_loss_calls(input_bounds) as calls:
                loss = context.training_loss(model, batch)
            with record_loss_calls(input_bounds) as other_calls:  # a second batch: a constant multiple's
                again = (other_calls, context.training_loss(model, other[0])) if other else None
        call = loss_call_for(calls, loss)
        floor, known = (None if call is None else loss_floor(call)), known_floor(calls, loss, again)
        size = batch_size_of(batch, context.input_key)
        details: dict[str, Any] = {"samples": size}
        shown = floor if floor is not None and floor.bounded else known  # a bound's floor first
        if shown is not None:
            details |= {"floor": shown.value, "floor_from": shown.how}
        on, start = f"{size or 'one batch of'} samples", float(loss.detach())
        target = _target(start, known, self.target_ratio)
        if floor is not None and floor.bounded and floor.value > target:  # provably unreachable: not trained
            details |= {"initial": start, "target": target}
            summary = f"the loss floor {floor.value:.4g} lies above the overfit target {target:.4g}"
            return self.verdict("fail", summary, details, action=floor.fix)
        ratio = min(1.0, max((start - target) / abs(start), 1e-6)) if start else 1.0  # its early stop
        fit = trial_fit(context, steps=self.max_steps, max_samples=samples, fit_ratio=ratio, validate=False)
        values = fit.train_losses or [math.nan]
        initial, finite = values[0], [v for v in values if math.isfinite(v)]
        best = min(finite) if finite else math.nan
        target = _target(initial, known, self.target_ratio)
        peak = max((g.get("lr", 0.0) for o in built.optimizers for g in o.param_groups), default=0.0)
        reached = max((s.lr for s in fit.steps), default=0.0)
        details |= {"initial": initial, "best": best, "final": values[-1], "target": target}
        details |= {"steps": len(values), "curve": [round(v, 5) for v in values], "optimizer": fit.optimizers}
        if initial != 0 and math.isfinite(best):
            details["measured"] = best / initial
        fell = f"loss {initial:.4g} -> best {best:.4g} in {len(values)} steps on {on}"
        if len(finite) < len(values):
            bad = next(i for i, v in enumerate(values) if not math.isfinite(v))
            summary = f"the loss became {values[bad]} at step {bad} while fitting {on}"
            return self.verdict("fail", summary, details, action="Lower the learning rate; " + _ACTION)
        if best <= target or fit.stopped == "fitted":
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
            action = "Unfreeze what should learn and put it in the optimizer (if unplanned)."
            return self.verdict("warn", summary, details, action=action)
        if reached < _WARM * peak:
            summary = f"{fell}: not judged, the schedule kept the lr at {reached / peak:.0%} of its peak"
            action = "Judge it with OverfitBatchCheck(max_steps=...) beyond the warm-up."
            return self.verdict("inconclusive", summary, details, action=action)
        if known is not None and best <= initial - 0.5 * (initial - target):
            action = "Give it more steps (OverfitBatchCheck(max_steps=...)) or a larger learning rate."
            return self.verdict("warn", f"{fell}: half way to {target:.4g}", details, action=action)
        details["never_moved"] = not moved
        why = "it cannot memorise them" + (f" ({target:.4g})" if moved else ", the loss never moved")
        if moved and known is None:
            why = f"it fell under {_MIN_FALL:.1%} of its start, it cannot learn them"
        return self.verdict("fail", f"{fell}: {why}", details, action=_ACTION)


def _target(initial: float, known: LossFloor | None, ratio: float) -> float:
    """``ratio`` of the way from ``initial`` to the known floor, else to ``ratio`` of its magnitude."""
    if known is not None:
        return known.value + ratio * (initial - known.value)
    return initial - (1 - ratio) * abs(initial)


def _untrained(
    context: CheckContext, model: pl.LightningModule, optimizers: list[Optimizer], batch: Any
) -> tuple[float, list[str]]:
    """The share of the weights ``training_step`` uses that no optimizer step can change."""
    ran = {id(module) for _, module in modules_run(context, model, batch)}
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
