"""Freeze named modules for N epochs or steps, then unfreeze them with their own LR warm-up."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback
from torch.nn.parallel import DistributedDataParallel
from torch.optim.lr_scheduler import LambdaLR
from typing_extensions import override

from lightning_recipes._validation import check_int, did_you_mean
from lightning_recipes._warn_once import warn_once
from lightning_recipes.optim.tied import parameter_names

__all__ = ["FinetuneSchedule", "unfreeze_multiplier"]


def unfreeze_multiplier(
    step: int, *, inner: Callable[[int], float], start: int | None, warmup_steps: int
) -> float:
    """The LR multiplier of a frozen-then-unfrozen group at scheduler step ``step``: 0 while frozen
    (``start`` is ``None`` or later), then the run's own multiplier ``inner(step)`` times a linear warm-up
    ``min(1, (step - start + 1) / warmup_steps)`` (1 at once when ``warmup_steps`` is 0).

    Example:
        >>> [unfreeze_multiplier(s, inner=lambda s: 1.0, start=2, warmup_steps=3) for s in range(6)]
        [0.0, 0.0, 0.3333333333333333, 0.6666666666666666, 1.0, 1.0]
    """
    if start is None or step < start:
        return 0.0
    if warmup_steps == 0:
        return float(inner(step))
    return float(inner(step)) * min(1.0, (step - start + 1) / warmup_steps)


class FinetuneSchedule(Callback):
    """Freeze ``modules`` at fit start, unfreeze them at ``unfreeze_at_epoch`` or ``unfreeze_at_step`` (give
    one), then warm their learning rate up linearly over ``warmup_steps`` on top of the run's own schedule.

    With your own ``configure_optimizers`` use ``param_groups(..., split=modules)`` (the recipe mixins do it).
    Needs one optimizer with a per-step ``LambdaLR`` and, under DDP, ``find_unused_parameters=True`` (checked
    at fit start). How, and the differences from ``BackboneFinetuning``: ``docs/guides/finetuning.md``.

    Example:
        >>> from lightning_recipes.mixins import AdamWRecipe
        >>> from lightning_recipes.recipe import OptimizerRecipe
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> class Model(AdamWRecipe, TinyClassifier):
        ...     pass
        >>> model = Model()
        >>> model.recipe = OptimizerRecipe(schedule="constant", warmup_steps=0)
        >>> callback = FinetuneSchedule(["hidden"], unfreeze_at_step=2, warmup_steps=2)
        >>> fast_trainer(max_steps=4, callbacks=[callback]).fit(model, random_classification_loader())
        >>> callback.unfrozen_at
        2
    """

    def __init__(
        self,
        modules: Sequence[str] | str,
        unfreeze_at_epoch: int | None = None,
        unfreeze_at_step: int | None = None,
        warmup_steps: int = 0,
    ) -> None:
        names = [modules] if isinstance(modules, str) else list(modules)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise ValueError(f"`modules` must name at least one module path, got {modules!r}.")
        if (unfreeze_at_epoch is None) == (unfreeze_at_step is None):
            raise ValueError(
                "Give exactly one of `unfreeze_at_epoch` and `unfreeze_at_step`, got "
                f"unfreeze_at_epoch={unfreeze_at_epoch!r}, unfreeze_at_step={unfreeze_at_step!r}."
            )
        check_int("unfreeze_at_epoch", unfreeze_at_epoch, minimum=0, optional=True)
        check_int("unfreeze_at_step", unfreeze_at_step, minimum=0, optional=True)
        check_int("warmup_steps", warmup_steps, minimum=0)
        self.modules = names
        self.unfreeze_at_epoch = unfreeze_at_epoch
        self.unfreeze_at_step = unfreeze_at_step
        self.warmup_steps = warmup_steps
        #: The scheduler step the modules were unfrozen at (``None`` while frozen).
        self.unfrozen_at: int | None = None
        self._groups: list[int] = []

    @property
    def param_group_split(self) -> list[str]:
        """The module paths the recipe mixins give their own param groups."""
        return list(self.modules)

    @property
    @override
    def state_key(self) -> str:
        return self._generate_state_key(modules=self.modules)

    @override
    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        params = self._frozen_params(pl_module)
        self._warn_tied(pl_module, params)
        if len(trainer.optimizers) != 1:
            raise ValueError(f"FinetuneSchedule supports one optimizer, got {len(trainer.optimizers)}.")
        optimizer = trainer.optimizers[0]
        self._groups = []
        for index, group in enumerate(optimizer.param_groups):
            inside = [id(p) in params for p in group["params"]]
            if any(inside) and not all(inside):
                raise ValueError(
                    f"Param group {group.get('name', index)!r} mixes parameters of {self.modules} with "
                    "others: FinetuneSchedule needs them in groups of their own. The recipe mixins split "
                    "them when the callback is in `Trainer(callbacks=...)`; in your own "
                    "configure_optimizers use "
                    f"`param_groups(model, weight_decay, split={self.modules!r})`."
                )
            if any(inside):
                self._groups.append(index)
        covered = {id(p) for i in self._groups for p in optimizer.param_groups[i]["params"]}
        if covered != set(params):
            raise ValueError(
                f"Some parameters of {self.modules} are not in the optimizer: FinetuneSchedule keeps them "
                "there from the start (frozen by requires_grad=False); build the optimizer over all of them."
            )
        self._scheduler(trainer)  # checked now, not at the unfreeze point
        if self.unfrozen_at is None:
            model = trainer.strategy.model
            if isinstance(model, DistributedDataParallel) and not model.find_unused_parameters:
                raise ValueError(
                    "FinetuneSchedule under DDP needs `find_unused_parameters=True` (frozen parameters get "
                    "no gradient): use strategy='ddp_find_unused_parameters_true' (or '..._spawn_...') or "
                    "DDPStrategy(find_unused_parameters=True)."
                )
        self._apply(trainer, pl_module)

    @override
    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._unfreeze_if_due(trainer, pl_module)

    @override
    def on_train_batch_start(
        self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, batch_idx: int
    ) -> None:
        self._unfreeze_if_due(trainer, pl_module)

    @override
    def state_dict(self) -> dict[str, Any]:
        return {"unfrozen_at": self.unfrozen_at}

    @override
    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.unfrozen_at = state_dict.get("unfrozen_at")

    def _unfreeze_if_due(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        epoch, step = self.unfreeze_at_epoch, self.unfreeze_at_step
        due = (epoch is not None and trainer.current_epoch >= epoch) or (
            step is not None and trainer.global_step >= step
        )
        if self.unfrozen_at is None and due:
            self.unfrozen_at = self._scheduler(trainer).last_epoch
            self._apply(trainer, pl_module)

    def _apply(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        """Set ``requires_grad`` and the groups' multipliers from ``unfrozen_at``; the LR of the next step."""
        for param in self._frozen_params(pl_module).values():
            param.requires_grad_(self.unfrozen_at is not None)
        scheduler = self._scheduler(trainer)
        for index in self._groups:
            inner = scheduler.lr_lambdas[index]
            if isinstance(inner, partial) and inner.func is unfreeze_multiplier:
                inner = inner.keywords["inner"]
            fn = partial(
                unfreeze_multiplier, inner=inner, start=self.unfrozen_at, warmup_steps=self.warmup_steps
            )
            scheduler.lr_lambdas[index] = fn
            # on a resume the checkpoint's LRs replace this right after on_fit_start: the same values
            scheduler.optimizer.param_groups[index]["lr"] = scheduler.base_lrs[index] * fn(
                scheduler.last_epoch
            )

    def _scheduler(self, trainer: pl.Trainer) -> LambdaLR:
        for config in trainer.lr_scheduler_configs:
            if isinstance(config.scheduler, LambdaLR) and config.scheduler.optimizer is trainer.optimizers[0]:
                if config.interval != "step" or config.frequency != 1:
                    raise ValueError(
                        "FinetuneSchedule needs the LambdaLR stepped every optimizer step (interval='step', "
                        f"frequency=1), got interval={config.interval!r}, frequency={config.frequency}."
                    )
                return config.scheduler
        raise ValueError(
            "FinetuneSchedule needs a per-step LambdaLR schedule (every recipe schedule is one; "
            "schedule='none' has none: use schedule='constant' with warmup_steps=0)."
        )

    def _warn_tied(self, pl_module: pl.LightningModule, params: dict[int, Any]) -> None:
        """Say (once) which parameters outside ``modules`` freeze and unfreeze with them: tied weights."""
        inside = tuple(m + "." for m in self.modules)
        notes = []
        for pid, names in parameter_names(pl_module).items():
            if len(names) < 2 or pid not in params:
                continue
            ours = [n for n in names if n.startswith(inside)]
            outside = [n for n in names if not n.startswith(inside)]
            if outside and ours:
                notes.append(f"{', '.join(map(repr, outside))} (the same tensor as {ours[0]!r})")
        if notes:
            warn_once(
                f"FinetuneSchedule freezes {self.modules} of {type(pl_module).__name__}, and with them the "
                f"tied (shared) parameters {'; '.join(notes)}: those modules stay frozen until the unfreeze "
                "point too. Untie the weights, or name both modules if that is what you want."
            )

    def _frozen_params(self, pl_module: pl.LightningModule) -> dict[int, Any]:
        params: dict[int, Any] = {}
        for name in self.modules:
            try:
                module = pl_module.get_submodule(name)
            except AttributeError as err:
                names = [n for n, _ in pl_module.named_modules() if n]
                raise ValueError(
                    f"FinetuneSchedule: `modules` entry {name!r} is not a submodule of "
                    f"{type(pl_module).__name__}{did_you_mean(name, names)}."
                ) from err
            params.update((id(p), p) for p in module.parameters())
        if not params:
            raise ValueError(f"FinetuneSchedule: the modules {self.modules} have no parameters.")
        return params
