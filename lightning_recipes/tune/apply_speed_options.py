"""Apply the speed options :func:`~lightning_recipes.tune.speed_tune` chose to the user's model and loader."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from lightning.pytorch.utilities import rank_zero_warn
from torch.utils.data import DataLoader
from typing_extensions import override

from lightning_recipes.tune._speed_measure import rebuild_loader
from lightning_recipes.tune._speed_options import OPTIONS, SpeedOption, resolve_options

__all__ = ["ApplySpeedOptions", "apply_speed_options", "speed_loader"]


def _ordered(options: Sequence[str | SpeedOption]) -> list[SpeedOption]:
    """Resolved, in :data:`OPTIONS` order (the model changes first, ``torch.compile`` last); others after."""
    resolved = resolve_options(list(options))
    order = list(OPTIONS)
    return sorted(resolved, key=lambda opt: order.index(opt.name) if opt.name in order else len(order))


def apply_speed_options(
    model: pl.LightningModule, options: Sequence[str | SpeedOption]
) -> pl.LightningModule:
    """Apply the module-side part of ``options`` to ``model``, in place, before ``trainer.fit``: the same
    ``prepare`` that :func:`~lightning_recipes.tune.speed_tune` measured (``channels_last``, the fused
    optimizer, activation checkpointing, ``compile`` / ``compile_blocks``). Trainer arguments (``precision``),
    loader arguments (:func:`speed_loader`) and global switches (TF32: :class:`ApplySpeedOptions` sets and
    restores them around the fit) are not applied here.

    Args:
        model: The LightningModule to change (in place).
        options: Names from :data:`~lightning_recipes.tune.OPTIONS` (e.g. ``result.best``) or
            :class:`~lightning_recipes.tune.SpeedOption` objects.

    Returns:
        ``model`` itself, changed.

    Raises:
        ValueError: For an option name not in ``OPTIONS``.

    Example:
        >>> import torch
        >>> from lightning_recipes.testing import DigitsCNN
        >>> model = apply_speed_options(DigitsCNN(width=4), ["channels_last"])
        >>> model.features[0].weight.is_contiguous(memory_format=torch.channels_last)
        True
    """
    if not isinstance(model, pl.LightningModule):
        raise TypeError(f"`model` must be a LightningModule, got {type(model).__name__}.")
    for option in _ordered(options):
        if option.prepare is not None:
            changed = option.prepare(model)
            if changed is not model:
                raise ValueError(
                    f"`options`: {option.name!r} returns a new object instead of changing the model in "
                    "place; apply it by hand."
                )
    return model


def speed_loader(loader: DataLoader, options: Sequence[str | SpeedOption]) -> DataLoader:
    """A copy of ``loader`` with the loader arguments of ``options`` (``num_workers``, ``persistent_workers``,
    ``pin_memory``), the same dataset, batches, collate function and shuffle generator; ``loader`` itself
    when no option has loader arguments. In a datamodule, pass ``result.loader_kwargs`` to its ``DataLoader``.

    Example:
        >>> from lightning_recipes.testing import random_classification_loader
        >>> speed_loader(random_classification_loader(), ["num_workers"]).num_workers
        2
    """
    kwargs: dict[str, Any] = {}
    for option in _ordered(options):
        kwargs.update(option.loader_kwargs)
    if kwargs and not isinstance(loader, DataLoader):
        raise TypeError(f"`loader` must be a torch DataLoader to rebuild, got {type(loader).__name__}.")
    return rebuild_loader(loader, kwargs)


class ApplySpeedOptions(Callback):
    """Apply speed options chosen by :func:`~lightning_recipes.tune.speed_tune` inside ``trainer.fit``.

    At ``setup`` (before the optimizers are built and the model is moved or wrapped) it applies the
    module-side options to the LightningModule with :func:`apply_speed_options`, once per module, and
    switches on the options' global settings (TF32), restored at ``teardown``. It cannot rebuild the
    Trainer's loader or set its precision; at the start of training it checks both and warns (rank zero)
    when the train loader lacks a chosen option's arguments (use ``result.loader_kwargs`` or
    :func:`speed_loader`) or the Trainer's precision differs from the chosen one (use
    ``result.trainer_kwargs``).

    Cost: the options' own (``compile`` compiles on the first step); nothing per step.

    Args:
        options: Option names from :data:`~lightning_recipes.tune.OPTIONS` (``result.best``).

    Raises:
        ValueError: For a name not in ``OPTIONS``.

    Example:
        >>> import torch
        >>> from lightning_recipes.testing import DigitsCNN, fast_trainer
        >>> from lightning_recipes.data import DigitsDataModule
        >>> model = DigitsCNN(width=4)
        >>> trainer = fast_trainer(max_steps=2, callbacks=[ApplySpeedOptions(["channels_last"])])
        >>> trainer.fit(model, datamodule=DigitsDataModule())
        >>> model.features[0].weight.is_contiguous(memory_format=torch.channels_last)
        True

    In a LightningCLI config (``result.to_yaml()`` writes it)::

        trainer:
          callbacks:
            - class_path: lightning_recipes.tune.ApplySpeedOptions
              init_args: {options: [channels_last]}
    """

    def __init__(self, options: list[str]) -> None:
        super().__init__()
        if isinstance(options, str) or not all(isinstance(name, str) for name in options):
            raise TypeError(f"`options` must be a list of option names, got {options!r}.")
        self.options = list(options)
        self._resolved = _ordered(self.options)  # validates the names now
        self._applied_to: int | None = None
        self._contexts: ExitStack | None = None

    @override
    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        if self._applied_to != id(pl_module):
            apply_speed_options(pl_module, self._resolved)
            self._applied_to = id(pl_module)
        if self._contexts is None:
            self._contexts = ExitStack()
            for option in self._resolved:
                if option.context is not None:
                    self._contexts.enter_context(option.context())

    @override
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        loader = trainer.train_dataloader
        missing = []
        for option in self._resolved:
            for key, value in option.loader_kwargs.items():
                if isinstance(loader, DataLoader) and getattr(loader, key, value) != value:
                    missing.append(f"{key}={value!r} (the loader has {getattr(loader, key)!r})")
            wanted = option.trainer_kwargs.get("precision")
            if wanted is not None and str(trainer.precision) != str(wanted):
                missing.append(f"Trainer(precision={wanted!r}) (the Trainer has {trainer.precision!r})")
        if missing:
            rank_zero_warn(
                f"`ApplySpeedOptions({self.options})` cannot set these, and the run lacks them: "
                f"{'; '.join(missing)}. Pass the speed_tune result's `.loader_kwargs` to the DataLoader and "
                "its `.trainer_kwargs` to the Trainer."
            )

    @override
    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage == "fit" and self._contexts is not None:
            self._contexts.close()
            self._contexts = None
