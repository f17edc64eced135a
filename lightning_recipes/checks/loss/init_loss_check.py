"""Check the first loss against what an untrained model scores, for losses whose value at init is known."""

from __future__ import annotations

import math
from typing import Any

import torch
from typing_extensions import Unpack, override

from lightning_recipes._stats import Z, standard_error
from lightning_recipes._validation import check_in_range, check_int, check_positive, is_number
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.loss._expected_loss import (
    SHUT_BELOW,
    Expectation,
    expected_initial_loss,
    loss_call_for,
    record_loss_calls,
)
from lightning_recipes.checks.loss._loss_probe import modules_run
from lightning_recipes.checks.report import CheckResult, CheckSkipped, Status
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import LossCall
from lightning_recipes.harness.batches import batch_size_of

__all__ = ["InitLossCheck"]


class InitLossCheck(SanityCheck):
    """Compare the loss at initialisation with what an untrained model should score, where that is known.
    Logged as ``preflight/init_loss``. Cost: ``num_batches`` forwards on a copy, no gradients.

    Args:
        expected_loss: The expected initial loss; overrides inference.
        num_classes: Number of classes ``C``: expect ``ln C`` whatever the loss.
        num_batches: Training batches to average over.
        warn_rtol: Relative deviation from the expectation that gives ``"warn"``.
        high_rtol: Relative excess that gives ``"fail"`` (default 1.0: twice the expected loss); ``"warn"``
            where the loss at uniform logits is the expected one (the excess is the head's scale).
        low_rtol: Relative shortfall that gives ``"fail"`` (default 0.5: half the expected loss).

    Example:
        >>> from lightning_recipes.checks import CheckContext
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> context = CheckContext(TinyClassifier(num_classes=4), random_classification_loader())
        >>> result = InitLossCheck().run(context)
        >>> result.status, round(result.details["expected"], 4)
        ('pass', 1.3863)
    """

    name = "init_loss"

    def __init__(
        self,
        expected_loss: float | None = None,
        num_classes: int | None = None,
        num_batches: int = 2,
        warn_rtol: float = 0.25,
        high_rtol: float = 1.0,
        low_rtol: float = 0.5,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        if expected_loss is not None and not is_number(expected_loss):
            raise ValueError(f"`expected_loss` must be a finite number or None, got {expected_loss!r}.")
        check_int("num_classes", num_classes, minimum=2, optional=True)
        check_int("num_batches", num_batches, minimum=1)
        check_positive("warn_rtol", warn_rtol)
        check_positive("high_rtol", high_rtol)
        check_in_range("low_rtol", low_rtol, 0, 1, low_open=True, high_open=True)
        if warn_rtol > min(high_rtol, low_rtol):
            raise ValueError(f"`warn_rtol` must not exceed `high_rtol` or `low_rtol`, got {warn_rtol!r}.")
        self.expected_loss, self.num_classes, self.num_batches = expected_loss, num_classes, num_batches
        self.warn_rtol, self.high_rtol, self.low_rtol = warn_rtol, high_rtol, low_rtol

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        context.require_automatic_optimization(model)
        context.build_optimizers(model)  # a training_step may read what configure_optimizers set
        batches = context.train_batches(self.num_batches)
        losses, calls = [], []
        with torch.no_grad():
            for index, batch in enumerate(batches):
                with record_loss_calls(batch=batch) as recorded:
                    loss = context.training_loss(model, batch, index)
                losses.append(loss.float())
                calls.append(loss_call_for(recorded, loss) or _summed_by_hand(recorded, loss))
        per_batch = torch.stack(losses).tolist()  # sync: once per check
        measured = sum(per_batch) / len(per_batch)
        expectation = self._expectation(calls)
        expected = expectation.value
        details = {"measured": measured, "expected": expected, "per_batch": per_batch}
        details |= {"num_classes": expectation.num_classes, "expected_from": expectation.source}
        details |= expectation.extra
        if not math.isfinite(measured):
            action = "Run the data check (NaN/Inf); use cross_entropy on logits instead of log(softmax)."
            return self.verdict("fail", f"the loss at init is {measured}, not finite", details, action=action)
        if shut := expectation.extra.get("targets_on_masked_classes"):  # a target the output cannot take
            summary = (
                f"{shut} target(s) are classes the output masks out ({SHUT_BELOW:g}+ below the top score)"
            )
            action = "Draw targets from the classes the mask leaves open; check the target's index order."
            return self.verdict("fail", summary, details, action=action)
        if expected is None:
            raise CheckSkipped(f"loss {measured:.4g}: {expectation.source}"[:111])
        ratio = measured / expected
        se = float(standard_error(torch.tensor(per_batch, dtype=torch.float64)))  # NaN for one batch
        noise = (se if math.isfinite(se) else 0.0) / abs(expected) if expected else 0.0
        details |= {"ratio": ratio, "ratio_noise": noise, "z": Z}
        label = f"{expectation.label} = {expected:.4g}"
        stated = f"loss at init {measured:.4g} vs {label} expected, ratio {ratio:.2f}"
        low, high = ratio - Z * noise, ratio + Z * noise  # a verdict: the ratio past its line beyond noise
        warn_high, warn_low = 1 + self.warn_rtol, 1 - self.warn_rtol
        if (ratio > warn_high and low <= warn_high) or (ratio < warn_low and high >= warn_low):
            action = "Give it more (or larger) batches: InitLossCheck(num_batches=...)."
            summary = f"{stated}, within batch noise of its line"
            return self.verdict("inconclusive", summary, details, action=action)
        status: Status
        if ratio > warn_high:
            status = "fail" if low > 1 + self.high_rtol else "warn"
            details["summed_over"] = summed = self._summed(ratio, batches[0], context)
            # where it is the expectation, the excess is the model's
            details["at_uniform_prediction"] = uniform = _at_uniform_prediction(calls)
            near = uniform is not None and abs(uniform - expected) <= self.warn_rtol * abs(expected)
            if not summed and near and expectation.label != "given":  # does the advice below lower it?
                details["output_layer_scaled"] = scaled = self._with_output_layer_scaled(context, batches)
                if scaled is not None and scaled[1] - expected > 0.5 * (measured - expected):
                    summary = f"{stated}: too high even with `{scaled[0]}` scaled 10x down ({scaled[1]:.4g})"
                    action = "A scaled or normalised head (e.g. a cosine margin head)? Pass expected_loss=."
                    return self.verdict("inconclusive", summary, details, action=action)
                status = "warn"  # right at uniform logits: the head's scale costs steps, not the result
            action = f"The loss is summed instead of averaged over {summed} targets: use reduction='mean'."
            if not summed:
                action = "Zero or scale down an output layer initialised too large, or drop extra loss terms."
            return self.verdict(status, f"{stated}: too high", details, action=action)
        if ratio < warn_low:
            # The batch's own labels predicted by an untrained model: a leak or pretrained weights, which this
            # check cannot tell apart (target_leakage tests the leak); a target the model computed is a bug.
            from_batch = any(call is not None and not call.target_from_model for call in calls)
            details["target_from_batch"] = from_batch
            status = "fail" if high < 1 - self.low_rtol and not from_batch else "warn"
            action = "Look for a target leak into inputs, predictions as targets; pretrained: expected_loss=."
            return self.verdict(status, f"{stated}: suspiciously low", details, action=action)
        return self.verdict("pass", stated, details)

    def _expectation(self, calls: list[LossCall | None]) -> Expectation:
        if self.expected_loss is not None:
            return Expectation(float(self.expected_loss), "given expected_loss", self.num_classes, "given")
        if (n := self.num_classes) is not None:
            return Expectation(math.log(n), f"ln {n}, num_classes given", n, f"ln {n}")
        first = calls[0]
        if first is None or any(call is None for call in calls):
            return Expectation(None, "no single loss call of known value at init: a sum, rescaled or by hand")
        if first.num_classes is not None and not (first.target_keys or first.target_from_model):
            return Expectation(None, f"{first.function} on targets built in the step: no known value at init")
        same = [c for c in calls[1:] if c is not None and c.function == first.function]
        return expected_initial_loss(first, same)

    @staticmethod
    def _with_output_layer_scaled(context: CheckContext, batches: list[Any]) -> tuple[str, float] | None:
        """The last module with parameters of its own that ran, and the mean loss with them scaled by 0.1."""
        model = context.copy_model()
        ran = modules_run(context, model, batches[0])
        ran = [(n, m) for n, m in ran if n and next(m.parameters(recurse=False), None) is not None]
        if not ran:
            return None
        with torch.no_grad():
            for parameter in ran[-1][1].parameters(recurse=False):
                parameter.mul_(0.1)
            losses = [context.training_loss(model, batch, i).float() for i, batch in enumerate(batches)]
        return ran[-1][0], torch.stack(losses).mean().item()  # sync: once, only for a loss too high

    @staticmethod
    def _summed(ratio: float, batch: object, context: CheckContext) -> int | None:
        """The count of targets (or samples) in a batch the ratio is close to: a loss summed over them."""
        size, (_, targets) = batch_size_of(batch, context.input_key), context.split(batch)
        counts = {n for n in (size, None if targets is None else targets.numel()) if n}
        return next((n for n in sorted(counts) if n > 2 and abs(ratio / n - 1) < 0.15), None)


def _at_uniform_prediction(calls: list[LossCall | None]) -> float | None:
    """The mean recorded logit loss with every logit 0 (a uniform prediction); ``None`` for other losses."""
    values = []
    for call in calls:
        if call is None or call.target is None or call.function not in _LOGIT_LOSSES:
            return None
        function = getattr(torch.nn.functional, call.function)
        values.append(function(torch.zeros_like(call.output), call.target, **call.kwargs).float())
    return torch.stack(values).mean().item() if values else None  # sync: once, only for a loss too high


_LOGIT_LOSSES = ("cross_entropy", "binary_cross_entropy_with_logits")


def _summed_by_hand(calls: list[LossCall], loss: torch.Tensor) -> LossCall | None:
    """The one mean-reduced call a loss is ``n`` times, ``n`` its count of targets (a sum written by hand)."""
    if len(calls) != 1 or calls[0].loss is None or calls[0].loss.numel() != 1 or calls[0].target is None:
        return None
    count = calls[0].target.numel()
    scaled = bool(torch.isclose(loss.detach(), calls[0].loss.detach() * count, rtol=1e-5))  # sync: once
    return calls[0] if count > 1 and calls[0].kwargs.get("reduction") == "mean" and scaled else None
