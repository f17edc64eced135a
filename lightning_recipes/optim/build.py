"""Factories from names to optimizers and schedulers (what the recipe mixins and the CLI configure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LambdaLR

from lightning_recipes._validation import check_choice
from lightning_recipes.optim._common import Implementation
from lightning_recipes.optim.lamb import Lamb
from lightning_recipes.optim.lion import Lion
from lightning_recipes.optim.names import OPTIMIZERS, RECIPE_OPTIMIZERS, SCHEDULES
from lightning_recipes.optim.schedules import (
    warmup_constant,
    warmup_cosine,
    warmup_linear,
    warmup_stable_decay,
)

__all__ = ["build_optimizer", "build_scheduler"]


def build_optimizer(
    name: str,
    params: Iterable[Any],
    *,
    lr: float,
    weight_decay: float,
    betas: tuple[float, float],
    eps: float | None = None,
    implementation: Implementation = "auto",
) -> Optimizer:
    """``"adamw"`` (fused where it can be), ``"lion"`` or ``"lamb"``; ``eps=None``: the name's default. A
    group with ``"lr_scale"`` and no ``"lr"`` gets ``lr * lr_scale``.

    Example:
        >>> import torch
        >>> opt = build_optimizer("adamw", torch.nn.Linear(2, 2).parameters(), lr=1e-3, weight_decay=0.0,
        ...                       betas=(0.9, 0.999))
        >>> type(opt).__name__, opt.defaults["fused"]
        ('AdamW', True)
        >>> groups = [{"params": [torch.nn.Parameter(torch.zeros(2))], "lr_scale": 0.5}]
        >>> build_optimizer("lion", groups, lr=1e-3, weight_decay=0, betas=(0.9, 0.99)).param_groups[0]["lr"]
        0.0005
    """
    check_choice("optimizer", name, RECIPE_OPTIMIZERS)
    params = [
        {**p, "lr": lr * p["lr_scale"]} if isinstance(p, dict) and "lr_scale" in p and "lr" not in p else p
        for p in params
    ]
    betas = tuple(betas)  # type: ignore[assignment]
    if eps is None:
        eps = OPTIMIZERS[name].defaults["eps"]
    if name == "adamw":
        try:
            return torch.optim.AdamW(
                params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, fused=True
            )
        except RuntimeError:  # a device or dtype without a fused kernel: torch's default path
            return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
    if name == "lion":
        return Lion(params, lr=lr, betas=betas, weight_decay=weight_decay, implementation=implementation)
    if name == "lamb":
        return Lamb(
            params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, implementation=implementation
        )
    raise AssertionError(f"`{name}` is in RECIPE_OPTIMIZERS but build_optimizer has no branch for it.")


def build_scheduler(
    name: str,
    optimizer: Optimizer,
    *,
    warmup_steps: int | float | None = None,
    total_steps: int,
    min_lr_ratio: float = 0.0,
    warmup_ratio: float | None = None,
) -> LambdaLR | None:
    """The named warmup schedule over ``total_steps`` (``None`` for ``"none"``); step it every optimizer step.

    Example:
        >>> import torch
        >>> opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
        >>> build_scheduler("wsd", opt, warmup_ratio=0.1, total_steps=100).lr_lambdas[0](50)
        1.0
    """
    check_choice("schedule", name, SCHEDULES)
    if name == "none":
        return None
    if name == "constant":  # no decay, so no floor
        return warmup_constant(optimizer, warmup_steps, total_steps, warmup_ratio=warmup_ratio)
    factory: Callable[..., LambdaLR] = {"cosine": warmup_cosine, "linear": warmup_linear}.get(
        name, warmup_stable_decay
    )
    return factory(optimizer, warmup_steps, total_steps, warmup_ratio=warmup_ratio, min_lr_ratio=min_lr_ratio)
