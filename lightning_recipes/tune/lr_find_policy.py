"""The ``lr="find"`` policy of the recipe mixins: reuse the LR found before or sweep now."""

from __future__ import annotations

from typing import Any

from lightning.pytorch.strategies import DDPStrategy, SingleDeviceStrategy
from lightning.pytorch.utilities import rank_zero_info, rank_zero_warn

from lightning_recipes.harness import CannotRunOnCopy, Harness
from lightning_recipes.sweep_args import SweepArgs
from lightning_recipes.tune.lr_range import LRRangeResult, sweep_lr

__all__ = ["CHECKPOINT_KEY", "LRFindPolicy"]

#: Where the LR found by ``lr="find"`` is kept in a checkpoint.
CHECKPOINT_KEY = "lightning_recipes/lr_find"
#: Schedules that warm up and then decay: ``lr="find"`` gives them the sweep's ``peak_lr``.
_DECAYING = ("cosine", "linear", "wsd")
#: The sweep of a recipe without ``lr_find``.
_DEFAULT_ARGS = SweepArgs()


class LRFindPolicy:
    """The LR of an ``lr="find"`` run: the one found before while the recipe (``key``) is unchanged, else an
    LR range test now; and its checkpoint record. A resumed fit keeps the LR found before.

    Example:
        >>> policy, checkpoint = LRFindPolicy(), {}
        >>> policy.save(checkpoint)  # nothing found yet: nothing saved
        >>> checkpoint
        {}
        >>> policy.load({CHECKPOINT_KEY: {"lr": 0.01, "choice": "peak_lr", "key": None, "result": None}})
        >>> policy.lr, policy.choice
        (0.01, 'peak_lr')
    """

    def __init__(self) -> None:
        self.lr: float | None = None
        self.choice: str | None = None
        self.key: dict[str, Any] | None = None
        self.result: LRRangeResult | None = None

    def lr_for_fit(
        self, module: Any, trainer: Any, recipe: dict[str, Any], warmup: int, batch_size: int | None
    ) -> tuple[float, dict[str, Any]]:
        """The LR for ``lr="find"`` and what the mixin logs about it (``recipe_summary["lr_find"]``)."""
        info: dict[str, Any]
        args: SweepArgs = recipe["lr_find"] or _DEFAULT_ARGS
        sweep_batch = batch_size * trainer.num_devices * trainer.num_nodes if batch_size else None
        key = _sweep_key(recipe, args, warmup, sweep_batch)
        changed = _key_changes(self.key, key) if self.lr is not None else []
        if changed and trainer.ckpt_path is not None:
            rank_zero_warn(
                f"`lr='find'`: resuming at the LR found before ({self.lr:.4g}), though the recipe "
                f"changed since it was found ({'; '.join(changed)}); set a numeric `lr` to override it."
            )
            changed = []
        if changed:
            rank_zero_info(
                f"lightning_recipes: lr='find': the recipe changed ({'; '.join(changed)}); sweeping again."
            )
            self.lr = self.result = self.choice = None
        if self.lr is not None:
            info = {"lr": self.lr, "choice": self.choice or "found", "source": "restored"}
            info.update(_result_facts(self.result) if self.result is not None else {})
            rank_zero_info(
                f"lightning_recipes: lr='find' -> {self.lr:.4g} ({info['choice']}), found before; no sweep."
            )
        else:
            result = self._sweep(module, trainer, args)
            if result.suggestion is None or result.peak_lr is None:  # same curve on every rank: all raise
                raise ValueError(
                    "`lr='find'`: the LR range test at the start of fit is inconclusive, so no learning rate "
                    f"was chosen and training did not start. {result.reason} Or set a numeric `lr`."
                )
            choice = "peak_lr" if warmup > 0 and recipe["schedule"] in _DECAYING else "suggestion"
            lr = result.peak_lr if choice == "peak_lr" else result.suggestion
            self.lr, self.result, self.choice, self.key = lr, result, choice, key
            info = {"lr": lr, "choice": choice, "source": "sweep", **_result_facts(result)}
            accumulation = trainer.accumulate_grad_batches
            if accumulation > 1:
                rank_zero_warn(
                    f"`lr='find'`: the sweep steps on every batch but the run once per {accumulation} "
                    f"accumulated batches, so the found LR {lr:.3g} is for a {accumulation}x smaller batch; "
                    "scale it (linear for SGD, sqrt for Adam-type) or set `accumulate_grad_batches=1`."
                )
            rank_zero_info(
                f"lightning_recipes: lr='find' -> {lr:.4g} = {choice} ({result.rule}, schedule "
                f"{recipe['schedule']}, warm-up {warmup} step(s); suggestion {result.suggestion:.3g}, "
                f"peak_lr {result.peak_lr:.3g}); LR range test of {len(result.lrs)} steps (stopped: "
                f"{result.stopped}), batch {sweep_batch or 'unknown'}, {type(trainer.strategy).__name__}."
            )
        if trainer.is_global_zero:
            keys = ("lr", "choice", "suggestion", "peak_lr", "rule")
            facts = {f"lr_find/{k}": info[k] for k in keys if k in info}
            for logger in trainer.loggers:
                logger.log_hyperparams(facts)
        return float(info["lr"]), info

    def _sweep(self, module: Any, trainer: Any, args: SweepArgs) -> LRRangeResult:
        where = "`lr='find'` runs an LR range test at the start of fit"
        if not module.automatic_optimization:
            raise ValueError(
                f"{where}, but this module uses manual optimisation. Set a numeric `lr` (from `find_lr` on "
                "an automatic-optimisation twin)."
            )
        if not isinstance(trainer.strategy, (SingleDeviceStrategy, DDPStrategy)):
            raise ValueError(
                f"{where} on single-device and DDP runs only, not {type(trainer.strategy).__name__}; run "
                "`lightning-recipes tune` (or `find_lr`) first and set `lr` to its value."
            )
        if trainer.ckpt_path is not None:
            raise ValueError(
                f"{where}, but this fit resumes from '{trainer.ckpt_path}', which holds no LR found by an "
                "earlier sweep; set `lr` to the run's LR."
            )
        if trainer.train_dataloader is None and trainer.state.fn == "fit":
            trainer.fit_loop.setup_data()
        loader = trainer.train_dataloader
        if loader is None:
            raise ValueError(f"{where} on the training data, but the Trainer has no training loader.")
        context = Harness.from_trainer(trainer, module, loader, seed=args.seed)
        try:
            return sweep_lr(context, args)
        except (CannotRunOnCopy, ValueError) as err:
            raise ValueError(f"{where} on the training data, but it could not: {err}") from err

    def save(self, checkpoint: dict[str, Any]) -> None:
        """Keeps the found LR under ``checkpoint[CHECKPOINT_KEY]`` (plain types; nothing before a sweep)."""
        if self.lr is not None:
            checkpoint[CHECKPOINT_KEY] = {
                "lr": self.lr,
                "choice": self.choice,
                "key": self.key,
                "result": None if self.result is None else self.result.to_dict(),
            }

    def load(self, checkpoint: dict[str, Any]) -> None:
        """Restores what :meth:`save` kept (a checkpoint without it changes nothing)."""
        state = checkpoint.get(CHECKPOINT_KEY)
        if isinstance(state, dict) and state.get("lr") is not None:
            self.lr = float(state["lr"])
            self.choice = state.get("choice")
            self.key = state.get("key")
            result = state.get("result")
            self.result = None if result is None else LRRangeResult.from_dict(result)


def _sweep_key(
    recipe: dict[str, Any], args: SweepArgs, warmup: int, sweep_batch: int | None
) -> dict[str, Any]:
    """The recipe fields a found LR is valid for."""
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
        "lr_find": args.to_dict(),
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


def _result_facts(result: LRRangeResult) -> dict[str, Any]:
    facts = {name: getattr(result, name) for name in ("suggestion", "peak_lr", "rule", "stopped")}
    return {**facts, "steps": len(result.lrs)}
