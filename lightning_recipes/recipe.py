"""``OptimizerRecipe``: the optimizer + schedule configuration the recipe mixins read (LightningCLI-friendly)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

import torch

__all__ = ["OPTIMIZER_DEFAULTS", "OptimizerRecipe"]

OptimizerName = Literal["adamw", "lion", "lamb"]
ScheduleName = Literal["cosine", "linear", "constant", "wsd", "none"]

# Per-optimizer defaults. Lion's lr is 10x lower and its weight decay 10x higher than AdamW's, keeping the
# effective decay lr * weight_decay equal (Chen et al. 2023, section 5: "3-10x smaller learning rate ...
# larger decoupled weight decay"). Lamb's are You et al.'s / NVIDIA's BERT values.
OPTIMIZER_DEFAULTS: dict[str, dict[str, Any]] = {
    "adamw": {"lr": 1e-3, "weight_decay": 0.05, "betas": (0.9, 0.999), "eps": 1e-8},
    "lion": {"lr": 1e-4, "weight_decay": 0.5, "betas": (0.9, 0.99), "eps": None},
    "lamb": {"lr": 1e-3, "weight_decay": 0.01, "betas": (0.9, 0.999), "eps": 1e-6},
}
SCHEDULE_DEFAULTS: dict[str, Any] = {
    "warmup_steps": 0.05,
    "schedule": "cosine",
    "min_lr_ratio": 0.0,
    "scale_lr": None,
    "base_batch_size": None,
    "batch_size": None,
    "implementation": "auto",
}
_OPTIMIZERS = tuple(OPTIMIZER_DEFAULTS)
_SCHEDULES = ("cosine", "linear", "constant", "wsd", "none")


@dataclass(frozen=True)
class OptimizerRecipe:
    """What the recipe mixins build in ``configure_optimizers``. Every field left ``None`` falls back to the
    module's ``hparams`` key of the same name, then to the optimizer's default (``OPTIMIZER_DEFAULTS``).

    Works as a LightningCLI argument: give your module an ``__init__(..., recipe: OptimizerRecipe | None = None)``
    and set ``model.init_args.recipe.optimizer: lion`` in YAML.

    Args:
        optimizer: ``"adamw"`` (``torch.optim.AdamW``, fused where supported), ``"lion"`` or ``"lamb"``.
        lr: Peak learning rate (before batch-size scaling).
        weight_decay: Weight decay of the ``"decay"`` group (biases, norms and embeddings never decay).
        betas: ``(beta1, beta2)``.
        eps: Denominator term (AdamW, Lamb; Lion has none).
        warmup_steps: Linear warmup: steps (int) or a fraction of the total steps (float in (0, 1)).
        schedule: ``"cosine"`` (warmup-cosine), ``"linear"``, ``"constant"`` (after warmup), ``"wsd"``
            (warmup-stable-decay, cooldown over the last 20%) or ``"none"``.
        min_lr_ratio: Final LR as a fraction of the peak (cosine, linear, wsd).
        scale_lr: ``None`` (no scaling), ``"linear"`` or ``"sqrt"``: scale ``lr`` from ``base_batch_size`` to
            the run's global batch (per-device batch x devices x nodes x accumulation).
        base_batch_size: The global batch size ``lr`` was tuned at (required with ``scale_lr``).
        batch_size: Per-device batch size; ``None`` reads it from the training ``DataLoader``.
        implementation: Lion/Lamb implementation (``"auto"``, ``"for_loop"``, ``"foreach"``, ``"compiled"``,
            ``"native"``).

    Raises:
        ValueError: If ``optimizer`` or ``schedule`` is unknown (other values are checked when used).

    Example:
        >>> OptimizerRecipe(optimizer="lion", lr=3e-4).optimizer
        'lion'
        >>> OptimizerRecipe(optimizer="sgd")
        Traceback (most recent call last):
        ...
        ValueError: `optimizer` must be one of ('adamw', 'lion', 'lamb'), got 'sgd'.
    """

    optimizer: OptimizerName | None = None
    lr: float | None = None
    weight_decay: float | None = None
    betas: tuple[float, float] | None = None
    eps: float | None = None
    warmup_steps: int | float | None = None
    schedule: ScheduleName | None = None
    min_lr_ratio: float | None = None
    scale_lr: Literal["linear", "sqrt"] | None = None
    base_batch_size: int | None = None
    batch_size: int | None = None
    implementation: Literal["auto", "for_loop", "foreach", "compiled", "native"] | None = None

    def __post_init__(self) -> None:
        if self.optimizer is not None and self.optimizer not in _OPTIMIZERS:
            raise ValueError(f"`optimizer` must be one of {_OPTIMIZERS}, got {self.optimizer!r}.")
        if self.schedule is not None and self.schedule not in _SCHEDULES:
            raise ValueError(f"`schedule` must be one of {_SCHEDULES}, got {self.schedule!r}.")
        if isinstance(self.betas, list):
            object.__setattr__(self, "betas", tuple(self.betas))

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))


# A recipe saved by `save_hyperparameters()` lands in every checkpoint; allow it under torch.load's default
# `weights_only=True` (it holds only numbers and strings), so resuming with `ckpt_path` works.
torch.serialization.add_safe_globals([OptimizerRecipe])
