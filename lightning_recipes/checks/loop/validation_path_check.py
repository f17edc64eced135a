"""Check that ``validation_step`` sees what ``training_step`` fitted, on the same batch."""

from __future__ import annotations

import math
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch.nn.modules.batchnorm import _BatchNorm
from typing_extensions import Unpack, override

from lightning_recipes._stats import difference_noise
from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks._probe import first_of, keeping_statistics, listed
from lightning_recipes.checks.base import CheckOptions, SanityCheck
from lightning_recipes.checks.report import CheckInconclusive, CheckResult, CheckSkipped, Status
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.trial_fit import trial_fit

__all__ = ["ValidationPathCheck"]

BATCHNORM_LAG = 0.1  #: share of their initial values BatchNorm's running statistics may hold for a verdict
#: With BatchNorm, validation following this share of training's fall is not judged (its statistics lag).
BATCHNORM_PARTIAL = 0.2
#: Relative difference above which the inputs of the two paths count as different (float noise: ~1e-7).
INPUT_TOL = 1e-3
#: A relative difference of the first module's inputs (same batch) that fails even when validation followed.
INPUT_FAIL = 0.1


class ValidationPathCheck(SanityCheck):
    """After a trial fit of one batch, ``validation_step`` on that batch must see the fit too.
    Cost: one small fit with two validation passes (shared with ``optimization``).

    Args:
        min_share: Share of the training loss's fall that the validation loss must fall, in (0, 1).
        steps: Training batches of the trial fit at most (it stops once the loss halved, after >= 8).
        max_samples: Samples of the first training batch used.

    Example:
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> loader = random_classification_loader()
        >>> report = preflight(TinyClassifier(lr=0.5), train_dataloaders=loader, val_dataloaders=loader,
        ...                    checks=[ValidationPathCheck()], num_threads=1, progress=False)
        >>> result = report["validation_path"]
        >>> result.status, result.details["source"], result.details["share"] > 0.5
        ('pass', "logged 'val_loss'", True)
    """

    name = "validation_path"

    def __init__(
        self,
        min_share: float = 0.5,
        steps: int = 30,
        max_samples: int = 64,
        **options: Unpack[CheckOptions],
    ) -> None:
        super().__init__(**options)
        check_in_range("min_share", min_share, 0, 1, low_open=True, high_open=True)
        check_int("steps", steps, minimum=3)
        check_int("max_samples", max_samples, minimum=1)
        self.min_share, self.steps, self.max_samples = min_share, steps, max_samples

    @override
    def check(self, context: CheckContext) -> CheckResult:
        if not is_overridden("validation_step", context.model, pl.LightningModule):
            raise CheckSkipped("the module defines no `validation_step`: no validation path to check.")
        fit = trial_fit(context, steps=self.steps, max_samples=self.max_samples)
        view = fit.validation
        if view is None or view.before is None or view.after is None:
            logged = (sorted(view.logged)[:3] if view is not None else []) or "nothing"
            raise CheckSkipped(f"`validation_step` returns no loss, logs no 'val_loss' (logged: {logged})")
        losses = [v for v in fit.train_losses if math.isfinite(v)]
        details: dict[str, Any] = {"batches": len(fit.train_losses), "seconds_trial": round(fit.seconds, 3)}
        if len(losses) < 3 or len(losses) < len(fit.train_losses):
            finite = f"{len(losses)} of {len(fit.train_losses)}"
            raise CheckInconclusive(f"the trial's loss was finite at {finite} batches: no comparison")
        first, last = losses[0], losses[-1]
        sigma = difference_noise(losses[len(losses) // 2 - 1 :], order=2)  # the end: less curvature
        train_drop, val_drop = first - last, view.before - view.after
        needed = max(0.1 * abs(first), 4 * sigma)
        share = val_drop / train_drop if train_drop else 0.0
        details.update(train_first=first, train_last=last, train_noise=sigma, train_drop=train_drop)
        details.update(val_drop=val_drop, share=share, min_share=self.min_share, samples=fit.samples)
        details.update(vars(view))
        if train_drop < needed:
            fall = f"{first:.3g} -> {last:.3g}, needs a fall of {needed:.2g}"
            raise CheckInconclusive(f"the copy did not fit the batch in {len(losses)} steps ({fall})")
        saw = f"train {first:.3g} -> {last:.3g}, val {view.before:.3g} -> {view.after:.3g}"
        differs = view.input_difference is not None and view.input_difference > INPUT_TOL
        inputs = f"`{view.input_module[:24]}` gets inputs {view.input_difference or 0:.2g} apart in val"
        same_preprocessing = "Apply one preprocessing function in both steps (or in on_after_batch_transfer)."
        needed_val = self.min_share * train_drop - 3 * sigma  # also by batch statistics (BatchNorm's lag)
        if val_drop >= needed_val:
            if not differs:
                return self.verdict("pass", f"{saw} ({share:.0%}): validation sees the fit", details)
            details["gap_after"] = gap = view.after - last
            far = gap > self.min_share * train_drop + 3 * sigma or (view.input_difference or 0) >= INPUT_FAIL
            status: Status = "fail" if far else "warn"
            return self.verdict(status, f"{saw}, but {inputs}", details, action=same_preprocessing)
        lags = f"{saw} ({share:.0%} of the fall)"
        if view.stale:
            stale = f"{lags}: it reads {len(view.stale)} stale: {listed(view.stale, 24)}"
            action = "Update the averaged copy each step, or evaluate the modules training trains."
            return self.verdict("fail", stale, details, action=action)
        if view.averaged and view.lag is not None and view.lag < 1 - 1e-3 and val_drop > 3 * sigma:
            summary = f"{lags}: it reads averaged weights, {1 - view.lag:.0%} of the way there"
            return self.verdict("pass", summary, details)
        if differs:
            return self.verdict("fail", f"{lags}; {inputs}", details, action=same_preprocessing)
        # by batch statistics it fell as far from either start (one read by running statistics: another mode)
        again, start = view.after_batch_statistics, max(view.before, first)
        if again is not None and start - again >= needed_val:
            return self.verdict("pass", f"{lags}; {again:.3g} by batch statistics: BatchNorm lags", details)
        if view.batchnorm_lag > BATCHNORM_LAG or (view.batchnorm_lag > 0 and share >= BATCHNORM_PARTIAL):
            raise CheckInconclusive(f"{lags}; BatchNorm stats hold {view.batchnorm_lag:.0%} of their start")
        if kept := _statistics_kept_by_hand(context):
            raise CheckInconclusive(f"{lags}, but it reads running statistics kept by {listed(kept, 24)}")
        reads = f"{len(view.averaged)} averaged weights off the fit" if view.averaged else "another tensor"
        action = "Compute the validation loss with the same code and weights as training_step."
        return self.verdict("fail", f"{lags}: same weights and inputs, yet {reads}", details, action=action)


def _statistics_kept_by_hand(context: CheckContext) -> list[str]:
    """Modules other than BatchNorm whose buffers a training step's forward changes."""
    model = context.copy_model().train()
    batch = first_of(context, context.train_batches(1)[0], 64)
    kept = keeping_statistics(model, lambda: context.training_loss(model, batch))
    names = {id(m): name for name, m in model.named_modules()}
    return [names[id(m)] or type(m).__name__ for m in kept if not isinstance(m, _BatchNorm)]
