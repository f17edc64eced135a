"""Which optimizer a model trains with, read from the model itself, for the memory estimator."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from lightning_recipes.optim.names import OPTIMIZERS

__all__ = ["optimizer_name", "read_optimizer"]


def read_optimizer(model: nn.Module) -> tuple[str | None, str]:
    """The optimizer name (a key of :data:`~lightning_recipes.optim.names.OPTIMIZERS`) ``model`` trains
    with, and where it was read; ``(None, why)`` when it cannot be told.

    Read from the recipe mixins' ``resolve_recipe()`` (recipe > hparams > the class's default), else from
    the optimizer ``configure_optimizers()`` builds (on the model's own, possibly meta, parameters).

    Example:
        >>> from lightning_recipes.testing import TinyClassifier
        >>> read_optimizer(TinyClassifier())  # its configure_optimizers() builds SGD without momentum
        ('sgd', "the model's configure_optimizers()")
        >>> read_optimizer(nn.Linear(2, 2))
        (None, 'Linear has no configure_optimizers')
    """
    resolve = getattr(model, "resolve_recipe", None)
    if callable(resolve):
        try:
            name = resolve()["optimizer"]
        except (ValueError, TypeError) as err:
            return None, f"its recipe could not be read: {err}"
        return str(name), "the model's recipe"
    configure = getattr(model, "configure_optimizers", None)
    if not callable(configure):
        return None, f"{type(model).__name__} has no configure_optimizers"
    try:
        built = configure()
    except Exception as err:  # user code outside a Trainer: anything may go wrong; say what
        return None, f"configure_optimizers() failed outside a Trainer ({type(err).__name__}: {err})"
    optimizers = _optimizers(built)
    if len(optimizers) != 1:
        return None, f"configure_optimizers() returned {len(optimizers)} optimizers, not one"
    name = optimizer_name(optimizers[0])
    if name is None:
        return None, f"{type(optimizers[0]).__name__} is not in the optimizer table"
    return name, "the model's configure_optimizers()"


def optimizer_name(optimizer: torch.optim.Optimizer) -> str | None:
    """The table name of an optimizer instance (``SGD`` with momentum is ``sgd_momentum``); ``None`` when
    the table does not know its class.

    Example:
        >>> optimizer_name(torch.optim.SGD([nn.Parameter(torch.zeros(1))], lr=0.1, momentum=0.9))
        'sgd_momentum'
    """
    cls = type(optimizer).__name__
    group = optimizer.param_groups[0] if optimizer.param_groups else optimizer.defaults
    if cls == "SGD":
        return "sgd_momentum" if group.get("momentum", 0) else "sgd"
    if cls == "RMSprop":
        return "rmsprop_momentum" if group.get("momentum", 0) or group.get("centered") else "rmsprop"
    for name, spec in OPTIMIZERS.items():
        if spec.class_name == cls:
            return name
    return None


def _optimizers(built: Any) -> list[torch.optim.Optimizer]:
    """The optimizers in any of ``configure_optimizers``' return forms (one, a list, a dict, lists of
    both)."""
    if isinstance(built, torch.optim.Optimizer):
        return [built]
    if isinstance(built, Mapping):
        return _optimizers(built.get("optimizer"))
    if isinstance(built, (list, tuple)):  # also ([optimizers], [schedulers]): schedulers add none
        return [o for item in built for o in _optimizers(item)]
    return []
