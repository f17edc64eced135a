"""Check that the model can memorise one small batch."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import BaseFinetuning
from torch.optim import Optimizer
from typing_extensions import override

from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks._budget import budget_seconds, out_of_time
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.loss._expected_loss import loss_call_for, record_loss_calls
from lightning_recipes.checks.loss._loss_probe import LossFloor, input_bounds, loss_floor
from lightning_recipes.checks.report import CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import Key, batch_size_of, slice_batch

__all__ = ["OverfitBatchCheck"]


class OverfitBatchCheck(SanityCheck):
    """Train a copy of the model on one fixed small batch and require the loss to fall to a target.

    The copy trains with its own optimizer at its peak learning rate for at most ``max_steps`` steps;
    ``pass`` at ``target_ratio`` x the initial loss (measured from a known floor), ``warn`` half way. A
    provable floor above the target (probabilities into a logits loss) fails at once. When memorisation
    fails, a learning-rate probe says whether another LR range memorises the batch. Out of time before the
    target is ``inconclusive``. Logged as ``preflight/overfit_batch`` (best / initial loss).

    Cost: up to ``max_steps`` steps on a small batch; on failure up to 12 short probes.

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
            batch = slice_batch(batch, self.num_samples, size)
            size = self.num_samples
        built = context.build_optimizers(model)
        optimizers, note = built.optimizers, built.note
        lr = _first_lr(optimizers)
        run = self._train(context, model, optimizers, batch, record=True)
        values = run.curve
        initial, steps = values[0], len(values)
        finite = [v for v in values if math.isfinite(v)]
        best = min(finite) if finite else math.nan
        details: dict[str, Any] = {
            "initial": initial,
            "best": best,
            "final": values[-1],
            "target": run.target,
            "steps": steps,
            "samples": size,
            "curve": [round(v, 5) for v in values],
            "optimizer": note,
        }
        if run.floor is not None:
            details["floor"] = run.floor.value
        if initial != 0 and math.isfinite(best):
            details["measured"] = best / initial
        where = f"one batch of {size} samples" if size else "one batch"
        if (
            run.floor is not None
            and run.floor.bounded
            and run.target is not None
            and run.floor.value > run.target
        ):
            return CheckResult(
                self.name,
                "fail",
                f"the loss cannot reach the overfit target: its floor is {run.floor.value:.4g} > target "
                f"{run.target:.4g} ({self.target_ratio:g} x the initial {initial:.4g}) on {where}, because "
                f"{run.floor.how}. "
                + (
                    run.floor.fix
                    or "Try: return raw logits from the model and let the loss apply the softmax/sigmoid "
                    "(cross_entropy and binary_cross_entropy_with_logits expect logits); drop the clamp/tanh "
                    "on the logits, or use the loss for probabilities (nll_loss on log-probabilities, "
                    "binary_cross_entropy)."
                ),
                details,
            )
        if len(finite) < len(values):
            first_bad = next(i for i, v in enumerate(values) if not math.isfinite(v))
            probe = ""
            if first_bad > 0:
                probe = self._probe(context, batch, run, lr, diverged=True, details=details)
            return CheckResult(
                self.name,
                "fail",
                f"the loss became {values[first_bad]} at step {first_bad} while overfitting {where}.{probe} "
                "Likely causes: learning rate far too high, NaN/Inf in the data, an unstable loss (log of 0, "
                "division by a batch statistic). Try: lower the learning rate 10x; run the data check; add "
                "gradient_clip_val.",
                details,
            )
        assert run.target is not None
        target = run.target
        fell = f"loss {initial:.4g} -> best {best:.4g} in {steps} steps on {where}"
        floor_note = (
            "" if run.floor is None else f", above the loss floor {run.floor.value:.4g} ({run.floor.how})"
        )
        if best <= target:
            how = floor_note or f" = {self.target_ratio:g} x initial"
            return CheckResult(
                self.name,
                "pass",
                f"{fell} (target {target:.4g}{how}): the model can fit data.",
                details,
            )
        if run.budget_stopped and not (len(finite) >= _BLOCKED_STEPS and max(finite) == min(finite)):
            # A fit not reached in the steps the budget allowed says nothing: no verdict (a loss that did not
            # move at all over several steps is a blocked fit whatever the budget: judged below).
            details["stopped_by_time_budget"] = True
            return CheckResult(
                self.name,
                "inconclusive",
                f"{fell}: the time budget ({_seconds()}) stopped it after {steps} of {self.max_steps} steps, "
                f"before the target {target:.4g}; no verdict. Try: a larger `time_budget` for this check (or "
                "None), `num_threads=1` on a busy CPU, or fewer `num_samples`.",
                details,
            )
        halfway = initial - 0.5 * (initial - target)
        share, untrained = (
            _untrained(context, model, optimizers, batch) if max(finite) != min(finite) else (0, [])
        )
        if share >= _UNTRAINED_SHARE:
            # a fit short of its target with many weights left out says nothing about the learning rate
            details["untrained_share"] = share
            by = _frozen_by(context)
            return CheckResult(
                self.name,
                "warn" if by or best <= halfway else "fail",
                f"{fell}: short of the target {target:.4g}{floor_note} with {share:.0%} of the weights not "
                f"trained: {len(untrained)} parameter(s) frozen (requires_grad=False) or in no optimizer "
                f"group with lr > 0{by}: {_names(untrained)}. The check fits the model as it trains now: "
                "this says nothing about the learning rate. Try: "
                + (
                    "nothing if the frozen start is planned (run the preflight without the schedule to fit "
                    "the whole model)."
                    if by
                    else "unfreeze what should learn (requires_grad_(True)) and put it in the optimizer; if "
                    "the freezing is planned (fine-tuning, LoRA), OverfitBatchCheck(max_steps=...) with more "
                    "steps."
                ),
                details,
            )
        if best <= halfway:
            return CheckResult(
                self.name,
                "warn",
                f"{fell}: it fell, but not to the target {target:.4g}{floor_note} within {self.max_steps} "
                "steps. Likely causes: a small learning rate, strong regularisation (dropout, weight decay) "
                "or a loss with a high floor. Try: `OverfitBatchCheck(max_steps=...)` with more steps, or a "
                "larger learning rate.",
                details,
            )
        if max(finite) == min(finite):
            probe = (
                " The loss never moved at all, so no learning rate can help (LR probe not run): no gradient "
                "reaches the weights."
            )
        else:
            diverged = values[-1] > initial or max(finite[1:], default=initial) > 1.5 * abs(initial)
            probe = self._probe(context, batch, run, lr, diverged=diverged, details=details)
            if details.get("lr_probe", {}).get("fit"):
                return CheckResult(
                    self.name,
                    "fail",
                    f"{fell}: the model cannot memorise {where} at its learning rate (expected <= "
                    f"{target:.4g}, {self.target_ratio:g} x initial).{probe}",
                    details,
                )
        return CheckResult(
            self.name,
            "fail",
            f"{fell}: the model cannot memorise {where} (expected <= {target:.4g}, {self.target_ratio:g} x "
            f"initial).{probe} Likely causes: no gradient reaches the weights (a loss clamped or clipped "
            "instead of the gradient, a .detach()/.item()/no_grad in the loss path; see grad_flow), a "
            "learning rate of ~0 or an optimizer over the wrong parameters, a loss that does not depend on "
            "the outputs, or frozen layers. Try: run the grad_flow check; print the optimizer's param_groups "
            "and lr; clip gradients with Trainer(gradient_clip_val=...) instead of clamping the loss.",
            details,
        )

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
        """Up to ``max_steps`` steps on ``batch``; stops at the target, on a non-finite loss, out of time."""
        curve: list[torch.Tensor] = []
        run = _Run([], target)
        peaks = [[group["lr"] for group in o.param_groups] for o in optimizers]
        for step in range(self.max_steps):
            if step > 0 and out_of_time():
                run.budget_stopped = True
                break
            if warmup_steps:
                factor = min(1.0, (step + 1) / warmup_steps)
                for optimizer, lrs in zip(optimizers, peaks):
                    for group, peak in zip(optimizer.param_groups, lrs):
                        group["lr"] = peak * factor
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
                if run.target is None:
                    run.target = initial - (1 - self.target_ratio) * abs(initial)
                    if run.floor is not None and not run.floor.bounded and run.floor.value < initial:
                        run.target = run.floor.value + self.target_ratio * (initial - run.floor.value)
                if run.floor is not None and run.floor.bounded and run.floor.value > run.target:
                    break  # provably unreachable: no need to train
            elif step % 5 == 4 or step == self.max_steps - 1:
                last = float(curve[-1])  # sync: every 5 steps
                best_so_far = float(torch.stack(curve).nan_to_num(nan=math.inf).min())
                if run.target is not None and best_so_far <= run.target:
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
    ) -> str:
        """Train fresh copies at other learning rates (with a short linear warm-up) and say which fit."""
        if lr is None or lr <= 0 or run.target is None:
            return ""
        first, second = (_DOWN, _UP) if diverged else (_UP, _DOWN)
        warmup = max(1, self.max_steps // 10)
        fits: list[float] = []
        tried: list[float] = []
        stopped = False
        for direction in (first, second):
            for factor in direction:
                if out_of_time():
                    stopped = True
                    break
                model = context.copy_model()
                optimizers = context.build_optimizers(model).optimizers
                for optimizer in optimizers:
                    for group in optimizer.param_groups:
                        group["lr"] = group["lr"] * factor
                probe = self._train(context, model, optimizers, batch, warmup_steps=warmup, target=run.target)
                tried.append(factor)
                finite = [v for v in probe.curve if math.isfinite(v)]
                if len(finite) == len(probe.curve) and min(finite) <= run.target:
                    fits.append(factor)
                elif fits:
                    break  # the working range ended
            if fits or stopped:
                break
        details["lr_probe"] = {"lr": lr, "tried": [lr * f for f in tried], "fit": [lr * f for f in fits]}
        budget = (
            f" (the time budget ({_seconds()}) stopped the LR probe after {len(tried)} learning rates)"
            if stopped
            else ""
        )
        if fits:
            low, high = lr * min(fits), lr * max(fits)
            verdict = "diverges (too high)" if min(fits) < 1 else "is too low"
            return (
                f" LR probe ({len(tried)} fresh copies, {warmup}-step linear warm-up){budget}: your learning "
                f"rate {lr:.3g} {verdict}; LRs in [{low:.3g}, {high:.3g}] memorise the batch. Try: lr in "
                "that range (with a warm-up)."
            )
        if not tried:
            return f" LR probe not run{budget}."
        span = [lr * f for f in tried]
        return (
            f" LR probe{budget}: no LR in [{min(span):.3g}, {max(span):.3g}] (x{min(tried):g} to "
            f"x{max(tried):g} of {lr:.3g}, {warmup}-step warm-up) memorises the batch either: the model "
            "cannot fit it (too little capacity, or a bug in the loss/data path), not the learning rate."
        )


_UNTRAINED_SHARE = 0.1  # a fit short of its target with this share of the weights untrained: said so
_SHOWN = 6
_BLOCKED_STEPS = 5  # a loss exactly constant over this many steps: no gradient reaches the weights
_UP = (3.0, 10.0, 30.0, 100.0, 300.0, 1000.0)
_DOWN = (0.3, 0.1, 0.03, 0.01, 0.003, 0.001)


@dataclass
class _Run:
    curve: list[float]
    target: float | None
    floor: LossFloor | None = None
    budget_stopped: bool = False


def _untrained(
    context: CheckContext, model: pl.LightningModule, optimizers: list[Optimizer], batch: Any
) -> tuple[float, list[str]]:
    """The share of the weights (elements) of the modules ``training_step`` runs that no step can change -
    ``requires_grad=False``, or in no optimizer group with ``lr > 0`` - and their names (one more forward)."""
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


def _frozen_by(context: CheckContext) -> str:
    """``", frozen by FinetuneSchedule(['backbone']) until epoch 2"`` when a fine-tuning callback of the
    Trainer (Lightning's ``BaseFinetuning``, or one with an ``unfreeze_at_epoch``/``_step``) froze weights
    at fit start, else ``""``."""
    for callback in getattr(context.trainer, "callbacks", None) or []:
        when = [
            f" until {unit} {getattr(callback, f'unfreeze_at_{unit}')}"
            for unit in ("epoch", "step")
            if getattr(callback, f"unfreeze_at_{unit}", None) is not None
        ]
        if isinstance(callback, BaseFinetuning) or when:
            modules = getattr(callback, "modules", None)
            what = type(callback).__name__ + (f"({list(modules)})" if modules else "")
            return f", frozen by {what}{''.join(when[:1])}"
    return ""


def _names(names: list[str]) -> str:
    return ", ".join(names[:_SHOWN]) + (f", ... (+{len(names) - _SHOWN} more)" if len(names) > _SHOWN else "")


def _first_lr(optimizers: list[Optimizer]) -> float | None:
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            lr = group.get("lr")
            if isinstance(lr, (int, float)):
                return float(lr)
            if isinstance(lr, torch.Tensor) and lr.numel() == 1:
                return float(lr)  # sync: once
    return None


def _seconds() -> str:
    budget = budget_seconds()
    return "no limit" if budget is None else f"{budget:g} s"
