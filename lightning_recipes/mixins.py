"""LightningModule mixins that supply ``configure_optimizers`` from an :class:`OptimizerRecipe`."""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, ClassVar

from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn
from torch.utils.data import DataLoader

from lightning_recipes._checkpoint import plain_hyperparameters, rebuild_hyperparameters
from lightning_recipes._validation import check_choice
from lightning_recipes.harness import CannotRunOnCopy, Harness
from lightning_recipes.optim.build import build_optimizer, build_scheduler
from lightning_recipes.optim.names import OPTIMIZERS, RECIPE_OPTIMIZERS
from lightning_recipes.optim.param_groups import param_groups
from lightning_recipes.optim.scaling import scale_lr
from lightning_recipes.optim.schedules import resolve_warmup, warmup_fields
from lightning_recipes.recipe import FIND, SCHEDULE_DEFAULTS, OptimizerRecipe, check_fields
from lightning_recipes.tune.lr_range import LRRangeResult, check_sweep_args, sweep_lr

__all__ = ["AdamWRecipe", "LambRecipe", "LionRecipe", "OptimizerRecipeMixin"]

#: Where the LR found by ``lr="find"`` is kept in a checkpoint (``on_save_checkpoint``).
CHECKPOINT_KEY = "lightning_recipes/lr_find"
#: Schedules that warm up and then decay: ``lr="find"`` gives them the sweep's ``peak_lr``.
_DECAYING = ("cosine", "linear", "wsd")


class OptimizerRecipeMixin:
    """Supplies ``configure_optimizers``: an optimizer over weight-decay groups plus a warmup schedule stepped
    every optimizer step - checkpointed, resumed and visible to ``LearningRateMonitor``.

    Put it before ``LightningModule`` in the bases. Configuration, field by field: ``self.recipe``
    (an :class:`~lightning_recipes.OptimizerRecipe`, or a dict of its fields) > ``self.hparams`` keys of the
    same names (``lr``, ``weight_decay``, ``optimizer``, ...) > the optimizer's defaults
    (``lightning_recipes.optim.names.OPTIMIZERS``: Lion gets 10x lower lr, 10x higher weight decay than
    AdamW) > the class's ``default_optimizer``.

    ``configure_optimizers`` builds:

    - groups from :func:`~lightning_recipes.optim.param_groups` (``decay`` / ``no_decay``; with
      ``layer_decay`` / ``lr_scale`` one group per depth / entry x decay/no-decay, each at its scaled LR;
      modules named by a :class:`~lightning_recipes.callbacks.finetune_schedule.FinetuneSchedule` among the
      Trainer's callbacks get groups of their own, so it can schedule them);
    - the optimizer: ``torch.optim.AdamW`` (fused where supported), :class:`~lightning_recipes.optim.Lion` or
      :class:`~lightning_recipes.optim.Lamb`;
    - the schedule over ``trainer.estimated_stepping_batches`` steps, ``interval="step"``;
    - with ``scale_lr``, the peak lr scaled from ``base_batch_size`` to the global batch
      (per-device batch x ``trainer.num_devices`` x ``trainer.num_nodes`` x ``accumulate_grad_batches``).

    It logs once, on rank zero, at fit start: the optimizer, the groups with parameter counts, the global
    batch size, the peak lr and warmup/total steps; the same facts are kept in ``self.recipe_summary``.
    Outside a Trainer (``preflight``, or calling ``configure_optimizers()`` by hand) the run length is
    unknown, so it returns the optimizer alone, at the unscaled peak lr, with no schedule.

    With ``lr="find"`` (:class:`~lightning_recipes.OptimizerRecipe`, LightningCLI ``recipe: {lr: find}``)
    ``configure_optimizers`` runs the LR range test first (:func:`~lightning_recipes.tune.sweep_lr`, the
    sweep of :func:`~lightning_recipes.tune.find_lr`, arguments from the recipe's ``lr_find``):

    - on the run's own training loader, device, precision and optimizer (with its groups), on a deep copy:
      the model, the RNG streams and the loader's order are left as they were, so the run trains exactly as
      it would with that LR written in the config;
    - under DDP every rank sweeps its shard and the gradients and loss are averaged each step, so the sweep
      sees the global batch and every rank gets the same LR (single-device and DDP strategies; FSDP,
      DeepSpeed and model-parallel runs are refused: run ``lightning-recipes tune`` first there). With
      ``accumulate_grad_batches`` > 1 the sweep steps on each batch, the run on several: a warning says so;
    - the LR used is the sweep's ``peak_lr`` when the schedule warms up (>= 1 step) and then decays
      (``cosine``, ``linear``, ``wsd``), its ``suggestion`` otherwise (``constant``, ``none``, or no
      warm-up): a run that stays at its LR gets the constant-LR pick. One line on rank zero says what was
      chosen and how; every logger gets ``lr_find/lr``, ``lr_find/choice``, ``lr_find/suggestion``,
      ``lr_find/peak_lr`` and ``lr_find/rule`` as hyperparameters; ``self.found_lr`` and
      ``self.lr_find_result`` keep it, and ``recipe_summary["lr_find"]``.
    - The found LR goes into every checkpoint (``on_save_checkpoint``: if you override it or
      ``on_load_checkpoint``, call ``super()``), so ``fit(ckpt_path=...)`` and ``load_from_checkpoint``
      reuse it and never sweep again; a second ``fit`` of the same module reuses it too. ``validate``,
      ``test`` and ``predict`` never build the optimizer, so never sweep. Outside a Trainer (``find_lr``,
      ``preflight``, a hand call) the optimizer is built at ``found_lr`` or, before any sweep, at the
      optimizer's default LR (the sweep only reads the groups' LR ratios).

    Cost: one walk over the modules at fit start; nothing per step. ``lr="find"`` adds the sweep once per
    run, before the first step: ``num_steps`` (100) training steps of a copy of the model, one host sync per
    sweep step, under DDP one all-reduce per sweep step.

    Raises:
        ValueError: From ``configure_optimizers``, for an unknown optimizer or schedule, an unbounded run
            (``max_steps=-1`` and ``max_epochs=-1``), ``scale_lr`` without ``base_batch_size`` or a known
            batch size, or out-of-range values (naming the field). With ``lr="find"``: manual
            optimisation, no training batch, a strategy other than single-device or DDP, a resume from
            a checkpoint that holds no found LR, or an inconclusive sweep (the loss never fell beyond the
            sweep's own noise: the message gives the numbers and what to try; no step is trained).
        TypeError: If ``self.recipe`` is neither an ``OptimizerRecipe``, a dict nor ``None``.

    Example:
        >>> import lightning.pytorch as pl
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
        >>> model = Model()
        >>> model.recipe = OptimizerRecipe(lr="find", warmup_steps=1, lr_find={"num_steps": 40})
        >>> fast_trainer(max_steps=4).fit(model, random_classification_loader())
        >>> model.recipe_summary["peak_lr"] == model.found_lr == model.lr_find_result.peak_lr
        True
    """

    default_optimizer: ClassVar[str] = "adamw"
    #: The recipe to use (``None``: ``hparams`` and defaults only); set it in ``__init__`` or before ``fit``.
    recipe: OptimizerRecipe | dict[str, Any] | None = None
    recipe_summary: dict[str, Any]
    #: The LR ``lr="find"`` chose (``None`` before a sweep); restored from checkpoints.
    found_lr: float | None = None
    #: The sweep behind :attr:`found_lr` (curve, ``suggestion``, ``peak_lr``, ``.plot()``).
    lr_find_result: LRRangeResult | None = None
    _found_lr_choice: str | None = None
    #: What the found LR depends on (optimizer, schedule, groups, sweep arguments, batch): a fit whose recipe
    #: differs sweeps again instead of reusing an LR found for another optimizer (``None``: unknown, reused).
    _found_lr_key: dict[str, Any] | None = None

    def resolve_recipe(self) -> dict[str, Any]:
        """Every recipe field with its value after the precedence rules (``recipe`` > ``hparams`` > defaults).

        The warm-up is one choice: ``warmup_steps`` or ``warmup_ratio`` from the first source that sets either
        (the other is ``None``); neither anywhere gives ``warmup_ratio=0.05``. Values from ``hparams`` are
        checked as the recipe's are (naming the field).
        """
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
        defaults = {**SCHEDULE_DEFAULTS, **OPTIMIZERS[optimizer].defaults}
        resolved: dict[str, Any] = {"optimizer": optimizer}
        for name in OptimizerRecipe.field_names():
            if name not in ("optimizer", "warmup_steps", "warmup_ratio"):
                value = pick(name)
                resolved[name] = defaults[name] if value is None else value
        resolved["betas"] = tuple(resolved["betas"])
        if recipe is not None and (recipe.warmup_steps is not None or recipe.warmup_ratio is not None):
            # normalised again: a recipe unpickled from an older checkpoint may hold a float `warmup_steps`
            warmup = warmup_fields(recipe.warmup_steps, recipe.warmup_ratio, stacklevel=3)
        elif hparams.get("warmup_steps") is not None or hparams.get("warmup_ratio") is not None:
            warmup = warmup_fields(hparams.get("warmup_steps"), hparams.get("warmup_ratio"), stacklevel=3)
        else:
            warmup = (None, defaults["warmup_ratio"])
        resolved["warmup_steps"], resolved["warmup_ratio"] = warmup
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
            lr, lr_find = self._lr_from_range_test(trainer, recipe, warmup, batch_size)
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
        groups = _recipe_groups(module, recipe, _split_prefixes(trainer))
        optimizer = build_optimizer(
            recipe["optimizer"],
            groups,
            lr=lr,
            weight_decay=recipe["weight_decay"],
            betas=recipe["betas"],
            eps=recipe["eps"],
            implementation=recipe["implementation"],
        )
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
        """Outside a Trainer the run length is unknown: the optimizer alone, at the (unscaled) peak lr.

        With ``lr="find"``: at the LR found by an earlier fit (or checkpoint), else at the optimizer's default
        LR (this is the build the sweep itself runs on its copy: it reads only the groups' LR ratios).
        """
        lr = recipe["lr"]
        if lr == FIND:
            default = OPTIMIZERS[recipe["optimizer"]].defaults["lr"]
            lr = self.found_lr if self.found_lr is not None else default
        return build_optimizer(
            recipe["optimizer"],
            _recipe_groups(self, recipe, ()),
            lr=lr,
            weight_decay=recipe["weight_decay"],
            betas=recipe["betas"],
            eps=recipe["eps"],
            implementation=recipe["implementation"],
        )

    def _lr_from_range_test(
        self, trainer: Any, recipe: dict[str, Any], warmup: int, batch_size: int | None
    ) -> tuple[float, dict[str, Any]]:
        """The LR for ``lr="find"``: the one found before (earlier fit, checkpoint), else a sweep now."""
        info: dict[str, Any]
        sweep_batch = batch_size * trainer.num_devices * trainer.num_nodes if batch_size else None
        key = _sweep_key(recipe, warmup, sweep_batch)
        changed = _key_changes(self._found_lr_key, key) if self.found_lr is not None else []
        if changed and trainer.ckpt_path is not None:
            rank_zero_warn(
                f"`lr='find'`: resuming at the LR found before ({self.found_lr:.4g}), though the recipe "
                f"changed since it was found ({'; '.join(changed)}); set a numeric `lr` to override it."
            )
            changed = []
        if changed:
            rank_zero_info(
                f"lightning_recipes: lr='find': the recipe changed since the LR {self.found_lr:.4g} was "
                f"found ({'; '.join(changed)}); sweeping again."
            )
            self.found_lr = self.lr_find_result = self._found_lr_choice = None
        if self.found_lr is not None:
            choice = self._found_lr_choice or "found"
            info = {"lr": self.found_lr, "choice": choice, "source": "restored"}
            if self.lr_find_result is not None:
                info.update(_result_facts(self.lr_find_result))
            rank_zero_info(
                f"lightning_recipes: lr='find' -> {self.found_lr:.4g} ({choice}), found by an earlier LR "
                "range test of this module (checkpoint or earlier fit); no new sweep."
            )
        else:
            result = self._run_range_test(trainer, recipe)
            if result.suggestion is None or result.peak_lr is None:  # same curve on every rank: all raise
                raise ValueError(
                    "`lr='find'`: the LR range test at the start of fit is inconclusive, so no learning rate "
                    f"was chosen and training did not start. {result.reason} Or set a numeric `lr`."
                )
            choice = "peak_lr" if warmup > 0 and recipe["schedule"] in _DECAYING else "suggestion"
            lr = result.peak_lr if choice == "peak_lr" else result.suggestion
            self.found_lr, self.lr_find_result, self._found_lr_choice = lr, result, choice
            self._found_lr_key = key
            info = {"lr": lr, "choice": choice, "source": "sweep", **_result_facts(result)}
            args = check_sweep_args(recipe["lr_find"])
            if choice == "peak_lr":
                why = (
                    f"suggestion {result.suggestion:.3g} ({result.rule}) x warmup_factor "
                    f"{args['warmup_factor']:g}: schedule {recipe['schedule']} warms up over {warmup} step(s)"
                )
            else:
                reason = "has no warm-up" if warmup == 0 else "stays at its LR"
                why = (
                    f"{result.rule}; schedule {recipe['schedule']} {reason}, so not peak_lr "
                    f"{result.peak_lr:.3g}"
                )
            accumulation = trainer.accumulate_grad_batches
            batch = f"batch {sweep_batch} per step" if sweep_batch else "batch size unknown"
            if accumulation > 1:
                batch += f" (the run accumulates {accumulation} of them)"
                rank_zero_warn(
                    f"`lr='find'`: the LR range test steps on every batch ({sweep_batch or '?'} samples "
                    f"across devices), but the run steps once per {accumulation} accumulated batches, so the "
                    f"found LR {lr:.3g} is for a {accumulation}x smaller batch than the run's. Scale it "
                    "yourself if your optimizer needs it (linear for SGD, sqrt for Adam-type), or set "
                    "`accumulate_grad_batches=1` and a larger per-device batch."
                )
            rank_zero_info(
                f"lightning_recipes: lr='find' -> {lr:.4g} = {choice} ({why}); LR range test of "
                f"{len(result.lrs)} steps from {args['min_lr']:g} (stopped: {result.stopped}) on the "
                f"training data, {batch}, {type(trainer.strategy).__name__}."
            )
        if trainer.is_global_zero:
            keys = ("lr", "choice", "suggestion", "peak_lr", "rule")
            facts = {f"lr_find/{k}": info[k] for k in keys if k in info}
            for logger in trainer.loggers:
                logger.log_hyperparams(facts)
        return float(info["lr"]), info

    def _run_range_test(self, trainer: Any, recipe: dict[str, Any]) -> LRRangeResult:
        module: Any = self
        where = "`lr='find'` runs an LR range test at the start of fit"
        if not module.automatic_optimization:
            raise ValueError(
                f"{where}, which replays `training_step` with the optimizer, but this module uses manual "
                "optimisation (`automatic_optimization = False`). Set a numeric `lr` (find one with "
                "`lightning_recipes.find_lr` on an automatic-optimisation twin of the model)."
            )
        if not isinstance(trainer.strategy, (SingleDeviceStrategy, DDPStrategy)):
            raise ValueError(
                f"{where} on single-device and DDP runs only, but the strategy is "
                f"{type(trainer.strategy).__name__} (its parameters are sharded by the time the optimizer "
                "is built). Run `lightning-recipes tune` (or `find_lr`) first and set `lr` to its value."
            )
        if trainer.ckpt_path is not None:
            raise ValueError(
                f"{where}, but this fit resumes from '{trainer.ckpt_path}', which holds no LR found by an "
                "earlier sweep (saved with a numeric `lr`, or by a version without `lr='find'`); a sweep on "
                "trained weights would not find the LR the run started with. Set `lr` to the run's LR."
            )
        if trainer.train_dataloader is None and trainer.state.fn == "fit":
            trainer.fit_loop.setup_data()
        loader = trainer.train_dataloader
        if loader is None:
            raise ValueError(f"{where} on the training data, but the Trainer has no training loader.")
        args = check_sweep_args(recipe["lr_find"])
        seed = args.pop("seed")
        precision = trainer.precision_plugin
        context = Harness(
            module,
            loader,
            device=module.device,
            forward_context=precision.forward_context,
            convert_input=precision.convert_input,
            trainer=trainer,
            datamodule=trainer.datamodule,
            seed=seed,
        )
        try:
            return sweep_lr(context, **args)
        except (CannotRunOnCopy, ValueError) as err:
            raise ValueError(f"{where} on the training data, but it could not: {err}") from err

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Keeps the LR found by ``lr="find"`` under ``checkpoint["lightning_recipes/lr_find"]``, and the
        recipe in ``hyper_parameters`` as a dict: plain types only, so ``torch.load(weights_only=True)``
        reads the checkpoint where this package is not installed."""
        parent = getattr(super(), "on_save_checkpoint", None)
        if parent is not None:
            parent(checkpoint)
        plain_hyperparameters(checkpoint)
        if self.found_lr is not None:
            checkpoint[CHECKPOINT_KEY] = {
                "lr": self.found_lr,
                "choice": self._found_lr_choice,
                "key": self._found_lr_key,
                "result": None if self.lr_find_result is None else self.lr_find_result.to_dict(),
            }

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restores the LR found by ``lr="find"`` (checkpoints without it load as before) and rebuilds the
        recipe saved as a dict."""
        parent = getattr(super(), "on_load_checkpoint", None)
        if parent is not None:
            parent(checkpoint)
        rebuild_hyperparameters(self, checkpoint)
        state = checkpoint.get(CHECKPOINT_KEY)
        if isinstance(state, dict) and state.get("lr") is not None:
            self.found_lr = float(state["lr"])
            self._found_lr_choice = state.get("choice")
            self._found_lr_key = state.get("key")
            result = state.get("result")
            self.lr_find_result = None if result is None else LRRangeResult.from_dict(result)


def _sweep_key(recipe: dict[str, Any], warmup: int, sweep_batch: int | None) -> dict[str, Any]:
    """The recipe fields an LR found by ``lr="find"`` is valid for (plain values: kept in checkpoints)."""
    betas = recipe["betas"]
    return {
        "optimizer": recipe["optimizer"],
        "schedule": recipe["schedule"],
        "warm-up": warmup > 0,
        "weight_decay": recipe["weight_decay"],
        "betas": None if betas is None else [float(b) for b in betas],
        "eps": recipe["eps"],
        "layer_decay": recipe["layer_decay"],
        "lr_scale": recipe["lr_scale"],
        "lr_find": check_sweep_args(recipe["lr_find"]),
        "sweep batch": sweep_batch,
    }


def _key_changes(before: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    if before is None:  # found by a version that kept no key: reused as before
        return []
    return [
        f"{name} {before.get(name)!r} -> {value!r}"
        for name, value in now.items()
        if before.get(name) != value
    ]


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


def _recipe_groups(module: Any, recipe: dict[str, Any], split: list[str] | tuple[str, ...]) -> list[Any]:
    return param_groups(
        module,
        recipe["weight_decay"],
        layer_decay=recipe["layer_decay"],
        block_classes=recipe["block_classes"],
        lr_scale=recipe["lr_scale"],
        split=split,
    )


def _split_prefixes(trainer: Any) -> list[str]:
    """The module paths that a ``FinetuneSchedule`` among the Trainer's callbacks freezes and unfreezes."""
    prefixes: list[str] = []
    for callback in trainer.callbacks:
        prefixes.extend(getattr(callback, "param_group_split", ()))
    return prefixes


def _train_batch_size(trainer: Any) -> int | None:
    """The per-device batch size of the loader the Trainer trains on.

    ``trainer.train_dataloader`` is ``None`` until the fit loop has set its data up, which Lightning's
    ``estimated_stepping_batches`` does only when it needs the epoch length (not with ``max_steps`` alone).
    ``fit_loop.setup_data()`` is what Lightning runs itself there and at the start of the loop; it is a no-op
    once done, so the loader is built once either way and is the one training then uses.
    """
    if trainer.train_dataloader is None and trainer.state.fn == "fit":
        trainer.fit_loop.setup_data()
    return _loader_batch_size(trainer.train_dataloader)


def _loader_batch_size(loader: Any) -> int | None:
    if isinstance(loader, (list, tuple)) and loader:
        loader = loader[0]
    elif isinstance(loader, dict) and loader:
        loader = next(iter(loader.values()))
    if not isinstance(loader, DataLoader):
        return None
    if loader.batch_size is not None:
        return int(loader.batch_size)
    size = getattr(loader.batch_sampler, "batch_size", None)
    return int(size) if isinstance(size, int) else None


def _result_facts(result: LRRangeResult) -> dict[str, Any]:
    return {
        "suggestion": result.suggestion,
        "peak_lr": result.peak_lr,
        "rule": result.rule,
        "stopped": result.stopped,
        "steps": len(result.lrs),
    }


def _format_summary(
    summary: dict[str, Any], batch_size: int | None, trainer: Any, recipe: dict[str, Any]
) -> str:
    groups = ", ".join(
        f"{g['name']} {g['params']:,} params in {g['tensors']} tensors (wd {g['weight_decay']:g}"
        + (f", lr x{g['lr_scale']:.3g})" if len({h["lr_scale"] for h in summary["groups"]}) > 1 else ")")
        for g in summary["groups"]
    )
    if summary["global_batch_size"] is None:
        batch = "global batch unknown (set recipe.batch_size)"
    else:
        batch = (
            f"global batch {summary['global_batch_size']} = {batch_size} x {trainer.num_devices} devices"
            f" x {trainer.num_nodes} nodes x {trainer.accumulate_grad_batches} accumulation"
        )
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
