"""Check that the model does better with its inputs than without them."""

from __future__ import annotations

import math
from typing import Any, Literal

import torch
from torch import Tensor
from typing_extensions import override

from lightning_recipes._validation import check_in_range, check_int
from lightning_recipes.checks._budget import budget_seconds, out_of_time
from lightning_recipes.checks.base import SanityCheck, TimeBudget
from lightning_recipes.checks.loss._input_gap import LossDrop, gap_noise, loss_drop, relative_gain
from lightning_recipes.checks.report import CheckResult, CheckSkipped
from lightning_recipes.harness import Harness as CheckContext
from lightning_recipes.harness import LossRecorder, TargetSwapError
from lightning_recipes.harness.batches import Key, input_key_of
from lightning_recipes.harness.isolation import preserved_rng

__all__ = ["InputIndependenceCheck", "LossDrop", "loss_drop"]


class InputIndependenceCheck(SanityCheck):
    """Train on real inputs and on zeroed inputs; the real-input model must score better on held-out data.

    Two copies from one initialisation train side by side on the same batches (one with the input zeroed),
    and their held-out losses are compared after 25, 50, 100, ... steps up to ``max_steps``. ``pass`` when
    real inputs are better by ``min_improvement`` and by more than 2 standard errors of the paired gap;
    ``fail`` when the copies learned yet the gap is within noise of 0; ``inconclusive`` when neither learned
    or the gap is near the line. Targets computed from the input (autoencoders, masked LMs) are kept real
    for the zeroed copy. Logged as ``preflight/input_independence``.

    Cost: up to ``2 x max_steps`` training steps on copies, ``2 x num_eval_batches`` evaluations per look.

    Args:
        max_steps: Step budget for each of the two copies.
        num_batches: Distinct training batches read (and cycled through).
        num_eval_batches: Held-out batches the two copies are compared on.
        min_improvement: Required relative improvement ``(zeroed - real) / zeroed`` of the held-out loss.
        num_samples: Samples kept from each training batch (``None``: whole batches); held-out batches are
            used whole.

    Raises:
        ValueError: If a count is < 1 or ``min_improvement`` is outside [0, 1).

    Example:
        >>> from lightning_recipes.checks import preflight
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> report = preflight(
        ...     TinyClassifier(lr=0.5), train_dataloaders=random_classification_loader(),
        ...     checks=[InputIndependenceCheck()], num_threads=1,
        ... )
        >>> report["input_independence"].status, report["input_independence"].details["steps"]
        ('pass', 25)
    """

    name = "input_independence"
    first_look = 25  # steps before the first comparison; then every doubling

    def __init__(
        self,
        max_steps: int = 200,
        num_batches: int = 32,
        num_eval_batches: int = 2,
        min_improvement: float = 0.05,
        num_samples: int | None = 32,
        *,
        on_fail: Literal["raise", "warn"] = "raise",
        input_key: Key = None,
        target_key: Key = None,
        time_budget: TimeBudget = "default",
    ) -> None:
        super().__init__(on_fail=on_fail, input_key=input_key, target_key=target_key, time_budget=time_budget)
        check_int("max_steps", max_steps, minimum=1)
        check_int("num_batches", num_batches, minimum=1)
        check_int("num_eval_batches", num_eval_batches, minimum=1)
        check_in_range("min_improvement", min_improvement, 0, 1, high_open=True)
        if num_samples is not None:
            check_int("num_samples", num_samples, minimum=1)
        self.max_steps = max_steps
        self.num_batches = num_batches
        self.num_eval_batches = num_eval_batches
        self.min_improvement = min_improvement
        self.num_samples = num_samples

    @override
    def check(self, context: CheckContext) -> CheckResult:
        context.require_automatic_optimization(context.model)
        held_out = context.val_batches(self.num_eval_batches)
        if held_out:
            train = context.read_train_batches(self.num_batches, self.num_samples)
            source = "validation batches"
        else:
            available = context.read_train_batches(self.num_batches + self.num_eval_batches, self.num_samples)
            if len(available) < 2:
                raise CheckSkipped("needs held-out data: a validation loader or at least 2 training batches.")
            keep = min(self.num_eval_batches, len(available) // 2)
            train, held_out = available[:-keep], available[-keep:]
            source = "held-out training batches (no validation loader)"
        if context.split(train[0])[0] is None:
            raise CheckSkipped("cannot find the input tensor in the batch; pass `input_key`.")
        copies = [self._setup(context) for _ in range(2)]  # [real inputs, zeroed inputs], same init
        swap = self._targets_from_input(context, copies[0][0], train[0])
        looks: list[dict[str, float]] = []
        # the training loss of every step, per copy: learning = it fell by more than its own noise
        train_losses: list[list[Tensor]] = [[], []]
        learning: list[LossDrop] = []
        sides = [False, False]  # per copy: learned enough to open the gap asked for
        step, next_look = 0, min(self.first_look, self.max_steps)
        previous = 0  # training steps before the last look: the noise window starts there
        initial_gap = math.nan
        size_ratio = _size_ratio(context, train[0], held_out[0])
        try:
            while True:
                if any(swap):
                    reached = self._train_keeping_targets(
                        context, copies, train, range(step, next_look), swap, train_losses
                    )
                else:
                    reached = next_look
                    for zero, (model, optimizers) in enumerate(copies):
                        for offset in range(step, reached):
                            if not zero and offset > step and out_of_time():
                                reached = offset  # the zeroed copy then trains as many steps
                                break
                            batch = self._maybe_zero(context, train[offset % len(train)], bool(zero))
                            loss = context.optimization_step(model, optimizers, batch, offset)
                            train_losses[zero].append(loss)
                stopped = reached < next_look
                step = reached
                real_loss, zero_loss, held_gaps = self._evaluate(context, copies, held_out, swap)
                improvement = relative_gain(real_loss, zero_loss)
                learning = [loss_drop(side, len(train)) for side in train_losses]  # sync: once per look
                noise = gap_noise(train_losses, previous, held_gaps, size_ratio) / max(
                    abs(real_loss), abs(zero_loss), 1e-12
                )
                previous = len(train_losses[0])
                looks.append(
                    {
                        "step": step,
                        "real": real_loss,
                        "zeroed": zero_loss,
                        "improvement": improvement,
                        "noise": noise,
                    }
                )
                finite = math.isfinite(real_loss) and math.isfinite(zero_loss)
                # Zeroed inputs 10x better than real ones: the target itself went to zero with the input.
                collapsed = finite and not any(swap) and 0 <= zero_loss < 0.1 * real_loss
                # learned = the training loss fell beyond its noise, and by at least the relative gap asked
                # for: a copy that learned less cannot open that gap, so no gap says nothing about the data
                sides = [d.fell and d.drop >= self.min_improvement * abs(d.start) for d in learning]
                learned = any(sides)
                # a gap between two copies that learned nothing is their initialisation's luck, not a pass;
                # nor is a gap within the noise of the held-out comparison
                if math.isnan(initial_gap):
                    # the gap before training: the two copies' losses at step 0, taken before any update
                    first = torch.stack([train_losses[0][0], train_losses[1][0]]).float()
                    initial_gap = relative_gain(*first.tolist())
                # a pass: a gap beyond its noise, opened by training (a copy's loss fell, or the gap grew
                # beyond the noise of both: the held-out mean's and the one step-0 batch's)
                grown = improvement - initial_gap > 2 * noise * math.sqrt(1 + len(held_out) / size_ratio)
                opened = any(drop.fell for drop in learning) or grown
                passed = improvement >= self.min_improvement and improvement > 2 * noise and opened
                if not finite or collapsed or passed or step >= self.max_steps:
                    break
                if out_of_time():
                    stopped = True
                    break
                next_look = min(2 * step, self.max_steps)
        except _TargetMismatch as err:
            raise CheckSkipped(
                f"the loss target is computed from the input (a reconstruction / self-supervised model), "
                f"and it could not be kept for the zeroed-input copy: {err}. Pass the target as its own "
                "batch entry (`target_key=`) or leave this check out."
            ) from err
        if any(swap):
            source += "; zeroed-input copy trained on the real targets (they are computed from the input)"
        details = {
            "measured": improvement,
            "noise": noise,
            "initial_gap": initial_gap,
            "loss_real_inputs": real_loss,
            "loss_zeroed_inputs": zero_loss,
            "min_improvement": self.min_improvement,
            "steps": step,
            "max_steps": self.max_steps,
            "looks": looks,
            "train_batches": len(train),
            "evaluated_on": source,
            "learned": dict(zip(("real", "zeroed"), sides)),
            "train_loss_drop": {side: drop.drop for side, drop in zip(("real", "zeroed"), learning)},
            "train_loss_noise": {side: drop.noise for side, drop in zip(("real", "zeroed"), learning)},
        }
        stated = (
            f"held-out loss after {step} steps: {real_loss:.4g} with real inputs vs {zero_loss:.4g} "
            f"with zeroed inputs ({improvement:+.1%} ± {2 * noise:.1%} noise (2 standard errors of the "
            f"held-out gap), need >= {self.min_improvement:.0%})"
        )
        if collapsed:
            raise CheckSkipped(
                f"{stated}: the loss with zeroed inputs is less than a tenth of the loss with real inputs, "
                "so the target is most likely computed from the input (an autoencoder, a denoiser, a "
                "language model shifting its own input) by a loss this check cannot see (not a "
                "torch.nn.functional loss): zeroing the input zeroed the target, and the comparison means "
                "nothing. Use a torch.nn.functional loss, or give the target its own batch entry."
            )
        if stopped:
            details["stopped_by_time_budget"] = True
        if not finite:
            return CheckResult(
                self.name,
                "fail",
                f"{stated}: a loss is not finite. Likely causes: NaN/Inf in the data or a diverging learning "
                "rate. Try: run the data check; lower the learning rate.",
                details,
            )
        budget = budget_seconds()
        cut = (
            f"the time budget ({budget or 0:g} s) stopped training after {step} of {self.max_steps} steps"
            if stopped
            else ""
        )
        if passed:
            how_far = f" ({cut}; the gap was already beyond its noise)" if stopped else ""
            return CheckResult(self.name, "pass", f"{stated}: the model uses its inputs{how_far}.", details)
        if stopped:
            return CheckResult(
                self.name,
                "inconclusive",
                f"{stated}: {cut}, before the gap opened beyond its noise; no verdict. Try: a larger "
                "`time_budget` for this check (or None), `num_threads=1` on a busy CPU, or "
                "InputIndependenceCheck(max_steps=..., num_samples=...) with smaller steps on a large "
                "model.",
                details,
            )
        upper, lower = improvement + 2 * noise, improvement - 2 * noise
        trained = any(drop.fell for drop in learning)  # a training loss fell beyond its noise
        # No gap although a copy's training loss fell beyond its noise: what it learned does not carry to
        # held-out data through the inputs (memorised batches, labels that do not follow the inputs).
        no_gap = trained and upper < self.min_improvement and lower <= 0
        if not learned and not no_gap:
            real, zeroed = learning
            fell = (
                f"the training loss fell by {real.drop:.3g} with real inputs and {zeroed.drop:.3g} with "
                f"zeroed ones (noise {real.noise:.3g}, {zeroed.noise:.3g}; needed: 2 standard errors and "
                f"{self.min_improvement:.0%} of the loss, the gap asked for)"
            )
            if trained:
                gap = "already beyond its noise" if lower > 0 else "within its noise"
                what = (
                    f"the runs learned too little in {step} steps to open a {self.min_improvement:.0%} gap: "
                    f"{fell}; the held-out gap is {gap}; no verdict. "
                    "Likely causes: a slow learner (a small learning rate, a large model) or too few steps. "
                    "Try: InputIndependenceCheck(max_steps=...) with more steps and a larger `time_budget`."
                )
            else:
                what = (
                    f"neither run learned in {step} steps: {fell}; no verdict: whether the labels depend on "
                    "the inputs cannot be told from models that do not train. Likely causes: a learning rate "
                    "of 0 or far too low, frozen parameters, an optimizer over the wrong parameters, or too "
                    "few steps for this model. Try: check the optimizer's LR and param groups (the grad_flow "
                    "and overfit_batch checks); InputIndependenceCheck(max_steps=...) with more steps and a "
                    "larger `time_budget`."
                )
            return CheckResult(self.name, "inconclusive", f"{stated}, but {what}", details)
        first_look = looks[0] if looks else None
        if no_gap and first_look is not None and first_look["improvement"] + 2 * first_look["noise"] < 0:
            # Labels that do not follow the inputs give no held-out gap at first and a negative one only as
            # the copy memorises; a gap already negative beyond noise at the first look is a copy that
            # memorises its few training samples faster than a relation can show: no cause can be named.
            return CheckResult(
                self.name,
                "inconclusive",
                f"{stated}, and already at the first look ({first_look['step']} steps) real inputs made "
                f"held-out predictions worse than zeroed ones ({first_look['improvement']:+.1%} ± "
                f"{2 * first_look['noise']:.1%}): the copy memorises its {len(train)} training batch(es) "
                "faster than a relation between inputs and labels can show on held-out data, so whether the "
                "labels follow the inputs cannot be told here; no verdict. Try: "
                "InputIndependenceCheck(num_samples=...) with more training samples, or a smaller learning "
                "rate for the check.",
                details,
            )
        if no_gap:
            return CheckResult(
                self.name,
                "fail",
                f"{stated}: the model does not use its inputs, or the labels do not depend on them (a "
                "training loss fell beyond its noise, and yet real inputs are not measurably better than "
                "zeroed ones on held-out data). Likely "
                "causes: labels shuffled or misaligned against inputs (two datasets indexed differently, a "
                "shuffle applied to one of them), forward ignores or overwrites its input, inputs are "
                "constant. Try: print a few (input, label) pairs; check the Dataset's __getitem__; run the "
                "data check; for a slow learner, InputIndependenceCheck(max_steps=...) with a larger budget.",
                details,
            )
        if upper < self.min_improvement:
            return CheckResult(
                self.name,
                "warn",
                f"{stated}: real inputs help, beyond noise, but less than {self.min_improvement:.0%} after "
                f"{step} steps: the model uses its inputs only weakly. Likely causes: a slow learner (a "
                "large model, a small learning rate), a weak input signal, or part of the labels not "
                "matching the inputs. Try: InputIndependenceCheck(max_steps=...) with more steps; print a "
                "few (input, label) pairs.",
                details,
            )
        return CheckResult(
            self.name,
            "inconclusive",
            f"{stated}: the gap is within the noise of the {self.min_improvement:.0%} line after {step} "
            "steps; no verdict. Try: InputIndependenceCheck(max_steps=..., num_eval_batches=...) with more "
            "steps and more held-out batches (and a larger `time_budget`).",
            details,
        )

    @staticmethod
    def _setup(context: CheckContext) -> tuple[Any, list[torch.optim.Optimizer]]:
        torch.manual_seed(context.seed)  # both copies start from the same init-time randomness
        model = context.copy_model()
        optimizers = context.build_optimizers(model).optimizers
        return model, optimizers

    def _evaluate(
        self,
        context: CheckContext,
        copies: list[tuple[Any, list[torch.optim.Optimizer]]],
        held_out: list[Any],
        swap: list[bool],
    ) -> tuple[float, float, Tensor]:
        """Mean held-out loss of each copy, and the per-batch paired differences (zeroed - real)."""
        losses: list[list[Tensor]] = [[], []]
        for model, _ in copies:
            model.eval()
        with torch.no_grad():
            if any(swap):  # real then zeroed on each batch, same seed: the zeroed copy gets the real target
                for index, batch in enumerate(held_out):
                    real, zeroed = self._paired_losses(context, copies, batch, index, swap, step=False)
                    losses[0].append(real)
                    losses[1].append(zeroed)
            else:
                for zero, (model, _) in enumerate(copies):
                    losses[zero] = [
                        context.training_loss(model, self._maybe_zero(context, batch, bool(zero)), index)
                        for index, batch in enumerate(held_out)
                    ]
        for model, _ in copies:
            model.train()
        per_batch = torch.stack([torch.stack([loss.detach().float() for loss in side]) for side in losses])
        real_mean, zeroed_mean = per_batch.mean(1).tolist()  # sync: once per look
        return real_mean, zeroed_mean, (per_batch[1] - per_batch[0]).double().cpu()

    @staticmethod
    def _targets_from_input(context: CheckContext, model: Any, batch: Any) -> list[bool]:
        """For each loss call of one step: is its target computed from the input entry of the batch?"""
        input_key = input_key_of(batch, context.keys()[0])
        with preserved_rng(), torch.no_grad():
            calls = context.loss_calls(model, batch)
        return [call.target is not None and call.target_from(input_key) for call in calls]

    def _train_keeping_targets(
        self,
        context: CheckContext,
        copies: list[tuple[Any, list[torch.optim.Optimizer]]],
        train: list[Any],
        offsets: range,
        swap: list[bool],
        train_losses: list[list[Tensor]],
    ) -> int:
        """Train both copies over ``offsets``, keeping their losses; returns the offset reached (earlier
        when out of time)."""
        for offset in offsets:
            if offset > offsets.start and out_of_time():
                return offset
            losses = self._paired_losses(context, copies, train[offset % len(train)], offset, swap, step=True)
            for side, loss in zip(train_losses, losses):
                side.append(loss)
        return offsets.stop

    def _paired_losses(
        self,
        context: CheckContext,
        copies: list[tuple[Any, list[torch.optim.Optimizer]]],
        batch: Any,
        index: int,
        swap: list[bool],
        *,
        step: bool,
    ) -> tuple[Tensor, Tensor]:
        """One training step (``step=True``) or held-out loss of each copy on ``batch``: the real copy's
        loss targets are recorded and handed to the zeroed copy's loss calls where ``swap`` says so."""
        (real_model, real_optimizers), (zero_model, zero_optimizers) = copies
        torch.manual_seed(context.seed + index)  # the same noise / mask in both copies
        with LossRecorder() as recorder:
            if step:
                real = context.optimization_step(real_model, real_optimizers, batch, index)
            else:
                real = context.training_loss(real_model, batch, index)
        calls = recorder.calls[: len(swap)]
        if len(calls) != len(swap):
            raise _TargetMismatch(f"{len(calls)} loss calls in a step where the first step made {len(swap)}")
        targets = [
            call.target.detach() if keep and call.target is not None else None
            for call, keep in zip(calls, swap, strict=True)
        ]
        zeroed_batch = self._maybe_zero(context, batch, True)
        torch.manual_seed(context.seed + index)
        try:
            with LossRecorder(targets=targets):
                if step:
                    zeroed = context.optimization_step(zero_model, zero_optimizers, zeroed_batch, index)
                else:
                    zeroed = context.training_loss(zero_model, zeroed_batch, index)
        except TargetSwapError as err:
            raise _TargetMismatch(str(err)) from err
        return real, zeroed

    @staticmethod
    def _maybe_zero(context: CheckContext, batch: Any, zero: bool) -> Any:
        if not zero:
            return batch
        inputs, _ = context.split(batch)
        assert inputs is not None  # checked before training
        return context.with_inputs(batch, torch.zeros_like(inputs))


class _TargetMismatch(Exception):
    """The zeroed-input copy's loss target cannot take the real one (another shape, another call count)."""


def _size_ratio(context: CheckContext, train_batch: Any, held_batch: Any) -> float:
    """Samples in a training batch over samples in a held-out batch (the variance of a batch's mean loss
    scales with its inverse); 1 when a size cannot be read."""
    train_inputs, held_inputs = context.split(train_batch)[0], context.split(held_batch)[0]
    if train_inputs is None or held_inputs is None or train_inputs.ndim == 0 or held_inputs.ndim == 0:
        return 1.0
    return len(train_inputs) / len(held_inputs) if len(held_inputs) else 1.0
