"""Check that the model does better with its inputs than without them."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from typing_extensions import override

from lightning_recipes.callbacks._checks.base import CheckResult, SanityCheck
from lightning_recipes.callbacks._checks.batches import Key, batch_size_of, replace_inputs, slice_batch
from lightning_recipes.callbacks._checks.context import CheckContext, CheckSkipped

__all__ = ["InputIndependenceCheck"]


class InputIndependenceCheck(SanityCheck):
    """Train briefly on real inputs and on zeroed inputs; the real-input model must score better on held-out data.

    A model that never sees its inputs can still learn the label prior, so "the loss went down" proves
    nothing. This check trains two copies from the same initialisation for ``max_steps`` steps each, one on
    the real batches and one on the same batches with the input tensor zeroed (token ids set to 0), then
    compares their loss on held-out batches (the validation loader, or training batches kept out of the
    short training). The real-input model must be better by ``min_improvement`` (relative); otherwise the
    model does not use its inputs, or the labels do not depend on them (labels shuffled against inputs,
    inputs and labels read from different orderings, an input overwritten in ``forward``).

    The held-out loss is ``training_step``'s return value in eval mode without gradients.

    Cost: ``2 x max_steps`` training steps (batches capped at ``num_samples``) on copies of the model, plus ``2 x num_eval_batches`` evaluation
    passes; one host sync at the end.

    Args:
        max_steps: Training steps for each of the two copies.
        num_batches: Distinct training batches cycled through.
        num_eval_batches: Held-out batches the two copies are compared on.
        min_improvement: Required relative improvement ``(zeroed - real) / zeroed`` of the held-out loss.
        num_samples: Samples kept from each training batch (``None``: whole batches); held-out batches are
            used whole.
        on_fail: ``"raise"`` or ``"warn"`` when used as a callback.
        input_key: Index or key of the input in a batch.
        target_key: Index or key of the target.

    Raises:
        ValueError: If a count is < 1 or ``min_improvement`` is outside [0, 1).

    Example:
        >>> from lightning_recipes.callbacks._checks.context import CheckContext
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> context = CheckContext(TinyClassifier(lr=0.5), random_classification_loader(batch_size=32))
        >>> InputIndependenceCheck(max_steps=20).run(context).status
        'pass'

    Logged keys (as a callback, rank zero, step 0):

    =================================  ==========================================
    Key                                Value
    =================================  ==========================================
    ``preflight/input_independence``   relative improvement over zeroed inputs
    =================================  ==========================================
    """

    name = "input_independence"

    def __init__(
        self,
        max_steps: int = 30,
        num_batches: int = 4,
        num_eval_batches: int = 2,
        min_improvement: float = 0.05,
        num_samples: int | None = 32,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key)
        for arg, value in (("max_steps", max_steps), ("num_batches", num_batches)):
            if value < 1:
                raise ValueError(f"`{arg}` must be >= 1, got {value!r}.")
        if num_eval_batches < 1:
            raise ValueError(f"`num_eval_batches` must be >= 1, got {num_eval_batches!r}.")
        if not 0 <= min_improvement < 1:
            raise ValueError(f"`min_improvement` must be in [0, 1), got {min_improvement!r}.")
        if num_samples is not None and num_samples < 1:
            raise ValueError(f"`num_samples` must be >= 1 or None, got {num_samples!r}.")
        self.num_samples = num_samples
        self.max_steps = max_steps
        self.num_batches = num_batches
        self.num_eval_batches = num_eval_batches
        self.min_improvement = min_improvement

    @override
    def check(self, context: CheckContext) -> CheckResult:
        context.require_automatic_optimization(context.model)
        held_out = context.val_batches(self.num_eval_batches)
        if held_out:
            train = context.train_batches(self.num_batches)
            source = "validation batches"
        else:
            available = context.train_batches(self.num_batches + self.num_eval_batches)
            if len(available) < 2:
                raise CheckSkipped("needs held-out data: a validation loader or at least 2 training batches.")
            keep = min(self.num_eval_batches, len(available) // 2)
            train, held_out = available[:-keep], available[-keep:]
            source = "held-out training batches"
        if context.split(train[0])[0] is None:
            raise CheckSkipped("cannot find the input tensor in the batch; pass `input_key`.")
        train = [self._cap(context, batch) for batch in train]
        real = self._train_and_evaluate(context, train, held_out, zero=False)
        zeroed = self._train_and_evaluate(context, train, held_out, zero=True)
        real_loss, zero_loss = torch.stack([real, zeroed]).tolist()  # sync: once
        improvement = (zero_loss - real_loss) / abs(zero_loss) if zero_loss != 0 else -math.inf
        details = {
            "measured": improvement,
            "loss_real_inputs": real_loss,
            "loss_zeroed_inputs": zero_loss,
            "min_improvement": self.min_improvement,
            "steps": self.max_steps,
            "evaluated_on": source,
        }
        stated = (
            f"held-out loss after {self.max_steps} steps: {real_loss:.4g} with real inputs vs {zero_loss:.4g} "
            f"with zeroed inputs ({improvement:+.1%}, need >= {self.min_improvement:.0%})"
        )
        if not (math.isfinite(real_loss) and math.isfinite(zero_loss)):
            return CheckResult(
                self.name,
                "fail",
                f"{stated}: a loss is not finite. Likely causes: NaN/Inf in the data or a diverging learning "
                "rate. Try: run the data check; lower the learning rate.",
                details,
            )
        if improvement >= self.min_improvement:
            return CheckResult(self.name, "pass", f"{stated}: the model uses its inputs.", details)
        return CheckResult(
            self.name,
            "fail",
            f"{stated}: the model does not use its inputs, or the labels do not depend on them. Likely "
            "causes: labels shuffled or misaligned against inputs (two datasets indexed differently, a "
            "shuffle applied to one of them), forward ignores or overwrites its input, inputs are constant. "
            "Try: print a few (input, label) pairs; check the Dataset's __getitem__; run the data check.",
            details,
        )

    def _train_and_evaluate(
        self, context: CheckContext, train: list[Any], held_out: list[Any], *, zero: bool
    ) -> torch.Tensor:
        torch.manual_seed(context.seed)  # both copies see the same dropout masks and init-time randomness
        model = context.copy_model()
        optimizers, _ = context.build_optimizers(model)
        for step in range(self.max_steps):
            batch = self._maybe_zero(context, train[step % len(train)], zero)
            context.optimization_step(model, optimizers, batch, step)
        model.eval()
        with torch.no_grad():
            losses = [
                context.training_loss(model, self._maybe_zero(context, batch, zero), index).float()
                for index, batch in enumerate(held_out)
            ]
        return torch.stack(losses).mean()

    def _cap(self, context: CheckContext, batch: Any) -> Any:
        size = batch_size_of(batch, context.input_key)
        if size is None or self.num_samples is None or size <= self.num_samples:
            return batch
        return slice_batch(batch, self.num_samples, size)

    @staticmethod
    def _maybe_zero(context: CheckContext, batch: Any, zero: bool) -> Any:
        if not zero:
            return batch
        inputs, _ = context.split(batch)
        assert inputs is not None  # checked before training
        return replace_inputs(batch, torch.zeros_like(inputs), context.input_key)
