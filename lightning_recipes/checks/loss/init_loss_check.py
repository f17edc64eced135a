"""Check the first loss against its expected value (``ln C`` for classification)."""

from __future__ import annotations

import math
from typing import Literal

import torch
from typing_extensions import override

from lightning_recipes._stats import standard_error
from lightning_recipes._validation import check_in_range, check_int, check_positive, is_number
from lightning_recipes.checks._num_classes import infer_num_classes
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.loss._expected_loss import (
    Expectation,
    expected_initial_loss,
    loss_call_for,
    record_loss_calls,
)
from lightning_recipes.checks.report import CheckResult, CheckSkipped, Status
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import LossCall
from lightning_recipes.harness.batches import Key, batch_size_of

__all__ = ["InitLossCheck"]


class InitLossCheck(SanityCheck):
    """Compare the loss at initialisation with what an untrained model should score.

    The expectation comes from the recorded ``torch.nn.functional`` loss call: ``ln C`` for
    ``cross_entropy``/``nll_loss``, ``ln 2`` per output for binary cross-entropy with 0/1 targets, the
    label prior's entropy for a prior-initialised bias. Far above means a bad init or a summed loss, far below
    a leak or a wrong loss. Regression and reconstruction losses have no known value at init: ``skip`` (pass
    ``expected_loss=``). Logged as ``preflight/init_loss``.

    Cost: ``num_batches`` forward passes on a copy, no gradients.

    Args:
        expected_loss: The expected initial loss; overrides inference.
        num_classes: Number of classes ``C`` (expected loss ``ln C``) when shapes cannot tell.
        num_batches: Training batches to average over.
        warn_rtol: Relative deviation from the expectation that gives ``"warn"``.
        high_rtol: Relative excess that gives ``"fail"`` (default 1.0: twice the expected loss).
        low_rtol: Relative shortfall that gives ``"fail"`` (default 0.5: half the expected loss).
        on_fail: ``"raise"`` a :class:`~lightning_recipes.checks.PreflightError` or ``"warn"`` when used as
            a callback.
        input_key: Index or key of the input in a batch (default ``batch[0]`` / ``"x"``, ``"input_ids"``,
            ...).
        target_key: Index or key of the target (default ``batch[-1]`` / ``"y"``, ``"labels"``, ...).

    Raises:
        ValueError: If a tolerance is not positive, ``num_batches < 1``, ``num_classes < 2`` or
            ``expected_loss`` is not finite.

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
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        if expected_loss is not None and not is_number(expected_loss):
            raise ValueError(f"`expected_loss` must be a finite number or None, got {expected_loss!r}.")
        if num_classes is not None:
            check_int("num_classes", num_classes, minimum=2)
        check_int("num_batches", num_batches, minimum=1)
        check_positive("warn_rtol", warn_rtol)
        check_positive("high_rtol", high_rtol)
        check_in_range("low_rtol", low_rtol, 0, 1, low_open=True, high_open=True)
        if warn_rtol > min(high_rtol, low_rtol):
            raise ValueError(
                f"`warn_rtol` must not exceed `high_rtol` and `low_rtol`, got {warn_rtol!r} > "
                f"{min(high_rtol, low_rtol)!r}."
            )
        self.expected_loss = expected_loss
        self.num_classes = num_classes
        self.num_batches = num_batches
        self.warn_rtol = warn_rtol
        self.high_rtol = high_rtol
        self.low_rtol = low_rtol

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        context.require_automatic_optimization(model)
        batches = context.train_batches(self.num_batches)
        losses, outputs, calls = [], [], []
        with torch.no_grad(), context.capture_forward(model) as captured:
            for index, batch in enumerate(batches):
                with record_loss_calls() as recorded:
                    loss = context.training_loss(model, batch, index)
                losses.append(loss.float())
                outputs.append(captured.last())
                calls.append(loss_call_for(recorded, loss))
                captured.clear()
        per_batch = torch.stack(losses).tolist()  # sync: once per check
        measured = sum(per_batch) / len(per_batch)
        _, targets = context.split(batches[0])
        expectation = self._expectation(context, outputs[0], targets, calls)
        expected, source, classes = expectation.value, expectation.source, expectation.num_classes
        details = {
            "measured": measured,
            "expected": expected,
            "per_batch": per_batch,
            "num_classes": classes,
            "expected_from": source,
            **expectation.extra,
        }
        if not math.isfinite(measured):
            return CheckResult(
                self.name,
                "fail",
                f"the loss at init is {measured} (not finite). Expected a finite value. Likely causes: "
                "NaN/Inf in the data (see the data check), log of 0 (use log_softmax / cross_entropy on "
                "logits instead of log(softmax)), division by zero in the loss. Try: run the data check; use "
                "F.cross_entropy.",
                details,
            )
        if expected is None:
            why = expectation.reason or (
                f"the forward output {_shape(outputs[0])} and targets {_shape(targets)} do not look like "
                "classification logits [B, C] / [B, S, V] with integer targets"
            )
            raise CheckSkipped(
                f"cannot infer the expected initial loss (measured {measured:.4g}): {why}. Pass "
                "`InitLossCheck(expected_loss=...)` to compare with a baseline of your own (for MSE: the "
                "targets' variance is what predicting their mean scores), or `num_classes=` for a classifier "
                "(or `preflight(..., num_classes=...)`)."
            )
        ratio = measured / expected
        # batch-to-batch standard error of the measured mean, as a ratio (0 when one batch: not measured)
        se = float(standard_error(torch.tensor(per_batch, dtype=torch.float64)))
        noise = (se if math.isfinite(se) else 0.0) / abs(expected) if expected else 0.0  # < 2 batches: 0
        details["ratio"] = ratio
        details["ratio_noise"] = noise
        status: Status
        stated = f"loss at init {measured:.4g} vs expected {expected:.4g} ({source}), ratio {ratio:.2f}" + (
            f" ± {2 * noise:.2f} (2 standard errors, batch to batch)" if noise > 0 else ""
        )
        # A verdict needs the ratio beyond its line by more than its noise; a ratio past the warn line but
        # within noise of it is inconclusive, never a false alarm.
        low, high = ratio - 2 * noise, ratio + 2 * noise
        if ratio > 1 + self.warn_rtol and low <= 1 + self.warn_rtol:
            return self._within_noise(stated, "above", details)
        if ratio < 1 - self.warn_rtol and high >= 1 - self.warn_rtol:
            return self._within_noise(stated, "below", details)
        if ratio > 1 + self.warn_rtol:
            status = "fail" if low > 1 + self.high_rtol else "warn"
            hint = self._sum_hint(ratio, batches[0], context)
            return CheckResult(
                self.name,
                status,
                f"{stated}: too high.{hint} Likely causes: the loss is summed instead of averaged "
                "(reduction='sum'), the output layer is initialised too large so the model is confidently "
                "wrong at init, or extra terms (regularisers, auxiliary losses) are added to the loss. Try: "
                "reduction='mean'; scale down or zero-initialise the last layer (its bias too); log the "
                "terms of the loss separately.",
                details,
            )
        if ratio < 1 - self.warn_rtol:
            status = "fail" if high < 1 - self.low_rtol else "warn"
            return CheckResult(
                self.name,
                status,
                f"{stated}: suspiciously low for an untrained model, which should predict at chance. Likely "
                "causes: the targets leak into the inputs, the loss is computed against the model's own "
                "predictions or on the wrong tensors, or the weights are pretrained (then this is expected: "
                "pass `expected_loss=` or drop this check). Try: inspect what the loss receives.",
                details,
            )
        return CheckResult(
            self.name, "pass", f"{stated}: as expected for an untrained model.{expectation.note}", details
        )

    def _within_noise(self, stated: str, side: str, details: dict[str, object]) -> CheckResult:
        return CheckResult(
            self.name,
            "inconclusive",
            f"{stated}: {side} the expectation by more than {self.warn_rtol:.0%}, but within the loss's "
            "batch-to-batch noise of that line; no verdict. Try: InitLossCheck(num_batches=...) with more "
            "batches (or larger ones).",
            details,
        )

    def _expectation(
        self,
        context: CheckContext,
        output: torch.Tensor | None,
        targets: torch.Tensor | None,
        calls: list[LossCall | None],
    ) -> Expectation:
        if self.expected_loss is not None:
            return Expectation(float(self.expected_loss), "given expected_loss", self.num_classes)
        if self.num_classes is not None:
            return Expectation(
                math.log(self.num_classes), f"ln {self.num_classes}, num_classes given", self.num_classes
            )
        first = calls[0]
        if first is not None:
            same = [c for c in calls[1:] if c is not None and c.function == first.function]
            expectation = expected_initial_loss(first, same)
            if expectation.value is not None or context.num_classes is None:
                return expectation
        if context.num_classes is not None:
            classes = context.num_classes
            return Expectation(math.log(classes), f"ln {classes}, num_classes given", classes)
        inferred = infer_num_classes(output, targets)
        if inferred is None:
            return Expectation(None, "")
        classes, how = inferred
        return Expectation(math.log(classes), f"ln {classes}, {how}", classes)

    @staticmethod
    def _sum_hint(ratio: float, batch: object, context: CheckContext) -> str:
        size = batch_size_of(batch, context.input_key)
        _, targets = context.split(batch)
        counts = {size} if size else set()
        if targets is not None and targets.numel() > 1:
            counts.add(targets.numel())
        for count in sorted(counts):
            if count > 2 and abs(ratio / count - 1) < 0.15:
                return (
                    f" The ratio is close to the number of targets in the batch ({count}): the loss is "
                    "probably summed instead of averaged."
                )
        return ""


def _shape(tensor: torch.Tensor | None) -> str:
    return "(none)" if tensor is None else f"{list(tensor.shape)} {str(tensor.dtype).replace('torch.', '')}"
