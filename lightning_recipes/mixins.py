"""LightningModule mixins that supply ``configure_optimizers`` from an :class:`OptimizerRecipe`."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, ClassVar

from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader

from lightning_recipes._checkpoint import plain_hyperparameters, rebuild_hyperparameters
from lightning_recipes._deprecation import LightningRecipesDeprecationWarning
from lightning_recipes._validation import check_choice, did_you_mean
from lightning_recipes._warn_once import warn_once
from lightning_recipes.harness.loaders import first_loader, loader_batch_size
from lightning_recipes.optim.build import build_optimizer, build_scheduler
from lightning_recipes.optim.names import OPTIMIZERS, RECIPE_OPTIMIZERS
from lightning_recipes.optim.param_groups import param_groups
from lightning_recipes.optim.scaling import scale_lr
from lightning_recipes.optim.schedules import resolve_warmup, warmup_fields
from lightning_recipes.recipe import FIND, SCHEDULE_DEFAULTS, OptimizerRecipe, check_fields, check_lr_find
from lightning_recipes.tune.lr_find_policy import LRFindPolicy

if TYPE_CHECKING:
    from lightning_recipes.tune.lr_range import LRRangeResult

__all__ = ["AdamWRecipe", "LambRecipe", "LionRecipe", "OptimizerRecipeMixin"]


class OptimizerRecipeMixin:
    """Supplies ``configure_optimizers``: an optimizer over :func:`~lightning_recipes.optim.param_groups`
    plus a warmup schedule stepped every optimizer step, over ``trainer.estimated_stepping_batches``.

    Put it first in the bases. Fields come from ``self.recipe`` (an
    :class:`~lightning_recipes.OptimizerRecipe` or a dict), then ``self.hparams``, then the optimizer's
    defaults; the choices land in ``self.recipe_summary``. Outside a Trainer it returns the optimizer alone.
    ``lr="find"`` runs the LR range test first, on a copy (``found_lr``, ``lr_find_result``, checkpointed).
    Details: ``docs/guides/optimizers.md``.

    Example:
        >>> from lightning_recipes.mixins import LionRecipe
        >>> from lightning_recipes.recipe import OptimizerRecipe
        >>> from lightning_recipes.testing import TinyClassifier, fast_trainer, random_classification_loader
        >>> class Model(LionRecipe, TinyClassifier):
        ...     pass
        >>> model = Model(lr=3e-4)  # TinyClassifier saves `lr` in hparams: it beats Lion's default 1e-4
        >>> model.recipe = OptimizerRecipe(warmup_steps=2, schedule="linear")
        >>> fast_trainer(max_steps=4).fit(model, random_classification_loader())
        >>> summary = model.recipe_summary
        >>> summary["optimizer"], summary["total_steps"], summary["peak_lr"]
        ('Lion', 4, 0.0003)
    """

    default_optimizer: ClassVar[str] = "adamw"
    #: The recipe to use (``None``: ``hparams`` and defaults only); set it in ``__init__`` or before ``fit``.
    recipe: OptimizerRecipe | dict[str, Any] | None = None
    recipe_summary: dict[str, Any]

    @property
    def lr_find_policy(self) -> LRFindPolicy:
        """The ``lr="find"`` policy of this module: the LR found, its sweep and checkpoint record."""
        policy = self.__dict__.get("_lr_find_policy")
        if policy is None:
            policy = self.__dict__["_lr_find_policy"] = LRFindPolicy()
        return policy

    @property
    def found_lr(self) -> float | None:
        """The LR ``lr="find"`` chose (``None`` before a sweep); restored from checkpoints."""
        return self.lr_find_policy.lr

    @property
    def lr_find_result(self) -> LRRangeResult | None:
        """The sweep behind :attr:`found_lr` (curve, ``suggestion``, ``peak_lr``, ``.plot()``)."""
        return self.lr_find_policy.result

    def resolve_recipe(self) -> dict[str, Any]:
        """Every recipe field after the precedence rules (``recipe`` > ``hparams`` > defaults), checked; a
        deprecated spelling warns once per module."""
        # called unbound too (plots.schedule resolves a bare recipe through a namespace holding it)
        if not self.__dict__.get("_recipe_deprecations_said", False):
            self.__dict__["_recipe_deprecations_said"] = True
            return OptimizerRecipeMixin._resolve_recipe(self)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", LightningRecipesDeprecationWarning)
            return OptimizerRecipeMixin._resolve_recipe(self)

    def _resolve_recipe(self) -> dict[str, Any]:
        hparams: Any = getattr(self, "hparams", {}) or {}
        recipe = getattr(self, "recipe", None)
        if recipe is None and isinstance(hparams.get("recipe"), (OptimizerRecipe, dict)):
            recipe = hparams["recipe"]  # a dict when read back from hparams.yaml
        if isinstance(recipe, dict):
            unknown = sorted(set(recipe) - set(OptimizerRecipe.field_names()))
            if unknown:
                raise ValueError(
                    f"`recipe` has unknown field(s) {unknown}; allowed: {OptimizerRecipe.field_names()}."
                )
            recipe = OptimizerRecipe(**recipe)
        if recipe is not None and not isinstance(recipe, OptimizerRecipe):
            raise TypeError(
                "`recipe` must be an OptimizerRecipe, a dict of its fields or None, got "
                f"{type(recipe).__name__}."
            )

        def pick(name: str) -> Any:
            value = getattr(recipe, name) if recipe is not None else None
            return hparams.get(name) if value is None else value

        optimizer = pick("optimizer") or self.default_optimizer
        check_choice("optimizer", optimizer, RECIPE_OPTIMIZERS)
        named = next((c for c in _NAMED if isinstance(self, c)), None)
        if named is not None and optimizer != self.default_optimizer:  # the class names another optimizer
            source = "recipe" if recipe is not None and recipe.optimizer is not None else "hparams"
            warn_once(
                f"{type(self).__name__} is a {named.__name__} but its {source} sets `optimizer="
                f"{optimizer!r}`, which wins: it trains {OPTIMIZERS[optimizer].class_name}, not "
                f"{OPTIMIZERS[self.default_optimizer].class_name}. Drop `optimizer` from the {source}, or "
                "derive from OptimizerRecipeMixin to choose the optimizer by configuration alone."
            )
        defaults = {**SCHEDULE_DEFAULTS, **OPTIMIZERS[optimizer].defaults}
        resolved: dict[str, Any] = {"optimizer": optimizer}
        for name in OptimizerRecipe.field_names():
            if name not in ("optimizer", "warmup_steps", "warmup_ratio"):
                value = pick(name)
                resolved[name] = defaults[name] if value is None else value
        resolved["betas"] = tuple(resolved["betas"])
        # one choice, from the first source setting either spelling; normalised again: a recipe unpickled
        # from an older checkpoint may hold a float `warmup_steps`
        sources = [(recipe.warmup_steps, recipe.warmup_ratio)] if recipe is not None else []
        sources.append((hparams.get("warmup_steps"), hparams.get("warmup_ratio")))
        given = next((pair for pair in sources if pair != (None, None)), None)
        warmup = (None, defaults["warmup_ratio"]) if given is None else warmup_fields(*given, stacklevel=4)
        resolved["warmup_steps"], resolved["warmup_ratio"] = warmup
        if resolved["lr_find"] is not None:  # the checked record (a recipe's own, checked when it was built)
            lr_find = recipe.sweep_args if recipe is not None else None
            resolved["lr_find"] = check_lr_find(resolved["lr_find"] if lr_find is None else lr_find)
        check_fields(SimpleNamespace(**resolved))
        return resolved

    def configure_optimizers(self) -> Any:
        module: Any = self
        recipe = self.resolve_recipe()
        try:
            trainer = module.trainer
        except RuntimeError:  # not attached to a Trainer (e.g. `preflight` or a user building it by hand)
            return self._optimizer_without_trainer(recipe)
        total = trainer.estimated_stepping_batches  # also sets up the training dataloader
        if not math.isfinite(total):
            raise ValueError(
                "The recipe schedule needs a finite run: set `max_steps` or `max_epochs` on the Trainer "
                f"(estimated_stepping_batches is {total})."
            )
        total_steps = max(1, int(total))
        batch_size = recipe["batch_size"] or _train_batch_size(trainer)
        replicas = trainer.num_devices * trainer.num_nodes * trainer.accumulate_grad_batches
        global_batch = batch_size * replicas if batch_size else None
        warmup = (
            0
            if recipe["schedule"] == "none"
            else resolve_warmup(recipe["warmup_steps"], recipe["warmup_ratio"], total_steps)
        )
        lr = recipe["lr"]
        lr_find: dict[str, Any] | None = None
        if lr == FIND:
            lr, lr_find = self.lr_find_policy.lr_for_fit(module, trainer, recipe, warmup, batch_size)
        elif recipe["scale_lr"] is not None:
            if recipe["base_batch_size"] is None:
                raise ValueError(
                    f"`scale_lr={recipe['scale_lr']!r}` needs `base_batch_size` (the batch size `lr` was "
                    "tuned at)."
                )
            if global_batch is None:
                raise ValueError(
                    "`scale_lr` needs the batch size: set `recipe.batch_size` (the training DataLoader has "
                    "none)."
                )
            lr = scale_lr(lr, recipe["base_batch_size"], global_batch, rule=recipe["scale_lr"])
        optimizer = _recipe_optimizer(module, recipe, _split_prefixes(trainer, module), lr)
        scheduler = build_scheduler(
            recipe["schedule"],
            optimizer,
            warmup_steps=warmup,
            total_steps=total_steps,
            min_lr_ratio=recipe["min_lr_ratio"],
        )
        self.recipe_summary = {
            "optimizer": type(optimizer).__name__,
            "implementation": "fused" if optimizer.defaults.get("fused") else recipe["implementation"],
            "groups": [
                {
                    "name": g["name"],
                    "tensors": len(g["params"]),
                    "params": sum(p.numel() for p in g["params"]),
                    "weight_decay": g["weight_decay"],
                    "lr": g.get("initial_lr", g["lr"]),  # the group's peak LR, before the schedule
                    "lr_scale": g.get("lr_scale", 1.0),
                }
                for g in optimizer.param_groups
            ],
            "peak_lr": lr,
            "base_lr": lr if lr_find is not None else recipe["lr"],
            "global_batch_size": global_batch,
            "schedule": recipe["schedule"],
            "warmup_steps": warmup,
            "total_steps": total_steps,
            "min_lr_ratio": recipe["min_lr_ratio"],
            "lr_find": lr_find,
        }
        rank_zero_info(_format_summary(self.recipe_summary, batch_size, trainer, recipe))
        if scheduler is None:
            return optimizer
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1},
        }

    def _optimizer_without_trainer(self, recipe: dict[str, Any]) -> Any:
        """Only the optimizer, at the unscaled peak lr (``lr="find"``: the LR found, else the default)."""
        lr = recipe["lr"]
        if lr == FIND:
            default = OPTIMIZERS[recipe["optimizer"]].defaults["lr"]
            lr = self.found_lr if self.found_lr is not None else default
        return _recipe_optimizer(self, recipe, (), lr)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Saves the LR ``lr="find"`` found, and the recipe as plain types (``weights_only=True`` loads)."""
        parent = getattr(super(), "on_save_checkpoint", None)
        if parent is not None:
            parent(checkpoint)
        plain_hyperparameters(checkpoint)
        self.lr_find_policy.save(checkpoint)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restores the LR ``lr="find"`` found and rebuilds the recipe saved as a dict."""
        parent = getattr(super(), "on_load_checkpoint", None)
        if parent is not None:
            parent(checkpoint)
        rebuild_hyperparameters(self, checkpoint)
        self.lr_find_policy.load(checkpoint)


class AdamWRecipe(OptimizerRecipeMixin):
    """:class:`OptimizerRecipeMixin` defaulting to ``torch.optim.AdamW`` (fused where supported).

    Example:
        >>> from lightning_recipes.testing import TinyClassifier
        >>> class Model(AdamWRecipe, TinyClassifier):
        ...     pass
        >>> Model().resolve_recipe()["optimizer"], Model().resolve_recipe()["weight_decay"]
        ('adamw', 0.05)
    """

    default_optimizer: ClassVar[str] = "adamw"


class LionRecipe(OptimizerRecipeMixin):
    """:class:`OptimizerRecipeMixin` defaulting to :class:`~lightning_recipes.optim.Lion` (lr 1e-4, weight
    decay 0.5).

    Example:
        >>> from lightning_recipes.testing import TinyClassifier
        >>> class Model(LionRecipe, TinyClassifier):
        ...     pass
        >>> recipe = Model(lr=3e-4).resolve_recipe()  # TinyClassifier saves `lr` in hparams
        >>> recipe["optimizer"], recipe["lr"], recipe["weight_decay"], recipe["betas"]
        ('lion', 0.0003, 0.5, (0.9, 0.99))
    """

    default_optimizer: ClassVar[str] = "lion"


class LambRecipe(OptimizerRecipeMixin):
    """:class:`OptimizerRecipeMixin` defaulting to :class:`~lightning_recipes.optim.Lamb` (lr 1e-3, weight
    decay 0.01).

    Example:
        >>> from lightning_recipes.testing import TinyClassifier
        >>> class Model(LambRecipe, TinyClassifier):
        ...     pass
        >>> Model().resolve_recipe()["eps"]
        1e-06
    """

    default_optimizer: ClassVar[str] = "lamb"


_NAMED = (AdamWRecipe, LionRecipe, LambRecipe)


def _recipe_optimizer(module: Any, recipe: dict[str, Any], split: Sequence[str], lr: float) -> Any:
    groups = param_groups(
        module, recipe["weight_decay"], layer_decay=recipe["layer_decay"], lr_scale=recipe["lr_scale"],
        block_classes=recipe["block_classes"], split=split, lr=lr,
    )  # fmt: skip
    return build_optimizer(
        recipe["optimizer"], groups, lr=lr, weight_decay=recipe["weight_decay"], betas=recipe["betas"],
        eps=recipe["eps"], implementation=recipe["implementation"],
    )  # fmt: skip


def _split_prefixes(trainer: Any, module: Any) -> list[str]:
    """The module paths a ``FinetuneSchedule`` among the Trainer's callbacks freezes (checked to exist)."""
    prefixes: list[str] = []
    names = {name for name, _ in module.named_modules() if name}
    for callback in trainer.callbacks:
        for prefix in getattr(callback, "param_group_split", ()):
            if prefix not in names:
                raise ValueError(
                    f"{type(callback).__name__}: module {prefix!r} is not a submodule of "
                    f"{type(module).__name__}{did_you_mean(prefix, names)}."
                )
            prefixes.append(prefix)
    return prefixes


def _train_batch_size(trainer: Any) -> int | None:
    """The per-device batch size of the training loader (built by ``fit_loop.setup_data()`` if need be)."""
    if trainer.train_dataloader is None and trainer.state.fn == "fit":
        trainer.fit_loop.setup_data()
    loader = first_loader(trainer.train_dataloader)
    return loader_batch_size(loader) if isinstance(loader, DataLoader) else None


def _format_summary(
    summary: dict[str, Any], batch_size: int | None, trainer: Any, recipe: dict[str, Any]
) -> str:
    groups = ", ".join(
        f"{g['name']} {g['params']:,} params in {g['tensors']} tensors (wd {g['weight_decay']:g}"
        + (f", lr x{g['lr_scale']:.3g})" if len({h["lr_scale"] for h in summary["groups"]}) > 1 else ")")
        for g in summary["groups"]
    )
    batch = (
        f"global batch {summary['global_batch_size']} = {batch_size} x {trainer.num_devices} devices"
        f" x {trainer.num_nodes} nodes x {trainer.accumulate_grad_batches} accumulation"
    )
    if summary["global_batch_size"] is None:
        batch = "global batch unknown (set recipe.batch_size)"
    lr = f"peak lr {summary['peak_lr']:.4g}"
    if summary.get("lr_find") is not None:
        lr += f" (lr='find': {summary['lr_find']['choice']})"
    if recipe["scale_lr"] is not None:
        lr += (
            f" ({recipe['scale_lr']}-scaled from {summary['base_lr']:.4g}"
            f" at batch {recipe['base_batch_size']})"
        )
    return (
        f"lightning_recipes: {summary['optimizer']} ({summary['implementation']}) | {lr} | {batch} | "
        f"schedule {summary['schedule']}: warmup {summary['warmup_steps']} / "
        f"total {summary['total_steps']} steps"
        f" | groups: {groups}"
    )
