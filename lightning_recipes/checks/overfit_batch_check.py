"""Check that the model can memorise one small batch."""

from __future__ import annotations

import math
from typing import Literal

import torch
from typing_extensions import override

from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks._batches import Key, batch_size_of, slice_batch
from lightning_recipes.checks.base import SanityCheck
from lightning_recipes.checks.context import CheckContext
from lightning_recipes.checks.report import CheckResult

__all__ = ["OverfitBatchCheck"]


class OverfitBatchCheck(SanityCheck):
    """Train a copy of the model on one fixed small batch and require the loss to fall to a target.

    Any healthy model memorises a handful of samples. If the loss does not fall, no useful gradient reaches
    the weights: a loss clamped instead of the gradient clipped, a ``.detach()`` / ``no_grad`` in the loss
    path, a learning rate of ~0, an optimizer built over the wrong parameters. Unlike Lightning's
    ``overfit_batches`` (which only trains), this asserts the loss fell and reports the curve.

    The copy trains with the module's own ``configure_optimizers`` at its peak learning rate (a scheduler's
    ``initial_lr``; schedulers are not stepped), in train mode, on the first ``num_samples`` samples of the
    first training batch, for at most ``max_steps`` steps (stopping early once the target is met). It passes
    when the loss reaches ``target_ratio`` x the initial loss; ``warn`` when it fell at least half that way.
    The default 0.3 leaves room for losses with a floor above 0 (label smoothing 0.1 over 10 classes has a
    floor of 0.22 x ln 10).

    Cost: up to ``max_steps`` forward+backward passes on a small batch with a copy of the model and its
    optimizer state (2-3x the model's memory); one host sync every 5 steps.

    Args:
        max_steps: Step budget.
        target_ratio: Pass when the loss falls to this fraction of its initial value, in (0, 1).
        num_samples: Samples taken from the first batch (``None``: the whole batch).
        on_fail: ``"raise"`` or ``"warn"`` when used as a callback.
        input_key: Index or key of the input in a batch.
        target_key: Index or key of the target.

    Raises:
        ValueError: If ``max_steps < 1``, ``target_ratio`` is outside (0, 1) or ``num_samples < 1``.

    Example:
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> report = preflight(
        ...     TinyClassifier(lr=0.5), train_dataloaders=random_classification_loader(),
        ...     checks=[OverfitBatchCheck(max_steps=100)], num_threads=1,
        ... )
        >>> result = report["overfit_batch"]
        >>> result.status, result.details["best"] < 0.3 * result.details["initial"]
        ('pass', True)

    Logged keys (as a callback, rank zero, step 0):

    ============================  ====================================
    Key                           Value
    ============================  ====================================
    ``preflight/overfit_batch``   best loss / initial loss
    ============================  ====================================
    """

    name = "overfit_batch"

    def __init__(
        self,
        max_steps: int = 150,
        target_ratio: float = 0.3,
        num_samples: int | None = 16,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key)
        check_int("max_steps", max_steps, minimum=1)
        check_in_range("target_ratio", target_ratio, 0, 1, low_open=True, high_open=True)
        if num_samples is not None:
            check_int("num_samples", num_samples, minimum=1)
        self.max_steps = max_steps
        self.target_ratio = target_ratio
        self.num_samples = num_samples

    @override
    def check(self, context: CheckContext) -> CheckResult:
        model = context.copy_model()
        context.require_automatic_optimization(model)
        batch = context.train_batches(1)[0]
        size = batch_size_of(batch, context.input_key)
        if size is not None and self.num_samples is not None and size > self.num_samples:
            batch = slice_batch(batch, self.num_samples, size)
            size = self.num_samples
        optimizers, note = context.build_optimizers(model)
        curve: list[torch.Tensor] = []
        target = None
        for step in range(self.max_steps):
            curve.append(context.optimization_step(model, optimizers, batch).float())
            if step == 0:
                initial = float(curve[0])  # sync: once
                if not math.isfinite(initial):
                    break
                target = initial - (1 - self.target_ratio) * abs(initial)
            elif step % 5 == 4 or step == self.max_steps - 1:
                best_so_far = float(torch.stack(curve).nan_to_num(nan=math.inf).min())  # sync: every 5 steps
                if target is not None and best_so_far <= target:
                    break
        values = torch.stack(curve).tolist()
        initial, steps = values[0], len(values)
        finite = [v for v in values if math.isfinite(v)]
        best = min(finite) if finite else math.nan
        details = {
            "initial": initial,
            "best": best,
            "final": values[-1],
            "target": target,
            "steps": steps,
            "samples": size,
            "curve": [round(v, 5) for v in values],
            "optimizer": note,
        }
        if initial != 0 and math.isfinite(best):
            details["measured"] = best / initial
        where = f"one batch of {size} samples" if size else "one batch"
        if len(finite) < len(values):
            first_bad = next(i for i, v in enumerate(values) if not math.isfinite(v))
            return CheckResult(
                self.name,
                "fail",
                f"the loss became {values[first_bad]} at step {first_bad} while overfitting {where}. Likely "
                "causes: learning rate far too high, NaN/Inf in the data, an unstable loss (log of 0, "
                "division by a batch statistic). Try: lower the learning rate 10x; run the data check; add "
                "gradient_clip_val.",
                details,
            )
        assert target is not None
        fell = f"loss {initial:.4g} -> best {best:.4g} in {steps} steps on {where}"
        if best <= target:
            return CheckResult(
                self.name,
                "pass",
                f"{fell} (target {target:.4g} = {self.target_ratio:g} x initial): the model can fit data.",
                details,
            )
        halfway = initial - 0.5 * (1 - self.target_ratio) * abs(initial)
        if best <= halfway:
            return CheckResult(
                self.name,
                "warn",
                f"{fell}: it fell, but not to the target {target:.4g} ({self.target_ratio:g} x initial) "
                f"within {self.max_steps} steps. Likely causes: a small learning rate, strong regularisation "
                "(dropout, weight decay) or a loss with a high floor. Try: "
                "`OverfitBatchCheck(max_steps=...)` with more steps, or a larger learning rate.",
                details,
            )
        return CheckResult(
            self.name,
            "fail",
            f"{fell}: the model cannot memorise {where} (expected <= {target:.4g}, {self.target_ratio:g} x "
            "initial). Likely causes: no gradient reaches the weights (a loss clamped or clipped instead of "
            "the gradient, a .detach()/.item()/no_grad in the loss path; see grad_flow), a learning rate of "
            "~0 or an optimizer over the wrong parameters, a loss that does not depend on the outputs, or "
            "frozen layers. Try: run the grad_flow check; print the optimizer's param_groups and lr; clip "
            "gradients with Trainer(gradient_clip_val=...) instead of clamping the loss.",
            details,
        )
