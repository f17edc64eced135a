"""DeepSpeed configs that never contradict the Trainer: batch size, accumulation, clipping and precision from
it."""

from __future__ import annotations

import copy
import importlib.util
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "DEEPSPEED_INSTALL_HINT",
    "deepspeed_available",
    "reconcile_deepspeed_config",
    "require_deepspeed",
    "validate_deepspeed_config",
]

#: The message given when a DeepSpeed preset is asked for and ``deepspeed`` is not installed.
DEEPSPEED_INSTALL_HINT = (
    "DeepSpeed is not installed. Install it with `pip install 'lightning-recipes[deepspeed]'`"
    " (or `pip install deepspeed`), or pick a preset that needs no extra package: `recipes_ddp`,"
    " `recipes_fsdp_full_shard`, `recipes_fsdp2`."
)


def deepspeed_available() -> bool:
    """Whether DeepSpeed can be imported here (checked without importing it, which is slow).

    Example:
        >>> isinstance(deepspeed_available(), bool)
        True
    """
    if "deepspeed" in sys.modules:
        return sys.modules["deepspeed"] is not None
    return importlib.util.find_spec("deepspeed") is not None


def require_deepspeed() -> None:
    """Raise a clear install hint when DeepSpeed cannot be imported.

    Raises:
        ModuleNotFoundError: With :data:`DEEPSPEED_INSTALL_HINT`.
    """
    try:
        import deepspeed  # noqa: F401
    except ImportError as err:
        raise ModuleNotFoundError(DEEPSPEED_INSTALL_HINT) from err


def reconcile_deepspeed_config(
    config: Mapping[str, Any],
    *,
    micro_batch_size: int,
    accumulate_grad_batches: int,
    world_size: int,
    gradient_clip_val: float | None,
    gradient_clip_algorithm: str | None,
    precision: str,
) -> dict[str, Any]:
    """A copy of ``config`` whose batch, clipping and precision entries agree with the Trainer (missing ones
    filled, contradicting ones refused); ``gradient_accumulation_steps`` is dropped (Lightning sets it).

    Example:
        >>> cfg = reconcile_deepspeed_config(
        ...     {"zero_optimization": {"stage": 2}, "gradient_accumulation_steps": 4},
        ...     micro_batch_size=8, accumulate_grad_batches=4, world_size=2,
        ...     gradient_clip_val=1.0, gradient_clip_algorithm="norm", precision="bf16-mixed")
        >>> cfg["train_batch_size"], cfg["gradient_clipping"], cfg["bf16"]
        (64, 1.0, {'enabled': True})
        >>> "gradient_accumulation_steps" in cfg  # Lightning sets it
        False
    """
    cfg = copy.deepcopy(dict(config))
    clip = float(gradient_clip_val or 0.0)
    train_batch_size = micro_batch_size * accumulate_grad_batches * world_size
    product = (
        f"micro batch {micro_batch_size} x accumulation {accumulate_grad_batches} x world size {world_size}"
    )
    expected = {
        "train_micro_batch_size_per_gpu": (micro_batch_size, "the training DataLoader's batch size"),
        "gradient_accumulation_steps": (accumulate_grad_batches, "Trainer(accumulate_grad_batches=...)"),
        "train_batch_size": (train_batch_size, product),
        "gradient_clipping": (clip, "Trainer(gradient_clip_val=...)"),
    }
    for key, (value, source) in expected.items():
        if key in cfg and cfg[key] != value:
            raise ValueError(
                f"The DeepSpeed config sets `{key}={cfg[key]!r}` but the Trainer implies {value!r} "
                f"({source}). Remove `{key}` from the DeepSpeed config: the preset takes it from the Trainer."
            )
        cfg[key] = value
    del cfg["gradient_accumulation_steps"]
    if clip > 0 and gradient_clip_algorithm not in (None, "norm"):
        raise ValueError(
            f"DeepSpeed clips gradients by norm only, but the Trainer has"
            f" `gradient_clip_algorithm={gradient_clip_algorithm!r}`. Use `gradient_clip_algorithm='norm'`."
        )
    _reconcile_precision(cfg, precision)
    return cfg


def validate_deepspeed_config(config: Mapping[str, Any]) -> None:
    """Validate ``config`` with DeepSpeed's own ``DeepSpeedConfig`` for one process (``ValueError``)."""
    require_deepspeed()
    from deepspeed.runtime.config import DeepSpeedConfig

    cfg = copy.deepcopy(dict(config))
    micro = int(cfg.get("train_micro_batch_size_per_gpu", 1))
    accumulation = int(cfg.get("gradient_accumulation_steps", 1))
    cfg.update(
        train_micro_batch_size_per_gpu=micro,
        gradient_accumulation_steps=accumulation,
        train_batch_size=micro * accumulation,
    )
    try:
        DeepSpeedConfig(cfg, mpu=_WorldOfOne())
    except (ValueError, AssertionError, TypeError, KeyError) as err:
        raise ValueError(f"DeepSpeed rejects the config: {err}") from err


def _reconcile_precision(cfg: dict[str, Any], precision: str) -> None:
    wanted = "fp16" if precision.startswith("16") else "bf16" if precision.startswith("bf16") else None
    for section in ("fp16", "bf16"):
        value = cfg.get(section)
        enabled = value.get("enabled", False) if isinstance(value, dict) else None
        if (section != wanted and enabled) or (section == wanted and enabled is False):
            raise ValueError(
                f"The DeepSpeed config {'disables' if section == wanted else 'enables'} `{section}` but the "
                f"Trainer has `precision={precision!r}`. Remove the `{section}` section: the preset takes "
                "precision from the Trainer."
            )
    if wanted == "bf16":  # fp16 is left to Lightning, which adds its loss-scaling settings
        cfg[wanted] = {**cfg.get(wanted, {}), "enabled": True}


class _WorldOfOne:
    """A model-parallel unit stub: makes ``DeepSpeedConfig`` check the batch arithmetic for one process."""

    def get_data_parallel_world_size(self) -> int:
        return 1
