"""``OptimizerRecipe``: the optimizer + schedule configuration the recipe mixins read (LightningCLI-ready)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from lightning_recipes._blocks import resolve_block_classes
from lightning_recipes._checkpoint import register_plain_type
from lightning_recipes._validation import (
    check_betas,
    check_choice,
    check_in_range,
    check_int,
    check_non_negative,
    check_positive,
)
from lightning_recipes.optim.names import (
    OPTIMIZERS,
    RECIPE_OPTIMIZERS,
    SCHEDULES,
    OptimizerName,
    ScheduleName,
    check_implementation,
)
from lightning_recipes.optim.param_groups import check_layer_decay, check_lr_scale
from lightning_recipes.optim.schedules import warmup_fields
from lightning_recipes.sweep_args import SweepArgs

__all__ = ["FIND", "OPTIMIZER_DEFAULTS", "SCHEDULE_DEFAULTS", "OptimizerRecipe"]

#: Per-optimizer defaults, read from :data:`lightning_recipes.optim.names.OPTIMIZERS` (the one table).
OPTIMIZER_DEFAULTS: dict[str, dict[str, Any]] = {
    name: dict(OPTIMIZERS[name].defaults) for name in RECIPE_OPTIMIZERS
}
#: Defaults of the fields that do not depend on the optimizer (no ``warmup_steps``: ``warmup_ratio`` 0.05).
SCHEDULE_DEFAULTS: dict[str, Any] = {
    "warmup_steps": None,
    "warmup_ratio": 0.05,
    "schedule": "cosine",
    "min_lr_ratio": 0.0,
    "scale_lr": None,
    "base_batch_size": None,
    "batch_size": None,
    "implementation": "auto",
    "layer_decay": None,
    "lr_scale": None,
    "block_classes": None,
    "lr_find": None,
}
#: The value of ``lr`` that runs the LR range test at the start of ``fit`` (see :class:`OptimizerRecipe`).
FIND = "find"
_SCALE_RULES = ("linear", "sqrt")


@dataclass(frozen=True)
class OptimizerRecipe:
    """What the recipe mixins build in ``configure_optimizers``; a field left ``None`` falls back to the
    module's ``hparams`` key of that name, then to the optimizer's default (``OPTIMIZER_DEFAULTS``). A
    LightningCLI argument, saved to ``hparams.yaml`` as a mapping (:meth:`to_dict`); checked at construction.

    Fields: ``optimizer`` (``"adamw"``, ``"lion"``, ``"lamb"``); ``lr`` (peak, > 0, or ``"find"``: the LR
    range test at fit start, run with ``lr_find``, keys of :class:`~lightning_recipes.sweep_args.SweepArgs`);
    ``weight_decay`` (biases, norms and embeddings never decay); ``betas``; ``eps``; ``warmup_steps`` (an int;
    a float fraction is deprecated) or ``warmup_ratio`` (default 0.05); ``schedule`` (``"cosine"``,
    ``"linear"``, ``"constant"``, ``"wsd"``, ``"none"``) down to ``min_lr_ratio``; ``scale_lr`` (``"linear"``,
    ``"sqrt"``) from ``base_batch_size`` to the global batch (per-device ``batch_size``, default read from the
    loader); ``implementation`` (Lion/Lamb); ``layer_decay`` (BEiT's layer-wise decay over
    :func:`~lightning_recipes.optim.layer_depths`, blocks ``block_classes``); ``lr_scale`` (``{"backbone":
    0.1}``: factors by module path or regex). Details: ``docs/guides/optimizers.md``.

    Example:
        >>> OptimizerRecipe(optimizer="lion", lr=3e-4).optimizer
        'lion'
        >>> OptimizerRecipe(optimizer="sgd")
        Traceback (most recent call last):
        ...
        ValueError: `optimizer` must be one of ('adamw', 'lion', 'lamb'), got 'sgd'.
        >>> OptimizerRecipe(optimizer="lion", warmup_ratio=0.1, betas=(0.9, 0.99)).to_dict()["betas"]
        [0.9, 0.99]
    """

    optimizer: OptimizerName | None = None
    lr: float | Literal["find"] | None = None
    weight_decay: float | None = None
    betas: tuple[float, float] | None = None
    eps: float | None = None
    warmup_steps: int | float | None = None
    warmup_ratio: float | None = None
    schedule: ScheduleName | None = None
    min_lr_ratio: float | None = None
    scale_lr: Literal["linear", "sqrt"] | None = None
    base_batch_size: int | None = None
    batch_size: int | None = None
    implementation: Literal["auto", "for_loop", "foreach", "compiled", "native"] | None = None
    layer_decay: float | None = None
    lr_scale: dict[str, float] | None = None
    block_classes: str | list[str] | None = None
    lr_find: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.betas, list):
            object.__setattr__(self, "betas", tuple(self.betas))
        for name, check in (("lr_scale", check_lr_scale), ("lr_find", check_lr_find)):
            value = getattr(self, name)
            if value is not None and not isinstance(value, dict):  # a Mapping: checked, then stored as a dict
                check(value)
                object.__setattr__(self, name, dict(value))
        steps, ratio = warmup_fields(self.warmup_steps, self.warmup_ratio, stacklevel=4)
        object.__setattr__(self, "warmup_steps", steps)
        object.__setattr__(self, "warmup_ratio", ratio)
        check_fields(self)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @property
    def sweep_args(self) -> SweepArgs | None:
        """``lr_find`` as the checked :class:`~lightning_recipes.sweep_args.SweepArgs` (``None`` when unset).

        Example:
            >>> OptimizerRecipe(lr="find", lr_find={"num_steps": 50}).sweep_args.num_steps
            50
        """
        if self.lr_find is None:
            return None
        kept = self.__dict__.get("_sweep_args")
        # rebuilt if `lr_find` was changed in place (or unpickled from a version that kept no record)
        if kept is None or kept[0] != self.lr_find:
            kept = (dict(self.lr_find), check_lr_find(self.lr_find))
            object.__setattr__(self, "_sweep_args", kept)
        record: SweepArgs = kept[1]
        return record

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain data (``betas`` a list): what ``hparams.yaml`` stores and the mixins accept."""
        data = dataclasses.asdict(self)
        if data["betas"] is not None:
            data["betas"] = list(data["betas"])
        return data


def check_fields(values: Any) -> None:
    """Check every recipe field set on ``values`` (an ``OptimizerRecipe`` or any object with its attributes),
    naming the field, the value and what is allowed.

    Example:
        >>> check_fields(OptimizerRecipe())  # all unset: nothing to check
    """
    checks: dict[str, Any] = {
        "optimizer": lambda v: check_choice("optimizer", v, RECIPE_OPTIMIZERS),
        "lr": _check_lr,
        "weight_decay": lambda v: check_non_negative("weight_decay", v),
        "betas": check_betas,
        "eps": lambda v: check_positive("eps", v),
        "schedule": lambda v: check_choice("schedule", v, SCHEDULES),
        "min_lr_ratio": lambda v: check_in_range("min_lr_ratio", v, 0.0, 1.0),
        "scale_lr": lambda v: check_choice("scale_lr", v, _SCALE_RULES),
        "base_batch_size": lambda v: check_int("base_batch_size", v, minimum=1),
        "batch_size": lambda v: check_int("batch_size", v, minimum=1),
        "implementation": check_implementation,
        "layer_decay": check_layer_decay,
        "lr_scale": check_lr_scale,
        "block_classes": _check_block_classes,
        "lr_find": check_lr_find,
    }
    for name, check in checks.items():
        value = values.sweep_args if name == "lr_find" and isinstance(values, OptimizerRecipe) else None
        value = getattr(values, name, None) if value is None else value
        if value is not None:
            check(value)
    lr = getattr(values, "lr", None)
    if lr == FIND and getattr(values, "scale_lr", None) is not None:
        raise ValueError(
            f"`scale_lr={values.scale_lr!r}` cannot be combined with `lr='find'`: the LR range test already "
            "runs at the run's global batch (per-device batch x devices x nodes x accumulation). Drop "
            "`scale_lr`."
        )
    if getattr(values, "lr_find", None) is not None and lr is not None and lr != FIND:
        raise ValueError(
            f"`lr_find` sets the arguments of the LR range test that `lr='find'` runs, but `lr` is {lr!r}. "
            "Set `lr='find'` or drop `lr_find`."
        )


def _check_lr(value: Any) -> None:
    if value == FIND and isinstance(value, str):
        return
    try:
        check_positive("lr", value)
    except ValueError as err:
        raise ValueError(f"{err} Or set `lr='find'` to run an LR range test at the start of fit.") from None


def check_lr_find(value: Any) -> SweepArgs:
    """``value`` (a ``SweepArgs``, or a mapping of some of its fields) as a checked ``SweepArgs``."""
    if isinstance(value, SweepArgs):
        return value
    try:
        return SweepArgs.from_mapping(value, "lr_find")
    except ValueError as err:
        message = str(err)
        raise ValueError(message if message.startswith("`lr_find`") else f"`lr_find`: {message}") from None


def _check_block_classes(value: Any) -> None:
    if not isinstance(value, (str, list, tuple)) or (not isinstance(value, str) and not value):
        raise ValueError(f"`block_classes` must be an import path or a list of them, got {value!r}.")
    if not isinstance(value, str) and not all(isinstance(v, str) for v in value):
        raise ValueError(f"`block_classes` must hold import paths (strings), got {value!r}.")
    resolve_block_classes(value)  # imports them: a typo fails here, not at fit


register_plain_type(OptimizerRecipe)  # a dict in checkpoints, a mapping in hparams.yaml
