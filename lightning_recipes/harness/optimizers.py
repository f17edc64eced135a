"""The module's own optimizers, built on a copy at their peak learning rate: :func:`build_optimizers`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import lightning.pytorch as pl
import torch
from torch.optim import Optimizer

from lightning_recipes.harness.isolation import quiet_logging

__all__ = ["BuiltOptimizers", "build_optimizers", "configure_optimizers_on_copy", "optimizers_from_config"]

_FALLBACK = "AdamW(lr=1e-3)"


@dataclass(frozen=True)
class BuiltOptimizers:
    """What :func:`build_optimizers` built: the ``optimizers`` (never empty), whether they are ``from_module``
    (``False``: ``AdamW(lr=1e-3)`` stands in) and the ``error`` of ``configure_optimizers`` (``""``: none).

    Example:
        >>> from lightning_recipes.testing import TinyClassifier
        >>> built = build_optimizers(TinyClassifier())
        >>> built.from_module, built.note
        (True, "the module's configure_optimizers (SGD) at peak lr; schedulers not stepped")
    """

    optimizers: list[Optimizer]
    from_module: bool
    error: str = ""

    @property
    def note(self) -> str:
        """What was built, in words (for a check's details or an error message)."""
        if self.from_module:
            names = ", ".join(type(o).__name__ for o in self.optimizers)
            return f"the module's configure_optimizers ({names}) at peak lr; schedulers not stepped"
        if self.error:
            return f"configure_optimizers failed outside the Trainer ({self.error}); used {_FALLBACK} instead"
        return f"configure_optimizers returned no optimizer; used {_FALLBACK}"


def build_optimizers(model: pl.LightningModule, trainer: Any = None) -> BuiltOptimizers:
    """The module's own optimizers, built on ``model`` (a copy) at their peak learning rate: a scheduler's
    ``initial_lr`` or ``OneCycleLR``'s ``max_lr`` becomes each group's ``lr`` (schedulers are not stepped).
    Built as :func:`configure_optimizers_on_copy` does; ``AdamW(lr=1e-3)`` stands in when that fails or
    returns no optimizer."""
    config, error = configure_optimizers_on_copy(model, trainer)
    optimizers = [] if error else optimizers_from_config(config)
    if not optimizers:
        return BuiltOptimizers([torch.optim.AdamW(model.parameters(), lr=1e-3)], False, error)
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            if "initial_lr" in group:  # a scheduler set lr to its step-0 value (often 0 in warm-up)
                group["lr"] = group["initial_lr"]
            if isinstance(group.get("max_lr"), (int, float)):  # OneCycleLR: initial_lr is max_lr / 25
                group["lr"] = max(group["lr"], float(group["max_lr"]))
    return BuiltOptimizers(optimizers, True)


def configure_optimizers_on_copy(model: pl.LightningModule, trainer: Any = None) -> tuple[Any, str]:
    """``model.configure_optimizers()`` on a copy, and ``""`` or why it failed (``"TypeError: ..."``); a call
    that fails is retried with ``trainer`` attached (the real one or a
    :class:`~lightning_recipes.harness.run_length.PlannedTrainer`; the first error is reported)."""
    try:
        with quiet_logging():
            return model.configure_optimizers(), ""
    except Exception as first_error:
        error = f"{type(first_error).__name__}: {first_error}"
    if trainer is not None:  # a configure_optimizers that reads self.trainer (stepping batches)
        model.trainer = trainer
        try:
            with quiet_logging():
                return model.configure_optimizers(), ""
        except Exception:
            pass
        finally:
            model.trainer = None
    return None, error


def optimizers_from_config(config: Any) -> list[Optimizer]:
    """Every optimizer in any of the return formats ``configure_optimizers`` allows."""
    if config is None:
        return []
    if isinstance(config, Optimizer):
        return [config]
    if isinstance(config, Mapping):
        optimizer = config.get("optimizer")
        return [optimizer] if isinstance(optimizer, Optimizer) else []
    if isinstance(config, (list, tuple)):
        found = [optimizer for item in config for optimizer in optimizers_from_config(item)]
        return [o for i, o in enumerate(found) if all(o is not other for other in found[:i])]
    return []
