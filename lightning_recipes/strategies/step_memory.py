"""Measure the memory of one training step on any device: the activations a forward pass keeps for backward
and the step's peak, counted by torch's ``MemTracker`` (a dispatch mode that sees every tensor allocated)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch

__all__ = ["StepMemory", "measure_step_memory"]


@dataclass(frozen=True)
class StepMemory:
    """Bytes of one training step (forward + backward) on :attr:`device`.

    Attributes:
        activations: Activation bytes alive when the forward pass (``training_step``) returns: what autograd
            keeps for backward. Activation checkpointing lowers exactly this.
        peak: The step's peak over every tensor (parameters, gradients, activations, temporaries).
        device: The device measured.
    """

    activations: int
    peak: int
    device: str


def measure_step_memory(model: pl.LightningModule, batch: Any, *, batch_idx: int = 0) -> StepMemory:
    """Run ``training_step`` and ``backward`` on a deep copy of ``model`` and count the bytes they hold.

    The user's model, its gradients and the RNG streams are left as they were. Works on CPU (no allocator
    statistics are needed): every tensor is tracked as it is created and freed. Not counted: allocator
    rounding and kernel workspaces.

    Args:
        model: A LightningModule whose ``training_step`` returns the loss (or a dict with ``"loss"``).
        batch: One training batch, on the model's device.
        batch_idx: Passed to ``training_step``.

    Returns:
        A :class:`StepMemory`.

    Example:
        >>> from lightning_recipes.strategies import checkpoint_blocks
        >>> from lightning_recipes.testing import TinyTransformerLM, random_token_loader
        >>> batch = next(iter(random_token_loader(vocab_size=64, seq_len=64)))
        >>> plain = measure_step_memory(TinyTransformerLM(n_layers=4), batch)
        >>> model = TinyTransformerLM(n_layers=4)
        >>> _ = checkpoint_blocks(model)
        >>> plain.activations > 3 * measure_step_memory(model, batch).activations
        True
    """
    import copy

    from torch.distributed._tools.mem_tracker import MemTracker

    from lightning_recipes.harness import Harness, preserved_rng

    copied = copy.deepcopy(model)
    context = Harness(copied, [batch], device=model.device)
    tracker = MemTracker()
    tracker.track_external(copied)
    with preserved_rng(), tracker:
        loss = context.training_loss(copied, batch, batch_idx)
        after_forward = tracker.get_tracker_snapshot("current")
        loss.backward()
        peak = tracker.get_tracker_snapshot("peak")
    device = model.device

    def total(snapshot: dict[Any, dict[Any, int]], kind: str) -> int:
        return sum(
            value
            for dev, stats in snapshot.items()
            if torch.device(dev).type == device.type
            for key, value in stats.items()
            if str(key).endswith(kind)
        )

    return StepMemory(total(after_forward, ".ACT"), total(peak, "Total"), str(device))
