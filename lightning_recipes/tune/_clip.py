"""Gradient clipping in the LR range test's sweep, exactly as Lightning clips in the run: the module's
``configure_gradient_clipping`` hook with the Trainer's ``gradient_clip_val`` / ``gradient_clip_algorithm``,
between the backward pass (and the DDP average) and each optimizer step.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.utilities.model_helpers import is_overridden
from torch.optim import Optimizer

from lightning_recipes._validation import check_choice, check_non_negative
from lightning_recipes.harness import Harness, quiet_logging, quiet_trial

__all__ = ["GRADIENT_CLIP_ALGORITHMS", "gradient_clipper", "validate_clipping"]

GRADIENT_CLIP_ALGORITHMS = ("norm", "value", None)


def validate_clipping(gradient_clip_val: Any, gradient_clip_algorithm: Any) -> None:
    """The Trainer's rules: a value >= 0 or ``None`` (0 and ``None`` do not clip); norm or value."""
    if gradient_clip_val is not None:
        check_non_negative("gradient_clip_val", gradient_clip_val)
    check_choice("gradient_clip_algorithm", gradient_clip_algorithm, GRADIENT_CLIP_ALGORITHMS)


def gradient_clipper(
    context: Harness,
    model: pl.LightningModule,
    gradient_clip_val: float | None,
    gradient_clip_algorithm: str | None,
) -> Callable[[Optimizer], None]:
    """What Lightning runs between backward and each optimizer step: the module's
    ``configure_gradient_clipping(optimizer, gradient_clip_val, gradient_clip_algorithm)`` with the Trainer's
    two settings. The copy is attached to a Trainer for the call (its default calls ``self.clip_gradients``,
    which reads the Trainer's settings and precision plugin): the run's, else a bare one holding the two
    arguments (built only when there is something to clip)."""
    trainer = context.trainer
    if trainer is None:
        hook = is_overridden("configure_gradient_clipping", model, pl.LightningModule)
        if not gradient_clip_val and not hook:
            return lambda optimizer: None
        trainer = _clipping_trainer(gradient_clip_val, gradient_clip_algorithm)
    clip_val, algorithm = trainer.gradient_clip_val, trainer.gradient_clip_algorithm

    def clip(optimizer: Optimizer) -> None:
        model.trainer = trainer
        try:
            with quiet_logging():
                model.configure_gradient_clipping(
                    optimizer, gradient_clip_val=clip_val, gradient_clip_algorithm=algorithm
                )
        finally:
            model.trainer = None

    return clip


def _clipping_trainer(gradient_clip_val: float | None, gradient_clip_algorithm: str | None) -> pl.Trainer:
    """A Trainer that is never fitted: the clipping settings and the default precision plugin, quietly."""
    with quiet_trial():
        return pl.Trainer(
            accelerator="cpu",
            devices=1,
            gradient_clip_val=gradient_clip_val,
            gradient_clip_algorithm=gradient_clip_algorithm,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
        )
