"""Check what a correct loss must satisfy, without training: every target value moves it, its floor is its
own minimum, regression targets are on the output's scale, and it is bounded below."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import lightning.pytorch as pl
import torch
from typing_extensions import override

from lightning_recipes._validation import check_int
from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.loss._expected_loss import REGRESSION
from lightning_recipes.checks.loss._loss_probe import (
    CLASSIFICATION,
    DISTANCE_LOSSES,
    LabelCount,
    LossProbe,
    descent_ray,
    drop_cause,
    falls_without_bound,
    input_bounds,
    label_evidence,
    learned_scale,
    loss_along,
    loss_floor,
    padding_reason,
    probe_step,
    scale_of,
)
from lightning_recipes.checks.report import CheckResult, CheckSkipped, Status
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import LossCall
from lightning_recipes.harness.batches import Key

__all__ = ["LossCheck"]

FLOOR_FAIL = 0.05  # a bound that keeps the loss this share of its way down (init -> own minimum) away: fail
FLOOR_WARN = 0.005  # ... this share: warn
SCALE_LIMIT = 100.0  # targets whose scale max(|mean|, std) is above this, or below its inverse, are off scale
SCALE_MISMATCH = 10.0  # ... and only flagged when the output at init is this far from their scale
SCALE_FAIL_RATIO = 1000.0  # targets above SCALE_LIMIT this many times the output's scale: a fail
FLOORED = (
    frozenset({"cross_entropy", "binary_cross_entropy_with_logits", "binary_cross_entropy"}) | DISTANCE_LOSSES
)
RAY_DECADES = 6  # the descent ray's steps: 1, 10, ..., 10^5 times the output's scale


_TITLES = {
    "targets": "Target values",
    "floor": "Floor",
    "target_scale": "Target scale",
    "bounded": "Bounded below",
}


@dataclass
class _Part:
    """One of the check's four findings: ``status`` (``"n/a"`` when the part does not apply)."""

    status: str
    message: str
    details: dict[str, Any] = field(default_factory=dict)


class LossCheck(SanityCheck):
    """Check the loss itself on one or two batches, without training.

    Four invariants: every target value can move the loss (a class whose positions all get zero gradient is
    dropped: ``ignore_index``, a zero ``weight``, a mask; padding passes); no floor proven from the output's
    range keeps the loss from its minimum (probabilities into a logits loss, a softmax across multi-label
    targets); regression targets on the output's scale; the loss is bounded below along its descent ray.
    ``skip`` under manual optimisation, without a gradient, or for a non-finite loss; a hand-written loss
    gets the last part only. Logged as ``preflight/loss``.

    Cost: one forward and backward per batch (``num_batches``) and up to twelve forwards for the ray.

    Args:
        num_batches: Training batches to read (the first judges, the others confirm per-class verdicts).
        time_budget: Wall-clock seconds for this check (see :class:`SanityCheck`).

    Raises:
        ValueError: If ``num_batches < 1``.

    Example:
        >>> import torch
        >>> from torch.nn import functional as F
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> class IgnoresClassZero(TinyClassifier):
        ...     def training_step(self, batch, batch_idx):
        ...         x, y = batch
        ...         return F.cross_entropy(self(x), y, ignore_index=0)
        >>> report = preflight(IgnoresClassZero(), train_dataloaders=random_classification_loader(),
        ...                    checks=[LossCheck()], num_threads=1)
        >>> report["loss"].status, report["loss"].details["dropped"][0]["label"]
        ('fail', 'class 0')
        >>> preflight(TinyClassifier(), train_dataloaders=random_classification_loader(),
        ...           checks=[LossCheck()], num_threads=1)["loss"].status
        'pass'
    """

    name = "loss"

    def __init__(
        self,
        num_batches: int = 2,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_int("num_batches", num_batches, minimum=1)
        self.num_batches = num_batches

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        context.require_automatic_optimization(model)
        batches = context.train_batches(self.num_batches)
        probes: list[LossProbe] = []
        for batch in batches:
            if probes and out_of_time():
                break
            probes.append(probe_step(context, model, batch, context.seed))
        first = probes[0]
        if not first.differentiable:
            raise CheckSkipped(
                "the loss `training_step` returns has no gradient (computed without autograd, from detached "
                "or non-differentiable outputs), so what moves it cannot be read."
            )
        initial = float(first.loss)  # sync: once
        if not math.isfinite(initial):
            raise CheckSkipped(
                f"the loss at init is {initial} (not finite), so its gradient says nothing; the data and "
                "init_loss checks name the cause (NaN/Inf in the data, log of 0)."
            )
        parts = {
            "targets": self._targets(probes, batches[: len(probes)]),
            "floor": self._floor(first),
            "target_scale": self._scale(probes),
            "bounded": self._bounded(context, model, batches[0], first),
        }
        return self._verdict(parts, initial, first)

    # ------------------------------------------------------------------------------------- the four parts
    def _targets(self, probes: Sequence[LossProbe], batches: Sequence[Any]) -> _Part:
        call = probes[0].call
        if call is None or call.function not in CLASSIFICATION:
            return _Part("n/a", "no classification loss call")
        seen: list[tuple[Any, Any, dict[tuple[str, int], LabelCount]]] = []
        for probe, batch in zip(probes, batches):
            if probe.call is None or probe.call.function != call.function:
                continue
            evidence = label_evidence(probe.call, probe.call_grad)
            if evidence is not None:
                seen.append((probe.call, batch, evidence))
        if not seen:
            return _Part("n/a", f"the {call.function} call's targets could not be grouped by value")
        merged: dict[tuple[str, int], dict[str, Any]] = {}
        for index, (_, _, evidence) in enumerate(seen):
            for key, found in evidence.items():
                entry = merged.setdefault(key, {"label": found, "count": 0, "moved": 0, "saturated": 0})
                entry["count"] += found.count
                entry["moved"] += found.moved
                entry["saturated"] += found.saturated
                if found.count:
                    entry.setdefault("batches", []).append(index)
                    if found.moved == 0:
                        entry.setdefault("dropped_in", []).append(index)
        classes = call.num_classes
        dropped, padding, partly, certain = [], {}, [], []
        for entry in merged.values():
            label: LabelCount = entry["label"]
            if entry["count"] == 0:
                if entry["saturated"]:
                    certain.append(label.name)
                continue
            in_batches, dropped_in = entry.get("batches", []), entry.get("dropped_in", [])
            if not dropped_in:
                continue
            if len(dropped_in) < len(in_batches):
                partly.append(label.name)
                continue
            if label.kind == "class":
                reason = self._padding(label.value, classes, seen, dropped_in)
                if reason is not None:
                    padding[str(label.value)] = reason
                    continue
            dropped.append(
                {
                    "label": label.name,
                    "count": entry["count"],
                    "batches": len(in_batches),
                    "cause": drop_cause(seen[dropped_in[0]][0], label),
                }
            )
        present = {key for key, entry in merged.items() if entry["count"] or entry["saturated"]}
        if classes is not None and call.integer_target:
            unchecked = [k for k in range(classes) if ("class", k) not in present]
        else:
            unchecked = [merged[key]["label"].value for key in merged if key not in present]
        details = {
            "dropped": dropped,
            "ignored_as_padding": padding,
            "unchecked": unchecked[:50],
            "unchecked_count": len(unchecked),
            "moved_in_some_batches_only": partly,
            "saturated_only": certain,
            "batches": len(seen),
        }
        checked = len(merged) - len(unchecked) if not call.integer_target else len(present) - len(padding)
        notes = []
        if padding:
            notes.append("ignored as padding: " + "; ".join(padding.values()))
        if unchecked:
            notes.append(
                f"{len(unchecked)} value(s) not in the {len(seen)} checked batch(es), unchecked "
                "(inconclusive for them)"
            )
        if partly:
            notes.append(f"{', '.join(partly)} moved the loss in some batches only")
        note = f" ({'; '.join(notes)})" if notes else ""
        if dropped and all(entry["moved"] == 0 for entry in merged.values()):
            return _Part(
                "fail",
                f"no target value moves the loss: its gradient with respect to the {call.function} input is "
                f"exactly zero at every position of {len(seen)} batch(es). Likely causes: the loss clamped "
                "instead of the gradient clipped, a `.detach()`/`no_grad` between the loss call and the "
                "returned loss, a loss multiplied by 0. Try: clip gradients with "
                f"Trainer(gradient_clip_val=...); run the grad_flow check{note}.",
                details,
            )
        if dropped:
            named = "; ".join(
                f"{d['label']} ({d['count']} positions in {d['batches']} batch(es)): {d['cause']}"
                for d in dropped
            )
            return _Part(
                "fail",
                f"target value(s) the loss cannot learn: every position of {named}. These get exactly zero "
                "gradient, so training silently ignores them. Try: drop `ignore_index`/the 0 weight/the mask "
                f"for real classes (keep it for padding only, e.g. -100){note}.",
                details,
            )
        return _Part("pass", f"every one of {checked} target value(s) seen moves the loss{note}", details)

    @staticmethod
    def _padding(value: int, classes: int | None, seen: Sequence[Any], batches: Sequence[int]) -> str | None:
        if classes is not None and value >= classes:
            return f"{value} is outside the {classes} classes: an ignore value"
        reasons = [padding_reason(value, seen[i][0].target, seen[i][0], seen[i][1]) for i in batches]
        return reasons[0] if all(r is not None for r in reasons) else None

    @staticmethod
    def _floor(probe: LossProbe) -> _Part:
        call = probe.call
        if call is not None and call.function == "nll_loss":
            return LossCheck._log_probabilities(call)
        if call is None or call.function not in FLOORED or call.loss is None or call.loss.numel() != 1:
            return _Part("n/a", "no scalar loss call whose floor is known")
        floor = loss_floor(call)
        if floor is None:
            return _Part("pass", f"{call.function}'s input is not bounded in a way that lifts its floor", {})
        details = {"floor": floor.value, "minimum": floor.minimum, "how": floor.how}
        if not floor.bounded:
            return _Part("pass", f"its own minimum is {floor.minimum:.4g} ({floor.how})", details)
        initial = float(call.loss.detach())  # sync: once
        gap, excess = initial - floor.minimum, floor.value - floor.minimum
        share = excess / gap if gap > 0 else math.inf
        details |= {"initial": initial, "share": share}
        where = (
            f"floor {floor.value:.4g} above the loss's own minimum {floor.minimum:.4g}, {share:.0%} of its "
            f"way down from {initial:.4g} at init, because {floor.how}"
        )
        if share < FLOOR_WARN:
            return _Part("pass", f"a bound on its input lifts the floor negligibly ({where})", details)
        return _Part(
            "fail" if share >= FLOOR_FAIL else "warn",
            f"the loss can never reach its minimum: {where}. "
            + (
                floor.fix
                or "Try: return raw logits and let the loss apply the softmax/sigmoid (cross_entropy, "
                "binary_cross_entropy_with_logits), use a sigmoid per label (not a softmax across labels) "
                "for multi-label targets, apply the sigmoid once, drop the clamp/tanh on the logits."
            ),
            details,
        )

    @staticmethod
    def _log_probabilities(call: LossCall) -> _Part:
        """``nll_loss`` reads log-probabilities (<= 0, minimum 0 at probability 1); an input proven >= 0
        (probabilities from a softmax or sigmoid) turns it into ``-p``, whose minimum is -1, not 0."""
        bounds = call.inspection if call.inspected else input_bounds(call.output)
        if bounds is None or bounds.low < 0:
            return _Part("pass", "nll_loss's input is not proven to be non-negative", {})
        return _Part(
            "fail",
            f"nll_loss reads log-probabilities (<= 0), but its input comes from {bounds.how}, values in "
            f"[{bounds.low:g}, {bounds.high:g}]: the loss becomes minus the probability, with a gradient "
            "that vanishes on wrong predictions and a minimum of -1 instead of 0. Try: log_softmax instead "
            "of softmax before nll_loss, or cross_entropy on the logits.",
            {"how": bounds.how, "low": bounds.low, "high": bounds.high},
        )

    @staticmethod
    def _scale(probes: Sequence[LossProbe]) -> _Part:
        call = probes[0].call
        if call is None or call.function not in REGRESSION or call.target is None:
            return _Part("n/a", "no regression loss call")
        if not call.target.is_floating_point():
            return _Part("n/a", "integer regression targets")
        same = [p.call for p in probes if p.call is not None and p.call.function == call.function]
        targets = [c.target for c in same if c.target is not None]
        per_batch = [scale_of(t) for t in targets]
        target = scale_of(torch.cat([t.reshape(-1) for t in targets]))
        output = scale_of(torch.cat([c.output.reshape(-1) for c in same]))
        details = {
            "target_mean": target.mean,
            "target_std": target.std,
            "output_mean": output.mean,
            "output_std": output.std,
            "per_batch_target_scale": [s.scale for s in per_batch],
        }
        if not (math.isfinite(target.scale) and math.isfinite(output.scale)):
            return _Part("n/a", "non-finite targets or outputs (the data check names them)", details)
        if target.scale == 0:
            return _Part("n/a", "constant zero targets")
        off = target.scale > SCALE_LIMIT or target.scale < 1 / SCALE_LIMIT
        ratio = target.scale / max(output.scale, 1e-12)
        details["ratio"] = ratio
        stated = f"regression targets {target} vs the output at init {output}"
        if not off:
            return _Part("pass", f"{stated}: targets on unit scale", details)
        if 1 / SCALE_MISMATCH <= ratio <= SCALE_MISMATCH:
            return _Part("pass", f"{stated}: the output at init already matches the targets' scale", details)
        stretched = learned_scale(call.output)
        if stretched is not None:
            return _Part("pass", f"{stated}: {stretched}, which can reach the targets' scale", details)
        far = "far above" if target.scale > SCALE_LIMIT else "far below"
        return _Part(
            "fail" if target.scale > SCALE_LIMIT and ratio >= SCALE_FAIL_RATIO else "warn",
            f"{stated}: the targets' scale {target.scale:.4g} is {far} 1 and {ratio:.3g}x the output's, so "
            "the head must grow by orders of magnitude before it fits and the loss (~scale squared for MSE) "
            "dwarfs everything else. Try: standardise the targets ((y - mean) / std, undo it at prediction), "
            "or scale the head (multiply the output by the targets' std, initialise its bias to their mean).",
            details,
        )

    @staticmethod
    def _bounded(context: CheckContext, model: pl.LightningModule, batch: Any, probe: LossProbe) -> _Part:
        initial = float(probe.loss)  # sync: once
        tried = []
        for at_loss_input, tensor, grad, what in (
            (False, probe.output, probe.output_grad, "the model's output"),
            (
                True,
                None if probe.call is None else probe.call.output,
                probe.call_grad,
                "the loss call's input",
            ),
        ):
            if tensor is None or grad is None:
                continue
            ray = descent_ray(tensor, grad)
            if ray is None:
                continue
            base = max(float(ray.start.double().pow(2).mean().sqrt()), 1.0)  # sync: once
            steps = [base * 10.0**k for k in range(RAY_DECADES)]
            values = [initial]
            for step in steps:
                if out_of_time():
                    break
                found = loss_along(
                    context, model, batch, probe, ray, [step], context.seed, at_loss_input=at_loss_input
                )
                if not found:
                    break
                values.append(found[0])
            if len(values) > 1 and all(v == initial for v in values[1:]):
                tried.append(what)  # replacing it did not reach the returned loss (computed before)
                continue
            return LossCheck._ray_verdict(values, steps, what + ray.through)
        if tried:
            return _Part("n/a", f"replacing {' or '.join(tried)} did not change the returned loss")
        return _Part("n/a", "the model's output gets no gradient from the loss")

    @staticmethod
    def _ray_verdict(values: list[float], steps: list[float], what: str) -> _Part:
        details = {"ray_steps": steps[: len(values) - 1], "ray_losses": values, "ray_moves": what}
        if falls_without_bound(values):
            return _Part(
                "fail",
                f"the loss falls without bound: moving {what} along the loss's negative gradient by "
                f"{steps[0]:.3g} to {steps[len(values) - 2]:.3g} took it from {values[0]:.4g} to "
                f"{values[-1]:.4g}, falling faster with every step. A loss must be bounded below, or the "
                "optimizer drives the outputs to infinity instead of fitting. Likely causes: a wrong sign "
                "(`-mse`, a log-likelihood returned instead of its negative, `+` instead of `-` in a custom "
                "loss). Try: return the negative log-likelihood, check the sign of each term.",
                details,
            )
        if len(values) < 4 and values[-1] != math.inf:
            return _Part(
                "inconclusive",
                f"the loss could be evaluated at only {len(values) - 1} step(s) along the descent ray (the "
                "output left the loss's domain, or the budget ended), so boundedness is not known",
                details,
            )
        return _Part(
            "pass", f"bounded below along the descent ray of {what} (lowest {min(values):.4g})", details
        )

    # --------------------------------------------------------------------------------------------- verdict
    def _verdict(self, parts: dict[str, _Part], initial: float, probe: LossProbe) -> CheckResult:
        details: dict[str, Any] = {"measured": initial, "loss_function": probe.call and probe.call.function}
        for key, part in parts.items():
            details[key] = {"status": part.status, **part.details}
        for key in ("dropped", "ignored_as_padding", "unchecked"):
            if key in parts["targets"].details:
                details[key] = parts["targets"].details[key]
        order: tuple[Status, ...] = ("fail", "warn", "pass", "inconclusive")
        status: Status | None = next((s for s in order if any(p.status == s for p in parts.values())), None)
        if status is None:
            reasons = "; ".join(f"{k}: {p.message}" for k, p in parts.items())
            raise CheckSkipped(f"no part of the loss check applies ({reasons}).")
        lead = [f"{_TITLES[k]}: {p.message}" for k, p in parts.items() if p.status == status]
        rest = [f"{k}: {p.status}" for k, p in parts.items() if p.status not in (status, "n/a")]
        called = "" if probe.call is None else f" ({probe.call.function})"
        text = f"loss{called} {initial:.4g} at init. " + " ".join(m.rstrip(".") + "." for m in lead)
        if rest:
            text += f" Other parts: {', '.join(rest)}."
        if probe.call is None:
            text += (
                " No torch.nn.functional loss call explains the loss (a hand-written loss): only its "
                "boundedness was checked."
            )
        return CheckResult(self.name, status, text, details)
