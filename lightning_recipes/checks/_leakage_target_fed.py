"""Sub-test (0) of ``target_leakage``: does the target reach the model? Change only the target and watch
the model's output."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from lightning_recipes.checks._budget import out_of_time
from lightning_recipes.checks._leakage_batch import entries, label_of, replace_entry, same_tensor
from lightning_recipes.checks._leakage_statistics import loss_changed, output_moved
from lightning_recipes.checks._num_classes import IGNORE_INDEX
from lightning_recipes.checks.causality_check import aligned_output
from lightning_recipes.checks.report import CheckSkipped
from lightning_recipes.harness import CannotRunOnCopy
from lightning_recipes.harness import Harness as CheckContext

__all__ = ["TargetFed", "other_values", "probe_target_fed"]


@dataclass(frozen=True)
class TargetFed:
    """What (0) found.

    Args:
        reason: Why the test does not apply (``None`` when it does). The measurements may still be there
            (``target_as_input=False`` measures whether the loss reads the target, then reports the test off).
        starts: Sequence positions from which the targets were changed (``(0,)`` for one target per sample);
            ``None`` when nothing was measured.
        changes: Largest output change at each start (outputs up to the start, for sequence targets).
        loss_uses_target: Whether the loss changed with the target alone; ``None`` when unknown (the outputs
            are uniform, so an unchanged loss proves nothing, or the step returned no loss).
        leaking: The starts where the output moved.
        sequence: Whether the targets were treated as a sequence ``[B, S]`` aligned with the inputs.
        target_label: How the message names the target entry (``batch[1]``).

    Example:
        >>> TargetFed(starts=(0,), changes=(0.0,), loss_uses_target=True).details()["message"]
        '(0) the outputs do not change when only the target changes'
    """

    reason: str | None = None
    starts: tuple[int, ...] | None = None
    changes: tuple[float, ...] = ()
    loss_uses_target: bool | None = None
    leaking: tuple[int, ...] = ()
    sequence: bool = False
    target_label: str = "the target"

    @property
    def leak(self) -> bool:
        """The output moved when only the target changed (and the test applies)."""
        return self.reason is None and bool(self.leaking)

    @property
    def message(self) -> str:
        """What was found, for the check's message (the reason when the test does not apply)."""
        if self.reason is not None:
            return self.reason
        if not self.leaking:
            return "(0) the outputs do not change when only the target changes" + (
                " from position t on (outputs up to t compared)" if self.sequence else ""
            )
        if self.sequence:
            start = self.leaking[0]
            return (
                f"the model's output at position {start} changes when only the target from position {start} "
                "on changes: the target is fed to the model, so the output at t sees the token it must "
                "predict (e.g. `self(inputs, target)` into a decoder that reads target[t] at position t). "
                "Try: feed the decoder the target shifted right (a start token + target[:, :-1]) or only the "
                "inputs; the target belongs in the loss."
            )
        return (
            f"the model's output changes when only the target ({self.target_label}) changes: the "
            "label reaches the model (`self(x, y)`, a concatenation, a label-conditioned layer). Try: "
            "pass the label only to the loss. A head that uses the label by design (a margin head such "
            "as ArcFace) is the exception: TargetLeakageCheck(target_as_input=False)."
        )

    def details(self) -> dict[str, Any]:
        """The JSON record under ``details["target_as_input"]``."""
        if self.starts is None:
            return {"reason": self.reason}
        record: dict[str, Any] = {
            "starts": list(self.starts),
            "changes": list(self.changes),
            "leak": self.leak,
            "loss_uses_target": self.loss_uses_target,
        }
        record["reason" if self.reason is not None else "message"] = self.message
        return record


def probe_target_fed(context: CheckContext, batch: Any, target_as_input: bool) -> TargetFed:
    """Change only the target and watch the model's output: it must not move (for sequence targets: the
    outputs up to ``t`` must not move when the targets from ``t`` on change; teacher forcing with targets
    shifted right is legitimate). Also records whether the loss reads the target at all
    (``loss_uses_target``): (b) and (c) mean nothing for a loss that ignores it (an autoencoder).
    ``target_as_input=False`` measures only that, at one start, and reports the test off."""
    inputs, targets = context.split(batch)
    assert inputs is not None and targets is not None
    if same_tensor(inputs, targets):
        return TargetFed(
            reason="target fed to the model: the target is the input (a reconstruction or "
            "self-supervised loss), so changing it changes the input"
        )
    key = next((k for k, _, t in entries(batch) if t is targets), None)
    if key is None or targets.ndim == 0 or targets.dtype == torch.bool or targets.is_complex():
        return TargetFed(reason="target fed to the model: the target tensor cannot be replaced")
    replacement = other_values(targets, context.seed)
    if replacement is None:
        return TargetFed(reason="target fed to the model: the target holds a single value")
    model = context.copy_model()
    if not model.automatic_optimization:
        return TargetFed(
            reason="target fed to the model: manual optimisation (its training_step steps the optimizer and "
            "cannot be replayed outside the Trainer)"
        )
    model.eval()
    base, base_loss = _observed_output(context, model, batch)
    if base is None:
        return TargetFed(reason="target fed to the model: no output tensor was observed")
    sequence = targets.ndim >= 2 and targets.shape[1] >= 2 and inputs.ndim >= 2
    sequence = sequence and targets.shape[:2] == inputs.shape[:2]
    if sequence:
        try:
            base = aligned_output(base, inputs)
        except CheckSkipped:
            sequence = False
    seq = int(targets.shape[1]) if sequence else 1
    starts = sorted({0, seq // 2, seq - 1}) if sequence and target_as_input else [0]
    moved: list[Tensor] = []
    changed_loss: Tensor | None = None
    for start in starts:
        if out_of_time() and moved:
            break
        changed = targets.clone()
        if sequence:
            changed[:, start:] = replacement[:, start:]
        else:
            changed = replacement
        output, loss = _observed_output(context, model, replace_entry(batch, key, changed))
        if start == 0:
            changed_loss = loss
        if output is None or output.numel() != base.numel():
            return TargetFed(reason="target fed to the model: the output's shape changed with the target")
        delta = (output.reshape(base.shape) - base).float().abs()
        moved.append(delta[:, : start + 1].amax() if sequence else delta.amax())
    scale = base.float().abs().amax()
    # Uniform outputs (a zero-initialised head) give a cross-entropy of ln C whatever the target: then an
    # unchanged loss proves nothing, and (b)/(c) run.
    flat = base.float().reshape(len(base), -1) if base.ndim > 1 else base.float()[None, :]
    spread = (flat.amax(-1) - flat.amin(-1)).amax()
    losses = [base_loss, changed_loss] if base_loss is not None and changed_loss is not None else []
    values = torch.stack([*moved, scale, spread, *losses]).tolist()  # sync: once
    changes, magnitude, varies = values[: len(moved)], values[len(moved)], values[len(moved) + 1] > 0
    uses = loss_changed(values[-2], values[-1]) if losses and varies else None
    measured = tuple(starts[: len(changes)]), tuple(changes)
    if not target_as_input:
        reason = "target fed to the model: turned off (target_as_input=False)"
        return TargetFed(reason, *measured, loss_uses_target=uses)
    leaking = tuple(start for start, change in zip(starts, changes) if output_moved(change, magnitude))
    return TargetFed(None, *measured, uses, leaking, sequence, label_of(batch, key))


def other_values(targets: Tensor, seed: int) -> Tensor | None:
    """A tensor like ``targets`` that differs from it (almost) everywhere and stays inside the targets' own
    range, so the loss accepts it; ``None`` if the targets hold one value.

    Integer targets, and float targets that hold whole numbers (class ids or 0/1 labels stored as floats):
    other values present in the batch (``ignore_index`` entries kept). Other float targets (soft labels,
    probabilities, regression values): another sample's target (rolled along the batch), and where that is
    the same value, the value mirrored inside the targets' range ``[min, max]`` - never a value outside it
    (a probability stays in [0, 1], a one-hot row stays a distribution where rolled).

    Example:
        >>> import torch
        >>> targets = torch.tensor([0, 1, 2, -100])
        >>> changed = other_values(targets, seed=0)
        >>> bool((changed[:3] != targets[:3]).all()), int(changed[3]), set(changed[:3].tolist()) <= {0, 1, 2}
        (True, -100, True)
        >>> as_floats = other_values(torch.tensor([0.0, 2.0, 1.0, 2.0]), seed=0)  # class ids stored as floats
        >>> set(as_floats.tolist()) <= {0.0, 1.0, 2.0}
        True
        >>> soft = other_values(torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.6, 0.4]]), seed=0)
        >>> bool(((soft >= 0.1) & (soft <= 0.9)).all())
        True
    """
    if torch.is_floating_point(targets):
        finite = targets[torch.isfinite(targets)]
        if finite.numel() == 0:
            return None
        if bool((finite == finite.round()).all()):  # sync: once; whole numbers: labels stored as floats
            changed = _other_labels(targets.round().long(), seed)
            return None if changed is None else changed.to(targets.dtype)
        low, high = finite.amin(), finite.amax()
        if bool(low == high):  # sync: once
            return None
        rolled = targets.roll(1, 0) if targets.ndim and targets.shape[0] > 1 else targets
        mirrored = (low + high - targets).clamp(low, high)
        return torch.where(rolled != targets, rolled, mirrored)
    return _other_labels(targets, seed)


def _other_labels(targets: Tensor, seed: int) -> Tensor | None:
    """Integer targets: each replaced by another value present in the batch (``ignore_index`` kept)."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    valid = targets != IGNORE_INDEX
    pool = torch.unique(targets[valid])
    if len(pool) < 2:
        return None
    offsets = torch.randint(1, len(pool), targets.shape, generator=generator).to(targets.device)
    position = torch.searchsorted(pool, targets.clamp(min=int(pool[0])))  # sync: once
    return torch.where(valid, pool[(position + offsets) % len(pool)], targets)


def _observed_output(context: CheckContext, model: Any, batch: Any) -> tuple[Tensor | None, Tensor | None]:
    """The output tensor seen (forward hooks) while ``training_step`` runs on ``batch`` and the loss (``None``
    when the step returns none), seeded, no grad."""
    torch.manual_seed(context.seed)
    loss = None
    with torch.no_grad(), context.capture_forward(model) as captured, contextlib.suppress(CannotRunOnCopy):
        loss = context.training_loss(model, batch).float()
    output = captured.last()
    return (None if output is None else output.detach()), loss
