"""The coupling with Lightning's weight-averaging callbacks (``WeightAveraging``, ``EMAWeightAveraging``),
through their public hooks only."""

from __future__ import annotations

import logging
from typing import Any

import lightning.pytorch as pl

from lightning_recipes.callbacks._trainer import callback_list

__all__ = ["averaging_callbacks", "set_averages_to_module"]

# `WeightAveraging` arrived in Lightning 2.6.0, our floor; read it softly so that an older Lightning still
# imports this module (there is then nothing to coordinate with).
_WeightAveraging: Any = getattr(pl.callbacks, "WeightAveraging", None)

# The logger of Lightning's `rank_zero_info`, which `WeightAveraging.on_load_checkpoint` uses.
_RANK_ZERO_LOG = logging.getLogger("lightning.pytorch.utilities.rank_zero")


def averaging_callbacks(trainer: pl.Trainer) -> list[Any]:
    """The Trainer's weight-averaging callbacks (they swap their average in for every validation run)."""
    if _WeightAveraging is None:  # pragma: no cover
        return []
    return [callback for callback in callback_list(trainer) if isinstance(callback, _WeightAveraging)]


def set_averages_to_module(trainer: pl.Trainer, pl_module: pl.LightningModule) -> int:
    """Make every weight-averaging callback's average equal to ``pl_module``'s current weights; returns how
    many averages were set (0 outside fit, where a callback holds no average).

    After fit such a callback still holds its average: it swaps it into the module for every later validation
    run (``trainer.validate()`` on the same Trainer) and saves it as a checkpoint's ``state_dict``. When the
    module's weights were replaced after training (the best weights restored), the average must follow, or
    those would score and save the final average instead. Done through the callback's public checkpoint
    hooks: a checkpoint written by ``on_save_checkpoint`` (for the averaging counters), its weights replaced
    by the module's, read back by ``on_load_checkpoint`` (its "model initialised from current_model_state"
    note is muted: nothing is initialised from a file).

    Cost: one copy of the weights into each average, no host-device sync.

    Example:
        >>> from lightning.pytorch.callbacks import EMAWeightAveraging
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> trainer = fast_trainer(max_steps=2, callbacks=[EMAWeightAveraging()])
        >>> model = TinyClassifier()
        >>> trainer.fit(model, random_classification_loader(batch_size=16))
        >>> set_averages_to_module(trainer, model)
        1
    """
    count = 0
    for callback in averaging_callbacks(trainer):
        checkpoint: dict[str, Any] = {"state_dict": {}}
        callback.on_save_checkpoint(trainer, pl_module, checkpoint)
        if "averaging_state" not in checkpoint:  # no average: outside fit
            continue
        weights = pl_module.state_dict()
        checkpoint.update(state_dict=weights, current_model_state=weights)
        muted = _Mute("Found current_model_state in the checkpoint")
        _RANK_ZERO_LOG.addFilter(muted)
        try:
            callback.on_load_checkpoint(trainer, pl_module, checkpoint)
        finally:
            _RANK_ZERO_LOG.removeFilter(muted)
        count += 1
    return count


class _Mute(logging.Filter):
    """Drops the records whose message starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)
