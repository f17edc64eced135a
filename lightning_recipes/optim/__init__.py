"""Optimizers, weight-decay groups, warmup schedules and LR scaling.

Example:
    >>> import torch
    >>> from lightning_recipes.optim import Lion, param_groups
    >>> optimizer = Lion(param_groups(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4)), 0.1))
    >>> [g["name"] for g in optimizer.param_groups]
    ['decay', 'no_decay']
"""

from lightning_recipes.optim.build import build_optimizer, build_scheduler
from lightning_recipes.optim.lamb import Lamb, lamb_update_
from lightning_recipes.optim.lion import Lion, lion_update_
from lightning_recipes.optim.param_groups import NORM_LAYERS, layer_depths, param_groups
from lightning_recipes.optim.scaling import scale_lr
from lightning_recipes.optim.schedules import (
    warmup_constant,
    warmup_constant_multiplier,
    warmup_cosine,
    warmup_cosine_multiplier,
    warmup_linear,
    warmup_linear_multiplier,
    warmup_stable_decay,
    warmup_stable_decay_multiplier,
)

__all__ = [
    "NORM_LAYERS",
    "Lamb",
    "Lion",
    "build_optimizer",
    "build_scheduler",
    "lamb_update_",
    "layer_depths",
    "lion_update_",
    "param_groups",
    "scale_lr",
    "warmup_constant",
    "warmup_constant_multiplier",
    "warmup_cosine",
    "warmup_cosine_multiplier",
    "warmup_linear",
    "warmup_linear_multiplier",
    "warmup_stable_decay",
    "warmup_stable_decay_multiplier",
]
