"""A Trainer factory with the settings that make CPU tests fast and quiet."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl

__all__ = ["fast_trainer"]


def fast_trainer(**overrides: Any) -> pl.Trainer:
    """Build a ``Trainer`` for tests: CPU, no progress bar, no model summary, no sanity-val, no checkpoints.

    Every default can be overridden; pass ``default_root_dir=tmp_path`` when the run writes files.

    Args:
        **overrides: Any ``Trainer`` argument.

    Example:
        >>> trainer = fast_trainer(max_steps=2)
        >>> trainer.max_steps, trainer.num_sanity_val_steps
        (2, 0)
    """
    settings: dict[str, Any] = {
        "accelerator": "cpu",
        "devices": 1,
        "max_epochs": 1,
        "logger": False,
        "enable_checkpointing": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "num_sanity_val_steps": 0,
        "deterministic": False,
    }
    settings.update(overrides)
    return pl.Trainer(**settings)
