"""A Trainer factory with the settings that make CPU tests fast and quiet."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl

from lightning_recipes.harness.silent_trainer import SILENT_SETTINGS

__all__ = ["fast_trainer"]


def fast_trainer(**overrides: Any) -> pl.Trainer:
    """Build a ``Trainer`` for tests: the internal trial fits' settings (CPU, no logger, progress bar, model
    summary, sanity-val or checkpoints), with validation and one epoch.

    Every default can be overridden; pass ``default_root_dir=tmp_path`` when the run writes files.

    Args:
        **overrides: Any ``Trainer`` argument.

    Example:
        >>> trainer = fast_trainer(max_steps=2)
        >>> trainer.max_steps, trainer.num_sanity_val_steps
        (2, 0)
    """
    settings = {**SILENT_SETTINGS, "limit_val_batches": None, "max_epochs": 1, "deterministic": False}
    return pl.Trainer(**{**settings, **overrides})
