"""Check that the model can memorise one small batch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from torch.optim import Optimizer
from typing_extensions import override

from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.loss._expected_loss import loss_call_for, record_loss_calls
from lightning_recipes.checks.loss._loss_probe import LossFloor, input_bounds, loss_floor
from lightning_recipes.checks.report import CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import Key, batch_size_of, slice_batch

__all__ = ["OverfitBatchCheck"]

_UNTRAINED_SHARE = 0.1  # a fit short of its target with this share of the weights untrained: said so
_UP = (10.0, 100.0, 1000.0)  # the LR probe's factors, tried upwards or downwards from the module's LR
_DOWN = (0.1, 0.01, 0.001)


class OverfitBatchCheck(SanityCheck):
    """Train a copy on one fixed small batch for at most ``max_steps`` steps; the loss must reach
    ``target_ratio`` of its way from the initial value down to its floor (0, or a known floor such as label
    smoothing's).

    ``pass`` at the target; ``fail`` when a floor proven from the output's range (probabilities into a logits
    loss, a clamp) lies above the target, when the loss is not finite, or when it does not get half way; ``warn``
    half way, or short with 10% or more of the weights untrained (frozen, in no optimizer). A failed fit runs
    a learning-rate probe (fresh copies at 10x, 100x, 1000x and 0.1x, ...) that says whether another learning
    rate memorises the batch. Logged as ``preflight/overfit_batch`` (best / initial loss). Guide:
    ``docs/guides/preflight.md#overfit_batch``.

    Cost: up to ``max_steps`` steps on a small batch; on a failed fit up to 6 probes of as many.

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
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
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
        lr = _first_lr(built.optimizers)
        run = self._train(context, model, built.optimizers, batch, record=True)
        values = run.curve
        initial, steps, target, floor = values[0], len(values), run.target, run.floor
        finite = [v for v in values if math.isfinite(v)]
        best = min(finite) if finite else math.nan
        details: dict[str, Any] = {
            "initial": initial,
            "best": best,
            "final": values[-1],
            "target": target,
            "steps": steps,
            "samples": size,
            "curve": [round(v, 5) for v in values],
            "optimizer": built.note,
            "lr": lr,
        }
        if floor is not None:
            details |= {"floor": floor.value, "floor_from": floor.how}
        if initial != 0 and math.isfinite(best):
            details["measured"] = best / initial
        fell = f"loss {initial:.4g} -> best {best:.4g} in {steps} steps on {size or 'one batch of'} samples"
        if floor is not None and floor.bounded and target is not None and floor.value > target:
            action = (
                floor.fix
                or "Return raw logits and let the loss apply the softmax/sigmoid; drop the clamp/tanh."
            )
            summary = (
                f"the loss floor {floor.value:.4g} lies above the overfit target {target:.4g}: it cannot fit"
            )
            return CheckResult(self.name, "fail", summary, details, action=action)
        if len(finite) < len(values):
            bad = next(i for i, v in enumerate(values) if not math.isfinite(v))
            lr_fits = self._probe(context, batch, run, lr, diverged=True, details=details) if bad else []
            summary = f"the loss became {values[bad]} at step {bad} while overfitting {size or 'one batch of'} samples"
            return CheckResult(self.name, "fail", summary, details, action=_lr_action(lr_fits, lr))
        assert target is not None
        if best <= target:
            return CheckResult(self.name, "pass", f"{fell} (target {target:.4g}): it can fit data", details)
        moved = max(finite) != min(finite)
        share, untrained = _untrained(context, model, built.optimizers, batch) if moved else (0.0, [])
        if share >= _UNTRAINED_SHARE:
            details |= {"untrained_share": share, "untrained": untrained}
            action = "Unfreeze what should learn and put it in the optimizer; if planned (fine-tuning), ignore this."
            summary = f"{fell}, short of {target:.4g} with {share:.0%} of the weights untrained"
            return CheckResult(self.name, "warn", summary, details, action=action)
        if best <= initial - 0.5 * (initial - target):
            action = "Give it more steps (OverfitBatchCheck(max_steps=...)) or a larger learning rate."
            return CheckResult(self.name, "warn", f"{fell}: half way to {target:.4g}", details, action=action)
        if not moved:
            details["never_moved"] = True
            action = (
                "No gradient reaches the weights: run grad_flow; clip gradients instead of clamping the loss."
            )
            return CheckResult(self.name, "fail", f"{fell}: the loss never moved", details, action=action)
        diverged = values[-1] > initial or max(finite[1:], default=initial) > 1.5 * abs(initial)
        lr_fits = self._probe(context, batch, run, lr, diverged=diverged, details=details)
        summary = f"{fell}: it cannot memorise them (target {target:.4g})"
        return CheckResult(self.name, "fail", summary, details, action=_lr_action(lr_fits, lr))

    def _train(
        self,
        context: CheckContext,
        model: pl.LightningModule,
        optimizers: list[Optimizer],
        batch: Any,
        *,
        record: bool = False,
        warmup_steps: int = 0,
        target: float | None = None,
    ) -> _Run:
        """Up to ``max_steps`` steps on ``batch``; stops at the target or on a non-finite loss."""
        curve: list[torch.Tensor] = []
        run = _Run([], target)
        peaks = [[group["lr"] for group in o.param_groups] for o in optimizers]
        for step in range(self.max_steps):
            for optimizer, lrs in zip(optimizers, peaks) if warmup_steps else ():
                for group, peak in zip(optimizer.param_groups, lrs):
                    group["lr"] = peak * min(1.0, (step + 1) / warmup_steps)
            if step == 0 and record:
                with record_loss_calls(input_bounds) as calls:
                    loss = context.optimization_step(model, optimizers, batch)
                call = loss_call_for(calls, loss)
                run.floor = None if call is None else loss_floor(call)
            else:
                loss = context.optimization_step(model, optimizers, batch)
            curve.append(loss.float())
            if step == 0:
                initial = float(curve[0])  # sync: once
                if not math.isfinite(initial):
                    break
                floor = run.floor
                if run.target is None and floor is not None and not floor.bounded and floor.value < initial:
                    run.target = floor.value + self.target_ratio * (initial - floor.value)
                elif run.target is None:
                    run.target = initial - (1 - self.target_ratio) * abs(initial)
                if run.floor is not None and run.floor.bounded and run.floor.value > run.target:
                    break  # provably unreachable: no need to train
            elif step % 5 == 4 or step == self.max_steps - 1:
                last = float(curve[-1])  # sync: every 5 steps
                if (
                    run.target is not None
                    and float(torch.stack(curve).nan_to_num(nan=math.inf).min()) <= run.target
                ):
                    break
                if not math.isfinite(last) or (warmup_steps and last > 10 * abs(float(curve[0])) + 1):
                    break  # diverged
        run.curve = torch.stack(curve).tolist()
        return run

    def _probe(
        self,
        context: CheckContext,
        batch: Any,
        run: _Run,
        lr: float | None,
        *,
        diverged: bool,
        details: dict[str, Any],
    ) -> list[float]:
        """Train fresh copies at other learning rates (with a short linear warm-up); the LRs that fit."""
        if lr is None or lr <= 0 or run.target is None:
            return []
        tried, fits = [], []
        for direction in (_DOWN, _UP) if diverged else (_UP, _DOWN):
            for factor in direction:
                model = context.copy_model()
                optimizers = context.build_optimizers(model).optimizers
                for group in (g for o in optimizers for g in o.param_groups):
                    group["lr"] = group["lr"] * factor
                warmup = max(1, self.max_steps // 10)
                curve = self._train(
                    context, model, optimizers, batch, warmup_steps=warmup, target=run.target
                ).curve
                tried.append(lr * factor)
                if all(math.isfinite(v) for v in curve) and min(curve) <= run.target:
                    fits.append(lr * factor)
                elif fits:
                    break  # the working range ended
            if fits:
                break
        details["lr_probe"] = {"lr": lr, "tried": tried, "fit": fits}
        return fits


def _lr_action(fits: list[float], lr: float | None) -> str:
    if fits and lr is not None:
        verdict = "too high" if min(fits) < lr else "too low"
        return f"Your learning rate {lr:.3g} is {verdict}: LRs in [{min(fits):.3g}, {max(fits):.3g}] memorise the batch."
    return "Run grad_flow; check the loss and data path, the optimizer's param_groups and its lr."


@dataclass
class _Run:
    curve: list[float]
    target: float | None
    floor: LossFloor | None = None


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


def _first_lr(optimizers: list[Optimizer]) -> float | None:
    for group in (g for o in optimizers for g in o.param_groups):
        lr = group.get("lr")
        if isinstance(lr, (int, float, torch.Tensor)) and (
            not isinstance(lr, torch.Tensor) or lr.numel() == 1
        ):
            return float(lr)  # sync: once
    return None
