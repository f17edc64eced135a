"""Check the optimisation stage of a real training loop (automatic or manual): backward, clear, step."""

from __future__ import annotations

import contextlib
import math
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities.model_helpers import is_overridden
from typing_extensions import Unpack, override

from lightning_recipes._validation import check_int
from lightning_recipes.checks._probe import listed
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.report import CheckInconclusive, CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.trial_fit import StepRecord, trial_fit

__all__ = ["OptimizationCheck"]

#: Relative float noise allowed between the gradients a step used and the sum of the backward passes'
#: contributions (the same additions in the same order: equal to ~1e-7 in float32).
REL_TOL = 1e-3
#: Share of the previous step's gradients still present at a step for "never cleared" (0 when cleared,
#: 1 when never cleared; a clipped or re-scaled gradient gives <= 0).
CARRIED = 0.5
#: ``|g - c / k| / |c / k|`` at most for a step over ``k >= 2`` passes that used only the last one's gradient.
LAST_ONLY = 0.02
_EPOCH_HOOKS = ("on_train_epoch_start", "on_train_epoch_end")  # a model with these gets a 3-epoch trial


class OptimizationCheck(SanityCheck):
    """Check each ``optimizer.step()`` of a real fit on one batch against the backward passes before it.
    Cost: one small fit of at most ``steps`` batches (shared with ``validation_path``).

    Args:
        steps: Training batches of the trial fit at most.
        max_samples: Samples of the first training batch used.

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
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("steps", steps, minimum=2)
        check_int("max_samples", max_samples, minimum=1)
        self.steps, self.max_samples = steps, max_samples

    @override
    def check(self, context: CheckContext) -> CheckResult:
        fit = trial_fit(context, steps=self.steps, max_samples=self.max_samples)
        kinds = [_gradient_kind(step) for step in fit.steps]
        carried = [
            {"batch": s.batch, "optimizer": s.optimizer, "share": s.carried}
            for s, k in zip(fit.steps, kinds)
            if k[0] == "carried"
        ]
        last_only = [s for s, (kind, _) in zip(fit.steps, kinds) if kind == "last_only"]
        norms = [s.grad_norm for s in last_only]
        if len(last_only) < 2 or max(norms) - min(norms) <= REL_TOL * max(norms):
            last_only = []  # one step, or a gradient of the same norm at each: clipped to that norm
        per_optimizer = [sum(s.optimizer == i for s in fit.steps) for i in range(len(fit.optimizers))]
        details: dict[str, Any] = {
            "optimization": "automatic" if fit.automatic else "manual",
            "batches": len(fit.train_losses),
            "steps": len(fit.steps),
            "steps_per_optimizer": per_optimizer,
            "seconds_trial": round(fit.seconds, 3),  # one trial fit, shared with validation_path
            "max_residual": max((r for _, r in kinds if math.isfinite(r)), default=0.0),
            "no_backward_steps": [s.batch for s in fit.steps if s.backwards == 0],
            "carried_steps": carried,
            "cleared_steps": [s.batch for s, (kind, _) in zip(fit.steps, kinds) if kind == "cleared"],
            "scaled_steps": sum(1 for kind, _ in kinds if kind in ("scaled", "last_only")),
            "last_backward_only_steps": [{"batch": s.batch, "backwards": s.backwards} for s in last_only],
        }
        details["never_stepped"] = idle = _never_stepped(context, per_optimizer, set(fit.received_grad))
        rewritten, lost = [], fit.not_in_optimizer
        if any(is_overridden(hook, context.model, pl.LightningModule) for hook in _EPOCH_HOOKS):
            # the state the epoch hooks leave behind: 3 epochs of 2 batches (unfreezing, re-initialising)
            with contextlib.suppress(Exception):  # a hook that cannot run on this copy: no verdict from it
                epochs = trial_fit(context, steps=6, max_samples=self.max_samples, epochs=3, validate=False)
                rewritten = details["rewritten_between_epochs"] = epochs.rewritten
                lost = sorted({*lost, *epochs.not_in_optimizer})
        if not fit.steps and not fit.received_grad:
            raise CheckSkipped(f"no optimizer step and no gradient in {len(fit.train_losses)} trial batches.")
        details["not_in_optimizer"] = lost
        where = f"{len(fit.steps)} step(s) in {len(fit.train_losses)} batches ({details['optimization']})"
        if not fit.steps:  # the most basic first
            summary = f"{where}: {len(fit.received_grad)} parameter(s) got gradients; no optimizer.step()"
            action = "Return an optimizer from configure_optimizers; in manual optimisation call opt.step()."
        elif details["no_backward_steps"]:
            summary = f"{where}: {len(details['no_backward_steps'])} ran with no backward pass since the last"
            action = "Order each step as opt.zero_grad(); self.manual_backward(loss); opt.step()."
        elif carried:
            held = f"{carried[0]['share']:.2f} of the previous step's"
            summary = f"{where}: gradients are never cleared, {len(carried)} step(s) still held {held}"
            action = "Call opt.zero_grad() once per step, before that step's backward passes."
        elif cleared := details["cleared_steps"]:
            summary = f"{where}: {len(cleared)} zeroed the gradients between the backward and the step"
            action = "Call opt.zero_grad() before self.manual_backward(loss), not between it and opt.step()."
        elif last_only:
            window = last_only[0].backwards
            summary = f"{where}: {len(last_only)} used only the last of their {window} backward passes"
            action = "Call opt.zero_grad() after opt.step() (once per window), not before every backward."
        elif idle:
            params = f"{idle[0]['with_grad']} params with gradients: {listed(idle[0]['params'], width=30)}"
            summary = f"{where}: optimizer {idle[0]['optimizer']} never stepped; {params}"
            action = "Step every optimizer whose params get gradients, or freeze them (requires_grad=False)."
        elif rewritten:
            summary = f"{len(rewritten)} trained parameter(s) rewritten between epochs: {listed(rewritten)}"
            action = "Initialise once (__init__, setup or on_fit_start), not in an epoch hook."
        elif lost:
            summary = f"{len(lost)} parameter(s) get gradients but are in no optimizer: {listed(lost)}"
            action = "Build the optimizer from self.parameters(), or add these modules to a param group."
        elif still := fit.never_changed:
            summary = f"{len(still)} parameter(s) with gradients at lr > 0 never changed: {listed(still)}"
            action = "Make the optimizer step the module's own parameters (not a copy of them)."
        elif not fit.lr_positive:
            raise CheckInconclusive(f"{where}: every step ran with lr 0, so no weight could move")
        else:
            summary = f"{where}: each used exactly its own backward passes' gradients and moved the weights"
            return self.verdict("pass", summary, details)
        return self.verdict("fail", summary, details, action=action)


def _never_stepped(
    context: CheckContext, steps_per_optimizer: list[int], received: set[str]
) -> list[dict[str, Any]]:
    """Optimizers that never stepped while another did, though their parameters got gradients."""
    if not any(steps_per_optimizer) or all(steps_per_optimizer):
        return []
    model = context.copy_model()
    optimizers = context.build_optimizers(model).optimizers  # AdamW standing in: one, never a match
    if len(optimizers) != len(steps_per_optimizer):
        return []
    names = {id(p): name for name, p in model.named_parameters()}
    found = []
    for index, optimizer in enumerate(optimizers):
        if steps_per_optimizer[index]:
            continue
        params = sorted(
            names[id(p)]
            for group in optimizer.param_groups
            if float(group.get("initial_lr", group.get("lr", 0.0))) > 0
            for p in group["params"]
            if id(p) in names and names[id(p)] in received
        )
        if params:
            name = type(optimizer).__name__
            found.append({"optimizer": f"{index} ({name})", "with_grad": len(params), "params": params})
    return found


def _gradient_kind(step: StepRecord) -> tuple[str, float]:
    """``(kind, |g - c| / |c|)`` for one step: exact, scaled, carried, cleared, last_only or other."""
    c, g = step.contribution_norm, step.grad_norm
    if not (math.isfinite(c) and math.isfinite(g)):
        return "other", math.nan
    if c == 0:
        return ("exact", 0.0) if g == 0 else ("other", math.inf)  # no backward: said apart
    relative = step.residual_norm / c
    if relative <= REL_TOL:
        return "exact", relative
    if step.previous_norm > 0 and step.carried > CARRIED:
        return "carried", relative
    if g <= REL_TOL * c:
        return "cleared", relative
    k = step.backwards
    last = g * g - 2 * step.scale * c * c / k + c * c / (k * k) if k >= 2 else math.inf  # |g - c/k|^2
    if math.sqrt(max(last, 0.0)) <= LAST_ONLY * c / k:
        return "last_only", relative
    return ("scaled" if 0 < step.scale <= 1 + REL_TOL else "other"), relative
