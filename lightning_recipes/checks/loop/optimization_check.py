"""Check the optimisation stage of a real training loop (automatic or manual): backward, clear, step."""

from __future__ import annotations

import math
from typing import Any, Literal

from typing_extensions import override

from lightning_recipes._validation import check_int
from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import Key
from lightning_recipes.harness.trial_fit import StepRecord, TrialFit, trial_fit

__all__ = ["OptimizationCheck"]

_SHOWN = 6  # names listed in a message; details hold them all
#: Relative float noise allowed between the gradients a step used and the sum of the backward passes'
#: contributions (the same additions in the same order: equal to ~1e-7 in float32).
REL_TOL = 1e-3
#: Share of the previous step's gradients still present at a step for "never cleared" (0 when cleared,
#: 1 when never cleared; a clipped or re-scaled gradient gives <= 0).
CARRIED = 0.5


class OptimizationCheck(SanityCheck):
    """Fit a copy with a real ``Trainer`` on one batch and check each ``optimizer.step()`` against the
    backward passes before it, under automatic **and manual** optimisation.

    Per optimizer and step: the step follows a backward; its gradients are those of its own backward passes
    (not the previous step's, not zeroed in between; scaling by clipping or AMP allowed); every parameter that
    gets a gradient is in an optimizer; the step changes the parameters with a non-zero gradient.

    Cost: one small ``Trainer.fit`` of ``steps`` batches (shared with ``validation_path``).

    Args:
        steps: Training batches of the trial fit at most.
        max_samples: Samples of the first training batch used.

    Raises:
        ValueError: If ``steps < 2`` or ``max_samples < 1``.

    Example:
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> report = preflight(TinyClassifier(), train_dataloaders=random_classification_loader(),
        ...                    checks=[OptimizationCheck()], num_threads=1, progress=False)
        >>> result = report["optimization"]
        >>> result.status, result.details["steps"] >= 2, result.details["max_residual"] < 1e-3
        ('pass', True, True)
    """

    name = "optimization"

    def __init__(
        self,
        steps: int = 30,
        max_samples: int = 64,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_int("steps", steps, minimum=2)
        check_int("max_samples", max_samples, minimum=1)
        self.steps = steps
        self.max_samples = max_samples

    @override
    def check(self, context: CheckContext) -> CheckResult:
        fit = trial_fit(context, steps=self.steps, max_samples=self.max_samples, should_stop=out_of_time)
        mode = "automatic" if fit.automatic else "manual"
        details: dict[str, Any] = {
            "optimization": mode,
            "optimizers": fit.optimizers,
            "batches": len(fit.train_losses),
            "steps": len(fit.steps),
            "received_grad": len(fit.received_grad),
            "seconds_trial": round(fit.seconds, 3),
        }
        if not fit.steps:
            if not fit.received_grad:
                raise CheckSkipped(
                    f"no optimizer step and no gradient in {len(fit.train_losses)} training batches of a "
                    f"trial fit ({mode} optimisation, optimizers: {fit.optimizers or 'none'}): nothing to "
                    "check."
                )
            return CheckResult(
                self.name,
                "fail",
                f"{len(fit.received_grad)} parameter(s) received gradients in {len(fit.train_losses)} "
                f"training batches of a trial fit ({mode} optimisation), but no optimizer.step() ran: "
                "training never changes the weights. Likely causes: `configure_optimizers` returns no "
                "optimizer, or manual optimisation never calls `opt.step()`. Try: call "
                "`self.optimizers().step()` after `self.manual_backward(loss)`.",
                details,
            )
        problems = _problems(fit, details)
        per_optimizer = [sum(1 for s in fit.steps if s.optimizer == i) for i in range(len(fit.optimizers))]
        details["steps_per_optimizer"] = per_optimizer
        where = (
            f"{len(fit.steps)} optimizer step(s) over {len(fit.train_losses)} batch(es) of a trial fit "
            f"({mode} optimisation, {', '.join(fit.optimizers)})"
        )
        if problems:
            return CheckResult(self.name, "fail", f"{where}: " + " | ".join(problems), details)
        if fit.stopped == "budget" and min(per_optimizer, default=0) < 2:
            return CheckResult(
                self.name,
                "inconclusive",
                f"{where}: the time budget stopped the trial before every optimizer stepped twice, so "
                "gradients carried across steps cannot be seen. Try: a larger `time_budget`, or fewer "
                "`max_samples`.",
                details,
            )
        if not fit.lr_positive:
            return CheckResult(
                self.name,
                "inconclusive",
                f"{where}: every step ran with lr 0 (a warm-up from 0 stepped per epoch?), so whether steps "
                "change the parameters cannot be judged; the gradient bookkeeping was correct.",
                details,
            )
        return CheckResult(
            self.name,
            "pass",
            f"{where}: every step followed a backward pass, used exactly the gradients contributed since the "
            f"previous step (largest relative residual {details['max_residual']:.1e}, tolerance {REL_TOL:g}"
            f"{details.get('note', '')}), and changed the parameters; all {len(fit.received_grad)} "
            "parameters that get gradients are in an optimizer.",
            details,
        )


def _problems(fit: TrialFit, details: dict[str, Any]) -> list[str]:
    """The broken invariants (a)-(d), each as a sentence; fills ``details`` with the numbers."""
    problems: list[str] = []
    no_backward = [s for s in fit.steps if s.backwards == 0]
    carried, cleared, scaled = [], [], []
    max_residual = 0.0
    for step in fit.steps:
        kind, relative = _gradient_kind(step)
        if math.isfinite(relative):
            max_residual = max(max_residual, relative)
        if kind == "carried":
            carried.append(step)
        elif kind == "cleared":
            cleared.append(step)
        elif kind == "scaled":
            scaled.append(step)
    details["max_residual"] = max_residual
    details["no_backward_steps"] = [s.batch for s in no_backward]
    details["carried_steps"] = [
        {"batch": s.batch, "optimizer": s.optimizer, "share": s.carried} for s in carried
    ]
    details["cleared_steps"] = [s.batch for s in cleared]
    details["not_in_optimizer"] = fit.not_in_optimizer
    details["never_changed"] = fit.never_changed
    if scaled:
        details["scaled_steps"] = len(scaled)
        details["note"] = f"; {len(scaled)} step(s) used them scaled down, as clipping does"
    if no_backward:
        first = no_backward[0]
        problems.append(
            f"{len(no_backward)} optimizer.step() call(s) ran with no backward pass since the previous step "
            f"of that optimizer (first: optimizer {first.optimizer} in batch {first.batch}); a step before "
            "the backward applies stale gradients, or none. Try: `opt.zero_grad(); "
            "self.manual_backward(loss); opt.step()`, in that order."
        )
    if carried:
        first = carried[0]
        problems.append(
            f"the gradients at {len(carried)} step(s) still held the previous step's gradients (share "
            f"{first.carried:.2f} of them at optimizer {first.optimizer}, batch {first.batch}; "
            f"|g - c - g_prev| = {first.carried_residual:.1e} |g_prev|): gradients accumulate across steps "
            "because they are never cleared. Likely causes: no `opt.zero_grad()` in manual optimisation, "
            "or an `optimizer_zero_grad` override that does nothing. Try: call `opt.zero_grad()` once per "
            "step (before the backward passes of that step)."
        )
    if cleared:
        first = cleared[0]
        problems.append(
            f"at {len(cleared)} step(s) the gradients were zero although backward passes since the previous "
            f"step contributed |c| = {first.contribution_norm:.3g} (first: optimizer {first.optimizer}, "
            f"batch {first.batch}): they were cleared between the backward and the step, so the step used "
            "none. Try: `opt.zero_grad()` before `self.manual_backward(loss)`, not between it and "
            "`opt.step()`."
        )
    if fit.not_in_optimizer:
        problems.append(
            f"{len(fit.not_in_optimizer)} parameter(s) receive gradients in training but are in no "
            f"optimizer, so they never learn: {_names(fit.not_in_optimizer)}. Try: build the optimizer from "
            "`self.parameters()` (or add these modules' parameters to a param group)."
        )
    if fit.never_changed:
        problems.append(
            f"{len(fit.never_changed)} parameter(s) had non-zero gradients at steps with lr > 0 but no step "
            f"changed them: {_names(fit.never_changed)}. Likely causes: the optimizer steps other tensors "
            "than the module's parameters (built over a copy), or an optimizer that skips them."
        )
    return problems


def _gradient_kind(step: StepRecord) -> tuple[str, float]:
    """``("exact" | "scaled" | "carried" | "cleared" | "other", |g - c| / |c|)`` for one step."""
    c, g = step.contribution_norm, step.grad_norm
    if not (math.isfinite(c) and math.isfinite(g)):
        return "other", math.nan
    if c == 0:
        return ("exact", 0.0) if g == 0 else ("other", math.inf)  # no backward: invariant (a) says so
    relative = step.residual_norm / c
    if relative <= REL_TOL:
        return "exact", relative
    if step.previous_norm > 0 and step.carried > CARRIED:
        return "carried", relative
    if g <= REL_TOL * c:
        return "cleared", relative
    if 0 < step.scale <= 1 + REL_TOL:
        return "scaled", relative
    return "other", relative


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... (+{len(names) - _SHOWN} more)" if len(names) > _SHOWN else "")
