"""Sub-test (a) of ``target_leakage``: copy targets in sequence models. One backward pass of the loss on a
copy shows which class the loss pulls each output position toward; the target must not be an input token the
model has already read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from lightning_recipes.checks._leakage_statistics import CopyShares, CopyShift, copy_leak, copy_shares
from lightning_recipes.checks.causality_check import aligned_output
from lightning_recipes.checks.report import CheckSkipped
from lightning_recipes.harness import Harness as CheckContext

__all__ = ["MIN_TRAINED_POSITIONS", "CopyTargets", "probe_copy_targets"]

MIN_TRAINED_POSITIONS = 8  # trained positions needed before the shares mean anything

_WHERE = {"same": "at the same position", "back1": "one position back", "back2": "two positions back"}


@dataclass(frozen=True)
class CopyTargets:
    """What (a) found.

    Args:
        reason: Why the test does not apply (``None`` when it does).
        shares: Shares of the trained positions paired with the next, same, previous and second previous
            input token.
        trained_positions: Positions the loss trains (where the shares are taken).
        leak: The shift the loss trains the model to copy (:func:`copy_leak`), ``None`` for none.

    Example:
        >>> found = CopyTargets(shares=CopyShares(1.0, 0.0, 0.0, 0.0), trained_positions=12)
        >>> found.leak is None, found.message[-60:]
        (True, ' token at 100% and with the input at t at 0% of 12 positions')
    """

    reason: str | None = None
    shares: CopyShares | None = None
    trained_positions: int = 0
    leak: CopyShift | None = None

    @property
    def measured(self) -> float:
        """The share of positions trained to copy the leaking shift (0.0 without a leak)."""
        return 0.0 if self.shares is None or self.leak is None else self.shares.as_dict()[self.leak]

    @property
    def message(self) -> str:
        """What was found, for the check's message (the reason when the test does not apply)."""
        if self.reason is not None or self.shares is None:
            return self.reason or ""
        shares, trained = self.shares, self.trained_positions
        if self.leak is None:
            return (
                f"(a) the loss pairs output t with the next token at {shares.next:.0%} and with the input "
                f"at t at {shares.same:.0%} of {trained} positions"
            )
        return (
            f"the loss trains the output at position t toward the input token {_WHERE[self.leak]} "
            f"({self.measured:.0%} of {trained} trained positions; the next token only "
            f"{shares.next:.0%}), which the model reads at t: it learns to copy. "
            + (
                "The LM targets are not shifted (targets == inputs). "
                if self.leak == "same"
                else "The targets are shifted the wrong way. "
            )
            + "Try: inputs = tokens[:, :-1], targets = tokens[:, 1:]; or shift the logits against the "
            "labels (logits[:, :-1] vs labels[:, 1:]) as Hugging Face LM heads do inside their loss."
        )

    def details(self) -> dict[str, Any]:
        """The JSON record under ``details["copy_targets"]``."""
        if self.reason is not None or self.shares is None:
            return {"reason": self.reason}
        return {
            "shares": self.shares.as_dict(),
            "trained_positions": self.trained_positions,
            "leak": self.leak,
            "message": self.message,
        }


def probe_copy_targets(context: CheckContext, batch: Any) -> CopyTargets:
    """Token inputs ``[B, S]``, outputs ``[B, S, V]``: one backward pass of ``training_step``'s loss on a copy
    gives, for every output position, the class the loss pulls it toward (the most negative gradient of the
    logits); count how often that class is the input token one position ahead, at the same position, one
    or two back."""
    inputs, _ = context.split(batch)
    assert inputs is not None
    if inputs.ndim != 2 or torch.is_floating_point(inputs) or inputs.shape[1] < 2:
        return CopyTargets("copy targets: the inputs are not token ids [B, S]")
    if not context.model.automatic_optimization:
        return CopyTargets("copy targets: manual optimisation, the loss cannot be replayed")
    model = context.copy_model()
    model.eval()
    torch.manual_seed(context.seed)
    with torch.enable_grad(), context.capture_forward(model) as captured:
        loss = context.training_loss(model, batch)
    logits = captured.last()
    try:
        aligned = logits is not None and aligned_output(logits, inputs).ndim == 3
    except CheckSkipped:
        aligned = False
    if logits is None or not aligned or not logits.requires_grad or not loss.requires_grad:
        shape = None if logits is None else list(logits.shape)
        return CopyTargets(f"copy targets: the output {shape} is not position-aligned logits [B, S, V]")
    logits.retain_grad()
    loss.backward()
    if logits.grad is None:
        return CopyTargets("copy targets: the loss does not flow through the observed output")
    grad = aligned_output(logits.grad.detach().float(), inputs)
    active = grad.abs().amax(-1) > 0  # positions the loss trains
    paired = grad.argmin(-1)  # cross-entropy pulls each trained position toward its target class
    shares_t, counts = copy_shares(paired, inputs, active)
    shares = CopyShares(*shares_t.tolist())  # sync: once
    trained = int(counts[1])  # sync: once
    if trained < MIN_TRAINED_POSITIONS:
        return CopyTargets(f"copy targets: only {trained} trained positions")
    return CopyTargets(None, shares, trained, copy_leak(shares))
