"""Check that the target cannot be read off the inputs without learning."""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import override

from lightning_recipes._validation import check_bool, check_in_range, check_int
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.data._leakage_probes import (
    SingleFeature,
    TooGood,
    first_samples,
    probe_copy_targets,
    probe_single_feature,
    probe_target_fed,
    probe_too_good,
)
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import Key

__all__ = ["TargetLeakageCheck"]

_LOSS_IGNORES_TARGET = (
    "the loss does not change with the target tensor (a reconstruction or self-supervised model, or another "
    "tensor is the target: pass `target_key`)"
)


class TargetLeakageCheck(SanityCheck):
    """Verify that the target is not recoverable from the inputs without learning (target leakage).

    Four tests: (0) changing only the target must not move the model's output (teacher forcing shifted right
    is fine; ``target_as_input=False`` turns it off); (a) a sequence model's loss must not pull position ``t``
    toward input token ``t`` (unshifted LM targets); (b) no single feature or batch entry predicts the label
    (``max_accuracy``) or correlates with it (``max_correlation``); (c) a held-out loss below
    ``too_good_fraction x ln C`` within a few steps warns. (b) and (c) run only when the loss reads
    the target.

    Cost: a few forward passes, one backward, vectorised feature scans and up to ``train_steps`` steps.

    Args:
        num_batches: Training batches read.
        num_eval_batches: Held-out batches.
        num_samples: Samples kept from each training batch (``None``: whole batches).
        max_accuracy: (b) held-out accuracy of one feature's lookup table that counts as leakage.
        max_correlation: (b) absolute correlation of one feature with a regression target that counts as
            leakage.
        num_bins: (b) quantile bins per feature.
        train_steps: (c) optimizer steps of the short training (0 turns (c) off).
        too_good_fraction: (c) held-out loss below this fraction of ``ln C`` warns.
        target_as_input: (0) test whether the model's output changes with the target alone.

    Raises:
        ValueError: If a count is out of range or a fraction is not in (0, 1].
        TypeError: If ``target_as_input`` is not a bool.

    Example:
        >>> import torch
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier
        >>> x = torch.randn(256, 16)
        >>> y = (x[:, :4] @ torch.randn(4, 4)).argmax(-1)
        >>> x[:, 7] = y  # the label written into the features
        >>> loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32)
        >>> result = preflight(TinyClassifier(), train_dataloaders=loader, checks=[TargetLeakageCheck()])
        >>> result["target_leakage"].status, result["target_leakage"].details["feature"]
        ('fail', 'inputs[:, 7]')
    """

    name = "target_leakage"
    model_samples = 4  # samples of the first batch that tests (0) and (a) run the model on
    eval_samples = 128  # samples of each held-out batch the short training (c) is evaluated on

    def __init__(
        self,
        num_batches: int = 8,
        num_eval_batches: int = 2,
        num_samples: int | None = 64,
        max_accuracy: float = 0.99,
        max_correlation: float = 0.999,
        num_bins: int = 32,
        train_steps: int = 20,
        too_good_fraction: float = 0.05,
        target_as_input: bool = True,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_int("num_batches", num_batches, minimum=1)
        check_int("num_eval_batches", num_eval_batches, minimum=1)
        if num_samples is not None:
            check_int("num_samples", num_samples, minimum=2)
        check_in_range("max_accuracy", max_accuracy, 0, 1, low_open=True)
        check_in_range("max_correlation", max_correlation, 0, 1, low_open=True)
        check_int("num_bins", num_bins, minimum=2)
        check_int("train_steps", train_steps, minimum=0)
        check_in_range("too_good_fraction", too_good_fraction, 0, 1, low_open=True)
        check_bool("target_as_input", target_as_input)
        self.num_batches = num_batches
        self.num_eval_batches = num_eval_batches
        self.num_samples = num_samples
        self.max_accuracy = max_accuracy
        self.max_correlation = max_correlation
        self.num_bins = num_bins
        self.train_steps = train_steps
        self.too_good_fraction = too_good_fraction
        self.target_as_input = target_as_input

    @override
    def check(self, context: CheckContext) -> CheckResult:
        train, held_out, source = self._read(context)
        inputs, targets = context.split(train[0])
        if inputs is None or targets is None:
            raise CheckSkipped(
                "cannot find both the input and the target tensor in the batch; pass `input_key` / "
                "`target_key`."
            )
        details: dict[str, Any] = {"held_out": source}
        fails: list[str] = []
        notes: list[str] = []  # what each test found, for a pass message
        skipped: list[str] = []  # why a test did not apply

        first = first_samples(context, train[0], self.model_samples)
        fed = probe_target_fed(context, first, self.target_as_input)
        details["target_as_input"] = fed.details()
        if fed.reason is not None:
            skipped.append(f"(0) {fed.reason}")
        else:
            (fails if fed.leak else notes).append(fed.message)

        copy = probe_copy_targets(context, first)
        details["copy_targets"] = copy.details()
        if copy.reason is not None:
            skipped.append(f"(a) {copy.reason}")
        elif copy.leak is not None:
            fails.append(copy.message)
            details["measured"] = copy.measured
        else:
            notes.append(copy.message)

        loss_ignores_target = fed.loss_uses_target is False
        if loss_ignores_target:
            feature = SingleFeature(f"single feature: {_LOSS_IGNORES_TARGET}")
        else:
            feature = probe_single_feature(
                context,
                train,
                held_out,
                max_accuracy=self.max_accuracy,
                max_correlation=self.max_correlation,
                num_bins=self.num_bins,
            )
        details["single_feature"] = feature.details()
        if feature.reason is not None:
            skipped.append(f"(b) {feature.reason}")
        elif feature.budget_cut and not feature.leak:
            # a scan the budget cut proves nothing about the features it did not score: not tested
            skipped.append(
                f"(b) single feature: the time budget stopped the scan after {feature.features_scanned} of "
                f"{feature.features_total} features (so not tested)"
            )
            details["stopped_by_time_budget"] = True
        elif feature.leak:
            fails.append(feature.message)
            details["feature"] = feature.name
            details["measured"] = feature.score
        else:
            notes.append(feature.message)
            details.setdefault("measured", feature.score)

        if fails:
            return CheckResult(
                self.name,
                "fail",
                "target leakage, the model can get its label without learning: "
                + " ".join(fails)
                + " The model will train beautifully and learn nothing usable.",
                details,
            )
        capped = [first_samples(context, batch, self.eval_samples) for batch in held_out]
        if loss_ignores_target:
            too_good = TooGood("too good to be true: the loss does not change with the target tensor")
        else:
            classes = feature.classes if feature.task == "classification" else None
            too_good = probe_too_good(
                context,
                train,
                capped,
                classes,
                train_steps=self.train_steps,
                fraction=self.too_good_fraction,
            )
        details["too_good"] = too_good.details()
        if too_good.reason is not None:
            skipped.append(f"(c) {too_good.reason}")
        elif too_good.budget_stopped and not too_good.leak:
            # a look cut short by the budget proves nothing: not tested, never part of a pass
            skipped.append(f"(c) {too_good.message} (so not tested)")
            details["stopped_by_time_budget"] = True
        elif too_good.leak:
            return CheckResult(self.name, "warn", too_good.message, details)
        else:
            notes.append(too_good.message)
        if not notes and details.get("stopped_by_time_budget"):
            return CheckResult(
                self.name,
                "inconclusive",
                "no leakage test finished: " + "; ".join(skipped) + ". Try: a larger `time_budget` for this "
                "check (or None).",
                details,
            )
        if not notes:
            raise CheckSkipped("no leakage test applies here: " + "; ".join(skipped) + ".")
        tail = f" Not tested: {'; '.join(skipped)}." if skipped else ""
        message = "no target leakage found: " + "; ".join(notes) + "." + tail
        return CheckResult(self.name, "pass", message, details)

    def _read(self, context: CheckContext) -> tuple[list[Any], list[Any], str]:
        """Training batches, held-out batches (the validation loader, else the last training batches) and
        where the held-out ones came from."""
        held_out = context.val_batches(self.num_eval_batches)
        if held_out:
            return (
                context.read_train_batches(self.num_batches, self.num_samples),
                held_out,
                "validation batches",
            )
        available = context.read_train_batches(self.num_batches + self.num_eval_batches, self.num_samples)
        if len(available) < 2:
            raise CheckSkipped("needs held-out data: a validation loader or at least 2 training batches.")
        keep = min(self.num_eval_batches, len(available) // 2)
        return available[:-keep], available[-keep:], "held-out training batches (no validation loader)"
