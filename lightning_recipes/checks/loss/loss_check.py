"""Check what a correct loss must satisfy, without training (its parts: :class:`LossCheck`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch
from typing_extensions import Unpack, override

from lightning_recipes._validation import check_int
from lightning_recipes.checks._probe import Finding
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.loss._expected_loss import CLASSIFICATION, KINDS, REGRESSION
from lightning_recipes.checks.loss._loss_probe import (
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

__all__ = ["LossCheck"]

FLOOR_FAIL = 0.05  # a bound that keeps the loss this share of its way down (init -> own minimum) away: fail
FLOOR_WARN = 0.005  # ... this share: warn
SCALE_LIMIT = 100.0  # targets whose scale max(|mean|, std) is above this, or below its inverse, are off scale
SCALE_MISMATCH = 10.0  # ... and only flagged when the output at init is this far from their scale
SCALE_FAIL_RATIO = 1000.0  # targets above SCALE_LIMIT this many times the output's scale: a fail
RAY_DECADES = 6  # the descent ray's steps: 1, 10, ..., 10^5 times the output's scale


class LossCheck(SanityCheck):
    """Check the loss itself on one or two batches, without training: every target value moves it, no floor
    from the output's range, regression targets on the output's scale, bounded below along its descent ray
    (the guide has each). Cost: one forward and backward per batch, up to twelve forwards for the ray.

    Args:
        num_batches: Training batches to read (the first judges, the others confirm per-class verdicts).

    Example:
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
    """

    name = "loss"

    def __init__(
        self,
        num_batches: int = 2,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_int("num_batches", num_batches, minimum=1)
        self.num_batches = num_batches

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        context.require_automatic_optimization(model)
        context.build_optimizers(model)  # a training_step may read what configure_optimizers set
        batches = context.train_batches(self.num_batches)
        probes = [probe_step(context, model, batch, context.seed) for batch in batches]
        first = probes[0]
        if not first.differentiable:
            raise CheckSkipped("the returned loss has no gradient (detached or non-differentiable outputs).")
        initial = float(first.loss)  # sync: once
        if not math.isfinite(initial):
            raise CheckSkipped(f"the loss at init is {initial}, not finite: its gradient says nothing.")
        parts = {
            "targets": self._targets(probes, batches),
            "floor": self._floor(first),
            "target_scale": self._scale(probes),
            "bounded": self._bounded(context, model, batches[0], first),
            "rows": self._rows(first),
        }
        details: dict[str, Any] = {"measured": initial, "loss_function": first.call and first.call.function}
        details |= {key: {"status": part.status, **part.details} for key, part in parts.items()}
        details |= parts["targets"].details
        details["parts"] = {key: part.status for key, part in parts.items()}
        order: tuple[Status, ...] = ("fail", "warn", "pass", "inconclusive")
        status = next((s for s in order if s in details["parts"].values()), None)
        if status is None:
            raise CheckSkipped("no part of the loss check applies to this loss.")
        lead = next(p for p in parts.values() if p.status == status)
        return self.verdict(status, f"loss {initial:.4g} at init: {lead.summary}", details, lead.action)

    @staticmethod
    def _targets(probes: Sequence[LossProbe], batches: Sequence[Any]) -> Finding:
        call = probes[0].call
        if call is None or call.function not in CLASSIFICATION:
            return Finding("n/a", "no classification loss call")
        same = [(p, b) for p, b in zip(probes, batches) if getattr(p.call, "function", None) == call.function]
        seen = [(p.call, b) for p, b in same if p.call is not None]
        evidence = [label_evidence(c, p.call_grad) for (p, _), (c, _) in zip(same, seen)]
        merged: dict[Any, list[Any]] = {}  # [label, count, moved, saturated, batches in, batches dropped]
        for index, found in enumerate(evidence):
            for label in found or []:
                entry = merged.setdefault((label.kind, label.value), [label, 0, 0, 0, [], []])
                entry[1:4] = entry[1] + label.count, entry[2] + label.moved, entry[3] + label.saturated
                entry[4] += [index] if label.count else []
                entry[5] += [index] if label.count and not label.moved else []
        if not merged:
            return Finding("n/a", "the targets could not be grouped by value")
        dropped, padding = [], {}
        for label, count, _, _, within, gone in merged.values():
            if not gone or len(gone) < len(within):
                continue  # moved the loss in some batch
            if label.kind == "class":
                classes = call.num_classes
                reasons = [padding_reason(label.value, seen[i][0].target, *seen[i]) for i in gone]
                if classes is not None and label.value >= classes:
                    reasons = [f"{label.value} is outside the {classes} classes"]
                if all(reasons):
                    padding[str(label.value)] = reasons[0]
                    continue
            cause = drop_cause(seen[gone[0]][0], label)
            dropped.append({"label": label.name, "count": count, "batches": len(within), "cause": cause})
        present = {key for key, entry in merged.items() if entry[1] or entry[3]}
        if call.num_classes is not None and call.integer_target:
            unchecked = [k for k in range(call.num_classes) if ("class", k) not in present]
        else:
            unchecked = [entry[0].value for key, entry in merged.items() if key not in present]
        details = {"dropped": dropped, "ignored_as_padding": padding, "unchecked": unchecked[:50]}
        if dropped and all(entry[2] == 0 for entry in merged.values()):
            action = "Clip gradients (gradient_clip_val), do not clamp the loss; look for a .detach()."
            return Finding("fail", f"no target value moves the loss ({call.function})", details, action)
        if dropped:
            summary = f"{', '.join(d['label'] for d in dropped[:3])} get zero gradient: {dropped[0]['cause']}"
            action = "Keep ignore_index, zero weights or masks for padding (e.g. -100), not real classes."
            return Finding("fail", summary[:100], details, action)
        summary = f"every one of {len(present) - len(padding)} target values seen moves the loss"
        return Finding("pass", summary, details)

    @staticmethod
    def _floor(probe: LossProbe) -> Finding:
        call = probe.call
        if call is not None and call.function in ("nll_loss", "kl_div"):  # both read log-probabilities
            bounds = call.inspection if call.inspected else input_bounds(call.output)
            if bounds is None or bounds.low < 0:
                return Finding("pass", f"{call.function}'s input is not proven non-negative")
            details = {"how": bounds.how, "low": bounds.low, "high": bounds.high}
            action = f"Pass log_softmax (log-probabilities) to {call.function}, not probabilities or scores."
            summary = f"{call.function} reads log-probabilities but gets {bounds.how}"
            return Finding("fail", summary, details, action)
        if call is None or call.loss is None or call.loss.numel() != 1:
            return Finding("n/a", "no scalar loss call")
        floor = loss_floor(call)
        if floor is None:
            return Finding("pass" if call.function in KINDS else "n/a", "no floor above 0")
        details = {"floor": floor.value, "minimum": floor.minimum, "how": floor.how}
        if not floor.bounded:
            return Finding("pass", f"its own minimum is {floor.minimum:.4g}", details)
        initial = float(call.loss.detach())  # sync: once
        gap = initial - floor.minimum
        share = (floor.value - floor.minimum) / gap if gap > 0 else math.inf
        details |= {"initial": initial, "share": share}
        if share < FLOOR_WARN:
            return Finding("pass", f"a bound lifts the floor negligibly ({share:.1%})", details)
        summary = f"input bounded: floor {floor.value:.4g} > min {floor.minimum:.4g}, {share:.0%} of the way"
        return Finding("fail" if share >= FLOOR_FAIL else "warn", summary, details, floor.fix)

    @staticmethod
    def _scale(probes: Sequence[LossProbe]) -> Finding:
        call = probes[0].call
        if call is None or call.function not in REGRESSION or call.target is None:
            return Finding("n/a", "no regression loss call")
        same = [p.call for p in probes if p.call is not None and p.call.function == call.function]
        if not call.target.is_floating_point():
            return Finding("n/a", "integer regression targets")
        target = scale_of(torch.cat([c.target.reshape(-1) for c in same if c.target is not None]))
        output = scale_of(torch.cat([c.output.reshape(-1) for c in same]))
        if not (math.isfinite(target) and math.isfinite(output)) or target == 0:
            return Finding("n/a", "non-finite or zero targets")
        details = {"ratio": (ratio := target / max(output, 1e-12))}
        off = target > SCALE_LIMIT or target < 1 / SCALE_LIMIT
        if not off or 1 / SCALE_MISMATCH <= ratio <= SCALE_MISMATCH or learned_scale(call.output):
            return Finding("pass", f"regression targets at scale {target:.4g}, output {output:.4g}", details)
        status = "fail" if target > SCALE_LIMIT and ratio >= SCALE_FAIL_RATIO else "warn"
        summary = f"regression targets at scale {target:.4g}, {ratio:.3g}x the output's at init"
        action = "Standardise the targets ((y - mean) / std, undone when predicting) or scale the head."
        return Finding(status, summary, details, action)

    @staticmethod
    def _rows(probe: LossProbe) -> Finding:
        if not probe.mixed and (probe.call is None or not probe.call.target_keys):
            return Finding("n/a", "no broadcast paired rows, and no loss call reads a batch target")
        if not probe.mixed:
            return Finding("pass", "no broadcast pairs a prediction with another sample's row")
        details = {"row_mixing": [mix.describe() for mix in probe.mixed[:5]]}
        action = "Match the shapes before comparing: pred.squeeze(-1) for a (B, 1) head, or target[:, None]."
        return Finding("fail", probe.mixed[0].describe(), details, action)

    @staticmethod
    def _bounded(context: CheckContext, model: pl.LightningModule, batch: Any, probe: LossProbe) -> Finding:
        initial = float(probe.loss)  # sync: once
        output, grad = probe.output, probe.output_grad
        ray = descent_ray(output, grad) if output is not None and grad is not None else None
        if ray is None:
            return Finding("n/a", "the model's output gets no gradient from the loss")
        base = max(float(ray.start.double().pow(2).mean().sqrt()), 1.0)  # sync: once
        steps = [base * 10.0**k for k in range(RAY_DECADES)]
        values = [initial, *loss_along(context, model, batch, probe, ray, steps)]
        if len(values) > 1 and all(v == initial for v in values[1:]):
            return Finding("n/a", "replacing the model's output does not change the loss (computed inside)")
        details = {"ray_moves": "the model's output" + ray.through}
        if falls_without_bound(values):
            summary = f"it falls without bound along the descent ray, {values[0]:.4g} -> {values[-1]:.4g}"
            action = "Check the sign of each term: return the negative log-likelihood, not -mse or +log p."
            return Finding("fail", summary, details, action)
        if len(values) < 4 and values[-1] != math.inf:
            summary = f"the descent ray left the loss's domain after {len(values) - 1} steps"
            return Finding("inconclusive", summary, details)
        return Finding("pass", f"bounded below along the descent ray (lowest {min(values):.4g})", details)
