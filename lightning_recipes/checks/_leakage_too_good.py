"""Sub-test (c) of ``target_leakage``: too good to be true. A copy trains a few steps; a held-out loss far
below ``ln C`` this early says the label is recoverable through several features at once."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks._leakage_statistics import too_good_bound
from lightning_recipes.harness import Harness as CheckContext

__all__ = ["Look", "TooGood", "probe_too_good"]

FIRST_LOOK = 5  # steps before the first look at the held-out loss; each later look doubles them


@dataclass(frozen=True)
class Look:
    """The held-out loss after ``step`` training steps."""

    step: int
    loss: float


@dataclass(frozen=True)
class TooGood:
    """What (c) found.

    Args:
        reason: Why the test does not apply (``None`` when it does).
        looks: The held-out loss at each look (after 5, 10, 20 ... steps).
        bound: ``fraction x ln C``: a held-out loss below it is too good.
        classes: ``C``.
        fraction: ``too_good_fraction``.
        budget_stopped: The time budget ended training before ``train_steps``.

    Example:
        >>> found = TooGood(looks=(Look(5, 1.2), Look(10, 0.9)), bound=0.0693, classes=4, fraction=0.05)
        >>> found.leak, found.message
        (False, '(c) held-out loss after 10 steps 0.9 = 0.65 x ln 4 (too good below 5%)')
    """

    reason: str | None = None
    looks: tuple[Look, ...] = ()
    bound: float = 0.0
    classes: int = 0
    fraction: float = 0.0
    budget_stopped: bool = False

    @property
    def leak(self) -> bool:
        """The last held-out loss is below the bound."""
        return self.reason is None and bool(self.looks) and self.looks[-1].loss < self.bound

    @property
    def message(self) -> str:
        """What was found, for the check's message (the reason when the test does not apply)."""
        if self.reason is not None or not self.looks:
            return self.reason or ""
        step, loss, classes = self.looks[-1].step, self.looks[-1].loss, self.classes
        if not self.leak:
            stopped = f" (the time budget stopped training at step {step})" if self.budget_stopped else ""
            return (
                f"(c) held-out loss after {step} steps {loss:.4g} = {loss / math.log(classes):.2f} x ln "
                f"{classes} (too good below {self.fraction:.0%}){stopped}"
            )
        return (
            f"held-out loss {loss:.4g} after only {step} training steps of a copy, below "
            f"{self.fraction:.0%} of ln {classes} = {self.bound:.3g} (the held-out labels get a "
            f"geometric-mean probability of {math.exp(-loss):.1%}). Honest models are still learning "
            "this early (the library's digits CNN is at 0.3-0.6 x ln 10 after 20 steps): the target is "
            "likely recoverable from the inputs through several features at once (a one-hot copy, an ID "
            "that encodes the class), or held-out samples duplicate training ones. Try: train a model on "
            "a few input features at a time to find them; run the split_overlap check. If the task is "
            "simply easy, TargetLeakageCheck(train_steps=0) turns this test off."
        )

    def details(self) -> dict[str, Any]:
        """The JSON record under ``details["too_good"]``."""
        if self.reason is not None or not self.looks:
            return {"reason": self.reason}
        return {
            "looks": [{"step": look.step, "loss": look.loss} for look in self.looks],
            "bound": self.bound,
            "classes": self.classes,
            "leak": self.leak,
            "message": self.message,
        }


def probe_too_good(
    context: CheckContext,
    train: list[Any],
    held_out: list[Any],
    classes: int | None,
    *,
    train_steps: int,
    fraction: float,
) -> TooGood:
    """Train a copy ``train_steps`` steps with the module's optimizer on ``train``, reading the loss on
    ``held_out`` after 5, 10, 20 ... steps; stop at the first look below ``fraction x ln classes``."""
    if train_steps == 0:
        return TooGood("too good to be true: turned off (train_steps=0)")
    if not context.model.automatic_optimization:
        return TooGood("too good to be true: manual optimisation")
    if classes is None:  # regression has no ln C; an LM on predictable data collapses honestly
        return TooGood("too good to be true: needs classification with one label per sample")
    bound = too_good_bound(fraction, classes)
    torch.manual_seed(context.seed)
    model = context.copy_model()
    optimizers = context.build_optimizers(model).optimizers
    looks: list[Look] = []
    step, look = 0, min(FIRST_LOOK, train_steps)
    stopped = False
    while True:
        while step < look:
            if out_of_time():
                stopped = True
                break
            context.optimization_step(model, optimizers, train[step % len(train)], step)
            step += 1
        loss = _held_out_loss(context, model, held_out)  # sync: once per look
        looks.append(Look(step, loss))
        if loss < bound or step >= train_steps or stopped:
            break
        look = min(2 * look, train_steps)
    return TooGood(None, tuple(looks), bound, classes, fraction, stopped)


def _held_out_loss(context: CheckContext, model: Any, held_out: list[Any]) -> float:
    model.eval()
    with torch.no_grad():
        losses = [context.training_loss(model, batch, i).float() for i, batch in enumerate(held_out)]
    model.train()
    return float(torch.stack(losses).mean())  # sync: once
