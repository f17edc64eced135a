"""Check that every trainable parameter gets a finite, non-zero gradient and is in the optimizer."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from typing_extensions import override

from lightning_recipes._validation import check_int
from lightning_recipes.checks._budget import budget_seconds, out_of_time
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.report import CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import Key

__all__ = ["GradFlowCheck"]

_SHOWN = 8  # parameter names listed in a message; details hold them all


class GradFlowCheck(SanityCheck):
    """After a backward pass, every trainable parameter must have a finite, non-zero gradient.

    Fails on parameters with no gradient (a dead branch, a ``.detach()``), a gradient that stays exactly zero,
    non-finite gradients, trainable parameters missing from the optimizer, and an all-frozen model. Frozen
    parameters outside the optimizer pass as information; frozen ones inside it warn. Zero gradients behind a
    zero-initialised layer (a LoRA ``B``) get up to ``max_steps - 1`` optimizer steps to appear.

    Cost: 1 to ``max_steps`` forward+backward passes on one batch with a copy of the model.

    Args:
        max_steps: Backward passes before a zero gradient counts as dead.

    Raises:
        ValueError: If ``max_steps < 1``.

    Example:
        >>> from lightning_recipes.checks import CheckContext
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> result = GradFlowCheck().run(CheckContext(TinyClassifier(), random_classification_loader()))
        >>> result.status, result.details["steps"]  # the zero-initialised head needs one step first
        ('pass', 2)
    """

    name = "grad_flow"

    def __init__(
        self,
        max_steps: int = 3,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_int("max_steps", max_steps, minimum=1)
        self.max_steps = max_steps

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        context.require_automatic_optimization(model)
        named = list(model.named_parameters())
        trainable = [(name, p) for name, p in named if p.requires_grad]
        frozen = [name for name, p in named if not p.requires_grad]
        built = context.build_optimizers(model)
        optimizers, note = built.optimizers, built.note
        in_optimizer = {id(p) for o in optimizers for group in o.param_groups for p in group["params"]}
        missing = [name for name, p in trainable if id(p) not in in_optimizer]
        if frozen and not trainable:
            return CheckResult(
                self.name,
                "fail",
                f"every parameter ({len(frozen)}) is frozen (requires_grad=False): training cannot change "
                "the model. Likely cause: a freeze meant for the base model also caught the head/adapter, or "
                "requires_grad_(False) on the whole module. Try: unfreeze what should learn with "
                "requires_grad_(True) (e.g. the head, or the LoRA adapters).",
                {"trainable": 0, "frozen": frozen, "optimizer": note},
            )
        batch = context.train_batches(1)[0]

        ever_grad = dict.fromkeys((name for name, _ in trainable), False)
        ever_nonzero = dict.fromkeys(ever_grad, False)
        nonfinite: list[str] = []
        loss_value = math.nan
        steps = 0
        budget_stopped = False
        for step in range(self.max_steps):
            if step > 0 and out_of_time():
                budget_stopped = True
                break
            steps = step + 1
            for optimizer in optimizers:
                optimizer.zero_grad(set_to_none=True)
            loss = context.training_loss(model, batch, 0)
            loss.backward()
            with_grad = [(name, p.grad) for name, p in trainable if p.grad is not None]
            flags = (
                torch.stack(
                    [torch.stack([torch.isfinite(g).all(), (g != 0).any()]) for _, g in with_grad]
                ).tolist()  # sync: once per step
                if with_grad
                else []
            )
            if step == 0:
                loss_value = float(loss.detach())
            for (name, _), (finite, nonzero) in zip(with_grad, flags):
                ever_grad[name] = True
                ever_nonzero[name] = ever_nonzero[name] or bool(nonzero)
                if not finite and name not in nonfinite:
                    nonfinite.append(name)
            if nonfinite or all(ever_nonzero.values()):
                break
            for optimizer in optimizers:
                optimizer.step()

        no_grad = [name for name, seen in ever_grad.items() if not seen]
        zero = [name for name, seen in ever_grad.items() if seen and not ever_nonzero[name]]
        details: dict[str, Any] = {
            "trainable": len(trainable),
            "steps": steps,
            "loss": loss_value,
            "no_grad": no_grad,
            "zero_grad": zero,
            "nonfinite_grad": nonfinite,
            "not_in_optimizer": missing,
            "frozen": frozen,
            "optimizer": note,
        }
        if budget_stopped and (zero or no_grad) and not (nonfinite or missing):
            details["budget_stopped"] = True
            return CheckResult(
                self.name,
                "inconclusive",
                f"the time budget ({budget_seconds()} s) stopped the check after {steps} of {self.max_steps} "
                f"backward passes, while {len(zero) + len(no_grad)} parameter(s) still had no non-zero "
                f"gradient: {_names(zero + no_grad)}; no verdict. Try: a larger `time_budget` for this check "
                "(or None), or `num_threads=1` on a busy CPU.",
                details,
            )
        problems = []
        if trainable and len(zero) + len(no_grad) == len(trainable):
            problems.append(
                f"no parameter gets any gradient after {steps} backward passes (loss {loss_value:.4g}): the "
                "loss is constant in the parameters. Likely causes: the loss is clamped/clipped "
                "(`loss.clamp(max=...)` or `torch.clamp` cuts the gradient wherever it binds; clip gradients "
                "with Trainer(gradient_clip_val=...) instead), a `.detach()`/`.item()`/`torch.no_grad()` in "
                "the loss path, or a loss built from a non-differentiable op (argmax, round). Try: return "
                "the unclamped loss; print loss.grad_fn (None means the graph was cut)."
            )
        else:
            if no_grad:
                problems.append(
                    f"{len(no_grad)} trainable parameter(s) get no gradient: {_names(no_grad)}. They are "
                    "unused in training_step or cut off by a `.detach()`/`no_grad` (a detached branch). Try: "
                    "search forward for .detach()/.data/.item(); delete unused modules or freeze them on "
                    "purpose."
                )
            if zero:
                problems.append(
                    f"{len(zero)} trainable parameter(s) get an exactly-zero gradient after {steps} steps: "
                    f"{_names(zero)}. Likely causes: a dead branch (multiplied by 0, ReLU always off, a gate "
                    "stuck closed), a clamp on the path. Try: print the activations feeding these parameters."
                )
        if nonfinite:
            problems.append(
                f"non-finite gradients in {len(nonfinite)} parameter(s): {_names(nonfinite)}. Likely causes: "
                "NaN/Inf in the data, log/sqrt/division at 0 in the loss, a learning rate so high the first "
                "step diverged. Try: run the data check; torch.autograd.detect_anomaly() on one step."
            )
        if missing:
            problems.append(
                f"{len(missing)} trainable parameter(s) are not in any optimizer param group and will never "
                f"be updated: {_names(missing)}. Likely cause: configure_optimizers builds its groups from a "
                "subset (a filter on names, a submodule's parameters). Try: build groups from "
                "self.named_parameters()."
            )
        if problems:
            return CheckResult(self.name, "fail", " | ".join(problems), details)
        frozen_in_optimizer = [name for name, p in named if not p.requires_grad and id(p) in in_optimizer]
        flows = (
            f"all {len(trainable)} trainable parameters get finite, non-zero gradients (within {steps} "
            "step(s)) and are in the optimizer"
        )
        if frozen_in_optimizer:
            details["frozen_in_optimizer"] = frozen_in_optimizer
            return CheckResult(
                self.name,
                "warn",
                f"{flows}, but {len(frozen_in_optimizer)} frozen parameter(s) (requires_grad=False) sit in "
                f"the optimizer: {_names(frozen_in_optimizer)}. They will never change: a freeze left in by "
                "mistake, or an optimizer built from self.parameters() around an intended freeze. Try: "
                "unfreeze them with requires_grad_(True), or build the optimizer from the trainable "
                "parameters only (`[p for p in self.parameters() if p.requires_grad]`; it also saves their "
                "optimizer state).",
                details,
            )
        if frozen:
            return CheckResult(
                self.name,
                "pass",
                f"{flows}. For information: {len(frozen)} parameter(s) are frozen (requires_grad=False) and "
                f"left out of the optimizer, as in fine-tuning or LoRA: {_names(frozen)}.",
                details,
            )
        return CheckResult(self.name, "pass", f"{flows}.", details)


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... (+{len(names) - _SHOWN} more)" if len(names) > _SHOWN else "")
