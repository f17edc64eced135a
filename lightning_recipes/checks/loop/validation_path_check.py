"""Check that ``validation_step`` sees what ``training_step`` fitted, on the same batch."""

from __future__ import annotations

import math
from typing import Any, Literal

import lightning.pytorch as pl
from lightning.pytorch.utilities.model_helpers import is_overridden
from typing_extensions import override

from lightning_recipes._stats import difference_noise
from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness.batches import Key
from lightning_recipes.harness.trial_fit import TrialFit, ValidationView, trial_fit

__all__ = ["ValidationPathCheck", "loss_noise"]

_SHOWN = 6
#: Share of their initial values the BatchNorm running statistics may still hold for a judgement.
BATCHNORM_LAG = 0.1
#: With BatchNorm, a validation loss that follows at least this share of training's fall is not judged: the
#: running statistics lag the changing weights, so only a validation that misses the fit entirely is a bug.
BATCHNORM_PARTIAL = 0.2
#: Relative difference above which the inputs of the two paths count as different (float noise: ~1e-7).
INPUT_TOL = 1e-3
#: A deterministic difference this large (relative) between what validation and training feed the first
#: module for the same batch fails even when validation's loss followed the fit: it judges other inputs.
INPUT_FAIL = 0.1


class ValidationPathCheck(SanityCheck):
    """After a trial fit has fitted one batch through ``training_step``, ``validation_step`` on the same
    batch (in eval mode, in Lightning's own validation loop) must see the fit too.

    The validation loss must fall by at least ``min_share`` of the training loss's fall (minus 3 sigma of its
    step noise); a training loss that did not fall clearly is ``inconclusive``. A failure names what
    validation saw: stale weights, different inputs, or another tensor; an EMA that lags passes; BatchNorm
    statistics that lag make it ``inconclusive``. Skips without ``validation_step`` or a validation loss.

    Cost: one small ``Trainer.fit`` with two validation passes (shared with ``optimization``).

    Args:
        min_share: Share of the training loss's fall that the validation loss must fall, in (0, 1).
        steps: Training batches of the trial fit at most (it stops once the loss halved, after >= 8).
        max_samples: Samples of the first training batch used.

    Raises:
        ValueError: If ``min_share`` is outside (0, 1), ``steps < 3`` or ``max_samples < 1``.

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
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_in_range("min_share", min_share, 0, 1, low_open=True, high_open=True)
        check_int("steps", steps, minimum=3)
        check_int("max_samples", max_samples, minimum=1)
        self.min_share = min_share
        self.steps = steps
        self.max_samples = max_samples

    @override
    def check(self, context: CheckContext) -> CheckResult:
        if not is_overridden("validation_step", context.model, pl.LightningModule):
            raise CheckSkipped(
                "the module defines no `validation_step`: there is no validation path to check."
            )
        fit = trial_fit(context, steps=self.steps, max_samples=self.max_samples, should_stop=out_of_time)
        view = fit.validation
        if view is None:
            raise CheckSkipped(
                "the module defines no `validation_step`: there is no validation path to check."
            )
        if view.before is None or view.after is None:
            logged = sorted(view.logged) or "nothing"
            raise CheckSkipped(
                f"`validation_step` returned no loss, logged no metric with 'loss' in its name (it logged "
                f"{logged}) and called no torch.nn.functional loss, so its loss cannot be compared with "
                "training's. Return the loss, or `self.log('val_loss', loss)`, to enable this check."
            )
        losses = [v for v in fit.train_losses if math.isfinite(v)]
        details: dict[str, Any] = {
            "source": view.source,
            "val_before": view.before,
            "val_after": view.after,
            "batches": len(fit.train_losses),
            "samples": fit.samples,
            "seconds_trial": round(fit.seconds, 3),
        }
        if len(losses) < 3 or len(losses) < len(fit.train_losses):
            return CheckResult(
                self.name,
                "inconclusive",
                f"the training loss of the trial fit was not readable at every batch ({len(losses)} "
                f"finite of {len(fit.train_losses)}), so the validation path cannot be compared. Return the "
                "loss from `training_step` (or pass it to `manual_backward`).",
                details,
            )
        first, last = losses[0], losses[-1]
        sigma = loss_noise(losses[len(losses) // 2 - 1 :])  # the end of the curve: less curvature
        train_drop = first - last
        needed = max(0.1 * abs(first), 4 * sigma)
        details.update(train_first=first, train_last=last, train_noise=sigma, train_drop=train_drop)
        if train_drop < needed:
            budget = " (the time budget stopped it)" if fit.stopped == "budget" else ""
            return CheckResult(
                self.name,
                "inconclusive",
                f"the copy did not fit the batch in {len(losses)} steps{budget} (training loss "
                f"{first:.4g} -> {last:.4g}, needed a fall of {needed:.3g}: 10 % or 4x its step-to-step "
                f"noise {sigma:.2g}), so the validation path cannot be compared. Try: "
                "`ValidationPathCheck(steps=...)` with more steps or a larger learning rate (see the "
                "overfit_batch check).",
                details,
            )
        val_drop = view.before - view.after
        share = val_drop / train_drop
        details.update(val_drop=val_drop, share=share, min_share=self.min_share)
        _add_view(details, view)
        saw = (
            f"on the training batch ({fit.samples} samples), training loss {first:.4g} -> {last:.4g} in "
            f"{len(losses)} steps; validation loss ({view.source}) {view.before:.4g} -> {view.after:.4g}, "
            f"{share:.0%} of training's fall"
        )
        if val_drop >= self.min_share * train_drop - 3 * sigma:
            if view.input_difference is not None and view.input_difference > INPUT_TOL:
                gap = view.after - last
                details["gap_after"] = gap
                lags = gap > self.min_share * train_drop + 3 * sigma
                large = view.input_difference >= INPUT_FAIL
                far = lags or large
                return CheckResult(
                    self.name,
                    "fail" if far else "warn",
                    f"{saw}{'' if far else ': validation sees the fit'}, but for the same batch "
                    f"`{view.input_module}` receives different inputs in validation than in training "
                    f"(relative difference {view.input_difference:.3g}; training fed it the same input at "
                    "every step, so this is no random augmentation)"
                    + (
                        f", and after the fit validation's loss is {gap:.3g} above training's on that batch "
                        f"(more than {self.min_share:.0%} of training's fall)"
                        if lags
                        else f", {INPUT_FAIL:.0%} or more: validation judges other inputs than training fits"
                        if large
                        else ""
                    )
                    + ": validation transforms or normalises the batch differently. Try: apply one "
                    "preprocessing function in both steps (or in `on_after_batch_transfer`).",
                    details,
                )
            return CheckResult(self.name, "pass", f"{saw}: validation sees the fit.", details)
        return self._explain(fit, view, saw, val_drop, sigma, details)

    def _explain(
        self,
        fit: TrialFit,
        view: ValidationView,
        saw: str,
        val_drop: float,
        sigma: float,
        details: dict[str, Any],
    ) -> CheckResult:
        expected = f"expected >= {self.min_share:.0%} less 3x the training loss noise {sigma:.2g}"
        if view.stale:
            return CheckResult(
                self.name,
                "fail",
                f"{saw} ({expected}). Validation reads {len(view.stale)} parameter(s) that still hold their "
                f"values from before the fit, although training changed them or never runs them: "
                f"{_names(view.stale)}. Likely causes: an EMA/averaged copy that is never updated, a copy of "
                "the model made before training, or a head that training never trains. Try: update the "
                "average in `on_train_batch_end`, evaluate the trained modules, or train the head validation "
                "uses.",
                details,
            )
        if view.averaged and view.lag is not None and view.lag < 1 - 1e-3 and val_drop > 3 * sigma:
            return CheckResult(
                self.name,
                "pass",
                f"{saw}: validation reads averaged weights ({_names(view.averaged)}) that moved towards the "
                f"trained ones ({1 - view.lag:.0%} of the way in this short fit), so its loss lags "
                "training's, as an average does.",
                details,
            )
        if view.input_difference is not None and view.input_difference > INPUT_TOL:
            return CheckResult(
                self.name,
                "fail",
                f"{saw} ({expected}). For the same batch, `{view.input_module}` receives different inputs in "
                f"validation than in training (relative difference {view.input_difference:.3g}): validation "
                "transforms or normalises the batch differently. Try: apply one "
                "preprocessing function in both steps (or in `on_after_batch_transfer`).",
                details,
            )
        share = float(details.get("share", 0.0))
        if view.batchnorm_lag > BATCHNORM_LAG or (view.batchnorm_lag > 0 and share >= BATCHNORM_PARTIAL):
            return CheckResult(
                self.name,
                "inconclusive",
                f"{saw} ({expected}), but validation normalises with the BatchNorm layers' running "
                f"statistics, which still hold {view.batchnorm_lag:.0%} of their initial values and were "
                "averaged over batches the changing weights produced in this short fit, so validation's "
                "loss may lag for that reason alone (it does follow part of the fit). Try: "
                "`ValidationPathCheck(steps=...)` with more steps.",
                details,
            )
        if view.averaged:
            return CheckResult(
                self.name,
                "fail",
                f"{saw} ({expected}). Validation reads weights that are neither the trained ones nor an "
                f"average moving towards them: {_names(view.averaged)} (lag {view.lag}). Try: evaluate the "
                "trained modules, or check how the averaged copy is updated.",
                details,
            )
        return CheckResult(
            self.name,
            "fail",
            f"{saw} ({expected}). Validation runs the trained weights on the same inputs, so its loss is "
            "computed from another tensor than training's: a head, output or target wired to the wrong "
            "tensor, or a different loss. Try: compute the validation loss with the same code as "
            "`training_step`.",
            details,
        )


def loss_noise(losses: list[float]) -> float:
    """The step-to-step noise of a loss curve, blind to its trend: ``_stats.difference_noise`` of order 2
    (``sqrt(mean(d2^2) / 6)``).

    Example:
        >>> loss_noise([3.0, 2.0, 1.0, 0.0]), round(loss_noise([1.0, 0.0, 1.0, 0.0, 1.0]), 3)
        (0.0, 0.816)
    """
    return difference_noise(losses, order=2)


def _add_view(details: dict[str, Any], view: ValidationView) -> None:
    details.update(
        stale=view.stale,
        averaged=view.averaged,
        lag=view.lag,
        val_only_modules=view.val_only_modules,
        input_module=view.input_module,
        input_difference=view.input_difference,
        input_varies=view.input_varies,
        batchnorm_lag=view.batchnorm_lag,
        logged=view.logged,
    )


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... (+{len(names) - _SHOWN} more)" if len(names) > _SHOWN else "")
