"""Check that every trainable parameter gets a finite, non-zero gradient and is in the optimizer."""

from __future__ import annotations

import contextlib
from typing import Any

import torch
from torch import Tensor
from typing_extensions import Unpack, override

from lightning_recipes._validation import check_bool, check_int
from lightning_recipes.checks._probe import listed
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.model._derivative import derivative_check
from lightning_recipes.checks.report import CheckResult
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import preserved_rng
from lightning_recipes.harness.batches import entries, replace_entries
from lightning_recipes.harness.isolation import seeded

__all__ = ["GradFlowCheck"]


class GradFlowCheck(SanityCheck):
    """Everything trained is used and everything used is trained: every trainable parameter gets a finite,
    non-zero gradient within ``max_steps`` backward passes, sits in an optimizer, and its gradient is the
    loss's derivative (float64 central differences). The guide has the rules and the cost.

    Args:
        max_steps: Backward passes before a zero gradient counts as dead.
        derivative: Compare the gradient with the loss's derivative (``False``: not it by design).

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
        derivative: bool = True,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("max_steps", max_steps, minimum=1)
        check_bool("derivative", derivative)
        self.max_steps, self.derivative = max_steps, derivative

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        context.require_automatic_optimization(model)
        named = list(model.named_parameters())
        trainable = [(name, p) for name, p in named if p.requires_grad]
        frozen = [name for name, p in named if not p.requires_grad]
        built = context.build_optimizers(model)
        in_optimizer = {id(p) for o in built.optimizers for group in o.param_groups for p in group["params"]}
        details: dict[str, Any] = {
            "trainable": len(trainable),
            "frozen": frozen,
            "optimizer": built.note,
            "not_in_optimizer": [name for name, p in trainable if id(p) not in in_optimizer],
            "frozen_in_optimizer": [n for n, p in named if not p.requires_grad and id(p) in in_optimizer],
        }
        if not trainable:
            summary = f"every parameter ({len(frozen)}) is frozen (requires_grad=False): nothing can learn"
            action = "Unfreeze what should learn with requires_grad_(True) (the head, the adapters)."
            return self.verdict("fail", summary, details, action)
        seen, nonzero, nonfinite, loss, steps = self._backward_passes(context, model, trainable, built)
        no_grad = [name for name, _ in trainable if name not in seen]
        zero = [name for name, _ in trainable if name in seen and name not in nonzero]
        cancelled = _cancelled(context, model, dict(trainable), zero) if zero and not nonfinite else []
        # a gradient reached the module (its bias moves) and its weight read inputs of exactly 0 (latents
        # rounded at init): that weight shapes nothing yet, no path is cut
        unfed = [n for n in zero if n.endswith(".weight") and n.removesuffix("weight") + "bias" in nonzero]
        zero = [name for name in zero if name not in cancelled and name not in unfed]
        details.update(steps=steps, loss=loss, no_grad=no_grad, zero_grad=zero, nonfinite_grad=nonfinite)
        details |= {"cancelled": cancelled, "unfed": unfed}
        dead = no_grad + zero
        if len(dead) == len(trainable):
            summary = f"no parameter gets any gradient in {steps} backward passes (loss {loss:.4g}, constant)"
            action = "Return the unclamped loss: a clamp, .detach(), .item() or argmax cuts the graph."
            return self.verdict("fail", summary, details, action)
        if nonfinite:
            summary = f"non-finite gradients in {len(nonfinite)} parameter(s): {listed(nonfinite)}"
            action = "Look for NaN/Inf in the data, or log/sqrt/division at 0 (autograd.detect_anomaly())."
            return self.verdict("fail", summary, details, action)
        details["unread"] = unread = _unread(context, no_grad) if dead and no_grad else []
        if dead and sorted(dead) == sorted(unread):  # declared, never read: no path to cut
            summary = f"{len(unread)} of {len(trainable)} trainable parameter(s) are never read by the loss"
            action = "Wire in the module you meant to use, or remove or freeze it (requires_grad_(False))."
            return self.verdict("warn", f"{summary}: {listed(unread)}", details, action)
        if dead:
            kind = "no" if no_grad else "an exactly-zero"
            summary = f"{len(dead)} of {len(trainable)} trainable parameter(s) get {kind} gradient"
            action = "Find the .detach()/no_grad or zero gate on their path; freeze an unused module."
            return self.verdict("fail", f"{summary} in {steps} step(s): {listed(dead)}", details, action)
        if missing := details["not_in_optimizer"]:
            summary = f"{len(missing)} trainable parameter(s) not in any optimizer: {listed(missing)}"
            action = "Build the optimizer's param groups from self.named_parameters()."
            return self.verdict("fail", summary, details, action)
        details["unread_entries"] = unread_entries = _unread_entries(context, model)
        off: dict[str, Any] = {"compared": False, "why": "derivative=False"}
        found = derivative_check(context, model, trainable) if self.derivative else off
        details["derivative"] = found
        if found.get("mismatch"):
            # a hand-written backward may edit the gradient on purpose (a reversal layer): not failed
            edited = ", ".join(found.get("custom_functions", []))
            summary = f"the gradient is not the loss's derivative in {listed(found['mismatch'], 32)}"
            summary += f": slope {found['slope']:.3g} vs difference {found['difference']:.3g}"
            action = "Find the hook editing grads on their path, or a derivative without create_graph."
            if edited:
                action = f"Test {edited}'s backward with autograd.gradcheck; if by design, derivative=False."
            return self.verdict("warn" if edited else "fail", summary, details, action)
        if unread_entries:  # supplied, never read: a key typo, a branch fed twice (metadata: fine)
            names = listed(unread_entries, 60)
            summary = f"{names} never moves the loss: half its rows changed, the same loss"
            action = "Read it in the step (a key typo? one input fed twice?); metadata (ids, weights): fine."
            return self.verdict("warn", summary, details, action)
        flows = f"all {len(trainable)} trainable parameters get finite, non-zero gradients in {steps} step(s)"
        if held := details["frozen_in_optimizer"]:
            summary = f"{len(held)} frozen parameter(s) in the optimizer: {listed(held, 40)}; the rest learn"
            action = "Meant to learn? requires_grad_(True). Frozen on purpose (a backbone, a teacher): fine."
            return self.verdict("warn", summary, details, action)
        if cancelled:  # a symmetry of the loss (a shift shared by both towers), not a cut path
            flows = f"all but {len(cancelled)} of {len(trainable)} trainable parameters get gradients; "
            flows += f"{listed(cancelled)}: the contributions of several calls cancel exactly"
        outside = f"; {len(frozen)} frozen, outside the optimizer" if frozen else ""
        return self.verdict("pass", flows + outside, details)

    def _backward_passes(
        self, context: CheckContext, model: Any, trainable: list[tuple[str, torch.nn.Parameter]], built: Any
    ) -> tuple[set[str], set[str], list[str], float, int]:
        """Up to ``max_steps`` backward passes on one batch, stepping while a gradient is zero."""
        batch = context.train_batches(1)[0]
        seen: set[str] = set()
        nonzero: set[str] = set()
        nonfinite: list[str] = []
        loss_value, steps = float("nan"), 0
        for steps in range(1, self.max_steps + 1):
            for optimizer in built.optimizers:
                optimizer.zero_grad(set_to_none=True)
            loss = context.training_loss(model, batch, 0)
            loss.backward()
            with_grad = [(name, p.grad) for name, p in trainable if p.grad is not None]
            checks = [torch.stack([g.isfinite().all(), (g != 0).any()]) for _, g in with_grad]
            flags = torch.stack(checks).tolist() if with_grad else []  # sync: once per step
            loss_value = float(loss.detach()) if steps == 1 else loss_value  # sync: the first step only
            seen |= {name for name, _ in with_grad}
            nonzero |= {name for (name, _), (_, moves) in zip(with_grad, flags) if moves}
            nonfinite += [name for (name, _), (finite, _) in zip(with_grad, flags) if not finite]
            if nonfinite or len(nonzero) == len(trainable):
                break
            for optimizer in built.optimizers:
                optimizer.step()
        return seen, nonzero, nonfinite, loss_value, steps


def _unread(context: CheckContext, names: list[str], limit: int = 8) -> list[str]:
    """Of the first ``limit`` ``names``, those the loss does not read (shifting one keeps it bit for bit)."""
    batch = context.train_batches(1)[0]

    def loss(shifted: str | None = None) -> torch.Tensor:
        model = context.copy_model()
        with preserved_rng(), torch.no_grad():
            if shifted is not None:
                model.get_parameter(shifted).add_(1.0)
            return seeded(context.seed, context.training_loss, model, batch, 0)

    base = loss()
    return [name for name in names[:limit] if torch.equal(loss(name), base)]  # sync: one per name


def _unread_entries(context: CheckContext, model: Any) -> list[str]:
    """Per-sample batch entries whose rows, given their neighbours' content, leave the loss bit for bit."""
    batch, found = context.train_batches(1)[0], []
    with preserved_rng():
        try:
            base = seeded(context.seed, context.training_loss, model, batch).detach()
        except Exception:  # not replayable here: nothing to compare with
            return []
        for key, label, t in entries(batch):
            if not t.ndim or not (t.is_floating_point() or t.ndim > 1) or bool((t == t[:1]).all()):
                continue  # a scalar, 1-D integers (ids, lengths: metadata) or the same in every row
            index = torch.arange(len(t), device=t.device)
            index[0 : len(t) - 1 : 2] += 1  # each even row takes its odd neighbour's content
            with contextlib.suppress(Exception):  # a step that cannot run on the changed entry reads it
                changed = replace_entries(batch, {key: t[index]})
                if torch.equal(seeded(context.seed, context.training_loss, model, changed).detach(), base):
                    found.append(f"{label} {list(t.shape)}")  # sync above: once per entry
    return found


def _cancelled(context: CheckContext, model: Any, trainable: dict[str, Tensor], zero: list[str]) -> list[str]:
    """Zero-gradient parameters of a module called more than once whose calls cancel (invariant by design)."""
    owners: dict[int, list[str]] = {}
    modules = dict(model.named_modules())
    for name in zero:
        if (owner := name.rpartition(".")[0]) in modules:
            owners.setdefault(id(modules[owner]), []).append(name)
    outputs: dict[int, list[torch.Tensor]] = {key: [] for key in owners}

    def record(module: Any, _args: Any, output: Any) -> None:
        if isinstance(output, torch.Tensor) and output.requires_grad:
            outputs[id(module)].append(output)

    with contextlib.ExitStack() as hooks:  # every hook removed on leaving
        for module in (m for m in modules.values() if id(m) in owners):
            hooks.enter_context(module.register_forward_hook(record))
        loss = context.training_loss(model, context.train_batches(1)[0], 0)
    found: list[str] = []
    for key, names in owners.items():
        calls = outputs[key]
        if len(calls) < 2:
            continue
        grads = torch.autograd.grad(loss, calls, retain_graph=True, allow_unused=True)
        params = [trainable[name] for name in names]
        moved = [False] * len(params)
        for out, grad in zip(calls, grads, strict=True):
            if grad is None:
                continue
            parts = torch.autograd.grad(out, params, grad_outputs=grad, retain_graph=True, allow_unused=True)
            moved = [m or (g is not None and bool((g != 0).any())) for m, g in zip(moved, parts, strict=True)]
        found += [name for name, m in zip(names, moved, strict=True) if m]
    return found
