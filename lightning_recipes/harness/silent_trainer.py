"""The one Trainer every internal trial fit runs in: nothing written, nothing shown."""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch

from lightning_recipes.harness.isolation import quiet_trial

__all__ = ["SILENT_SETTINGS", "silent_trainer"]

#: What every internal Trainer shares: no logger, checkpoint, progress bar or summary; one CPU; no validation.
SILENT_SETTINGS: dict[str, Any] = {
    "accelerator": "cpu",
    "devices": 1,
    "logger": False,
    "enable_checkpointing": False,
    "enable_progress_bar": False,
    "enable_model_summary": False,
    "num_sanity_val_steps": 0,
    "limit_val_batches": 0,
}


def silent_trainer(device: torch.device | str | None = None, **trainer_kwargs: Any) -> pl.Trainer:
    """A ``Trainer`` for a fit on a copy: :data:`SILENT_SETTINGS` overridden by ``trainer_kwargs``, built
    without banners, on one ``device`` (``cuda:1``: accelerator ``cuda``, devices ``[1]``); fit it under
    :func:`~lightning_recipes.harness.quiet_trial`.

    Example:
        >>> from lightning_recipes.harness import quiet_trial
        >>> from lightning_recipes.testing import TinyClassifier, random_classification_loader
        >>> trainer = silent_trainer(max_steps=2)
        >>> with quiet_trial():
        ...     trainer.fit(TinyClassifier(), random_classification_loader())
        >>> trainer.global_step, trainer.logger, trainer.checkpoint_callback
        (2, None, None)
    """
    if device is not None:
        device = torch.device(device)
        kind = device.type if device.type in ("cuda", "mps") else "cpu"
        trainer_kwargs = {
            "accelerator": kind,
            "devices": [device.index or 0] if kind == "cuda" else 1,
            **trainer_kwargs,
        }
    with quiet_trial():
        return pl.Trainer(**{**SILENT_SETTINGS, **trainer_kwargs})
